# tests/python/postmortem/test_postmortem.py -- one PostMortem in the session: one read, one assessment
"""The post-mortem is one object (``SESSION.postmortem``) with no module-level state, and a
report reads the agent's record once and assesses the evidence once, on the observer's path and
on the fallback path (an OOM the observer did not see). The agent is a counting stand-in; the
post-mortem's code runs unchanged."""
from __future__ import annotations

import ast
import json
import pathlib

import pytest

import vramscope
from vramscope._core.session import SESSION
from vramscope.postmortem import oom, report

from _vram_double import FakeAgent, installed

MiB = 1 << 20
GiB = 1 << 30
MESSAGE = ("CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of "
           "139.80 GiB of which 120.00 MiB is free. Including non-PyTorch memory, this process "
           "has 139.68 GiB memory in use. Of the allocated memory 139.00 GiB is allocated by "
           "PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated.")
SEGMENTS = [{"device": 0, "address": 4096, "total_size": 4 * MiB, "allocated_size": 3 * MiB,
             "active_size": 3 * MiB, "requested_size": 3 * MiB, "stream": 0, "is_large": True,
             "is_expandable": False,
             "blocks": [(3 * MiB, 3 * MiB, "active_allocated"), (1 * MiB, 0, "inactive")]}]


class CountingAgent(FakeAgent):
    """The agent's record calls, counted: each read of the record captures the segments once."""

    def __init__(self, snapshot: bool = False) -> None:
        super().__init__()
        self.alloc(139 * GiB)
        self.segment_reads = 0
        self.snapshot_reads = 0
        self.with_snapshot = snapshot
        self.notes: list[tuple[int, int]] = []

    def segments(self, at_oom=False):
        self.segment_reads += 1
        return SEGMENTS

    def oom_snapshot(self):
        self.snapshot_reads += 1
        if not self.with_snapshot:
            return None
        return {"device": 0, "oom": {"requested_bytes": 256 * MiB, "device_total_bytes": 140 * GiB,
                                     "device_free_bytes": 120 * MiB},
                "stats": self.stats(0), "segments": SEGMENTS, "recent_events": [[]], "ops": None,
                "categories": None}

    def note_oom(self, device, requested_bytes, device_total_bytes, device_free_bytes):
        self.notes.append((device, requested_bytes))


@pytest.fixture
def postmortem(monkeypatch, tmp_path):
    """A fresh PostMortem in the session's slot, writing into tmp_path, with assess() counted."""
    monkeypatch.setenv("VRAMSCOPE_OOM_DIR", str(tmp_path))
    monkeypatch.delenv("VRAMSCOPE_OOM_REPORT", raising=False)
    fresh = oom.PostMortem(SESSION)
    monkeypatch.setattr(SESSION, "postmortem", fresh)
    calls = []
    real_assess = report.assess

    def counted(e):
        calls.append(e)
        return real_assess(e)

    monkeypatch.setattr(report, "assess", counted)
    fresh.assessments = calls  # what the tests below count
    return fresh


def test_the_fallback_reads_the_agent_once_and_assesses_once(postmortem, tmp_path):
    with installed(CountingAgent()) as agent:
        paths = oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls())
    assert paths is not None and set(paths) == {"txt", "json", "pickle"}
    assert agent.segment_reads == 1  # one record: the fragmentation and the memory_viz pickle
    assert len(postmortem.assessments) == 1
    assert agent.notes == [(0, 256 * MiB)]
    written = json.loads(pathlib.Path(paths["json"]).read_text())
    assert written["from_exception"] is True and written["cached_free_bytes"] == 1 * MiB
    assert postmortem.last_report() == paths and oom.last_report() == paths


def test_the_observer_reads_its_snapshot_once_and_assesses_once(postmortem, capsys):
    with installed(CountingAgent(snapshot=True)) as agent:
        postmortem.on_oom(0)
    assert (agent.snapshot_reads, agent.segment_reads) == (1, 0)
    assert len(postmortem.assessments) == 1
    assert postmortem.observer_calls() == 1 and set(postmortem.last_report()) == {
        "txt", "json", "pickle"}
    assert "vramscope: full report:" in capsys.readouterr().err
    # Its report is the one a handler of the same OOM returns, without writing another.
    assert oom.report_exception(RuntimeError(MESSAGE), 0) == postmortem.last_report()


def test_the_package_fills_the_sessions_slot_with_the_one_post_mortem():
    assert vramscope.oom.report_exception is oom.report_exception
    assert isinstance(oom.POSTMORTEM, oom.PostMortem)
    assert oom.POSTMORTEM.session is SESSION


def test_no_module_of_the_post_mortem_keeps_state_in_globals():
    room = pathlib.Path(oom.__file__).parent
    for path in sorted(room.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not any(isinstance(node, ast.Global) for node in ast.walk(tree)), path.name
