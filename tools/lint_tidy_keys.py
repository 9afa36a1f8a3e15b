# tools/lint_tidy_keys.py -- which translation units clang-tidy must check again (tools/lint.sh)
"""Prints "UNIT KEY" for each UNIT that has no clean check remembered under CACHE/KEY.

    python3 tools/lint_tidy_keys.py BUILD_DIR CACHE UNIT...

KEY hashes everything clang-tidy reads for the unit: its source, the headers the last build of
it included (ninja's deps log), its compile command, every .clang-tidy of the tree and the
clang-tidy version. A unit the build has not compiled yet has no deps: it prints "UNIT" alone
(always checked, never remembered).
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys


def file_digest(path: str, memo: dict[str, bytes]) -> bytes:
    if path not in memo:
        try:
            with open(path, "rb") as f:
                memo[path] = hashlib.sha256(f.read()).digest()
        except OSError:
            memo[path] = b"missing"
    return memo[path]


def deps_by_output(build_dir: str) -> dict[str, list[str]]:
    """ninja -t deps: object file -> the headers its last compile read."""
    text = subprocess.run(["ninja", "-C", build_dir, "-t", "deps"], capture_output=True,
                          text=True).stdout
    deps: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            current = line.split(":", 1)[0]
            deps[current] = []
        elif current is not None and line.strip():
            deps[current].append(line.strip())
    return deps


def object_of(entry: dict) -> str | None:
    """The object file a compile command writes ("output", or its -o argument: older CMake)."""
    if "output" in entry:
        return entry["output"]
    args = shlex.split(entry.get("command", "")) if "command" in entry else entry["arguments"]
    return args[args.index("-o") + 1] if "-o" in args[:-1] else None


def main() -> int:
    build_dir, cache, units = sys.argv[1], sys.argv[2], sys.argv[3:]
    root = os.getcwd()
    commands = {}
    for entry in json.load(open(os.path.join(build_dir, "compile_commands.json"))):
        path = os.path.relpath(os.path.join(entry["directory"], entry["file"]), root)
        commands.setdefault(path, entry)
    deps = deps_by_output(build_dir)
    memo: dict[str, bytes] = {}
    common = hashlib.sha256()
    common.update(subprocess.run(["clang-tidy", "--version"], capture_output=True).stdout)
    tidy_configs = subprocess.run(["git", "ls-files", "*.clang-tidy", ".clang-tidy"],
                                  capture_output=True, text=True).stdout.split()
    for config in sorted(tidy_configs):
        common.update(config.encode() + file_digest(config, memo))
    for unit in units:
        entry = commands.get(unit)
        output = object_of(entry) if entry else None
        headers = deps.get(output) if output else None
        if not headers:
            print(unit)
            continue
        key = common.copy()
        key.update(json.dumps(entry, sort_keys=True).encode())
        key.update(file_digest(unit, memo))
        for header in headers:
            path = header if os.path.isabs(header) else os.path.join(build_dir, header)
            key.update(header.encode() + file_digest(path, memo))
        digest = key.hexdigest()
        if not os.path.exists(os.path.join(cache, digest)):
            print(unit, digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
