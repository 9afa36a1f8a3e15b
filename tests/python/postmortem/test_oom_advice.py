# tests/python/postmortem/test_oom_advice.py -- the OOM's numbers and remedies on synthetic evidence
from __future__ import annotations

import json

import pytest

from vramscope.postmortem import advice as _oom_advice
from vramscope.postmortem import oom
from vramscope.postmortem import remedies as _oom_remedies
from vramscope.postmortem import report as _oom_report
from vramscope.postmortem.advice import OomEvidence, StepPoint

GiB = 1 << 30
MiB = 1 << 20
TOTAL = int(139.8 * GiB)  # an H200 as torch sees it
CONTEXT = 700 * MiB  # a CUDA context and its libraries
#: The parts of CONTEXT at the agent's last settled pairing (docs/agent-api.md).
PARTS = {"paired_ns": 1, "driver_bytes": 11 * GiB + 600 * MiB + CONTEXT,
         "reserved_bytes": 11 * GiB + 600 * MiB, "private_pool_bytes": 0, "nccl_bytes": None,
         "other_bytes": 182 * MiB, "context_bytes": CONTEXT - 182 * MiB,
         "first_context_bytes": CONTEXT - 182 * MiB, "non_pytorch_bytes": CONTEXT,
         "excess_bytes": 0, "nccl_version": 0, "unsettled_count": 0}


def card(allocated: int, cached_free: int, largest: int, requested: int, others: int = 0,
         limit=None, **fields) -> OomEvidence:
    """Evidence of one process on a card: the driver's free is what the process (reserved +
    context) and ``others`` leave; NVML charges the process reserved + context."""
    reserved = allocated + cached_free
    return OomEvidence(device=0, requested_bytes=requested, device_total_bytes=TOTAL,
                       device_free_bytes=TOTAL - reserved - CONTEXT - others,
                       allocated_bytes=allocated, reserved_bytes=reserved,
                       cached_free_bytes=cached_free, largest_free_block_bytes=largest,
                       limit_bytes=limit, process_driver_bytes=reserved + CONTEXT, **fields)


def kinds(advice):
    return [a.kind for a in advice]


def not_advised(e: OomEvidence):
    return dict(_oom_remedies.assess(e).not_advised)


def doubling_steps(peaks_gib, first_batch=8):
    return [StepPoint(i + 1, int(p * GiB), GiB, batch_size=first_batch << i,
                      peak_reserved_bytes=int(p * GiB * 1.02)) for i, p in enumerate(peaks_gib)]


def test_the_card_running_out_advises_the_batch_that_fits_not_expandable_segments():
    # The GPT-2: peaks 8.3 ... 125.5 GiB at batch 8 ... 128, then batch 256 asks for
    # 49.1 GiB with 5.8 GiB cached free (largest 3.4 GiB).
    e = card(allocated=87 * GiB, cached_free=int(5.8 * GiB), largest=int(3.4 * GiB),
             requested=int(49.1 * GiB), batch_size=256,
             steps=doubling_steps([8.3, 16.1, 31.8, 63.0, 125.5]))
    assert e.available_bytes < e.requested_bytes <= e.available_bytes + e.cached_free_bytes + \
        e.available_bytes  # the request alone would squeeze into the cache's pieces ...
    a = _oom_remedies.assess(e)
    assert a.projected_peak_bytes > 240 * GiB  # ... but the step needs twice batch 128's peak
    assert a.need_bytes == a.projected_peak_bytes - e.budget_bytes
    first = a.advice[0]
    assert first.kind == "batch_size" and first.fits
    # The truth, from the steps alone: the reserved peaks (2 % over allocated) lie on a line
    # through batch 64 and 128; the largest multiple of 8 whose reserved peak by that line fits
    # the budget with the search's 1 % kept free.
    slope = (125.5 - 63.0) * 1.02 * GiB / 64
    reserved = [int(125.5 * 1.02 * GiB + slope * (b - 128)) for b in range(0, 256, 8)]
    usable = e.budget_bytes * (1 - _oom_remedies.MEASURED_MARGIN)
    truth = max(b for b, r in zip(range(0, 256, 8), reserved) if r <= usable)
    assert 128 < truth < 256
    assert first.params["batch_size"] in (truth, truth - 8), (first.params, truth)


def test_the_suggested_batch_keeps_the_margin_against_the_fit():
    # 1 GiB per sample over 10 GiB fixed at batch 8, 16, 32 (reserved = allocated): batch 64
    # fails on a 64.5 GiB card. The truth: the largest multiple of 8 whose peak fits the budget
    # with 1 % kept free.
    steps = [StepPoint(i, 10 * GiB + b * GiB, 10 * GiB, batch_size=b)
             for i, b in enumerate((8, 16, 32))]
    e = OomEvidence(device=0, requested_bytes=8 * GiB, device_total_bytes=64 * GiB + 512 * MiB,
                    device_free_bytes=2 * GiB, allocated_bytes=60 * GiB,
                    reserved_bytes=62 * GiB, batch_size=64, steps=steps)
    first = _oom_remedies.rank_advice(e)[0]
    usable = e.budget_bytes * (1 - _oom_remedies.MEASURED_MARGIN)
    truth = int((usable - 10 * GiB) // GiB)
    assert first.kind == "batch_size" and first.fits
    assert first.params["batch_size"] == truth - truth % 8
    assert first.params["bytes_per_sample"] == GiB and first.params["fixed_bytes"] == 10 * GiB
    assert first.params["margin_bytes"] == e.budget_bytes - (10 + first.params["batch_size"]) * GiB


def test_flat_small_steps_never_promise_a_batch_far_beyond_them():
    # The search tests' flat region: an optimizer-step peak of 5 GiB hides 1/16 GiB per
    # sample at batch 1, 2, 4; batch 128 fails under a 6 GiB cap. The line through those
    # three says ~16, far beyond them: the guard of `vramscope fit` holds the advice to what
    # batch 4's peak allows in proportion (the true largest is 15).
    steps = [StepPoint(i, 5 * GiB + b * GiB // 16, GiB, batch_size=b,
                       peak_reserved_bytes=5 * GiB + b * GiB // 16) for i, b in enumerate((1, 2, 4))]
    e = card(allocated=5 * GiB, cached_free=0, largest=0, requested=2 * GiB, limit=6 * GiB,
             batch_size=128, steps=steps)
    batch = next(a for a in _oom_remedies.assess(e).advice if a.kind == "batch_size")
    truth = int((6 * GiB * (1 - _oom_remedies.MEASURED_MARGIN) - 5 * GiB) // (GiB // 16))
    assert batch.params["batch_size"] <= truth
    assert batch.params["batch_size"] <= 4 * 6 * GiB // (5 * GiB + GiB // 4)


def test_a_memory_fraction_cap_is_the_budget_and_non_pytorch_is_the_context():
    # The second case: a 12 GiB cap on a card with 129 GiB free; the old report said
    # "device free 129.0 GiB of 12.0 GiB" and "non-PyTorch 0 B".
    e = card(allocated=11 * GiB, cached_free=512 * MiB, largest=256 * MiB, requested=GiB,
             limit=12 * GiB)
    assert e.device_free_bytes > 125 * GiB
    assert e.budget_bytes == 12 * GiB
    assert e.available_bytes == 12 * GiB - e.reserved_bytes == 512 * MiB
    assert e.available_bytes <= e.budget_bytes <= e.device_total_bytes
    assert e.shortfall_bytes == 512 * MiB
    assert e.non_pytorch_bytes == CONTEXT
    assert e.other_processes_bytes == 0
    text = _oom_report.format_report(e, _oom_remedies.rank_advice(e))
    assert "budget           12.0 GiB for PyTorch (memory-fraction cap 12.0 GiB)" in text
    assert "free for PyTorch 512.0 MiB" in text
    assert "non-PyTorch      700.0 MiB (this process's CUDA context" in text


def test_the_report_names_the_non_pytorch_parts_of_the_last_settled_pairing():
    e = card(allocated=11 * GiB, cached_free=512 * MiB, largest=256 * MiB, requested=GiB,
             limit=12 * GiB)
    e.driver_parts = {"context_bytes": 636 * MiB, "other_bytes": 64 * MiB, "nccl_bytes": None,
                      "nccl_version": 22809, "private_pool_bytes": 0, "paired_ns": 1}
    text = _oom_report.format_report(e, _oom_remedies.rank_advice(e))
    assert ("= context 636.0 MiB + other 64.0 MiB (NCCL 2.28.9 within), at the last settled "
            "pairing") in text
    assert _oom_report.report_json(e, [])["driver_parts"]["context_bytes"] == 636 * MiB
    e.driver_parts = None
    assert "settled pairing" not in _oom_report.format_report(e, [])


def test_a_tiny_cached_free_against_a_big_request_is_not_fragmentation():
    # The third case (vramscope run): 9.3 MiB cached free against a 576 MiB request.
    e = card(allocated=int(11.5 * GiB), cached_free=int(9.3 * MiB), largest=4 * MiB,
             requested=576 * MiB, limit=12 * GiB)
    advice = _oom_remedies.rank_advice(e)
    assert "expandable_segments" not in kinds(advice)
    assert "expandable_segments" in not_advised(e)
    # What does fit: a larger cap (the device has room).
    assert advice[0].kind == "memory_fraction" and not advice[0].fits and advice[0].params["covers_known_need"]
    fraction = advice[0].params["fraction"]
    assert fraction * TOTAL >= 12 * GiB + e.shortfall_bytes
    assert fraction <= 0.12


def test_fragmentation_within_the_budget_advises_expandable_segments():
    # The GPU scenario: a 4.5 GiB cap, 2 GiB live, 2 GiB in 100 MiB holes, 1 GiB requested.
    e = card(allocated=2000 * MiB, cached_free=2096 * MiB, largest=100 * MiB, requested=GiB,
             limit=4 * GiB + 512 * MiB)
    a = _oom_remedies.assess(e)
    first = a.advice[0]
    assert first.kind == "expandable_segments" and not first.fits and first.params["covers_known_need"]
    assert first.params == {"env": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True",
                            "covers_known_need": True}
    assert "cannot help" in dict(a.not_advised)["empty_cache"]
    e.expandable_segments = True
    assert "expandable_segments" not in kinds(_oom_remedies.rank_advice(e))
    assert not_advised(e)["expandable_segments"] == "expandable segments are already on"


def test_empty_cache_only_for_a_consumer_outside_the_allocator():
    e = card(allocated=130 * GiB, cached_free=8 * GiB, largest=8 * GiB, requested=0,
             oom_source="other")
    advice = _oom_remedies.rank_advice(e)
    assert advice[0].kind == "empty_cache" and not advice[0].fits and advice[0].params["covers_known_need"]
    assert advice[0].recovers_bytes == 8 * GiB


def test_a_leak_is_first_when_what_it_kept_covers_the_need():
    steps = [StepPoint(i, 2 * GiB + i * 256 * MiB, GiB + i * 256 * MiB, batch_size=4096)
             for i in range(1, 16)]
    e = card(allocated=steps[-1].allocated_bytes, cached_free=64 * MiB, largest=64 * MiB,
             requested=256 * MiB, limit=6 * GiB, batch_size=4096, steps=steps,
             parameter_bytes=285 * MiB)
    first = _oom_remedies.rank_advice(e)[0]
    assert first.kind == "leak" and first.fits
    assert first.params["bytes_per_step"] == 256 * MiB
    assert first.recovers_bytes == 14 * 256 * MiB


def test_another_process_holding_the_card():
    e = card(allocated=10 * GiB, cached_free=0, largest=0, requested=2 * GiB,
             others=TOTAL - 12 * GiB)
    assert e.other_processes_bytes == TOTAL - 12 * GiB
    first = _oom_remedies.rank_advice(e)[0]
    assert first.kind == "other_processes" and not first.fits and first.params["covers_known_need"]
    assert first.params == {"other_processes_bytes": TOTAL - 12 * GiB, "estimated": False,
                            "covers_known_need": True}
    # Without NVML's figure for this pid: estimated from what the allocator does not hold.
    e.process_driver_bytes = None
    first = _oom_remedies.rank_advice(e)[0]
    assert first.kind == "other_processes" and first.params["estimated"] is True
    assert first.params["other_processes_bytes"] == e.outside_bytes - GiB
    # Under a cap that already binds, freeing the card gives this process nothing.
    e = card(allocated=10 * GiB, cached_free=0, largest=0, requested=2 * GiB,
             others=100 * GiB, limit=10 * GiB)
    assert "other_processes" not in kinds(_oom_remedies.rank_advice(e))
    assert "memory-fraction cap" in not_advised(e)["other_processes"]


def activation_heavy(**fields) -> OomEvidence:
    # The GPU scenario: a 10 GiB cap, OOM in block 5 of 8 with 9 GiB of activations live.
    return card(allocated=int(9.8 * GiB), cached_free=0, largest=0, requested=GiB,
                limit=10 * GiB - 200 * MiB, batch_size=64, phase="forward",
                forward_progress=5 / 8, categories={"activations": 9 * GiB,
                                                    "parameters": 268 * MiB},
                block_lists=[("blocks", "Block", 8)], parameter_dtype="float32",
                parameter_bytes=268 * MiB, **fields)


def test_activation_heavy_checkpoints_the_named_blocks_first():
    e = activation_heavy()
    a = _oom_remedies.assess(e)
    assert a.projected_peak_bytes == e.allocated_bytes + e.requested_bytes + \
        int(9 * GiB / (5 / 8)) - 9 * GiB
    first = a.advice[0]
    assert first.kind == "activation_checkpointing" and not first.fits and first.params["covers_known_need"]
    assert first.params == {"modules": "blocks", "class": "Block", "count": 8, "covers_known_need": True}
    assert first.title == "activation checkpointing on the 8 Block modules of blocks"
    assert first.recovers_bytes == int(int(9 * GiB / (5 / 8)) * 0.75 * 7 / 8)
    # Mixed precision saves less than the need here: not advised, with its numbers.
    assert "mixed_precision" not in kinds(a.advice)
    assert "recovers" in dict(a.not_advised)["mixed_precision"]
    # Already under autocast: not offered at all.
    e.autocast = True
    assert not_advised(e)["mixed_precision"] == "autocast is already on"


def test_mixed_precision_when_it_covers_and_parameters_are_float32():
    e = activation_heavy(autocast=False)
    e.block_lists = []
    e.forward_progress = 0.95
    first = _oom_remedies.rank_advice(e)[0]
    assert first.kind == "mixed_precision" and first.params == {"dtype": "bfloat16", "covers_known_need": True}
    e.parameter_dtype = "bfloat16"  # already half-size parameters: activations are too
    assert "mixed_precision" not in kinds(_oom_remedies.rank_advice(e))


def test_optimizer_state_dominated_advises_a_lighter_optimizer():
    params = 2 * GiB
    e = card(allocated=7 * GiB - 256 * MiB, cached_free=0, largest=0, requested=256 * MiB,
             limit=7 * GiB, batch_size=8, phase="optimizer", optimizer="AdamW",
             optimizer_state_bytes=3 * GiB, optimizer_state_full_bytes=2 * params,
             parameter_bytes=params, parameter_dtype="float32",
             categories={"parameters": params, "gradients": params,
                         "optimizer_state": 3 * GiB, "activations": MiB})
    a = _oom_remedies.assess(e)
    # At the optimizer's step parameters, gradients and the full state are live at once.
    assert a.projected_peak_bytes == params + params + 2 * params
    first = a.advice[0]
    assert first.kind == "optimizer_state" and not first.fits and first.params["covers_known_need"]
    assert first.params["optimizer"] == "Adafactor" and first.params["foreach"] is False
    assert first.params["from_optimizer"] == "AdamW"
    assert "even batch 1 does not fit" in dict(a.not_advised)["batch_size"]
    assert "activations are only" in dict(a.not_advised)["activation_checkpointing"]
    # An optimizer with one state per parameter: SGD without momentum keeps none.
    e.optimizer = "RMSprop"
    assert _oom_remedies.rank_advice(e)[0].params["optimizer"] == "SGD"


def test_when_nothing_covers_the_need_the_largest_recoveries_come_first():
    e = card(allocated=100 * GiB, cached_free=GiB, largest=GiB, requested=70 * GiB,
             categories={"activations": 60 * GiB}, parameter_dtype="float32",
             block_lists=[("layers", "Layer", 2)])
    a = _oom_remedies.assess(e)
    assert not any(x.fits for x in a.advice)
    recovered = [x.recovers_bytes for x in a.advice]
    assert recovered == sorted(recovered, reverse=True) and recovered[0] > 0
    assert kinds(a.advice) == ["mixed_precision", "activation_checkpointing"]
    assert "none covers the need alone" in _oom_report.format_report(e, a.advice)


def test_with_no_evidence_the_fallback_says_what_was_missing():
    e = OomEvidence(device=0, requested_bytes=2 * GiB, device_total_bytes=80 * GiB,
                    device_free_bytes=GiB, allocated_bytes=78 * GiB, reserved_bytes=78 * GiB)
    (only,) = _oom_remedies.rank_advice(e)
    assert only.kind == "generic" and "1.0 GiB was missing" in only.detail


def test_one_batch_size_and_activations_give_an_estimate_never_a_promise():
    e = card(allocated=70 * GiB, cached_free=0, largest=0, requested=4 * GiB, limit=72 * GiB,
             batch_size=32, categories={"activations": 64 * GiB})
    a = _oom_remedies.assess(e)
    batch = next(x for x in a.advice + [] if x.kind == "batch_size")
    # 74 GiB peak, 64 GiB of it activations (2 GiB per sample), 10 GiB fixed: the batch whose
    # estimate fits 72 GiB with 1 % kept free, rounded down to a multiple of 8; one batch size
    # is no measurement, so it is not promised.
    assert batch.params["bytes_per_sample"] == 2 * GiB
    fitting = int((72 * GiB * (1 - _oom_remedies.MEASURED_MARGIN) - 10 * GiB) // (2 * GiB))
    assert batch.params["batch_size"] == fitting - fitting % 8
    assert not batch.fits and "not promised" in batch.detail


def test_the_json_report_carries_the_advice_kind_and_parameters_side_by_side():
    e = card(allocated=2000 * MiB, cached_free=2096 * MiB, largest=100 * MiB, requested=GiB,
             limit=4 * GiB + 512 * MiB)
    report = json.loads(json.dumps(_oom_report.report_json(e, _oom_remedies.rank_advice(e))))
    assert report["schema_version"] == 6
    first = report["advice"][0]
    assert first["kind"] == "expandable_segments" and first["fits"] is False and first["covers_known_need"] is True
    assert (first["env"], first["value"]) == ("PYTORCH_CUDA_ALLOC_CONF",
                                              "expandable_segments:True")
    for key in ("budget_bytes", "available_bytes", "shortfall_bytes", "need_bytes",
                "limit_bytes", "non_pytorch_bytes", "other_processes_bytes", "outside_bytes"):
        assert isinstance(report[key], int), key
    assert report["budget_bytes"] == 4 * GiB + 512 * MiB
    assert {n["kind"] for n in report["not_advised"]} >= {"empty_cache"}


def test_the_message_torch_prints_under_a_cap_gives_the_cap_and_this_process():
    message = ("CUDA out of memory. Tried to allocate 576.00 MiB. GPU 0 has a total capacity of "
               "139.80 GiB of which 129.02 GiB is free. Including non-PyTorch memory, this "
               "process has 12.10 GiB memory in use. 12.00 GiB allowed; Of the allocated memory "
               "11.38 GiB is allocated by PyTorch, and 9.30 MiB is reserved by PyTorch but "
               "unallocated.")
    parsed = _oom_advice.parse_oom_message(message)
    assert parsed["limit_bytes"] == 12 * GiB
    assert parsed["process_driver_bytes"] == int(12.1 * GiB)
    assert parsed["device_total_bytes"] == int(139.8 * GiB)


@pytest.mark.parametrize("kind", ["leak", "other_processes", "expandable_segments",
                                  "activation_checkpointing", "optimizer_state"])
def test_the_preferred_order_puts_semantics_preserving_remedies_before_a_smaller_batch(kind):
    from vramscope.postmortem.remedies import PRIORITY

    assert PRIORITY.index(kind) < PRIORITY.index("batch_size")
    assert PRIORITY.index("batch_grew") < PRIORITY.index("activation_checkpointing")


class OomAgent:
    """Stands in for the agent after an OOM under a 12 GiB cap: torch's observer handed the
    cap as "device_total"; NVML charges this pid reserved + 700 MiB."""

    def __init__(self, reserved: int = 11 * GiB + 600 * MiB) -> None:
        self.reserved = reserved

    def last_oom(self):
        return {"requested_bytes": 576 * MiB, "device_total_bytes": 12 * GiB,
                "device_free_bytes": 127 * GiB}

    def stats(self, device):
        return {"allocated_bytes": self.reserved - 9 * MiB, "reserved_bytes": self.reserved}

    def segments(self, at_oom=False):
        return [{"device": 0, "is_expandable": False,
                 "blocks": [(self.reserved - 9 * MiB, 0, "active_allocated"),
                            (9 * MiB, 0, "inactive")]}]

    def oom_snapshot_now(self, device):
        """The agent's snapshot taken now: its counters and segments, and what NVML charges this
        pid (no settled pairing yet, no attribution running)."""
        return {"device": device, "oom": self.last_oom(), "stats": self.stats(device),
                "segments": self.segments(), "recent_events": [[]], "ops": None,
                "categories": None, "driver_process_bytes": self.reserved + CONTEXT,
                "driver_breakdown": None}

    # What else the post-mortem asks the agent: one device.
    def mode(self):
        return "events"

    def device_count(self):
        return 1

    def oom_snapshot(self):
        return None

    def set_oom_callback(self, fn):
        self.oom_callback = fn


class OomAgentWithSnapshot(OomAgent):
    """The agent as it is when the post-mortem runs: its observer captured the OOM's state in
    one snapshot, and by now its live counters and segments have moved on (freed)."""

    def oom_snapshot(self):
        at_oom = OomAgent().oom_snapshot_now(0)
        at_oom.update(ops=[{"name": "aten::mm", "live_bytes": 3 * GiB,
                            "live_at_peak_bytes": 3 * GiB, "allocated_bytes": 3 * GiB}],
                      categories={"activations": (2 * GiB, 2 * GiB), "other": (0, 0)},
                      driver_breakdown=PARTS)
        return at_oom

    def stats(self, device):
        return {"allocated_bytes": 0, "reserved_bytes": 0}

    def segments(self, at_oom=False):
        return []

    def last_oom(self):
        raise AssertionError("the post-mortem read the live agent instead of the snapshot")

    def oom_snapshot_now(self, device):
        raise AssertionError("the post-mortem took a snapshot instead of the observer's")


@pytest.fixture
def capped_device(monkeypatch):
    """torch.cuda as after an OOM under a 12 GiB cap on a TOTAL-byte device (127 GiB free)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (127 * GiB, TOTAL))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction",
                        lambda device=None: 12 * GiB / TOTAL)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)


def test_collected_evidence_separates_the_cap_from_the_device(monkeypatch, capped_device):
    from _vram_double import installed

    # The agent's snapshot carries what NVML charges this pid (read by the device's UUID).
    with installed(OomAgent(), uuids=["GPU-test"]):
        e = oom.collect_evidence(0)
    assert e.device_total_bytes == TOTAL and e.limit_bytes == 12 * GiB
    assert e.budget_bytes == 12 * GiB and e.available_bytes == 424 * MiB
    assert e.shortfall_bytes == 152 * MiB
    assert e.non_pytorch_bytes == CONTEXT
    assert e.other_processes_bytes == TOTAL - 127 * GiB - e.process_driver_bytes > 0
    assert (e.cached_free_bytes, e.expandable_segments) == (9 * MiB, False)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:True")
    with installed(OomAgent(), uuids=["GPU-test"]):
        assert oom.collect_evidence(0).expandable_segments is True


def test_collected_evidence_is_the_observers_snapshot_not_the_state_after_it(capped_device):
    from _vram_double import installed

    with installed(OomAgentWithSnapshot(), uuids=["GPU-test"]):
        e = oom.collect_evidence(0)
    assert e.requested_bytes == 576 * MiB and e.reserved_bytes == 11 * GiB + 600 * MiB
    assert e.cached_free_bytes == 9 * MiB
    assert e.top_ops == [("aten::mm", 3 * GiB)]
    assert e.categories == {"activations": 2 * GiB}
    # What the driver charged and its parts travel in the snapshot, as read at the OOM.
    assert e.non_pytorch_bytes == CONTEXT and e.driver_parts == PARTS


def test_an_oom_while_moving_the_model_says_the_model_does_not_fit_not_the_batch():
    # 24 GiB of float32 weights under a 16 GiB cap, 15 GiB of them moved: the rest is what the
    # load needs at least; its steps need more, so nothing is promised.
    e = card(allocated=15 * GiB, cached_free=0, largest=0, requested=GiB // 2,
             limit=16 * GiB, phase="load", load_bytes=24 * GiB, loaded_bytes=15 * GiB,
             parameter_dtype="float32")
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound
    assert a.projected_peak_bytes == 24 * GiB and "still to be moved" in a.projection
    # The dtype first; raising the cap the program set itself last.
    assert kinds(a.advice) == ["model_dtype", "memory_fraction"]
    assert not any(x.fits for x in a.advice)
    dtype = a.advice[0]
    assert dtype.recovers_bytes == 12 * GiB and dtype.params["dtype"] == "bfloat16"
    assert "batch" not in " ".join(x.title for x in a.advice)
    assert "model.to(torch.bfloat16)" in dtype.title
    # The same OOM in transformers' from_pretrained: the dtype is its argument.
    e.load_call = "from_pretrained"
    dtype = _oom_remedies.assess(e).advice[0]
    assert dtype.kind == "model_dtype" and "from_pretrained(..., dtype=torch.bfloat16)" in \
        dtype.title
    # The same in torch.load, 3 GiB of a checkpoint already restored to the device: loaded to
    # the host instead, at least those and the request stay off it.
    e = card(allocated=15 * GiB, cached_free=0, largest=0, requested=GiB // 2,
             limit=16 * GiB, phase="load", load_call="torch.load", load_bytes=24 * GiB,
             loaded_bytes=3 * GiB)
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound and "still to be moved" not in a.projection
    first = a.advice[0]
    assert first.kind == "map_location" and "map_location='cpu'" in first.title
    assert first.recovers_bytes == 3 * GiB + GiB // 2 and first.params["covers_known_need"]
    assert not any(x.fits for x in a.advice)
    # Already in bfloat16, on a 16 GiB card of its own: the model itself.
    e = OomEvidence(device=0, requested_bytes=GiB // 2, device_total_bytes=16 * GiB,
                    device_free_bytes=GiB // 4, allocated_bytes=15 * GiB,
                    reserved_bytes=15 * GiB, process_driver_bytes=15 * GiB + CONTEXT,
                    phase="load", load_bytes=24 * GiB, loaded_bytes=15 * GiB,
                    parameter_dtype="bfloat16")
    [only] = _oom_remedies.rank_advice(e)
    assert only.title == "the model itself does not fit the budget"
    assert "device_map" not in only.detail
    e.load_call = "from_pretrained"
    [only] = _oom_remedies.rank_advice(e)
    assert "device_map='auto'" in only.detail
