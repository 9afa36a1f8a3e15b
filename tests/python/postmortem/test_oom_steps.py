# tests/python/postmortem/test_oom_steps.py -- step history, growing ops and modules, OOMs caught by Monitor and run
#
# The Monitor and vramscope.run tests drive the real code paths (SESSION.step_all, Monitor.__exit__,
# run.main, oom.report_exception) with a stand-in for the agent extension that hands out step
# records, since there is no GPU here; the report files they write are then read back.
from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from vramscope import run
from vramscope._core.session import SESSION
from vramscope._core.step_history import StepHistory
from vramscope._core.torchcheck import is_oom_error
from vramscope.postmortem import oom
from vramscope.postmortem.advice import (
    OomEvidence,
    StepPoint,
    growing_ops,
    growing_text,
    parse_oom_message,
)
from vramscope.postmortem.remedies import rank_advice
from vramscope.postmortem.report import format_report, report_json
from vramscope.steps import monitor as monitor_module

from _vram_double import installed

MiB = 1 << 20
GiB = 1 << 30

# What torch 2.11 raises (torch.OutOfMemoryError's text) for a 256 MiB request.
MESSAGE = ("CUDA out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of "
           "139.80 GiB of which 120.00 MiB is free. Including non-PyTorch memory, this process "
           "has 139.68 GiB memory in use. Of the allocated memory 139.00 GiB is allocated by "
           "PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated. If reserved but "
           "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_"
           "segments:True to avoid fragmentation.")


def test_the_message_torch_prints_is_parsed():
    assert parse_oom_message(MESSAGE) == {
        "device": 0, "requested_bytes": 256 * MiB, "device_total_bytes": int(139.8 * GiB),
        "device_free_bytes": 120 * MiB, "allocated_bytes": 139 * GiB,
        "reserved_bytes": 139 * GiB + 20 * MiB, "process_driver_bytes": int(139.68 * GiB)}
    old = "Tried to allocate 5.96 GiB. GPU 3 has a total capacty of 23.69 GiB of which 0 bytes is free."
    parsed = parse_oom_message(old)
    assert (parsed["device"], parsed["device_free_bytes"]) == (3, 0)
    assert parsed["requested_bytes"] == int(5.96 * GiB)
    assert parse_oom_message("something else") == {}


def test_oom_errors_are_recognised():
    torch = pytest.importorskip("torch")
    assert is_oom_error(torch.OutOfMemoryError("x"))
    assert is_oom_error(RuntimeError(MESSAGE))
    assert is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert not is_oom_error(RuntimeError("shape mismatch"))
    assert not is_oom_error(ValueError(MESSAGE))


def test_growing_ops_need_growth_at_every_step():
    snaps = [{"aten::cat": 100 * i, "aten::mm": 50, "aten::add": 10 * (i % 2)} for i in range(5)]
    assert growing_ops(snaps) == [("aten::cat", 100)]
    assert growing_ops(snaps[:3]) == []  # too few steps to say
    snaps[-1]["aten::cat"] = snaps[-2]["aten::cat"]  # stopped growing
    assert growing_ops(snaps) == []


def test_leak_advice_names_the_growing_op():
    e = OomEvidence(device=0, requested_bytes=256 * MiB, device_total_bytes=80 * GiB,
                    device_free_bytes=10 * MiB, allocated_bytes=79 * GiB, reserved_bytes=79 * GiB)
    e.steps = [StepPoint(i, 70 * GiB + i * 256 * MiB, 69 * GiB + i * 256 * MiB) for i in range(6)]
    e.growing_ops = [("aten::cat", 256 * MiB), ("aten::add", MiB)]
    e.top_ops = [("aten::mm", 60 * GiB)]
    advice = rank_advice(e)
    assert advice[0].title.startswith("memory leak")
    assert "+256.0 MiB per step" in advice[0].detail
    assert "growing: op aten::cat +256.0 MiB/step, op aten::add +1.0 MiB/step;" in advice[0].detail
    assert "module" not in advice[0].detail
    text = format_report(e, advice)
    assert "live memory growing at every step, by op:" in text
    assert "by module" not in text
    assert report_json(e, advice)["leak_rate_bytes"] == 256 * MiB


def leaking_evidence() -> OomEvidence:
    e = OomEvidence(device=0, requested_bytes=4 * MiB, device_total_bytes=80 * GiB,
                    device_free_bytes=MiB, allocated_bytes=79 * GiB, reserved_bytes=79 * GiB)
    e.steps = [StepPoint(i, 78 * GiB + i * 4 * MiB, 77 * GiB + i * 4 * MiB) for i in range(6)]
    return e


def test_leak_advice_names_the_growing_module_before_the_op():
    e = leaking_evidence()
    e.growing_modules = [("Net.encoder.cache", 4 * MiB), ("Net.head", 512)]
    e.growing_ops = [("aten::cat", 4 * MiB)]
    advice = rank_advice(e)
    assert advice[0].title.startswith("memory leak")
    assert ("growing: module Net.encoder.cache +4.0 MiB/step, module Net.head +512 B/step; "
            "op aten::cat +4.0 MiB/step; look for") in advice[0].detail, advice[0].detail
    text = format_report(e, advice)
    section = text.split("live memory growing at every step, by module (innermost forward "
                         "that allocated it):\n")[1].split("\n\n")[0]
    assert section.splitlines() == ["  +   4.0 MiB/step  Net.encoder.cache",
                                    "  +     512 B/step  Net.head"], text
    # Through JSON as a file reader sees it: pairs become lists.
    report = json.loads(json.dumps(report_json(e, advice)))
    assert report["schema_version"] == 6
    assert report["growing_modules"] == [["Net.encoder.cache", 4 * MiB], ["Net.head", 512]]
    assert report["growing_ops"] == [["aten::cat", 4 * MiB]]


def test_leak_advice_with_only_growing_modules():
    e = leaking_evidence()
    e.growing_modules = [("Model.memory", 4 * MiB)]
    e.top_ops = [("aten::mm", GiB)]
    detail = rank_advice(e)[0].detail
    assert "; growing: module Model.memory +4.0 MiB/step; look for" in detail, detail
    assert "largest holder" not in detail and " op " not in detail, detail
    assert growing_text([], []) == ""
    assert growing_text([("a", 1), ("b", 2), ("c", 3), ("d", 4)], [], limit=2) == \
        "module a +1 B/step, module b +2 B/step"


class StepSource:
    """Stands in for the agent extension: every step() ends with 256 MiB more allocated."""

    def __init__(self, base: int = 100 * GiB, leak: int = 256 * MiB) -> None:
        self.base, self.leak, self.n = base, leak, 0

    def mode(self):
        return "events"

    def device_count(self):
        return 1

    def memory_allocated(self, device):
        return self.base + self.n * self.leak

    def stats(self, device):
        return {"allocated_bytes": self.memory_allocated(device), "reserved_bytes": 0}

    def step(self):
        self.n += 1
        allocated = self.memory_allocated(0)
        return [{"device": 0, "step": self.n, "peak_allocated_bytes": allocated,
                 "peak_reserved_bytes": allocated, "peak_requested_bytes": allocated,
                 "allocated_bytes": allocated, "reserved_bytes": allocated, "duration_ns": 1}]


@pytest.fixture
def history(monkeypatch):
    """A fresh step history for the test (the process's keeps other tests' steps)."""
    fresh = StepHistory()
    monkeypatch.setattr(SESSION, "history", fresh)
    return fresh


@pytest.fixture
def source(history, monkeypatch, tmp_path):
    # A fresh post-mortem in the session's slot: no report written yet, no last report.
    monkeypatch.setattr(SESSION, "postmortem", oom.PostMortem(SESSION))
    monkeypatch.setenv("VRAMSCOPE_OOM_DIR", str(tmp_path))
    monkeypatch.delenv("VRAMSCOPE_OOM_REPORT", raising=False)
    # A reader that is not the agent (no attribution, no segments), as in polling mode.
    with installed(StepSource(), is_agent=False) as fake:
        yield fake


class ProfilingSource(StepSource):
    """A StepSource with attribution running: per-op and per-module live bytes at each step.
    Module 2 keeps ``leak`` bytes more at every step, module 1 holds a constant, module 7 grows
    but has no path (another profile's id), module 3 stops growing after the third step."""

    def attribution_active(self):
        return True

    def op_table(self, device, mark="profile"):
        return [{"name": "(before)", "live_bytes": self.base},
                {"name": "aten::mul", "live_bytes": self.n * self.leak}]

    def live_by_owner(self, device):
        # As the agent answers: owners holding bytes only, "(before)" left out, modules by id.
        ops = {r["name"]: r["live_bytes"] for r in self.op_table(device)
               if r["name"] != "(before)" and r["live_bytes"] > 0}
        modules = {1: 4096, 2: self.n * self.leak, 3: min(self.n, 3) * MiB, 7: self.n * GiB}
        return ops, {i: b for i, b in modules.items() if b > 0}

    # The rest of what the OOM post-mortem asks the agent: nothing to add.
    def oom_snapshot(self):
        return None

    def oom_snapshot_now(self, device):
        return {"device": device, "oom": {}, "stats": self.stats(device),
                "driver_process_bytes": None, "driver_breakdown": None, "segments": [],
                "recent_events": [[]], "ops": None, "categories": None}

    def note_oom(self, device, requested_bytes, device_total_bytes, device_free_bytes):
        self.noted = (device, requested_bytes)

    def set_oom_callback(self, fn):
        self.oom_callback = fn


@pytest.fixture
def profiling(source):
    with installed(ProfilingSource()) as fake:
        yield fake


def test_step_ends_keep_module_live_bytes_by_path_while_module_hooks_run(profiling, tmp_path):
    paths = {1: "Net", 2: "Net.cache", 3: "Net.head"}
    history = SESSION.history
    for _ in range(2):  # before any module hooks: no module snapshot
        SESSION.step_all()
    assert history.module_snapshots(0) == []
    history.add_module_paths(paths)
    for _ in range(6):
        SESSION.step_all()
    assert len(history.module_snapshots(0)) == 6
    assert history.module_snapshots(0)[-1] == {"Net": 4096, "Net.cache": 8 * 256 * MiB,
                                               "Net.head": 3 * MiB}
    assert oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls()) is not None
    report = json.loads(reports(tmp_path)[0].read_text())
    assert report["growing_modules"] == [["Net.cache", 256 * MiB]], report["growing_modules"]
    assert report["growing_ops"] == [["aten::mul", 256 * MiB]]
    leak = report["advice"][0]
    assert leak["title"].startswith("memory leak"), report["advice"]
    assert "growing: module Net.cache +256.0 MiB/step; op aten::mul +256.0 MiB/step" in \
        leak["detail"], leak["detail"]
    txt = pathlib.Path(reports(tmp_path)[0].with_suffix(".txt")).read_text()
    assert "+ 256.0 MiB/step  Net.cache" in txt, txt
    assert profiling.noted == (0, 256 * MiB)  # the segment gets its OOM marker
    # Another map (a new profile) is not removed by the old one's exit; it drops the old
    # snapshots, whose ids meant other modules.
    other = {2: "Other.block"}
    history.add_module_paths(other)
    assert history.module_snapshots(0) == []
    history.remove_module_paths(paths)
    SESSION.step_all()
    assert history.module_snapshots(0)[-1] == {"Other.block": 9 * 256 * MiB}
    history.remove_module_paths(other)
    SESSION.step_all()  # no module hooks any more: no module snapshot
    assert len(history.module_snapshots(0)) == 1


def test_profile_with_modules_hands_its_paths_to_the_step_ends(source):
    torch = pytest.importorskip("torch")
    from vramscope.profile import profile

    class Agent(ProfilingSource):
        """The extension's profile calls, and module live bytes by the ids the hooks gave:
        the module whose path is ``leaky`` keeps 512 B more at every step."""

        def __init__(self):
            super().__init__()
            self.leaky = None
            self.entered = set()

        def profile_start(self, sampling):
            pass

        def profile_stop(self):
            pass

        def set_phase(self, phase):
            pass

        def module_enter(self, module_id, backward=False):
            self.entered.add(module_id)

        def module_exit(self, module_id, backward=False, measured=True):
            pass

        def attribution_summary(self, device):
            return {"peak_bytes": 0}

        def categories(self, device, mark="step"):
            return {}

        def module_table(self, device):
            return [{"module_id": i, "forward_calls": self.n, "retained_bytes": 0,
                     "max_retained_bytes": 0, "backward_calls": 0, "backward_peak_bytes": 0,
                     "live_bytes": self.n * 512 if i == self.leaky else 64}
                    for i in sorted(self.entered)]

        def live_by_owner(self, device):
            ops, _ = super().live_by_owner(device)
            return ops, {r["module_id"]: r["live_bytes"] for r in self.module_table(device)}

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with installed(Agent()) as agent, profile() as p:
        hooks = p._hooks
        assert SESSION.history.module_paths is hooks.paths
        for _ in range(5):
            model(torch.ones(1, 4))
            agent.leaky = next(i for i, path in hooks.paths.items() if path == "Sequential.1")
            SESSION.step_all()
        e = oom.evidence_from_exception(MESSAGE, 0)
    assert SESSION.history.module_paths is None
    assert sorted(hooks.paths.values()) == ["Sequential", "Sequential.0", "Sequential.1"]
    assert e.growing_modules == [("Sequential.1", 512)], e.growing_modules
    assert {r.path: r.live_bytes for r in p.module_rows()} == {
        "Sequential": 64, "Sequential.0": 64, "Sequential.1": 5 * 512}


def reports(tmp_path):
    return sorted(tmp_path.glob("vramscope-oom-*.json"))


def test_monitor_writes_the_report_when_the_observer_did_not_run(source, tmp_path, capsys):
    mon = monitor_module.Monitor(every=0, leak_steps=100)
    with pytest.raises(RuntimeError) as info:
        with mon:
            for _ in range(8):
                mon.step()
            raise RuntimeError(MESSAGE)
    assert str(info.value) == MESSAGE  # re-raised unchanged
    (path,) = reports(tmp_path)
    report = json.loads(path.read_text())
    assert report["from_exception"] is True
    assert [s["step"] for s in report["steps"]] == list(range(1, 9))
    assert report["advice"][0]["title"].startswith("memory leak")
    assert report["leak_rate_bytes"] == 256 * MiB
    assert report["requested_bytes"] == 256 * MiB
    err = capsys.readouterr().err
    assert err.count("vramscope: CUDA out of memory on cuda:0") == 1, err
    assert os.stat(path).st_mode & 0o777 == 0o600
    # The provider is gone with the Monitor: a later report uses the step ring only.
    assert mon._pipeline._oom_evidence not in SESSION.evidence


def test_without_a_monitor_the_steps_come_from_the_step_ring(source, tmp_path):
    for _ in range(6):
        SESSION.step_all()
    assert oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls()) is not None
    report = json.loads(reports(tmp_path)[0].read_text())
    assert [s["allocated_bytes"] for s in report["steps"]] == [
        100 * GiB + i * 256 * MiB for i in range(1, 7)]
    assert report["leak_rate_bytes"] == 256 * MiB


def test_nothing_new_is_written_when_the_observer_ran(source, tmp_path, monkeypatch, capsys):
    before = oom.observer_calls()
    monkeypatch.setattr(SESSION.postmortem, "observer_count", before + 1)  # on_oom counts first
    assert oom.report_exception(RuntimeError(MESSAGE), before) is None
    assert reports(tmp_path) == []
    assert capsys.readouterr().err == ""


def test_an_exception_is_reported_once_and_other_errors_never(source, tmp_path):
    error = RuntimeError(MESSAGE)
    with pytest.raises(RuntimeError):
        with monitor_module.Monitor(every=0):
            with monitor_module.Monitor(every=0):
                raise error
    assert len(reports(tmp_path)) == 1
    with pytest.raises(KeyError):
        with monitor_module.Monitor(every=0):
            raise KeyError("not an OOM")
    assert len(reports(tmp_path)) == 1


def test_run_reports_an_oom_that_ends_the_program(source, tmp_path, monkeypatch, capsys):
    script = tmp_path / "prog.py"
    script.write_text(f"raise RuntimeError({MESSAGE!r})\n")
    monkeypatch.setattr(run, "_start_agent", lambda opts: (None, None))
    # run.main sets sys.argv and sys.path[0] as `python script.py` would: this process's own
    # (sys.path[0] is a test folder, which other tests' subprocesses import from) come back.
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(RuntimeError, match="Tried to allocate 256.00 MiB"):
        run.main([str(script)])
    assert len(reports(tmp_path)) == 1
    assert "vramscope: full report:" in capsys.readouterr().err


def test_reports_can_be_turned_off(source, tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMSCOPE_OOM_REPORT", "0")
    assert oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls()) is None
    assert reports(tmp_path) == []


def test_monitor_reads_the_batch_size_of_a_model_it_was_not_told_about(source, tmp_path):
    # A plain Monitor() finds `model` among the loop's locals at its first step end, hooks its
    # forward (one pre-hook, on the top-level module only) and records each step's batch; the
    # OOM report then has the failing step's batch and the steps' batches for the fit.
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    mon = monitor_module.Monitor(every=0, leak_steps=100)
    with pytest.raises(RuntimeError):
        with mon:
            for batch in (2, 2, 4, 4, 8):
                model(torch.zeros(batch, 4))
                mon.step()
            model(torch.zeros(16, 4))
            raise RuntimeError(MESSAGE)
    assert [r.batch_size for r in mon.history] == [None, 2, 4, 4, 8]
    assert not model._forward_pre_hooks  # removed with the Monitor
    assert all(not m._forward_pre_hooks for m in model.modules())
    report = json.loads(reports(tmp_path)[0].read_text())
    assert report["batch_size"] == 16 and report["batch_source"] == "forward"
    assert [s["batch_size"] for s in report["steps"]] == [None, 2, 4, 4, 8]
    assert report["parameter_dtype"] == "float32"
