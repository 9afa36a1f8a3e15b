# tests/python/test_oom_steps.py -- step history, growing ops and OOMs caught by Monitor and run
#
# The Monitor and vramscope.run tests drive the real code paths (_api.step_all, Monitor.__exit__,
# run.main, oom.report_exception) with a stand-in for the agent extension that hands out step
# records, since there is no GPU here; the report files they write are then read back.
from __future__ import annotations

import json
import os

import pytest

from vramscope import _api, monitor as monitor_module, oom, run
from vramscope.oom import OomEvidence, StepPoint

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
    assert oom.parse_oom_message(MESSAGE) == {
        "device": 0, "requested_bytes": 256 * MiB, "device_total_bytes": int(139.8 * GiB),
        "device_free_bytes": 120 * MiB, "allocated_bytes": 139 * GiB,
        "reserved_bytes": 139 * GiB + 20 * MiB}
    old = "Tried to allocate 5.96 GiB. GPU 3 has a total capacty of 23.69 GiB of which 0 bytes is free."
    parsed = oom.parse_oom_message(old)
    assert (parsed["device"], parsed["device_free_bytes"]) == (3, 0)
    assert parsed["requested_bytes"] == int(5.96 * GiB)
    assert oom.parse_oom_message("something else") == {}


def test_oom_errors_are_recognised():
    torch = pytest.importorskip("torch")
    assert oom.is_oom_error(torch.OutOfMemoryError("x"))
    assert oom.is_oom_error(RuntimeError(MESSAGE))
    assert oom.is_oom_error(RuntimeError("CUDA error: out of memory"))
    assert not oom.is_oom_error(RuntimeError("shape mismatch"))
    assert not oom.is_oom_error(ValueError(MESSAGE))


def test_growing_ops_need_growth_at_every_step():
    snaps = [{"aten::cat": 100 * i, "aten::mm": 50, "aten::add": 10 * (i % 2)} for i in range(5)]
    assert oom.growing_ops(snaps) == [("aten::cat", 100)]
    assert oom.growing_ops(snaps[:3]) == []  # too few steps to say
    snaps[-1]["aten::cat"] = snaps[-2]["aten::cat"]  # stopped growing
    assert oom.growing_ops(snaps) == []


def test_leak_advice_names_the_growing_op():
    e = OomEvidence(device=0, requested_bytes=256 * MiB, device_total_bytes=80 * GiB,
                    device_free_bytes=10 * MiB, allocated_bytes=79 * GiB, reserved_bytes=79 * GiB)
    e.steps = [StepPoint(i, 70 * GiB + i * 256 * MiB, 69 * GiB + i * 256 * MiB) for i in range(6)]
    e.growing_ops = [("aten::cat", 256 * MiB), ("aten::add", MiB)]
    e.top_ops = [("aten::mm", 60 * GiB)]
    advice = oom.rank_advice(e)
    assert advice[0].title.startswith("memory leak")
    assert "+256.0 MiB per step" in advice[0].detail
    assert "growing: aten::cat +256.0 MiB/step" in advice[0].detail
    text = oom.format_report(e, advice)
    assert "live memory growing at every step, by op:" in text
    assert oom.report_json(e, advice)["leak_rate_bytes"] == 256 * MiB


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
def source(monkeypatch, tmp_path):
    fake = StepSource()
    monkeypatch.setattr(_api, "_reader", fake)
    monkeypatch.setattr(_api, "_count", 1)
    monkeypatch.setattr(_api, "_current", lambda: 0)
    monkeypatch.setattr(_api, "attach", lambda *a, **k: "events")
    monkeypatch.setattr(oom, "_steps", {})
    monkeypatch.setattr(oom, "_op_snapshots", {})
    monkeypatch.setattr(oom, "_reports_written", 0)
    monkeypatch.setattr(oom, "_last_report", {})
    monkeypatch.setenv("VRAMSCOPE_OOM_DIR", str(tmp_path))
    monkeypatch.delenv("VRAMSCOPE_OOM_REPORT", raising=False)
    return fake


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
    assert oom._providers == [] or mon._oom_evidence not in oom._providers


def test_without_a_monitor_the_steps_come_from_the_step_ring(source, tmp_path):
    for _ in range(6):
        _api.step_all()
    assert oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls()) is not None
    report = json.loads(reports(tmp_path)[0].read_text())
    assert [s["allocated_bytes"] for s in report["steps"]] == [
        100 * GiB + i * 256 * MiB for i in range(1, 7)]
    assert report["leak_rate_bytes"] == 256 * MiB


def test_nothing_new_is_written_when_the_observer_ran(source, tmp_path, monkeypatch, capsys):
    before = oom.observer_calls()
    monkeypatch.setattr(oom, "_observer_calls", before + 1)  # what on_oom counts first
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
    monkeypatch.setattr(run, "_start_agent", lambda opts: None)
    with pytest.raises(RuntimeError, match="Tried to allocate 256.00 MiB"):
        run.main([str(script)])
    assert len(reports(tmp_path)) == 1
    assert "vramscope: full report:" in capsys.readouterr().err


def test_reports_can_be_turned_off(source, tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMSCOPE_OOM_REPORT", "0")
    assert oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls()) is None
    assert reports(tmp_path) == []
