# python/vramscope/steps/pipeline.py -- the one step pipeline: a closed step -> StepRecords, once
"""``StepPipeline`` closes a training step for everyone who closes steps: ``Monitor`` (and
``vramscope run``, which runs one), the Lightning and Hugging Face callbacks. At each step end:

1. tag the categories (``CategoryTracker``: parameters, gradients, optimizer state must be in
   the agent's ledger before it reads the step's peak);
2. close the step with the agent (``SESSION.step_all()``, which also feeds the session's step
   history for the OOM report);
3. build each followed device's ``StepRecord`` once (``StepRecord.from_agent``): the agent's
   numbers, the categories, the non-PyTorch bytes from NVML, the batch size, the rank;
4. when asked, replace the peaks by their maximum over the ranks (a collective);
5. keep them in the bounded history, which is also what the OOM post-mortem gets from this
   pipeline (its one evidence provider, with what the model probe knows).

What the users add is presentation only: Monitor prints lines, warns of leaks and feeds sinks;
the callbacks turn records into logged keys.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from types import FrameType
from typing import Any

from .._core.device import Device, parse_device
from .._core.distributed import reduce_step_peaks, resolve_rank
from .._core.evidence import FRAMEWORK, STEPS, Stack
from .._core.session import SESSION
from .._core.step_history import STEP_HISTORY, StepPoint
from .._core.units import non_pytorch_bytes
from ..attribution.model_probe import ModelProbe
from .records import StepRecord, history_limit_deque

__all__ = ["StepPipeline"]


class StepPipeline:
    """Closes steps and keeps their records. ``devices``: the devices followed (default every
    device of the session; ``follow()`` sets them later). ``framework``: the framework whose
    callback owns the loop ("lightning", "transformers"), None for a Monitor: a framework gives
    the batch size (``batch_size``) and the rank (``set_rank``), a Monitor's pipeline reads the
    batch from the model probe, finds the model in the caller's frames and follows the rank of
    torch.distributed. ``driver``: ask NVML for the non-PyTorch bytes at each step. ``reduce``:
    the peaks' maximum over the ranks (two small all-reduces per step). ``history_limit``: the
    records kept, oldest dropped first. ``rank``: overrides the rank a Monitor shows."""

    def __init__(self, devices: Sequence[Device] | None = None, framework: str | None = None,
                 driver: bool = True, reduce: bool = False, history_limit: int = STEP_HISTORY,
                 rank: int | None = None) -> None:
        self.framework = framework
        self.driver = bool(driver)
        self.reduce = bool(reduce)
        self._device_args = list(devices) if devices is not None else None
        self._devices: list[int] | None = None
        self._explicit_rank = rank
        #: This process's rank and the number of processes, as the records carry them.
        self.rank, self.world_size = 0, 1
        self._rank_final = framework is not None
        if framework is None:
            (self.rank, self.world_size), self._rank_final = resolve_rank(rank)
        #: The kept records, oldest first.
        self.history: collections.deque[StepRecord] = history_limit_deque(history_limit)
        #: Steps closed so far (the number of the last one).
        self.steps = 0
        #: The batch size the framework reports (framework pipelines only).
        self.batch_size: int | None = None
        #: The batch size (one pre-hook on the top-level module) and the model's facts.
        self.probe = ModelProbe()
        #: The CategoryTracker while categories are on, else None.
        self._categories: Any = None
        self._last_allocated: dict[int, int] = {}

    # ----- setup
    def follow(self, devices: Sequence[Device]) -> None:
        """Follows ``devices`` from now on (a framework knows its device only when it starts)."""
        self._device_args = list(devices)
        self._devices = None

    def devices(self) -> list[int]:
        """The CUDA ordinals followed (resolved once the session has devices)."""
        if self._devices is None:
            count = SESSION.device_count()
            if self._device_args is None:
                self._devices = list(range(count))
            else:
                self._devices = sorted({parse_device(d, SESSION.current, count)
                                        for d in self._device_args})
        return self._devices

    def set_rank(self, rank: int, world_size: int) -> None:
        """The rank a framework reports (final: torch.distributed is not asked); published with
        the agent's stats when the job is distributed."""
        self.rank, self.world_size, self._rank_final = rank, world_size, True
        if world_size > 1:
            SESSION.set_rank(rank, world_size)

    def start_categories(self, model: Any, optimizer: Any) -> str | None:
        """Turns the per-category breakdown on (attaches first: the model is on its GPU by
        now); returns why it stays off (not in events mode, ...), None when it is on."""
        from ..attribution.profile import CategoryTracker

        mode = SESSION.attach(init_cuda=True)
        if not mode.startswith("events"):
            # Polling (cudaMallocAsync, no agent): no events, so no ledger to split the peak.
            return f"the agent is not in events mode ({mode})"
        try:
            self._categories = CategoryTracker(model, optimizer, in_step_records=True)
        except RuntimeError as e:
            return str(e)
        return None

    def start(self) -> None:
        """Takes the baseline of the first step's delta (memory allocated before the loop) and
        starts feeding the OOM post-mortem. Call once the session is attached."""
        if SESSION.device_count() > 0:
            for device in self.devices():
                self._last_allocated[device] = SESSION.reader.memory_allocated(device)
        SESSION.evidence.add(self._oom_evidence, STEPS if self.framework is None else FRAMEWORK)

    def begin(self) -> None:
        """Starts the first step's peak now: what came before (loading the model) is no step."""
        SESSION.step_all()

    # ----- steps
    def close_step(self, caller: FrameType | None = None) -> list[StepRecord]:
        """Closes the current step; its records (one per followed device), reduced and kept.
        ``caller``: the frame of the training loop, where a Monitor looks for the model."""
        self.steps += 1
        if self._categories is not None:
            # Tags must be in the ledger before the agent closes the step and reads its peak.
            self._categories.tag()
        raw = SESSION.step_all()
        # The OOMs observed during the step did not end it (caught: cuDNN's smaller workspace).
        SESSION.postmortem.step_ended()
        if not raw:
            return []
        if self.framework is None:
            if not self.probe.attached:
                self.probe.discover(caller)
            else:
                self.probe.step_end()
            self._refresh_rank()
        wanted = set(self.devices())
        batch_size = self.batch_size if self.framework is not None else self.probe.batch_size
        records = []
        if self.driver:
            SESSION.report_nccl()
        for r in raw:
            device = int(r["device"])
            if device not in wanted:
                continue
            breakdown = SESSION.driver_breakdown(device) if self.driver else None
            record = StepRecord.from_agent(
                r, step=self.steps, rank=self.rank, world_size=self.world_size,
                previous_allocated_bytes=self._last_allocated.get(device, 0),
                non_pytorch_bytes=self._non_pytorch_bytes(device, int(r["reserved_bytes"])),
                batch_size=batch_size, breakdown=breakdown)
            self._last_allocated[device] = record.allocated_bytes
            records.append(record)
        return self._keep(records)

    def _keep(self, records: list[StepRecord]) -> list[StepRecord]:
        """The last stage of a step: the job-wide reduction (a collective, so every rank
        reaches it at every step), then the history; returns the records as kept."""
        if self.reduce:
            records = reduce_step_peaks(records)
        self.history.extend(records)
        return records

    def _non_pytorch_bytes(self, device: int, reserved_bytes: int) -> int | None:
        # One NVML process-list call per GPU per step (9-16 us on an H200) minus reserved now.
        # At a step's end the stepping thread, which makes the segments, is here: the two
        # readings see the same segments, and they follow what the first steps load into the
        # context at once (the agent's settled pairing, which names the parts, comes every
        # quarter second and may be older).
        if not self.driver:
            return None
        return non_pytorch_bytes(SESSION.driver_process_bytes(device), reserved_bytes)

    def _refresh_rank(self) -> None:
        if self._rank_final:
            return
        (rank, world), self._rank_final = resolve_rank(self._explicit_rank)
        if (rank, world) != (self.rank, self.world_size) or self._rank_final:
            self.rank, self.world_size = rank, world
            SESSION.set_rank(rank, world)

    # ----- the OOM post-mortem
    def _oom_evidence(self, device: int, stack: Stack | None) -> dict[str, Any]:
        """The pipeline's one OOM evidence provider (SESSION.evidence; a framework's outranks a
        Monitor's): the steps of ``device`` (with their batch sizes) and what the probe knows of
        the model, the optimizer and the ``stack``; a framework's batch size beats the probe's."""
        out = self.probe.evidence(*stack) if stack is not None else self.probe.evidence()
        if self.framework is not None and self.batch_size is not None:
            out.update(batch_size=self.batch_size, batch_source=self.framework)
        points = [StepPoint(r.step, r.peak_allocated_bytes, r.allocated_bytes, r.batch_size,
                            r.peak_reserved_bytes) for r in self.history if r.device == device]
        if points:
            out["steps"] = points[-STEP_HISTORY:]
        return out

    def close(self) -> None:
        """Stops feeding the post-mortem, drops the category tracker and the probe's hooks.
        Idempotent."""
        SESSION.evidence.remove(self._oom_evidence)
        self.probe.close()
        if self._categories is not None:
            self._categories.close()
            self._categories = None
