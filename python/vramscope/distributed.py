# python/vramscope/distributed.py -- public path of the rank helpers (in _core/distributed.py)
"""``vramscope.distributed``: the import path of :func:`reduce_step_peaks` (``Monitor(
reduce_peaks=True)``) and :func:`resolve_rank` that programs and docs use; the code is in the
core room (``vramscope._core.distributed``), because the session publishes the rank."""

from ._core.distributed import (
    PEAK_FIELDS,
    rank_from_env,
    rank_from_torch,
    reduce_step_peaks,
    resolve_rank,
)

__all__ = ["reduce_step_peaks", "PEAK_FIELDS", "rank_from_env", "rank_from_torch",
           "resolve_rank"]
