#!/usr/bin/env bash
# tools/fuzz.sh -- build the libFuzzer targets with clang and fuzz the recording reader, the
# sample decoder and the packed-chunk decompressor.
#
# Usage: tools/fuzz.sh [SECONDS]   (default 60, split between the three targets; CI uses about 60)
# Builds in build/fuzz, writes the seeds into tests/fuzz/corpus/{recording,payload,packed}, then fuzzes
# with ASan+UBSan on working corpora in build/fuzz/corpus-*. A crash leaves its input as
# build/fuzz/crash-* and the script exits non-zero; reproduce with
#   build/fuzz/tests/fuzz/fuzz_recording_reader build/fuzz/crash-<hash>
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 3 ]; then
  echo "usage: $0 [SECONDS>=3]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"
jobs="${VRAMSCOPE_FUZZ_JOBS:-2}"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DVRAMSCOPE_FUZZ=ON -DVRAMSCOPE_TEST=OFF -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_CLI=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_recording_reader fuzz_sample_decoder fuzz_packed_chunk \
  fuzz_make_seeds

seeds="$root/tests/fuzz/corpus"
mkdir -p "$seeds/recording" "$seeds/payload" "$seeds/packed" "$build/corpus-recording" \
  "$build/corpus-payload" "$build/corpus-packed"
"$build/tests/fuzz/fuzz_make_seeds" "$seeds/recording" "$seeds/payload" "$seeds/packed"

cd "$build"
# -rss_limit_mb bounds what a crafted file may make the reader allocate; -max_len lets an input
# hold a header and a few chunks.
common=(-max_len=8192 -rss_limit_mb=1024 -timeout=10 -print_final_stats=1)
third=$((seconds / 3))
"$build/tests/fuzz/fuzz_recording_reader" "$build/corpus-recording" "$seeds/recording" \
  -max_total_time="$third" "${common[@]}"
"$build/tests/fuzz/fuzz_sample_decoder" "$build/corpus-payload" "$seeds/payload" \
  -max_total_time="$third" "${common[@]}"
"$build/tests/fuzz/fuzz_packed_chunk" "$build/corpus-packed" "$seeds/packed" \
  -max_total_time="$((seconds - 2 * third))" "${common[@]}"
