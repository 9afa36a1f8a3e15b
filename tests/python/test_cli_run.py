# tests/python/test_cli_run.py -- `vramscope run` (the C++ command) execs this Python correctly
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

PROGRAM = ("import os, sys\n"
           "print(sys.argv[1:], os.environ['VRAMSCOPE_RUN_INTERVAL_MS'],\n"
           "      os.environ.get('VRAMSCOPE_RUN_QUIET'))\n"
           "sys.exit(int(sys.argv[1]))\n")


def cli(*args, **env):
    return subprocess.run([CLI, *args], env=child_env(VRAMSCOPE_PYTHON=sys.executable, **env),
                          capture_output=True, text=True, timeout=120)


def test_script_args_interval_quiet_and_exit_code(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = cli("run", "--interval", "0.5s", "--quiet", str(script), "4", "--quiet", "-m", "x")
    assert out.returncode == 4, out.stderr
    assert out.stdout.strip() == "['4', '--quiet', '-m', 'x'] 500 1"
    out = cli("run", "-i", "2", str(script), "0", VRAMSCOPE_RUN_QUIET="1")
    assert out.stdout.strip() == "['0'] 2000 1"
    assert out.stderr == ""


def test_module_form(tmp_path):
    (tmp_path / "progmod.py").write_text(PROGRAM)
    out = cli("run", "-m", "progmod", "0", PYTHONPATH=str(tmp_path) + os.pathsep
              + child_env()["PYTHONPATH"], VRAMSCOPE_RUN_QUIET="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['0'] 10 1"


@pytest.mark.parametrize("args, text", [
    (("run",), "missing the program"),
    (("run", "--interval", "fast", "x.py"), "--interval: cannot read 'fast' as a duration"),
    (("run", "--interval", "0.1ms", "x.py"), "below the 1ms minimum"),
])
def test_usage_errors_exit_2(args, text):
    out = cli(*args)
    assert out.returncode == 2
    assert text in out.stderr


def test_missing_interpreter_is_a_clear_error(tmp_path):
    out = subprocess.run([CLI, "run", "x.py"], capture_output=True, text=True,
                         env={**os.environ, "VRAMSCOPE_PYTHON": str(tmp_path / "nopython")})
    assert out.returncode == 1
    assert "cannot start" in out.stderr and "VRAMSCOPE_PYTHON" in out.stderr
