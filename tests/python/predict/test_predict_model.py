# tests/python/predict/test_predict_model.py -- the memory model against size, from synthetic peaks
from __future__ import annotations

import pytest

from vramscope.predict.model import Probe, block_bytes, fit_model, segment_bytes

MiB = 1 << 20
GiB = 1 << 30


def step_peaks(size: int, fixed: int = 2 * GiB, per_sample: int = 48 * MiB, per_sample2: int = 0,
               tensors: int = 12) -> Probe:
    """A synthetic step in a fresh cache: ``fixed`` bytes in 64 MiB tensors, then ``tensors``
    activations of equal size summing to per_sample * size (+ per_sample2 * size²), every block
    in a segment of its own as the allocator creates them (no reuse)."""
    blocks = [64 * MiB] * (fixed // (64 * MiB))
    activ = per_sample * size + per_sample2 * size * size
    blocks += [activ // tensors] * tensors
    return Probe(size, sum(block_bytes(b) for b in blocks), sum(segment_bytes(b) for b in blocks))


def test_allocator_rounding_follows_the_caching_allocator():
    assert block_bytes(1) == 512
    assert block_bytes(513) == 1024
    assert segment_bytes(4096) == 2 * MiB  # small pool
    assert segment_bytes(MiB + 1) == 20 * MiB  # large pool, shared 20 MiB segments
    assert segment_bytes(10 * MiB) == 10 * MiB
    assert segment_bytes(10 * MiB + 1) == 12 * MiB  # its own segment, rounded to 2 MiB


def test_a_linear_step_is_fitted_exactly():
    model = fit_model([step_peaks(b) for b in (1, 2, 8, 16)])
    assert model is not None
    assert abs(model.fixed_bytes - 2 * GiB) <= 4096
    assert abs(model.bytes_per_unit - 48 * MiB) <= 4096
    truth = step_peaks(64)
    prediction = model.predict(64)
    # Never below the truth: the stated need covers the reserved peak of the larger step.
    assert prediction.need_bytes >= truth.peak_reserved_bytes
    assert prediction.allocated_bytes >= truth.peak_allocated_bytes
    assert prediction.lower_bound_bytes <= truth.peak_allocated_bytes
    assert "extrapolated from 16" in prediction.basis


def test_the_lower_bound_is_below_the_truth_and_above_what_was_measured():
    probes = [step_peaks(b) for b in (2, 4, 8)]
    model = fit_model(probes)
    assert model is not None
    for size in (8, 9, 30, 100):
        truth = step_peaks(size).peak_allocated_bytes
        assert model.lower_bound(size) <= truth
    assert model.lower_bound(100) > probes[-1].peak_allocated_bytes


def test_memory_that_grows_faster_per_sample_is_followed_by_the_local_line():
    # A convex step (a quadratic term the linear model does not have): the line through the
    # two largest probes is steeper than the least-squares line, and the prediction uses it.
    probes = [step_peaks(b, per_sample2=MiB) for b in (1, 2, 16, 32)]
    model = fit_model(probes)
    assert model is not None
    (x0, y0), (x1, y1) = [(p.size, p.peak_allocated_bytes) for p in probes[-2:]]
    local = y1 + (y1 - y0) * (40 - x1) // (x1 - x0)
    least_squares = model.fixed_bytes + model.bytes_per_unit * 40
    assert model.predict(40).allocated_bytes >= local > least_squares
    # Close beyond the probes, the chord's slope (not the average one) bounds the step.
    assert model.predict(33).need_bytes >= step_peaks(33, per_sample2=MiB).peak_reserved_bytes


def test_a_quadratic_sequence_length_needs_three_sizes():
    probes = [step_peaks(s, fixed=GiB, per_sample=2 * MiB, per_sample2=MiB // 64) for s in (128, 256)]
    assert fit_model(probes, quadratic=True, unit="token") is None
    probes.append(step_peaks(512, fixed=GiB, per_sample=2 * MiB, per_sample2=MiB // 64))
    model = fit_model(probes, quadratic=True, unit="token")
    assert model is not None and model.degree == 2
    assert abs(model.bytes_per_unit2 - MiB // 64) <= MiB // 64 // 50
    truth = step_peaks(1024, fixed=GiB, per_sample=2 * MiB, per_sample2=MiB // 64)
    assert model.predict(1024).need_bytes >= truth.peak_reserved_bytes
    assert "per token²" in model.describe()


def test_largest_fitting_is_the_boundary_of_the_need():
    model = fit_model([step_peaks(b) for b in (1, 2, 16, 32)])
    assert model is not None
    budget = 8 * GiB
    best = model.largest_fitting(budget, 0.05)
    assert model.predict(best).need_bytes <= budget * 0.95 < model.predict(best + 1).need_bytes
    assert model.largest_fitting(budget, 0.05, limit=10) == 10
    assert model.largest_fitting(GiB, 0.05) == 0


def test_one_size_or_a_bad_probe_gives_no_model():
    assert fit_model([step_peaks(4), step_peaks(4)]) is None
    with pytest.raises(ValueError, match="positive"):
        fit_model([Probe(0, 1, 1), Probe(1, 2, 2)])


def test_the_cache_overhead_is_that_of_the_largest_probe():
    probes = [Probe(1, 100 * MiB, 120 * MiB), Probe(4, 400 * MiB, 440 * MiB)]
    model = fit_model(probes)
    assert model is not None
    assert model.cache_overhead_bytes == 40 * MiB
    assert model.cache_ratio == pytest.approx(1.1)
    assert model.predict(8).reserved_bytes >= 800 * MiB + 40 * MiB
