# python/vramscope/predict/__init__.py -- the memory model: peak against batch size, `fit`
"""The memory model of a training step against its size, and what ``vramscope fit`` answers
from it. Imports ``_core``, ``attribution`` and ``steps``; the post-mortem above may use it."""
