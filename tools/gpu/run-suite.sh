#!/usr/bin/env bash
# tools/gpu/run-suite.sh -- everything that needs a real GPU, in one go, for a GPU machine.
#
#   tools/gpu/run-suite.sh OUTDIR [PHASE...]
#     phases: tests (= tests-exact tests-rest) record top probe bench (= bench-nvml bench-gpt2
#     bench-alloc) bench-pairs; default: all but bench-pairs. A device call is limited to 10
#     minutes: on one H200 tests-exact (test_exactness, test_oom, test_step_peaks) takes ~7,
#     tests-rest (every other file) ~7, bench-gpt2 ~8 (8 modes x 5 reps x ~11 s), bench-alloc ~5,
#     bench-pairs ~4; run them in separate calls. VRAMSCOPE_GPU_TEST_LIMIT_S (default 560) stops
#     pytest with SIGINT, so that a run cut short still prints its failures and its summary.
#
# Expects: python3 with torch (CUDA), scikit-build-core and nanobind; the `vramscope` CLI binary on
# PATH or in $VRAMSCOPE_CLI (it can be built elsewhere and copied: it needs only libc and ncurses);
# for machines without the header-only libraries, VRAMSCOPE_THIRD_PARTY_INCLUDE naming a folder with
# nlohmann/ and fmt/. Builds and installs the Python package (the agent) without the CLI, then runs
# tests/gpu, the benchmarks, and/or records a demo training run. Logs go to OUTDIR.
set -uo pipefail
out="${1:?usage: run-suite.sh OUTDIR [tests] [record] [top] [probe] [bench|bench-nvml|bench-gpt2|bench-alloc|bench-pairs]}"
shift
what=" ${*:-tests record top probe bench} "
[[ "$what" == *" bench "* ]] && what="$what bench-nvml bench-gpt2 bench-alloc "
[[ "$what" == *" tests "* ]] && what="$what tests-exact tests-rest "
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cli="${VRAMSCOPE_CLI:-$(command -v vramscope)}"
export VRAMSCOPE_CLI="$cli"

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee "$out/gpus.csv"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

echo "== building the agent"
start=$(date +%s)
# The benchmarks need the agent's benchmark hooks (_bench_*), which a normal build leaves out.
hooks=OFF
[[ "$what" == *" bench-"* ]] && hooks=ON
if ! VRAMSCOPE_BUILD_CLI=OFF python3 -m pip install -q --no-build-isolation --no-deps --no-index \
      -C build-dir=/tmp/vramscope-build -C cmake.define.VRAMSCOPE_BENCH_HOOKS=$hooks . >"$out/pip.log" 2>&1; then
  tail -n 80 "$out/pip.log"; exit 1
fi
echo "built in $(( $(date +%s) - start )) s"


exact_files="tests/gpu/test_exactness.py tests/gpu/test_oom.py tests/gpu/test_step_peaks.py"
gpu_tests() {  # LOG FILE...: pytest under the limit, SIGINT first (pytest then still reports)
  local log="$1"; shift
  timeout -s INT -k 30 "${VRAMSCOPE_GPU_TEST_LIMIT_S:-560}" python3 -m pytest "$@" -v -rs \
      --tb=short --durations=0 -o faulthandler_timeout=300 -p no:cacheprovider 2>&1 |
    tee "$out/$log" | tail -n 60
}
if [[ "$what" == *" tests-exact "* ]]; then
  echo "== tests/gpu: exactness, OOM, step peaks"
  # shellcheck disable=SC2086  # a list of paths without spaces
  gpu_tests gpu-tests-exact.log $exact_files
fi
if [[ "$what" == *" tests-rest "* ]]; then
  echo "== tests/gpu: every other file"
  rest=()
  for f in tests/gpu/test_*.py; do [[ " $exact_files " == *" $f "* ]] || rest+=("$f"); done
  gpu_tests gpu-tests-rest.log "${rest[@]}"
fi
if [[ "$what" == *" record "* ]]; then
  echo "== recording a demo training run"
  rm -f "$out/h200-training.vsrec"
  "$cli" run --record "$out/h200-training.vsrec" --interval 100ms \
      examples/train_small_gpt.py --seconds 36 2>&1 | tail -n 15
  "$cli" show "$out/h200-training.vsrec" | head -n 40
fi
if [[ "$what" == *" top "* ]]; then
  echo "== vramscope top beside a training process with the agent"
  "$cli" run --quiet examples/train_small_gpt.py --seconds 25 >"$out/top-train.log" 2>&1 &
  train=$!
  # Wait until the agent has published (its segment shows in --json), bounded.
  for _ in $(seq 1 100); do
    "$cli" --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["allocators"] else 1)' && break
    sleep 0.2
  done
  tmux new-session -d -s vstop -x 120 -y 36 "$cli top --interval 100ms"
  sleep 4
  tmux capture-pane -p -t vstop > "$out/top-frame.txt"
  tmux send-keys -t vstop q
  cat "$out/top-frame.txt"
  wait "$train"
fi
if [[ "$what" == *" probe "* ]]; then
  echo "== nvidia-smi rounding probe"
  python3 tools/gpu/probe_nvidia_smi_rounding.py 2>&1 | tee "$out/probe.log"
fi
if [[ "$what" == *" bench-nvml "* ]]; then
  echo "== benchmarks: NVML and the CLI against nvidia-smi"
  bench/cli_vs_nvidia_smi.sh 2>&1 | tee "$out/bench-cli.log" | tail -n 8
  python3 tools/gpu/probe_nvml_calls.py 2>&1 | tee "$out/probe-nvml.log"
  if [[ -x "${VRAMSCOPE_BUILD_DIR:-build/dev}/bench/bench_nvml" ]]; then
    VRAMSCOPE_BENCH_REAL_NVML=1 VRAMSCOPE_BENCH_SUSTAINED_SECONDS=10 \
      "${VRAMSCOPE_BUILD_DIR:-build/dev}/bench/bench_nvml" 2>&1 | tee "$out/bench-nvml.log" | tail -n 25
  fi
fi
if [[ "$what" == *" bench-gpt2 "* ]]; then
  echo "== benchmark: GPT-2-small step (agent, Monitor, profile, profiler, history, seed)"
  python3 bench/bench_agent.py --only gpt2 --json "$out/bench-gpt2.json" 2>&1 \
    | tee "$out/bench-gpt2.log" | tail -n 14
fi
if [[ "$what" == *" bench-alloc "* ]]; then
  echo "== benchmark: allocator-heavy step (agent_toggled: working against paused, in turns)"
  # Launch-bound steps drift between a fast and a slow state for seconds at a time, and
  # processes differ for life by a few percent: bench_turns runs every process at once, taking
  # turns, and agent_toggled times each pair of steps with the callback working and paused one
  # step apart in one process, which gives vramscope's own share of the callback without either
  # (per process the median of ~200 pairs: ±0.15 % on the H200 VM). ~4 min: 8 processes.
  # VRAMSCOPE_BENCH_BEFORE=DIR (a pip install --target of another commit) adds that build's
  # agent_toggled processes to the same run.
  modes=agent_toggled builds=()
  if [[ -n "${VRAMSCOPE_BENCH_BEFORE:-}" ]]; then
    modes="$modes,agent_toggled@before" builds=(--build "before=$VRAMSCOPE_BENCH_BEFORE")
  fi
  python3 bench/bench_turns.py --step small-ops --procs 4 --modes "$modes" "${builds[@]}" \
    --seconds 200 --cpus 2-9 --main-cpu 3 --json "$out/bench-alloc.json" 2>&1 \
    | tee "$out/bench-alloc.log" | tail -n 24
fi
if [[ "$what" == *" bench-pairs "* ]]; then
  echo "== benchmark: alloc/free pairs (C++ and Python loops) and the cost of a read"
  python3 bench/bench_agent.py --only alloc --reps 5 --json "$out/bench-pairs.json" 2>&1 \
    | tee "$out/bench-pairs.log" | tail -n 14
fi
