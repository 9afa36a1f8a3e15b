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


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


needs_two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs")
