# python/vramscope/_agent.pyi -- types of the C++ agent extension (contract: docs/agent-api.md)
"""The in-process allocator agent: exact counters from PyTorch's allocator trace events.

Devices are CUDA ordinals. Nothing here takes or returns torch objects.
"""

from collections.abc import Sequence
from typing import Any

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

def step() -> list[dict[str, Any]]:
    """Closes the current step on every device; one record per device. Its "categories" is
    {category: bytes at the step's peak} while step_categories holds are taken, else None."""

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

# --- attribution and OOM post-mortem (agent/attribution_glue.cpp) -----------------------------

def profile_start(sampling: float = 1.0) -> None:
    """Start per-op attribution (one profile at a time)."""

def profile_stop() -> None:
    """Stop per-op attribution; the tables stay readable."""

def attribution_acquire() -> None:
    """Start (or join) address attribution without op tracking (categories)."""

def attribution_release() -> None:
    """Drop one hold taken by attribution_acquire()."""

def attribution_active() -> bool:
    """Is any profile() or category tracking running?"""

def step_categories(enable: bool) -> None:
    """Take (True) or drop (False) a hold on per-category bytes in step records."""

def attribution_summary(device: int) -> dict:
    """Ledger totals of one device ({} before any attribution)."""

def op_table(device: int, mark: str = "profile") -> list:
    """Per-op rows of one device ([] before any profile)."""

def categories(device: int, mark: str = "step") -> dict:
    """{category: (live_bytes, live_at_peak_bytes)} of one device ({} without attribution)."""

def tag(device: int, category: str, blocks: Sequence[tuple[int, int]]) -> int:
    """Tag live blocks [(data_ptr, nbytes)] with a category; returns how many were tagged."""

def set_phase(phase: str) -> None:
    """Set the training phase that new allocations are categorised by."""

def restart_attribution_peak(device: int, mark: str) -> None:
    """Restart the ledger's 'profile' or 'step' peak of one device."""

def segments(at_oom: bool = False) -> list:
    """Allocator segments (snapshot without traces): now, or as captured at the last OOM."""

def set_oom_callback(callback: object) -> None:
    """Call callback(device) with the GIL from the OOM observer (None: stop)."""
