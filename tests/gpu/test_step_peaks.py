# tests/gpu/test_step_peaks.py -- per-step allocated peaks equal torch's on models nobody here wrote
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

from conftest import HERE, gpu_env, wait_for_idle_card

STEPS = 12


def run(model: str, mode: str, **env: str) -> dict:
    wait_for_idle_card()
    out = subprocess.run([sys.executable, str(HERE / "peak_models.py"), model, mode,
                          "--steps", str(STEPS)],
                         env=gpu_env(**env), capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, f"{model} {mode} failed:\n{out.stdout}\n{out.stderr[-4000:]}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if "rows" in result:
        assert result["alloc_retries"] == 0 and result["ooms"] == 0, (
            f"{model} {mode}: {result['alloc_retries']} cudaMalloc retries, {result['ooms']} OOMs "
            f"({result['free_at_start']} of {result['total']} bytes free at its start): the card "
            "was short of memory, so this run's blocks are not comparable with another run's")
    return result


def steps_apart(ours: list, truth: list) -> str:
    """The steps (after the first) where two per-step lists differ, for a failure message."""
    return "; ".join(f"step {i}: {a} against {b} ({a - b:+d})"
                     for i, (a, b) in enumerate(zip(ours, truth)) if i > 0 and a != b)


def per_step(run: dict, key: str) -> list:
    rows = run["rows"]
    return [(y["allocations"] - x["allocations"], y[key] - x[key]) for x, y in zip(rows, rows[1:])]


def same(a: dict, b: dict, key: str) -> None:
    """Each step after the first made as many allocations of as many bytes (`key`: the requests,
    or the blocks they got) in both runs. The first step differs: lazy initialisation, and
    torch.compile's on-disk caches are warm after the first run."""
    for i, (x, y) in enumerate(zip(per_step(a, key), per_step(b, key)), start=1):
        assert x == y, (f"step {i}: the runs did not allocate alike ({key}: allocations, bytes "
                        f"{x} against {y}); a comparison is void")


MODELS = {
    "gpt2": {},
    "resnet50": {},
    "lightning": {},
    "gpt2_expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
}
#: The allocator's variants (expandable segments here, CUDA graphs' private pools below) and the
#: Lightning program (its step peaks are checked in-process by test_integrations_gpu.py's
#: Lightning test in the main group too) run in the slow group: the main group fits one
#: 10-minute GPU run (each case is three processes, about a minute on an H100).
VARIANTS = {"gpt2_expandable", "lightning"}


@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.slow) if m in VARIANTS
                                   else m for m in sorted(MODELS)])
def test_every_step_peak_equals_torchs(model: str):
    env = MODELS[model]
    # The truth: the same program, vramscope attached too (so that both processes are alike
    # but for the resets), resetting torch's peaks at each step start.
    truth = run(model, "both", **env)
    ours = run(model, "vramscope", **env)
    # And without vramscope at all: the program made the same requests, so vramscope's
    # presence does not change what it allocates.
    plain = run(model, "truth", **env)
    same(plain, ours, "requested_total")
    same(truth, ours, "allocated_total")
    # Every step after the first (the first includes lazy initialisations that differ by run).
    peaks = [r["vramscope_peak"] for r in ours["rows"]]
    torch_peaks = [r["torch_peak"] for r in truth["rows"]]
    assert peaks[1:] == torch_peaks[1:], "allocated step peaks, vramscope against torch: " + (
        steps_apart(peaks, torch_peaks))
    reserved = [r["vramscope_reserved_peak"] for r in ours["rows"]]
    torch_reserved = [r["reserved_peak"] for r in truth["rows"]]
    assert reserved[1:] == torch_reserved[1:], "reserved step peaks: " + (
        steps_apart(reserved, torch_reserved))
    assert all(r["allocated"] == r["torch_allocated"] for r in ours["rows"]), ours["rows"]
    assert ours["mismatches"] == 0 and ours["unsettled"] == 0, ours
    # In the run that resets torch's peaks itself, vramscope's step peaks are torch's too.
    in_run = [r["vramscope_peak"] for r in truth["rows"]]
    assert in_run[1:] == torch_peaks[1:], "in the resetting run: " + (
        steps_apart(in_run, torch_peaks))


@pytest.mark.slow
def test_cuda_graphs_step_peaks_equal_torchs():
    # torch.compile(mode="reduce-overhead"): CUDA graphs in private pools. Two processes make the
    # same requests here but not always the same blocks (measured on the H200: 293 allocations
    # in step 1 in both, 195 KiB apart in block bytes), so the truth is in-process: the run that
    # resets torch's peaks at each step, where vramscope's step peaks must equal torch's.
    truth = run("resnet18_graphs", "both")
    plain = run("resnet18_graphs", "truth")
    same(plain, truth, "requested_total")
    rows = truth["rows"][1:]
    assert [r["vramscope_peak"] for r in rows] == [r["torch_peak"] for r in rows]
    assert [r["vramscope_reserved_peak"] for r in rows] == [r["reserved_peak"] for r in rows]
    assert all(r["allocated"] == r["torch_allocated"] for r in truth["rows"])
    assert truth["mismatches"] == 0 and truth["unsettled"] == 0, truth


@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_the_profile_peak_equals_torchs(model: str):
    out = run(model, "profile")
    assert out["profile_peak"] == out["torch_peak"]
