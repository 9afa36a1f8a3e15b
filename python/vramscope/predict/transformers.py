# python/vramscope/predict/transformers.py -- old path of fit_trainer (integrations/transformers.py)
"""``from vramscope.predict.transformers import fit_trainer`` still works for one release: the
code is in the frameworks' room, ``vramscope.integrations.transformers``. This module goes in
0.2.0 (tests/python/test_layers.py lists it as the one kind of upward import allowed until
then)."""

from ..integrations.transformers import fit_trainer

__all__ = ["fit_trainer"]
