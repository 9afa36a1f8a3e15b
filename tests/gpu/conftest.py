# tests/gpu/conftest.py -- GPU-only tests: skipped without CUDA; fresh processes with a safe env
#
# Run on a GPU machine with vramscope installed (pip install --no-build-isolation .):
#   pytest tests/gpu            (1 GPU: multi-GPU and DDP tests skip; 2 GPUs: all run)
#   VRAMSCOPE_CLI=/path/vramscope pytest tests/gpu   (adds the CLI/NVML join test)
from __future__ import annotations

import os
import pathlib
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


def pytest_collection_modifyitems(config, items):
    if NO_GPU_REASON is not None:
        for item in items:
            item.add_marker(pytest.mark.skip(reason=NO_GPU_REASON))


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
