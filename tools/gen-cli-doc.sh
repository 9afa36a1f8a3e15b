#!/usr/bin/env bash
# tools/gen-cli-doc.sh -- regenerate the per-command sections of docs/cli.md from `--help`.
#   tools/gen-cli-doc.sh PATH/TO/vramscope
set -euo pipefail
cli="${1:?usage: gen-cli-doc.sh PATH/TO/vramscope}"
doc="$(dirname "${BASH_SOURCE[0]}")/../docs/cli.md"
head="$(sed '/^## `vramscope`$/,$d' "$doc")"
{
  printf '%s\n\n' "$head"   # $(...) dropped the blank line before the first section
  for c in "" watch record show diff report top run fit export exporter; do
    printf '## `vramscope%s`\n\n```text\n' "${c:+ $c}"
    COLUMNS=100 "$cli" $c --help 2>&1
    printf '```\n\n'
  done
} > "$doc.new"
mv "$doc.new" "$doc"
