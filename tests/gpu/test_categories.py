# tests/gpu/test_categories.py -- Monitor(model=, optimizer=Adam) on a real training loop: what
# each step's peak was made of, in the Monitor, in TensorBoard and in `vramscope --json`
#
# One trainer process runs four Adam steps of a 4 x Linear(2048, 2048) MLP on a small batch, so
# activations are tiny and the step's peak comes once every gradient and the Adam state exist
# (inside the optimizer step): every parameter, gradient and state storage is live at it. It
# computes the expected bytes from the model and the optimizer state themselves, then holds still
# (blocked on stdin) while the tests read its TensorBoard run and, with VRAMSCOPE_CLI set, the
# CLI's view of its segment.
#
# Run on the GPU machine: pytest tests/gpu/test_categories.py -rA   (-rA shows the measured cost)
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from conftest import CLI, NO_CLI, gpu_env

NAMES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")

TRAINER = r"""
import json, statistics, sys, time
import torch, vramscope

def storage_bytes(tensors):
    seen = {}
    for t in tensors:
        if torch.is_tensor(t) and t.is_cuda:
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())

torch.cuda.init()
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)]).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
x = torch.randn(16, 2048, device="cuda")
expected, step_ms = [], []
with vramscope.Monitor(every=2, exit_table_rows=0, model=model, optimizer=opt, devices=[0],
                       tensorboard_dir=sys.argv[1],
                       print_fn=lambda line: print("LINE " + line, flush=True)) as mon:
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        grads = storage_bytes(p.grad for p in model.parameters())
        opt.step()
        state = storage_bytes(v for s in opt.state.values() for v in s.values())
        started = time.perf_counter()
        mon.step()
        step_ms.append((time.perf_counter() - started) * 1e3)
        expected.append({"parameters": storage_bytes(model.parameters()), "gradients": grads,
                         "optimizer_state": state,
                         "allocated_at_end": torch.cuda.memory_allocated()})
    table = mon.table()
records = [{"step": r.step, "device": r.device, "categories": r.categories,
            "peak_allocated_bytes": r.peak_allocated_bytes,
            "peak_requested_bytes": r.peak_requested_bytes, "allocated_bytes": r.allocated_bytes}
           for r in mon.history]
print(json.dumps({"records": records, "expected": expected, "table": table,
                  "step_ms_median": statistics.median(step_ms[1:]),
                  "mode": vramscope.mode()}), flush=True)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    tb = tmp_path_factory.mktemp("tb")
    proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(tb)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=gpu_env())
    lines = []
    result = None
    for line in proc.stdout:
        if line.startswith("LINE "):
            lines.append(line[5:].rstrip("\n"))
        elif line.startswith("{"):
            result = json.loads(line)
            break
    if result is None:
        proc.kill()
        pytest.fail(f"trainer ended without results:\n{proc.stderr.read()}")
    result.update(pid=proc.pid, lines=lines, tensorboard=str(tb))
    try:
        yield result
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_each_peak_holds_the_whole_model_state(trainer):
    assert trainer["mode"] == "events", trainer["mode"]
    records = trainer["records"]
    assert [r["step"] for r in records] == [1, 2, 3, 4], records
    print(f"\nMonitor.step() with categories: median {trainer['step_ms_median']:.3f} ms "
          f"(16 parameter tensors)")
    for record, want in zip(records, trainer["expected"]):
        cats = record["categories"]
        assert cats is not None and list(cats) == list(NAMES), record
        context = f"step {record['step']}: categories {cats}, expected {want}"
        # Parameters and gradients: exactly their storages (all live at an optimizer-step peak).
        assert cats["parameters"] == want["parameters"], context
        assert cats["gradients"] == want["gradients"] == want["parameters"], context
        # Adam: exp_avg + exp_avg_sq per parameter (plus its step tensors when they are on the
        # GPU), computed from the optimizer state itself.
        assert want["optimizer_state"] >= 2 * want["parameters"], context
        assert cats["optimizer_state"] == want["optimizer_state"], context
        total = sum(cats.values())
        assert total <= record["peak_allocated_bytes"], \
            f"{context}: sum {total} > step peak allocated {record['peak_allocated_bytes']}"


def test_categories_sum_to_the_requested_peak(trainer):
    for record in trainer["records"]:
        total = sum(record["categories"].values())
        assert total == record["peak_requested_bytes"], \
            f"step {record['step']}: categories {record['categories']} sum to {total}, " \
            f"step peak requested {record['peak_requested_bytes']}"


def test_line_and_table_show_the_breakdown(trainer):
    assert len(trainer["lines"]) == 2, trainer["lines"]  # every=2 over 4 steps
    assert all("at peak params " in line and "optim " in line for line in trainer["lines"]), \
        trainer["lines"]
    header = trainer["table"].splitlines()[0].split()
    assert header[-6:] == ["params", "grads", "optim", "activ", "temp", "other"], trainer["table"]


def float32(value):
    return struct.unpack("f", struct.pack("f", float(value)))[0]


def test_tensorboard_run_has_the_same_numbers(trainer):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(trainer["tensorboard"],
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for name in NAMES:
        tag = f"memory/cuda0/category/{name}_bytes"
        assert tag in tags, tags
        got = {e.step: e.value for e in acc.Scalars(tag)}
        want = {r["step"]: float32(r["categories"][name]) for r in trainer["records"]}
        assert got == want, f"{tag}: TensorBoard {got}, Monitor {want}"


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_cli_json_shows_the_same_step_records(trainer):
    out = subprocess.run([CLI, "--json"], capture_output=True, text=True, timeout=60,
                         env=gpu_env())
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    # The agent closes steps on every visible device; the trainer's records are device 0's.
    steps = {s["step"]: s for s in doc["steps"]
             if s["pid"] == trainer["pid"] and s["cuda_device"] == 0}
    assert sorted(steps) == [1, 2, 3, 4], \
        f"steps of pid {trainer['pid']} in --json: {sorted(steps)} (all pids: " \
        f"{sorted({s['pid'] for s in doc['steps']})}); stderr: {out.stderr}"
    for record in trainer["records"]:
        cli = steps[record["step"]]
        assert cli["category_bytes"] == record["categories"], \
            f"step {record['step']}: CLI {cli['category_bytes']}, Monitor {record['categories']}"
        assert cli["peak_requested_bytes"] == record["peak_requested_bytes"], (cli, record)
