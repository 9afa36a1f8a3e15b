# python/vramscope/steps/integrations/transformers.py -- HF TrainerCallback: step memory in its logs
"""``VramscopeCallback`` for the Hugging Face ``Trainer``::

    from vramscope.integrations.transformers import VramscopeCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[VramscopeCallback()])

A vramscope step closes at each optimizer step (``on_step_end``); at each of the Trainer's
logging steps the keys (``vram/peak_allocated_bytes``, ``vram/peak_reserved_bytes``: the
highest over the steps since the last log; ``vram/allocated_bytes``, ``vram/reserved_bytes``,
``vram/non_pytorch_bytes``, and the categories with ``categories=True``: at the last step)
join the Trainer's ``logs`` and ``state.log_history``.

Callback order: the Trainer calls its reporting callbacks (``report_to``: TensorBoard, W&B,
MLflow, ...) before the ones passed in ``callbacks=``, with the same ``logs`` dict, so keys added
by a later callback would never reach them. The callback therefore moves itself to the front
of the Trainer's callback list when training begins.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import CallbackHandler

from .common import KEYS, StepMetrics, window_max

__all__ = ["VramscopeCallback", "KEYS"]


class VramscopeCallback(TrainerCallback):
    """Per-step GPU memory of a Trainer run, added to its logs. ``categories``: the bytes per
    category at the peak (agent in events mode). ``driver``: ``vram/non_pytorch_bytes`` from
    NVML. ``reduce``: the peaks' maximum over ranks (two all-reduces per step; every rank
    steps together under the Trainer). ``device``: the CUDA ordinal followed (default: the
    current device when training begins)."""

    def __init__(self, categories: bool = False, driver: bool = True, reduce: bool = False,
                 device: int | None = None) -> None:
        self._metrics = StepMetrics("transformers", categories=categories, driver=driver,
                                    reduce=reduce, device=device)
        self._pending: list[dict[str, float]] = []

    @property
    def history(self) -> list[Any]:
        """The StepRecords of the last steps (vramscope.StepRecord), oldest first."""
        return list(self._metrics.history)

    @property
    def problem(self) -> str | None:
        """Why nothing is measured (no GPU, ...), None while measuring."""
        return self._metrics.problem

    def _move_to_front(self) -> None:
        # The handler calling us is a caller's `self`; a new list (not an in-place move)
        # leaves the loop that is calling this event over the old one undisturbed.
        frame: FrameType | None = sys._getframe(1)
        for _ in range(8):
            if frame is None:
                return
            handler = frame.f_locals.get("self")
            if isinstance(handler, CallbackHandler) and self in handler.callbacks:
                if handler.callbacks[0] is not self:
                    handler.callbacks = [self] + [c for c in handler.callbacks if c is not self]
                return
            frame = frame.f_back

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._move_to_front()

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, train_dataloader: Any = None,
                       **kwargs: Any) -> None:
        self._move_to_front()
        self._metrics.batch_size = getattr(train_dataloader, "batch_size", None) or \
            getattr(args, "per_device_train_batch_size", None)
        device = getattr(args, "device", None)
        if self._metrics.device is None and device is not None and \
                getattr(device, "type", None) == "cuda":
            self._metrics.device = device.index or 0
        self._metrics.start(model=model, optimizer=optimizer,
                            rank=int(getattr(args, "process_index", 0)),
                            world_size=int(getattr(args, "world_size", 1)))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        metrics = self._metrics.step()
        if metrics:
            self._pending.append(metrics)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if logs is None or not self._pending:
            return
        metrics = window_max(self._pending)
        self._pending = []
        logs.update(metrics)
        # The Trainer appended its copy of these logs to log_history just before on_log.
        history = getattr(state, "log_history", None)
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(metrics)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._metrics.close()
