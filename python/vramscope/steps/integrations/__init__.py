# python/vramscope/steps/integrations/__init__.py -- callbacks for the frameworks users already run
"""Per-step GPU memory logged through a framework's own loggers:

- ``vramscope.integrations.lightning.VramscopeCallback``: a Lightning ``Callback``;
- ``vramscope.integrations.transformers.VramscopeCallback``: a Hugging Face ``TrainerCallback``.

Each submodule imports its framework; this package imports neither (no hard dependency). The
logged keys are ``KEYS`` (docs/integrations.md).
"""

from .common import KEYS

__all__ = ["KEYS"]
