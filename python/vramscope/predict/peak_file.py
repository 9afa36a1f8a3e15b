# python/vramscope/predict/peak_file.py -- a probe's peak file: the one format from a probe to `fit`
"""The file a probe of ``vramscope fit`` leaves for its parent: what its steps peaked at and what
the driver said of each device, and how the probe ended. Written by the probe (``child.py``),
read by the parent after the probe exited (``probe.py``). The probe runs the user's program, so
the file is input from a same-user process (docs/security.md): it is read bounded and checked
whole before any number in it is used.

::

    {"format": "vramscope-fit-peaks", "version": 2,
     "outcome": "measured" | "ended" | "out_of_memory",
     "steps":   [{"step": 1, "device": 0, "peak_allocated_bytes": N, "peak_reserved_bytes": N,
                  "peak_pinned_bytes": N, "resident_bytes": N, "peaks_exact": 1}],
     "devices": [{"device": 0, "total_bytes": N, "free_bytes": N, "reserved_bytes": N,
                  "fraction": 1.0}]}

A step's ``peak_pinned_bytes`` is what must fit under a cap (vramscope.predict.pinned; 0: not
measured), ``resident_bytes`` what stayed allocated at its end, ``peaks_exact`` 1 when its
peaks came from the agent's events, 0 when polled (a probe whose peaks are not exact is not
used). Version 2 added the three.
``outcome``: ``measured`` (the steps asked for ran, then the probe ended itself), ``ended``
(the program ended first; the steps it ran), ``out_of_memory`` (a step raised CUDA's
OutOfMemoryError; the steps before it). Exactly these keys (a later layout is a new version);
integers are JSON integers, byte counts below 2^50 (1 PiB: none is a fact, as in recordings),
``free_bytes`` and ``reserved_bytes`` at most ``total_bytes``, every step on a listed device and
its peaks at most that device's total; ``fraction`` (torch's per-process cap, 1: none) in
(0, 1]. The file is at most 1 MiB, a regular file of this user, mode 0600, not a symlink.
docs/cli.md (`vramscope fit`) describes it too.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
from collections.abc import Sequence
from typing import Any

__all__ = ["FORMAT", "VERSION", "OUTCOMES", "MAX_FILE_BYTES", "MAX_BYTES", "PeakFileError",
           "StepPeak", "DeviceReport", "PeakReport", "encode_report", "parse_report",
           "read_peak_file", "write_peak_file"]

FORMAT = "vramscope-fit-peaks"
VERSION = 2
#: How a probe ended: its steps ran; the program ended first; a step ran out of memory.
OUTCOMES = ("measured", "ended", "out_of_memory")
#: The largest peak file read (at most 100 steps on 64 devices take about 700 KB).
MAX_FILE_BYTES = 1 << 20
#: Byte counts at or above 1 PiB are impossible, not facts (as in recordings).
MAX_BYTES = 1 << 50
#: Device ordinals below this; step numbers below 2^62; at most this many step records.
MAX_DEVICES = 1024
MAX_STEP = 1 << 62
MAX_STEP_RECORDS = 8192


class PeakFileError(ValueError):
    """A peak file that is not read: what is wrong with it, in words."""


@dataclasses.dataclass(frozen=True)
class StepPeak:
    """One step's peaks on one device."""

    step: int
    device: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    #: What must fit under a cap (0: not measured), allocated at the step's end, and were the
    #: peaks exact (1) or polled (0)?
    peak_pinned_bytes: int = 0
    resident_bytes: int = 0
    peaks_exact: int = 1


@dataclasses.dataclass(frozen=True)
class DeviceReport:
    """What the driver and torch said of one device at the probe's end."""

    device: int
    total_bytes: int
    free_bytes: int
    #: The probe's reserved bytes (the allocator's segments).
    reserved_bytes: int
    #: torch's per-process memory fraction (1.0: no cap).
    fraction: float


@dataclasses.dataclass(frozen=True)
class PeakReport:
    """A peak file, checked: how the probe ended, its step peaks, its devices."""

    #: One of OUTCOMES.
    outcome: str
    steps: tuple[StepPeak, ...]
    devices: tuple[DeviceReport, ...]

    def device(self, device: int) -> DeviceReport | None:
        """The report of ``device`` (None when the probe listed none for it)."""
        return next((d for d in self.devices if d.device == device), None)


# The field tables: the writer and the reader iterate them (name, lowest, highest).
#: A step record's fields, each an integer.
STEP_FIELDS = (("step", 0, MAX_STEP - 1), ("device", 0, MAX_DEVICES - 1),
               ("peak_allocated_bytes", 0, MAX_BYTES - 1),
               ("peak_reserved_bytes", 0, MAX_BYTES - 1),
               ("peak_pinned_bytes", 0, MAX_BYTES - 1), ("resident_bytes", 0, MAX_BYTES - 1),
               ("peaks_exact", 0, 1))
#: A device record's integer fields; ``fraction`` (a number in (0, 1]) follows them.
DEVICE_FIELDS = (("device", 0, MAX_DEVICES - 1), ("total_bytes", 1, MAX_BYTES - 1),
                 ("free_bytes", 0, MAX_BYTES - 1), ("reserved_bytes", 0, MAX_BYTES - 1))
#: The top level's keys.
TOP_KEYS = ("format", "version", "outcome", "steps", "devices")


def encode_report(report: PeakReport) -> bytes:
    """The file's bytes for ``report`` (UTF-8 JSON, one line)."""
    data = {
        "format": FORMAT, "version": VERSION, "outcome": report.outcome,
        "steps": [{name: getattr(s, name) for name, _, _ in STEP_FIELDS} for s in report.steps],
        "devices": [dict({name: getattr(d, name) for name, _, _ in DEVICE_FIELDS},
                         fraction=float(d.fraction)) for d in report.devices],
    }
    return json.dumps(data, separators=(",", ":")).encode("utf-8")


def write_peak_file(path: str, report: PeakReport) -> None:
    """Writes ``report`` to a new file ``path``, mode 0600; a name that exists (a planted file,
    symlink or FIFO) is never written through: FileExistsError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(encode_report(report))


def read_peak_file(path: str) -> PeakReport:
    """The checked report of the peak file at ``path``. Raises FileNotFoundError when there is
    none, PeakFileError (one line) for anything but a regular file of this user, mode 0600 or
    stricter, of at most MAX_FILE_BYTES, holding a valid report. Never blocks (a FIFO), never
    follows a symlink, never reads more than MAX_FILE_BYTES + 1 bytes."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        import errno

        if e.errno == errno.ELOOP:
            raise PeakFileError("it is a symbolic link (never followed)") from None
        raise PeakFileError(f"cannot open it: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PeakFileError(f"it is {_kind(info.st_mode)}, not a regular file")
        if info.st_uid != os.geteuid():
            raise PeakFileError(f"it belongs to uid {info.st_uid}, not to this user")
        if info.st_mode & 0o077:
            raise PeakFileError(f"others may read or write it (mode {info.st_mode & 0o777:04o}; "
                                "a probe writes 0600)")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise PeakFileError(f"it is larger than {MAX_FILE_BYTES >> 20} MiB")
    finally:
        os.close(fd)
    return parse_report(b"".join(chunks))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _reject_constant(name: str) -> Any:
    raise PeakFileError(f"{name} is not a number here")


def _no_duplicates(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise PeakFileError(f"the key {key!r} appears twice")
        out[key] = value
    return out


def parse_report(data: bytes) -> PeakReport:
    """The checked report in ``data`` (a peak file's bytes); PeakFileError says what is wrong."""
    if len(data) > MAX_FILE_BYTES:
        raise PeakFileError(f"it is larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PeakFileError("it is not UTF-8") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except PeakFileError:
        raise
    except RecursionError:
        raise PeakFileError("it nests too deep to be a peak file") from None
    except ValueError as e:  # json.JSONDecodeError, and ints of more than 4300 digits
        raise PeakFileError(f"it is not JSON ({str(e).splitlines()[0][:100]})") from None
    if not isinstance(doc, dict):
        raise PeakFileError(f"it holds a JSON {_json_type(doc)}, not an object")
    if doc.get("format") != FORMAT:
        raise PeakFileError(f"it is not a {FORMAT} file (its 'format' is "
                            f"{_show(doc.get('format'))})")
    version = doc.get("version")
    if version != VERSION or type(version) is not int:
        raise PeakFileError(f"it is version {_show(version)}; this vramscope reads version "
                            f"{VERSION} (is the probe's Python running another vramscope?)")
    for key in TOP_KEYS:
        if key not in doc:
            raise PeakFileError(f"it has no {key!r}")
    for key in doc:
        if key not in TOP_KEYS:
            raise PeakFileError(f"it has an unknown key {_show(key)}")
    outcome = doc["outcome"]
    if outcome not in OUTCOMES or not isinstance(outcome, str):
        raise PeakFileError(f"its outcome {_show(outcome)} is none of {', '.join(OUTCOMES)}")
    steps = _records(doc["steps"], "steps", STEP_FIELDS, MAX_STEP_RECORDS)
    devices = _records(doc["devices"], "devices", DEVICE_FIELDS + (("fraction", 0, 1),),
                       MAX_DEVICES)
    report = PeakReport(outcome, tuple(StepPeak(**s) for s in steps),
                        tuple(DeviceReport(**d) for d in devices))
    _check_together(report)
    return report


def _records(value: Any, name: str, fields: tuple[tuple[str, int, int], ...],
             most: int) -> list[dict[str, Any]]:
    """The list ``name`` of records with exactly ``fields``, each value in its range."""
    if not isinstance(value, list):
        raise PeakFileError(f"its {name!r} is a JSON {_json_type(value)}, not a list")
    if len(value) > most:
        raise PeakFileError(f"its {name!r} has {len(value)} records, more than {most}")
    out = []
    names = {field for field, _, _ in fields}
    for i, record in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(record, dict):
            raise PeakFileError(f"{where} is a JSON {_json_type(record)}, not an object")
        for key in record:
            if key not in names:
                raise PeakFileError(f"{where} has an unknown key {_show(key)}")
        checked: dict[str, Any] = {}
        for field, low, high in fields:
            if field not in record:
                raise PeakFileError(f"{where} has no {field!r}")
            number = record[field]
            if field == "fraction":
                ok = (type(number) in (int, float) and math.isfinite(number)
                      and 0.0 < number <= 1.0)
                bounds = "a number in (0, 1]"
            else:
                ok = type(number) is int and low <= number <= high
                bounds = f"an integer in [{low}, {high}]"
            if not ok:
                raise PeakFileError(f"{where}.{field} is {_show(number)}, not {bounds}")
            checked[field] = float(number) if field == "fraction" else number
        out.append(checked)
    return out


def _check_together(report: PeakReport) -> None:
    """What no single field says: one record per device, free and reserved within the total,
    every step on a listed device and within its total."""
    totals: dict[int, int] = {}
    for d in report.devices:
        if d.device in totals:
            raise PeakFileError(f"device {d.device} is listed twice")
        totals[d.device] = d.total_bytes
        for field in ("free_bytes", "reserved_bytes"):
            if getattr(d, field) > d.total_bytes:
                raise PeakFileError(f"device {d.device}'s {field} ({getattr(d, field)}) is above "
                                    f"its total_bytes ({d.total_bytes})")
    for s in report.steps:
        total = totals.get(s.device)
        if total is None:
            raise PeakFileError(f"step {s.step} ran on device {s.device}, which it does not list")
        for field in ("peak_allocated_bytes", "peak_reserved_bytes", "peak_pinned_bytes",
                      "resident_bytes"):
            if getattr(s, field) > total:
                raise PeakFileError(f"step {s.step}'s {field} ({getattr(s, field)}) is above "
                                    f"device {s.device}'s total_bytes ({total})")


def _json_type(value: Any) -> str:
    for kind, name in ((dict, "object"), (list, "list"), (str, "string"), (bool, "boolean"),
                       (int, "integer"), (float, "number")):
        if isinstance(value, kind):
            return name
    return "null"


def _show(value: Any) -> str:
    """A value of the file in a message: short, one line."""
    text = repr(value) if isinstance(value, str) else json.dumps(value)[:60]
    return text[:60] + ("..." if len(text) > 60 else "")
