# tests/wheel/test_torch_matrix.py -- the wheel under torch 2.8, 2.11 and 2.15; compile on first use
#
# For each torch, a fresh venv gets that torch by linking the distributions of a cached venv
# (torch_venvs.py: ~/.cache/vramscope/torch-venv/<version>, created once with `pip install
# torch==<version>` and kept; tools/test.sh creates them while the C++ builds run) and the
# wheel with plain pip. In it the agent loads the library the wheel carries for that torch and
# counts real tracker events exactly: the CPU proxy
# (agent/torchlib/cpu_proxy.cpp) makes torch's CPU tensors call the very tracker the library
# hands to torch's caching allocator. Then a torch the wheel carries no library for (its
# library removed from the venv) gets one compiled on first use with the machine's compiler,
# and without a compiler one line says so and the session polls.
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from test_wheel import WHEEL, Venv, _torch_closure
from torch_venvs import TORCHES, torch_venv

pytestmark = pytest.mark.skipif(not WHEEL, reason="set VRAMSCOPE_WHEEL to a built wheel "
                                                  "(tools/build-wheel.sh prints its path)")
#: Tensors the probe allocates, and each one's bytes (>= 64: the proxy traces it).
TENSORS, FLOATS = 100, 1000

#: Attaches the CPU proxy, allocates and frees TENSORS tensors, prints what the agent counted.
PROBE = f"""
import torch
from vramscope._core import session
agent, problem = session.load_agent(torch)
assert problem is None, problem
print(agent.torch_version())
print(agent._bench_attach_cpu_proxy(10.0).split(" ")[0])
xs = [torch.ones({FLOATS}) for _ in range({TENSORS})]
del xs
s = agent.stats(0)
print(s["event_count"], s["peak_requested_bytes"], s["requested_bytes"], s["unknown_event_count"])
"""


def _site(python: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
        text=True).strip())


def _fresh(root: pathlib.Path, version: str) -> Venv:
    """A fresh venv with torch ``version`` (linked, not copied) and the wheel."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    v = Venv(root)
    import torch

    if torch.__version__.split("+")[0] == version:
        dists = _torch_closure()
        sources = [pathlib.Path(d.locate_file("")) / pathlib.PurePosixPath(rel).parts[0]
                   for d in dists for rel in d.files or []]
    else:
        cached = _site(torch_venv(version) / "bin" / "python")
        sources = [p for p in cached.iterdir() if p.name not in ("pip", "__pycache__")
                   and not p.name.startswith(("pip-", "_distutils", "distutils"))]
    for source in sources:
        target = v.site / source.name
        if source.name not in ("..", "__pycache__") and not target.exists():
            target.symlink_to(source)
    out = v.run(v.python, "-m", "pip", "install", "--no-index", "--only-binary=:all:",
                str(pathlib.Path(WHEEL).resolve()))
    assert out.returncode == 0, out.stdout + out.stderr
    return v


def _expect_exact_events(out: subprocess.CompletedProcess, version: str) -> None:
    assert out.returncode == 0, out.stdout + out.stderr
    built, mode, counts = out.stdout.strip().splitlines()[-3:]
    assert built.split("+")[0].split(".")[:2] == version.split(".")[:2], built
    assert mode == "events"
    # Each tensor: ALLOC, FREE_REQUESTED, FREE_COMPLETED; its 4000 bytes requested at the peak.
    assert counts == f"{3 * TENSORS} {TENSORS * FLOATS * 4} 0 0", counts


@pytest.mark.parametrize("version", TORCHES)
def test_the_wheels_library_for_this_torch_counts_every_event(version, tmp_path):
    v = _fresh(tmp_path / "venv", version)
    out = v.run(v.python, "-c", "import torch; print(torch.__version__)")
    assert out.stdout.startswith(version), out.stdout + out.stderr
    _expect_exact_events(v.run(v.python, "-c", PROBE, VRAMSCOPE_CACHE_DIR=str(tmp_path)), version)
    # The wheel's own library served it: nothing was compiled.
    assert not (tmp_path / "torchlib").exists()


@pytest.fixture(scope="module")
def uncarried(tmp_path_factory) -> Venv:
    """A venv whose torch the wheel carries no library for (the library removed)."""
    v = _fresh(tmp_path_factory.mktemp("uncarried") / "venv", "2.11.0")
    (library,) = (v.site / "vramscope" / "_torch").glob("libvramscope_torch_2_11.so")
    library.unlink()
    return v


def test_another_torch_gets_a_library_compiled_on_first_use(uncarried, tmp_path):
    # $CXX is honoured (ccache makes a second run of the suite fast; the compiler is real).
    cxx = "ccache c++" if shutil.which("ccache") else "c++"
    out = uncarried.run(uncarried.python, "-c", PROBE, VRAMSCOPE_CACHE_DIR=str(tmp_path),
                        CXX=cxx)
    _expect_exact_events(out, "2.11.0")
    assert "vramscope: compiling the agent for torch 2.11.0" in out.stderr, out.stderr
    (compiled,) = (tmp_path / "torchlib").glob("*/libvramscope_torch.so")
    assert compiled.stat().st_mode & 0o077 == 0
    # The second process finds it in the cache: no compiler runs.
    out = uncarried.run(uncarried.python, "-c", PROBE, VRAMSCOPE_CACHE_DIR=str(tmp_path),
                        CXX="/nonexistent/c++")
    _expect_exact_events(out, "2.11.0")
    assert "compiling" not in out.stderr


def test_without_a_compiler_one_line_says_so_and_the_session_polls(uncarried, tmp_path):
    probe = ("import warnings, torch, vramscope\n"
             "from vramscope._core import session\n"
             "agent, problem = session.load_agent(torch)\n"
             "print(agent, problem)\n")
    out = uncarried.run(uncarried.python, "-c", probe, VRAMSCOPE_CACHE_DIR=str(tmp_path),
                        PATH=str(uncarried.bin))
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert line.startswith("None no C++ compiler (c++, g++ or clang++; or $CXX) to build the "
                           "agent for torch 2.11.0"), line
    assert "\n" not in line
    assert not list(tmp_path.glob("torchlib/*/*.so"))
