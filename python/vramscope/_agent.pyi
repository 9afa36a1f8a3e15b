# python/vramscope/_agent.pyi -- types of the C++ agent extension (contract: docs/agent-api.md)
"""The in-process allocator agent: exact counters from PyTorch's allocator trace events.

Devices are CUDA ordinals. Nothing here takes or returns torch objects.
"""

def attach(
    interval_ms: float = 10.0,
    publish: bool = True,
    rank: int = -1,
    world_size: int = -1,
    device_uuids: list[str] = [],
) -> str:
    """Attaches to every CUDA device (CUDA must be initialised); returns "events" or
    "polling: <reason>". Idempotent. Raises RuntimeError when CUDA is not initialised."""

def is_attached() -> bool:
    """Has attach() succeeded in this process?"""

def mode() -> str:
    """The current mode: "events", "polling: <reason>" or "detached"."""

def device_count() -> int:
    """Devices tracked."""

def memory_allocated(device: int) -> int:
    """Allocated bytes (getDeviceStats, exact)."""

def memory_reserved(device: int) -> int:
    """Reserved bytes (from segment events, exact)."""

def memory_requested(device: int) -> int:
    """Requested bytes (from alloc/free events, exact)."""

def max_memory_allocated(device: int) -> int:
    """vramscope's peak of allocated bytes since attach or reset_peak."""

def max_memory_reserved(device: int) -> int:
    """vramscope's peak of reserved bytes since attach or reset_peak."""

def max_memory_requested(device: int) -> int:
    """vramscope's peak of requested bytes since attach or reset_peak."""

def reset_peak(device: int) -> None:
    """Restarts vramscope's peaks (never torch's)."""

def stats(device: int) -> dict[str, int | bool]:
    """Every counter of the device."""

def step() -> list[dict[str, int]]:
    """Closes the current step on every device; one record per device."""

def set_rank(rank: int, world_size: int) -> None:
    """Sets the distributed rank published with the stats."""

def empty_cache() -> int:
    """Empties the allocator cache; bytes of reserved memory released."""

def last_oom() -> dict[str, int] | None:
    """The most recent OOM seen, or None."""

def recent_events(device: int) -> list[dict[str, int | str]]:
    """The last events of a device, oldest first (OOM post-mortem)."""

def allocator_backend() -> str:
    """The allocator backend: "native", "cudaMallocAsync" or "pluggable"."""

def segment_path() -> str:
    """The shared-memory segment file ("" when not publishing)."""

def torch_version() -> str:
    """The torch version the module was built against."""
