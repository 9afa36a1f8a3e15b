# tests/gpu/test_step_peaks.py -- per-step allocated peaks equal torch's, on models nobody here wrote
#
# The truth is a separate run of the same program that resets torch's peaks at each step start
# and reads them after synchronize() (peak_models.py truth); vramscope's run never touches
# torch's peaks. The two runs must have made the same allocations (counts and bytes per step),
# else the comparison would mean nothing. A third run resets torch's peaks itself while
# vramscope watches, as many training scripts do.
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import HERE, gpu_env

STEPS = 12


def run(model: str, mode: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, str(HERE / "peak_models.py"), model, mode,
                          "--steps", str(STEPS)],
                         env=gpu_env(**env), capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, f"{model} {mode} failed:\n{out.stdout}\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def same_allocations(a: dict, b: dict) -> None:
    """Each step after the first made as many allocations of as many bytes in both runs (the
    first differs: lazy initialisation, and torch.compile's on-disk caches warm after a run)."""
    def per_step(run: dict) -> list:
        rows = run["rows"]
        return [(y["allocations"] - x["allocations"], y["allocated_total"] - x["allocated_total"])
                for x, y in zip(rows, rows[1:])]

    for i, (x, y) in enumerate(zip(per_step(a), per_step(b)), start=1):
        assert x == y, f"step {i}: the two runs did not allocate alike; the comparison would be void"


MODELS = {
    "gpt2": {},
    "resnet50": {},
    "lightning": {},
    "gpt2_expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "resnet18_graphs": {},
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_step_peak_equals_torchs(model: str):
    env = MODELS[model]
    truth = run(model, "truth", **env)
    ours = run(model, "vramscope", **env)
    same_allocations(truth, ours)
    # Every step after the first (the first includes lazy initialisations that differ by run).
    expected = [r["torch_peak"] for r in truth["rows"]][1:]
    measured = [r["vramscope_peak"] for r in ours["rows"]][1:]
    assert measured == expected
    assert [r["vramscope_reserved_peak"] for r in ours["rows"]][1:] == [
        r["reserved_peak"] for r in truth["rows"]][1:]
    assert all(r["allocated"] == r["torch_allocated"] for r in ours["rows"])
    assert ours["mismatches"] == 0 and ours["unsettled"] == 0, ours


@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_the_profile_peak_equals_torchs(model: str):
    out = run(model, "profile")
    assert out["profile_peak"] == out["torch_peak"]


@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_a_program_resetting_torchs_peaks_sees_equal_step_peaks(model: str):
    both = run(model, "both")
    rows = both["rows"][1:]
    assert [r["vramscope_peak"] for r in rows] == [r["torch_peak"] for r in rows]
