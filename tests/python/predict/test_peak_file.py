# tests/python/predict/test_peak_file.py -- a probe's peak file read as hostile input (issue 45)
from __future__ import annotations

import json
import os
import signal
import socket

import pytest

from vramscope.predict.peak_file import (
    MAX_FILE_BYTES,
    DeviceReport,
    PeakFileError,
    PeakReport,
    StepPeak,
    encode_report,
    parse_report,
    read_peak_file,
    write_peak_file,
)

GiB = 1 << 30


def honest(**top) -> dict:
    """A report as a probe on one 80 GiB GPU writes it, as JSON data to spoil."""
    doc = {"format": "vramscope-fit-peaks", "version": 2, "outcome": "measured",
           "steps": [{"step": s, "device": 0, "peak_allocated_bytes": 3 * GiB,
                      "peak_reserved_bytes": 4 * GiB, "peak_pinned_bytes": 7 * GiB // 2,
                      "resident_bytes": GiB, "peaks_exact": 1} for s in (1, 2, 3)],
           "devices": [{"device": 0, "total_bytes": 80 * GiB, "free_bytes": 70 * GiB,
                        "reserved_bytes": 4 * GiB, "fraction": 1.0}]}
    doc.update(top)
    return doc


def write(path, data) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return str(path)


@pytest.fixture
def alarm():
    """A hang fails the test instead of stalling the suite (the reader must never block)."""
    def on_alarm(*_):
        raise TimeoutError("the read blocked")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_what_the_probe_writes_reads_back_whole(tmp_path):
    report = PeakReport("out_of_memory", (StepPeak(1, 1, 5, 7),),
                        (DeviceReport(1, 80 * GiB, 10 * GiB, 7, 0.5),))
    path = str(tmp_path / "p.json")
    write_peak_file(path, report)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert read_peak_file(path) == report
    assert parse_report(encode_report(report)) == report
    with pytest.raises(FileExistsError):  # never written through a name that exists
        write_peak_file(path, report)


def test_a_fifo_is_refused_without_blocking(tmp_path, alarm):
    os.mkfifo(tmp_path / "p.json", 0o600)
    with pytest.raises(PeakFileError, match="a FIFO, not a regular file"):
        read_peak_file(str(tmp_path / "p.json"))


@pytest.mark.parametrize("target", ["/dev/zero", "honest.json"])
def test_a_symlink_is_never_followed(tmp_path, alarm, target):
    if target == "honest.json":
        target = write(tmp_path / target, honest())
    os.symlink(target, tmp_path / "p.json")
    with pytest.raises(PeakFileError, match="symbolic link"):
        read_peak_file(str(tmp_path / "p.json"))


def test_a_huge_file_is_refused_after_reading_at_most_the_cap(tmp_path, alarm):
    path = tmp_path / "p.json"
    write(path, b"")
    os.truncate(path, 64 * GiB)  # sparse: an unbounded read would take minutes and the memory
    with pytest.raises(PeakFileError, match="larger than 1 MiB"):
        read_peak_file(str(path))
    # The cap itself is a legal size (padding whitespace is JSON).
    body = json.dumps(honest()).encode()
    write(tmp_path / "cap.json", body + b" " * (MAX_FILE_BYTES - len(body)))
    assert read_peak_file(str(tmp_path / "cap.json")).outcome == "measured"


def test_a_directory_a_socket_and_a_device_are_refused(tmp_path, alarm):
    os.mkdir(tmp_path / "dir", 0o700)
    with pytest.raises(PeakFileError, match="a directory"):
        read_peak_file(str(tmp_path / "dir"))
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "sock"))
        with pytest.raises(PeakFileError, match="cannot open it|a socket"):
            read_peak_file(str(tmp_path / "sock"))
    with pytest.raises(PeakFileError, match="a character device"):
        read_peak_file("/dev/zero")


def test_a_file_others_can_read_or_another_users_is_refused(tmp_path):
    path = write(tmp_path / "p.json", honest())
    os.chmod(path, 0o644)
    with pytest.raises(PeakFileError, match="mode 0644"):
        read_peak_file(path)
    if os.geteuid() == 0:
        os.chmod(path, 0o600)
        os.chown(path, 65534, 65534)
        with pytest.raises(PeakFileError, match="belongs to uid 65534"):
            read_peak_file(path)


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_peak_file(str(tmp_path / "none.json"))


def _with(path: list, value):
    """honest() with the value at ``path`` (keys and indices) replaced; ``...`` deletes it."""
    doc = honest()
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize("doc, message", [
    # Issue 45's forgeries: a device of 2^64-1 bytes, a free of -80 GiB, a list, a string, a gap.
    (_with(["devices", 0, "total_bytes"], 2**64 - 1), r"total_bytes is 18446744073709551615"),
    (_with(["devices", 0, "free_bytes"], -80 * GiB), r"free_bytes is -85899345920"),
    ([1, 2, 3], "a JSON list, not an object"),
    ("steps", "a JSON string, not an object"),
    (_with(["steps"], "1,2,3"), "'steps' is a JSON string, not a list"),
    (_with(["steps", 0, "peak_reserved_bytes"], ...), r"steps\[0\] has no 'peak_reserved_bytes'"),
    (_with(["devices"], ...), "it has no 'devices'"),
    # Bounds and types of every number.
    (_with(["steps", 1, "peak_allocated_bytes"], 1 << 50), r"steps\[1\].peak_allocated_bytes"),
    (_with(["steps", 1, "peak_allocated_bytes"], 2.5), "not an integer"),
    (_with(["steps", 1, "peak_allocated_bytes"], True), "true, not an integer"),
    (_with(["steps", 1, "peak_allocated_bytes"], "3"), "not an integer"),
    (_with(["steps", 1, "device"], -1), r"steps\[1\].device is -1"),
    (_with(["steps", 1, "step"], None), "null, not an integer"),
    (_with(["devices", 0, "fraction"], 0), "fraction is 0, not a number in"),
    (_with(["devices", 0, "fraction"], 1.5), "fraction is 1.5"),
    # Numbers that are plausible alone but not together.
    (_with(["devices", 0, "free_bytes"], 81 * GiB), "free_bytes .* is above its total_bytes"),
    (_with(["devices", 0, "reserved_bytes"], 81 * GiB), "reserved_bytes .* is above"),
    (_with(["steps", 2, "peak_reserved_bytes"], 90 * GiB), "step 3's peak_reserved_bytes"),
    (_with(["steps", 2, "device"], 3), "device 3, which it does not list"),
    (_with(["devices"], honest()["devices"] * 2), "device 0 is listed twice"),
    # The envelope: the format, its version, the outcome, exactly its keys.
    ({k: v for k, v in honest().items() if k not in ("format", "version")}, "not a vramscope-fit"),
    (_with(["version"], 1), "version 1; this vramscope reads version 2"),
    (_with(["version"], True), "version true"),
    (_with(["outcome"], "oom"), "outcome 'oom' is none of"),
    (_with(["extra"], 1), "unknown key 'extra'"),
    (_with(["steps", 0, "extra"], 1), r"steps\[0\] has an unknown key"),
    (_with(["steps"], [[1, 2]] * 3), r"steps\[0\] is a JSON list"),
    (_with(["steps"], [{}] * 9000), "9000 records, more than 8192"),
])
def test_implausible_reports_are_refused_naming_the_field(doc, message):
    with pytest.raises(PeakFileError, match=message) as e:
        parse_report(json.dumps(doc).encode())
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("raw, message", [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"{\"format\": ", "not JSON"),
    (b"", "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nests too deep|not JSON"),
    (json.dumps(honest()).replace("1.0", "NaN").encode(), "NaN is not a number here"),
    (json.dumps(honest()).replace("1.0", "Infinity").encode(), "Infinity is not a number"),
    (b'{"format": "vramscope-fit-peaks", "format": "x"}', "'format' appears twice"),
    (b'{"version": ' + b"9" * 5000 + b"}", "not JSON"),
])
def test_bytes_that_are_no_report_are_one_line(raw, message):
    with pytest.raises(PeakFileError, match=message) as e:
        parse_report(raw)
    assert "\n" not in str(e.value)


def test_an_honest_report_is_read_as_written(tmp_path):
    report = read_peak_file(write(tmp_path / "p.json", honest()))
    assert report.outcome == "measured" and len(report.steps) == 3
    assert report.device(0) == DeviceReport(0, 80 * GiB, 70 * GiB, 4 * GiB, 1.0)
    assert report.device(1) is None
