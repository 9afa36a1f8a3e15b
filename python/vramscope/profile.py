# python/vramscope/profile.py -- public path of profile() (it lives in attribution/profile.py)
"""``vramscope.profile``: the import path of :func:`profile`, :class:`CategoryTracker` and the
op table that programs and docs use; the code is in the attribution room
(``vramscope.attribution.profile``). The package imports this module before it binds the name
``vramscope.profile`` to the function, so that a later ``from vramscope.profile import ...``
finds the module loaded and leaves that name alone."""

from .attribution.profile import CategoryTracker, OpRow, Profile, format_op_table, profile

__all__ = ["profile", "Profile", "CategoryTracker", "format_op_table", "OpRow"]
