# python/vramscope/integrations/transformers.py -- HF Trainer: step memory in its logs, the fit
"""For the Hugging Face ``Trainer``::

    from vramscope.integrations.transformers import VramscopeCallback, fit_trainer
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[VramscopeCallback()])
    fit_trainer(trainer, budget="card")   # the largest per-device batch that fits
    trainer.train()

``VramscopeCallback``: a vramscope step closes at each optimizer step (``on_step_end``); at
each of the Trainer's logging steps the keys (``vram/peak_allocated_bytes``,
``vram/peak_reserved_bytes``: the highest over the steps since the last log;
``vram/allocated_bytes``, ``vram/reserved_bytes``, ``vram/non_pytorch_bytes``, and the
categories with ``categories=True``: at the last step) join the Trainer's ``logs`` and
``state.log_history``. Callback order: the Trainer calls its reporting callbacks (``report_to``:
TensorBoard, W&B, MLflow, ...) before the ones passed in ``callbacks=``, with the same ``logs``
dict, so keys added by a later callback would never reach them. The callback therefore moves
itself to the front of the Trainer's callback list when training begins.

``fit_trainer`` replaces ``TrainingArguments(auto_find_batch_size=True)`` (which halves the
batch after each OOM): it runs a few real training steps at small per-device batch sizes
(``vramscope.fit``: exact peaks, a fitted model, no probe the model does not say fits) through
the Trainer's own data loader, ``compute_loss`` and optimizer, has ``fit`` restore the weights
and the optimizer state (``restore=``), and sets ``per_device_train_batch_size`` to the answer.
Under DDP every rank probes and all take the smallest answer.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import CallbackHandler

from ..predict.fit import fit
from ..predict.search import DEFAULT_MARGIN, FitResult
from .common import KEYS, CallbackReadings, StepMetrics, window_max

__all__ = ["VramscopeCallback", "fit_trainer", "KEYS"]


class VramscopeCallback(TrainerCallback, CallbackReadings):
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
        self._metrics.device_from(getattr(args, "device", None))
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


# ----- the largest batch that fits

def fit_trainer(trainer: Any, budget: Any = None, margin: float = DEFAULT_MARGIN,
                limit: int | None = None,
                multiple: int | None = None, steps: int = 2) -> FitResult:
    """Sets ``trainer.args.per_device_train_batch_size`` to the largest batch that fits
    ``budget`` with ``margin`` kept free, and returns the search's result (the model, the
    answer, its margin, the probes). The Trainer's model must already be on its device."""
    import torch

    model = trainer.model
    if getattr(trainer, "optimizer", None) is None:
        trainer.create_optimizer()
    optimizer = trainer.optimizer
    before = trainer.args.per_device_train_batch_size
    use_bf16 = bool(getattr(trainer.args, "bf16", False))
    use_fp16 = bool(getattr(trainer.args, "fp16", False))

    def step(batch_size: int) -> None:
        trainer._train_batch_size = batch_size
        loader = trainer.get_train_dataloader()
        inputs = trainer._prepare_inputs(next(iter(loader)))
        model.train()
        if use_bf16 or use_fp16:
            dtype = torch.bfloat16 if use_bf16 else torch.float16
            with torch.autocast("cuda", dtype=dtype):
                loss = trainer.compute_loss(model, inputs)
        else:
            loss = trainer.compute_loss(model, inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    device = next(model.parameters()).device
    try:
        result = fit(step, budget, margin=margin, limit=limit, multiple=multiple, steps=steps,
                     device=device.index if device.type == "cuda" else None,
                     restore=(model, optimizer))
    finally:
        # A probe that ran out of memory mid-step leaves gradients behind.
        optimizer.zero_grad(set_to_none=True)
    answer = result.size if result.size > 0 else before
    trainer.args.per_device_train_batch_size = answer
    trainer._train_batch_size = answer * max(1, getattr(trainer.args, "n_gpu", 1))
    return result
