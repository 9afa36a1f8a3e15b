# python/vramscope/integrations/lightning.py -- Lightning: step memory in its loggers, the fit
"""Two Lightning callbacks (``lightning.pytorch``, else ``pytorch_lightning``)::

    from vramscope.integrations.lightning import FitBatchSize, VramscopeCallback
    trainer = L.Trainer(callbacks=[FitBatchSize(budget="card"), VramscopeCallback()])

``VramscopeCallback``: at each training batch end it closes a vramscope step (exact peaks from
the agent) and logs ``vram/peak_allocated_bytes``, ``vram/peak_reserved_bytes``,
``vram/allocated_bytes``, ``vram/reserved_bytes``, ``vram/non_pytorch_bytes`` (when NVML can
tell) and, with ``categories=True``, ``vram/<category>_bytes`` through
``LightningModule.log_dict``: every logger of the Trainer receives them at its own logging
steps. Loggers write from rank 0; ``reduce=True`` logs the maximum over the ranks instead of
rank 0's own peak. The batch's leading dimension goes to the OOM post-mortem, and an OOM leaving
``fit`` gets its report (``on_exception``) also in polling mode.

``FitBatchSize`` replaces Lightning's ``BatchSizeFinder`` (which grows the batch until a step
runs out of memory): at the start of ``fit`` it runs a few real training steps of the module at
small batch sizes (``vramscope.fit``: exact peaks, a fitted model, no probe the model does not
say fits), sets the module's (or datamodule's) ``batch_size`` to the answer, and has ``fit``
restore the weights and the optimizer state the probe steps changed (``restore=``). Under DDP
every rank probes and all take the smallest answer. ``result`` keeps the model, the answer, its
margin and the probes.
"""

from __future__ import annotations

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

from .._core.session import SESSION
from ..attribution.model_probe import leading_dim
from ..predict.fit import fit
from ..predict.search import DEFAULT_MARGIN, FitResult
from .common import KEYS, CallbackReadings, StepMetrics

__all__ = ["VramscopeCallback", "FitBatchSize", "KEYS"]


class VramscopeCallback(_pl.Callback, CallbackReadings):
    """Per-step GPU memory of a Lightning fit, logged with the module's ``log_dict``.
    ``categories``: also the bytes per category at each step's peak (agent in events mode).
    ``driver``: ``vram/non_pytorch_bytes`` from NVML (one process-list call per step).
    ``reduce``: the peaks' maximum over ranks (two all-reduces per step). ``prog_bar``: show
    the peak allocated in the progress bar too. ``device``: the CUDA ordinal followed
    (default: the module's)."""

    def __init__(self, categories: bool = False, driver: bool = True, reduce: bool = False,
                 prog_bar: bool = False, device: int | None = None) -> None:
        super().__init__()
        self.prog_bar = prog_bar
        self._metrics = StepMetrics("lightning", categories=categories, driver=driver,
                                    reduce=reduce, device=device)
        self._observer_calls = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._metrics.device_from(getattr(pl_module, "device", None))
        optimizers = getattr(trainer, "optimizers", None) or [None]
        self._observer_calls = SESSION.postmortem.observer_calls()
        self._metrics.start(model=pl_module, optimizer=optimizers[0],
                            rank=int(trainer.global_rank), world_size=int(trainer.world_size))

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        size = leading_dim((batch,))
        if size is not None:
            self._metrics.batch_size = size

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        metrics = self._metrics.step()
        if not metrics:
            return
        pl_module.log_dict(metrics, on_step=True, on_epoch=False, logger=True, prog_bar=False,
                           batch_size=self._metrics.batch_size or 1)
        if self.prog_bar:
            pl_module.log("vram_peak_gib", metrics["vram/peak_allocated_bytes"] / 2 ** 30,
                          on_step=True, on_epoch=False, logger=False, prog_bar=True,
                          batch_size=self._metrics.batch_size or 1)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._metrics.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # The observer wrote the report of an allocator OOM already; this covers the others.
        SESSION.postmortem.report_exception(exception, self._observer_calls)
        self._metrics.close()


# ----- the largest batch that fits

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
                              device=pl_module.device.index, restore=(pl_module, optimizer))
        finally:
            # A probe that ran out of memory mid-step leaves gradients behind.
            optimizer.zero_grad(set_to_none=True)
        answer = self.result.size if self.result.size > 0 else before
        lightning_setattr(pl_module, self.batch_arg_name, answer)
        if trainer.is_global_zero:
            print(f"vramscope: batch size {answer} (was {before})\n{self.result.describe()}")
