# python/vramscope/predict/__main__.py -- `python -m vramscope.predict` (what `vramscope fit` runs)
"""Runs ``vramscope fit``'s command line (see ``vramscope.predict.cli``)."""

import sys

from .cli import main

sys.exit(main())
