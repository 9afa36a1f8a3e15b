# python/vramscope/predict/window.py -- one measured window of this process's allocator
"""``Window(torch, device)`` brackets real steps and says what they needed: the exact peaks of
allocated and reserved bytes (the agent's step records in events mode, else torch's counters,
reset for the window) and what must fit under a cap: the smallest cap under which the caching
allocator, simulated on torch's memory history of the window from the segments at its start,
does not raise (vramscope.predict.capped, read from vramscope.predict.pinned's replay; its
pinned peak where the simulation gives none).

The history is torch's own (``torch.cuda.memory._record_memory_history``, no stack traces):
turned on for the window only, never on the agent's callback path, and left on when the program
had it on already. Used by ``vramscope.fit``'s in-process probes and by the OOM post-mortem's
measurements; both run steps outside the program's own training.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._core.session import SESSION
from .pinned import pinned_peak

__all__ = ["PinnedWindows", "Window", "WindowPeaks", "allocator_retries"]

#: History entries kept while a window records (a step of the calibration models makes
#: 2,400-17,000 events; each entry without stack traces is small).
HISTORY_ENTRIES = 2_000_000
#: A replay that could not place more than this share of the window's events (a history the
#: program recorded already and that wrapped around) gives no need under a cap.
MAX_UNKNOWN_SHARE = 0.1


def allocator_retries(environ: Any = None, torch_version: str | None = None) -> bool:
    """Does the caching allocator free its cache and retry before it raises? Not where torch
    (2.12 and later) is told ``throw_on_cudamalloc_oom:True`` in PYTORCH_CUDA_ALLOC_CONF (or
    PYTORCH_ALLOC_CONF): a refused cudaMalloc then raises at once, and the reserved peak, not
    the pinned one, is what must fit."""
    import os
    import re
    import sys

    environ = os.environ if environ is None else environ
    if torch_version is None:
        torch = sys.modules.get("torch")
        torch_version = str(getattr(torch, "__version__", "")) if torch is not None else ""
    found = re.match(r"(\d+)\.(\d+)", torch_version)
    if found is None or (int(found.group(1)), int(found.group(2))) < (2, 12):
        return True
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = environ.get(name, "").replace(" ", "").lower()
        if re.search(r"(^|,)throw_on_cudamalloc_oom:(true|1)(,|$)", conf):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class WindowPeaks:
    """What one window needed on its device."""

    allocated_bytes: int
    reserved_bytes: int
    #: What must fit under a cap: the simulated need (else the replay's pinned peak), at least
    #: the allocated peak (0: not measured: no memory history, or the replay was unsure).
    pinned_bytes: int
    #: Bytes allocated at the window's end.
    final_allocated_bytes: int


class Window:
    """``with Window(torch, device) as w: ...`` then ``w.peaks``; or ``start()``/``stop()``."""

    def __init__(self, torch: Any, device: int, pinned: bool = True) -> None:
        self._torch = torch
        self._device = device
        self._want_pinned = pinned
        self._segments: list[dict[str, Any]] = []
        self._first_event = 0
        self._owns_history = False
        self.peaks: WindowPeaks | None = None

    def __enter__(self) -> Window:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.stop()
        else:
            self.abandon()

    def abandon(self) -> None:
        """Ends the window without reading it (its step failed): the history stops."""
        self._end_history()

    # ----- peaks
    def _reset_peaks(self) -> None:
        if SESSION.agent is not None:
            SESSION.step_all()  # closes the agent's step: the next one is this window
        else:
            self._torch.cuda.reset_peak_memory_stats(self._device)

    def _read_peaks(self) -> tuple[int, int]:
        if SESSION.agent is not None:
            for r in SESSION.step_all():
                if int(r["device"]) == self._device:
                    return int(r["peak_allocated_bytes"]), int(r["peak_reserved_bytes"])
            raise RuntimeError(
                f"vramscope: the agent returned no step record for cuda:{self._device}")
        cuda = self._torch.cuda
        return int(cuda.max_memory_allocated(self._device)), \
            int(cuda.max_memory_reserved(self._device))

    # ----- history
    def _snapshot(self) -> dict[str, Any]:
        return self._torch.cuda.memory._snapshot()

    def _start_history(self) -> None:
        memory = self._torch.cuda.memory
        try:
            before = self._snapshot()
            traces = before.get("device_traces") or []
            recording = self._device < len(traces) and bool(traces[self._device])
            if not recording:
                memory._record_memory_history(enabled="all", context=None, stacks="python",
                                              max_entries=HISTORY_ENTRIES)
                self._owns_history = True
            snap = self._snapshot()
        except Exception:  # noqa: BLE001 -- no history: the window measures no pinned peak
            self._want_pinned = False
            self._end_history()
            return
        self._segments = [s for s in snap.get("segments", ())
                          if int(s.get("device", 0)) == self._device]
        traces = snap.get("device_traces") or []
        self._first_event = len(traces[self._device]) if self._device < len(traces) else 0

    def _end_history(self) -> None:
        if self._owns_history:
            self._owns_history = False
            try:
                self._torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:  # noqa: BLE001 -- it was on; nothing else to undo
                pass

    def _pinned(self) -> tuple[int, int]:
        """(need under a cap, allocated at the end) of the window, (0, 0) when unsure."""
        try:
            snap = self._snapshot()
        except Exception:  # noqa: BLE001
            return 0, 0
        traces = snap.get("device_traces") or []
        events = traces[self._device][self._first_event:] if self._device < len(traces) else []
        replay = pinned_peak(self._segments, events)
        if replay.unknown_events > MAX_UNKNOWN_SHARE * max(1, replay.events):
            return 0, replay.final_allocated_bytes
        return replay.need_bytes, replay.final_allocated_bytes

    # ----- the window
    def start(self) -> None:
        """Synchronizes the device, starts the history (when asked) and the peaks."""
        self._torch.cuda.synchronize(self._device)
        if self._want_pinned:
            self._start_history()
        self._reset_peaks()

    def stop(self) -> WindowPeaks:
        """Synchronizes, reads the peaks and simulates the history; returns ``self.peaks``."""
        self._torch.cuda.synchronize(self._device)
        allocated, reserved = self._read_peaks()
        pinned = final = 0
        if self._want_pinned:
            try:
                pinned, final = self._pinned()
            finally:
                self._end_history()
        if not final:
            final = int(self._torch.cuda.memory_allocated(self._device))
        # The replay and the counters see the same blocks: the need holds the allocated peak
        # (the replay's own can differ by the history's ordering).
        if pinned:
            pinned = max(pinned, allocated)
        self.peaks = WindowPeaks(allocated, reserved, pinned, final)
        return self.peaks


class PinnedWindows:
    """What must fit under a cap (as ``WindowPeaks.pinned_bytes``) of consecutive windows on
    one device, each ending where the next begins (a probe's steps, which the program's own
    loop runs: the exact peaks come from its step records, this adds what must fit).
    ``next()`` ends a window and starts the next."""

    def __init__(self, torch: Any, device: int) -> None:
        self._torch = torch
        self._device = device
        self._window = Window(torch, device)
        self._window._start_history()
        self.ok = self._window._want_pinned

    def next(self) -> int:
        """What must fit under a cap since the last call (or the start); 0 when not
        measured."""
        if not self.ok:
            return 0
        w = self._window
        try:
            snap = w._snapshot()
        except Exception:  # noqa: BLE001 -- no history: nothing measured from here on
            self.ok = False
            return 0
        traces = snap.get("device_traces") or []
        events = traces[self._device] if self._device < len(traces) else []
        replay = pinned_peak(w._segments, events[w._first_event:])
        w._segments = [s for s in snap.get("segments", ())
                       if int(s.get("device", 0)) == self._device]
        w._first_event = len(events)
        if replay.unknown_events > MAX_UNKNOWN_SHARE * max(1, replay.events):
            return 0
        return replay.need_bytes

    def close(self) -> None:
        """Stops the history (when this started it)."""
        self._window._end_history()
