#!/usr/bin/env bash
# tools/gpu/run-suite.sh -- everything that needs a real GPU, in one go, for a GPU machine.
#
#   tools/gpu/run-suite.sh OUTDIR [tests|bench|record|all]
#
# Expects: python3 with torch (CUDA), scikit-build-core and nanobind; the `vramscope` CLI binary on
# PATH or in $VRAMSCOPE_CLI (it can be built elsewhere and copied: it needs only libc and ncurses);
# for machines without the header-only libraries, VRAMSCOPE_THIRD_PARTY_INCLUDE naming a folder with
# nlohmann/ and fmt/. Builds and installs the Python package (the agent) without the CLI, then runs
# tests/gpu, the benchmarks, and/or records a demo training run. Logs go to OUTDIR.
set -uo pipefail
out="${1:?usage: run-suite.sh OUTDIR [tests|bench|record|all]}"
what="${2:-all}"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cli="${VRAMSCOPE_CLI:-$(command -v vramscope)}"
export VRAMSCOPE_CLI="$cli"

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee "$out/gpus.csv"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

echo "== building the agent"
start=$(date +%s)
if ! VRAMSCOPE_CLI=OFF python3 -m pip install -q --no-build-isolation --no-deps --no-index \
      -C build-dir=/tmp/vramscope-build . >"$out/pip.log" 2>&1; then
  tail -n 80 "$out/pip.log"; exit 1
fi
echo "built in $(( $(date +%s) - start )) s"
export VRAMSCOPE_CLI="$cli"   # pip's VRAMSCOPE_CLI=OFF was for the build only

if [[ "$what" == tests || "$what" == all ]]; then
  echo "== tests/gpu"
  python3 -m pytest tests/gpu -v -rs -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.log" | tail -n 60
fi
if [[ "$what" == record || "$what" == all ]]; then
  echo "== recording a demo training run"
  rm -f "$out/h200-training.vsrec"
  "$cli" run --record "$out/h200-training.vsrec" --interval 100ms \
      examples/train_small_gpt.py --seconds 36 2>&1 | tail -n 15
  "$cli" show "$out/h200-training.vsrec" | head -n 40
fi
if [[ "$what" == bench || "$what" == all ]]; then
  echo "== benchmarks"
  bench/cli_vs_nvidia_smi.sh 2>&1 | tee "$out/bench-cli.log" | tail -n 8
  python3 bench/bench_agent.py --json "$out/bench-agent.json" 2>&1 | tee "$out/bench-agent.log" | tail -n 30
fi
