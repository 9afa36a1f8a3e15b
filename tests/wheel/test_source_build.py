# tests/wheel/test_source_build.py -- source builds without the Debian -dev packages; the sdist
#
# The system's include and library folders are hidden from CMake (CMAKE_IGNORE_PATH), as on a
# CUDA container or a conda env: the configure must either succeed (an agent-only build needs no
# third-party header) or stop with one line naming the packages for Debian/Ubuntu, Fedora, conda.
# Configure only: compiling is what tools/build-wheel.sh (and the rest of the suite) does.
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HIDDEN = "/usr/include;/usr/lib/x86_64-linux-gnu;/usr/lib;/lib/x86_64-linux-gnu"


def configure(source: pathlib.Path, build: pathlib.Path,
              *defines: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-DVRAMSCOPE_TEST=OFF",
         "-DVRAMSCOPE_BENCH=OFF", f"-DPython_EXECUTABLE={sys.executable}", *defines],
        capture_output=True, text=True, timeout=300)


def test_missing_headers_stop_with_one_line_naming_the_packages(tmp_path):
    out = configure(ROOT, tmp_path, "-DVRAMSCOPE_AGENT=OFF", f"-DCMAKE_IGNORE_PATH={HIDDEN}")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines()
             if line.startswith("vramscope: missing C++ headers or libraries;")]
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert "Debian/Ubuntu `apt install libfmt-dev libzstd-dev libcli11-dev libncurses-dev`" in line
    assert "Fedora `dnf install fmt-devel libzstd-devel cli11-devel ncurses-devel`" in line
    assert "conda `conda install -c conda-forge fmt zstd cli11 ncurses`" in line
    if importlib.util.find_spec("nlohmann_json") is not None:
        # The JSON headers came from the nlohmann-json build requirement instead.
        assert "json" not in line


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or
                    importlib.util.find_spec("nanobind") is None,
                    reason="needs torch and nanobind (the agent's build requirements)")
def test_an_agent_only_build_needs_no_third_party_header(tmp_path):
    out = configure(ROOT, tmp_path, "-DVRAMSCOPE_AGENT=ON", "-DVRAMSCOPE_CLI=OFF",
                    f"-DCMAKE_IGNORE_PATH={HIDDEN}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "agent" / "_build_info.py").exists()


@pytest.mark.skipif(importlib.util.find_spec("build") is None, reason="needs `build` (PyPI)")
def test_the_sdist_holds_what_the_build_needs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o",
                          str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    (sdist,) = (tmp_path / "dist").glob("vramscope-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "src", filter="data")
    # Only the project's own files: nothing built, nothing of a build machine.
    assert not [n for n in names if "/build/" in n or "/dist/" in n or n.endswith((".so", ".whl"))]
    (source,) = (tmp_path / "src").iterdir()
    agent = "ON" if importlib.util.find_spec("torch") and importlib.util.find_spec("nanobind") \
        else "OFF"
    out = configure(source, tmp_path / "build", f"-DVRAMSCOPE_AGENT={agent}")
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_documented_source_install_installs_the_build_requirements_first():
    # `pip install --no-build-isolation .` alone fails in a venv without the build backend
    # (ModuleNotFoundError: scikit_build_core): each code block that shows it must first
    # install every [build-system] requirement.
    import re

    import tomllib

    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    names = [re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0] for r in requires]
    checked = 0
    for doc in ("README.md", "docs/install.md"):
        text = (ROOT / doc).read_text()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            lines = block.splitlines()
            for i, line in enumerate(lines):
                if re.search(r"pip install --no-build-isolation (-e )?\.(\s|$)", line):
                    before = " ".join(earlier.split("#")[0] for earlier in lines[:i]
                                      if "pip install" in earlier)
                    missing = [n for n in names if n not in before.split()]
                    assert not missing, f"{doc}: `{line.strip()}` without {missing} before it"
                    checked += 1
    assert checked >= 2
