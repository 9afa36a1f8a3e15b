# python/vramscope/predict/probe.py -- one probe of `vramscope fit`: a process group, its report
"""Running one probe process of ``vramscope fit`` and reading what it left, apart from the search
(``search.py``) so that any way of choosing sizes reuses them.

``run_probe(argv, env, timeout_s)`` starts the probe in a session (and process group) of its own,
with stdout and stderr on one pipe, and waits on the *process* (a pidfd), not on the pipe: a
background child left holding the pipe does not keep ``fit`` waiting. When the probe exits,
what it left in its group is killed; at the timeout, or when ``fit`` itself is interrupted, the
whole group is killed; the probe is always reaped. Its output is streamed into a bounded tail
(the last ``TAIL_BYTES``), never kept whole, and decoded with replacement characters.

``probe_report(...)`` then says what the probe measured, from its peak file alone
(``peak_file.py``): an OutOfMemoryError is known only from the report the probe writes when it
catches one, never from words in its output; any other failure is a ``ProbeFailed`` carrying
the probe's own last lines.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from .model import Probe
from .peak_file import PeakFileError, PeakReport, read_peak_file

__all__ = ["TAIL_BYTES", "ProbeResult", "ProbeFailed", "run_probe", "probe_report", "probe_of"]

#: The last bytes of a probe's output that are kept (its error, its traceback).
TAIL_BYTES = 64 << 10
#: Lines of that tail shown when a probe fails.
SHOWN_LINES = 60
#: How long the pipe is still read after the probe and its group ended (their last writes).
DRAIN_S = 2.0
_READ_BYTES = 64 << 10


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """How a probe process ended and the end of what it printed."""

    argv: tuple[str, ...]
    #: Its process id (and process group id); reaped.
    pid: int
    #: The exit status as Popen gives it (negative: the signal that ended it).
    returncode: int
    #: Did it run past the timeout (and its group get killed)?
    timed_out: bool
    seconds: float
    #: All it wrote to stdout and stderr, and the last TAIL_BYTES of it, decoded.
    output_bytes: int
    output_tail: str

    def exit_text(self) -> str:
        """"exit 1", "killed by SIGSEGV"."""
        if self.returncode >= 0:
            return f"exit {self.returncode}"
        try:
            return f"killed by {signal.Signals(-self.returncode).name}"
        except ValueError:
            return f"killed by signal {-self.returncode}"

    def last_lines(self, count: int = SHOWN_LINES) -> str:
        """The last ``count`` lines of the output tail."""
        return "\n".join(self.output_tail.rstrip("\n").splitlines()[-count:])


class ProbeFailed(RuntimeError):
    """A probe that measured nothing usable; the message ends with its last lines."""

    def __init__(self, message: str, result: ProbeResult) -> None:
        lines = result.last_lines()
        super().__init__(message + (f"; its last output:\n{lines}" if lines.strip()
                                    else "; it printed nothing"))
        self.result = result


class _Tail:
    """The last ``keep`` bytes of a stream (amortised: trimmed when it doubles)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.total = 0
        self._buf = bytearray()

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self._buf += data
        if len(self._buf) > 2 * self.keep:
            del self._buf[:-self.keep]

    def text(self) -> str:
        return bytes(self._buf[-self.keep:]).decode("utf-8", errors="replace")


def _pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it exits), or None where the kernel has none."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _has_exited(pid: int) -> bool:
    """Has ``pid`` (our child) exited? It is not reaped (its group id stays valid)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _read_some(fd: int, tail: _Tail) -> bool:
    """Reads what the pipe holds now (one read); False at its end."""
    try:
        data = os.read(fd, _READ_BYTES)
    except BlockingIOError:
        return True
    if not data:
        return False
    tail.add(data)
    return True


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_probe(argv: Sequence[str], env: Mapping[str, str], timeout_s: float, *,
              tail_bytes: int = TAIL_BYTES, cwd: str | None = None) -> ProbeResult:
    """Runs ``argv`` as a probe (see the module docstring) and returns how it ended. At most
    ``timeout_s`` seconds pass before its group is killed, plus DRAIN_S for the pipe's end."""
    tail = _Tail(tail_bytes)
    began = time.monotonic()
    deadline = began + timeout_s
    proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, close_fds=True)
    assert proc.stdout is not None
    out_fd = proc.stdout.fileno()
    os.set_blocking(out_fd, False)
    pidfd = _pidfd(proc.pid)
    reaped = False
    timed_out = False
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(out_fd, selectors.EVENT_READ, "out")
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            reading = True
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                # Without a pidfd, look at the process every 50 ms.
                ready = sel.select(remaining if pidfd is not None else min(remaining, 0.05))
                exited = any(key.data == "exit" for key, _ in ready)
                if reading and any(key.data == "out" for key, _ in ready):
                    reading = _read_some(out_fd, tail)
                    if not reading:
                        sel.unregister(out_fd)
                if exited or (pidfd is None and _has_exited(proc.pid)):
                    break
            # The probe exited (not yet reaped: its pid still names the group) or ran out of
            # time: what is left of its group goes.
            _kill_group(proc.pid)
            proc.wait()
            reaped = True
            # The pipe's last bytes: its writers are gone or going (one that left the group
            # could hold it forever: bounded).
            drain_end = time.monotonic() + DRAIN_S
            while reading:
                remaining = drain_end - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    break
                reading = _read_some(out_fd, tail)
    finally:
        if not reaped:  # interrupted (Ctrl-C, SIGTERM): never leave the probe running
            _kill_group(proc.pid)
            proc.wait()
        proc.stdout.close()
        if pidfd is not None:
            os.close(pidfd)
    return ProbeResult(tuple(argv), proc.pid, proc.returncode, timed_out, time.monotonic() - began,
                       tail.total, tail.text())


def probe_report(result: ProbeResult, peak_path: str, size: int, what: str = "batch_size",
                 timeout_s: float | None = None) -> PeakReport:
    """What the probe at ``size`` left: a report whose outcome is ``out_of_memory`` (the only
    way a probe says it ran out of memory: the caller raises ProbeOutOfMemory), or one with at
    least one step of a probe that exited 0. Raises ProbeFailed for anything else."""
    label = f"the probe at {what} {size}"
    if result.timed_out:
        limit = f" --timeout {timeout_s:g} s" if timeout_s is not None else " its time"
        raise ProbeFailed(f"{label} ran past{limit}; its process group was killed", result)
    try:
        report: PeakReport | None = read_peak_file(peak_path)
    except FileNotFoundError:
        report = None
    except PeakFileError as e:
        raise ProbeFailed(f"{label} left a peak file that is not used: {e}", result) from None
    if report is not None and report.outcome == "out_of_memory":
        return report
    if result.returncode != 0:
        raise ProbeFailed(f"{label} failed ({result.exit_text()})", result)
    if report is None or not report.steps:
        raise ProbeFailed(f"{label} measured no step ({result.exit_text()}); does the program "
                          "call optimizer.step()?", result)
    return report


def probe_of(report: PeakReport, size: int, seconds: float = 0.0) -> tuple[Probe, int]:
    """The probe's peaks at ``size`` on the device where it reserved most, and that device."""
    device = max(report.steps, key=lambda s: s.peak_reserved_bytes).device
    mine = [s for s in report.steps if s.device == device]
    # What must fit is known only when every step measured it.
    pinned = 0 if any(not s.peak_pinned_bytes for s in mine) else \
        max(s.peak_pinned_bytes for s in mine)
    probe = Probe(size, max(s.peak_allocated_bytes for s in mine),
                  max(s.peak_reserved_bytes for s in mine), len({s.step for s in mine}), seconds,
                  peak_pinned_bytes=pinned,
                  resident_bytes=min(s.resident_bytes for s in mine))
    return probe, device
