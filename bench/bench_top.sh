#!/usr/bin/env bash
# bench/bench_top.sh -- CPU cost of `vramscope top` (8 GPUs, 64 processes, NVML double) in tmux
#
# usage: bench/bench_top.sh [BUILD_DIR] [SECONDS]     (defaults: build/release, 20)
# For --interval 250ms (4 Hz) and 10ms (100 Hz), runs `vramscope top` in a detached 120x40 tmux
# session for SECONDS and prints the CPU time of the top process per second of wall time
# (getrusage of the child via wait4, see bench_top_cpu.cpp). Goal: <= 1 % of one core at 4 Hz.
set -euo pipefail

build=${1:-build/release}
duration=${2:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
vramscope=$build/cli/vramscope
launcher=$build/bench/bench_top_cpu
double=${VRAMSCOPE_NVML_DOUBLE:-$build/tests/nvml_double/libvramscope_nvml_double.so}
script=${VRAMSCOPE_NVML_DOUBLE_SCRIPT:-$root/tests/data/nvml/eight_gpus_64_procs.json}
for file in "$vramscope" "$launcher" "$double" "$script"; do
  [[ -e $file ]] || { echo "missing $file (build with -DVRAMSCOPE_TEST=ON -DVRAMSCOPE_BENCH=ON)"; exit 1; }
done
command -v tmux >/dev/null || { echo "tmux is needed"; exit 1; }

work=$(mktemp -d)
socket="vramscope-bench-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -m 700 "$work/shm"

echo "vramscope top, 8 GPUs x 64 processes (NVML double), 120x40 tmux, ${duration}s each"
printf '%-10s %10s %10s %12s\n' interval user_s sys_s "cpu_%_core"
for interval in 250ms 10ms; do
  result=$work/result-$interval
  tmux -L "$socket" -f /dev/null new-session -d -s "b$interval" -x 120 -y 40 \
    "env LANG=C.UTF-8 VRAMSCOPE_SHM_DIR='$work/shm' VRAMSCOPE_NVML_LIBRARY='$double' \
     VRAMSCOPE_NVML_DOUBLE_SCRIPT='$script' \
     '$launcher' '$duration' '$result' -- '$vramscope' top --interval $interval"
  # The launcher writes its result when the run is over; poll for it (bounded).
  for _ in $(seq 1 $(((duration + 30) * 10))); do
    [[ -s $result ]] && break
    sleep 0.1
  done
  [[ -s $result ]] || { echo "no result for --interval $interval"; exit 1; }
  read -r user sys _ percent <"$result"
  printf '%-10s %10s %10s %12s\n' "$interval" "$user" "$sys" "$percent"
done
