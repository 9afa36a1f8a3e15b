#!/usr/bin/env bash
# tools/test.sh -- set up everything and run the whole vramscope test suite (CI runs exactly this).
#
#   tools/test.sh              C++ tests (dev, ASan/UBSan, TSan builds), lint, fuzzing, the wheel + pytest
#   VRAMSCOPE_FUZZ_SECONDS=N   bound the fuzzing time (default 60)
#   VRAMSCOPE_SKIP_SANITIZERS=1  skip the sanitizer builds (faster local runs)
#
# Ends with one line "total: N passed, N failed, N skipped" summing every runner; exits non-zero
# when anything failed. Tests that need a GPU (tests/gpu) are collected and skipped here.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
jobs="$(nproc)"

venv="$(tools/install-deps.sh | tail -n 1)" || { echo "setup failed"; exit 1; }
py="$venv/bin/python"

passed=0 failed=0 skipped=0
status=0
suite_start=$SECONDS
section_name="" section_start=0
# Starts a section: its header now, and the previous section's duration.
section() {
  end_section
  section_name="$*" section_start=$SECONDS
  printf '\n==== %s ====\n' "$*"
}
end_section() {
  [[ -z "$section_name" ]] || printf -- '---- %s: %d s\n' "$section_name" $((SECONDS - section_start))
  section_name=""
}

# Runs "$@" with its output in the file $1; while it runs, a line every 30 s says how long it
# took so far and how far it got (ninja's "[412/467]", ctest's "57/120 Test"), so that a long
# build is not silent.
with_progress() {
  local log="$1" pid start progress i
  shift
  "$@" >"$log" 2>&1 &
  pid=$! start=$SECONDS
  for ((i = 1; ; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
    if ((i % 30 == 0)) && kill -0 "$pid" 2>/dev/null; then
      progress="$(grep -oE '^\[[0-9]+/[0-9]+\]|^ *[0-9]+/[0-9]+ Test' "$log" 2>/dev/null | tail -n 1 || true)"
      printf '  ... %d s%s (log: %s)\n' $((SECONDS - start)) "${progress:+, at $progress}" "$log"
    fi
  done
  wait "$pid"
}

# Adds the counts of a ctest log ("N% tests passed, F tests failed out of T") to the totals.
count_ctest() {
  local log="$1" line total fails skips
  line="$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1)"
  if [[ -z "$line" ]]; then failed=$((failed + 1)); status=1; return; fi
  total="$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")"
  fails="$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$line")"
  skips="$(grep -cE '\*\*\*Skipped|Not Run' "$log" || true)"
  passed=$((passed + total - fails - skips)); failed=$((failed + fails)); skipped=$((skipped + skips))
  ((fails == 0)) || status=1
}

# Adds the counts of a pytest log's closing line ("N passed, M skipped in 3.2s") to the totals.
# pytest exits 5 when a folder collects no test (tests/gpu without a GPU): that is not a failure.
count_pytest() {
  local log="$1" summary n kind
  summary="$(grep -E '[0-9]+ (passed|failed|skipped|deselected|errors?)|no tests ran' "$log" | grep -E ' in [0-9.]+s' | tail -n 1)"
  if [[ -z "$summary" ]]; then failed=$((failed + 1)); status=1; return; fi
  for kind in passed failed skipped errors error; do
    n="$(grep -oE "[0-9]+ $kind\b" <<<"$summary" | head -n 1 | cut -d' ' -f1)"
    n="${n:-0}"
    case "$kind" in
      passed) passed=$((passed + n)) ;;
      skipped) skipped=$((skipped + n)) ;;
      *) failed=$((failed + n)); ((n == 0)) || status=1 ;;
    esac
  done
}

# Configures, builds and runs ctest for one build folder, all three through its preset in
# CMakePresets.json (build/<preset>): the folder has one description, here and by hand.
run_ctest() {
  local name="$1" dir="build/$1"
  section "C++ tests ($name)"
  cmake --preset "$name" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; failed=$((failed + 1)); status=1; return; }
  echo "building $dir (minutes the first time, seconds after)"
  if ! with_progress "$dir.build.log" cmake --build --preset "$name" -j "$jobs"; then
    grep -E -A 8 'error:|FAILED:' "$dir.build.log" | head -n 60
    echo "the build failed; the whole log: $dir.build.log"
    failed=$((failed + 1)); status=1; return
  fi
  with_progress "$dir.ctest.log" ctest --preset "$name" -j "$jobs"
  local ctest_status=$?
  tail -n 25 "$dir.ctest.log"
  count_ctest "$dir.ctest.log"
  # The tail above may cut the assertions off: say where they are.
  ((ctest_status == 0)) || echo "failures: the failing tests' output is in $dir.ctest.log"
}

mkdir -p build
# The wheel tests' cached venvs of other torch releases (tests/wheel/torch_venvs.py: ~2.5 GB
# each, mostly download and unpacking, ~4 minutes cold) are made while the C++ builds run; the
# wheel section waits for them, so no pip runs beside tools/build-wheel.sh's downloads.
"$py" tests/wheel/torch_venvs.py >build/torch-venvs.log 2>&1 &
torch_venvs_pid=$!
run_ctest dev
if [[ "${VRAMSCOPE_SKIP_SANITIZERS:-0}" != 1 ]]; then
  run_ctest asan
  run_ctest tsan
fi

# After the dev build: clang-tidy reads its compile_commands.json. One count in the totals.
section "lint (tools/lint.sh: clang-format, clang-tidy, ruff, mypy)"
if with_progress build/lint.log tools/lint.sh; then
  tail -n 1 build/lint.log; passed=$((passed + 1))
else
  tail -n 30 build/lint.log; echo "the whole log: build/lint.log"
  failed=$((failed + 1)); status=1
fi

if [[ -x tools/fuzz.sh ]]; then
  fuzz_seconds="${VRAMSCOPE_FUZZ_SECONDS:-60}"
  section "fuzzing the recording reader, the sample decoder, packed chunks, the agent-segment reader and format 3 as show reads it ($fuzz_seconds s in all, a fifth each)"
  if with_progress build/fuzz.log tools/fuzz.sh "$fuzz_seconds"; then
    grep -E '^fuzz_[a-z_]+: ' build/fuzz.log; passed=$((passed + 1))
  else
    tail -n 40 build/fuzz.log; echo "the whole log: build/fuzz.log"; failed=$((failed + 1)); status=1
  fi
fi

section "Python package: the wheel (tools/build-wheel.sh), installed with plain pip"
if ! wait "$torch_venvs_pid"; then
  tail -n 5 build/torch-venvs.log
  echo "the torch venvs failed (build/torch-venvs.log): the wheel tests try again"
fi
# The distributable wheel is what the Python tests use: built once (the agent against the
# installed torch), installed here, and installed again by tests/wheel into a fresh venv.
echo "building the wheel: the CLI and the agent (minutes the first time, seconds after)"
# Its torch-facing libraries for the torch releases the tests load (tests/wheel's TORCHES, the
# venv's own among them), not all of tools/torch-versions.txt: each other release is one more
# download and compile that no test here reads (tools/build-wheel.sh makes the whole wheel).
VRAMSCOPE_TORCH_VERSIONS="$("$py" -c 'import sys; sys.path.insert(0, "tests/wheel")
import torch_venvs; print(" ".join(torch_venvs.TORCHES))')"
export VRAMSCOPE_TORCH_VERSIONS
if with_progress build/wheel.log tools/build-wheel.sh && wheel="$(tail -n 1 build/wheel.log)" \
    && [[ -f "$wheel" ]] \
    && "$py" -m pip install -q --force-reinstall --no-deps "$wheel" >build/pip.log 2>&1; then
  tail -n 2 build/wheel.log | head -n 1
  export VRAMSCOPE_CLI="$root/build/dev/cli/vramscope"
  export VRAMSCOPE_BUILD_DIR="$root/build/dev"
  export VRAMSCOPE_WHEEL="$root/$wheel"
  # Each folder has its own conftest.py: run them as separate sessions so they do not clash.
  for suite in tests/gpu tests/python tests/wheel; do
    section "pytest $suite"
    log="build/pytest-${suite##*/}.log"
    "$py" -m pytest "$suite" -p no:cacheprovider -rs 2>&1 | tee "$log" | tail -n 15
    pytest_status="${PIPESTATUS[0]}"
    count_pytest "$log"
    [[ "$pytest_status" =~ ^(0|5)$ ]] || echo "failures: the whole output is in $log"
  done
else
  tail -n 60 build/wheel.log build/pip.log 2>/dev/null
  echo "the wheel failed; the logs: build/wheel.log, build/pip.log"
  failed=$((failed + 1)); status=1
fi
end_section

echo
printf 'the whole suite: %d min %d s\n' $(((SECONDS - suite_start) / 60)) $(((SECONDS - suite_start) % 60))
echo "total: $passed passed, $failed failed, $skipped skipped"
exit "$status"
