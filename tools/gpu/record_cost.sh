#!/usr/bin/env bash
# tools/gpu/record_cost.sh -- where `vramscope record -i 1ms` spends its CPU on this machine (issue 45)
#
#   tools/gpu/record_cost.sh WHEEL OUTDIR
#
# Prints the floor (bench/wakeup_floor.c: a clock read, a bare 1 ms wake-up), the clocksource,
# the NVML calls a sample makes (tools/gpu/probe_nvml_calls.py), then `record -i 1ms`'s CPU a sample
# (tools/gpu/record_cpu.py: its start and end taken out) with agents read and with --no-agents,
# and, where strace is installed, its system calls (strace -c, OUTDIR/strace.txt).
set -uo pipefail
wheel="$(realpath "${1:?usage: record_cost.sh WHEEL OUTDIR}")"
out="$(mkdir -p "${2:?usage: record_cost.sh WHEEL OUTDIR}" && realpath "$2")"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
for c in cc gcc /opt/gcc/bin/gcc; do
  command -v "$c" >/dev/null && {
    "$c" -O2 bench/wakeup_floor.c -o "$out/wakeup_floor" -ldl && "$out/wakeup_floor" 5 &&
      "$out/wakeup_floor" 5 nvml
    break
  }
done
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
python3 tools/gpu/probe_nvml_calls.py --calls 20000
# shellcheck source=tools/gpu/wheel-venv.sh
source tools/gpu/wheel-venv.sh "$wheel" "$out" >/dev/null || exit 1
"$py" tools/gpu/record_cpu.py "$out/r.vsrec"
"$py" tools/gpu/record_cpu.py "$out/r.vsrec" --no-agents
if command -v strace >/dev/null; then
  strace -c -f -o "$out/strace.txt" vramscope record -o "$out/s.vsrec" -i 1ms -d 3s --force \
    >/dev/null 2>&1
  sort -k4 -n -r "$out/strace.txt" | head -n 14
else
  echo "strace: not installed"
fi
rm -f "$out"/*.vsrec
