# tests/gpu/fit_program.py -- a training program for `vramscope fit`'s GPU tests (no vramscope code)
"""python fit_program.py run BATCH      3 AdamW steps of a small CNN at BATCH under a 2 GiB cap;
                                        prints "ok", or exits 3 on an OOM
   python fit_program.py fit            vramscope.fit on the same step in-process; prints JSON

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


def main() -> None:
    step = make_step()
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
