# tools/gpu/wheel-venv.sh -- sourced: a venv that sees the system's torch, with WHEEL installed by plain pip
# shellcheck shell=bash
#
#   source tools/gpu/wheel-venv.sh WHEEL OUTDIR    # sets venv, py, PATH and VRAMSCOPE_CACHE_DIR
#
# The venv is OUTDIR/venv (--system-site-packages, pointed at python3's own packages: on a CUDA
# image python3 is itself a venv holding torch); the agent's compile cache is OUTDIR/cache.
wheel_venv() {
  local wheel="$1" out="$2" purelib
  venv="$out/venv"
  python3 -m venv --system-site-packages "$venv" 2>/dev/null \
    || python3 -m venv --clear --without-pip --system-site-packages "$venv"
  purelib="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$venv/bin/python" -c 'import sysconfig, sys; open(sysconfig.get_paths()["purelib"] + "/_system_packages.pth", "w").write(sys.argv[1] + "\n")' "$purelib"
  python3 -m pip --python "$venv/bin/python" install -q --no-index --no-deps --ignore-installed \
    "$wheel" || return 1
  # shellcheck disable=SC2034  # for the script that sources this
  py="$venv/bin/python"
  export PATH="$venv/bin:$PATH" VRAMSCOPE_CACHE_DIR="$out/cache"
}
wheel_venv "$@"
