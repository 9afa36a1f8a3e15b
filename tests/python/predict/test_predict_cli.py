# tests/python/predict/test_predict_cli.py -- `vramscope fit`'s command line: probes' argv, help, usage
from __future__ import annotations

import sys

import pytest

from vramscope.predict.child import ProbeSink, from_env
from vramscope.predict.cli import main, probe_argv

from conftest import run_python


def test_a_probe_runs_the_program_under_the_agent_with_the_size():
    assert probe_argv(["--", "python3", "train.py", "--batch-size", "{}"], 24) == \
        ["python3", "-m", "vramscope.run", "train.py", "--batch-size", "24"]
    assert probe_argv(["python", "-m", "pkg.train", "--bs={}"], 8) == \
        ["python", "-m", "vramscope.run", "-m", "pkg.train", "--bs=8"]
    assert probe_argv(["train.py", "{}"], 3, python="/venv/bin/python") == \
        ["/venv/bin/python", "-m", "vramscope.run", "train.py", "3"]


@pytest.mark.parametrize("command, message", [
    ([], "missing the command"),
    (["python", "train.py"], "no {}"),
    (["torchrun", "train.py", "{}"], "cannot run 'torchrun'"),
    (["python", "-u", "train.py", "{}"], "interpreter options"),
])
def test_commands_it_cannot_probe_are_refused(command, message):
    with pytest.raises(ValueError, match=message):
        probe_argv(command, 1)


def test_a_usage_error_exits_2_and_says_why(capsys):
    assert main(["--", "python", "train.py"]) == 2
    assert "no {} for the size" in capsys.readouterr().err
    assert main(["--margin", "1.5", "--", "python", "t.py", "{}"]) == 2


def test_help_teaches_the_model_the_budget_and_an_example():
    proc = run_python(["-m", "vramscope.predict", "--help"])
    assert proc.returncode == 0
    for text in ("fixed + per-sample x size", "never provokes an OOM", "budget:", "cap",
                 "vramscope fit -- python train.py --batch-size {}", "--margin"):
        assert text in proc.stdout, text


def test_the_probe_sink_writes_its_steps_owner_only(tmp_path):
    import os

    class Record:
        def __init__(self, step):
            self.step, self.device = step, 0
            self.peak_allocated_bytes, self.peak_reserved_bytes = 100 * step, 200 * step
            self.allocated_bytes = 50

    sink = from_env({"VRAMSCOPE_FIT_OUT": str(tmp_path / "p.json"), "VRAMSCOPE_FIT_STEPS": "5"})
    assert isinstance(sink, ProbeSink) and sink.steps == 5
    sink.write_step(Record(1))
    sink.close()
    sink.close()  # once
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o600
    assert '"peak_reserved_bytes":200' in (tmp_path / "p.json").read_text()
    # A planted file is never written through.
    planted = ProbeSink(str(tmp_path / "p.json"), 1)
    with pytest.raises(FileExistsError):
        planted.close()
    assert from_env({}) is None
    assert os.path.exists(tmp_path / "p.json")


def test_a_probe_process_that_runs_no_step_is_an_error(tmp_path):
    script = tmp_path / "nothing.py"
    script.write_text("import sys\nprint('size', sys.argv[1])\n")
    proc = run_python(["-m", "vramscope.predict", "--", sys.executable, str(script), "{}"])
    assert proc.returncode == 1
    assert "measured no step" in proc.stderr or "used no GPU" in proc.stderr
