# tests/python/test_run.py -- `python -m vramscope.run`: argv, __main__, exit codes, exceptions
import os
import pathlib
import textwrap

import pytest

from vramscope.run import DevicePeak, RunOptions, UsageError, format_summary, parse_args

from conftest import child_env, run_python

GiB = 1 << 30

PROGRAM = textwrap.dedent("""
    import sys
    print("name", __name__)
    print("argv", sys.argv[1:])
    print("path0", sys.path[0])
    if sys.argv[1] == "raise":
        raise KeyError("boom from the program")
    if sys.argv[1] == "exit":
        sys.exit(int(sys.argv[2]))
    if sys.argv[1] == "message":
        sys.exit("fatal: custom message")
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    return path


def test_script_gets_its_argv_main_and_folder(script, tmp_path):
    out = run_python(["-m", "vramscope.run", str(script), "ok", "--flag", "-m", "x"],
                     VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["name __main__", "argv ['ok', '--flag', '-m', 'x']",
                                       f"path0 {tmp_path}"]


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_code_propagates(script, code):
    out = run_python(["-m", "vramscope.run", str(script), "exit", str(code)],
                     VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == code


def test_exit_with_message(script):
    out = run_python(["-m", "vramscope.run", str(script), "message"], VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 1
    assert out.stderr.strip().endswith("fatal: custom message")


def test_exception_propagates_with_traceback(script):
    out = run_python(["-m", "vramscope.run", str(script), "raise"], VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 1
    assert "Traceback" in out.stderr
    assert out.stderr.strip().splitlines()[-1] == "KeyError: 'boom from the program'"


def test_module_mode(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(PROGRAM)
    out = run_python(["-m", "vramscope.run", "-m", "mypkg.tool", "exit", "5"], cwd=tmp_path,
                     VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 5, out.stderr
    assert out.stdout.splitlines()[:2] == ["name __main__", "argv ['exit', '5']"]


def test_not_quiet_explains_and_summarises(script, has_gpu):
    out = run_python(["-m", "vramscope.run", str(script), "exit", "0"])
    assert out.returncode == 0
    lines = out.stderr.strip().splitlines()
    if has_gpu:
        assert lines[-1].startswith("vramscope: 0 steps")
    else:
        assert lines == ["vramscope run: no CUDA GPU is visible to PyTorch "
                         "(torch.cuda.is_available() is False); running without the agent"]


@pytest.mark.parametrize("args, env, text", [
    ([], {}, "missing the program"),
    (["-m"], {}, "-m needs a module name"),
    (["--nope", "x.py"], {}, "unknown option '--nope'"),
    (["x.py"], {"VRAMSCOPE_RUN_INTERVAL_MS": "fast"}, "VRAMSCOPE_RUN_INTERVAL_MS"),
    (["x.py"], {"VRAMSCOPE_RUN_INTERVAL_MS": "0"}, "VRAMSCOPE_RUN_INTERVAL_MS"),
])
def test_usage_errors_exit_2(args, env, text, tmp_path):
    (tmp_path / "x.py").write_text("")
    out = run_python(["-m", "vramscope.run", *args], cwd=tmp_path, **env)
    assert out.returncode == 2
    assert text in out.stderr


@pytest.mark.parametrize("args, line", [
    (["missing_script.py"], "vramscope run: error: no such file: missing_script.py"),
    (["-m", "nonexistent_mod"], "vramscope run: error: no module named nonexistent_mod"),
    (["-m", "nonexistent_pkg.mod"], "vramscope run: error: no module named nonexistent_pkg.mod"),
])
def test_a_missing_program_is_one_line_and_exit_1(args, line, tmp_path):
    out = run_python(["-m", "vramscope.run", *args], cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr == line + "\n"


def test_a_package_without_main_is_one_line(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    out = run_python(["-m", "vramscope.run", "-m", "pkg"], cwd=tmp_path,
                     PYTHONPATH=str(tmp_path) + os.pathsep + child_env()["PYTHONPATH"],
                     VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 1
    assert out.stderr.startswith("vramscope run: error: No module named pkg.__main__")
    assert len(out.stderr.splitlines()) == 1, out.stderr


def test_the_programs_traceback_starts_at_its_own_frames(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("def train():\n    raise ValueError('bad batch')\n\ntrain()\n")
    out = run_python(["-m", "vramscope.run", str(script)], cwd=tmp_path, VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        "Traceback (most recent call last):",
        f'  File "{script}", line 4, in <module>',
        "    train()",
        f'  File "{script}", line 2, in train',
        "    raise ValueError('bad batch')",
        "ValueError: bad batch",
    ]


def test_a_syntax_error_names_the_file_and_no_vramscope_frame(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("x = (\n")
    out = run_python(["-m", "vramscope.run", str(script)], cwd=tmp_path, VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 1
    assert "SyntaxError" in out.stderr and str(script) in out.stderr
    assert "vramscope" not in out.stderr.replace(str(tmp_path), "") and "runpy" not in out.stderr


def test_the_example_says_it_needs_a_gpu(tmp_path, has_gpu):
    if has_gpu:
        pytest.skip("needs a machine without a GPU")
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_small_gpt.py"
    out = run_python(["-m", "vramscope.run", str(example), "--seconds", "1"], cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1].startswith("train_small_gpt.py needs a CUDA GPU")
    assert "Traceback" not in out.stderr


def test_help_exits_0():
    out = run_python(["-m", "vramscope.run", "--help"])
    assert out.returncode == 0
    assert out.stdout.startswith("usage: python -m vramscope.run")


def test_parse_args():
    assert parse_args(["-mpkg.mod", "a"], {}) == RunOptions("pkg.mod", None, ["a"], 10.0, False)
    assert parse_args(["s.py", "-m", "x"], {"VRAMSCOPE_RUN_INTERVAL_MS": "2.5",
                                             "VRAMSCOPE_RUN_QUIET": "yes"}) == RunOptions(
        None, "s.py", ["-m", "x"], 2.5, True)
    assert parse_args(["s.py"], {"VRAMSCOPE_RUN_QUIET": "0"}).quiet is False
    with pytest.raises(UsageError):
        parse_args(["s.py"], {"VRAMSCOPE_RUN_INTERVAL_MS": "-1"})


def test_summary_text():
    peaks = [DevicePeak(0, 3 * GiB // 2, 2 * GiB, 0), DevicePeak(1, 512, 2 << 20, 1)]
    assert format_summary("events", 120, peaks) == (
        "vramscope: 120 steps, 1 OOM | cuda:0 peak allocated 1.5 GiB, peak reserved 2.0 GiB"
        " | cuda:1 peak allocated 512 B, peak reserved 2.0 MiB (events)")
    assert format_summary("pending", 0, []) == (
        "vramscope: 0 steps; the program did not use CUDA (pending)")


def test_polled_peaks_are_marked_in_the_summary():
    peaks = [DevicePeak(0, 3 * GiB // 2, 2 * GiB, 0)]
    text = format_summary("polling: no C++ compiler", 3, peaks)
    first, second = text.splitlines()
    assert first == ("vramscope: 3 steps, 0 OOMs | cuda:0 peak allocated ≥1.5 GiB, peak reserved "
                     "≥2.0 GiB (polling: no C++ compiler)")
    assert "sampled peaks, not exact" in second
