# python/vramscope/steps/integrations/lightning.py -- Lightning Callback: step memory in its loggers
"""``VramscopeCallback`` for ``lightning.pytorch`` (else ``pytorch_lightning``)::

    from vramscope.integrations.lightning import VramscopeCallback
    trainer = L.Trainer(callbacks=[VramscopeCallback()])

At each training batch end it closes a vramscope step (exact peaks from the agent) and logs
``vram/peak_allocated_bytes``, ``vram/peak_reserved_bytes``, ``vram/allocated_bytes``,
``vram/reserved_bytes``, ``vram/non_pytorch_bytes`` (when NVML can tell) and, with
``categories=True``, ``vram/<category>_bytes`` through ``LightningModule.log_dict``: every
logger of the Trainer receives them at its own logging steps. Loggers write from rank 0;
``reduce=True`` logs the maximum over the ranks instead of rank 0's own peak. The batch's
leading dimension goes to the OOM post-mortem, and an OOM leaving ``fit`` gets its report
(``on_exception``) also in polling mode.
"""

from __future__ import annotations

from typing import Any

try:
    import lightning.pytorch as _pl
except ImportError:  # the older distribution name
    import pytorch_lightning as _pl  # type: ignore[no-redef]

from ..._core.session import SESSION
from ...attribution.model_probe import leading_dim
from .common import KEYS, StepMetrics

__all__ = ["VramscopeCallback", "KEYS"]


class VramscopeCallback(_pl.Callback):
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

    @property
    def history(self) -> list[Any]:
        """The StepRecords of the last steps (vramscope.StepRecord), oldest first."""
        return list(self._metrics.history)

    @property
    def problem(self) -> str | None:
        """Why nothing is measured (no GPU, ...), None while measuring."""
        return self._metrics.problem

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        device = getattr(pl_module, "device", None)
        if self._metrics.device is None and device is not None and \
                getattr(device, "type", None) == "cuda":
            self._metrics.device = device.index or 0
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
