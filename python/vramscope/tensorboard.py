# python/vramscope/tensorboard.py -- public path of the TensorBoard sink (in steps/tensorboard.py)
"""``vramscope.tensorboard``: the import path of :class:`TensorBoardSink` and
:func:`open_writer` that programs and docs use; the code is in the steps room
(``vramscope.steps.tensorboard``)."""

from .steps.tensorboard import TensorBoardSink, open_writer

__all__ = ["TensorBoardSink", "open_writer"]
