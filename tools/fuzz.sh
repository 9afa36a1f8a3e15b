#!/usr/bin/env bash
# tools/fuzz.sh -- build the libFuzzer targets with clang and fuzz the recording reader, the
# sample decoder, the agent-segment reader and the packed-chunk decompressor.
#
# Usage: tools/fuzz.sh [SECONDS]   (default 60 in all, a quarter for each target; CI uses about 60)
# Builds in build/fuzz, writes the seeds into tests/fuzz/corpus/{recording,payload,segment,packed},
# then fuzzes with ASan+UBSan on working corpora in build/fuzz/corpus-*. A crash leaves its input as
# build/fuzz/crash-* and the script exits non-zero; reproduce with
#   build/fuzz/tests/fuzz/fuzz_recording_reader build/fuzz/crash-<hash>   (or the target that found it)
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 4 ]; then
  echo "usage: $0 [SECONDS>=4]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
jobs="${VRAMSCOPE_FUZZ_JOBS:-2}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DVRAMSCOPE_FUZZ=ON -DVRAMSCOPE_TEST=OFF -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_CLI=OFF >/dev/null
echo "building the fuzz targets with clang (log: build/fuzz/build.log)"
cmake --build "$build" -j "$jobs" \
  --target fuzz_recording_reader fuzz_sample_decoder fuzz_agent_segment fuzz_packed_chunk \
  fuzz_make_seeds \
  >"$build/build.log" 2>&1 || { tail -n 40 "$build/build.log"; exit 1; }

seeds="$root/tests/fuzz/corpus"
mkdir -p "$seeds/recording" "$seeds/payload" "$seeds/segment" "$seeds/packed" \
  "$build/corpus-recording" "$build/corpus-payload" "$build/corpus-segment" "$build/corpus-packed"
"$build/tests/fuzz/fuzz_make_seeds" "$seeds/recording" "$seeds/payload" "$seeds/segment" \
  "$seeds/packed"

cd "$build"
# -rss_limit_mb bounds what a crafted file may make the reader allocate; -max_len lets an input
# hold a header and a few chunks. -timeout turns a reader that hangs (a ring counter at 2^64-1
# once did) into a failure.
common=(-max_len=8192 -rss_limit_mb=1024 -timeout=10 -print_final_stats=1)
# Fuzzes one target for SECONDS; its output goes to build/fuzz/<target>.log, and one line says
# what it did: "fuzz_recording_reader: 123456 runs in 30 s, no crash" (libFuzzer's own count).
# Arguments after SECONDS (corpora, flags) come last, so a target's own flags override `common`.
fuzz() {
  local name="$1" secs="$2"; shift 2
  local log="$build/$name.log" summary
  if ! "$build/tests/fuzz/$name" -max_total_time="$secs" "${common[@]}" "$@" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "$name: CRASH (the input is build/fuzz/crash-*; the whole log: build/fuzz/$name.log)"
    return 1
  fi
  summary="$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)"
  [[ -n "$summary" ]] || { tail -n 20 "$log"; echo "$name: no run count in build/fuzz/$name.log"; return 1; }
  read -r _ runs _ _ took _ <<<"$summary"
  echo "$name: $runs runs in $took s, no crash"
}
quarter=$((seconds / 4))
fuzz fuzz_recording_reader "$quarter" "$build/corpus-recording" "$seeds/recording"
fuzz fuzz_sample_decoder "$quarter" "$build/corpus-payload" "$seeds/payload"
fuzz fuzz_packed_chunk "$quarter" "$build/corpus-packed" "$seeds/packed"
# A segment of two slots and full rings is about 68 KiB: let inputs be that long.
fuzz fuzz_agent_segment "$((seconds - 3 * quarter))" "$build/corpus-segment" "$seeds/segment" \
  -max_len=70000
