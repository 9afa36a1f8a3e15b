# tests/python/test_oom_report_files.py -- OOM report files in directories others can write to
#
# The report is written inside the OOM callback, often into a shared working directory: a name
# planted there (a symlink, a readable file, a FIFO) must neither redirect, expose nor block it.
from __future__ import annotations

import os
import signal
import stat

import pytest

from vramscope import _oom_report
from vramscope._oom_advice import OomEvidence

GiB = 1 << 30


def evidence() -> OomEvidence:
    return OomEvidence(device=0, requested_bytes=2 * GiB, device_total_bytes=80 * GiB,
                       device_free_bytes=GiB, allocated_bytes=70 * GiB, reserved_bytes=78 * GiB)


@pytest.fixture
def deadline():
    """Turns a write that blocks (a FIFO opened for writing) into a test failure."""

    def expired(signum, frame):
        raise TimeoutError("writing the report blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def written(paths):
    return {k: p for k, p in paths.items() if k != "pickle"}


def test_a_planted_symlink_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    paths = _oom_report.report_paths(123, 0.0, str(tmp_path))
    os.symlink(victim, paths["txt"])
    first_txt = paths["txt"]
    _oom_report.write_report(evidence(), paths)
    assert victim.read_text() == "precious"
    assert os.path.islink(first_txt), "the planted name is left alone"
    assert paths["txt"] != first_txt
    for p in written(paths).values():
        assert not os.path.islink(p) and stat.S_IMODE(os.stat(p).st_mode) == 0o600
    assert "OOM post-mortem" in open(paths["txt"]).read()


def test_a_planted_world_readable_file_is_never_written_into(tmp_path):
    paths = _oom_report.report_paths(123, 0.0, str(tmp_path))
    with open(paths["json"], "w"):
        pass
    os.chmod(paths["json"], 0o666)
    planted = paths["json"]
    _oom_report.write_report(evidence(), paths)
    assert os.path.getsize(planted) == 0, "the attacker's file stays empty"
    assert paths["json"] != planted
    assert stat.S_IMODE(os.stat(paths["json"]).st_mode) == 0o600


def test_a_planted_fifo_does_not_block_the_oom_callback(tmp_path, deadline):
    paths = _oom_report.report_paths(123, 0.0, str(tmp_path))
    os.mkfifo(paths["txt"])
    fifo = paths["txt"]
    _oom_report.write_report(evidence(), paths)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert os.path.isfile(paths["txt"]) and paths["txt"] != fifo


def test_two_reports_in_the_same_second_keep_both(tmp_path):
    first = _oom_report.report_paths(123, 0.0, str(tmp_path))
    second = _oom_report.report_paths(123, 0.0, str(tmp_path))
    assert first == second, "the first choice is the same name"
    _oom_report.write_report(evidence(), first, when="first")
    _oom_report.write_report(evidence(), second, when="second")
    assert first["txt"] != second["txt"] and first["json"] != second["json"]
    assert "at first" in open(first["txt"]).read()
    assert "at second" in open(second["txt"]).read()


def test_shared_directories_without_the_sticky_bit_are_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    paths = _oom_report.report_paths(123, 0.0, str(shared))
    with pytest.raises(OSError, match="sticky"):
        _oom_report.write_report(evidence(), paths)
    assert os.listdir(shared) == []
    # /tmp-like (sticky): creating new files O_EXCL there is safe.
    os.chmod(shared, 0o1777)
    _oom_report.write_report(evidence(), paths)
    assert sorted(os.listdir(shared)) == sorted(os.path.basename(p) for p in written(paths).values())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
@pytest.mark.parametrize("mode", [0o1777, 0o775, 0o755])
def test_a_directory_of_another_user_is_refused(tmp_path, mode):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chmod(theirs, mode)
    os.chown(theirs, 65534, 65534)
    paths = _oom_report.report_paths(123, 0.0, str(theirs))
    with pytest.raises(PermissionError,
                       match=r"belongs to another user \(uid 65534\).*VRAMSCOPE_OOM_DIR"):
        _oom_report.write_report(evidence(), paths)
    assert os.listdir(theirs) == []


def test_a_file_in_place_of_the_directory_is_refused(tmp_path):
    not_a_dir = tmp_path / "reports"
    not_a_dir.write_text("")
    with pytest.raises(OSError):
        _oom_report.write_report(evidence(), _oom_report.report_paths(123, 0.0, str(not_a_dir)))
