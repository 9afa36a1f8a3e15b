#!/usr/bin/env bash
# tests/e2e/top_tmux.sh -- `vramscope top` end to end: a real terminal (tmux), the NVML double,
# and a fake agent segment; also --once, --replay of a real recording, and the no-driver exit.
#
# usage: top_tmux.sh VRAMSCOPE_BINARY FAKE_AGENT_BINARY NVML_DOUBLE_LIBRARY
# Exits 0 on success, 1 on failure (with the screen that failed), 77 when tmux is missing.
# Synchronisation is by polling the screen with bounded retries, never by fixed sleeps.
set -euo pipefail
# A command that fails outside the checks below still says which one it was.
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND (exit $?)"' ERR

vramscope=$1
fake_agent=$2
nvml_double=$3
command -v tmux >/dev/null || { echo "SKIP: tmux not installed"; exit 77; }

work=$(mktemp -d)
socket="vramscope-e2e-$$"
agent_pid=""
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  exec 7>&- 2>/dev/null || true          # closing its stdin ends the fake agent
  if [[ -n $agent_pid ]]; then wait "$agent_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $1"
  if [[ -n ${2:-} ]]; then echo "----- screen -----"; echo "$2"; echo "------------------"; fi
  exit 1
}

# The fake agent publishes 8 GiB allocated / 10 GiB reserved on GPU 0 from its own pid, and
# step 42 whose 8 GiB peak is 4G params, 2G grads, 1G optimizer state, 512M activations, ...
mkdir -m 700 "$work/shm"
export VRAMSCOPE_SHM_DIR=$work/shm
gib=$((1 << 30))
mkfifo "$work/agent_in"
VRAMSCOPE_FAKE_AGENT_STEP=1 "$fake_agent" GPU-e2e00000-0000-0000-0000-000000000000 $((8 * gib)) $((10 * gib)) 3 \
  <"$work/agent_in" >"$work/agent_out" &
agent_pid=$!
exec 7>"$work/agent_in"
for _ in $(seq 1 100); do
  grep -q '^ready' "$work/agent_out" 2>/dev/null && break
  sleep 0.05
done
grep -q '^ready' "$work/agent_out" || fail "the fake agent did not start"

# Two GPUs; the agent's pid holds 12 GiB on GPU 0 (so 2 GiB are not PyTorch's).
cat >"$work/nvml.json" <<EOF
{
  "driver_version": "580.159.03",
  "devices": [
    {"name": "NVIDIA H200", "uuid": "GPU-e2e00000-0000-0000-0000-000000000000",
     "pci": {"domain": 0, "bus": 24, "device": 0},
     "memory": {"total": $((140 * gib)), "reserved": $((gib / 2)), "used": $((13 * gib)),
                "free": $((140 * gib - gib / 2 - 13 * gib))},
     "mig_mode": 0,
     "processes": [{"pid": $agent_pid, "used": $((12 * gib)), "kinds": ["compute"]},
                   {"pid": 5001002, "used": $gib, "kinds": ["compute"]}]},
    {"name": "NVIDIA H200", "uuid": "GPU-e2e00001-0000-0000-0000-000000000000",
     "pci": {"domain": 0, "bus": 42, "device": 0},
     "memory": {"total": $((140 * gib)), "reserved": $((gib / 2)), "used": $((3 * gib)),
                "free": $((140 * gib - gib / 2 - 3 * gib))},
     "mig_mode": 0,
     "processes": [{"pid": 5001003, "used": $((3 * gib)), "kinds": ["compute"]}]}
  ]
}
EOF
export VRAMSCOPE_NVML_LIBRARY=$nvml_double
export VRAMSCOPE_NVML_DOUBLE_SCRIPT=$work/nvml.json

# --- 1. the interactive view in a detached 120x40 tmux session -------------------------------
printf 'set -g remain-on-exit on\nset -g default-terminal screen\n' >"$work/tmux.conf"
tmux -L "$socket" -f "$work/tmux.conf" new-session -d -s top -x 120 -y 40 \
  "env LANG=C.UTF-8 VRAMSCOPE_SHM_DIR='$VRAMSCOPE_SHM_DIR' VRAMSCOPE_NVML_LIBRARY='$nvml_double' \
   VRAMSCOPE_NVML_DOUBLE_SCRIPT='$VRAMSCOPE_NVML_DOUBLE_SCRIPT' '$vramscope' top --interval 100ms; \
   echo \$? >'$work/top.status'"

screen() { tmux -L "$socket" capture-pane -p -t top; }
wait_for() {  # wait_for PATTERN WHAT
  for _ in $(seq 1 100); do
    if screen | grep -q -- "$1"; then return 0; fi
    sleep 0.1
  done
  fail "$2 (no \"$1\" on screen)" "$(screen)"
}

wait_for "GPU 0 . NVIDIA H200" "GPU 0 panel"
wait_for "GPU 1 . NVIDIA H200" "GPU 1 panel"
text=$(screen)
grep -q "13.0G/140G" <<<"$text" || fail "GPU 0 used/total" "$text"
grep -q "alloc 8.0G" <<<"$text" || fail "GPU 0 legend: allocated" "$text"
grep -q "non-torch 2.0G" <<<"$text" || fail "GPU 0 legend: non-PyTorch" "$text"
# The agent's row: pid, driver used, torch allocated, reserved, step peak, step, rank.
grep -Eq "^ *$agent_pid .* 0 +12\.0G +8\.0G +10\.0G +9\.0G +42 +3 " <<<"$text" ||
  fail "process row with the torch columns" "$text"
grep -q "sort:memory" <<<"$text" || fail "footer shows the sort key" "$text"
if grep -q "step 42 peak" <<<"$text"; then fail "step categories shown without a selection" "$text"; fi

# Selecting the agent's row (the first, by memory) shows its step breakdown above the footer.
tmux -L "$socket" send-keys -t top Down
wait_for "pid $agent_pid GPU 0 step 42 peak 8.0G: params 4.0G  grads 2.0G  optim 1.0G  activ 512M  temp 256M  other 256M" \
  "step categories of the selected row"

tmux -L "$socket" send-keys -t top s
wait_for "sort:pid" "footer after 's'"
tmux -L "$socket" send-keys -t top '?'
wait_for "vramscope top: keys" "help overlay after '?'"
tmux -L "$socket" send-keys -t top q
# The pane's shell writes top's exit status to a file: tmux's own #{pane_dead_status} can stay
# empty when it reaps the child after marking the pane dead, so it is not used.
for _ in $(seq 1 100); do
  [[ -s $work/top.status ]] && break
  sleep 0.1
done
[[ -s $work/top.status ]] || fail "q did not quit" "$(screen)"
status=$(cat "$work/top.status")
[[ $status == 0 ]] || fail "exit status after q was '$status'" "$(screen)"
echo "ok: interactive view, step categories, sort, help, quit"

# --- 2. --once prints the same view as text, without a terminal ------------------------------
once=$(COLUMNS=100 LANG=C.UTF-8 "$vramscope" top --once </dev/null)
grep -q "0 H200" <<<"$once" || fail "--once shows GPU 0" "$once"
grep -Eq "^ *$agent_pid .*8\.0G" <<<"$once" || fail "--once shows the agent's row" "$once"
[[ $(head -1 <<<"$once" | wc -L) -le 100 ]] || fail "--once respects COLUMNS" "$once"
echo "ok: --once"

# --- 3. --replay of a real recording --------------------------------------------------------
"$vramscope" record -o "$work/run.vrec" --interval 50ms --duration 500ms >/dev/null
replay=$(COLUMNS=120 "$vramscope" top --replay "$work/run.vrec" --once </dev/null)
grep -Eq "REPLAY (│|\|) sample [0-9]+" <<<"$replay" || fail "replay banner" "$replay"
grep -q "run.vrec, recorded on $(hostname)" <<<"$replay" || fail "replay origin" "$replay"
grep -q "quit" <<<"$replay" && fail "--once prints no key hints" "$replay"
grep -Eq "^ *$agent_pid .*8\.0G" <<<"$replay" || fail "replay shows the recorded agent" "$replay"
echo "ok: --replay"

# --- 4. no driver: one line, exit 3 ---------------------------------------------------------
rc=0
err=$(VRAMSCOPE_NVML_LIBRARY=$work/no-such-libnvidia-ml.so.1 "$vramscope" top --once 2>&1 >/dev/null) ||
  rc=$?
[[ $rc == 3 ]] || fail "exit code without a driver was $rc" "$err"
[[ $(wc -l <<<"$err") == 1 ]] || fail "one line without a driver" "$err"
echo "ok: no driver -> exit 3 ($err)"

# --- 5. bad options are usage errors --------------------------------------------------------
rc=0
"$vramscope" top --interval 1ms --once >/dev/null 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "--interval 1ms gave exit $rc, expected 2"
echo "ok: usage errors"
