# python/vramscope/steps/integrations/common.py -- what the callbacks share: steps -> logged keys
"""``StepMetrics`` closes a step with the agent at each optimizer step a framework reports and
turns the record into the few keys the callbacks log (``KEYS``); it also gives the OOM
post-mortem the batch size the framework knows and the steps it saw.

It reads the agent through the session (vramscope._session), not a ``Monitor``: a framework owns the
loop, its loggers print and write, so nothing here prints. Without a GPU it stays off and
``step()`` returns ``{}``: the callbacks are safe in a CPU run of the same script.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

from ..._core import torchcheck
from ..._core.session import SESSION
from ..._core.step_history import STEP_HISTORY, StepPoint
from ..._core.units import non_pytorch_bytes
from ...attribution.model_probe import ModelProbe
from ...postmortem import oom
from ..records import CATEGORY_NAMES, StepRecord

__all__ = ["KEYS", "StepMetrics", "gpu_problem"]

#: Every key the callbacks log (bytes; the category keys only with categories=True, the
#: non-PyTorch one only when NVML can tell).
KEYS = ("vram/peak_allocated_bytes", "vram/peak_reserved_bytes", "vram/allocated_bytes",
        "vram/reserved_bytes", "vram/non_pytorch_bytes") + tuple(
            f"vram/{name}_bytes" for name in CATEGORY_NAMES)


def gpu_problem() -> str | None:
    """Why GPU memory cannot be measured in this process, or None when it can."""
    if SESSION.reader is not None and SESSION.device_count() > 0:
        return None
    try:
        torch = torchcheck.import_torch()
        torchcheck.check_cuda(torch)
    except (ImportError, RuntimeError) as e:
        return str(e).removeprefix("vramscope: ")
    return None


class StepMetrics:
    """Per-step peaks of one device (default: the current one at ``start``) as logged keys.
    ``categories``: also the bytes per category at the step's peak (events mode only; the
    model's parameters, gradients and the optimizer's state are tagged at each step end).
    ``reduce``: replace the peaks by their maximum over the ranks (two small all-reduces per
    step; every rank must log at the same steps). ``framework`` names the batch's source in the
    OOM report."""

    def __init__(self, framework: str, categories: bool = False, driver: bool = True,
                 reduce: bool = False, device: int | None = None) -> None:
        self.framework = framework
        self.categories = categories
        self.driver = driver
        self.reduce = reduce
        self.device = device
        #: Why nothing is measured (None while measuring).
        self.problem: str | None = "not started"
        self.batch_size: int | None = None
        self.rank, self.world_size = 0, 1
        #: The records of the last steps (StepRecord), oldest first.
        self.history: collections.deque[StepRecord] = collections.deque(maxlen=STEP_HISTORY)
        self._step = 0
        self._last_allocated = 0
        self._tracker: Any = None
        self._probe = ModelProbe()

    def start(self, model: Any = None, optimizer: Any = None, rank: int = 0,
              world_size: int = 1) -> None:
        """Attaches (CUDA must be initialised by now: the model is on its device) and begins
        the first step. Idempotent."""
        if self.problem is None:
            return
        self.problem = gpu_problem()
        if self.problem is not None:
            return
        SESSION.attach(init_cuda=True)
        if self.device is None:
            self.device = SESSION.current()
        self.rank, self.world_size = rank, world_size
        if world_size > 1:
            SESSION.set_rank(rank, world_size)
        if self.categories and model is not None:
            self._start_categories(model, optimizer)
        if model is not None:
            self._probe.attach(model, optimizer)
        self._last_allocated = SESSION.reader.memory_allocated(self.device)
        oom.add_provider(self._oom_evidence)
        # The first step's peak starts here, not at attach (model loading is not a step).
        SESSION.step_all()

    def _start_categories(self, model: Any, optimizer: Any) -> None:
        from ...attribution.profile import CategoryTracker

        problem = None
        if not SESSION.mode().startswith("events"):
            problem = f"the agent is not in events mode ({SESSION.mode()})"
        else:
            try:
                self._tracker = CategoryTracker(model, optimizer, in_step_records=True)
            except RuntimeError as e:
                problem = str(e)
        if problem is not None:
            warnings.warn(f"vramscope: the {self.framework} callback logs no categories: "
                          f"{problem}", torchcheck.VramscopeWarning, stacklevel=3)

    def step(self) -> dict[str, float]:
        """Closes the step; the keys to log (``{}`` when nothing is measured)."""
        device = self.device  # set by start(), which clears the problem
        if self.problem is not None or device is None:
            return {}
        if self._tracker is not None:
            self._tracker.tag()  # before the agent closes the step and reads its peak
        self._step += 1
        raw = [r for r in SESSION.step_all() if int(r["device"]) == device]
        if not raw:
            return {}
        r = raw[0]
        allocated = int(r["allocated_bytes"])
        categories = r.get("categories")
        record = StepRecord(
            step=self._step, device=device, rank=self.rank, world_size=self.world_size,
            allocated_bytes=allocated, reserved_bytes=int(r["reserved_bytes"]),
            peak_allocated_bytes=int(r["peak_allocated_bytes"]),
            peak_reserved_bytes=int(r["peak_reserved_bytes"]),
            peak_requested_bytes=int(r["peak_requested_bytes"]),
            delta_allocated_bytes=allocated - self._last_allocated,
            duration_ns=int(r.get("duration_ns", 0)),
            categories=None if categories is None else
            {name: int(categories.get(name, 0)) for name in CATEGORY_NAMES},
            non_pytorch_bytes=non_pytorch_bytes(
                SESSION.driver_process_bytes(device) if self.driver else None,
                int(r["reserved_bytes"])),
            batch_size=self.batch_size)
        self._last_allocated = allocated
        if self.reduce:
            from ..._core.distributed import reduce_step_peaks
            record = reduce_step_peaks([record])[0]
        self.history.append(record)
        return metrics_of(record)

    def _oom_evidence(self, device: int) -> dict[str, Any]:
        # Registered after the framework's model probe and any Monitor: these fields win.
        stack = oom.oom_stack()
        out = self._probe.evidence(*stack) if stack is not None else self._probe.evidence()
        if self.batch_size is not None:
            out.update(batch_size=self.batch_size, batch_source=self.framework)
        points = [StepPoint(r.step, r.peak_allocated_bytes, r.allocated_bytes, r.batch_size,
                                r.peak_reserved_bytes) for r in self.history if r.device == device]
        if points:
            out["steps"] = points
        return out

    def close(self) -> None:
        """Drops the OOM provider, the category tracker and the probe's hook. Idempotent."""
        oom.remove_provider(self._oom_evidence)
        self._probe.close()
        if self._tracker is not None:
            self._tracker.close()
            self._tracker = None
        if self.problem is None:
            self.problem = "closed"


def metrics_of(record: StepRecord) -> dict[str, float]:
    """The logged keys of one step record (see KEYS)."""
    out: dict[str, float] = {
        "vram/peak_allocated_bytes": float(record.peak_allocated_bytes),
        "vram/peak_reserved_bytes": float(record.peak_reserved_bytes),
        "vram/allocated_bytes": float(record.allocated_bytes),
        "vram/reserved_bytes": float(record.reserved_bytes),
    }
    if record.non_pytorch_bytes is not None:
        out["vram/non_pytorch_bytes"] = float(record.non_pytorch_bytes)
    if record.categories is not None:
        for name in CATEGORY_NAMES:
            out[f"vram/{name}_bytes"] = float(record.categories.get(name, 0))
    return out


def window_max(metrics: list[dict[str, float]]) -> dict[str, float]:
    """Several steps' keys as one: the peaks' maximum, the other keys of the last step."""
    if not metrics:
        return {}
    out = dict(metrics[-1])
    for key in ("vram/peak_allocated_bytes", "vram/peak_reserved_bytes"):
        out[key] = max(m[key] for m in metrics if key in m)
    return out
