# python/vramscope/integrations/__init__.py -- the frameworks' room: Lightning and Hugging Face
"""What vramscope plugs into the frameworks users already run, one module per framework:

- ``vramscope.integrations.lightning``: ``VramscopeCallback`` (per-step memory in the
  Trainer's loggers) and ``FitBatchSize`` (the largest batch that fits, in place of Lightning's
  ``BatchSizeFinder``);
- ``vramscope.integrations.transformers``: ``VramscopeCallback`` (per-step memory in the
  Trainer's logs) and ``fit_trainer`` (in place of ``auto_find_batch_size``).

The callbacks close their steps through the step pipeline (``common.StepMetrics``); the fit
adapters run ``vramscope.fit`` on the framework's own training step. Each submodule imports its
framework; this package imports neither (no hard dependency). The logged keys are ``KEYS``
(docs/integrations.md).
"""

from .common import KEYS

__all__ = ["KEYS"]
