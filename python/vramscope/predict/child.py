# python/vramscope/predict/child.py -- a probe process of `vramscope fit`: N steps' peaks, then exit
"""The child side of ``vramscope fit -- python train.py --batch-size {}``. The parent runs the
command under ``python -m vramscope.run`` with ``VRAMSCOPE_FIT_OUT`` (a file in a folder only
this user can enter) and ``VRAMSCOPE_FIT_STEPS``; ``run`` plugs ``ProbeSink`` into its Monitor.
After that many steps the sink writes the exact step peaks and what the driver says of the
device, then ends the process (exit 0, ``os._exit``: the rest of the training, its ``finally``
blocks and atexit handlers are not run; the agent's shared-memory segment is unlinked by the
next reader, which removes dead writers' files). A program that ends earlier leaves what it
measured when the Monitor closes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._core.session import SESSION
from .._core.torchcheck import oom_in_chain
from .peak_file import DeviceReport, PeakReport, StepPeak, write_peak_file

__all__ = ["ENV_OUT", "ENV_STEPS", "ProbeSink", "from_env"]

ENV_OUT = "VRAMSCOPE_FIT_OUT"
ENV_STEPS = "VRAMSCOPE_FIT_STEPS"


class ProbeSink:
    """A Monitor sink (``write_step``/``close``) that keeps each step's peaks and, after
    ``steps`` steps, writes them to ``path`` and ends the process."""

    def __init__(self, path: str, steps: int) -> None:
        self.path = path
        self.steps = steps
        self._records: list[StepPeak] = []
        self._written = False
        #: How the probe ended (peak_file.OUTCOMES): "ended" until its steps ran or it failed.
        self.outcome = "ended"
        #: What must fit under a cap, step by step, per device (torch's memory history from
        #: the sink's start: the program's first step begins after it).
        self._pinned: dict[int, Any] = {}
        self._pinned_at: dict[int, tuple[int, int]] = {}
        #: The OOM observer's calls before the program ran: one more by its failure means the
        #: caching allocator ran out of memory in it.
        self._observer_calls = SESSION.postmortem.observer_calls()

    def start_pinned(self, devices: Any) -> None:
        """Starts the pinned windows of ``devices`` (CUDA ordinals) before the program runs."""
        import sys

        from .window import PinnedWindows

        torch = sys.modules["torch"]
        for device in devices:
            self._pinned[device] = PinnedWindows(torch, device)

    def _pinned_of(self, step: int, device: int) -> int:
        windows = self._pinned.get(device)
        if windows is None:
            return 0
        known = self._pinned_at.get(device)
        if known is None or known[0] != step:  # one window a step, whatever calls ask it
            self._pinned_at[device] = (step, windows.next())
        return self._pinned_at[device][1]

    def write_step(self, record: Any) -> None:
        self._records.append(StepPeak(record.step, record.device, record.peak_allocated_bytes,
                                      record.peak_reserved_bytes,
                                      self._pinned_of(record.step, record.device),
                                      int(record.allocated_bytes),
                                      int(getattr(record, "peaks_exact", True))))
        if len({r.step for r in self._records}) >= self.steps:
            self.outcome = "measured"
            self.close()
            # The probe is measured: the rest of the program is not run (no atexit handlers,
            # no second report; the parent reads the file).
            os._exit(0)

    def program_failed(self, exc: BaseException) -> None:
        """The program ends with ``exc``: a CUDA OutOfMemoryError (or an error raised from
        one), or any error after the caching allocator ran out of memory in this probe (the
        OOM observer ran: a program that catches the OOM and exits with its own status, a
        cuDNN error after every engine's workspace ran out), is written as the outcome
        ``out_of_memory`` at once (with the steps before it); anything else is the program's
        own failure, left to its exit status and output."""
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return  # a success, whatever it caught on the way
        ran_out = oom_in_chain(exc) is not None or \
            SESSION.postmortem.observer_calls() > self._observer_calls
        if not self._written and ran_out:
            self.outcome = "out_of_memory"
            self.close()

    def close(self) -> None:
        if self._written:
            return
        self._written = True
        report = PeakReport(self.outcome, tuple(self._records), tuple(_devices()))
        # O_EXCL: the parent's private folder holds no file of this name; never follow one.
        write_peak_file(self.path, report)


def _devices() -> list[DeviceReport]:
    """What the driver says of each device this process used (for the parent's budget)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return []
    from .budget import device_memory

    out = []
    for d in range(torch.cuda.device_count()):
        mem = device_memory(d)
        out.append(DeviceReport(d, mem.total_bytes, mem.free_bytes, mem.reserved_bytes,
                                mem.fraction))
    return out


def from_env(env: Mapping[str, str]) -> ProbeSink | None:
    """The sink the parent asked for through the environment, or None."""
    path = env.get(ENV_OUT)
    if not path:
        return None
    try:
        steps = int(env.get(ENV_STEPS, "3"))
    except ValueError:
        steps = 3
    return ProbeSink(path, max(1, steps))
