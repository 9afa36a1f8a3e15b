# python/vramscope/integrations/lightning.py -- public path of the Lightning callback
"""``from vramscope.integrations.lightning import VramscopeCallback``; the code is in
``vramscope.steps.integrations.lightning`` (it imports Lightning)."""

from ..steps.integrations.lightning import KEYS, VramscopeCallback

__all__ = ["VramscopeCallback", "KEYS"]
