# tests/python/test_api_errors.py -- the public API on machines where it cannot measure anything
#
# These run where torch has no GPU (CI): each failure must be one clear line, and importing
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
@pytest.mark.parametrize("name", READERS + ["empty_cache", "last_oom", "attach"])
def test_no_gpu_is_one_line_runtime_error(name):
    with pytest.raises(RuntimeError) as info:
        getattr(vramscope, name)()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vramscope: ")
    assert "no CUDA GPU" in message or "no CUDA support" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_monitor_without_gpu_raises_on_enter():
    with pytest.raises(RuntimeError, match="vramscope: no CUDA"):
        with vramscope.Monitor():
            pass


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
        try:
            vramscope.memory_reserved(0)
        except RuntimeError as e:
            print(e)
    """)
    out = run_python(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (f"vramscope: this PyTorch build ({torch.__version__}) has no "
                                  "CUDA support; install a CUDA build of torch")


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
