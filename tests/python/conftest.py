# tests/python/conftest.py -- shared fixtures: goldens, and subprocesses that import this vramscope
#
# Run: `pytest tests/python` against an installed vramscope, or `PYTHONPATH=python pytest
# tests/python` from a checkout (the pure-Python parts need no build).
# Regenerate goldens: `VRAMSCOPE_UPDATE_GOLDENS=1 pytest tests/python`, then review the diff.
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import vramscope

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "python"


@pytest.fixture
def golden():
    """Compares text with tests/data/python/<name> (or rewrites it when updating goldens)."""

    def check(name: str, text: str) -> None:
        path = DATA / name
        if os.environ.get("VRAMSCOPE_UPDATE_GOLDENS") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"output differs from golden {path}"

    return check


def child_env(**extra: str) -> dict:
    """The environment of a child Python that imports the same vramscope as this test."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(vramscope.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.pop("VRAMSCOPE_RUN_QUIET", None)
    env.pop("VRAMSCOPE_RUN_INTERVAL_MS", None)
    env.update(extra)
    return env


def run_python(args, cwd=None, **env) -> subprocess.CompletedProcess:
    """Runs `python args...` with child_env(); captures text output."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=child_env(**env),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
