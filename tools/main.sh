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
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAMSCOPE_TEST=OFF \
        -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_AGENT=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc)" >/dev/null
cli="$build/cli/vramscope"

set +e
reason="$("$cli" --json 2>&1 >/dev/null)"
rc=$?
set -e
if [[ $rc -eq 3 ]]; then
  recording=data/h200-training.vsrec
  echo "No GPU here: ${reason#vramscope: }" >&2
  echo "Replaying $recording instead: a recording made on an NVIDIA H200 during a real PyTorch" >&2
  echo "training run (not live data). Keys: space pause, +/- speed, ? help, q quit." >&2
  if [[ -t 1 ]]; then
    sleep 2
    exec "$cli" top --replay "$recording" "$@"
  fi
  # Not a terminal: print the recording's summary and one frame of the replayed view.
  "$cli" show "$recording"
  exec "$cli" top --replay "$recording" --once "$@"
fi
exec "$cli" top "$@"
