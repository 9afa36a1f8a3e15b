# tests/python/test_main_sh.py -- tools/main.sh, a new user's first command: progress, errors
#
# main.sh runs from a copy of tools/ in a temporary folder with a stand-in `cmake` first on PATH
# (it configures nothing and "compiles" with the error a broken source gives), so these tests
# take a second and touch no real build.
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

FAKE_CMAKE = """#!/bin/sh
# A stand-in for cmake: configure writes build.ninja; a dry run has work; a build fails.
case "$*" in
  *" -S "*|"-S "*) mkdir -p build/main && : > build/main/build.ninja; echo "-- Configuring done" ;;
  *" -- -n"*) echo "[1/2] Building CXX object cli/CMakeFiles/vramscope.dir/pacing.cpp.o" ;;
  *"--build"*)
    echo "[1/2] Building CXX object cli/CMakeFiles/vramscope.dir/pacing.cpp.o"
    echo "FAILED: cli/CMakeFiles/vramscope.dir/pacing.cpp.o"
    echo "cli/pacing.cpp:3:15: error: static assertion failed"
    echo "    3 | static_assert(false);"
    exit 1 ;;
esac
"""


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("dpkg-query") is None:
        pytest.skip("main.sh installs Debian packages: needs dpkg")
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "cmake").write_text(FAKE_CMAKE)
    (fake / "cmake").chmod(0o755)
    return tmp_path


def test_a_compile_error_is_shown_with_the_log(checkout):
    env = {**os.environ, "PATH": f"{checkout / 'fakebin'}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(checkout / "tools/main.sh")], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "building vramscope (about two minutes on two cores the first time)..." in out.stderr
    assert "cli/pacing.cpp:3:15: error: static assertion failed" in out.stderr
    assert "the whole log: build/main.build.log" in out.stderr
    assert out.stdout == ""
