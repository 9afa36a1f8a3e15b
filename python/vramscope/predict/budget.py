# python/vramscope/predict/budget.py -- what `fit` may fill: the card, a cap, or a size; DDP minimum
"""The budget of ``vramscope.fit`` is the most the caching allocator may reserve, by the
allocator's own rule: torch refuses a new segment when ``reserved + size`` passes the
memory-fraction cap, or when the driver has no ``size`` bytes free. So:

- ``"card"`` (default): the cap when one is set, else what this process holds plus what the
  driver has free (other processes and the CUDA context are already outside it);
- ``"cap"``: the memory-fraction cap (``torch.cuda.set_per_process_memory_fraction``); an error
  when none is set;
- a size (``"12 GiB"``, bytes as an int) or a fraction of the device (a float in (0, 1]): that,
  and never more than the card.

``agree_min`` makes every rank of a distributed job use the smallest answer (an all-reduce MIN
over the default process group; gloo takes CPU tensors, NCCL CUDA ones).
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from .._core.units import format_bytes, parse_size

__all__ = ["Budget", "DeviceMemory", "resolve_budget", "device_memory", "agree_min"]


class DeviceMemory(NamedTuple):
    """What the driver and torch say of one device now."""

    total_bytes: int
    free_bytes: int
    #: This process's reserved bytes (the allocator's segments).
    reserved_bytes: int
    #: torch's per-process memory fraction (1.0: no cap).
    fraction: float = 1.0


class Budget(NamedTuple):
    """The bytes the reserved peak must stay within, and where the number came from."""

    bytes: int
    source: str


def resolve_budget(spec: Any, mem: DeviceMemory) -> Budget:
    """The budget of ``spec`` (None / "card", "cap", a size, a fraction) on ``mem``."""
    card = mem.reserved_bytes + mem.free_bytes
    capped = mem.fraction < 1.0
    cap = int(mem.fraction * mem.total_bytes) if capped else mem.total_bytes
    room = min(cap, card)
    if spec is None or spec == "card":
        where = (f"the cap {mem.fraction:g} of the device" if capped and cap <= card
                 else "the card (free + held by this process)")
        return Budget(room, where)
    if spec == "cap":
        if not capped:
            raise ValueError("vramscope: budget='cap' but no memory-fraction cap is set "
                             "(torch.cuda.set_per_process_memory_fraction)")
        return Budget(room, f"the cap {mem.fraction:g} of the device")
    if isinstance(spec, float) and not isinstance(spec, bool):
        if not 0.0 < spec <= 1.0:
            raise ValueError(f"vramscope: a budget fraction must be in (0, 1], got {spec}")
        wanted = int(spec * mem.total_bytes)
        return Budget(min(wanted, room), f"{spec:g} of the device")
    try:
        wanted = parse_size(spec)
    except ValueError as e:
        raise ValueError(f"vramscope: budget must be 'card', 'cap', a size like '12 GiB' or a "
                         f"fraction of the device: {e}") from None
    if wanted <= 0:
        raise ValueError("vramscope: a budget must be positive")
    return Budget(min(wanted, room), f"{format_bytes(wanted)} asked" +
                  (f", {format_bytes(room)} available" if room < wanted else ""))


def device_memory(device: int) -> DeviceMemory:
    """The driver's free/total, this process's reserved bytes and torch's cap on ``device``."""
    import torch

    free, total = torch.cuda.mem_get_info(device)
    fraction = 1.0
    if hasattr(torch.cuda, "get_per_process_memory_fraction"):
        fraction = float(torch.cuda.get_per_process_memory_fraction(device))
    return DeviceMemory(int(total), int(free), int(torch.cuda.memory_reserved(device)), fraction)


def agree_min(value: int, group: Any = None) -> int:
    """The smallest ``value`` over the ranks of ``group`` (default: the job) when a process group
    is initialised; ``value`` itself otherwise. Every rank must call it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size(group) == 1:
        return value
    if dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    tensor = torch.tensor([int(value)], dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN, group=group)
    return int(tensor.item())
