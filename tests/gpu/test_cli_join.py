# tests/gpu/test_cli_join.py -- the CLI sees the agent's numbers for a training pid, and
# non-PyTorch + cached free + allocated adds up to the driver's used bytes for that pid.
#
# Needs VRAMSCOPE_CLI=/path/to/vramscope. The trainer holds still (blocked on stdin) while the
# CLI reads, so both views describe the same memory.
import json
import subprocess
import sys

import pytest

from conftest import CLI, NO_CLI, gpu_env

TRAINER = r"""
import json, sys
import torch, vramscope
vramscope.attach(interval_ms=5.0)
x = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (64, 128, 32)]
del x[1]  # leaves 128 MiB cached-free
torch.cuda.synchronize()
print(json.dumps({"allocated_bytes": vramscope.memory_allocated(0),
                  "reserved_bytes": vramscope.memory_reserved(0)}), flush=True)
sys.stdin.readline()
"""


def rows_for_pid(node, pid):
    """Every dict in the JSON that describes `pid`."""
    if isinstance(node, dict):
        if node.get("pid") == pid:
            yield node
        for value in node.values():
            yield from rows_for_pid(value, pid)
    elif isinstance(node, list):
        for value in node:
            yield from rows_for_pid(value, pid)


def flat(row, prefix=""):
    out = {}
    for key, value in row.items():
        if key == "driver_parts":
            continue  # the settled pairing's own numbers, of another instant
        if isinstance(value, dict):
            out.update(flat(value))
        else:
            out[key] = value
    return out


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_cli_shows_agent_columns_and_decomposition_adds_up(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=gpu_env())
    try:
        expected = json.loads(trainer.stdout.readline())
        # The agent publishes every 5 ms; poll the CLI until it shows the settled numbers.
        for _ in range(200):
            out = subprocess.run([CLI, "--json"], capture_output=True, text=True, timeout=60,
                                 env=gpu_env())
            assert out.returncode == 0, out.stderr
            rows = [flat(r) for r in rows_for_pid(json.loads(out.stdout), trainer.pid)]
            row = next((r for r in rows if "allocated_bytes" in r), None)
            if row and row["reserved_bytes"] == expected["reserved_bytes"]:
                break
        else:
            pytest.fail(f"the CLI never showed the agent's numbers for pid {trainer.pid}: {rows}")
        assert row["allocated_bytes"] == expected["allocated_bytes"]
        assert row["reserved_bytes"] - row["allocated_bytes"] >= 128 << 20
        assert row["non_pytorch_bytes"] + row["cached_free_bytes"] + row["allocated_bytes"] \
            == row["used_bytes"], row
    finally:
        trainer.stdin.close()
        trainer.wait(timeout=60)


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_run_record_records_the_program_and_returns_its_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys, torch\n"
                      "m = torch.nn.Linear(256, 256).cuda()\n"
                      "opt = torch.optim.AdamW(m.parameters())\n"
                      "for _ in range(5):\n"
                      "    m(torch.randn(32, 256, device='cuda')).sum().backward()\n"
                      "    opt.step()\n"
                      "sys.exit(7)\n")
    recording = tmp_path / "run.vsrec"
    out = subprocess.run([CLI, "run", "--record", str(recording), "--interval", "10ms",
                          str(script)], capture_output=True, text=True, timeout=300,
                         env=gpu_env(VRAMSCOPE_PYTHON=sys.executable))
    assert out.returncode == 7, out.stderr
    assert "vramscope: 5 steps, 0 OOMs" in out.stderr
    assert oct(recording.stat().st_mode & 0o777) == "0o600"
    shown = subprocess.run([CLI, "show", str(recording)], capture_output=True, text=True,
                           timeout=60, env=gpu_env())
    assert shown.returncode == 0, shown.stderr
