# python/vramscope/steps/__init__.py -- training steps: the one step pipeline and its users
"""The step pipeline that closes every step (``Monitor``, the framework callbacks of
``vramscope.integrations`` and ``vramscope run`` compose it), the step records and their text,
and the TensorBoard sink. Imports ``_core`` and ``attribution``."""
