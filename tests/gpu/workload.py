# tests/gpu/workload.py -- GPU scenarios run in fresh processes by the tests in this folder
#
# Each scenario attaches vramscope BEFORE CUDA is initialised (as `vramscope run` does), so that
# vramscope's peaks since attach equal torch's peaks since process start, then asserts and prints
# "ok ..." on success. Usage: python workload.py SCENARIO [--device N]
import argparse
import json
import sys

import torch
import torch.nn as nn
from torch.optim.optimizer import register_optimizer_step_post_hook

import vramscope


def make_model(device):
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                       batch_first=True, dropout=0.0)
    return nn.Sequential(nn.Embedding(1000, 256), nn.TransformerEncoder(layer, num_layers=3),
                         nn.Linear(256, 1000)).to(device)


def train_steps(device, steps, check=None, batch=8, seq=128):
    model = make_model(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for i in range(steps):
        # Sizes vary so that the allocator keeps reserving and splitting blocks.
        tokens = torch.randint(0, 1000, (batch + i % 3, seq + 16 * (i % 4)), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(device)
        if check is not None:
            check(device, i)
    return model, opt


def assert_exact(device, step=None):
    # Each value is read right after the one it is compared with; no allocation in between.
    s = torch.cuda.memory_stats(device)
    pairs = {
        "allocated": (vramscope.memory_allocated(device), s["allocated_bytes.all.current"]),
        "reserved": (vramscope.memory_reserved(device), s["reserved_bytes.all.current"]),
        "requested": (vramscope.memory_requested(device), s["requested_bytes.all.current"]),
        "max_reserved": (vramscope.max_memory_reserved(device), s["reserved_bytes.all.peak"]),
        "max_requested": (vramscope.max_memory_requested(device), s["requested_bytes.all.peak"]),
        "max_allocated": (vramscope.max_memory_allocated(device), s["allocated_bytes.all.peak"]),
    }
    for name, (ours, theirs) in pairs.items():
        assert ours == theirs, f"step {step}: {name} vramscope={ours} torch={theirs}"


def torch_peaks(device):
    return {k: v for k, v in torch.cuda.memory_stats(device).items() if k.endswith(".peak")}


def scenario_exact(device):
    vramscope.attach()
    assert vramscope.mode() == "pending", vramscope.mode()
    train_steps(device, 12, check=assert_exact)
    assert vramscope.mode() == "events", vramscope.mode()
    before = torch_peaks(device)
    torch_max = torch.cuda.max_memory_allocated(device)
    vramscope.reset_peak(device)
    for name in ("max_memory_allocated", "max_memory_reserved", "max_memory_requested",
                 "memory_stats"):
        getattr(vramscope, name)(device)
    assert torch_peaks(device) == before, "vramscope changed torch's peak statistics"
    assert torch.cuda.max_memory_allocated(device) == torch_max
    # After reset_peak vramscope's peak restarts from the current value.
    assert vramscope.max_memory_reserved(device) == vramscope.memory_reserved(device)
    assert vramscope.max_memory_requested(device) == vramscope.memory_requested(device)
    x = torch.empty(64 << 20, dtype=torch.uint8, device=device)
    requested_peak = vramscope.memory_requested(device)
    del x
    assert vramscope.max_memory_requested(device) == requested_peak
    assert torch.cuda.max_memory_allocated(device) >= torch_max
    print("ok", vramscope.mode())


def scenario_monitor(device):
    records = []
    seen = []  # torch's allocated bytes right after each optimizer step, read by a later hook
    with vramscope.Monitor(every=0, auto_step=True, leak_steps=3, exit_table_rows=0) as mon:
        # Registered after the Monitor's hook, so it runs right after it with no allocation between.
        handle = register_optimizer_step_post_hook(
            lambda opt, args, kwargs: seen.append(torch.cuda.memory_allocated(device)))
        train_steps(device, 6)
        handle.remove()
        records = mon.history
    assert mon.steps == 6, mon.steps
    mine = [r for r in records if r.device == device]
    assert [r.step for r in mine] == list(range(1, 7))
    for r in mine:
        assert r.peak_allocated_bytes >= r.allocated_bytes
        assert r.peak_reserved_bytes >= r.reserved_bytes >= r.allocated_bytes
    # Steps end at optimizer.step() (before zero_grad frees the gradients): exact at that point.
    assert [r.allocated_bytes for r in mine] == seen, (seen, [r.allocated_bytes for r in mine])
    print("ok", json.dumps({"rank": mine[-1].rank, "world_size": mine[-1].world_size}))


def scenario_mode(device):
    vramscope.attach(init_cuda=True)
    x = torch.ones(1 << 20, device=device)
    assert vramscope.memory_allocated(device) >= x.numel() * 4
    assert vramscope.memory_stats(device)
    # A second attach (from the agent too) is never fatal: it answers the mode, and in events
    # mode counting goes on (polling has no events to count).
    events = vramscope.memory_stats(device)["event_count"]
    assert vramscope.attach() == vramscope.mode()
    assert vramscope._agent.attach() == vramscope._agent.mode()
    y = torch.ones(1 << 20, device=device)
    if vramscope.mode() == "events":
        assert vramscope.memory_stats(device)["event_count"] > events
    assert vramscope.memory_allocated(device) == torch.cuda.memory_allocated(device)
    del y
    # A step's peaks are labelled: exact from events, sampled (≥) when the agent polls.
    with vramscope.Monitor(every=0, exit_table_rows=0) as mon:
        z = torch.ones(1 << 20, device=device)
        records = mon.step()
        del z
    assert records and {r.peaks_exact for r in records} == {vramscope.mode() == "events"}, \
        (vramscope.mode(), records)
    print("ok", vramscope.mode())


def scenario_empty_cache(device):
    vramscope.attach(init_cuda=True)
    blocks = [torch.empty(32 << 20, dtype=torch.uint8, device=device) for _ in range(8)]
    del blocks
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_reserved(device)
    released = vramscope.empty_cache()
    after = torch.cuda.memory_reserved(device)
    assert released == before - after > 0, (released, before, after)
    assert vramscope.memory_reserved(device) == after
    print("ok", released)


def scenario_record_stream(device):
    vramscope.attach(init_cuda=True)
    side = torch.cuda.Stream(device)
    a = torch.randn(4096, 4096, device=device)
    with torch.cuda.stream(side):
        for _ in range(20):
            a = a @ a / 64.0  # keep the side stream busy while the block is freed
    x = torch.empty(16 << 20, dtype=torch.uint8, device=device)
    x.record_stream(side)
    del x
    torch.cuda.synchronize(device)
    y = torch.empty(1024, device=device)  # the next allocation completes the deferred free
    assert_exact(device)
    stats = vramscope.memory_stats(device)
    assert stats.get("pending_free_bytes", 0) == 0, stats
    del y, a
    print("ok")


def scenario_independent(device):
    vramscope.attach(init_cuda=True)
    torch.ones(1, device=0)
    torch.ones(1, device=1)
    before = [(vramscope.memory_allocated(d), vramscope.memory_reserved(d)) for d in (0, 1)]
    x = torch.empty(256 << 20, dtype=torch.uint8, device=1)
    assert (vramscope.memory_allocated(0), vramscope.memory_reserved(0)) == before[0]
    assert vramscope.memory_allocated(1) - before[1][0] == 256 << 20
    assert vramscope.memory_allocated("cuda:1") == vramscope.memory_allocated(torch.device(1))
    torch.cuda.set_device(1)
    assert vramscope.memory_allocated() == vramscope.memory_allocated(1)
    for d in (0, 1):
        assert_exact(d)
    del x
    print("ok")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario")
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    globals()[f"scenario_{args.scenario}"](args.device)


if __name__ == "__main__":
    sys.exit(main())
