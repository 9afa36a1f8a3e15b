# python/vramscope/predict/transformers.py -- HF Trainer: the batch that fits, no halving on OOM
"""``fit_trainer`` replaces ``TrainingArguments(auto_find_batch_size=True)`` (which halves the
batch after each OOM)::

    from vramscope.predict.transformers import fit_trainer
    trainer = Trainer(model, args, train_dataset=ds)
    result = fit_trainer(trainer, budget="card", margin=0.01)
    trainer.train()                       # at the largest per-device batch that fits

It runs a few real training steps at small per-device batch sizes (``vramscope.fit``: exact
peaks, a fitted model, no probe the model does not say fits) through the Trainer's own data
loader, ``compute_loss`` and optimizer, restores the weights and the optimizer state, and sets
``per_device_train_batch_size`` to the answer. Under DDP every rank probes and all take the
smallest answer.
"""

from __future__ import annotations

import copy
from typing import Any

from .fit import fit
from .search import DEFAULT_MARGIN, FitResult

__all__ = ["fit_trainer"]


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
    saved_model = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    saved_optimizer = copy.deepcopy(optimizer.state_dict())
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
                     device=device.index if device.type == "cuda" else None)
    finally:
        model.load_state_dict(saved_model)
        optimizer.load_state_dict(saved_optimizer)
        optimizer.zero_grad(set_to_none=True)
    answer = result.size if result.size > 0 else before
    trainer.args.per_device_train_batch_size = answer
    trainer._train_batch_size = answer * max(1, getattr(trainer.args, "n_gpu", 1))
    return result
