#!/usr/bin/env bash
# tools/test.sh -- set up everything and run the whole vramscope test suite (CI runs exactly this).
#
#   tools/test.sh              C++ tests (dev build + ASan/UBSan + TSan), fuzzing, the wheel + pytest
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
section() { printf '\n==== %s ====\n' "$*"; }

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

# Configures, builds and runs ctest for one build folder. Extra args go to cmake configure.
run_ctest() {
  local name="$1" dir="build/$1"; shift
  section "C++ tests ($name)"
  cmake -S . -B "$dir" -G Ninja -DVRAMSCOPE_TEST=ON -DVRAMSCOPE_AGENT=OFF "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; failed=$((failed + 1)); status=1; return; }
  if ! cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1; then
    tail -n 60 "$dir.build.log"; failed=$((failed + 1)); status=1; return
  fi
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 2>&1 | tee "$dir.ctest.log" | tail -n 25
  count_ctest "$dir.ctest.log"
}

mkdir -p build
run_ctest dev -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMSCOPE_BENCH=ON
if [[ "${VRAMSCOPE_SKIP_SANITIZERS:-0}" != 1 ]]; then
  run_ctest asan -DCMAKE_BUILD_TYPE=Debug -DVRAMSCOPE_BENCH=OFF "-DVRAMSCOPE_SANITIZE=address;undefined"
  run_ctest tsan -DCMAKE_BUILD_TYPE=Debug -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_SANITIZE=thread
fi

if [[ -x tools/fuzz.sh ]]; then
  section "fuzzing the recording reader (${VRAMSCOPE_FUZZ_SECONDS:-60} s)"
  if tools/fuzz.sh "${VRAMSCOPE_FUZZ_SECONDS:-60}" >build/fuzz.log 2>&1; then
    tail -n 3 build/fuzz.log; passed=$((passed + 1))
  else
    tail -n 40 build/fuzz.log; failed=$((failed + 1)); status=1
  fi
fi

section "Python package: the wheel (tools/build-wheel.sh), installed with plain pip"
# The distributable wheel is what the Python tests use: built once (the agent against the
# installed torch), installed here, and installed again by tests/wheel into a fresh venv.
if wheel="$(tools/build-wheel.sh 2>build/wheel.log | tail -n 1)" && [[ -f "$wheel" ]] \
    && "$py" -m pip install -q --force-reinstall --no-deps "$wheel" >build/pip.log 2>&1; then
  tail -n 1 build/wheel.log
  export VRAMSCOPE_CLI="$root/build/dev/cli/vramscope"
  export VRAMSCOPE_BUILD_DIR="$root/build/dev"
  export VRAMSCOPE_WHEEL="$root/$wheel"
  # Each folder has its own conftest.py: run them as separate sessions so they do not clash.
  for suite in tests/gpu tests/python tests/wheel; do
    section "pytest $suite"
    log="build/pytest-${suite##*/}.log"
    "$py" -m pytest "$suite" -p no:cacheprovider -rs 2>&1 | tee "$log" | tail -n 15
    count_pytest "$log"
  done
else
  tail -n 60 build/wheel.log build/pip.log 2>/dev/null; failed=$((failed + 1)); status=1
fi

echo
echo "total: $passed passed, $failed failed, $skipped skipped"
exit "$status"
