# python/vramscope/predict/lightning.py -- old path of FitBatchSize (in integrations/lightning.py)
"""``from vramscope.predict.lightning import FitBatchSize`` still works for one release: the code
is in the frameworks' room, ``vramscope.integrations.lightning``. This module goes in 0.2.0
(tests/python/test_layers.py lists it as the one kind of upward import allowed until then)."""

from ..integrations.lightning import FitBatchSize

__all__ = ["FitBatchSize"]
