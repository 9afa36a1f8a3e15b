# python/vramscope/steps/monitor.py -- per-step memory of a training loop: lines, history, leaks
"""``Monitor``: wrap a training loop, call ``step()`` at each step boundary (or let the optimizer
hook do it), and get one compact line every N steps, a bounded per-step history, a warning when
allocated memory keeps growing, and a per-step table at exit.

The numbers per step come from the agent (exact step peaks from allocator events); this module
only bookkeeps and formats them (the formatting and leak logic live in ``_steps``).
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Protocol

from .._core.device import Device, parse_device
from .._core.distributed import reduce_step_peaks, resolve_rank
from .._core.session import SESSION
from .._core.step_history import STEP_HISTORY, StepPoint
from .._core.torchcheck import VramscopeWarning
from .._core.units import non_pytorch_bytes
from ..attribution.model_probe import ModelProbe
from ..postmortem import oom
from .records import (
    CATEGORY_NAMES,
    LeakDetector,
    StepRecord,
    format_leak_warning,
    format_step_line,
    format_step_table,
    history_limit_deque,
)

__all__ = ["Monitor", "StepSink"]


_warned_no_gpu = False


def _warn_no_gpu_once(problem: str) -> None:
    """The one warning of a process whose Monitors can record nothing."""
    global _warned_no_gpu
    if _warned_no_gpu:
        return
    _warned_no_gpu = True
    warnings.warn(f"{problem}; Monitor records nothing (the program runs as it is)",
                  VramscopeWarning, stacklevel=4)


class StepSink(Protocol):
    """Where closed steps go besides the history (the TensorBoard writer is one)."""

    def write_step(self, record: StepRecord) -> None:
        """Receives one device's record of a closed step."""

    def close(self) -> None:
        """Flushes and releases the sink; called once when the Monitor exits."""


def _tensorboard_sink(logdir: str, rank: int, world_size: int) -> StepSink:
    # The TensorBoard writer lives in vramscope.tensorboard (the exporters' module); Monitor only
    # plugs it into _sinks.
    try:
        from .tensorboard import TensorBoardSink
    except ImportError as e:
        raise RuntimeError(
            "vramscope: tensorboard_dir needs vramscope.tensorboard, which this installation "
            f"lacks ({e})") from e
    return TensorBoardSink(logdir, rank=rank, world_size=world_size)


def _categories_of(raw: dict[str, Any]) -> dict[str, int] | None:
    """The agent's per-category bytes of a step record, in CATEGORY_NAMES order, or None."""
    categories = raw.get("categories")
    if categories is None:
        return None
    return {name: int(categories.get(name, 0)) for name in CATEGORY_NAMES}


class Monitor:
    """Per-step GPU memory of a training loop.

    ``every``: print one line every N steps (0: never print). ``devices``: devices to follow
    (default: every visible GPU). ``auto_step``: close a step after each optimizer step (through
    ``torch.optim``'s global post-step hook; with several optimizers, the first one that steps
    marks the steps). ``leak_steps`` / ``leak_threshold_bytes``: warn when step-end allocated
    memory grows at each of ``leak_steps`` consecutive steps by more than the threshold in total.
    ``rank``: overrides the rank shown under DDP (default: torch.distributed, else $RANK).
    ``history_limit``: how many step records ``history`` keeps (oldest dropped first).
    ``exit_table_rows``: rows of the per-step table printed at exit (0: none).
    ``tensorboard_dir``: a run directory (or your own ``SummaryWriter``) that receives per-step
    scalars (vramscope.tensorboard). ``reduce_peaks``: under torch.distributed, replace each
    step's peaks by their maximum over all ranks before they are recorded, printed and written
    (vramscope.distributed.reduce_step_peaks: two small all-reduces per step, so every rank must
    call ``step()`` at the same steps); rank 0's history and run then carry the job's peak.
    ``model`` / ``optimizer``: turn on the per-category breakdown (parameters, gradients,
    optimizer state, activations, temporaries, other) of each step's peak, in the records, the
    line, the table, the TensorBoard scalars and the agent's segment (so in ``vramscope``
    recordings and exports). ``model`` alone still splits parameters, gradients and activations;
    ``optimizer`` adds its state. Needs the agent in events mode; otherwise a warning says why
    and the records carry no categories.
    ``driver``: at each step, ask NVML what the driver charges this process on each followed
    GPU (usually one NVML process-list call, 9-16 us per GPU on an H200) and record
    driver-used minus reserved as ``non_pytorch_bytes`` (CUDA context, cuBLAS/NCCL workspaces),
    also in TensorBoard. None when NVML cannot tell: no driver, a MIG instance, or a container
    (NVML lists host pids).
    """

    def __init__(self, every: int = 10, devices: Sequence[Device] | None = None,
                 print_fn: Callable[[str], Any] = print, tensorboard_dir: str | None = None,
                 auto_step: bool = False, leak_steps: int = 5,
                 leak_threshold_bytes: int = 1 << 20, rank: int | None = None,
                 history_limit: int = 100_000, exit_table_rows: int = 20,
                 reduce_peaks: bool = False, model: Any = None,
                 optimizer: Any = None, driver: bool = True) -> None:
        if optimizer is not None and model is None:
            raise ValueError("vramscope: optimizer= needs model= (the categories are tagged from "
                             "the model's parameters)")
        if model is not None and not hasattr(model, "parameters"):
            raise TypeError("vramscope: model= must be a torch.nn.Module (it has no parameters())")
        if every < 0:
            raise ValueError("vramscope: every must be >= 0 (0 prints nothing)")
        if exit_table_rows < 0:
            raise ValueError("vramscope: exit_table_rows must be >= 0")
        self.every = every
        self.print_fn = print_fn
        self.auto_step = auto_step
        self.exit_table_rows = exit_table_rows
        self.reduce_peaks = bool(reduce_peaks)
        self._device_args = list(devices) if devices is not None else None
        self._devices: list[int] | None = None
        self._explicit_rank = rank
        (self.rank, self.world_size), self._rank_final = resolve_rank(rank)
        self._history = history_limit_deque(history_limit)
        self._leaks = LeakDetector(leak_steps, leak_threshold_bytes)
        self._last_allocated: dict[int, int] = {}
        self._step = 0
        self._hook: Any = None
        self._step_optimizer: weakref.ref | None = None
        self._tensorboard_dir = tensorboard_dir
        #: Extra destinations of every step record (objects with write_step() and close()).
        self._sinks: list[StepSink] = []
        self._model = model
        self._optimizer = optimizer
        self._driver = bool(driver)
        #: The CategoryTracker while categories are on (Monitor(model=...)), else None.
        self._categories: Any = None
        self._active = False
        self._oom_calls_at_start = 0
        #: The batch size (one pre-hook on the top-level module) and model facts for the OOM
        #: advice; the model is model=, else looked for in the callers at the first steps.
        self._probe = ModelProbe()

    # ----- lifecycle
    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc is not None:
                # An OOM leaving the loop gets its post-mortem (written by the observer, else
                # now) before the exit table; the exception itself propagates unchanged.
                oom.report_exception(exc, self._oom_calls_at_start)
        finally:
            self.close()

    def start(self) -> None:
        """Attaches the agent (lazily if CUDA is not initialised) and installs the hook. Without
        a usable GPU (a CPU-only laptop, CI) the Monitor is a quiet no-op: one warning per
        process, no lines, no table, ``step()`` returns ``[]``, so an instrumented training
        script runs unchanged where torch runs on the CPU."""
        if self._active:
            return
        problem = SESSION.no_gpu()
        if problem is not None:
            _warn_no_gpu_once(problem)
            self._active = True
            return
        SESSION.attach()
        if self._tensorboard_dir is not None:
            self._sinks.append(_tensorboard_sink(self._tensorboard_dir, self.rank,
                                                 self.world_size))
        if self._model is not None:
            # Before the step hook: the tracker's phase hooks then run around ours.
            self._start_categories()
        if self.auto_step:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            self._hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        if self._model is not None:
            self._probe.attach(self._model, self._optimizer)
        self._active = True
        self._oom_calls_at_start = oom.observer_calls()
        oom.add_provider(self._oom_evidence)
        if SESSION.device_count() > 0:
            # Memory allocated before the loop is the baseline of the first step's delta.
            for device in self._resolve_devices():
                self._last_allocated[device] = SESSION.reader.memory_allocated(device)

    def close(self) -> None:
        """Removes the hook, prints the exit table, closes the sinks. Idempotent."""
        if not self._active:
            return
        self._active = False
        oom.remove_provider(self._oom_evidence)
        self._probe.close()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._categories is not None:
            self._categories.close()
            self._categories = None
        if self.every and self.exit_table_rows and self._history:
            self.print_fn(self.table(last=self.exit_table_rows).rstrip("\n"))
        sinks, self._sinks = self._sinks, []
        for sink in sinks:
            sink.close()

    def _oom_evidence(self, device: int) -> dict[str, Any]:
        """The OOM report's step history (this Monitor's last steps on ``device``, with their
        batch sizes) and what the probe knows of the model, the optimizer and the stack."""
        points = [StepPoint(r.step, r.peak_allocated_bytes, r.allocated_bytes, r.batch_size,
                                r.peak_reserved_bytes)
                  for r in self._history if r.device == device]
        stack = oom.oom_stack()
        out = self._probe.evidence(*stack) if stack is not None else self._probe.evidence()
        if points:
            out["steps"] = points[-STEP_HISTORY:]
        return out

    def _start_categories(self) -> None:
        from ..attribution.profile import CategoryTracker
        # The model is on the GPU by now, so CUDA is initialised; if not, tagging needs it anyway.
        mode = SESSION.attach(init_cuda=True)
        problem = None
        if not mode.startswith("events"):
            # Polling (cudaMallocAsync, no agent): no events, so no ledger to split the peak.
            problem = f"the agent is not in events mode ({mode})"
        else:
            try:
                self._categories = CategoryTracker(self._model, self._optimizer,
                                                   in_step_records=True)
            except RuntimeError as e:
                problem = str(e)
        if problem is not None:
            warnings.warn(f"vramscope: Monitor(model=...) records no categories: {problem}",
                          VramscopeWarning, stacklevel=4)

    # ----- steps
    def _on_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        marker = self._step_optimizer() if self._step_optimizer is not None else None
        if marker is None:
            self._step_optimizer = weakref.ref(optimizer)
        elif marker is not optimizer:
            return
        self._probe.set_optimizer(optimizer)
        self.step()

    def _resolve_devices(self) -> list[int]:
        if self._devices is None:
            count = SESSION.device_count()
            if self._device_args is None:
                self._devices = list(range(count))
            else:
                self._devices = sorted({parse_device(d, SESSION.current, count)
                                        for d in self._device_args})
        return self._devices

    def _refresh_rank(self) -> None:
        if self._rank_final:
            return
        (rank, world), self._rank_final = resolve_rank(self._explicit_rank)
        if (rank, world) != (self.rank, self.world_size) or self._rank_final:
            self.rank, self.world_size = rank, world
            SESSION.set_rank(rank, world)

    def step(self) -> list[StepRecord]:
        """Closes the current step; returns its records (one per followed device)."""
        self._step += 1
        if self._categories is not None:
            # Tags must be in the ledger before the agent closes the step and reads its peak.
            self._categories.tag()
        raw = SESSION.step_all()
        if not raw:
            return []
        if not self._probe.attached:
            self._probe.discover(sys._getframe(1))
        else:
            self._probe.step_end()
        self._refresh_rank()
        wanted = set(self._resolve_devices())
        records = []
        for r in raw:
            device = int(r["device"])
            if device not in wanted:
                continue
            allocated = int(r["allocated_bytes"])
            record = StepRecord(
                step=self._step, device=device, rank=self.rank, world_size=self.world_size,
                allocated_bytes=allocated, reserved_bytes=int(r["reserved_bytes"]),
                peak_allocated_bytes=int(r["peak_allocated_bytes"]),
                peak_reserved_bytes=int(r["peak_reserved_bytes"]),
                peak_requested_bytes=int(r["peak_requested_bytes"]),
                delta_allocated_bytes=allocated - self._last_allocated.get(device, 0),
                duration_ns=int(r.get("duration_ns", 0)),
                categories=_categories_of(r),
                non_pytorch_bytes=self._non_pytorch_bytes(device, int(r["reserved_bytes"])),
                batch_size=self._probe.batch_size)
            self._last_allocated[device] = allocated
            records.append(record)
        return self._record_step(records)

    def _non_pytorch_bytes(self, device: int, reserved_bytes: int) -> int | None:
        # One NVML process-list call per GPU per step (9-16 us on an H200): the driver's bytes for
        # this pid minus the allocator's reserved bytes = CUDA context, library workspaces.
        if not self._driver:
            return None
        return non_pytorch_bytes(SESSION.driver_process_bytes(device), reserved_bytes)

    def _record_step(self, records: list[StepRecord]) -> list[StepRecord]:
        # Everything after the agent's numbers became records: the job-wide reduction (a
        # collective, so every rank reaches it at every step), then history, leaks, sinks, line.
        if self.reduce_peaks:
            records = reduce_step_peaks(records)
        self._history.extend(records)
        for record in records:
            leak = self._leaks.observe(record.device, record.allocated_bytes)
            if leak is not None:
                warnings.warn(format_leak_warning(leak, self.rank, self.world_size),
                              VramscopeWarning, stacklevel=3)
            for sink in self._sinks:
                sink.write_step(record)
        if self.every and self._step % self.every == 0:
            self.print_fn(format_step_line(records))
        return records

    # ----- results
    @property
    def history(self) -> list[StepRecord]:
        """Every kept step record, oldest first."""
        return list(self._history)

    @property
    def steps(self) -> int:
        """Steps closed so far."""
        return self._step

    def table(self, last: int | None = None) -> str:
        """The per-step table of the history (only the ``last`` steps when given)."""
        records = self.history
        if last is not None and records:
            first_step = records[-1].step - last + 1
            records = [r for r in records if r.step >= first_step]
        return format_step_table(records)
