# tests/wheel/torch_venvs.py -- cached venvs of PyPI's torch releases, for test_torch_matrix.py
#
# ~/.cache/vramscope/torch-venv/<version>-py<X.Y>: created once with `pip install torch==<version>`
# (torch and its CUDA wheels, ~2.5 GB: a minute or two each, mostly download and unpacking) and
# kept. tools/test.sh creates them in the background while the C++ builds run:
#
#   python tests/wheel/torch_venvs.py          # every torch of TORCHES but the interpreter's own
#   python tests/wheel/torch_venvs.py 2.9.1    # these
#
# A lock per venv lets the test and that background run ask for the same one at once: the
# second waits for the first and then finds the venv done.
from __future__ import annotations

import fcntl
import pathlib
import shutil
import subprocess
import sys

CACHE = pathlib.Path.home() / ".cache" / "vramscope"
#: The torches test_torch_matrix.py runs the wheel under: the oldest it serves, the GPU
#: machine's and the newest.
TORCHES = ("2.8.0", "2.11.0", "2.15.0")


def torch_venv(version: str) -> pathlib.Path:
    """A cached venv of this interpreter's version with torch ``version`` from PyPI."""
    tag = f"py{sys.version_info[0]}.{sys.version_info[1]}"
    root = CACHE / "torch-venv"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"{version}-{tag}"
    done = venv / ".vramscope-done"
    with open(root / f".{version}-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            links = ["--find-links", str(CACHE / "torch-wheels")]
            subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *links,
                            f"torch=={version}"], check=True, timeout=1800)
            done.touch()
    return venv


def installed_torch() -> str | None:
    """This interpreter's torch release ("2.11.0"), read without importing torch; None without."""
    from importlib import metadata

    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def main(argv: list[str]) -> int:
    if any(a.startswith("-") for a in argv):
        print("usage: torch_venvs.py [VERSION...]   (default: TORCHES but this interpreter's "
              "torch)", file=sys.stderr)
        return 2
    for version in argv or [v for v in TORCHES if v != installed_torch()]:
        print(f"torch {version}: {torch_venv(version)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
