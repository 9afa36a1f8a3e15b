# python/vramscope/__init__.py -- public Python API: torch.cuda-style readers, attach, Monitor
"""vramscope: what is using GPU memory, right now, and why.

The readers mirror ``torch.cuda`` so that they can be swapped in::

    import vramscope
    vramscope.memory_allocated()        # like torch.cuda.memory_allocated(), < 1 µs
    vramscope.max_memory_reserved(1)    # vramscope's own peak: torch's peaks are never reset

    with vramscope.Monitor(every=100, auto_step=True) as mon:
        train()                         # one line every 100 optimizer steps, a table at exit

    vramscope.fit(step).size            # the largest batch that fits, from a few small steps

In a notebook, ``%load_ext vramscope`` adds ``%vramscope`` and ``%%vramscope``.

The agent attaches on first use, or right after the program initialises CUDA. Importing this
package does not import torch.
"""

# The OOM post-mortem fills the session's slot (SESSION.postmortem) and installs its observer
# when imported; the rooms below it reach it only through the session.
from . import oom  # noqa: F401
from ._api import (
    attach,
    device_count,
    empty_cache,
    last_oom,
    max_memory_allocated,
    max_memory_requested,
    max_memory_reserved,
    memory_allocated,
    memory_breakdown,
    memory_requested,
    memory_reserved,
    memory_stats,
    mode,
    reset_peak,
)
from ._core.torchcheck import VramscopeWarning

# IPython looks load_ipython_extension up on the package (%load_ext vramscope); not API.
from ._ipython import load_ipython_extension, show  # noqa: F401
from .monitor import Monitor
from .predict.fit import fit

# Through the public module vramscope.profile, so that it is loaded before the name is bound to
# the function: a later `from vramscope.profile import ...` then leaves vramscope.profile alone.
from .profile import CategoryTracker, profile
from .steps.records import StepRecord


def _version() -> str:
    # The version has one source, include/vramscope/version.hpp, which the wheel's metadata
    # carries; a source checkout on PYTHONPATH has no metadata.
    from importlib import metadata

    try:
        return metadata.version("vramscope")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

__all__ = [
    "CategoryTracker",
    "Monitor",
    "StepRecord",
    "VramscopeWarning",
    "attach",
    "device_count",
    "empty_cache",
    "fit",
    "last_oom",
    "max_memory_allocated",
    "max_memory_requested",
    "max_memory_reserved",
    "memory_allocated",
    "memory_requested",
    "memory_reserved",
    "memory_breakdown",
    "memory_stats",
    "mode",
    "profile",
    "reset_peak",
    "show",
]
