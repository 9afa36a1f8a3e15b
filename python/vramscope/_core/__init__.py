# python/vramscope/_core/__init__.py -- the lowest room: the session and what it stands on
"""The session (the only importer of the agent extension), the polling fallback, devices,
units, ranks, test limits, the step history and the torch checks. Imports nothing of the other
rooms (docs/architecture.md, checked by tests/python/test_layers.py)."""
