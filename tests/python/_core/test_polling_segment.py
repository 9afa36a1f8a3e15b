# tests/python/_core/test_polling_segment.py -- a polling process publishes its polls: top, the table and JSON say so
#
# A child Python whose torch has no library in this vramscope and no compiler to build one (the
# session's real fallback, as on the GPU machine of issue 43) polls scripted counters; the built
# CLI, sampling the NVML test double, must show that process's numbers marked sampled, with the
# reason and its fix, where they are shown: top, the table, JSON, a recording's replay and show.
# Needs the built binary and NVML double ($VRAMSCOPE_CLI / $VRAMSCOPE_BUILD_DIR,
# tests/python/_exporter_paths.py) and the extension.
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _exporter_paths import cli_binary, double_env, nvml_double
from conftest import child_env

GIB = 1 << 30
# GPU 0 of tests/data/nvml/two_gpus.json, as torch prints a device's uuid (without "GPU-").
UUID = "5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00"

# The child: a CPU torch answering as a one-GPU CUDA torch would, from counters it moves itself;
# vramscope attaches as it would on a GPU machine. It uses 3 GiB in step 1, then 1 GiB.
CHILD = f"""
import os, sys, types
import torch
# This vramscope carries no library for this torch, and PATH has no compiler: polling.
sys.modules["vramscope._build_info"] = types.SimpleNamespace(TORCH_LIBRARIES={{}},
                                                             BENCH_HOOKS=False)
stats = {{"allocated_bytes.all.current": 0, "reserved_bytes.all.current": 0,
          "requested_bytes.all.current": 0, "active_bytes.all.current": 0,
          "inactive_split_bytes.all.current": 0, "num_ooms": 2}}
torch.version.cuda = "13.0"
torch.cuda.is_available = lambda: True
torch.cuda.is_initialized = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.memory_stats = lambda device=None: dict(stats)
torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(uuid="{UUID}")
torch._C._cuda_getDevice = lambda: 0

import vramscope
from vramscope._core.session import SESSION

def use(allocated, reserved):
    stats["allocated_bytes.all.current"] = allocated
    stats["requested_bytes.all.current"] = allocated
    stats["active_bytes.all.current"] = allocated
    stats["reserved_bytes.all.current"] = reserved
    vramscope.memory_allocated()

print(vramscope.attach(), flush=True)
use(3 * {GIB}, 4 * {GIB})
SESSION.step_all()
use(1 * {GIB}, 4 * {GIB})
print("ready", os.getpid(), flush=True)
sys.stdin.read()
"""


def polling_child(tmp_path, shm) -> tuple[subprocess.Popen, str, int]:
    """Starts the child; returns it, the reason its mode gave and its pid."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = child_env(VRAMSCOPE_SHM_DIR=str(shm), VRAMSCOPE_CACHE_DIR=str(tmp_path / "cache"),
                    PATH=str(empty))
    env.pop("CXX", None)
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    mode = child.stdout.readline().strip()
    ready = child.stdout.readline().split()
    if ready[:1] != ["ready"]:
        child.kill()
        pytest.fail(f"the child did not start: {mode!r} {ready!r} {child.stderr.read()!r}")
    assert mode.startswith("polling: "), mode
    return child, mode.removeprefix("polling: "), int(ready[1])


def one_text(output: str) -> str:
    """`output` with its lines joined by one space (a wrapped line reads as it was written)."""
    return " ".join(line.strip() for line in output.splitlines())


def test_a_polling_process_is_shown_marked_with_its_reason_and_fix(tmp_path):
    if cli_binary() is None or nvml_double() is None:
        pytest.skip("vramscope binary or NVML test double not built")
    pytest.importorskip("vramscope._agent", reason="the agent extension is not built")
    shm = tmp_path / "shm"
    env = double_env("two_gpus.json", shm)
    child, reason, pid = polling_child(tmp_path, shm)
    try:
        assert reason.startswith(("no C++ compiler", "this vramscope carries no agent")), reason

        def cli(*args: str, columns: str = "100") -> str:
            out = subprocess.run([str(cli_binary()), *args], env=dict(env, COLUMNS=columns),
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            return out.stdout

        # JSON: the polled counters, marked, with the reason.
        agents = [a for a in json.loads(cli("--json"))["allocators"] if a["pid"] == pid]
        assert len(agents) == 1, agents
        agent = agents[0]
        assert agent["polling_only"] is True
        assert agent["polling_reason"] == reason
        assert (agent["allocated_bytes"], agent["reserved_bytes"]) == (1 * GIB, 4 * GIB)
        assert (agent["peak_allocated_bytes"], agent["step"]) == (3 * GIB, 1)
        assert agent["step_peak_allocated_bytes"] == 3 * GIB
        assert agent["oom_count"] == 2
        assert agent["device_uuid"] == f"GPU-{UUID}"

        # top: the process's row with its step peak marked, and the line with the fix.
        frame = cli("top", "--once", columns="120")
        rows = [line for line in frame.splitlines() if line.split()[:1] == [str(pid)]]
        assert len(rows) == 1, frame
        assert rows[0].split()[4:7] == ["1.0G", "4.0G", "≥3.0G"], rows[0]
        assert f"pid {pid}: polling mode, peaks sampled (≥): {reason}" in one_text(frame), frame

        # The one-shot table: the torch line marked, the reason whole (its fix is its end).
        table = cli()
        assert "torch (polled): alloc 1024MiB  reserved 4096MiB" in table, table
        assert (f"pid {pid}: polling mode, peaks sampled (the highest its polls saw, not "
                f"exact): {reason}") in one_text(table), table

        # record keeps what top showed: its replay marks the same peak and gives the reason.
        recording = tmp_path / "run.vsrec"
        cli("record", "-o", str(recording), "--interval", "20ms", "--duration", "100ms")
        replay = cli("top", "--replay", str(recording), "--once", columns="120")
        rows = [line for line in replay.splitlines() if line.split()[:1] == [str(pid)]]
        assert len(rows) == 1 and "≥3.0G" in rows[0].split(), replay
        assert f"pid {pid}: polling mode, peaks sampled (≥): {reason}" in one_text(replay), replay
        # show's summary of it marks the peaks and gives the reason too.
        shown = cli("show", str(recording))
        assert "torch alloc ≥3072MiB resv ≥4096MiB, 1 steps, max step peak ≥3072MiB" in shown, shown
        assert f"≥: polling mode, peaks sampled, not exact: {reason}" in one_text(shown), shown
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert not list(shm.glob("agent-*.seg")), "the child's segment is removed at its exit"
