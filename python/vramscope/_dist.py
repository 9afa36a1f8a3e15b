# python/vramscope/_dist.py -- which distributed rank this process is
"""The rank and world size of this process: torch.distributed when it is initialised (the truth
under DDP/FSDP), else the RANK/WORLD_SIZE variables torchrun exports, else a single process."""

from __future__ import annotations

import os
import sys
from typing import Mapping, Optional, Tuple


def rank_from_env(env: Mapping[str, str]) -> Optional[Tuple[int, int]]:
    """``(rank, world_size)`` from torchrun's variables; None when absent or malformed."""
    try:
        rank, world_size = int(env["RANK"]), int(env["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if world_size < 1 or not 0 <= rank < world_size:
        return None
    return rank, world_size


def rank_from_torch() -> Optional[Tuple[int, int]]:
    """``(rank, world_size)`` from an initialised default process group, else None. Never imports
    torch itself: a program that did not import it is not distributed through it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank(), dist.get_world_size()


def resolve_rank(explicit: Optional[int] = None) -> Tuple[Tuple[int, int], bool]:
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
