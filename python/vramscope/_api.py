# python/vramscope/_api.py -- the torch.cuda-style functions and the (lazy) attach behind them
"""Reading functions named like ``torch.cuda``'s, answered by the agent extension.

Speed: after attach, ``memory_allocated()`` is one global lookup, one device read and one call
into the extension, well under a microsecond; everything unusual (first use, strings,
``torch.device``, errors) takes ``_slow``. Attach: the agent can only hook allocators that exist,
that is after CUDA is initialised. When it is not yet, the attach is queued with
``torch.cuda._lazy_call`` and runs right after the program initialises CUDA; until then nothing
is allocated and the readers return 0, as ``torch.cuda`` does.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any, Callable, Dict, Optional

from . import _dist, _torchcheck
from ._device import Device, parse_device
from ._polling import PollingReader

# The reader (the _agent module or a PollingReader), set once attached. _count and _current are
# set before it so that the fast path never sees a reader without them.
_reader: Any = None
_count = 0
_current: Callable[[], int] = int
_mode = "detached"
_options: Dict[str, Any] = {"interval_ms": 10.0, "publish": True, "rank": None,
                            "world_size": None}
_lock = threading.RLock()
#: Why no reader can ever attach in this process (torch without CUDA, no visible GPU), once a
#: reader found out: the readers then answer as torch.cuda does on such a machine (0, {}).
_no_gpu: Optional[str] = None


def mode() -> str:
    """``"detached"``, ``"pending"`` (attach queued until CUDA initialises), ``"events"`` (exact,
    from allocator events) or ``"polling: <reason>"``."""
    return _reader.mode() if _reader is not None else _mode


def attach(interval_ms: float = 10.0, publish: bool = True, rank: Optional[int] = None,
           world_size: Optional[int] = None, init_cuda: bool = False) -> str:
    """Attaches the agent to every CUDA device of this process and returns the mode.

    If CUDA is not initialised yet (and ``init_cuda`` is False) the attach is queued and runs as
    soon as the program initialises CUDA; returns ``"pending"`` then. ``interval_ms`` is how often
    the agent thread publishes to the shared-memory segment that ``vramscope`` (the CLI) reads;
    ``publish=False`` keeps everything in-process. Idempotent: a second call returns the mode.
    """
    if interval_ms <= 0:
        raise ValueError("vramscope: interval_ms must be positive")
    torch = _torchcheck.import_torch()
    _torchcheck.check_cuda(torch)
    with _lock:
        if _reader is not None:
            return mode()
        _options.update(interval_ms=float(interval_ms), publish=bool(publish), rank=rank,
                        world_size=world_size)
        if init_cuda:
            torch.cuda.init()
        return _attach_or_queue(torch)


def _attach_or_queue(torch: ModuleType) -> str:
    global _mode
    if torch.cuda.is_initialized():
        _attach_now(torch)
        return mode()
    if _mode != "pending":
        _mode = "pending"
        torch.cuda._lazy_call(lambda: _attach_deferred(torch))
    return _mode


def _attach_deferred(torch: ModuleType) -> None:
    # Runs inside torch.cuda._lazy_init: an exception here would become the user's
    # DeferredCudaCallError, so every failure degrades to a warning instead.
    global _mode
    try:
        _attach_now(torch)
    except Exception as e:  # noqa: BLE001 -- see above
        _mode = "detached"
        _torchcheck.warn_polling_once(f"the agent could not attach ({e})")


def _device_uuids(torch: ModuleType, count: int) -> list:
    uuids = []
    for i in range(count):
        text = str(torch.cuda.get_device_properties(i).uuid)
        uuids.append(text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}")
    return uuids


def _attach_now(torch: ModuleType) -> None:
    global _reader, _count, _current, _mode
    with _lock:
        if _reader is not None:
            return
        agent, problem = _torchcheck.load_agent(torch)
        if agent is not None:
            (rank, world), _ = _dist.resolve_rank(_options["rank"])
            if _options["world_size"] is not None:
                world = int(_options["world_size"])
            count = torch.cuda.device_count()
            try:
                agent.attach(_options["interval_ms"], _options["publish"], rank, world,
                             _device_uuids(torch, count))
            except RuntimeError as e:
                agent, problem = None, f"the agent could not attach ({e})"
        if agent is not None:
            reader: Any = agent
            from . import oom
            oom.install(agent)
        else:
            _torchcheck.warn_polling_once(str(problem))
            reader = PollingReader(torch, str(problem))
        _count = reader.device_count()
        _current = torch._C._cuda_getDevice
        _reader = reader
        _mode = reader.mode()


def no_gpu() -> Optional[str]:
    """Why this process can have no agent (one line: torch without CUDA, no visible GPU), or
    None. Raises ImportError when torch is missing."""
    global _no_gpu
    if _reader is not None:
        return None
    if _no_gpu is None:
        _no_gpu = _torchcheck.cuda_problem(_torchcheck.import_torch())
    return _no_gpu


def _ready() -> bool:
    """True once a reader exists; else attaches (or queues the attach) and says whether it can
    answer now. Without a usable GPU it says False, like torch.cuda before CUDA is initialised
    (torch.cuda.memory_allocated() is 0 on a CPU-only machine); no torch raises ImportError."""
    if _reader is not None:
        return True
    if no_gpu() is not None:
        return False
    torch = _torchcheck.import_torch()
    with _lock:
        if _reader is None:
            _attach_or_queue(torch)
    return _reader is not None


def _index(device: Device) -> int:
    return parse_device(device, _current, _count)


def _slow(name: str, device: Device) -> Any:
    if not _ready():
        # CUDA is not initialised (or there is no GPU): validate the argument's shape, then
        # answer like torch.cuda.
        parse_device(device, lambda: 0)
        return {} if name == "stats" else 0
    return getattr(_reader, name)(_index(device))


def memory_allocated(device: Device = None) -> int:
    """Bytes occupied by tensors on ``device`` (like ``torch.cuda.memory_allocated``)."""
    r = _reader
    if r is not None:
        if device is None:
            return r.memory_allocated(_current())
        if type(device) is int and 0 <= device < _count:
            return r.memory_allocated(device)
    return _slow("memory_allocated", device)


def memory_reserved(device: Device = None) -> int:
    """Bytes held by the caching allocator on ``device`` (like ``torch.cuda.memory_reserved``)."""
    r = _reader
    if r is not None:
        if device is None:
            return r.memory_reserved(_current())
        if type(device) is int and 0 <= device < _count:
            return r.memory_reserved(device)
    return _slow("memory_reserved", device)


def memory_requested(device: Device = None) -> int:
    """Bytes requested by tensors on ``device``, before the allocator's rounding."""
    r = _reader
    if r is not None:
        if device is None:
            return r.memory_requested(_current())
        if type(device) is int and 0 <= device < _count:
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


def memory_stats(device: Device = None) -> Dict[str, Any]:
    """vramscope's counters for ``device`` as a flat dict (keys ending ``_bytes`` are bytes);
    empty before CUDA is initialised and on a machine without a GPU, like
    ``torch.cuda.memory_stats``."""
    return dict(_slow("stats", device))


def empty_cache() -> int:
    """Returns cached, unused memory of every device to the driver (``torch.cuda.empty_cache``)
    and says how many bytes of reserved memory that released."""
    if not _ready():
        return 0
    return int(_reader.empty_cache())


def last_oom() -> Optional[Dict[str, Any]]:
    """The most recent out-of-memory error seen by the agent, or None."""
    if not _ready():
        return None
    return _reader.last_oom()


def device_count() -> int:
    """Devices the agent tracks (0 before it attached)."""
    return _count if _reader is not None else 0


def step_all() -> list:
    """Closes the current step on every device; the records the agent returns (one per device),
    or an empty list before CUDA is initialised."""
    if not _ready():
        return []
    records = list(_reader.step())
    from . import oom

    oom.record_steps(_reader, records)
    return records


def set_rank(rank: int, world_size: int) -> None:
    """Tells the agent which distributed rank this process is (published with its stats)."""
    if _reader is not None:
        _reader.set_rank(rank, world_size)
