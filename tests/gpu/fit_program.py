# tests/gpu/fit_program.py -- a training program for `vramscope fit`'s GPU tests (no vramscope code)
"""python fit_program.py run BATCH      3 AdamW steps of a small CNN at BATCH under a 2 GiB cap;
                                        prints "ok", or exits 3 on an OOM
   python fit_program.py fit            vramscope.fit on the same step in-process; prints JSON
   python fit_program.py trace BATCH OUT.json
                                        2 steps at BATCH under the cap after one unrecorded
                                        step, torch's memory history of them (the segments at
                                        their start, every allocator event, their peaks) in
                                        OUT.json: what must fit under the cap, for the design of
                                        vramscope.predict.capped on the CPU

A convolutional net whose batch-1 and batch-2 peaks are the optimizer's (AdamW on 30 M
parameters) rather than the activations': the shape that once misled the search."""

from __future__ import annotations

import json
import sys

import torch

CAP_BYTES = 2 << 30


def make_step():
    torch.cuda.set_per_process_memory_fraction(CAP_BYTES / torch.cuda.mem_get_info()[1])
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(),
        torch.nn.Linear(64 * 64, 7000), torch.nn.ReLU(), torch.nn.Linear(7000, 10)).cuda()
    opt = torch.optim.AdamW(net.parameters())

    def step(batch: int) -> None:
        x = torch.randn(batch, 3, 128, 128, device="cuda")
        net(x).logsumexp(-1).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def trace(step, batch: int, out: str) -> None:
    step(batch)  # the optimizer's state allocated, as in a probe's first step
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    segments = torch.cuda.memory._snapshot()["segments"]
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=2_000_000)
    ran = True
    try:
        for _ in range(2):
            step(batch)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        ran = False
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats()
    events = [(e["action"], e["size"], e.get("stream", 0), e.get("addr", 0))
              for e in snap["device_traces"][0]]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"batch": batch, "cap_bytes": CAP_BYTES, "ran": ran, "torch": torch.__version__,
                   "segments": [{k: s[k] for k in ("address", "total_size", "stream", "blocks")}
                                for s in segments],
                   "peak_allocated_bytes": stats["allocated_bytes.all.peak"],
                   "peak_reserved_bytes": stats["reserved_bytes.all.peak"],
                   "num_alloc_retries": stats["num_alloc_retries"], "events": events}, f)
    print(f"trace {batch}: ran={ran} events={len(events)}")


def main() -> None:
    step = make_step()
    if sys.argv[1] == "trace":
        trace(step, int(sys.argv[2]), sys.argv[3])
        return
    if sys.argv[1] == "run":
        try:
            for _ in range(3):
                step(int(sys.argv[2]))
            torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            raise SystemExit(3) from None
        print("ok")
    else:
        import vramscope

        result = vramscope.fit(step, budget="cap")
        print(json.dumps({"answer": result.size, "probes": [
                              [p.size, p.peak_allocated_bytes, p.peak_pinned_bytes,
                               p.resident_bytes] for p in result.probes],
                          "ooms": int(torch.cuda.memory_stats().get("num_ooms", 0)),
                          "describe": result.describe()}))


if __name__ == "__main__":
    main()
