#!/usr/bin/env bash
# tests/e2e/report_chromium.sh -- `vramscope report` pages opened in headless Chromium
#
# usage: report_chromium.sh VRAMSCOPE_BINARY MAKE_BIG_RECORDING_BINARY OUTPUT_DIR
# For the real H200 recording (data/) and a synthetic one with two ranks, categories and an OOM:
# the page loads with no console message, its charts are drawn (the screenshots stay in
# OUTPUT_DIR), and its numbers equal `vramscope show --json`. Then a long synthetic recording
# ($VRAMSCOPE_REPORT_BIG_SAMPLES samples, default 1000000) must give a page <= 10 MB in <= 10 s.
# Exits 0 on success, 1 on failure, 77 when chromium or python3 is missing.
set -euo pipefail
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

vramscope=$1
make_big=$2
out=$3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "SKIP: chromium not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
export TZ=UTC

# The same window for the DOM dump and the screenshot, so the chart boxes the page's script
# measured are where the screenshot shows them.
chrome() {
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 --window-size=1200,4000 "$@"
}

# check NAME RECORDING MIN_CHARTS: report, load, screenshot, compare with show --json.
check() {
  local name=$1 recording=$2 min_charts=$3
  "$vramscope" report "$recording" -o "$work/$name.html"
  "$vramscope" show --json "$recording" >"$work/$name.json"
  chrome --dump-dom "file://$work/$name.html" >"$work/$name.dom.html" 2>"$work/$name.dom.log"
  chrome --screenshot="$out/$name.png" "file://$work/$name.html" >/dev/null 2>"$work/$name.png.log"
  if grep -h 'CONSOLE' "$work/$name.dom.log" "$work/$name.png.log"; then
    echo "FAIL: $name: the page logged to the console"
    exit 1
  fi
  python3 "$here/check_report_page.py" "$work/$name.dom.html" "$out/$name.png" "$work/$name.json" "$min_charts" \
    || { echo "FAIL: $name (screenshot: $out/$name.png)"; exit 1; }
  echo "$name: screenshot in $out/$name.png"
}

check h200 "$here/../../data/h200-training.vsrec" 3

# Two ranks on one GPU, step categories, one OOM: 2 GPU/process timelines, steps, categories.
"$make_big" "$work/two.vsrec" 20000 2 >/dev/null
check two "$work/two.vsrec" 7
grep -q 'id="oom-0"' "$work/two.html" || { echo "FAIL: no OOM row"; exit 1; }
grep -q 'href="#oom-0"' "$work/two.html" || { echo "FAIL: no OOM marker linking to it"; exit 1; }

samples=${VRAMSCOPE_REPORT_BIG_SAMPLES:-1000000}
"$make_big" "$work/big.vsrec" "$samples" >/dev/null
start=$(date +%s%N)
"$vramscope" report "$work/big.vsrec" -o "$work/big.html"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
bytes=$(stat -c %s "$work/big.html")
echo "big: $samples samples ($(stat -c %s "$work/big.vsrec") bytes): report $bytes bytes in $elapsed_ms ms"
((bytes <= 10 * 1024 * 1024)) || { echo "FAIL: report larger than 10 MB"; exit 1; }
((elapsed_ms <= 10000)) || { echo "FAIL: report took more than 10 s"; exit 1; }
echo "PASS"
