# tests/python/postmortem/test_oom.py -- OOM advice ranking, report text and memory_viz shape from synthetic evidence
from __future__ import annotations

import json
import os
import pickle
import stat

from vramscope.postmortem import advice as _oom_advice
from vramscope.postmortem import remedies as _oom_remedies
from vramscope.postmortem import report as _oom_report
from vramscope.postmortem.advice import OomEvidence, StepPoint

GiB = 1 << 30
MiB = 1 << 20


def fragmented() -> OomEvidence:
    # 6 GiB free in the cache, in pieces of at most 1 GiB; the request needs 2 GiB.
    return OomEvidence(device=0, requested_bytes=2 * GiB, device_total_bytes=80 * GiB,
                       device_free_bytes=512 * MiB, allocated_bytes=70 * GiB,
                       reserved_bytes=78 * GiB, cached_free_bytes=6 * GiB,
                       largest_free_block_bytes=1 * GiB)


def test_fragmentation_first_when_the_cache_had_room():
    advice = _oom_remedies.rank_advice(fragmented())
    assert advice[0].title.startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert "would have fit" in advice[0].detail
    assert "83%" in advice[0].detail  # 1 - 1/6


def test_leak_outranks_the_rest_when_memory_grows_every_step():
    e = fragmented()
    e.cached_free_bytes = e.largest_free_block_bytes = 0
    e.steps = [StepPoint(i, 60 * GiB + i * GiB, 50 * GiB + i * GiB) for i in range(6)]
    e.top_ops = [("aten::cat", 5 * GiB)]
    advice = _oom_remedies.rank_advice(e)
    assert advice[0].title.startswith("memory leak")
    assert "+1.0 GiB per step" in advice[0].detail and "aten::cat" in advice[0].detail


def test_batch_line_from_steps_at_two_batch_sizes():
    steps = [StepPoint(1, 10 * GiB + 8 * GiB, 10 * GiB, batch_size=8),
             StepPoint(2, 10 * GiB + 16 * GiB, 10 * GiB, batch_size=16)]
    # 1 GiB per sample, 10 GiB fixed, through the memory model the batch advice uses.
    assert _oom_remedies.batch_line(steps) == (10 * GiB, GiB)
    assert _oom_remedies.batch_line(steps[:1]) is None


def test_activation_checkpointing_names_the_repeated_modules():
    e = OomEvidence(device=0, requested_bytes=4 * GiB, device_total_bytes=80 * GiB,
                    device_free_bytes=1 * GiB, allocated_bytes=75 * GiB, reserved_bytes=76 * GiB,
                    categories={"activations": 50 * GiB, "parameters": 10 * GiB},
                    repeated_modules=[("Block", 12, 4 * GiB), ("Linear", 48, 10 * MiB)],
                    batch_size=32)
    advice = _oom_remedies.rank_advice(e)
    titles = [a.title for a in advice]
    assert titles[0] == "activation checkpointing on the 12 Block modules"
    assert "≈44.0 GiB" in advice[0].detail  # 11 of 12 blocks' activations
    # The need is the failing request's (a lower bound): covering it is not a promise to fit.
    assert advice[0].params == {"modules": None, "class": "Block", "count": 12,
                                "covers_known_need": True}
    assert not advice[0].fits
    # A smaller batch, estimated from one batch size, is no promise: it recovers less than
    # checkpointing here (both only cover the known need) and comes after it, when listed.
    assert [a.kind for a in advice][1:] in ([], ["batch_size"]), titles


def test_optimizer_state_advice_and_fallback():
    e = fragmented()
    e.cached_free_bytes = e.largest_free_block_bytes = 0
    e.categories = {"optimizer_state": 40 * GiB}
    assert _oom_remedies.rank_advice(e)[0].title.startswith("optimizer state dominates")
    e.categories = {}
    assert _oom_remedies.rank_advice(e)[0].title == "reduce the batch size or sequence length"


def test_fragmentation_from_agent_segments():
    segments = [{"device": 0, "blocks": [(100, 100, "active_allocated"), (300, 0, "inactive")]},
                {"device": 1, "blocks": [(999, 0, "inactive")]},
                {"device": 0, "blocks": [(50, 0, "inactive"), (8, 8, "active_pending_free")]}]
    assert _oom_advice.fragmentation_of(segments, 0) == (350, 300)


def test_report_text_golden(golden):
    e = fragmented()
    e.top_ops = [("aten::mm", 30 * GiB), ("aten::gelu", 20 * GiB)]
    e.categories = {"activations": 40 * GiB, "parameters": 20 * GiB}
    e.steps = [StepPoint(1, 71 * GiB, 40 * GiB, batch_size=16)]
    text = _oom_report.format_report(e, _oom_remedies.rank_advice(e), when="2025-01-01 00:00:00")
    golden("oom_report.txt", text)


def test_files_are_private_and_the_snapshot_has_memory_viz_shape(tmp_path):
    segments = [{"device": 0, "address": 4096, "total_size": 3072, "requested_size": 1000,
                 "allocated_size": 1024, "active_size": 1024, "stream": 0, "is_large": False,
                 "is_expandable": False,
                 "blocks": [(1024, 1000, "active_allocated"), (2048, 0, "inactive")]}]
    events = [[{"action": "alloc", "address": 4096, "size_bytes": 1000, "monotonic_ns": 5000},
               {"action": "unknown", "address": 0, "size_bytes": 0, "monotonic_ns": 6000}]]
    snap = _oom_report.memory_viz_snapshot(segments, events, wall_minus_monotonic_ns=1000)
    assert snap["segments"][0]["blocks"][1]["address"] == 4096 + 1024
    assert snap["device_traces"] == [[{"action": "alloc", "addr": 4096, "size": 1000,
                                       "stream": 0, "time_us": 6, "frames": [],
                                       "compile_context": "", "user_metadata": ""}]]
    paths = _oom_report.report_paths(123, 0.0, str(tmp_path))
    assert os.path.basename(paths["txt"]).startswith("vramscope-oom-123-")
    _oom_report.write_report(fragmented(), paths, snap)
    for p in paths.values():
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    report = json.loads(open(paths["json"]).read())
    assert report["schema_version"] == _oom_report.REPORT_SCHEMA_VERSION
    # Without NVML's bytes for this pid, non-PyTorch is unknown; outside_bytes is what the
    # device uses beyond this allocator (context and other processes together).
    assert report["non_pytorch_bytes"] is None
    assert report["outside_bytes"] == 80 * GiB - 512 * MiB - 78 * GiB
    assert pickle.loads(open(paths["pickle"], "rb").read()) == snap
