# tests/python/_core/test_torchlib_build.py -- the compile on first use finds whole CUDA headers
"""The GPU machine's layout, reproduced: torch from PyPI with CUDA 13, whose runtime wheel
(``nvidia/cu13/include``) has cuda_runtime.h but no ``crt/``, and a CUDA toolkit elsewhere that
has it. The compiler is wrapped so that its own search path holds no ``crt/`` either (a machine
where the toolkit put one in /usr/local/include compiles by luck, as this one does)."""

from __future__ import annotations

import glob
import os
import pathlib
import shutil
import stat
import subprocess

import pytest
import torch

from vramscope._core import torchlib_build as tb

SITE = pathlib.Path(torch.__file__).resolve().parents[1]
#: The runtime wheel's headers installed with torch, and a toolkit's include folder with crt/.
RUNTIME = next(iter(sorted(glob.glob(str(SITE / "nvidia" / "**" / tb.RUNTIME_HEADER),
                                     recursive=True))), None)
TOOLKIT = next((d for d in tb._cuda_roots(os.environ)
                if os.path.isfile(os.path.join(d, tb.CRT_HEADER))), None)

pytestmark = pytest.mark.skipif(
    RUNTIME is None or TOOLKIT is None or shutil.which("c++") is None,
    reason="needs torch's CUDA runtime wheel, a CUDA toolkit with crt/ and a C++ compiler")


def _compiler_without_crt(folder: pathlib.Path) -> str:
    """A `c++` whose own search path leaves out every folder that holds crt/ (-nostdinc, then
    the compiler's folders again but those)."""
    probe = subprocess.run(["c++", "-xc++", "-E", "-v", os.devnull], capture_output=True,
                           text=True, check=True).stderr.splitlines()
    start = probe.index("#include <...> search starts here:") + 1
    dirs = [d.strip() for d in probe[start:probe.index("End of search list.")]]
    kept = [d for d in dirs if not os.path.isfile(os.path.join(d, tb.CRT_HEADER))]
    script = folder / "c++"
    script.write_text("#!/bin/sh\nexec c++ -nostdinc " +
                      " ".join(f"-isystem '{d}'" for d in kept) + ' "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture()
def layout(tmp_path, monkeypatch):
    """(fake torch folder, CUDA_HOME, compiler): a site with torch and the runtime wheel's
    headers less crt/, and a toolkit reached through CUDA_HOME only."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    shutil.copytree(os.path.dirname(RUNTIME), site / "nvidia" / "cu13" / "include",
                    ignore=shutil.ignore_patterns("crt"))
    home = tmp_path / "cuda"
    home.mkdir()
    (home / "include").symlink_to(os.path.dirname(os.path.join(TOOLKIT, tb.RUNTIME_HEADER)))
    monkeypatch.setattr(tb, "SYSTEM_CUDA_ROOTS", ())
    return site / "torch", home, _compiler_without_crt(tmp_path)


def _sources(root: pathlib.Path) -> pathlib.Path:
    """A source tree of the library's file names, each a unit that includes cuda_runtime.h (as
    torch's c10/cuda headers do)."""
    for rel in tb.SOURCES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("#include <cuda_runtime.h>\n"
                                "extern \"C\" int vramscope_torch_api() { return 0; }\n"
                                if rel == tb.SOURCES[0] else "#include <cuda_runtime.h>\n")
    return root


def test_a_runtime_wheel_without_crt_is_paired_with_the_toolkits_crt(layout, tmp_path):
    torch_dir, home, cxx = layout
    env = {"CUDA_HOME": str(home), "PATH": ""}
    includes = tb.cuda_include_dirs(torch_dir, env)
    assert includes == [str(torch_dir.parent / "nvidia" / "cu13" / "include"),
                        str(home / "include")]
    # The runtime's own headers come first: cuda_runtime.h is the wheel's, crt/ the toolkit's.
    source = tmp_path / "unit.cpp"
    source.write_text("#include <cuda_runtime.h>\nint main() { return CUDART_VERSION > 0 ? 0 : 1; }\n")
    flags = tb.compile_flags(tmp_path, torch_dir, "2.99.0", True, includes)
    out = subprocess.run([cxx, *flags, "-fsyntax-only", "-H", str(source)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    headers = [line.lstrip(". ") for line in out.stderr.splitlines() if line.startswith(".")]
    first = {suffix: os.path.realpath(next(h for h in headers if h.endswith(suffix)))
             for suffix in ("/cuda_runtime.h", "/crt/host_config.h")}
    assert first["/cuda_runtime.h"].startswith(os.path.realpath(includes[0]))
    assert first["/crt/host_config.h"].startswith(os.path.realpath(includes[1]))


def test_crt_beside_the_runtime_needs_no_second_folder(layout):
    torch_dir, home, _ = layout
    runtime = torch_dir.parent / "nvidia" / "cu13" / "include"
    (runtime / "crt").mkdir()
    (runtime / tb.CRT_HEADER).write_text("")  # what nvidia-cuda-crt adds to the same folder
    assert tb.cuda_include_dirs(torch_dir, {"CUDA_HOME": str(home), "PATH": ""}) == [str(runtime)]


def test_without_crt_anywhere_the_failure_names_the_fix(layout, tmp_path):
    torch_dir, _, cxx = layout
    includes = tb.cuda_include_dirs(torch_dir, {"PATH": ""})
    assert len(includes) == 1
    with pytest.raises(RuntimeError) as failed:
        tb.build(_sources(tmp_path / "src"), torch_dir, "2.99.0", True, tmp_path / "lib.so",
                 str(tmp_path), cxx=cxx, cuda_includes=includes)
    last = str(failed.value).splitlines()[-1]  # the line the session's mode string shows
    assert "pip install nvidia-cuda-crt" in last and "CUDA_HOME" in last, str(failed.value)


def test_the_paired_folders_build_the_library(layout, tmp_path):
    torch_dir, home, cxx = layout
    includes = tb.cuda_include_dirs(torch_dir, {"CUDA_HOME": str(home), "PATH": ""})
    real_torch = pathlib.Path(torch.__file__).resolve().parent
    out = tmp_path / "out" / "lib.so"
    tb.build(_sources(tmp_path / "src"), real_torch, "2.99.0", True, out, str(real_torch / "lib"),
             cxx=cxx, cuda_includes=includes)
    assert out.is_file()
