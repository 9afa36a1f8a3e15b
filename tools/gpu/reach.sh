#!/usr/bin/env bash
# tools/gpu/reach.sh -- the wheel on a GPU machine: compiled on first use, then the main GPU group
#
#   tools/gpu/reach.sh WHEEL OUTDIR [PYTEST_ARGS...]
#
# In a venv that sees the system's torch: installs WHEEL with plain pip, removes the wheel's
# torch-facing library for the running torch (as for a torch the wheel does not carry), then
#   1. times the first `import vramscope` + attach (the agent compiled on first use) and a second
#      one (the cache reused), and prints the mode of each (events, not polling);
#   2. runs `pytest tests/gpu` (the main group; PYTEST_ARGS instead when given) against that
#      compiled library (the same cache), with --durations, stopped by SIGINT after
#      VRAMSCOPE_GPU_TEST_LIMIT_S (default 480) so that a run cut short still reports.
# Logs go to OUTDIR (first-use.log, pytest.log).
set -uo pipefail
wheel="$(realpath "${1:?usage: reach.sh WHEEL OUTDIR [PYTEST_ARGS...]}")"
out="$(mkdir -p "${2:?usage: reach.sh WHEEL OUTDIR}" && realpath "$2")"
shift 2
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# shellcheck source=tools/gpu/wheel-venv.sh
source tools/gpu/wheel-venv.sh "$wheel" "$out" || exit 1
package="$("$py" -c 'import vramscope, os; print(os.path.dirname(vramscope.__file__))')"
version="$("$py" -c 'import torch; print(torch.__version__)')"
library="$package/_torch/libvramscope_torch_$("$py" -c 'import torch; a, b = torch.__version__.split(".")[:2]; print(f"{a}_{b}")').so"
echo "== torch $version; removing $(basename "$library") from the wheel's package"
rm -f "$library"

probe='import time, torch
began = time.perf_counter()
import vramscope
torch.ones(1, device="cuda")
mode = vramscope.attach()
print(f"mode {mode} | import + attach {time.perf_counter() - began:.1f} s")'
{
  echo "== first use (compiles the agent for torch $version)"
  "$py" -c "$probe" 2>&1
  echo "== second use (the compiled library from the cache)"
  "$py" -c "$probe" 2>&1
  ls -l "$VRAMSCOPE_CACHE_DIR"/torchlib/*/ 2>&1
} | tee "$out/first-use.log"

echo "== pytest ${*:-tests/gpu}"
start=$(date +%s)
timeout -s INT -k 30 "${VRAMSCOPE_GPU_TEST_LIMIT_S:-480}" "$py" -m pytest "${@:-tests/gpu}" -rs \
    --tb=short --durations=0 -o faulthandler_timeout=300 -p no:cacheprovider 2>&1 \
  | tee "$out/pytest.log" | tail -n 80
echo "pytest took $(( $(date +%s) - start )) s"
