# tests/gpu/conftest.py -- GPU-only tests: skipped without CUDA; fresh processes with a safe env
#
# Run on a GPU machine with vramscope installed (the wheel, or pip install --no-build-isolation .):
#   pytest tests/gpu            the main group, within 8 minutes on one H200 (1 GPU: multi-GPU
#                               and DDP tests skip; 2 GPUs: all run)
#   pytest tests/gpu -m slow    the slow group on its own: fit's bisections in fresh processes,
#                               the OOM programs with their advice applied, the step peaks under
#                               the allocator's variants (expandable segments, CUDA graphs)
# The CLI is $VRAMSCOPE_CLI, else the `vramscope` installed beside this Python or on PATH.
from __future__ import annotations

import gc
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parent

#: Why nothing here can run, or None: every test is then collected and reported skipped with
#: this reason (not left out, which pytest reports as "no tests ran" with no reason at all).
NO_GPU_REASON = (None if torch.cuda.is_available()
                 else "needs a CUDA GPU (torch.cuda.is_available() is False here)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow group (pytest tests/gpu -m slow): fit's "
                            "bisections, the OOM programs, the step peaks' allocator variants; "
                            "left out of `pytest tests/gpu`")


def pytest_collection_modifyitems(config, items):
    if NO_GPU_REASON is not None:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=NO_GPU_REASON))
        return
    if "slow" not in (config.getoption("markexpr") or ""):
        # The main group fits one 10-minute GPU run; the slow group runs on its own.
        kept = [item for item in items if item.get_closest_marker("slow") is None]
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def cli_path() -> str | None:
    """The vramscope binary: $VRAMSCOPE_CLI, else the one installed beside this Python (the
    wheel's), else on PATH; None when there is none."""
    named = os.environ.get("VRAMSCOPE_CLI")
    if named:
        return named
    beside = pathlib.Path(sys.executable).parent / "vramscope"
    if beside.is_file():
        return str(beside)
    return shutil.which("vramscope")


#: The binary, for the tests that run it (they skip with this reason without one).
CLI = cli_path()
NO_CLI = "no vramscope binary: install the wheel, or set VRAMSCOPE_CLI"


@pytest.fixture(autouse=True)
def no_leftovers():
    """Each test leaves pytest's own process holding no GPU memory (a tensor kept by a test
    would stand on the card under every later test's numbers)."""
    yield
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        # cuBLAS keeps its workspaces (from the allocator) per handle: not a test's leftover.
        torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
        held = torch.cuda.memory_reserved()
        assert held == 0, f"the test left {held} bytes reserved in pytest's process"


def gpu_env(**extra: str) -> dict:
    """Environment for every process these tests start (NVLink multicast stays off)."""
    import vramscope

    env = dict(os.environ)
    root = str(pathlib.Path(vramscope.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["NCCL_NVLS_ENABLE"] = "0"
    env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.update(extra)
    return env


def run_scenario(name: str, *args: str, **env: str) -> str:
    """Runs workload.py SCENARIO in a fresh process; returns the text after "ok"."""
    out = subprocess.run([sys.executable, str(HERE / "workload.py"), name, *args],
                         env=gpu_env(**env), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{name} failed:\n{out.stdout}\n{out.stderr}"
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("ok"), out.stdout
    return last[2:].strip()


def other_compute_processes() -> list:
    """"PID, MiB" of every compute process but this one that nvidia-smi lists on the card
    (empty without nvidia-smi: nothing to wait for that this test can see)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return [row for row in rows if row.split(",")[0].strip() != str(os.getpid())]


def wait_for_idle_card(deadline_s: float = 60.0) -> None:
    """Returns once no compute process holds the card; fails the test with their list after
    `deadline_s`. A process that an earlier test waited for can still hold its memory for a
    moment while the driver tears its context down (an OOM test leaves the card full), and a
    run that starts then meets failing cudaMallocs: torch frees its cache and retries, and its
    blocks no longer match another run's."""
    give_up = time.monotonic() + deadline_s
    while (busy := other_compute_processes()):
        if time.monotonic() > give_up:
            pytest.fail(f"the card stayed busy for {deadline_s:.0f} s: pid, MiB = {busy}")
        time.sleep(0.2)  # polls a condition, with a deadline


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


needs_two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs")
