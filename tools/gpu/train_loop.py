# tools/gpu/train_loop.py -- a steady training loop for SECONDS (an agent's process beside record)
"""A Linear(4096) stack trained with SGD at batch 256 until SECONDS have passed: after its first
steps the allocator's reserved bytes stay put, as in a long training run, and the agent
publishes its counters every tick. Run under `python -m vramscope.run` by tools/gpu/call.sh, which
waits for "train_loop: ready" (after the first step) before it times `record`.

    python -m vramscope.run tools/gpu/train_loop.py SECONDS
"""

from __future__ import annotations

import sys
import time

import torch


def main() -> None:
    seconds = float(sys.argv[1])
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(4)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    end = time.monotonic() + seconds
    steps = 0
    while time.monotonic() < end:
        x = torch.randn(256, 4096, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps += 1
        if steps == 1:
            torch.cuda.synchronize()
            print("train_loop: ready", flush=True)
    torch.cuda.synchronize()
    print(f"train_loop: {steps} steps in {seconds:g} s")


if __name__ == "__main__":
    main()
