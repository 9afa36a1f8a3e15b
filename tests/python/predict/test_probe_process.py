# tests/python/predict/test_probe_process.py -- a probe runs as a process group, its output bounded
#
# The probes here are small Python programs the tests write; run_probe runs them directly (the
# `vramscope fit` end to end is test_fit_hostile.py). A hang is the failure mode of several:
# their time bounds are loose on purpose (a probe that hangs would take the whole --timeout).
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap

import pytest

from vramscope.predict import probe as probe_module
from vramscope.predict.probe import TAIL_BYTES, ProbeFailed, probe_report, run_probe


def script(tmp_path, name: str, body: str) -> list[str]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def gone(pid: int, within_s: float = 30.0) -> bool:
    """Does ``pid`` end within ``within_s`` (killed: its end is on its way; a pidfd says when)?"""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], within_s)[0])
    finally:
        os.close(fd)


@pytest.fixture(params=["pidfd", "waitid"])
def waits(request, monkeypatch):
    """Both ways of waiting on the probe: a pidfd, and waitid(WNOWAIT) where there is none."""
    if request.param == "waitid":
        monkeypatch.setattr(probe_module, "_pidfd", lambda pid: None)
    return request.param


def test_a_child_left_holding_stdout_does_not_keep_fit_waiting(tmp_path, waits):
    # Issue 45: the probe wrote its peaks and left `sleep` holding its stdout; fit waited the
    # whole --timeout (600 s by default) on the pipe, then ended in a TimeoutExpired traceback.
    argv = script(tmp_path, "probe.py", """\
        import subprocess, sys
        sleeper = subprocess.Popen(["sleep", "1000"])  # inherits the pipe
        print("sleeper", sleeper.pid, flush=True)
        """)
    result = run_probe(argv, os.environ, timeout_s=120)
    assert not result.timed_out and result.returncode == 0
    assert result.seconds < 60, "waited on the pipe, not on the probe"
    pid = int(result.output_tail.split()[1])
    assert gone(pid), "what the probe left in its group is killed when it exits"


def test_at_the_timeout_the_whole_group_is_killed_and_the_probe_reaped(tmp_path, waits):
    argv = script(tmp_path, "probe.py", """\
        import subprocess, sys, time
        sleeper = subprocess.Popen(["sleep", "1000"], stdout=subprocess.DEVNULL)
        print("sleeper", sleeper.pid, flush=True)
        sleeper.wait()
        """)
    result = run_probe(argv, os.environ, timeout_s=5)
    assert result.timed_out and result.exit_text() == "killed by SIGKILL"
    assert result.seconds < 60
    assert "sleeper" in result.output_tail, "the probe did not start within 5 s"
    assert gone(int(result.output_tail.split()[1]))
    with pytest.raises(ChildProcessError):  # the probe itself is reaped: no zombie of ours
        os.waitpid(result.pid, os.WNOHANG)


def test_output_that_is_not_utf8_is_decoded_with_replacement(tmp_path):
    argv = script(tmp_path, "probe.py", """\
        import sys
        sys.stdout.buffer.write(b"before \\xff\\xfe\\xc3 after\\n")
        sys.stderr.buffer.write(b"\\x80 on stderr\\n")
        """)
    result = run_probe(argv, os.environ, timeout_s=120)
    assert result.returncode == 0
    assert "before \ufffd\ufffd\ufffd after" in result.output_tail
    assert "\ufffd on stderr" in result.output_tail


def test_only_the_last_64_kib_are_kept(tmp_path):
    argv = script(tmp_path, "probe.py", """\
        for i in range(100_000):
            print(f"line {i:06d}")
        """)
    result = run_probe(argv, os.environ, timeout_s=120)
    assert result.output_bytes == 100_000 * 12
    assert len(result.output_tail) == TAIL_BYTES
    assert result.output_tail.endswith("line 099999\n")
    assert result.last_lines(2) == "line 099998\nline 099999"


def test_300_mib_of_output_stays_at_a_small_rss(tmp_path):
    # Issue 45: 300 MiB of output took `fit` to 925 MiB RSS (the whole output, then a decoded
    # copy). Measured in a fresh process: its peak RSS after the probe less before it.
    probe = script(tmp_path, "probe.py", """\
        import sys
        chunk = b"x" * (1 << 20)
        for _ in range(300):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.write(b"\\nthe end\\n")
        """)
    parent = textwrap.dedent(f"""\
        import json, os, resource
        from vramscope.predict.probe import run_probe
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = run_probe({probe!r}, os.environ, timeout_s=300)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps([result.output_bytes, result.output_tail[-9:], before, after]))
        """)
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                         timeout=300, check=True)
    total, end, before_kib, after_kib = json.loads(out.stdout)
    assert total == 300 * (1 << 20) + 9 and end == "\nthe end\n"
    # 0 MiB measured (24 MiB before and after); 16 MiB is the 64 KiB tail many times over.
    assert after_kib - before_kib < 16 * 1024, f"the parent grew by {after_kib - before_kib} KiB"


def test_a_probe_that_cannot_start_is_an_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        run_probe([str(tmp_path / "missing")], os.environ, timeout_s=10)


def test_a_failed_probe_carries_its_last_lines(tmp_path):
    argv = script(tmp_path, "probe.py", """\
        print("loading")
        raise ValueError("CUDA out of memory, says the program's own message")
        """)
    result = run_probe(argv, os.environ, timeout_s=120)
    with pytest.raises(ProbeFailed) as e:
        probe_report(result, str(tmp_path / "none.json"), 92)
    text = str(e.value)
    assert text.startswith("the probe at batch_size 92 failed (exit 1); its last output:")
    assert "ValueError: CUDA out of memory, says" in text and "loading" in text


@pytest.mark.parametrize("outcome, status, expected", [
    ("out_of_memory", 1, "out_of_memory"),  # the one way a probe says it ran out of memory
    ("measured", 0, "measured"),
    ("measured", 3, r"failed \(exit 3\)"),  # a report does not hide a failure
])
def test_the_report_and_the_exit_status_decide_together(tmp_path, outcome, status, expected):
    from vramscope.predict.peak_file import DeviceReport, PeakReport, StepPeak, encode_report

    peak = tmp_path / "p.json"
    report = PeakReport(outcome, (StepPeak(1, 0, 1, 2),), (DeviceReport(0, 10, 5, 2, 1.0),))
    (tmp_path / "report.bin").write_bytes(encode_report(report))
    argv = script(tmp_path, "probe.py", f"""\
        import os, sys
        fd = os.open({str(peak)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, open({str(tmp_path / "report.bin")!r}, "rb").read())
        sys.exit({status})
        """)
    result = run_probe(argv, os.environ, timeout_s=120)
    if expected.startswith("failed "):
        with pytest.raises(ProbeFailed, match=expected):
            probe_report(result, str(peak), 4)
    else:
        assert probe_report(result, str(peak), 4) == report
