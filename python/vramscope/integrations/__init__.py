# python/vramscope/integrations/__init__.py -- public path of the framework callbacks
"""Per-step GPU memory logged through a framework's own loggers:

- ``vramscope.integrations.lightning.VramscopeCallback``: a Lightning ``Callback``;
- ``vramscope.integrations.transformers.VramscopeCallback``: a Hugging Face ``TrainerCallback``.

The code is in the steps room (``vramscope.steps.integrations``); these modules are the import
paths programs and docs use. Each submodule imports its framework; this package imports
neither (no hard dependency). The logged keys are ``KEYS`` (docs/integrations.md).
"""

from ..steps.integrations import KEYS

__all__ = ["KEYS"]
