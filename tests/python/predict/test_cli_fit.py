# tests/python/predict/test_cli_fit.py -- `vramscope fit` (the C++ command) hands everything to Python
#
# Needs the built binary: $VRAMSCOPE_CLI, else `vramscope` on PATH (an installed wheel).
import os
import shutil
import subprocess
import sys

import pytest

from conftest import child_env

CLI = os.environ.get("VRAMSCOPE_CLI") or shutil.which("vramscope")
pytestmark = pytest.mark.skipif(CLI is None, reason="set VRAMSCOPE_CLI to the vramscope binary")


def cli(*args):
    return subprocess.run([CLI, *args], env=child_env(VRAMSCOPE_PYTHON=sys.executable),
                          capture_output=True, text=True, timeout=120)


def test_help_is_the_python_commands_and_the_root_lists_fit():
    out = cli("fit", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: vramscope fit")
    assert "never provokes an OOM" in out.stdout
    assert "fit " in cli("--help").stdout


@pytest.mark.parametrize("args", [("--", "python", "train.py"), ("python", "train.py")])
def test_a_leading_double_dash_reaches_python_which_checks_the_command(args):
    out = cli("fit", *args)
    assert out.returncode == 2
    assert "the command has no {} for the size" in out.stderr


def test_a_missing_interpreter_is_one_line_and_exit_1():
    out = subprocess.run([CLI, "fit", "--help"], env=child_env(VRAMSCOPE_PYTHON="/nonexistent/python"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "fit: cannot start /nonexistent/python" in out.stderr


@pytest.mark.parametrize("option", [["--budget", "abc"], ["--start", "-1"], ["--timeout", "nan"],
                                    ["--multiple", "0"]])
def test_a_bad_option_through_the_binary_is_one_line_and_exit_2(tmp_path, option):
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    out = cli("fit", *option, "--", sys.executable, str(script), "{}")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("vramscope fit: error: ")
    assert not marker.exists()
