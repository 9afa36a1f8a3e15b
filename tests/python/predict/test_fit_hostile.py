# tests/python/predict/test_fit_hostile.py -- `vramscope fit` end to end with honest and hostile probes
#
# Issue 45. Each probe is a small program the test writes, run by `python -m vramscope.predict`
# as `fit` runs it (under `python -m vramscope.run`, which on a machine without a GPU runs it
# without the agent): it writes the peak file a probe on a GPU would write, or a hostile one.
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from vramscope.predict.cli import main, parse_budget

from conftest import child_env
from test_probe_process import gone

GiB = 1 << 30

#: What every fake probe starts with: its size, its peak file, and report() to write one.
PRELUDE = '''\
import json, os, sys
GiB = 1 << 30
size = int(sys.argv[1])
out = os.environ["VRAMSCOPE_FIT_OUT"]

def write(data):
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data if isinstance(data, bytes) else json.dumps(data).encode())

def report(allocated, reserved, outcome="measured", total=80 * GiB, free=60 * GiB, held=0,
           steps=3):
    """One GPU of ``total`` bytes, ``free`` of them free, ``held`` reserved at the end."""
    write({"format": "vramscope-fit-peaks", "version": 2, "outcome": outcome,
           "steps": [{"step": s, "device": 0, "peak_allocated_bytes": allocated,
                      "peak_reserved_bytes": reserved, "peak_pinned_bytes": 0,
                      "resident_bytes": 0, "peaks_exact": 1} for s in range(1, steps + 1)],
           "devices": [{"device": 0, "total_bytes": total, "free_bytes": free,
                        "reserved_bytes": held, "fraction": 1.0}]})
'''


def probe(tmp_path, body: str) -> list[str]:
    """The command of a fake probe: PRELUDE, then ``body``."""
    path = tmp_path / "probe.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return ["--", sys.executable, str(path), "{}"]


def fit(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vramscope.predict", *args], env=child_env(),
                          capture_output=True, text=True, timeout=timeout)


# ---- options: checked before anything runs

@pytest.mark.parametrize("options", [
    ["--budget", "abc"], ["--budget", "0"], ["--budget", "-1"], ["--budget", "2.5"],
    ["--budget", "inf"], ["--budget", "nan"], ["--budget", "12"], ["--budget", "0GiB"],
    ["--budget", "-1GiB"], ["--budget", "9" * 400 + "GiB"], ["--budget", "2PiB"],
    ["--start", "-1"], ["--start", "0"], ["--start", "2.5"], ["--start", "abc"],
    ["--start", " 3"], ["--start", str(1 << 41)],
    ["--timeout", "abc"], ["--timeout", "0"], ["--timeout", "-1"], ["--timeout", "inf"],
    ["--timeout", "nan"], ["--timeout", "1e9"],
    ["--limit", "0"], ["--limit", "-1"], ["--multiple", "0"], ["--multiple", "-1"],
    ["--steps", "0"], ["--steps", "1000"], ["--max-probes", "1"], ["--margin", "nan"],
    ["--margin", "1"], ["--start", "8", "--limit", "4"], ["--over", "seq_len", "--limit", "16"],
    ["--limit", "8", "--multiple", "16"],
])
def test_a_bad_option_is_exit_2_and_one_line_before_any_probe(tmp_path, capsys, options):
    marker = tmp_path / "ran"
    command = probe(tmp_path, f"open({str(marker)!r}, 'w').close()\n")
    assert main([*options, *command]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vramscope fit: error: "), err
    assert err.rstrip().endswith("(vramscope fit --help)")
    assert not marker.exists(), "a probe ran before the options were checked"


@pytest.mark.parametrize("text, spec", [
    ("card", "card"), ("cap", "cap"), ("0.5", 0.5), ("1", 1.0), (".25", 0.25),
    ("12GiB", 12 * GiB), ("12 GiB", 12 * GiB), ("1.5GB", 3 * GiB // 2),
])
def test_the_budgets_that_are_legal(text, spec):
    assert parse_budget(text) == spec and type(parse_budget(text)) is type(spec)


# ---- honest answers

def test_an_answer_measured_at_the_first_size_is_said_in_text_and_json_alike(tmp_path):
    # Issue 45: batch 1 peaks at 40 GiB of a 60 GiB budget; batch 2 might not fit. It printed
    # "answer: none" while exiting 0, and --json said "answer": 1.
    command = probe(tmp_path, "report(38 * GiB, 40 * GiB)\n")
    text = fit(*command)
    assert text.returncode == 0, text.stderr
    assert "answer: batch_size 1: needs ≈40.0 GiB (peak ≈38.0 GiB allocated" in text.stdout
    assert "measured at batch_size 1" in text.stdout and "answer: none" not in text.stdout
    as_json = fit("--json", *command)
    assert as_json.returncode == 0
    result = json.loads(as_json.stdout)
    assert result["answer"] == 1 and result["prediction"]["reserved_bytes"] == 40 * GiB


def test_when_nothing_fits_json_says_null_and_exit_1(tmp_path):
    # The text of the same result: test_predict_search.py (text and JSON from one result).
    out = fit("--json", *probe(tmp_path, "report(60 * GiB, 62 * GiB)\n"))
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["answer"] is None and result["prediction"] is None
    assert result["reason"] == "batch_size 1 already needs more than the budget allows"


def test_when_not_one_multiple_fits_there_is_no_answer(tmp_path):
    # 10 GiB a sample of a 60 GiB budget: 5 fit, 8 do not. --multiple was ignored below it.
    command = probe(tmp_path, "report(10 * GiB * size, 10 * GiB * size + GiB // 2)\n")
    out = fit("--multiple", "8", "--max-probes", "2", "--json", *command)
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["answer"] is None
    assert result["reason"].startswith("no multiple of 8 fits: batch_size 5 is the largest")


# ---- failures: an OOM only from the probe's own report

def test_an_error_that_mentions_out_of_memory_is_the_probes_error(tmp_path):
    # Issue 45: a ValueError at batch 92 gave "answer: batch_size 2 ... size 92 ran out of
    # memory", exit 0, and the real error was never shown.
    command = probe(tmp_path, """\
        if size > 1:
            raise ValueError(f"batch {size}: labels out of memory range")
        report(GiB, 2 * GiB)
        """)
    out = fit(*command)
    assert out.returncode == 1, out.stdout
    assert "answer" not in out.stdout
    assert "vramscope fit: error: the probe at batch_size 2 failed (exit 1)" in out.stderr
    assert "ValueError: batch 2: labels out of memory range" in out.stderr


def test_the_probes_oom_report_ends_the_search_below_it(tmp_path):
    command = probe(tmp_path, """\
        if size > 1:
            report(GiB, 2 * GiB, outcome="out_of_memory", steps=0)
            raise SystemExit(1)
        report(GiB, 2 * GiB)
        """)
    out = fit("--json", *command)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["answer"] == 1
    assert "size 2 ran out of memory: its step raised CUDA's OutOfMemoryError" in result["reason"]


# ---- hostile peak files (every refusal of the reader: test_peak_file.py) and process trees

@pytest.mark.parametrize("body, message", [
    ("os.mkfifo(out, 0o600)\n", "it is a FIFO, not a regular file"),
    ("os.symlink('/dev/zero', out)\n", "it is a symbolic link"),
    ("report(GiB, GiB, total=2**64 - 1)\n", "total_bytes is 18446744073709551615"),
])
def test_a_hostile_peak_file_is_one_clear_error_naming_the_probe(tmp_path, body, message):
    out = fit("--timeout", "60", *probe(tmp_path, body))
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    error = next(line for line in lines if line.startswith("vramscope fit: error:"))
    assert error.startswith("vramscope fit: error: the probe at batch_size 1 left a peak file "
                            "that is not used: "), error
    assert message in error
    assert "Traceback" not in out.stderr


def test_a_probe_that_left_a_child_holding_stdout_ends_fit_when_it_exits(tmp_path):
    # Issue 45: fit waited the whole --timeout on the pipe, then ended in a traceback; and one
    # byte of output that is not UTF-8 crashed it, although the probe measured its steps.
    command = probe(tmp_path, """\
        import subprocess
        subprocess.Popen(["sleep", "1000"])
        sys.stdout.buffer.write(b"\\xff\\xfe not utf-8\\n")
        report(38 * GiB, 40 * GiB)
        """)
    out = fit("--timeout", "600", *command, timeout=120)  # a hang fails here, in 120 s
    assert out.returncode == 0, out.stderr
    assert "answer: batch_size 1" in out.stdout


def test_sigterm_kills_the_probes_group_on_the_way_out(tmp_path):
    # A FIFO tells the test when the probe runs (and its pids): a blocking read, no sleep.
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    command = probe(tmp_path, f"""\
        import subprocess
        sleeper = subprocess.Popen(["sleep", "1000"], stdout=subprocess.DEVNULL)
        with open({str(fifo)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{sleeper.pid}}\\n")
        sleeper.wait()
        """)
    fit_process = subprocess.Popen([sys.executable, "-m", "vramscope.predict", *command],
                                   env=child_env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    try:
        with open(fifo) as f:
            pids = [int(p) for p in f.read().split()]
        fit_process.send_signal(signal.SIGTERM)
        _, err = fit_process.communicate(timeout=60)
    finally:
        fit_process.kill()
        fit_process.wait()
    assert fit_process.returncode == 128 + signal.SIGTERM
    assert "stopped by SIGTERM; the probe's process group was killed" in err
    for pid in pids:
        assert gone(pid), f"pid {pid} of the probe is still running"




# ---- the probe's side: the report it writes when the program ends

def test_the_probe_reports_cudas_oom_and_nothing_else(tmp_path):
    torch = pytest.importorskip("torch")
    from vramscope.predict.child import ProbeSink
    from vramscope.predict.peak_file import read_peak_file

    sink = ProbeSink(str(tmp_path / "other.json"), 3)
    sink.program_failed(ValueError("CUDA out of memory"))  # words are not an OOM
    assert not (tmp_path / "other.json").exists()
    sink = ProbeSink(str(tmp_path / "oom.json"), 3)
    sink.program_failed(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    report = read_peak_file(str(tmp_path / "oom.json"))
    assert report.outcome == "out_of_memory" and report.steps == ()


def test_a_program_that_exits_on_its_own_after_the_allocator_ran_out_ran_out(tmp_path,
                                                                            monkeypatch):
    # tests/gpu/fit_program.py catches the OOM and exits 3 (`raise SystemExit(3) from None`):
    # the observer saw the caching allocator run out, so the probe ran out of memory.
    pytest.importorskip("torch")
    from vramscope._core.session import SESSION
    from vramscope.postmortem import oom
    from vramscope.predict.child import ProbeSink
    from vramscope.predict.peak_file import read_peak_file

    from _vram_double import FakeAgent, installed

    monkeypatch.setattr(SESSION, "postmortem", oom.PostMortem(SESSION))
    monkeypatch.setenv("VRAMSCOPE_OOM_REPORT", "0")  # the observer counts; no report here
    sink = ProbeSink(str(tmp_path / "exit.json"), 3)
    sink.program_failed(SystemExit(3))  # no OOM seen: the program's own exit
    assert not (tmp_path / "exit.json").exists()
    with installed(FakeAgent()):
        SESSION.postmortem.on_oom(0)
    sink.program_failed(SystemExit(0))  # it caught the OOM and ended well: no failure
    assert not (tmp_path / "exit.json").exists()
    sink.program_failed(SystemExit(3))
    assert read_peak_file(str(tmp_path / "exit.json")).outcome == "out_of_memory"


def test_polled_peaks_are_never_an_answer(tmp_path):
    # A probe without the agent (polling): its peaks are the highest values polled.
    body = """
        write({"format": "vramscope-fit-peaks", "version": 2, "outcome": "measured",
               "steps": [{"step": s, "device": 0, "peak_allocated_bytes": GiB * size,
                          "peak_reserved_bytes": GiB * size, "peak_pinned_bytes": 0,
                          "resident_bytes": 0, "peaks_exact": 0} for s in (1, 2, 3)],
               "devices": [{"device": 0, "total_bytes": 80 * GiB, "free_bytes": 60 * GiB,
                            "reserved_bytes": 0, "fraction": 1.0}]})
    """
    out = fit(*probe(tmp_path, body))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "polling mode" in out.stderr and "answer" not in out.stdout


def test_the_pinned_peaks_a_probe_measured_are_the_need(tmp_path):
    # Pinned 5 % above allocated, reserved far above both: the answer stands on the pinned
    # peaks (the allowance), not on the reserved ones.
    body = """
        allocated = GiB + size * GiB // 4
        write({"format": "vramscope-fit-peaks", "version": 2, "outcome": "measured",
               "steps": [{"step": s, "device": 0, "peak_allocated_bytes": allocated,
                          "peak_reserved_bytes": allocated * 3 // 2,
                          "peak_pinned_bytes": allocated * 105 // 100,
                          "resident_bytes": GiB, "peaks_exact": 1}
                         for s in (1, 2, 3)],
               "devices": [{"device": 0, "total_bytes": 80 * GiB, "free_bytes": 60 * GiB,
                            "reserved_bytes": 0, "fraction": 1.0}]})
    """
    out = fit("--json", "--budget", "20GiB", "--margin", "0", *probe(tmp_path, body))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert abs(doc["model"]["allowance"] - 1.05) < 1e-6
    truth = int((20 / 1.05 - 1) * 4)  # the largest size whose pinned peak fits 20 GiB
    assert doc["answer"] <= truth and doc["answer"] >= 0.95 * truth, doc


def test_probes_the_first_one_shows_to_fit_run_side_by_side(tmp_path):
    # Batch 2 and 4 (the doublings batch 1 alone shows to fit, with room on the card for
    # both) must run at once: each opens one end of a FIFO, which blocks until the other end
    # is open. One after the other, batch 2 would wait for --timeout and fit would fail.
    fifo = tmp_path / "rendezvous"
    os.mkfifo(fifo)
    body = f"""
        if size in (2, 4):
            with open({str(fifo)!r}, "r" if size == 2 else "w"):
                pass
        allocated = GiB + size * GiB // 16
        write({{"format": "vramscope-fit-peaks", "version": 2, "outcome": "measured",
               "steps": [{{"step": s, "device": 0, "peak_allocated_bytes": allocated,
                          "peak_reserved_bytes": allocated, "peak_pinned_bytes": allocated,
                          "resident_bytes": GiB, "peaks_exact": 1}} for s in (1, 2, 3)],
               "devices": [{{"device": 0, "total_bytes": 80 * GiB, "free_bytes": 70 * GiB,
                            "reserved_bytes": 0, "fraction": 1.0}}]}})
    """
    out = fit("--json", "--budget", "20GiB", "--timeout", "30", *probe(tmp_path, body))
    assert out.returncode == 0, out.stderr
    assert "probes side by side" in out.stderr
    doc = json.loads(out.stdout)
    truth = int((20 * GiB * 0.99 - GiB) // (GiB // 16))
    assert 0.9 * truth <= doc["answer"] <= truth
    assert {2, 4} <= {p["size"] for p in doc["probes"]}
