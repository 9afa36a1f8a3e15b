# python/vramscope/steps/tensorboard.py -- per-step memory scalars into TensorBoard (Monitor's sink)
"""TensorBoard output of :class:`vramscope.Monitor` steps.

``Monitor(tensorboard_dir=...)`` adds a :class:`TensorBoardSink` (``Monitor.add_sink``).
The target may be

* a directory: the run directory. Under distributed training each rank writes its own run,
  ``<dir>/rank<R>``, and the tags are the same in every run, so TensorBoard overlays the ranks
  in one chart per tag. The file is written by the agent's native C++ writer
  (:func:`open_writer`);
* an object with ``add_scalar(tag, value, global_step, walltime)`` -- e.g. your own
  ``torch.utils.tensorboard.SummaryWriter`` -- so the scalars land in your run. The rank then
  goes into the tag (``memory/rank1/cuda0/...``), since your run is shared.

Tags: the scheme of ``vramscope export --tensorboard`` (docs/tensorboard.md), which exists
once, in the C++ exporter (src/exporters/include/vramscope/exporters/tensorboard.hpp); the
agent extension hands it over (``_agent.tensorboard_step_scalars``), so the sink needs the
extension whatever the writer::

    memory/cuda<D>/allocated_bytes            at the end of the step
    memory/cuda<D>/reserved_bytes
    memory/cuda<D>/step_peak_allocated_bytes  highest inside the step (exact, from events)
    memory/cuda<D>/step_peak_reserved_bytes
    memory/cuda<D>/step_peak_requested_bytes
    memory/cuda<D>/step_peaks_sampled         1 when the agent polls: the peaks above are at
                                              least these, not exact (absent when exact)
    memory/cuda<D>/non_pytorch_bytes          driver-used minus reserved, when NVML can tell
    memory/cuda<D>/non_pytorch/context_bytes  its parts at the agent's last settled pairing:
    memory/cuda<D>/non_pytorch/other_bytes    CUDA context, allocations outside torch, NCCL's
    memory/cuda<D>/non_pytorch/nccl_bytes     (when NCCL reports it), and of reserved the
    memory/cuda<D>/private_pool_bytes         private pools (CUDA graphs, MemPool)
    memory/cuda<D>/category/<name>_bytes      what the step's peak was made of, with
                                              Monitor(model=...): parameters, gradients,
                                              optimizer_state, activations, temporaries, other

The x axis is the Monitor's step. Values are float32 in the event file (exact below 16 MiB,
7 significant digits above).
"""

from __future__ import annotations

import os
import time
from typing import Any

from .._core.session import extension

__all__ = ["TensorBoardSink", "open_writer"]


def _make_private_dirs(path: str) -> None:
    # os.makedirs applies `mode` to the leaf only; every directory we create must be 0700.
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        _make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def _native_writer_class() -> Any:
    """The agent's C++ writer class, or None when the agent extension is not built/importable."""
    agent = extension()
    return None if agent is None else getattr(agent, "TensorBoardWriter", None)


def open_writer(logdir: str) -> Any:
    """A writer of a new event file in ``logdir``, in this order:

    1. the native C++ writer of the agent extension (``vramscope._agent.TensorBoardWriter``),
       which needs neither TensorFlow nor the ``tensorboard`` package;
    2. else torch's ``SummaryWriter`` (needs the ``tensorboard`` package);
    3. else RuntimeError naming both ways out.
    """
    native = _native_writer_class()
    if native is not None:
        return native(os.fspath(logdir))
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise RuntimeError(
            "vramscope: tensorboard_dir needs the vramscope agent extension (its native writer) "
            "or the `tensorboard` package (pip install tensorboard); or pass your own "
            f"SummaryWriter as tensorboard_dir ({e})") from e
    return SummaryWriter(log_dir=os.fspath(logdir))


class TensorBoardSink:
    """Receives the Monitor's step records and writes them as TensorBoard scalars."""

    def __init__(self, target: Any, rank: int = 0, world_size: int | None = None) -> None:
        agent = extension()
        #: The exporter's tags of a step record (_agent.tensorboard_step_scalars).
        self._step_scalars: Any = getattr(agent, "tensorboard_step_scalars", None)
        if self._step_scalars is None:
            raise RuntimeError(
                "vramscope: tensorboard_dir needs the vramscope agent extension, which holds the "
                "tag scheme (it is not built or cannot load here)")
        if hasattr(target, "add_scalar"):
            self._writer = target
            self._owned = False
            self._qualify_rank = True
        else:
            logdir = os.fspath(target)
            if world_size is None:
                world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
            if world_size > 1:
                logdir = os.path.join(logdir, f"rank{rank}")
            _make_private_dirs(logdir)
            self._writer = open_writer(logdir)
            self._owned = True
            self._qualify_rank = False
        #: Directory of the run this sink writes (None for a user's writer).
        self.logdir = None if not self._owned else logdir

    def write_step(self, record: Any) -> None:
        """Writes one device's record of a closed step at that step number."""
        walltime = time.time()
        for tag, value in self._step_scalars(record, self._qualify_rank):
            self._writer.add_scalar(tag, value, record.step, walltime)

    def flush(self) -> None:
        flush = getattr(self._writer, "flush", None)
        if flush is not None:
            flush()

    def close(self) -> None:
        """Flushes; closes the writer only when this sink opened it (never the user's)."""
        if self._owned:
            self._writer.close()
        else:
            self.flush()
