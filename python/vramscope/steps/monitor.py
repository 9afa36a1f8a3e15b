# python/vramscope/steps/monitor.py -- per-step memory of a training loop: lines, history, leaks
"""``Monitor``: wrap a training loop, call ``step()`` at each step boundary (or let the optimizer
hook do it), and get one compact line every N steps, a bounded per-step history, a warning when
allocated memory keeps growing, and a per-step table at exit.

The numbers per step come from the agent (exact step peaks from allocator events); this module
only presents them: the step pipeline (``steps/pipeline.py``) closes the steps and keeps the
records, ``steps/records.py`` formats them and finds leaks.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Protocol

from .._core.device import Device
from .._core.session import SESSION
from .._core.torchcheck import VramscopeWarning, import_torch
from .pipeline import StepPipeline
from .records import (
    LeakDetector,
    StepRecord,
    format_leak_warning,
    format_step_line,
    format_step_table,
)
from .tensorboard import TensorBoardSink

__all__ = ["Monitor", "StepSink"]


_warned_no_gpu = False


def _warn_no_gpu_once(problem: str) -> None:
    """The one warning of a process whose Monitors can record nothing."""
    global _warned_no_gpu
    if _warned_no_gpu:
        return
    _warned_no_gpu = True
    warnings.warn(f"vramscope: {problem}; Monitor records nothing (the program runs as it is)",
                  VramscopeWarning, stacklevel=4)


class StepSink(Protocol):
    """Where closed steps go besides the history (the TensorBoard writer is one)."""

    def write_step(self, record: StepRecord) -> None:
        """Receives one device's record of a closed step."""

    def close(self) -> None:
        """Flushes and releases the sink; called once when the Monitor exits."""


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
        #: Closes the steps and keeps their records (steps/pipeline.py); the Monitor prints,
        #: warns and feeds the sinks.
        self._pipeline = StepPipeline(devices, driver=driver, reduce=reduce_peaks,
                                      history_limit=history_limit, rank=rank)
        self._leaks = LeakDetector(leak_steps, leak_threshold_bytes)
        self._hook: Any = None
        self._step_optimizer: weakref.ref | None = None
        self._tensorboard_dir = tensorboard_dir
        #: Extra destinations of every step record (add_sink()).
        self._sinks: list[StepSink] = []
        self._model = model
        self._optimizer = optimizer
        self._active = False
        self._oom_calls_at_start = 0

    # ----- lifecycle
    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc is not None:
                # An OOM leaving the loop gets its post-mortem (written by the observer, else
                # now) before the exit table; the exception itself propagates unchanged.
                SESSION.postmortem.report_exception(exc, self._oom_calls_at_start)
        finally:
            self.close()

    def start(self) -> None:
        """Attaches the agent (lazily if CUDA is not initialised) and installs the hook. Without
        a usable GPU (a CPU-only laptop, CI) the Monitor is a quiet no-op: one warning per
        process, no lines, no table, ``step()`` returns ``[]``, so an instrumented training
        script runs unchanged where torch runs on the CPU. Without torch: ImportError."""
        if self._active:
            return
        import_torch()  # no torch, no training loop: one line, as every reader says it
        problem = SESSION.no_gpu()
        if problem is not None:
            _warn_no_gpu_once(problem)
            self._active = True
            return
        SESSION.attach()
        if self._tensorboard_dir is not None:
            self.add_sink(TensorBoardSink(self._tensorboard_dir, rank=self.rank,
                                          world_size=self.world_size))
        if self._model is not None:
            # Before the step hook: the tracker's phase hooks then run around ours.
            self._start_categories()
        if self.auto_step:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            self._hook = register_optimizer_step_post_hook(self._on_optimizer_step)
        if self._model is not None:
            self._pipeline.probe.attach(self._model, self._optimizer)
        self._active = True
        self._oom_calls_at_start = SESSION.postmortem.observer_calls()
        self._pipeline.start()

    def close(self) -> None:
        """Removes the hook, prints the exit table, closes the sinks. Idempotent."""
        if not self._active:
            return
        self._active = False
        self._pipeline.close()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.every and self.exit_table_rows and self._pipeline.history:
            self.print_fn(self.table(last=self.exit_table_rows).rstrip("\n"))
        sinks, self._sinks = self._sinks, []
        for sink in sinks:
            sink.close()

    def add_sink(self, sink: StepSink) -> None:
        """Sends every later step record to ``sink`` too (``sink.write_step(record)``, one call
        per followed device), and closes the sink when the Monitor closes. ``tensorboard_dir``
        adds a TensorBoardSink this way; ``vramscope fit``'s probes add theirs."""
        self._sinks.append(sink)

    def _start_categories(self) -> None:
        problem = self._pipeline.start_categories(self._model, self._optimizer)
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
        self._pipeline.probe.set_optimizer(optimizer)
        self.step()

    def step(self) -> list[StepRecord]:
        """Closes the current step; returns its records (one per followed device)."""
        records = self._pipeline.close_step(sys._getframe(1))
        if not records:
            return []
        return self._show(records)

    def _show(self, records: list[StepRecord]) -> list[StepRecord]:
        # What the Monitor adds to the pipeline's records: leaks, sinks, the line.
        for record in records:
            leak = self._leaks.observe(record.device, record.allocated_bytes)
            if leak is not None:
                warnings.warn(format_leak_warning(leak, self.rank, self.world_size),
                              VramscopeWarning, stacklevel=3)
            for sink in self._sinks:
                sink.write_step(record)
        if self.every and self.steps % self.every == 0:
            self.print_fn(format_step_line(records))
        return records

    @property
    def rank(self) -> int:
        """The distributed rank the records carry (0 when not distributed)."""
        return self._pipeline.rank

    @property
    def world_size(self) -> int:
        """The number of distributed processes (1 when not distributed)."""
        return self._pipeline.world_size

    # ----- results
    @property
    def history(self) -> list[StepRecord]:
        """Every kept step record, oldest first."""
        return list(self._pipeline.history)

    @property
    def steps(self) -> int:
        """Steps closed so far."""
        return self._pipeline.steps

    def table(self, last: int | None = None) -> str:
        """The per-step table of the history (only the ``last`` steps when given)."""
        records = self.history
        if last is not None and records:
            first_step = records[-1].step - last + 1
            records = [r for r in records if r.step >= first_step]
        return format_step_table(records)
