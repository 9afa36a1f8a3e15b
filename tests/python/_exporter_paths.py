# tests/python/_exporter_paths.py -- where the exporter tests find the built binaries and data
#
# VRAMSCOPE_CLI names the vramscope binary and VRAMSCOPE_BUILD_DIR the C++ build folder (tools/test.sh
# sets both); without them the dev build folder of this checkout is used.
from __future__ import annotations

import os
import pathlib
import re
import select
import shutil
import socket
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("VRAMSCOPE_BUILD_DIR", ROOT / "build" / "dev"))


def cli_binary() -> pathlib.Path | None:
    path = pathlib.Path(os.environ.get("VRAMSCOPE_CLI", build_dir() / "cli" / "vramscope"))
    return path if path.is_file() else None


def fixture_binary() -> pathlib.Path | None:
    path = build_dir() / "tests" / "cpp" / "exporters_fixture"
    return path if path.is_file() else None


def nvml_double() -> pathlib.Path | None:
    found = sorted(build_dir().glob("**/libvramscope_nvml_double.so"))
    return found[0] if found else None


def double_env(script: str, shm_dir: pathlib.Path) -> dict:
    """Environment that makes vramscope sample the NVML test double running `script`."""
    env = dict(os.environ)
    env["VRAMSCOPE_NVML_LIBRARY"] = str(nvml_double())
    env["VRAMSCOPE_NVML_DOUBLE_SCRIPT"] = str(DATA / "nvml" / script)
    env["VRAMSCOPE_SHM_DIR"] = str(shm_dir)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_line_matching(proc: subprocess.Popen, stream, pattern: str, timeout_s: float = 30.0) -> re.Match:
    """Reads lines of `stream` until one matches `pattern`; fails when the process ends first or
    the deadline passes (bounded: never waits forever)."""
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match
    proc.kill()
    raise AssertionError(f"no line matching {pattern!r}; output so far: {''.join(seen)!r}")


def stop(proc: subprocess.Popen) -> int:
    """SIGTERM, then wait (bounded); returns the exit status."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("process did not stop within 15 s of SIGTERM") from None


def which(name: str) -> str | None:
    return shutil.which(name)
