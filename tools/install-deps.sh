#!/usr/bin/env bash
# tools/install-deps.sh -- install what vramscope needs to build and test, idempotently.
#
#   tools/install-deps.sh [--cli-only]
#
# Debian packages (compiler, CMake, header-only libraries, ncurses, test tools) are installed
# only when missing. The Python side lives in a virtual environment kept outside the clone
# (~/.cache/vramscope/venv, or $VRAMSCOPE_VENV) so that the large torch download happens once
# per machine, not once per clone. --cli-only skips the Python environment (enough for the CLI).
set -euo pipefail

cli_only=0
[[ "${1:-}" == "--cli-only" ]] && cli_only=1

log() { printf '[vramscope setup] %s\n' "$*" >&2; }

# --- Debian packages --------------------------------------------------------------------------
packages=(build-essential cmake ninja-build pkg-config git
          libcli11-dev libfmt-dev nlohmann-json3-dev libncurses-dev
          libzstd-dev)
if [[ $cli_only -eq 0 ]]; then
  # chromium (~300 MB installed) renders `vramscope report` pages in tests/e2e/report_chromium.sh.
  # clang-format and clang-tidy: tools/lint.sh (the style and static checks of tools/test.sh).
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-dev tmux prometheus
             python3 python3-venv python3-dev procps chromium clang-format clang-tidy)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # apt's chatter ("debconf: delaying package configuration...") goes to a log, shown on failure.
  apt_log="$(mktemp)"
  if ! { "${sudo_cmd[@]}" apt-get update -qq &&
         "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
       >"$apt_log" 2>&1; then
    cat "$apt_log" >&2
    log "installing Debian packages failed (above)"
    exit 1
  fi
  rm -f "$apt_log"
fi

[[ $cli_only -eq 1 ]] && exit 0

# --- Python virtual environment (cached outside the clone) ------------------------------------
venv="${VRAMSCOPE_VENV:-$HOME/.cache/vramscope/venv}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$here/tools/requirements-dev.txt"
stamp="$venv/.vramscope-requirements.sha256"
# requirements-dev.txt includes requirements-wheel.txt: a change to either reinstalls.
want="$(cat "$requirements" "$here/tools/requirements-wheel.txt" | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
  log "creating the Python environment in $venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  log "installing Python packages (torch is large: the first time takes a few minutes)"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$want" > "$stamp"
fi
echo "$venv"
