#!/usr/bin/env bash
# tools/gpu/call.sh -- one device call of the GPU plan: the carried wheel installed, one group run, its logs packed
#
#   tools/gpu/call.sh NAME [WHEEL]     (WHEEL: the one cp312 wheel under dist/ by default)
#
# Each NAME fits one 10-minute call on one H200 and starts from a bare machine (a venv seeing the
# system's torch, the wheel installed with plain pip). Logs go to $OUT/NAME.tar.gz (the device's
# folder that comes back; /tmp/vramscope-call without one) and a summary is printed last.
#   main       tools/gpu/reach.sh: the agent compiled on first use (timed), then `pytest tests/gpu`;
#              then `vramscope record` at 1 ms, its CPU a sample (tools/gpu/record_cpu.py)
#   slow-fit   pytest -m slow over test_fit.py (fit's probes and bisections) and test_step_peaks.py
#              (the step peaks under expandable segments and CUDA graphs, and of a Lightning
#              program in three processes)
#   slow-oom   pytest -m slow over test_oom.py, test_oom_advice.py and test_integrations_gpu.py
#              (whole programs run to their OOM and measured; the plugin's measured OOM)
#   oom-kinds  bench/oom_kinds.py --jobs 8 (19 OOM programs; first advice and every fits: true
#              one applied in fresh processes); ONLY=a,b limits the programs, JOBS=N and
#              LIMIT_S=S change the lanes at once and the limit
#   driver     `vramscope record -i 1ms` timed three ways, then test_nvml_backend, test_cli_join
#              and test_driver_parts (the driver view and its join; a short call)
#   fit-bench  bench/bench_fit.py (six models: fit against bisection truth, and fit beside
#              accelerate on the same step, in lanes side by side; FIT_ARGS replaces --beside)
#   recheck    what a change was made for, in one call: pytest -m slow over TESTS (pytest node
#              ids; default test_fit.py and the pytest plugin's measured OOM), then, when ONLY
#              names OOM programs, bench/oom_kinds.py over those (JOBS lanes, 4 by default);
#              and tests/gpu/fit_program.py's allocator traced under its cap at TRACE_SIZES
#              (default "48 79"), for the simulation of what must fit (predict/capped.py);
#              and `vramscope record` at 1 ms, its CPU a sample
# The results go into docs/oom-advice.md, docs/benchmarks.md and docs/testing.md.
set -uo pipefail
name="${1:?usage: call.sh main|slow-fit|slow-oom|oom-kinds|driver|fit-bench|recheck [WHEEL]}"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
wheel="${2:-$(find dist -maxdepth 1 -name 'vramscope-*-cp312-*.whl' 2>/dev/null | head -n 1)}"
[[ -f "$wheel" ]] || { echo "call.sh: no wheel (build one: tools/build-wheel.sh --python 3.12)"; exit 2; }
wheel="$(realpath "$wheel")"
out="${OUT:-/tmp/vramscope-call}"
work="/tmp/vramscope-$name"
rm -rf "$work" && mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv \
  | tee "$work/gpus.csv"
began=$(date +%s)
pytest_group() {  # LIMIT_S ARGS...: pytest stopped by SIGINT at the limit (it still reports)
  local limit="$1"; shift
  timeout -s INT -k 30 "$limit" "$py" -m pytest "$@" -rs --tb=short --durations=0 \
      -o faulthandler_timeout=300 -p no:cacheprovider 2>&1 | tee "$work/pytest.log" | tail -n 60
}
kinds_summary() {  # OOM_KINDS_JSON: one line a program, then how many first advices ran
  "$py" - "$1" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"no results: {exc}")
ran = 0
for name, r in sorted(rows.items()):
    applied = r.get("applied") or []
    first = applied[0] if applied else {}
    ran += bool(first.get("completed"))
    promised = [a for a in applied if a.get("fits")]
    print(f"{name:22} oom={r.get('oom')} first={first.get('kind')} ran={first.get('completed')} "
          f"fits_true_ran={sum(a['completed'] for a in promised)}/{len(promised)}")
print(f"first advice ran: {ran} of {len(rows)}")
PY
}
record_cpu() {  # `vramscope record -i 1ms` on this machine's GPUs: CPU a sample (45: <= 10 us)
  # Three ways: the agents' directory read (none running), --no-agents (the driver read every
  # sample), and beside a training loop under the agent (its segment read every sample).
  "$py" tools/gpu/record_cpu.py "$work/record-1ms.vsrec" 2>&1 | tee "$work/record-1ms.txt"
  "$py" tools/gpu/record_cpu.py "$work/record-1ms.vsrec" --no-agents 2>&1 | tee -a "$work/record-1ms.txt"
  "$py" -m vramscope.run tools/gpu/train_loop.py 40 > "$work/train-loop.log" 2>&1 &
  local loop=$! i
  for i in $(seq 120); do grep -q "train_loop: ready" "$work/train-loop.log" && break; sleep 0.5; done
  "$py" tools/gpu/record_cpu.py "$work/record-1ms.vsrec" 2>&1 | sed 's/^/beside a training loop: /' \
    | tee -a "$work/record-1ms.txt"
  kill "$loop" 2>/dev/null; wait "$loop" 2>/dev/null
  rm -f "$work/record-1ms.vsrec"
}
case "$name" in
  main)
    VRAMSCOPE_GPU_TEST_LIMIT_S="${VRAMSCOPE_GPU_TEST_LIMIT_S:-480}" tools/gpu/reach.sh "$wheel" "$work"
    py="$work/venv/bin/python" PATH="$work/venv/bin:$PATH" VRAMSCOPE_CACHE_DIR="$work/cache" \
      record_cpu
    summary="$(grep -E '^mode |passed|failed|pytest took' "$work/first-use.log" "$work/pytest.log" | tail -n 6)"
    summary+=$'\n'"$(cat "$work/record-1ms.txt")" ;;
  slow-fit|slow-oom)
    # shellcheck source=tools/gpu/wheel-venv.sh
    source tools/gpu/wheel-venv.sh "$wheel" "$work" || exit 1
    files=(tests/gpu/test_fit.py tests/gpu/test_step_peaks.py)
    [[ "$name" == slow-oom ]] && files=(tests/gpu/test_oom.py tests/gpu/test_oom_advice.py
                                        tests/gpu/test_integrations_gpu.py)
    pytest_group 540 -m slow -v "${files[@]}"
    summary="$(tail -n 1 "$work/pytest.log")" ;;
  oom-kinds)
    source tools/gpu/wheel-venv.sh "$wheel" "$work" || exit 1
    timeout -s INT -k 20 "${LIMIT_S:-560}" "$py" bench/oom_kinds.py "$work/oom_kinds.json" \
        --jobs "${JOBS:-8}" \
        ${ONLY:+--only "$ONLY"} 2>&1 | tee "$work/oom_kinds.log" | cut -c1-400
    summary="$(kinds_summary "$work/oom_kinds.json")" ;;
  recheck)
    source tools/gpu/wheel-venv.sh "$wheel" "$work" || exit 1
    read -r -a tests <<< "${TESTS:-tests/gpu/test_fit.py tests/gpu/test_integrations_gpu.py::test_plugin_measures_the_oom_that_failed_a_test_and_frees_it}"
    pytest_group "${PYTEST_LIMIT_S:-300}" -m slow -v "${tests[@]}"
    summary="$(tail -n 1 "$work/pytest.log")"
    record_cpu
    for b in ${TRACE_SIZES-48 79}; do  # fit_program's allocator under its cap, for the CPU
      timeout 120 "$py" tests/gpu/fit_program.py trace "$b" "$work/fit-trace-$b.json" 2>&1 | tail -n 1
    done
    if [[ -n "${ONLY:-}" ]]; then
      timeout -s INT -k 20 "${LIMIT_S:-240}" "$py" bench/oom_kinds.py "$work/oom_kinds.json" \
          --jobs "${JOBS:-4}" --only "$ONLY" 2>&1 | tee "$work/oom_kinds.log" | cut -c1-300
      summary+=$'\n'"$(kinds_summary "$work/oom_kinds.json")"
    fi ;;
  driver)
    # The driver view's own checks, short: record at 1 ms timed, then the main group's tests of
    # the NVML backend and the driver joined with the agents (PYTEST_LIMIT_S, default 120).
    source tools/gpu/wheel-venv.sh "$wheel" "$work" || exit 1
    record_cpu
    pytest_group "${PYTEST_LIMIT_S:-120}" -v tests/gpu/test_nvml_backend.py \
      tests/gpu/test_cli_join.py tests/gpu/test_driver_parts.py
    summary="$(cat "$work/record-1ms.txt")"$'\n'"$(tail -n 1 "$work/pytest.log")" ;;
  fit-bench)
    source tools/gpu/wheel-venv.sh "$wheel" "$work" || exit 1
    read -r -a fit_args <<< "${FIT_ARGS---beside}"
    timeout -s INT -k 20 "${LIMIT_S:-560}" "$py" bench/bench_fit.py "$work/bench_fit.json" "${fit_args[@]}" 2>&1 \
      | tee "$work/bench_fit.log" | tail -n 40
    summary="$(tail -n 12 "$work/bench_fit.log")" ;;
  *) echo "call.sh: unknown call $name"; exit 2 ;;
esac
nvidia-smi --query-gpu=index,memory.used --format=csv | tee -a "$work/gpus.csv"
tar -C "$work" --exclude=venv --exclude=cache -czf "$out/$name.tar.gz" .
printf '\n== %s: %d s\n%s\n' "$name" $(( $(date +%s) - began )) "$summary"
