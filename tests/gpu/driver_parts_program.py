# tests/gpu/driver_parts_program.py -- programs with known non-PyTorch memory (test_driver_parts.py)
"""One scenario per run, in a fresh process; prints one JSON line "ok {...}" with what the agent's
breakdown said and the truth to compare it with (torch's own numbers, NVML's, CuPy's).

    python driver_parts_program.py init|cupy|graphs|nccl|grow
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

import vramscope
from vramscope._core.session import SESSION

MiB = 1 << 20


def wait_pairing(after_ns: int, deadline_s: float = 20.0) -> dict:
    """The agent's first settled pairing taken after ``after_ns`` (CLOCK_REALTIME)."""
    give_up = time.monotonic() + deadline_s
    while True:
        parts = vramscope.memory_breakdown(0)
        if parts is not None and parts["paired_ns"] > after_ns:
            return parts
        if time.monotonic() > give_up:
            raise SystemExit(f"no settled pairing after {deadline_s} s: {parts}")
        time.sleep(0.05)  # polls a condition, with a deadline


def attach() -> None:
    torch.cuda.init()
    torch.cuda.synchronize()
    vramscope.attach()


def scenario_init() -> dict:
    attach()
    parts = wait_pairing(time.time_ns())
    return {"parts": parts, "nvml_used": SESSION.driver_process_bytes(0)}


def scenario_cupy() -> dict:
    import cupy

    attach()
    x = torch.ones(256 * MiB // 4, device="cuda")  # torch holds something too
    before = wait_pairing(time.time_ns())
    block = cupy.cuda.Memory(1 << 30)
    torch.cuda.synchronize()
    after = wait_pairing(time.time_ns())
    del block, x
    return {"before": before, "after": after}


def scenario_graphs() -> dict:
    import torchvision

    attach()
    model = torchvision.models.resnet18().cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    data = torch.randn(32, 3, 224, 224, device="cuda")
    with torch.no_grad():
        for _ in range(4):
            compiled(data)
    torch.cuda.synchronize()
    parts = wait_pairing(time.time_ns())
    pools: dict[str, int] = {}
    for segment in torch.cuda.memory_snapshot():
        key = str(tuple(segment.get("segment_pool_id", (0, 0))))
        pools[key] = pools.get(key, 0) + int(segment["total_size"])
    private = sum(v for k, v in pools.items() if k != "(0, 0)")
    return {"parts": parts, "torch_private_pool_bytes": private, "pools": pools,
            "torch_reserved_bytes": torch.cuda.memory_reserved()}


def scenario_nccl() -> dict:
    import torch.distributed as dist

    attach()
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", world_size=1, rank=0,
                            device_id=torch.device("cuda:0"))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    monitor = vramscope.Monitor(every=0)
    monitor.step()  # step ends tell the agent what NCCL reports
    parts = wait_pairing(time.time_ns())
    version = ".".join(str(v) for v in torch.cuda.nccl.version()[:3])
    dist.destroy_process_group()
    return {"parts": parts, "nccl_version": version}


def scenario_grow() -> dict:
    """Warm, settle, then grow by 64 MiB segments every 10 ms (and free them) for ~6 s while
    the test samples the one-shot CLI; prints the settled parts before the growth."""
    attach()
    a = torch.randn(2048, 2048, device="cuda")
    (a @ a).sum().item()  # load the kernels the growth uses
    settled = wait_pairing(time.time_ns())
    # The pid says which rows are this program's (under `vramscope run` it is not the child
    # the test started, and the test's own process may be on the card too).
    print("ready", json.dumps({**settled, "pid": os.getpid()}), flush=True)
    held = []
    deadline = time.monotonic() + 6.0
    while time.monotonic() < deadline:
        for _ in range(100):
            held.append(torch.empty(64 * MiB, dtype=torch.uint8, device="cuda"))
            torch.cuda.synchronize()
            time.sleep(0.01)
        held.clear()
        torch.cuda.empty_cache()
    after = wait_pairing(time.time_ns())
    return {"settled": settled, "after": after, "driver_thread_cpu_s": driver_thread_cpu_s()}


def driver_thread_cpu_s() -> float | None:
    """CPU seconds the agent's driver thread used (its /proc stat), for the cost note."""
    tick = os.sysconf("SC_CLK_TCK")
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        if name == "vramscope-drv":
            fields = text[text.rindex(")") + 2:].split()
            return (int(fields[11]) + int(fields[12])) / tick
    return None


SCENARIOS = {"init": scenario_init, "cupy": scenario_cupy, "graphs": scenario_graphs,
             "nccl": scenario_nccl, "grow": scenario_grow}

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]]()
    print("ok " + json.dumps(result), flush=True)
