# python/vramscope/predict/lightning.py -- a Lightning BatchSizeFinder that never runs out of memory
"""``FitBatchSize`` replaces Lightning's ``BatchSizeFinder`` (which grows the batch until a step
runs out of memory)::

    from vramscope.predict.lightning import FitBatchSize
    trainer = L.Trainer(callbacks=[FitBatchSize(budget="card", margin=0.01)])
    trainer.fit(module, datamodule)      # runs at the largest batch that fits

At the start of ``fit`` it runs a few real training steps of the module at small batch sizes
(``vramscope.fit``: exact peaks, a fitted model, no probe the model does not say fits), sets
the module's (or datamodule's) ``batch_size`` to the answer, and restores the weights and the
optimizer state the probe steps changed. Under DDP every rank probes and all take the smallest
answer. ``result`` keeps the model, the answer, its margin and the probes.
"""

from __future__ import annotations

import copy
from typing import Any

try:
    import lightning.pytorch as _pl
    from lightning.pytorch.utilities.parsing import lightning_getattr, lightning_setattr
except ImportError:  # the older distribution name
    import pytorch_lightning as _pl  # type: ignore[no-redef]
    from pytorch_lightning.utilities.parsing import (  # type: ignore[assignment]
        lightning_getattr,
        lightning_setattr,
    )

from .fit import fit
from .search import DEFAULT_MARGIN, FitResult

__all__ = ["FitBatchSize"]


def _loss_of(output: Any) -> Any:
    return output["loss"] if isinstance(output, dict) else output


class FitBatchSize(_pl.Callback):
    """Sets ``batch_arg_name`` (default ``batch_size``, on the module, its hparams or the
    datamodule, as Lightning's finder does) to the largest batch that fits ``budget`` with
    ``margin`` kept free. ``limit``/``multiple``/``steps``: as ``vramscope.fit``."""

    def __init__(self, budget: Any = None, margin: float = DEFAULT_MARGIN,
                 batch_arg_name: str = "batch_size", limit: int | None = None,
                 multiple: int | None = None, steps: int = 2) -> None:
        super().__init__()
        self.budget = budget
        self.margin = margin
        self.batch_arg_name = batch_arg_name
        self.limit = limit
        self.multiple = multiple
        self.steps = steps
        #: The search's result (None before fit starts).
        self.result: FitResult | None = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if not pl_module.automatic_optimization:
            raise ValueError("vramscope: FitBatchSize needs automatic optimization (its probe "
                             "steps call training_step, backward and the optimizer)")
        before = lightning_getattr(pl_module, self.batch_arg_name)
        optimizer = trainer.optimizers[0]
        saved_model = copy.deepcopy({k: v.detach().cpu() for k, v in
                                     pl_module.state_dict().items()})
        saved_optimizer = copy.deepcopy(optimizer.state_dict())
        precision = getattr(trainer.strategy, "precision_plugin", None)

        def step(batch_size: int) -> None:
            lightning_setattr(pl_module, self.batch_arg_name, batch_size)
            loader = (trainer.datamodule.train_dataloader() if trainer.datamodule is not None
                      else pl_module.train_dataloader())
            batch = trainer.strategy.batch_to_device(next(iter(loader)))
            pl_module.train()
            context = precision.train_step_context() if precision is not None else None
            if context is not None:
                with context:
                    loss = _loss_of(pl_module.training_step(batch, 0))
            else:
                loss = _loss_of(pl_module.training_step(batch, 0))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        try:
            self.result = fit(step, self.budget, margin=self.margin, limit=self.limit,
                              multiple=self.multiple, steps=self.steps,
                              device=pl_module.device.index)
        finally:
            pl_module.load_state_dict(saved_model)
            optimizer.load_state_dict(saved_optimizer)
            optimizer.zero_grad(set_to_none=True)
        answer = self.result.size if self.result.size > 0 else before
        lightning_setattr(pl_module, self.batch_arg_name, answer)
        if trainer.is_global_zero:
            print(f"vramscope: batch size {answer} (was {before})\n{self.result.describe()}")
