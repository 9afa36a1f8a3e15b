# tests/python/predict/test_predict_search.py -- the probe search against synthetic steps
from __future__ import annotations

import pytest

from vramscope.predict.model import Probe
from vramscope.predict.search import ProbeOutOfMemory, round_down, search

from test_predict_model import GiB, MiB, step_peaks


def true_largest(budget: int, **kwargs) -> int:
    """The largest size whose reserved peak fits ``budget`` (what a run without margin allows)."""
    size = 1
    while step_peaks(size + 1, **kwargs).peak_reserved_bytes <= budget:
        size += 1
    return size


@pytest.mark.parametrize("fixed, per_sample, budget", [
    (2 * GiB, 48 * MiB, 20 * GiB),
    (10 * GiB, 300 * MiB, 80 * GiB),
    (512 * MiB, 3 * MiB, 6 * GiB),
])
def test_the_answer_is_below_the_truth_and_close_to_it(fixed, per_sample, budget):
    measured = []

    def measure(size: int) -> Probe:
        probe = step_peaks(size, fixed=fixed, per_sample=per_sample)
        # Never a probe the budget cannot hold (the search's promise: no OOM while searching).
        assert probe.peak_reserved_bytes <= budget
        measured.append(size)
        return probe

    result = search(measure, budget, margin=0.03)
    truth = true_largest(budget, fixed=fixed, per_sample=per_sample)
    assert 0.9 * truth <= result.size <= truth
    # Six probes to the answer, and the answer itself run before it is given (an HF Trainer's
    # 62 on an H100, extrapolated from 48, was one above the largest batch that ran).
    assert len(measured) <= 7
    assert result.size in measured, (result.size, measured)
    assert result.model is not None and result.prediction is not None
    assert result.margin_bytes >= 0
    assert "answer: batch_size" in result.describe()


def test_a_step_too_large_for_the_budget_is_not_run_twice():
    calls = []

    def measure(size: int) -> Probe:
        calls.append(size)
        return step_peaks(size, fixed=5 * GiB)

    result = search(measure, 4 * GiB)
    assert calls == [1]
    assert result.size == 0
    assert "needs more than the budget" in result.reason


def test_doubling_stops_when_one_point_cannot_promise_it():
    # batch 1 takes 60 % of the budget: batch 2 could need 120 %, so it is never run.
    calls = []

    def measure(size: int) -> Probe:
        calls.append(size)
        return Probe(size, int(0.6 * GiB) * size, int(0.6 * GiB) * size)

    result = search(measure, GiB, margin=0.0)
    assert calls == [1]
    assert result.size == 1


def test_limit_and_multiple():
    def measure(size: int) -> Probe:
        return step_peaks(size)

    assert search(measure, 20 * GiB, limit=100).size == 100
    answer = search(measure, 20 * GiB, multiple=8).size
    assert answer % 8 == 0 and answer > 0
    assert round_down(13, 8) == 8 and round_down(7, 8) == 0 and round_down(13, None) == 13


def test_a_quadratic_search_over_the_sequence_length():
    def measure(size: int) -> Probe:
        return step_peaks(size, fixed=GiB, per_sample=2 * MiB, per_sample2=MiB // 64)

    result = search(measure, 16 * GiB, start=64, quadratic=True, unit="token", what="seq_len")
    truth = true_largest(16 * GiB, fixed=GiB, per_sample=2 * MiB, per_sample2=MiB // 64)
    assert 0.9 * truth <= result.size <= truth
    assert result.model is not None and result.model.degree == 2


def test_bad_arguments():
    with pytest.raises(ValueError, match="margin"):
        search(step_peaks, GiB, margin=1.0)
    with pytest.raises(ValueError, match="first size"):
        search(step_peaks, GiB, start=0)


def test_a_probe_that_runs_out_of_memory_after_all_ends_at_the_largest_size_that_ran():
    from vramscope.predict.search import ProbeOutOfMemory

    def measure(size: int) -> Probe:
        if size > 2:  # another process took the memory meanwhile
            raise ProbeOutOfMemory(size, "CUDA out of memory")
        return step_peaks(size)

    result = search(measure, 20 * GiB)
    assert result.size == 2
    assert "ran out of memory" in result.reason and [p.size for p in result.probes] == [1, 2]


def test_a_fixed_peak_that_hides_the_per_sample_bytes_at_small_sizes_is_not_trusted():
    # Measured on an H200 (ResNet-50, AdamW, 5.9 GiB cap): at batch 1 and 2 the step's peak is
    # the optimizer's (600 MiB), the activations' share grows past it only later; a line through
    # 1 and 2 promised batch 3000. Peak = max(optimizer peak, fixed + per-sample * batch).
    budget = 6 * GiB

    def peaks(size: int) -> Probe:
        allocated = max(600 * MiB, 400 * MiB + 85 * MiB * size)
        return Probe(size, allocated, int(allocated * 1.06))

    def measure(size: int) -> Probe:
        probe = peaks(size)
        assert probe.peak_reserved_bytes <= budget, f"probe {size} would run out of memory"
        return probe

    result = search(measure, budget)
    truth = max(b for b in range(1, 200) if peaks(b).peak_reserved_bytes <= budget)
    assert 0.9 * truth <= result.size <= truth, result.describe()


def test_the_answer_never_exceeds_the_limit_and_a_limit_below_the_start_is_refused():
    for limit in (1, 2, 3, 5, 8, 13, 100):
        for budget in (GiB, 4 * GiB, 20 * GiB, 80 * GiB):
            result = search(step_peaks, budget, limit=limit)
            assert result.size <= limit, (limit, budget, result.describe())
    # Issue 45: with --limit 0 the answer was above the limit.
    with pytest.raises(ValueError, match="limit"):
        search(step_peaks, 20 * GiB, limit=0)
    with pytest.raises(ValueError, match="limit"):
        search(step_peaks, 20 * GiB, start=8, limit=4)


def test_the_answer_is_a_multiple_or_none_when_not_one_fits():
    for multiple in (1, 2, 3, 7, 8, 16, 64):
        for budget in (4 * GiB, 20 * GiB, 80 * GiB):
            result = search(step_peaks, budget, multiple=multiple)
            assert result.size % multiple == 0, (multiple, budget, result.size)
    # Issue 45: --multiple was ignored when the answer was smaller than it.
    def measure(size: int) -> Probe:
        return Probe(size, 10 * GiB * size, 10 * GiB * size)

    result = search(measure, 60 * GiB, margin=0.0, multiple=8)
    assert result.size == 0 and result.prediction is None
    assert result.reason.startswith("no multiple of 8 fits: batch_size 6 is the largest")
    for bad in (0, -1):
        with pytest.raises(ValueError, match="multiple"):
            search(measure, 60 * GiB, multiple=bad)


@pytest.mark.parametrize("peak, budget, multiple", [
    (40 * GiB, 60 * GiB, None),  # issue 45: batch 1 at 40 GiB of 60: "answer: none", JSON 1
    (70 * GiB, 60 * GiB, None),  # nothing fits
    (5 * GiB, 60 * GiB, 64),     # not one multiple fits
    (GiB, 60 * GiB, None),       # a model's answer
])
def test_text_and_json_say_the_same_answer(peak, budget, multiple):
    from vramscope.predict.cli import to_json

    def measure(size: int) -> Probe:
        return Probe(size, peak * size, peak * size)

    result = search(measure, budget, margin=0.05, multiple=multiple)
    text, answer = result.describe(), to_json(result)["answer"]
    if answer is None:
        assert result.size == 0 and "answer: none: " in text
    else:
        assert answer == result.size > 0 and "answer: none" not in text
        assert f"answer: batch_size {answer}: needs ≈" in text, text
        assert to_json(result)["prediction"]["reserved_bytes"] <= budget


def test_past_a_fixed_peaks_flat_the_answer_is_bounded_then_measured():
    # The probes of `vramscope fit` on an H100 (tests/gpu/fit_program.py, 2 GiB cap): 1, 2 and
    # 4 on AdamW's step (flat), 54 on the activations. The line through 4 and 54 is too
    # shallow for what grows; the answer is 54's peak grown in proportion (its resident bytes
    # kept), and then measured, which anchors the line. Beyond 54 this synthetic step grows
    # at 54's rate per sample from the resident bytes, 1.194x pinned.
    budget = 2147483647
    resident = 4 * 4 * 28787730
    rows = [(1, 647392768, 689963008, 648019968), (2, 647589376, 748683264, 648019968),
            (4, 647982592, 792723456, 650117120), (54, 1445854208, 1725956096, 1725956096)]
    known = [Probe(s, a, r, steps=3, peak_pinned_bytes=p, resident_bytes=resident)
             for s, a, r, p in rows]
    per_sample = (1445854208 - resident) / 54

    def need(size: int) -> int:
        return int((resident + per_sample * size) * 1.194)

    measured = []

    def measure(size: int) -> Probe:
        assert need(size) <= budget, f"probe {size} would run out of memory"
        measured.append(size)
        allocated = int(resident + per_sample * size)
        return Probe(size, allocated, need(size), steps=3, peak_pinned_bytes=need(size),
                     resident_bytes=resident)

    result = search(measure, budget, margin=0.01, known=known)
    truth = max(s for s in range(1, 200) if need(s) <= budget)
    assert truth - 8 <= result.size <= truth, result.describe()
    assert measured and max(measured) >= result.size, measured


def _workspace_step(size: int, past: int) -> Probe:
    """A step whose need jumps by 400 MiB past ``past`` (a library taking a larger workspace
    at larger inputs): a line through smaller probes cannot see it."""
    probe = step_peaks(size, fixed=979 * MiB, per_sample=77 * MiB, tensors=6)
    if size <= past:
        return probe
    return Probe(size, probe.peak_allocated_bytes + 400 * MiB,
                 probe.peak_reserved_bytes + 400 * MiB)


@pytest.mark.parametrize("past", [50, 60, 66])
@pytest.mark.parametrize("raises", [False, True], ids=["measured", "out_of_memory"])
def test_an_answer_above_every_probe_is_run_before_it_is_given(past, raises):
    # An HF Trainer on an H100: probes at 28 and 48, the answer 62 extrapolated from 48, and 62
    # ran out of memory in a fresh process (61 was the largest that ran). The answer is now
    # run first; where it needs more (or runs out), the search answers below it.
    budget, margin = int(5.9 * GiB), 0.01
    ran = []

    def measure(size: int) -> Probe:
        ran.append(size)
        probe = _workspace_step(size, past)
        if raises and probe.peak_reserved_bytes > budget:
            raise ProbeOutOfMemory(size)
        return probe

    result = search(measure, budget, margin=margin)
    fits = [s for s in range(1, 200)
            if _workspace_step(s, past).peak_reserved_bytes <= budget * (1 - margin)]
    truth = max(s for s in fits if s - 1 in fits or s == 1)
    assert truth - 8 <= result.size <= truth, (result.size, truth, ran, result.reason)
    # Measured at the answer or above it, never the line alone past every probe.
    assert any(s >= result.size for s in ran), ran
    unchecked = search(lambda size: _workspace_step(size, past), budget, margin=margin,
                       confirm=False)
    if past == 60:  # the jump lies between the last probe and the line's answer
        assert unchecked.size > truth, unchecked.size


@pytest.mark.parametrize("past", [60, 200], ids=["a_jump_past_the_probes", "a_line"])
def test_side_by_side_the_answer_runs_beside_its_shares(past):
    # The CLI's probes are processes, side by side when the card has room: the answer of
    # step 4 joins the shares' round rather than taking one of its own (each round costs a
    # probe process's time: 2x one probe is the goal). A probe there that runs out of memory
    # bounds the answer; it does not end the search at the largest size that ran.
    budget, margin = int(5.9 * GiB), 0.01
    rounds: list[list[int]] = []

    def one(size: int) -> Probe:
        probe = _workspace_step(size, past)
        if probe.peak_reserved_bytes > budget:
            raise ProbeOutOfMemory(size)
        return probe

    def measure(size: int) -> Probe:
        rounds.append([size])
        return one(size)

    def many(sizes):
        rounds.append(list(sizes))
        out = []
        for size in sizes:
            try:
                out.append(one(size))
            except ProbeOutOfMemory as oom:
                out.append(oom)
        return out

    result = search(measure, budget, margin=margin, measure_many=many)
    fits = [s for s in range(1, 200)
            if _workspace_step(s, past).peak_reserved_bytes <= budget * (1 - margin)]
    truth = max(s for s in fits if s - 1 in fits or s == 1)
    assert truth - 8 <= result.size <= truth, (result.size, truth, rounds, result.reason)
    assert any(s >= result.size for r in rounds for s in r), rounds
    if past == 200:
        # The first alone, its doublings, two rounds of shares, the last with the answer.
        assert len(rounds) <= 4, rounds
        assert any(len(r) >= 2 and result.size <= max(r) for r in rounds), rounds


def test_side_by_side_every_doubling_the_first_probe_shows_to_fit_runs_at_once():
    # GPT-2 under a 5.9 GiB cap on an H100: batch 1 peaks at 1.9 GiB, 1.5 GiB of it resident
    # (parameters, AdamW's state); 2, 4 and 8 all fit by that probe alone, and run in one round.
    budget = int(5.9 * GiB)
    resident, per_sample = int(1.5 * GiB), int(0.4 * GiB)
    rounds: list[list[int]] = []

    def one(size: int) -> Probe:
        peak = resident + per_sample * size
        return Probe(size, peak, peak, resident_bytes=resident)

    def measure(size: int) -> Probe:
        rounds.append([size])
        return one(size)

    def many(sizes):
        rounds.append(list(sizes))
        return [one(size) for size in sizes]

    result = search(measure, budget, margin=0.01, measure_many=many)
    assert rounds[:2] == [[1], [2, 4, 8]], rounds
    truth = int((budget * 0.99 - resident) // per_sample)
    assert truth - 1 <= result.size <= truth, (result.size, truth, rounds)
    # Without the room to run them side by side, one after another as before.
    rounds.clear()
    search(measure, budget, margin=0.01)
    assert all(len(r) == 1 for r in rounds) and rounds[:2] == [[1], [2]], rounds


@pytest.mark.parametrize("max_probes", range(3, 9))
@pytest.mark.parametrize("past", [40, 60, 200])
def test_whatever_the_probes_left_the_answer_is_measured_or_bounded(max_probes, past):
    # Never the line alone past every probe: the answer is a size measured to fit (or between
    # one that fits and one that needs more), or, far from the probes, what the largest one's
    # peak grown in proportion allows; and never above the truth.
    budget, margin = int(5.9 * GiB), 0.01
    ran: list[int] = []

    def measure(size: int) -> Probe:
        ran.append(size)
        return _workspace_step(size, past)

    result = search(measure, budget, margin=margin, max_probes=max_probes)
    fits = [s for s in range(1, 400)
            if _workspace_step(s, past).peak_reserved_bytes <= budget * (1 - margin)]
    truth = max(s for s in fits if s - 1 in fits or s == 1)
    assert len(ran) <= max_probes, ran
    assert result.size <= truth, (result.size, truth, ran, result.reason)
    measured = any(s >= result.size for s in ran)
    assert measured or "far from the probes" in result.reason, (result.size, ran, result.reason)
