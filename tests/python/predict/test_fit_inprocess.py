# tests/python/predict/test_fit_inprocess.py -- vramscope.fit on a host model over a synthetic allocator
"""``vramscope.fit`` runs real training steps of a small model on the host; a synthetic
allocator stands for the GPU's: each window's peaks follow a step whose memory is known
(allocated = fixed + bytes per sample; reserved far above it, as a cache without pressure
keeps; what must fit under a cap a few per cent above allocated), and a size whose need passes
the cap runs out of memory as the real allocator would. The true largest batch is computed here
from those numbers alone."""

from __future__ import annotations

import math
import multiprocessing
import os
import socket

import pytest
import torch

from vramscope.predict.budget import DeviceMemory
from vramscope.predict.fit import fit
from vramscope.predict.model import Probe
from vramscope.predict.search import DEFAULT_MARGIN, ProbeOutOfMemory

GiB = 1 << 30
FIXED = 3 * GiB
PER_SAMPLE = GiB // 16
#: Reserved over allocated without pressure, and what must fit over allocated.
CACHE = 1.3
ALLOWANCE = 1.04


class SyntheticDevice:
    """fit's device: real steps, synthetic peaks, a real OOM past the cap."""

    def __init__(self, cap_bytes: int, total_bytes: int = 80 * GiB) -> None:
        self.cap = cap_bytes
        self.total = total_bytes
        self.sizes: list[int] = []

    def memory(self) -> DeviceMemory:
        return DeviceMemory(self.total, self.total - GiB, 0, self.cap / self.total)

    def need(self, size: int) -> int:
        return int((FIXED + size * PER_SAMPLE) * ALLOWANCE)

    def window(self, call, steps: int = 1):
        def measure(size: int):
            self.sizes.append(size)
            if self.need(size) > self.cap:
                raise ProbeOutOfMemory(size, "the synthetic allocator's cap")
            for _ in range(steps):
                call(size)
            allocated = FIXED + size * PER_SAMPLE
            probe = Probe(size, allocated, int(allocated * CACHE), steps,
                          peak_pinned_bytes=int(allocated * ALLOWANCE), resident_bytes=FIXED)
            return probe, FIXED
        return measure

    def free(self) -> None:
        pass


def _training(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)

    def step(batch_size: int) -> None:
        x = torch.randn(batch_size, 8)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, step


def _truth(cap: int, margin: float) -> int:
    """The largest batch whose need fits the cap with ``margin`` kept free."""
    return math.floor((cap * (1 - margin) / ALLOWANCE - FIXED) / PER_SAMPLE)


@pytest.mark.parametrize("cap_gib", [6, 12, 40])
def test_the_answer_is_below_the_truth_within_a_tenth_and_no_probe_runs_out(cap_gib):
    model, opt, step = _training()
    device = SyntheticDevice(cap_gib * GiB)
    result = fit(step, "cap", on=device)
    truth = _truth(cap_gib * GiB, DEFAULT_MARGIN)
    assert 0.9 * truth <= result.size <= truth, (result.size, truth, result.describe())
    assert all(device.need(s) <= device.cap for s in device.sizes)
    # The reserved peaks (30 % above allocated) would have answered far lower.
    reserved_answer = math.floor((cap_gib * GiB * (1 - DEFAULT_MARGIN) / CACHE - FIXED)
                                 / PER_SAMPLE)
    assert result.size > reserved_answer


def test_restore_loads_the_state_back_after_the_probes_changed_it():
    model, opt, step = _training()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fit(step, "cap", on=SyntheticDevice(12 * GiB), restore=(model, opt))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not opt.state  # SGD's momentum buffers: none before, none after
    # Without restore the probes' steps are real: the weights moved.
    model2, opt2, step2 = _training()
    first = {k: v.clone() for k, v in model2.state_dict().items()}
    fit(step2, "cap", on=SyntheticDevice(12 * GiB))
    assert not all(torch.equal(first[k], v) for k, v in model2.state_dict().items())


def test_a_probe_that_runs_out_after_all_answers_below_it():
    # The synthetic allocator's cap is lower than the budget fit was given: a probe the model
    # said fits runs out of memory, and the answer is the largest size that ran.
    model, opt, step = _training()
    device = SyntheticDevice(6 * GiB, total_bytes=80 * GiB)
    device.memory = lambda: DeviceMemory(80 * GiB, 79 * GiB, 0, 12 / 80)  # a 12 GiB "cap"
    result = fit(step, "cap", on=device)
    assert result.size > 0 and device.need(result.size) <= device.cap
    assert "ran out of memory" in result.reason


def _rank(rank: int, port: int, cap_gib: int, out) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        _, _, step = _training(rank)
        out.put((rank, fit(step, "cap", on=SyntheticDevice(cap_gib * GiB)).size))
    finally:
        dist.destroy_process_group()


def test_under_ddp_every_rank_takes_the_smallest_answer():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ranks = [ctx.Process(target=_rank, args=(r, port, cap, out)) for r, cap in ((0, 6), (1, 12))]
    for p in ranks:
        p.start()
    answers = dict(out.get(timeout=120) for _ in ranks)
    for p in ranks:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert answers[0] == answers[1] <= _truth(6 * GiB, DEFAULT_MARGIN)
