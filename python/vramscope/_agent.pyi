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
    """Every counter of the device, keyed (in the order of the C++ table device_stats_fields) by:
    allocated_bytes reserved_bytes requested_bytes active_bytes inactive_split_bytes
    pending_free_bytes peak_allocated_bytes peak_reserved_bytes peak_requested_bytes step
    step_peak_allocated_bytes step_peak_reserved_bytes step_peak_requested_bytes
    current_step_peak_allocated_bytes current_step_peak_reserved_bytes
    current_step_peak_requested_bytes window_peak_allocated_bytes window_peak_reserved_bytes
    window_peak_requested_bytes event_count dropped_event_count unknown_event_count anomaly_count
    allocated_mismatch_count unsettled_count oom_count polling_only"""

def step() -> list[dict[str, Any]]:
    """Closes the current step on every device; one record per device. Its "categories" is
    {category: bytes at the step's peak} while step_categories holds are taken, else None."""

def set_rank(rank: int, world_size: int) -> None:
    """Sets the distributed rank published with the stats."""

def empty_cache() -> int:
    """Empties the allocator cache; bytes of reserved memory released."""

def last_oom() -> dict[str, int] | None:
    """The most recent OOM seen, or None."""

def note_oom(device: int, requested_bytes: int, device_total_bytes: int,
             device_free_bytes: int) -> None:
    """Record an OOM the observer did not see (published to the segment like the observer's)."""

def driver_breakdown(device: int) -> dict[str, int | None] | None:
    """The driver's bytes for this process on torch's device ``device``, part by part, at the
    agent's last settled pairing; None before the first one or without trace events."""

def set_nccl(device: int, version: int, nccl_bytes: int | None) -> None:
    """NCCL as torch reports it on ``device``: version (0: no communicator), bytes (None: not
    reported by this NCCL)."""

def driver_process_bytes(uuid: str, pid: int) -> int | None:
    """Bytes the driver (NVML) charges `pid` on the GPU with this UUID; None when NVML is
    unusable, the GPU is a MIG instance or unknown, or the pid is not listed (NVML lists host
    pids, so not from inside a container's pid namespace). Needs no attach()."""

def driver_probe_error() -> str:
    """Why NVML could not be opened by driver_process_bytes ('' when it was, or not tried)."""

def polling_segment_open(reason: str, device_uuids: Sequence[str], rank: int = -1,
                         world_size: int = -1) -> str:
    """For a process that polls (no agent attached): create its segment, one slot per CUDA
    device named by ``device_uuids``, with ``reason`` (ending in its fix) in its note; returns
    its path. RuntimeError when the agent is attached or the segment cannot be created."""

def polling_segment_publish(device: int, counters: dict[str, int]) -> None:
    """Publish what a poll read on ``device``, marked polled: ``counters`` by the segment's
    counter names (a missing one is 0; another key is a ValueError). Nothing when no polling
    segment is open."""

def polling_segment_set_rank(rank: int, world_size: int) -> None:
    """The rank and world size the polling segment publishes from now on."""

def polling_segment_close() -> None:
    """Remove the polling segment (also done at exit)."""

def recent_events(device: int) -> list[dict[str, int | str]]:
    """The last events of a device, oldest first (OOM post-mortem)."""

def allocator_backend() -> str:
    """The allocator backend: "native", "cudaMallocAsync" or "pluggable"."""

def segment_path() -> str:
    """The shared-memory segment file ("" when not publishing)."""

def load_torch(path: str) -> str:
    """Load the torch-facing library at ``path`` (built for the imported torch;
    vramscope._core.torchcheck chooses it) and return the torch version it was built against.
    Raises RuntimeError when it cannot be loaded."""

def torch_version() -> str:
    """The torch version the loaded torch-facing library was built against."""

# --- attribution and OOM post-mortem (agent/bindings/bind_attribution*.cpp, bind_oom.cpp) ------

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

def module_enter(module_id: int, backward: bool = False) -> None:
    """Open a forward frame (or backward window) of module_id on every device's ledger."""

def module_exit(module_id: int, backward: bool = False, measured: bool = True) -> None:
    """Close the innermost forward frame (or backward window) of module_id on every device."""

def live_by_owner(device: int) -> tuple:
    """({op name: live bytes}, {module id: live bytes}) of one device, owners holding bytes only
    (what the OOM leak evidence keeps at each step end)."""

def module_table(device: int) -> list:
    """Per-module rows of one device ([] before any profile): module_id, forward_calls,
    retained_bytes, max_retained_bytes, backward_calls, backward_peak_bytes, live_bytes."""

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

def oom_snapshot() -> Any:
    """What the OOM observer captured at the last OOM, or None: {'device', 'oom' (last_oom()),
    'stats' (stats() of that device), 'driver_process_bytes' (NVML's bytes for this process on
    it, or None), 'driver_breakdown' (driver_breakdown() of it: the last settled one, or None),
    'segments' (segments(True)), 'recent_events' (per device), 'ops' ([{name, live_bytes,
    live_at_peak_bytes, allocated_bytes}] of the profile mark, or None without attribution),
    'categories' ({category: (live, live_at_peak)} at the step mark, or None)}."""

def oom_snapshot_now(device: int) -> dict[str, Any]:
    """The snapshot oom_snapshot() holds, taken now for ``device``: the post-mortem's one read of
    the agent when the observer did not see the OOM (its segments are the allocator's now)."""

def set_oom_callback(callback: object) -> None:
    """Call callback(device) with the GIL from the OOM observer (None: stop)."""

def tensorboard_step_scalars(record: Any, qualify_rank: bool = False) -> list:
    """[(tag, value), ...] of one Monitor step record (an object with the StepRecord fields),
    from the exporter's tag tables: ``memory/[rank<R>/]cuda<D>/`` (the rank only with
    ``qualify_rank`` and world_size > 1), allocated_bytes, reserved_bytes, the step peaks,
    non_pytorch_bytes when known, ``category/<name>_bytes`` when the record has categories."""

class TensorBoardWriter:
    """Native TensorBoard event-file writer (no tensorboard package needed): the subset of
    torch's SummaryWriter that vramscope.tensorboard uses. Creates ``log_dir`` (0700, parents
    too) and one file ``events.out.tfevents.<secs>.<host>.<pid>.<n>`` (0600) in it."""

    def __init__(self, log_dir: str) -> None: ...
    def add_scalar(
        self,
        tag: str,
        scalar_value: float,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Appends one float32 scalar at global_step (default 0) and walltime (seconds since
        the epoch, default now). Raises RuntimeError once closed."""
    def flush(self) -> None:
        """Writes every buffered event to the file."""
    def close(self) -> None:
        """Flushes and closes the file; idempotent."""
    @property
    def path(self) -> str:
        """The event file's path."""
