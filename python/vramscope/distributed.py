# python/vramscope/distributed.py -- job-wide step peaks: the max over ranks, opt-in
"""``Monitor(reduce_peaks=True)`` calls :func:`reduce_step_peaks` at every step so each rank's
records carry the job-wide maximum of the step peaks (the number that decides whether the job
OOMs: the worst rank). It costs two small all-reduces per step, which is why it is opt-in; every
rank must call it at the same step with records for the same number of devices.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Sequence

__all__ = ["reduce_step_peaks", "PEAK_FIELDS"]

#: Fields replaced by their maximum over all ranks.
PEAK_FIELDS = ("peak_allocated_bytes", "peak_reserved_bytes", "peak_requested_bytes")


def _collective_device(dist: Any, group: Any) -> Any:
    import torch

    # NCCL only reduces CUDA tensors; gloo and others take CPU tensors.
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def reduce_step_peaks(records: Sequence[Any], group: Optional[Any] = None) -> List[Any]:
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
        raise ValueError(f"reduce_step_peaks: ranks passed between {int(-counts[1])} and {int(counts[0])} "
                         f"records (this rank {count}); every rank must follow the same number of devices")
    if count == 0:
        return []
    peaks = torch.tensor([[getattr(r, f) for f in PEAK_FIELDS] for r in records], dtype=torch.int64, device=device)
    dist.all_reduce(peaks, op=dist.ReduceOp.MAX, group=group)
    values = peaks.cpu().tolist()
    return [dataclasses.replace(r, **dict(zip(PEAK_FIELDS, row))) for r, row in zip(records, values)]
