# python/vramscope/predict/__init__.py -- the memory model against size, and `fit` on top of it
"""What a step needs at a size, from exact peaks of a few small real steps (``model``), the
search that finds the largest size that fits a budget (``search``), and ``fit``, which runs
that search on a step function of the size in this process."""

from .fit import fit
from .model import MemoryModel, Prediction, Probe, fit_model
from .search import FitResult, search

__all__ = ["FitResult", "MemoryModel", "Prediction", "Probe", "fit", "fit_model", "search"]
