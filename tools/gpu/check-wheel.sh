#!/usr/bin/env bash
# tools/gpu/check-wheel.sh -- the carried wheel on a bare GPU machine: install with plain pip, then use it as a new user would.
#
#   tools/gpu/check-wheel.sh WHEEL [OUTDIR]
#
# Expects python3 with torch (CUDA) and pytest, no compiler needed, no network. Makes a venv that
# sees the system's torch (--system-site-packages), installs WHEEL with `pip install --no-index`,
# and runs: vramscope --version, vramscope (the snapshot), vramscope top --once, a training
# script under vramscope run, the agent's mode, then tests/wheel/test_wheel.py (which makes its
# own venv with only torch linked in, and adds the ldd/readelf checks and events mode).
set -uo pipefail
wheel="$(realpath "${1:?usage: check-wheel.sh WHEEL [OUTDIR]}")"
out="${2:-/tmp/vramscope-check-wheel}"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
venv="$out/venv"
rm -rf "$venv"
pip=("$venv/bin/python" -m pip)
if ! python3 -m venv --system-site-packages "$venv" 2>/dev/null; then
  # No ensurepip (python3-venv not installed): a venv without pip, filled by the system's pip.
  python3 -m venv --clear --without-pip --system-site-packages "$venv"
  pip=(python3 -m pip --python "$venv/bin/python")
fi
# When python3 is itself a venv (a CUDA image's /opt/.../.venv), --system-site-packages sees the
# base interpreter, not the venv that holds torch: point the new venv at python3's own packages.
purelib="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$venv/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/_system_packages.pth", "w").write(sys.argv[1] + "\n")' "$purelib"
step() { printf '\n== %s\n' "$*"; }

step "pip install --no-index $(basename "$wheel")"
"${pip[@]}" install --no-index --ignore-installed "$wheel" 2>&1 | tail -n 2
step "vramscope --version"
"$venv/bin/vramscope" --version
step "vramscope"
"$venv/bin/vramscope"
step "vramscope top --once"
COLUMNS=120 LINES=30 "$venv/bin/vramscope" top --once
step "vramscope run examples/train_small_gpt.py --seconds 10"
"$venv/bin/vramscope" run examples/train_small_gpt.py --seconds 10 2>&1 | tail -n 8
step "the agent's mode"
"$venv/bin/python" -c "import torch, vramscope, vramscope._build_info as b
torch.ones(1, device='cuda')
print('libraries for torch', ', '.join(b.TORCH_LIBRARIES), '| running torch', torch.__version__, '| mode', vramscope.attach())"
step "tests/wheel/test_wheel.py"
VRAMSCOPE_WHEEL="$wheel" python3 -m pytest tests/wheel/test_wheel.py -v -rs -p no:cacheprovider 2>&1 \
  | tee "$out/test_wheel.log" | tail -n 20
