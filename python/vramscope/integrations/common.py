# python/vramscope/integrations/common.py -- what the callbacks share: steps -> logged keys
"""``StepMetrics`` closes a step at each optimizer step a framework reports, through the step
pipeline (steps/pipeline.py) as a ``Monitor`` does, and turns the record into the few keys the
callbacks log (``KEYS``); the pipeline also gives the OOM post-mortem the batch size the
framework knows and the steps it saw.

A framework owns the loop and its loggers print and write, so nothing here prints. Without a
GPU it stays off and ``step()`` returns ``{}``: the callbacks are safe in a CPU run of the same
script.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any

from .._core import torchcheck
from .._core.session import SESSION
from .._core.step_history import STEP_HISTORY
from ..steps.pipeline import StepPipeline
from ..steps.records import CATEGORY_NAMES, StepRecord

__all__ = ["KEYS", "StepMetrics", "CallbackReadings"]

#: Every key the callbacks log (bytes; the category keys only with categories=True, the
#: non-PyTorch one only when NVML can tell).
KEYS = ("vram/peak_allocated_bytes", "vram/peak_reserved_bytes", "vram/allocated_bytes",
        "vram/reserved_bytes", "vram/non_pytorch_bytes") + tuple(
            f"vram/{name}_bytes" for name in CATEGORY_NAMES)


class StepMetrics:
    """Per-step peaks of one device (default: the current one at ``start``) as logged keys,
    closed through the step pipeline. ``categories``: also the bytes per category at the
    step's peak (events mode only; the model's parameters, gradients and the optimizer's state
    are tagged at each step end). ``reduce``: replace the peaks by their maximum over the ranks
    (two small all-reduces per step; every rank must log at the same steps). ``framework`` names
    the batch's source in the OOM report."""

    def __init__(self, framework: str, categories: bool = False, driver: bool = True,
                 reduce: bool = False, device: int | None = None) -> None:
        self.framework = framework
        self.categories = categories
        self.device = device
        #: Why nothing is measured (None while measuring).
        self.problem: str | None = "not started"
        #: Closes the steps and keeps the records of the last ones (steps/pipeline.py).
        self.pipeline = StepPipeline(framework=framework, driver=driver, reduce=reduce,
                                     history_limit=STEP_HISTORY)

    @property
    def batch_size(self) -> int | None:
        """The batch size the framework reports (the records and the OOM report carry it)."""
        return self.pipeline.batch_size

    @batch_size.setter
    def batch_size(self, size: int | None) -> None:
        self.pipeline.batch_size = size

    @property
    def history(self) -> collections.deque[StepRecord]:
        """The records of the last steps (StepRecord), oldest first."""
        return self.pipeline.history

    def device_from(self, device: Any) -> None:
        """Follows the framework's ``device`` (a torch.device) when it is a CUDA device and no
        device was given."""
        if self.device is None and getattr(device, "type", None) == "cuda":
            self.device = device.index or 0

    def start(self, model: Any = None, optimizer: Any = None, rank: int = 0,
              world_size: int = 1) -> None:
        """Attaches (CUDA must be initialised by now: the model is on its device) and begins
        the first step. Idempotent."""
        if self.problem is None:
            return
        self.problem = SESSION.no_gpu()
        if self.problem is not None:
            return
        SESSION.attach(init_cuda=True)
        if self.device is None:
            self.device = SESSION.current()
        self.pipeline.follow([self.device])
        self.pipeline.set_rank(rank, world_size)
        if self.categories and model is not None:
            problem = self.pipeline.start_categories(model, optimizer)
            if problem is not None:
                warnings.warn(f"vramscope: the {self.framework} callback logs no categories: "
                              f"{problem}", torchcheck.VramscopeWarning, stacklevel=2)
        if model is not None:
            self.pipeline.probe.attach(model, optimizer)
        self.pipeline.start()
        self.pipeline.begin()

    def step(self) -> dict[str, float]:
        """Closes the step; the keys to log (``{}`` when nothing is measured)."""
        if self.problem is not None or self.device is None:
            return {}
        records = self.pipeline.close_step()
        return metrics_of(records[0]) if records else {}

    def close(self) -> None:
        """Drops the OOM provider, the category tracker and the probe's hook. Idempotent."""
        self.pipeline.close()
        if self.problem is None:
            self.problem = "closed"


class CallbackReadings:
    """What every framework callback answers besides its hooks, from its ``StepMetrics``
    (``self._metrics``)."""

    _metrics: StepMetrics

    @property
    def history(self) -> list[StepRecord]:
        """The StepRecords of the last steps (vramscope.StepRecord), oldest first."""
        return list(self._metrics.history)

    @property
    def problem(self) -> str | None:
        """Why nothing is measured (no GPU, ...), None while measuring."""
        return self._metrics.problem


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
