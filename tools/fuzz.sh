#!/usr/bin/env bash
# tools/fuzz.sh -- build the libFuzzer targets with clang and fuzz the recording reader, the
# sample decoder, the agent-segment reader, the packed-chunk decompressor and, knowing format 3,
# what `show` and `show --scan` make of recordings forged behind valid checksums; then, with
# atheris in the project's venv, `vramscope fit`'s peak-file reader (tests/fuzz/fuzz_peak_file.py).
#
# Usage: tools/fuzz.sh [SECONDS]   (default 60 in all, a sixth for each target; CI uses about 60)
# Builds in build/fuzz, writes the seeds into tests/fuzz/corpus/{recording,payload,segment,packed}
# and the format target's (issue 34's hostile files among them) into build/fuzz/seeds-format,
# then fuzzes with ASan+UBSan on working corpora in build/fuzz/corpus-*. A crash leaves its input as
# build/fuzz/crash-* and the script exits non-zero; reproduce with
#   build/fuzz/tests/fuzz/fuzz_recording_reader build/fuzz/crash-<hash>   (or the target that found it)
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 5 ]; then
  echo "usage: $0 [SECONDS>=5]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
# The Python target runs in the venv tools/install-deps.sh makes (atheris is in
# tools/requirements-dev.txt).
venv="${VRAMSCOPE_VENV:-$HOME/.cache/vramscope/venv}"
if ! "$venv/bin/python" -c "import atheris" 2>/dev/null; then
  echo "fuzz_peak_file: atheris is not in $venv (run tools/install-deps.sh)" >&2
  exit 1
fi
jobs="${VRAMSCOPE_FUZZ_JOBS:-2}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DVRAMSCOPE_FUZZ=ON -DVRAMSCOPE_TEST=OFF -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_CLI=OFF >/dev/null
echo "building the fuzz targets with clang (log: build/fuzz/build.log)"
cmake --build "$build" -j "$jobs" \
  --target fuzz_recording_reader fuzz_sample_decoder fuzz_agent_segment fuzz_packed_chunk \
  fuzz_recording_format fuzz_make_seeds fuzz_make_format_seeds \
  >"$build/build.log" 2>&1 || { tail -n 40 "$build/build.log"; exit 1; }

seeds="$root/tests/fuzz/corpus"
mkdir -p "$seeds/recording" "$seeds/payload" "$seeds/segment" "$seeds/packed" \
  "$build/corpus-recording" "$build/corpus-payload" "$build/corpus-segment" "$build/corpus-packed" \
  "$build/corpus-format" "$build/seeds-format" "$build/corpus-peak" "$build/seeds-peak"
"$build/tests/fuzz/fuzz_make_seeds" "$seeds/recording" "$seeds/payload" "$seeds/segment" \
  "$seeds/packed"
"$build/tests/fuzz/fuzz_make_format_seeds" "$build/seeds-format"

cd "$build"
# -rss_limit_mb bounds what a crafted file may make the reader allocate; -max_len lets an input
# hold a header and a few chunks. -timeout turns a reader that hangs (a ring counter at 2^64-1
# once did) into a failure.
common=(-max_len=8192 -rss_limit_mb=1024 -timeout=10 -print_final_stats=1)
# Fuzzes one target for SECONDS; its output goes to build/fuzz/<target>.log, and one line says
# what it did: "fuzz_recording_reader: 123456 runs in 30 s, no crash" (libFuzzer's own count).
# Arguments after SECONDS (corpora, flags) come last, so a target's own flags override `common`.
# A target named NAME.py is tests/fuzz/NAME.py run by the venv's Python.
fuzz() {
  local name="$1" secs="$2"; shift 2
  local -a target=("$build/tests/fuzz/$name")
  if [[ "$name" == *.py ]]; then
    target=("$venv/bin/python" "$root/tests/fuzz/$name")
    name="${name%.py}"
  fi
  local log="$build/$name.log" summary
  if ! "${target[@]}" -max_total_time="$secs" "${common[@]}" "$@" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "$name: CRASH (the input is build/fuzz/crash-*; the whole log: build/fuzz/$name.log)"
    return 1
  fi
  summary="$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)"
  [[ -n "$summary" ]] || { tail -n 20 "$log"; echo "$name: no run count in build/fuzz/$name.log"; return 1; }
  read -r _ runs _ _ took _ <<<"$summary"
  echo "$name: $runs runs in $took s, no crash"
}
sixth=$((seconds / 6))
fuzz fuzz_recording_reader "$sixth" "$build/corpus-recording" "$seeds/recording"
fuzz fuzz_sample_decoder "$sixth" "$build/corpus-payload" "$seeds/payload"
fuzz fuzz_packed_chunk "$sixth" "$build/corpus-packed" "$seeds/packed"
# A segment of two slots and full rings is about 68 KiB: let inputs be that long.
fuzz fuzz_agent_segment "$sixth" "$build/corpus-segment" "$seeds/segment" -max_len=70000
# The hostile seeds run to 128 KiB (a 16 MiB digest a hundred times, 1,900 pids a sample).
fuzz fuzz_recording_format "$sixth" "$build/corpus-format" \
  "$build/seeds-format" -max_len=131072

# The peak file of `vramscope fit`'s probes, read by Python (atheris); inputs up to 64 KiB
# (500 step records; the reader's cap, 1 MiB, would only make each run slower).
PYTHONPATH="$root/python" "$venv/bin/python" "$root/tests/fuzz/fuzz_peak_file.py" \
  --write-seeds "$build/seeds-peak"
PYTHONPATH="$root/python" fuzz fuzz_peak_file.py "$((seconds - 5 * sixth))" \
  "$build/corpus-peak" "$build/seeds-peak" -max_len=65536
