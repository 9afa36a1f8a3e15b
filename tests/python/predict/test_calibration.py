# tests/python/predict/test_calibration.py -- the memory model against five real models' truth
"""The allocator traces of tests/data/fit-calibration (H200, torch 2.11) at batch 1-16 and the
true largest batch of each model under its cap, found by bisection in fresh processes. The
model's answer from those five probes, rounded down to a multiple of 8 as the truth was
searched, must be the truth or one multiple of 8 below it: never above (it would run out of
memory), never further below. So with both measures of what must fit under a cap: the
replay's pinned peak, and the need of the allocator simulated under a cap, which
vramscope.predict.window feeds the model."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tarfile

import pytest

from vramscope.predict.model import Probe, fit_model
from vramscope.predict.pinned import pinned_peak
from vramscope.predict.search import round_down

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "fit-calibration"
#: The largest multiple of 8 that ran under the cap (README.md there).
TRUTH = {"gpt2": 16, "t5": 32, "effnet": 128, "swin": 136, "r18": 176}
BATCHES = (1, 2, 4, 8, 16)
GiB = 1 << 30


def _traces(name: str) -> dict[int, dict]:
    with tarfile.open(DATA / f"calib-{name}.tgz") as tar:
        return {b: json.load(tar.extractfile(f"calib-{name}-{b}.json")) for b in BATCHES}


def _probes(trace: dict) -> tuple[Probe, Probe]:
    """Two probes from one batch's trace: torch's own peaks over the three steps, with the
    pinned peak replayed from the events, and with the simulated need under a cap. The history
    starts after the parameters were allocated: what torch counts at the end and the events
    do not is outside the window."""
    steps = trace["steps"]
    replay = pinned_peak([], trace["events"])
    outside = int(steps[-1]["allocated_bytes.all.current"]) - replay.final_allocated_bytes
    assert outside >= trace["params_bytes"]  # the parameters, at least, predate the history
    peaks = pinned_peak([], trace["events"], outside_bytes=outside)
    allocated = max(int(s["allocated_bytes.all.peak"]) for s in steps)
    # The replay sees what torch saw (the optimizer state and gradients are in the window),
    # within the few MiB that torch's counters and its history order differently (at most
    # 17 MiB of 0.6-15 GiB here).
    assert abs(peaks.allocated_bytes - allocated) <= 0.03 * allocated
    probe = Probe(trace["batch"], allocated, max(int(s["reserved_bytes.all.peak"]) for s in steps),
                  steps=len(steps), peak_pinned_bytes=peaks.pinned_bytes)
    return probe, dataclasses.replace(probe, peak_pinned_bytes=peaks.capped_bytes)


@pytest.fixture(scope="module")
def both() -> dict[str, list[tuple[Probe, Probe]]]:
    return {name: [_probes(t) for t in _traces(name).values()] for name in TRUTH}


@pytest.fixture(scope="module")
def probes(both) -> dict[str, list[Probe]]:
    """The probes with the replay's pinned peak."""
    return {name: [replayed for replayed, _ in rows] for name, rows in both.items()}


@pytest.fixture(scope="module")
def capped(both) -> dict[str, list[Probe]]:
    """The probes with the simulated need, as vramscope.predict.window measures them."""
    return {name: [simulated for _, simulated in rows] for name, rows in both.items()}


def _answer(probes: list[Probe], cap_bytes: int, **kwargs) -> int:
    model = fit_model(probes, **kwargs)
    assert model is not None
    return round_down(model.largest_fitting(cap_bytes, margin_fraction=0.0), 8)


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_the_answer_is_the_truth_or_one_multiple_of_8_below(name, probes):
    cap = _traces(name)[1]["cap_gib"] * GiB
    answer = _answer(probes[name], cap)
    assert TRUTH[name] - 8 <= answer <= TRUTH[name], (name, answer)


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_with_the_simulated_need_the_answer_is_the_truth_or_one_multiple_of_8_below(name, capped):
    # Answers (replay's -> simulation's allowance): gpt2 16 (1.053 -> 1.058), t5 32 (1.015 ->
    # 1.015), effnet 120 -> 128 (1.054 -> 1.037), swin 136 (1.082 -> 1.073), r18 168 (1.094 ->
    # 1.086).
    cap = _traces(name)[1]["cap_gib"] * GiB
    answer = _answer(capped[name], cap)
    assert TRUTH[name] - 8 <= answer <= TRUTH[name], (name, answer)


def test_the_simulated_need_lies_between_allocated_and_the_replay(probes, capped):
    # The replay is no bound of the simulation. The simulation does not know the segments
    # older than the window (the parameters'), where the real run kept 6-44 MiB of the
    # window's blocks at a time: it gives them segments of their own. And under a cap what the
    # unpressured run served from a cached segment gets new ones, which can take more (a
    # 1-10 MiB request gets 20 MiB). Measured: at most 5.4 % of the allocated peak above the
    # replay (r18 at batch 2: 13 MiB; 0.7 MiB with the parameters' segments rebuilt offline
    # from the model's parameter sizes, while t5's 22 MiB at batch 2 stays 21).
    for name in TRUTH:
        for replayed, simulated in zip(probes[name], capped[name]):
            slack = 0.06 * replayed.peak_allocated_bytes
            assert replayed.peak_allocated_bytes <= simulated.peak_pinned_bytes \
                <= replayed.peak_pinned_bytes + slack, (name, replayed, simulated)


def test_the_pinned_peak_lies_between_allocated_and_reserved(probes):
    # Above reserved only by what the replay guesses of the segments older than the window
    # (their blocks at their own bytes, at other moments than torch's reserved peak).
    for name, rows in probes.items():
        for p in rows:
            slack = 1 << 20
            assert p.peak_allocated_bytes <= p.peak_pinned_bytes <= p.peak_reserved_bytes + slack, \
                (name, p)


def test_neither_bare_peak_would_do(probes):
    # Why the allowance is measured: the allocated peak alone promises a batch that ran out
    # of memory, the reserved peak without pressure answers further below than one multiple.
    above = below = 0
    for name, rows in probes.items():
        cap = _traces(name)[1]["cap_gib"] * GiB
        bare = [Probe(p.size, p.peak_allocated_bytes, p.peak_allocated_bytes, p.steps,
                      peak_pinned_bytes=p.peak_allocated_bytes) for p in rows]
        above += _answer(bare, cap) > TRUTH[name]
        below += _answer(rows, cap, retries=False) < TRUTH[name] - 8
    assert above >= 1 and below >= 1, (above, below)


def test_a_probe_on_the_optimizers_flat_does_not_lower_the_allowance():
    # `vramscope fit`'s probes of tests/gpu/fit_program.py on an H100 (torch 2.11, 2 GiB cap,
    # the CLI's JSON): at 1, 2 and 4 the peak is AdamW's step (flat, pinned = allocated), at
    # 54 the activations' (pinned 1.19x). Bisection in fresh processes found 79 the largest
    # batch that ran. Averaging 4's ratio with 54's, and a line through 4 and 54, answered 83,
    # above it. What a probe holds at its end: the program's 28,787,730 float32 parameters,
    # their gradients and AdamW's two moments.
    rows = [(1, 647392768, 689963008, 648019968), (2, 647589376, 748683264, 648019968),
            (4, 647982592, 792723456, 650117120), (54, 1445854208, 1725956096, 1725956096)]
    resident = 4 * 4 * 28787730
    model = fit_model([Probe(s, a, r, steps=3, peak_pinned_bytes=p, resident_bytes=resident)
                       for s, a, r, p in rows])
    assert model is not None and not model.anchored
    answer = model.largest_fitting(2147483647, margin_fraction=0.01)
    assert 79 - 8 <= answer <= 79, (answer, model.allowance)
    assert "54's peak grown in proportion" in model.predict(answer).basis


@pytest.mark.parametrize("name", ["t5", "swin"])
def test_every_cap_above_the_simulated_need_passes(name):
    # The simulation is not monotone in the cap (a larger cap keeps other segments and may
    # fragment worse): in these two windows a bisection alone answered below a cap that fails.
    from vramscope.predict import capped

    events = _traces(name)[16]["events"]
    need = capped.capped_need([], events)
    plan, _ = capped._plan([], events)
    step = 2 << 20
    caps = range(need.need_bytes, need.reserved_bytes + step, step)
    assert [c for c in caps if capped._simulate(plan, c) is None] == []
