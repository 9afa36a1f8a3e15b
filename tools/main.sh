#!/usr/bin/env bash
# tools/main.sh -- set up and run vramscope's main job: the live view of every GPU (`vramscope top`).
#
#   tools/main.sh [top options...]      e.g. tools/main.sh --interval 100ms
#
# Installs the build dependencies (Debian packages) when missing, builds the CLI, and starts the
# live view. On a machine without an NVIDIA driver it says so in one line and replays instead a
# recording made on a real GPU during a PyTorch training run (data/), clearly labelled as a replay.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools/install-deps.sh --cli-only >/dev/null
build=build/main
mkdir -p build
# The build's output goes to a log; the terminal gets one progress line, and on a failure the
# compiler's errors and the log's name.
show_failure() {
  local log="$1"
  grep -E -A 8 'error:|FAILED:|CMake Error' "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
  echo "vramscope: the build failed; the whole log: $log" >&2
  exit 1
}
if [[ ! -f "$build/build.ninja" ]]; then
  echo "configuring vramscope..." >&2
  # The folder's one description is its preset (CMakePresets.json: main).
  cmake --preset main >"$build.configure.log" 2>&1 || show_failure "$build.configure.log"
fi
if ! cmake --build "$build" -- -n 2>/dev/null | grep -q "no work to do"; then
  echo "building vramscope (about two minutes on two cores the first time)..." >&2
fi
cmake --build --preset main -j "$(nproc)" >"$build.build.log" 2>&1 || show_failure "$build.build.log"
cli="$build/cli/vramscope"

set +e
reason="$("$cli" --json 2>&1 >/dev/null)"
rc=$?
set -e
if [[ $rc -eq 3 ]]; then
  recording=data/h200-training.vsrec
  echo "No GPU here: ${reason#vramscope: }" >&2
  echo "Replaying $recording instead: a recording made on an NVIDIA H200 during a real PyTorch" >&2
  if [[ -t 1 ]]; then
    echo "training run (not live data). Keys: space pause, +/- speed, ? help, q quit." >&2
    sleep 2
    exec "$cli" top --replay "$recording" "$@"
  fi
  # Not a terminal (no key works there): the recording's summary and the replayed view at the
  # recording's peak, printed once.
  echo "training run (not live data): its summary, then the view at its peak." >&2
  "$cli" show "$recording"
  exec "$cli" top --replay "$recording" --once "$@"
fi
exec "$cli" top "$@"
