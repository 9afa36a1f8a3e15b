# python/vramscope/monitor.py -- public path of Monitor (it lives in steps/monitor.py)
"""``vramscope.monitor``: the import path of :class:`Monitor` and :class:`StepSink` that
programs and docs use; the code is in the steps room (``vramscope.steps.monitor``)."""

from .steps.monitor import Monitor, StepSink

__all__ = ["Monitor", "StepSink"]
