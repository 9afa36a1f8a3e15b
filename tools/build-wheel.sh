#!/usr/bin/env bash
# tools/build-wheel.sh -- build the distributable wheel: the CLI and the agent, installable with plain pip.
#
#   tools/build-wheel.sh [--python PYTHON] [--out DIR]
#
# Builds dist/vramscope-<version>-cp3XX-cp3XX-manylinux_*.whl holding the `vramscope` binary
# (ncursesw and tinfo linked into it, the C++ runtime too) and the agent extension compiled
# against the torch of the build environment, then repairs it with auditwheel: the platform tag
# is checked against the manylinux policies, and torch's own libraries (libc10*, libtorch*, the
# CUDA libraries) stay out, because the agent must bind the very torch the user imports.
# Prints the wheel's path on its last line.
#
# --python: the interpreter the wheel is for (default: the development environment of
#   tools/install-deps.sh). Any other one gets its own cached build environment,
#   ~/.cache/vramscope/wheel-py<X.Y>, with tools/requirements-wheel.txt (torch from PyPI, pinned
#   to the version the GPU machine runs). E.g. for Python 3.12: --python python3.12.
# Needs the C++ build dependencies of the CLI (Debian packages: tools/install-deps.sh --cli-only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="" out=dist
while (($#)); do
  case "$1" in
    --python) python="${2:?--python needs an interpreter}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-wheel.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { printf '[vramscope wheel] %s\n' "$*" >&2; }

tools/install-deps.sh --cli-only >/dev/null
if [[ -z "$python" ]]; then
  py="$(tools/install-deps.sh | tail -n 1)/bin/python"
else
  base="$(command -v "$python" || true)"
  [[ -n "$base" ]] || { echo "build-wheel.sh: no interpreter $python" >&2; exit 1; }
  version="$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  venv="$HOME/.cache/vramscope/wheel-py$version"
  requirements=tools/requirements-wheel.txt
  stamp="$venv/.vramscope-requirements.sha256"
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  [[ -x "$venv/bin/python" ]] || { log "creating the build environment $venv"; "$base" -m venv "$venv"; }
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    log "installing the build requirements (torch is large: the first time takes a few minutes)"
    "$venv/bin/python" -m pip install -q -r "$requirements"
    echo "$want" > "$stamp"
  fi
  py="$venv/bin/python"
fi
tag="$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
torch_version="$("$py" -c 'from importlib.metadata import version; print(version("torch"))')"

# One build folder per interpreter, kept: a second run rebuilds only what changed.
raw="build/wheel-$tag/raw"
rm -rf "$raw"
mkdir -p "$raw" "$out"
log "building the $tag wheel against torch $torch_version (the first time takes a few minutes)"
if ! "$py" -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$raw" \
      -C "build-dir=build/wheel-$tag/cmake" -C cmake.define.VRAMSCOPE_STATIC_CURSES=ON \
      -C cmake.define.VRAMSCOPE_CLI=ON . >"build/wheel-$tag/pip.log" 2>&1; then
  grep -E 'error|Error|FAILED' "build/wheel-$tag/pip.log" | head -n 40 >&2 || true
  echo "build-wheel.sh: the build failed; the whole log: build/wheel-$tag/pip.log" >&2
  exit 1
fi
wheel="$(ls "$raw"/vramscope-*.whl)"

# The torch the agent was built for goes into the wheel's METADATA as the `torch` extra
# (`pip install vramscope[torch]` installs that minor version; `pip show` tells it), never as a
# plain dependency: pip must not replace a user's own CUDA build of torch. auditwheel below
# writes the wheel's RECORD anew.
"$py" - "$wheel" "$torch_version" <<'PY'
import sys, zipfile
path, version = sys.argv[1], sys.argv[2]
major, minor = version.split(".")[:2]
extra = f'Provides-Extra: torch\nRequires-Dist: torch=={major}.{minor}.*; extra == "torch"\n'
with zipfile.ZipFile(path) as z:
    items = [(info, z.read(info)) for info in z.infolist()]
with zipfile.ZipFile(path + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
    for info, data in items:
        if info.filename.endswith(".dist-info/METADATA"):
            head, sep, body = data.decode().partition("\n\n")
            data = (head.rstrip("\n") + "\n" + extra + sep + body).encode()
        z.writestr(info, data)
PY
mv "$wheel.tmp" "$wheel"

# torch's libraries are the user's: excluded from grafting, found at run time beside the package
# (and already loaded by `import torch`). Nothing else may be left to graft.
rm -f "$out"/vramscope-*-"$tag"-*.whl
PATH="$(dirname "$py"):$PATH" "$py" -m auditwheel repair -w "$out" \
    --exclude 'libc10*.so' --exclude 'libtorch*.so' --exclude 'libcudart.so*' \
    --exclude 'libcuda.so*' --exclude 'libnvidia-ml.so*' \
    "$wheel" >"build/wheel-$tag/auditwheel.log" 2>&1 \
  || { cat "build/wheel-$tag/auditwheel.log" >&2; exit 1; }
repaired="$(ls "$out"/vramscope-*-"$tag"-*.whl)"

size_bytes="$(stat -c %s "$repaired")"
limit_bytes=$((5 * 1024 * 1024))
if ((size_bytes > limit_bytes)); then
  echo "build-wheel.sh: $repaired is $size_bytes bytes, over the 5 MiB limit" >&2
  exit 1
fi
log "$(basename "$repaired"): $((size_bytes / 1024)) KiB, agent for torch $torch_version"
echo "$repaired"
