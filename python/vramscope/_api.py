# python/vramscope/_api.py -- the torch.cuda-style functions, answered by the process's session
"""Reading functions named like ``torch.cuda``'s, answered by the agent extension.

Speed: after attach, ``memory_allocated()`` is one global lookup, two attribute reads, one
device read and one call into the extension, well under a microsecond; everything unusual
(first use, strings, ``torch.device``, errors) takes ``_slow``. Attaching (now, or queued until
the program initialises CUDA) is the session's (vramscope._core.session).
"""

from __future__ import annotations

from typing import Any

from ._core.device import Device, parse_device
from ._core.session import SESSION

_S = SESSION


def mode() -> str:
    """``"detached"``, ``"pending"`` (attach queued until CUDA initialises), ``"events"`` (exact,
    from allocator events) or ``"polling: <reason>"``."""
    return _S.mode()


def attach(interval_ms: float = 10.0, publish: bool = True, rank: int | None = None,
           world_size: int | None = None, init_cuda: bool = False) -> str:
    """Attaches the agent to every CUDA device of this process and returns the mode.

    If CUDA is not initialised yet (and ``init_cuda`` is False) the attach is queued and runs as
    soon as the program initialises CUDA; returns ``"pending"`` then. ``interval_ms`` is how often
    the agent thread publishes to the shared-memory segment that ``vramscope`` (the CLI) reads;
    ``publish=False`` keeps everything in-process. Idempotent: a second call returns the mode.
    """
    return _S.attach(interval_ms, publish, rank, world_size, init_cuda)


def _slow(name: str, device: Device) -> Any:
    if not _S.ready():
        # CUDA is not initialised (or there is no GPU): validate the argument's shape, then
        # answer like torch.cuda.
        parse_device(device, lambda: 0)
        return {} if name == "stats" else 0
    return getattr(_S.reader, name)(parse_device(device, _S.current, _S.count))


def memory_allocated(device: Device = None) -> int:
    """Bytes occupied by tensors on ``device`` (like ``torch.cuda.memory_allocated``)."""
    r = _S.reader
    if r is not None:
        if device is None:
            return r.memory_allocated(_S.current())
        if type(device) is int and 0 <= device < _S.count:
            return r.memory_allocated(device)
    return _slow("memory_allocated", device)


def memory_reserved(device: Device = None) -> int:
    """Bytes held by the caching allocator on ``device`` (like ``torch.cuda.memory_reserved``)."""
    r = _S.reader
    if r is not None:
        if device is None:
            return r.memory_reserved(_S.current())
        if type(device) is int and 0 <= device < _S.count:
            return r.memory_reserved(device)
    return _slow("memory_reserved", device)


def memory_requested(device: Device = None) -> int:
    """Bytes requested by tensors on ``device``, before the allocator's rounding."""
    r = _S.reader
    if r is not None:
        if device is None:
            return r.memory_requested(_S.current())
        if type(device) is int and 0 <= device < _S.count:
            return r.memory_requested(device)
    return _slow("memory_requested", device)


def max_memory_allocated(device: Device = None) -> int:
    """vramscope's peak of allocated bytes since attach or ``reset_peak`` (torch's own peak,
    ``torch.cuda.max_memory_allocated``, is left untouched)."""
    return _slow("max_memory_allocated", device)


def max_memory_reserved(device: Device = None) -> int:
    """vramscope's peak of reserved bytes since attach or ``reset_peak``."""
    return _slow("max_memory_reserved", device)


def max_memory_requested(device: Device = None) -> int:
    """vramscope's peak of requested bytes since attach or ``reset_peak``."""
    return _slow("max_memory_requested", device)


def reset_peak(device: Device = None) -> None:
    """Restarts vramscope's peaks on ``device``. Never calls torch's ``reset_peak_memory_stats``:
    the user's ``torch.cuda.max_memory_allocated()`` keeps its meaning."""
    _slow("reset_peak", device)


def memory_stats(device: Device = None) -> dict[str, Any]:
    """vramscope's counters for ``device`` as a flat dict (keys ending ``_bytes`` are bytes);
    empty before CUDA is initialised and on a machine without a GPU, like
    ``torch.cuda.memory_stats``."""
    return dict(_slow("stats", device))


def memory_breakdown(device: Device = None) -> dict[str, Any] | None:
    """What the driver charges this process on ``device``, part by part, at the agent's last
    settled pairing: ``driver_bytes`` = ``reserved_bytes`` (torch; of it ``private_pool_bytes``
    in CUDA graphs' and MemPools' pools) + ``nccl_bytes`` (as NCCL reports it; None: this NCCL
    does not) + ``other_bytes`` (device allocations outside torch: other libraries, NCCL's when
    not reported) + ``context_bytes`` (the CUDA context and its modules), at ``paired_ns``.
    ``excess_bytes`` > 0 says the parts found exceeded the driver's reading. The agent pairs
    every 250 ms, and keeps a pairing only when no segment moved around it (docs/agent-api.md);
    None before its first settled pairing, in polling mode, and without a GPU or NVML."""
    if not _S.ready():
        parse_device(device, lambda: 0)
        return None
    return _S.driver_breakdown(parse_device(device, _S.current, _S.count))


def empty_cache() -> int:
    """Returns cached, unused memory of every device to the driver (``torch.cuda.empty_cache``)
    and says how many bytes of reserved memory that released."""
    if not _S.ready():
        return 0
    return int(_S.reader.empty_cache())


def last_oom() -> dict[str, Any] | None:
    """The most recent out-of-memory error seen by the agent, or None."""
    if not _S.ready():
        return None
    return _S.reader.last_oom()


def device_count() -> int:
    """Devices the agent tracks (0 before it attached)."""
    return _S.device_count()
