# python/vramscope/_core/distributed.py -- this process's rank, and job-wide step peaks (opt-in)
"""Which rank this process is, and the job-wide step peaks.

The rank and world size (:func:`resolve_rank`): torch.distributed when it is initialised (the
truth under DDP/FSDP), else the RANK/WORLD_SIZE variables torchrun exports, else a single
process. The session publishes them with the agent's stats and Monitor prints them.

What NCCL holds (:func:`nccl_memory`): the bytes the default process group's NCCL communicator
reports, which the session hands the agent so that the breakdown names them (``nccl_bytes``).

``Monitor(reduce_peaks=True)`` calls :func:`reduce_step_peaks` at every step so each rank's
records carry the job-wide maximum of the step peaks (the number that decides whether the job
OOMs: the worst rank). It costs two small all-reduces per step, which is why it is opt-in; every
rank must call it at the same step with records for the same number of devices.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["reduce_step_peaks", "PEAK_FIELDS", "resolve_rank", "nccl_memory"]

#: Fields replaced by their maximum over all ranks.
PEAK_FIELDS = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_requested_bytes")


def rank_from_env(env: Mapping[str, str]) -> tuple[int, int] | None:
    """``(rank, world_size)`` from torchrun's variables; None when absent or malformed."""
    try:
        rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if world_size < 1 or not 0 <= rank < world_size:
        return None
    return rank, world_size


def rank_from_torch() -> tuple[int, int] | None:
    """``(rank, world_size)`` from an initialised default process group, else None. Never imports
    torch itself: a program that did not import it is not distributed through it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank(), dist.get_world_size()


def resolve_rank(explicit: int | None = None) -> tuple[tuple[int, int], bool]:
    """Returns ``((rank, world_size), final)``; ``final`` is False when the answer came from the
    environment or a default and a later call may learn better from torch.distributed."""
    from_torch = rank_from_torch()
    if from_torch is not None:
        rank, world = from_torch
        return ((explicit if explicit is not None else rank), world), True
    from_env = rank_from_env(os.environ)
    if from_env is not None:
        rank, world = from_env
        return ((explicit if explicit is not None else rank), world), False
    return ((explicit if explicit is not None else 0), 1), False


def _collective_device(dist: Any, group: Any) -> Any:
    import torch

    # NCCL only reduces CUDA tensors; gloo and others take CPU tensors.
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def reduce_step_peaks(records: Sequence[Any], group: Any | None = None) -> list[Any]:
    """Returns copies of ``records`` (dataclasses with the PEAK_FIELDS) whose peaks are the max
    over every rank of ``group`` (default: the whole job). Without an initialised process group,
    or with one rank, returns the records unchanged. Raises ValueError when ranks pass different
    numbers of records (they would otherwise be paired wrongly)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size(group) == 1:
        return list(records)
    device = _collective_device(dist, group)
    count = len(records)
    # One reduction checks that every rank has the same count: max(n) and max(-n) = -min(n).
    counts = torch.tensor([count, -count], dtype=torch.int64, device=device)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX, group=group)
    if int(counts[0]) != count or int(-counts[1]) != count:
        raise ValueError(f"reduce_step_peaks: ranks passed between {int(-counts[1])} and "
                         f"{int(counts[0])} records (this rank {count}); every rank must follow "
                         "the same number of devices")
    if count == 0:
        return []
    peaks = torch.tensor([[getattr(r, f) for f in PEAK_FIELDS] for r in records],
                         dtype=torch.int64, device=device)
    dist.all_reduce(peaks, op=dist.ReduceOp.MAX, group=group)
    values = peaks.cpu().tolist()
    return [dataclasses.replace(r, **dict(zip(PEAK_FIELDS, row)))
            for r, row in zip(records, values)]


# ----- NCCL's own memory, for the breakdown's nccl part (the session reports it at step ends)

def _nccl_version(torch: Any) -> int:
    try:
        major, minor, patch = (int(v) for v in torch.cuda.nccl.version()[:3])
    except Exception:  # noqa: BLE001 -- a torch without NCCL, or a version it cannot read
        return 0
    return major * 10000 + minor * 100 + patch


def _total_of(stats: Any) -> int | None:
    """The bytes in what ``Backend.memory_stats()`` returned: a number, or a mapping with a
    total (NCCL's own key names vary by release)."""
    if isinstance(stats, int):
        return stats
    if isinstance(stats, dict):
        for key in ("total", "total_bytes", "totalBytes", "current", "bytes"):
            value = stats.get(key)
            if isinstance(value, int):
                return value
    return None


def nccl_memory() -> dict[int, tuple[int, int | None]]:
    """``{device: (nccl_version, bytes or None)}`` for the NCCL communicator of the default
    process group, on the device it runs on; empty without one. Never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    dist = torch.distributed
    try:
        if not dist.is_available() or not dist.is_initialized():
            return {}
        group = dist.group.WORLD
        device = torch.device("cuda", torch.cuda.current_device())
        backend = group._get_backend(device)
    except Exception:  # noqa: BLE001 -- no NCCL backend on this group
        return {}
    if type(backend).__name__ != "ProcessGroupNCCL":
        return {}
    version = _nccl_version(torch)
    stats = getattr(backend, "memory_stats", None)
    nccl: int | None = None
    if callable(stats):
        try:
            nccl = _total_of(stats())
        except Exception:  # noqa: BLE001 -- an NCCL older than the API: not reported
            nccl = None
    return {int(device.index or 0): (version, nccl)}
