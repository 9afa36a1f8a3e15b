# python/vramscope/_core/torchlib_build.py -- the torch-facing library for this torch, or compile it
"""The agent is two shared objects: the Python extension ``vramscope._agent`` (one per CPython,
no torch inside) and a torch-facing library (agent/torchlib/, one per torch build), which the
extension dlopens. The wheel carries one library per torch minor version it was built for
(``vramscope/_torch/libvramscope_torch_<major>_<minor>.so``, listed in ``_build_info``). For
any other torch (a nightly, a source build, a newer release) the library is compiled on first
use from the sources the wheel carries (``vramscope/_torchlib_src``) with the machine's C++
compiler, and cached under ``~/.cache/vramscope/torchlib/<key>`` per torch build.

This module imports nothing of vramscope: tools/build-wheel.sh runs it as a script to compile
the wheel's libraries against cached torch downloads, with the very command a user's machine
runs.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import os
import pathlib
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

#: The sources of the library, relative to the source root (the checkout or _torchlib_src).
SOURCES = ("agent/torchlib/torch_library.cpp", "agent/torchlib/cpu_proxy.cpp",
           "src/tracking/device_counters.cpp", "src/tracking/event_ring.cpp",
           "src/tracking/events.cpp", "src/tracking/event_recorder.cpp")
#: Folders of headers the sources include (copied into the wheel whole).
HEADER_DIRS = ("agent/torchlib", "src/tracking/include/vramscope/tracking", "include/vramscope")
#: torch's libraries the library links (loaded already by `import torch`).
TORCH_LIBRARIES = ("c10", "c10_cuda", "torch_cpu")


def library_name(version: str) -> str:
    """``"2.11.0+cu130"`` -> ``"libvramscope_torch_2_11.so"`` (one per torch minor)."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a torch version: {version}")
    return f"libvramscope_torch_{m.group(1)}_{m.group(2)}.so"


def is_release(version: str) -> bool:
    """A release of PyPI (``2.11.0``, ``2.11.0+cu130``), not a nightly or a source build
    (``2.12.0.dev20260101``, ``2.12.0a0+git1234``): only a release has the headers of the
    release the wheel's library was built against."""
    return re.fullmatch(r"\d+\.\d+\.\d+(\+[A-Za-z0-9.]+)?", version) is not None


#: A CUDA include folder is whole for a host compile when it has the runtime's API and the
#: ``crt/`` headers that ``cuda_runtime.h`` includes. PyPI's CUDA 13 runtime wheel
#: (nvidia-cuda-runtime, ``nvidia/cu13/include``) ships no ``crt/``: nvidia-cuda-crt does.
RUNTIME_HEADER = "cuda_runtime_api.h"
CRT_HEADER = os.path.join("crt", "host_config.h")
#: Where CUDA toolkits are installed when no variable or nvcc names one.
SYSTEM_CUDA_ROOTS = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda")


def _cuda_roots(environ: Mapping[str, str]) -> list[str]:
    """Include folders of CUDA installs outside the Python environment, in the order they are
    trusted: $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, the nvcc on PATH, /usr/local/cuda, then any
    /usr/local/cuda-X.Y and /opt/cuda."""
    roots = [environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    nvcc = shutil.which("nvcc", path=environ.get("PATH"))
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    for pattern in SYSTEM_CUDA_ROOTS:
        roots += sorted(glob.glob(pattern), reverse=True)
    found: list[str] = []
    for root in roots:
        if not root:
            continue
        for include in (os.path.join(root, "include"),
                        os.path.join(root, "targets", "x86_64-linux", "include")):
            if os.path.isfile(os.path.join(include, RUNTIME_HEADER)) and include not in found:
                found.append(include)
    return found


def cuda_include_dirs(torch_dir: pathlib.Path,
                      environ: Mapping[str, str] | None = None) -> list[str]:
    """The CUDA include folders of a compile, in order: the first holding cuda_runtime_api.h
    (the NVIDIA runtime wheel next to torch first: pip installed it with torch, so it is the
    CUDA torch was built for; then a CUDA install, _cuda_roots), then, when that one has no
    ``crt/``, the first other folder that has it (another wheel, such as nvidia-cuda-crt, or a
    CUDA install). Empty when no folder has the runtime's headers. A ``crt/`` that only the
    compiler's own search path holds (/usr/local/include) needs no folder here."""
    environ = os.environ if environ is None else environ
    site = torch_dir.parent
    wheels = sorted({os.path.dirname(p) for p in glob.glob(
        str(site / "nvidia" / "**" / RUNTIME_HEADER), recursive=True)})
    crt_wheels = sorted({os.path.dirname(os.path.dirname(p)) for p in glob.glob(
        str(site / "nvidia" / "**" / CRT_HEADER), recursive=True)})
    candidates = [*wheels, *_cuda_roots(environ)]
    if not candidates:
        return []
    runtime = candidates[0]
    if os.path.isfile(os.path.join(runtime, CRT_HEADER)):
        return [runtime]
    crt = next((d for d in [*crt_wheels, *candidates[1:]]
                if os.path.isfile(os.path.join(d, CRT_HEADER))), None)
    return [runtime] if crt is None else [runtime, crt]


def missing_crt_hint(includes: Sequence[str]) -> str:
    """The one-line fix for a compile that found the runtime's headers without ``crt/``."""
    return (f"the CUDA headers in {includes[0]} have no crt/ (PyPI's CUDA 13 runtime wheel "
            "ships none): pip install nvidia-cuda-crt of the same CUDA version, or set "
            "CUDA_HOME to a CUDA toolkit")


def compile_flags(source_root: pathlib.Path, torch_dir: pathlib.Path, torch_version: str,
                  cxx11_abi: bool, cuda_includes: Sequence[str],
                  bench_hooks: bool = False) -> list[str]:
    """The flags of every source of the library: torch's headers and CUDA's runtime headers
    (``cuda_includes``, in search order) are all it needs (no CMake, no -dev package)."""
    return [
        "-std=c++20", "-O3", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(cxx11_abi)}",
        f"-DVRAMSCOPE_BENCH_HOOKS={int(bench_hooks)}",
        f'-DVRAMSCOPE_TORCH_VERSION="{torch_version}"',
        # The tracking layer's include dir (its headers are vramscope/tracking/*.hpp) and the
        # project's (vramscope/version.hpp); torchlib's own headers sit next to its sources.
        f"-I{source_root / 'src' / 'tracking' / 'include'}", f"-I{source_root / 'include'}",
        "-isystem", str(torch_dir / "include"),
        "-isystem", str(torch_dir / "include" / "torch" / "csrc" / "api" / "include"),
        *[flag for include in cuda_includes for flag in ("-isystem", include)],
    ]


def link_flags(torch_dir: pathlib.Path, rpath: str, version_script: pathlib.Path) -> list[str]:
    """torch's libraries by name (the loader reuses those `import torch` loaded), and only the
    entry exported: the std templates torch's headers instantiate would otherwise be exported
    too (and could interpose on torch's own copies)."""
    return [f"-L{torch_dir / 'lib'}", *[f"-l{name}" for name in TORCH_LIBRARIES],
            f"-Wl,-rpath,{rpath}", "-Wl,--as-needed", "-Wl,-z,defs",
            f"-Wl,--version-script,{version_script}"]


def build(source_root: pathlib.Path, torch_dir: pathlib.Path, torch_version: str,
          cxx11_abi: bool, out: pathlib.Path, rpath: str, bench_hooks: bool = False,
          cxx: str = "c++", cuda_includes: Sequence[str] | None = None) -> None:
    """Compiles the library into ``out``: one compiler call per source (at most as many at once
    as there are cores; each cacheable by ccache), one to link, written under a temporary name
    and renamed, so a reader never sees half a file. Raises RuntimeError with the compiler's
    last lines."""
    includes = list(cuda_includes) if cuda_includes else cuda_include_dirs(torch_dir)
    if not includes:
        raise RuntimeError("cuda_runtime_api.h not found (install the CUDA runtime headers: "
                           "pip install nvidia-cuda-runtime, or set CUDA_HOME)")
    out.parent.mkdir(parents=True, exist_ok=True)
    compiler = shlex.split(cxx)
    flags = compile_flags(source_root, torch_dir, torch_version, cxx11_abi, includes,
                          bench_hooks)
    with tempfile.TemporaryDirectory(prefix=out.name + ".", dir=out.parent) as tmp:
        work = pathlib.Path(tmp)
        objects = [work / f"{i}.o" for i in range(len(SOURCES))]
        pending = list(zip(SOURCES, objects))
        running: list[subprocess.Popen] = []
        failures = []
        while pending or running:
            while pending and len(running) < max(1, os.cpu_count() or 1):
                source, obj = pending.pop(0)
                running.append(subprocess.Popen(
                    [*compiler, *flags, "-c", str(source_root / source), "-o", str(obj)],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            first = running.pop(0)
            output, _ = first.communicate()
            if first.returncode != 0:
                failures.append(output)
        if not failures:
            script = work / "exports.map"
            script.write_text("{ global: vramscope_torch_api; local: *; };\n")
            linked = work / "lib.so"
            done = subprocess.run(
                [*compiler, "-shared", *[str(o) for o in objects], "-o", str(linked),
                 *link_flags(torch_dir, rpath, script)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if done.returncode != 0:
                failures.append(done.stdout)
        if failures:
            lines = failures[0].strip().splitlines()
            tail = "\n".join([x for x in lines if "error" in x][:10] or lines[-20:])
            if "crt/" in tail and len(includes) == 1:
                tail += "\n" + missing_crt_hint(includes)
            raise RuntimeError(f"compiling the torch-facing library failed:\n{tail}")
        linked.chmod(0o700)
        os.replace(linked, out)


def copy_sources(checkout: pathlib.Path, dest: pathlib.Path) -> None:
    """The sources a compile on first use needs, from a checkout into ``dest`` (the wheel's
    vramscope/_torchlib_src)."""
    for rel in SOURCES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout / rel, dest / rel)
    for rel in HEADER_DIRS:
        for header in (checkout / rel).glob("*.h*"):
            target = dest / rel / header.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(header, target)


def sources_digest(source_root: pathlib.Path) -> str:
    """A digest of every source and header a compile reads: part of the cache key, so an
    upgraded vramscope never loads a library compiled from older sources."""
    h = hashlib.sha256()
    files = [*SOURCES, *[str(p.relative_to(source_root)) for rel in HEADER_DIRS
                         for p in sorted((source_root / rel).glob("*.h*"))]]
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + (source_root / rel).read_bytes())
    return h.hexdigest()[:16]


def package_dir() -> pathlib.Path:
    """The installed vramscope package's folder (which holds _torch/ and _torchlib_src/),
    wherever this module sits in it."""
    import importlib.util

    spec = importlib.util.find_spec("vramscope")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vramscope package is not importable")
    return pathlib.Path(list(spec.submodule_search_locations)[0]).resolve()


def cache_root() -> pathlib.Path:
    """~/.cache/vramscope, or $VRAMSCOPE_CACHE_DIR."""
    return pathlib.Path(os.environ.get("VRAMSCOPE_CACHE_DIR")
                        or pathlib.Path.home() / ".cache" / "vramscope")


def find_compiler() -> str | None:
    """$CXX, else the first of c++, g++, clang++ on PATH; None when there is none."""
    cxx = os.environ.get("CXX")
    if cxx:
        words = shlex.split(cxx)
        return cxx if words and shutil.which(words[0]) else None
    return next((name for name in ("c++", "g++", "clang++") if shutil.which(name)), None)


def _owned_private_dir(path: pathlib.Path) -> bool:
    """Creates ``path`` (0700) if needed; is it ours and closed to others (never a planted
    folder or a link to one)?"""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def compiled_library(torch, cxx11_abi: bool,
                     bench_hooks: bool) -> tuple[pathlib.Path | None, str | None]:
    """The torch-facing library compiled for the imported ``torch`` from the sources the
    package carries, cached per torch build (its version, git revision, folder and ABI) and per
    source digest. Compiles it on first use with a progress line on stderr. Returns
    ``(path, None)`` or ``(None, one-line reason)``."""
    version = str(torch.__version__)
    source_root = package_dir() / "_torchlib_src"
    if not (source_root / SOURCES[0]).is_file():
        return None, (f"this vramscope carries no agent for torch {version} and no sources to "
                      "compile one (a source checkout: build the wheel with tools/build-wheel.sh)")
    torch_dir = pathlib.Path(torch.__file__).resolve().parent
    identity = "\0".join([version, str(getattr(torch.version, "git_version", "")), str(torch_dir),
                          str(int(cxx11_abi)), str(int(bench_hooks)), sources_digest(source_root)])
    key = hashlib.sha256(identity.encode()).hexdigest()[:20]
    folder = cache_root() / "torchlib" / key
    out = folder / "libvramscope_torch.so"
    if not _owned_private_dir(folder):
        return None, f"{folder} is not a private folder of this user: not used"
    if out.is_file():
        return out, None
    cxx = find_compiler()
    if cxx is None:
        return None, (f"no C++ compiler (c++, g++ or clang++; or $CXX) to build the agent for "
                      f"torch {version}, which this vramscope carries none for; install one "
                      "(Debian/Ubuntu: apt install g++; Fedora/RHEL: dnf install gcc-c++)")
    with open(folder / ".lock", "w") as lock:
        os.chmod(lock.name, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be compiling the same library
        if out.is_file():
            return out, None
        print(f"vramscope: compiling the agent for torch {version} with {cxx} "
              "(once per torch build; about a minute)...", file=sys.stderr, flush=True)
        try:
            build(source_root, torch_dir, version, cxx11_abi, out, str(torch_dir / "lib"),
                  bench_hooks, cxx)
        except (RuntimeError, OSError) as e:
            log = folder / "compile.log"
            log.write_text(str(e) + "\n")
            os.chmod(log, 0o600)
            first = str(e).splitlines()[-1] if str(e).strip() else type(e).__name__
            return None, (f"compiling the agent for torch {version} failed ({first}; "
                          f"the compiler's output: {log})")
        print(f"vramscope: compiled {out}", file=sys.stderr, flush=True)
    return out, None


def main(argv: list[str] | None = None) -> int:
    """tools/build-wheel.sh: compile the library for one unpacked torch."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source-root", type=pathlib.Path, required=True)
    p.add_argument("--torch-dir", type=pathlib.Path, required=True,
                   help="the torch package folder (include/, lib/, version.py)")
    p.add_argument("--cuda-include", required=True, action="append",
                   help="a CUDA include folder (repeatable, in search order)")
    p.add_argument("--out-dir", type=pathlib.Path, required=True)
    p.add_argument("--bench-hooks", action="store_true")
    p.add_argument("--cxx", default="c++", help="the compiler command (e.g. 'ccache c++')")
    args = p.parse_args(argv)
    text = (args.torch_dir / "version.py").read_text()
    found = re.search(r"^__version__ = '([^']+)'", text, re.M)
    if found is None:
        p.error(f"no __version__ in {args.torch_dir / 'version.py'}")
    version = found.group(1)
    out = args.out_dir / library_name(version)
    # PyPI's torch since 2.7 is built with the C++11 ABI.
    build(args.source_root, args.torch_dir, version, True, out, "$ORIGIN/../../torch/lib",
          args.bench_hooks, cxx=args.cxx, cuda_includes=args.cuda_include)
    print(f"{out} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
