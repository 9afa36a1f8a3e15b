# tests/python/test_api_errors.py -- the public API on machines where it cannot measure anything
#
# These run where torch has no GPU (CI): the readers answer like torch.cuda there (zeros, {}),
# Monitor is a quiet no-op with one warning, attach() fails in one clear line, and importing
# vramscope must not import torch.
import sys
import textwrap

import pytest
import torch

import vramscope

from conftest import run_python

READERS = ["memory_allocated", "memory_reserved", "memory_requested", "max_memory_allocated",
           "max_memory_reserved", "max_memory_requested", "memory_stats", "reset_peak"]


def test_import_does_not_import_torch():
    out = run_python(["-c", "import sys, vramscope; print('torch' in sys.modules)"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_public_names():
    for name in vramscope.__all__:
        assert hasattr(vramscope, name), name
    assert vramscope.mode() in ("detached", "pending", "events") or vramscope.mode().startswith(
        "polling: ")
    assert isinstance(vramscope.__version__, str) and vramscope.__version__


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_without_a_gpu_the_readers_answer_like_torch_cuda():
    # torch.cuda.memory_allocated() is 0 on a CPU-only machine; a script instrumented with
    # vramscope's readers must run there too.
    code = textwrap.dedent("""
        import warnings
        warnings.simplefilter("error")
        import torch, vramscope
        print(torch.cuda.memory_allocated(), vramscope.memory_allocated(),
              vramscope.memory_reserved(0), vramscope.memory_requested("cuda:0"),
              vramscope.max_memory_allocated(), vramscope.max_memory_reserved(),
              vramscope.max_memory_requested(), vramscope.empty_cache())
        print(dict(torch.cuda.memory_stats()), vramscope.memory_stats(), vramscope.reset_peak(),
              vramscope.last_oom(), vramscope.device_count())
    """)
    out = run_python(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["0 0 0 0 0 0 0 0", "{} {} None None 0"]
    assert out.stderr == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_without_a_gpu_a_bad_device_argument_still_raises():
    with pytest.raises((ValueError, TypeError)):
        vramscope.memory_allocated("cpu:x")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_attach_without_a_gpu_is_one_line_runtime_error():
    with pytest.raises(RuntimeError) as info:
        vramscope.attach()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vramscope: ")
    assert "no CUDA GPU" in message or "no CUDA support" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_monitor_without_gpu_is_a_quiet_no_op_with_one_warning():
    code = textwrap.dedent("""
        import warnings
        import torch, vramscope
        lines = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for epoch in range(2):
                with vramscope.Monitor(every=1, auto_step=True, print_fn=lines.append) as mon:
                    model = torch.nn.Linear(4, 4)
                    opt = torch.optim.SGD(model.parameters(), lr=0.1)
                    model(torch.ones(2, 4)).sum().backward()
                    opt.step()
                    print(mon.step(), mon.history)
        print(lines)
        for w in caught:
            print(type(w.message).__name__, w.message)
    """)
    out = run_python(["-c", code])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().split("\n")
    assert lines[:3] == ["[] []", "[] []", "[]"]
    assert lines[3:] == ["VramscopeWarning vramscope: no CUDA GPU is visible to PyTorch "
                         "(torch.cuda.is_available() is False); Monitor records nothing (the "
                         "program runs as it is)"]


def test_torch_missing_is_one_line_import_error():
    code = textwrap.dedent("""
        import sys
        sys.modules['torch'] = None  # makes `import torch` fail like an absent package
        import vramscope
        try:
            vramscope.memory_allocated()
        except ImportError as e:
            print(e)
    """)
    out = run_python(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "vramscope's agent needs PyTorch: pip install torch"


def test_torch_without_cuda_is_one_line_runtime_error():
    code = textwrap.dedent("""
        import torch
        torch.version.cuda = None  # what a CPU-only build of torch reports
        import vramscope
        print(vramscope.memory_reserved(0))  # like torch.cuda.memory_reserved(0): 0
        try:
            vramscope.attach()
        except RuntimeError as e:
            print(e)
    """)
    out = run_python(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (f"0\nvramscope: this PyTorch build ({torch.__version__}) has "
                                  "no CUDA support; install a CUDA build of torch")


@pytest.mark.parametrize("kwargs, text", [
    ({"every": -1}, "every must be >= 0"),
    ({"exit_table_rows": -1}, "exit_table_rows"),
    ({"leak_steps": 0}, "leak_steps"),
    ({"leak_threshold_bytes": -1}, "leak_threshold_bytes"),
    ({"history_limit": 0}, "history_limit"),
])
def test_monitor_rejects_bad_settings(kwargs, text):
    with pytest.raises(ValueError, match=text):
        vramscope.Monitor(**kwargs)


def test_attach_rejects_bad_interval():
    with pytest.raises(ValueError, match="interval_ms must be positive"):
        vramscope.attach(interval_ms=0)


def test_stderr_has_no_noise_on_import():
    out = run_python(["-W", "error", "-c", "import vramscope"])
    assert out.returncode == 0 and out.stderr == ""
    assert sys.modules["vramscope"] is vramscope
