# python/vramscope/integrations/transformers.py -- public path of the Hugging Face callback
"""``from vramscope.integrations.transformers import VramscopeCallback``; the code is in
``vramscope.steps.integrations.transformers`` (it imports transformers)."""

from ..steps.integrations.transformers import KEYS, VramscopeCallback

__all__ = ["VramscopeCallback", "KEYS"]
