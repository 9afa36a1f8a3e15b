#!/usr/bin/env bash
# tools/lint.sh -- the style and static checks: clang-format, clang-tidy, ruff, mypy, the Python rooms (tools/test.sh runs it).
#
#   tools/lint.sh                 check everything; the last line says what passed and failed
#   tools/lint.sh --fix           rewrite the C++ files in the .clang-format style (nothing else)
#   tools/lint.sh --only a,b      run only these of clang-format, clang-tidy, ruff, mypy, py-layers
#   tools/lint.sh [...] FILE...   only these files (for the pre-commit hooks); others are ignored
#
# clang-format checks our C++ (src agent cli include tests bench; never build/ or third-party
# code) against .clang-format. clang-tidy runs the .clang-tidy checks over the units of src agent
# cli bench (and of any test file named) in compile_commands.json of the dev build (build/dev,
# configured through CMakePresets.json when missing; another with VRAMSCOPE_LINT_BUILD_DIR).
# ruff and mypy check the Python package with the configuration in pyproject.toml; a tool that
# is not installed is reported as skipped, with how to install it. py-layers is the import rule
# of the Python rooms (tests/python/test_layers.py run as a script on python/vramscope, 0.3 s).
# Exits non-zero when a check that ran failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fix=0 only="clang-format,clang-tidy,ruff,mypy,py-layers"
files=()
while (($#)); do
  case "$1" in
    --fix) fix=1; only="clang-format"; shift ;;
    --only) only="${2:?--only needs a list: clang-format,clang-tidy,ruff,mypy,py-layers}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; files+=("$@"); break ;;
    -*) echo "lint.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
jobs="$(nproc)"
build_dir="${VRAMSCOPE_LINT_BUILD_DIR:-build/dev}"
venv="${VRAMSCOPE_VENV:-$HOME/.cache/vramscope/venv}"
cxx_dirs=(src agent cli include tests bench)
cxx_regex='\.(c|cc|cpp|cxx|h|hh|hpp|hxx)$'

results=() n_passed=0 n_failed=0 n_skipped=0
wanted() { [[ ",$only," == *",$1,"* ]]; }
passed() { results+=("$1: passed${2:+ ($2)}"); n_passed=$((n_passed + 1)); }
failed() { results+=("$1: FAILED ($2)"); n_failed=$((n_failed + 1)); }
skipped() { results+=("$1: skipped ($2)"); n_skipped=$((n_skipped + 1)); echo "$1: skipped: $2"; }

# Our C++ files: tracked (so never build/ output), in our folders, narrowed to FILE... if given.
cxx_files() {
  if ((${#files[@]})); then
    printf '%s\n' "${files[@]}" | grep -E "^($(IFS='|'; echo "${cxx_dirs[*]}"))/" | grep -E "$cxx_regex"
  else
    git ls-files -- "${cxx_dirs[@]}" | grep -E "$cxx_regex"
  fi
}

if wanted clang-format; then
  echo "== clang-format"
  if ! command -v clang-format >/dev/null; then
    skipped clang-format "not installed: apt install clang-format (tools/install-deps.sh)"
  elif ((fix)); then
    cxx_files | xargs -r -P "$jobs" -n 16 clang-format -i
    passed clang-format "rewrote $(cxx_files | wc -l) files in place; review with git diff"
  else
    mapfile -t cxx < <(cxx_files)
    # Each failing file prints its own name in one short write, so parallel runs do not mix.
    bad="$(printf '%s\n' "${cxx[@]}" | xargs -r -P "$jobs" -n 16 sh -c \
           'for f; do clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done' sh \
           | sort)"
    if [[ -z "$bad" ]]; then
      passed clang-format "${#cxx[@]} files"
    else
      count="$(wc -l <<<"$bad")"
      sed 's/^/  not formatted: /' <<<"$bad" | head -n 20
      ((count <= 20)) || echo "  ... and $((count - 20)) more"
      echo "  (tools/lint.sh --fix rewrites them; clang-format --dry-run FILE shows the changes)"
      failed clang-format "$count of ${#cxx[@]} files not formatted"
    fi
  fi
fi

if wanted clang-tidy; then
  echo "== clang-tidy ($build_dir/compile_commands.json)"
  if ! command -v clang-tidy >/dev/null; then
    skipped clang-tidy "not installed: apt install clang-tidy (tools/install-deps.sh)"
  else
    if [[ ! -f "$build_dir/compile_commands.json" && "$build_dir" == build/dev ]]; then
      cmake --preset dev >/dev/null || true
    fi
    if [[ ! -f "$build_dir/compile_commands.json" ]]; then
      failed clang-tidy "no $build_dir/compile_commands.json (configure it: cmake --preset dev)"
    else
      # The database's translation units that are ours: a generated or third-party file
      # would not be ours to fix. The whole-tree sweep takes the product's code (src, agent,
      # cli, bench); the tests' units are checked when named (the pre-commit hook names the
      # files a commit changes): they are 45 % of the units and 6 of the sweep's 13 cold
      # minutes on 2 cores, and are compiled with the same warnings as errors. The layer test's
      # planted upward call is never checked: it exists to fail at its #include.
      mapfile -t units < <(python3 - "$build_dir/compile_commands.json" "${files[@]}" <<'EOF'
import json, os, sys
root = os.getcwd()
wanted = {os.path.normpath(f) for f in sys.argv[2:]}
mine = ("src/", "agent/", "cli/", "tests/", "bench/") if wanted else ("src/", "agent/", "cli/", "bench/")
planted = {"tests/cpp/layers/upward_call.cpp"}
seen = set()  # a file built by several targets (the NVML double's variants) is checked once
for entry in json.load(open(sys.argv[1])):
    path = os.path.relpath(os.path.join(entry["directory"], entry["file"]), root)
    # A file gone since the last configure is not checked (the next build re-globs).
    if path.startswith(mine) and (not wanted or path in wanted) and os.path.exists(path) \
            and path not in seen and path not in planted:
        seen.add(path)
        print(path)
EOF
      )
      if ((${#units[@]} == 0)); then
        passed clang-tidy "no translation unit among the files"
      else
        # A unit is tidied again only when something clang-tidy reads changed: the unit, the
        # headers the last build saw it include (ninja's deps log), its compile command, the
        # .clang-tidy files and clang-tidy itself. Clean units are remembered by that key in
        # ~/.cache/vramscope/clang-tidy (outside the clone, so CI's clean clones keep it): the
        # whole tree takes ~10 min on 2 cores, an unchanged one seconds.
        cache="${VRAMSCOPE_TIDY_CACHE:-$HOME/.cache/vramscope/clang-tidy}"
        mkdir -p "$cache" "$build_dir/clang-tidy"
        mapfile -t todo < <(python3 tools/lint_tidy_keys.py "$build_dir" "$cache" "${units[@]}")
        log="$build_dir/clang-tidy.log"
        : >"$log"
        # One process and one log per unit ("UNIT KEY" lines), so a clean unit can be told apart.
        printf '%s\n' "${todo[@]}" | xargs -r -P "$jobs" -L 1 sh -c '
          build="$1" cache="$2" unit="$3" key="$4"
          out="$build/clang-tidy/$(printf %s "$unit" | tr / _).log"
          if clang-tidy -p "$build" --quiet "$unit" >"$out" 2>&1 \
              && ! grep -qE "^[^ ]+:[0-9]+:[0-9]+: (warning|error):" "$out"; then
            [ -z "$key" ] || : >"$cache/$key"
          fi' tidy "$build_dir" "$cache" || true
        for line in "${todo[@]}"; do
          cat "$build_dir/clang-tidy/$(printf %s "${line%% *}" | tr / _).log" >>"$log" 2>/dev/null
        done
        findings="$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log" | sort -u)"
        fresh="${#todo[@]} checked, $((${#units[@]} - ${#todo[@]})) unchanged since a clean check"
        if [[ -z "$findings" ]]; then
          passed clang-tidy "${#units[@]} translation units: $fresh"
        else
          count="$(wc -l <<<"$findings")"
          head -n 40 <<<"$findings"
          ((count <= 40)) || echo "  ... and $((count - 40)) more (all: $log)"
          failed clang-tidy "$count findings in ${#units[@]} translation units ($fresh); the whole log: $log"
        fi
      fi
    fi
  fi
fi

# The Python tools: from the development environment (tools/install-deps.sh), else the PATH.
python_tool() {
  local tool="$1"; shift
  if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -m "$tool" --version >/dev/null 2>&1; then
    "$venv/bin/python" -m "$tool" "$@"
  elif command -v "$tool" >/dev/null; then
    "$tool" "$@"
  else
    return 127
  fi
}
python_targets() {
  if ((${#files[@]})); then
    printf '%s\n' "${files[@]}" | grep -E "^($1)/.*\.pyi?$"
  else
    tr '|' '\n' <<<"$1"
  fi
}

if wanted ruff; then
  # Every Python file of the project: the package, every test folder (GPU tests too: they
  # are linted here though they run only on a GPU machine), the benchmarks, tools and examples.
  echo "== ruff check python/vramscope tests bench tools examples"
  mapfile -t py_files < <(python_targets 'python/vramscope|tests|bench|tools|examples')
  if ((${#py_files[@]} == 0)); then
    passed ruff "no Python file among the files"
  else
    python_tool ruff check --output-format concise "${py_files[@]}"
    case $? in
      0) passed ruff ;;
      127) skipped ruff "not installed: pip install -r tools/requirements-dev.txt" ;;
      *) failed ruff "see above" ;;
    esac
  fi
fi

if wanted mypy; then
  echo "== mypy python/vramscope"
  # Always the whole package: mypy checks a file against the modules it imports.
  # Its cache outside the clone: a cold run follows torch's imports for ~2 min.
  MYPY_CACHE_DIR="$HOME/.cache/vramscope/mypy" python_tool mypy python/vramscope
  case $? in
    0) passed mypy ;;
    127) skipped mypy "not installed: pip install -r tools/requirements-dev.txt" ;;
    *) failed mypy "see above" ;;
  esac
fi

if wanted py-layers; then
  # Always the whole package: a room is checked against every module that imports it.
  echo "== python rooms (tests/python/test_layers.py on python/vramscope)"
  layers_python=python3
  [[ -x "$venv/bin/python" ]] && layers_python="$venv/bin/python"
  if PYTHONPATH=python "$layers_python" tests/python/test_layers.py; then
    passed py-layers
  else
    failed py-layers "an import breaks the rooms' rule (docs/architecture.md); see above"
  fi
fi

summary="$(printf '%s; ' "${results[@]}")"
echo "lint: $n_passed passed, $n_failed failed, $n_skipped skipped -- ${summary%; }"
((n_failed == 0))
