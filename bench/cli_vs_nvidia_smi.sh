#!/usr/bin/env bash
# bench/cli_vs_nvidia_smi.sh -- wall time of `vramscope --json` against nvidia-smi's memory query
#
# Runs on a GPU machine. Each repetition starts a fresh process of each tool, interleaved
# (A B A B ...) so that drift in machine load hits both alike; prints the median of each and the
# ratio as one markdown table row, for docs/benchmarks.md.
#
#   bench/cli_vs_nvidia_smi.sh [REPETITIONS]      (default 30, minimum 20)
#   VRAMSCOPE_CLI=/path/to/vramscope bench/cli_vs_nvidia_smi.sh
set -euo pipefail

repetitions="${1:-30}"
if ! [[ "$repetitions" =~ ^[0-9]+$ ]] || (( repetitions < 20 )); then
  echo "usage: $0 [REPETITIONS>=20]" >&2
  exit 2
fi
cli="${VRAMSCOPE_CLI:-$(command -v vramscope || true)}"
if [[ -z "$cli" || ! -x "$cli" ]]; then
  echo "$0: vramscope not found (set VRAMSCOPE_CLI=/path/to/vramscope)" >&2
  exit 2
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "$0: nvidia-smi does not work here: run this on a GPU machine" >&2
  exit 3
fi
smi_query=(nvidia-smi --query-gpu=index,memory.total,memory.reserved,memory.used,memory.free
           --format=csv,noheader,nounits)

# Nanoseconds taken by one run of the given command (its output discarded, failure fatal).
time_ns() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  echo $(( end - start ))
}

median_ms() {
  sort -n | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.1f", m / 1e6 }'
}

# One untimed run of each: page cache and driver state warm for both.
"$cli" --json >/dev/null
"${smi_query[@]}" >/dev/null

cli_times=()
smi_times=()
for (( i = 0; i < repetitions; i++ )); do
  cli_times+=("$(time_ns "$cli" --json)")
  smi_times+=("$(time_ns "${smi_query[@]}")")
done

cli_ms=$(printf '%s\n' "${cli_times[@]}" | median_ms)
smi_ms=$(printf '%s\n' "${smi_times[@]}" | median_ms)
ratio=$(awk -v a="$cli_ms" -v b="$smi_ms" 'BEGIN { printf "%.2f", a / b }')
gpus=$(nvidia-smi -L | wc -l)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)

echo "| date | GPUs | vramscope --json median (ms) | nvidia-smi --query-gpu median (ms) | ratio | repetitions |"
echo "|---|---|---|---|---|---|"
echo "| $(date -u +%Y-%m-%d) | ${gpus}x ${gpu_name} | ${cli_ms} | ${smi_ms} | ${ratio} | ${repetitions} |"
