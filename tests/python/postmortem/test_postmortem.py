# tests/python/postmortem/test_postmortem.py -- one PostMortem in the session: one read, one assessment
"""The post-mortem is one object (``SESSION.postmortem``) with no module-level state, and a
report reads the agent once (its snapshot: the observer's, or one taken now) and assesses the
evidence once, on the observer's path and on the fallback path (an OOM the observer did not
see). The agent is a counting stand-in; the post-mortem's code runs unchanged."""
from __future__ import annotations

import ast
import json
import pathlib
import textwrap

import pytest

import vramscope
from vramscope._core.session import SESSION
from vramscope.postmortem import oom, report

from _vram_double import FakeAgent, installed
from conftest import run_python

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


#: The non-PyTorch parts at the agent's last settled pairing, as its snapshot carries them.
PARTS = {"paired_ns": 5, "driver_bytes": 139 * GiB + 700 * MiB, "reserved_bytes": 139 * GiB,
         "private_pool_bytes": 0, "nccl_bytes": None, "other_bytes": 182 * MiB,
         "context_bytes": 518 * MiB, "first_context_bytes": 518 * MiB, "non_pytorch_bytes": 700 * MiB,
         "excess_bytes": 0, "nccl_version": 0, "unsettled_count": 0}


class CountingAgent(FakeAgent):
    """Every call the post-mortem makes to the agent, in order (``calls``), and each snapshot
    it reads: the observer's (``oom_snapshot``) or one taken now (``oom_snapshot_now``)."""

    def __init__(self, snapshot: bool = False) -> None:
        super().__init__()
        self.alloc(139 * GiB)
        self.with_snapshot = snapshot
        self.notes: list[tuple[int, int]] = []
        self.calls: list[str] = []

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if callable(value) and not name.startswith("_") and name not in ("alloc", "free"):
            object.__getattribute__(self, "calls").append(name)
        return value

    def _snapshot(self, device):
        return {"device": device, "oom": {"requested_bytes": 256 * MiB,
                                          "device_total_bytes": 140 * GiB,
                                          "device_free_bytes": 120 * MiB},
                "stats": FakeAgent.stats(self, device), "segments": SEGMENTS,
                "recent_events": [[]], "ops": None, "categories": None,
                "driver_process_bytes": 139 * GiB + 700 * MiB, "driver_breakdown": dict(PARTS)}

    def oom_snapshot(self):
        return self._snapshot(0) if self.with_snapshot else None

    def oom_snapshot_now(self, device):
        return self._snapshot(device)

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
        agent.calls.clear()  # the attach's own calls
        paths = oom.report_exception(RuntimeError(MESSAGE), oom.observer_calls())
    assert paths is not None and set(paths) == {"txt", "json", "pickle"}
    # One snapshot taken now (its segments make the fragmentation and the memory_viz pickle,
    # it carries the driver's bytes and parts), then the segment's OOM marker: nothing else.
    assert agent.calls == ["oom_snapshot_now", "note_oom"], agent.calls
    assert len(postmortem.assessments) == 1
    assert agent.notes == [(0, 256 * MiB)]
    written = json.loads(pathlib.Path(paths["json"]).read_text())
    assert written["from_exception"] is True and written["cached_free_bytes"] == 1 * MiB
    assert written["driver_parts"] == PARTS
    assert postmortem.last_report() == paths and oom.last_report() == paths


def test_the_observer_reads_its_snapshot_once_and_assesses_once(postmortem, capsys):
    pytest.importorskip("torch")  # the observer runs in a process that allocates with torch
    with installed(CountingAgent(snapshot=True)) as agent:
        agent.calls.clear()  # the attach's own calls
        postmortem.on_oom(0)
    # The NVML bytes and the settled parts travel in the snapshot: no second question.
    assert agent.calls == ["oom_snapshot"], agent.calls
    assert len(postmortem.assessments) == 1
    assert postmortem.observer_calls() == 1 and set(postmortem.last_report()) == {
        "txt", "json", "pickle"}
    written = json.loads(pathlib.Path(postmortem.last_report()["json"]).read_text())
    assert written["process_driver_bytes"] == 139 * GiB + 700 * MiB
    assert written["driver_parts"] == PARTS and written["non_pytorch_bytes"] == 700 * MiB
    assert "vramscope: full report:" in capsys.readouterr().err
    # Its report is the one a handler of the same OOM returns, without writing another.
    assert oom.report_exception(RuntimeError(MESSAGE), 0) == postmortem.last_report()


def test_an_error_raised_by_the_call_that_ran_out_is_taken_for_its_oom(postmortem):
    # cuDNN tries each engine's workspace; when every one runs out it raises "GET was unable to
    # find an engine to execute this computation", a RuntimeError, after the observer saw the
    # allocator's OOM in that same call. Here a C call (a list over a dict's keys) calls the
    # observer, as the allocator does, and then raises its own RuntimeError.
    pytest.importorskip("torch")
    keys = {0: 0}

    class Growing(CountingAgent):
        def oom_snapshot(self):
            keys[len(keys)] = 0  # the dict changes size: the iteration raises after the observer
            return super().oom_snapshot()

    with installed(Growing(snapshot=True)):
        with pytest.raises(RuntimeError, match="changed size") as info:
            list(map(postmortem.on_oom, iter(keys)))
        assert postmortem.oom_of(info.value) is info.value
        assert oom.report_exception(info.value, 0) == postmortem.last_report()
        # The same error from another call is the program's own.
        with pytest.raises(RuntimeError, match="changed size") as other:
            for key in keys:
                keys[key + len(keys)] = 0
        assert postmortem.oom_of(other.value) is None


def test_an_oom_the_step_went_on_after_is_marked_survived(postmortem, tmp_path, capsys):
    # cuDNN catches a workspace that does not fit and tries a smaller one: the observer saw an
    # OOM, and the step ended all the same. Its report says so and counts no more against
    # VRAMSCOPE_OOM_MAX_REPORTS, so the OOM that later fails the program still gets its own.
    pytest.importorskip("torch")
    from vramscope.steps.monitor import Monitor

    with installed(CountingAgent(snapshot=True)), Monitor(every=0) as mon:
        for _ in range(3):
            postmortem.on_oom(0)  # three caught OOMs in one step: the report limit
        first = postmortem.last_report()
        mon.step()
        assert postmortem.reports_written == 0
        postmortem.on_oom(0)  # caught, and then the one that fails the program
        postmortem.on_oom(0)
        failing = postmortem.last_report()
        assert oom.report_exception(RuntimeError(MESSAGE), 0) == failing
    written = {p.name: json.loads(p.read_text())["survived"]
               for p in tmp_path.glob("vramscope-oom-*.json")}
    assert len(written) == 5 and sum(written.values()) == 4, written
    assert written[pathlib.Path(failing["json"]).name] is False
    assert written[pathlib.Path(first["json"]).name] is True
    assert "went on after this OOM" in pathlib.Path(first["txt"]).read_text()
    assert capsys.readouterr().err.count("vramscope: the program went on after the OOM") == 4


def test_an_oom_not_measured_is_judged_with_the_optimizer_the_scene_found(postmortem,
                                                                           monkeypatch):
    # A first step's OOM under `vramscope run` comes before the model probe found the model;
    # when the step cannot be run again, the estimates still weigh the optimizer the scene
    # found (its full state and its step's temporaries, the model's parameters and blocks).
    torch = pytest.importorskip("torch")
    from vramscope.postmortem import measure as measure_module
    from vramscope.postmortem import scene as scene_module

    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)])
    optimizer = torch.optim.AdamW(model.parameters())
    params = sum(p.numel() * 4 for p in model.parameters())
    monkeypatch.setattr(measure_module, "measure", lambda scene, e, seconds: "not run")
    monkeypatch.setattr(scene_module, "capture", lambda frames, at_oom: scene_module.OomScene(
        model, [], optimizer))
    with installed(CountingAgent(snapshot=True)):
        postmortem.on_oom(0)
        paths = postmortem.measure_and_report(RuntimeError(MESSAGE), echo=False)
    written = json.loads(pathlib.Path(paths["json"]).read_text())
    assert (written["optimizer"], written["parameter_bytes"]) == ("AdamW", params)
    assert written["optimizer_state_full_bytes"] == 2 * params
    assert written["optimizer_temporary_bytes"] == params
    assert written["block_lists"] == [["", "Linear", 4]]


def test_the_measurements_own_ooms_write_no_report(postmortem, tmp_path, monkeypatch):
    # Measuring the failing step again probes slices that may run out of memory: the observer
    # sees those OOMs too, and they are the measurement's, not the program's.
    torch = pytest.importorskip("torch")
    from vramscope.postmortem import measure as measure_module
    from vramscope.postmortem import scene as scene_module

    def measuring(scene, e, seconds):
        postmortem.on_oom(0)  # a probe that ran out
        return "measured (a stand-in)"

    monkeypatch.setattr(measure_module, "measure", measuring)
    monkeypatch.setattr(scene_module, "capture",
                        lambda frames, at_oom: scene_module.OomScene(torch.nn.Linear(2, 2), []))
    with installed(CountingAgent(snapshot=True)):
        postmortem.on_oom(0)
        paths = postmortem.last_report()
        assert postmortem.measure_and_report(RuntimeError(MESSAGE), echo=False) == paths
    assert sorted(tmp_path.glob("vramscope-oom-*.json")) == [pathlib.Path(paths["json"])]
    assert postmortem.observer_calls() == 1 and postmortem.last_report() == paths
    written = json.loads(pathlib.Path(paths["json"]).read_text())
    assert written["measure_note"] == "measured (a stand-in)"


def test_an_oom_in_a_backward_is_run_again_with_autograd_and_the_forwards_autocast(postmortem):
    # The autograd engine runs a backward with grad mode off, and without the autocast the
    # forward ran under: read on the OOM's thread alone, the step would be run again forward
    # only, without autocast (a need of the parameters and one layer's output). The observer
    # is called from inside the backward, as the agent calls it on the failing thread.
    torch = pytest.importorskip("torch")
    from vramscope.attribution.model_probe import ModelProbe

    class Failing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            postmortem.on_oom(0)
            return grad

    model = torch.nn.Linear(4, 4)
    probe = ModelProbe()
    probe.attach(model)

    def provider(device, stack):
        return probe.evidence(*stack) if stack is not None else probe.evidence()

    oom.add_provider(provider)
    was = torch.get_autocast_dtype("cuda")
    try:
        with installed(CountingAgent(snapshot=True)):
            # autocast's switch for CUDA, as torch.autocast("cuda", dtype=torch.bfloat16)
            # sets it (the host's tensors are not cast by it).
            torch.set_autocast_dtype("cuda", torch.bfloat16)
            torch.set_autocast_enabled("cuda", True)
            try:
                loss = Failing.apply(model(torch.ones(2, 4))).sum()
            finally:
                torch.set_autocast_enabled("cuda", False)
            loss.backward()
    finally:
        torch.set_autocast_dtype("cuda", was)
        oom.remove_provider(provider)
        probe.close()
    assert postmortem.oom_modes == (True, torch.bfloat16)
    written = json.loads(pathlib.Path(postmortem.last_report()["json"]).read_text())
    assert written["phase"] == "backward" and written["grad_enabled"] is True
    assert written["autocast"] is True and written["autocast_dtype"] == "bfloat16"
    # A later OOM the observer did not see (written from its exception) is not run again in
    # this one's modes.
    with installed(CountingAgent(snapshot=True)):
        assert oom.report_exception(RuntimeError(MESSAGE), postmortem.observer_calls())
    assert postmortem.oom_modes is None and postmortem.oom_site is None


def test_the_extensions_snapshot_taken_now_is_the_fallbacks_one_read(tmp_path):
    # The real extension on torch's CPU tensors (its CPU proxy, device 0): the snapshot taken
    # now has the observer's keys, and the fallback writes its report from it and marks the
    # OOM in the agent. A process of its own: an attach cannot be undone.
    pytest.importorskip("torch")
    pytest.importorskip("vramscope._agent", reason="the agent extension is not built")
    code = textwrap.dedent(f"""
        import json, torch
        from vramscope import _agent
        from vramscope._core import torchcheck
        from vramscope._core.session import SESSION
        from vramscope.postmortem import oom
        _agent.load_torch(str(torchcheck.find_library(torch)[0]))
        _agent._bench_attach_cpu_proxy(10.0)
        kept = torch.empty(3 << 20, dtype=torch.uint8)
        snapshot = _agent.oom_snapshot_now(0)
        try:
            _agent.oom_snapshot_now(1)
        except IndexError as e:
            wrong = str(e)
        SESSION.adopt(_agent, lambda: 0, is_agent=True)
        paths = oom.report_exception(RuntimeError({MESSAGE!r}), oom.observer_calls())
        print(json.dumps({{"keys": sorted(snapshot), "wrong": wrong, "paths": paths,
                           "noted": _agent.last_oom()["requested_bytes"],
                           "driver": [snapshot["driver_process_bytes"],
                                      snapshot["driver_breakdown"]]}}))
    """)
    out = run_python(["-c", code], VRAMSCOPE_OOM_DIR=str(tmp_path),
                     VRAMSCOPE_OOM_MEASURE="0")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["keys"] == sorted(["device", "oom", "stats", "driver_process_bytes",
                                     "driver_breakdown", "segments", "recent_events", "ops",
                                     "categories"])
    assert result["wrong"] == "no such device"
    # No NVML name for the CPU proxy's device and no pairing: unknown, not zero.
    assert result["driver"] == [None, None]
    written = json.loads(pathlib.Path(result["paths"]["json"]).read_text())
    assert written["from_exception"] is True and written["requested_bytes"] == 256 * MiB
    assert result["noted"] == 256 * MiB


def test_the_package_fills_the_sessions_slot_with_the_one_post_mortem():
    assert vramscope.oom.report_exception is oom.report_exception
    assert isinstance(oom.POSTMORTEM, oom.PostMortem)
    assert oom.POSTMORTEM.session is SESSION


def test_no_module_of_the_post_mortem_keeps_state_in_globals():
    room = pathlib.Path(oom.__file__).parent
    for path in sorted(room.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not any(isinstance(node, ast.Global) for node in ast.walk(tree)), path.name


class TrainingFailed(Exception):
    """A program's own error, raised from the OOM it caught (``raise ... from``)."""


def test_an_oom_wrapped_in_the_programs_own_error_still_gets_its_report(postmortem):
    """A framework or a program that re-raises the OOM as its own error (``raise X from e``):
    the OOM in its cause chain is the one reported, once; an error merely raised while an OOM
    was handled (``__context__``) is the program's own failure, and gets none."""
    with installed(CountingAgent()):
        try:
            try:
                raise RuntimeError(MESSAGE)
            except RuntimeError as oom_error:
                raise TrainingFailed("the training step failed") from oom_error
        except TrainingFailed as wrapped:
            paths = oom.report_exception(wrapped, oom.observer_calls())
            assert oom.report_exception(wrapped, oom.observer_calls()) is None  # once
        assert paths is not None
        written = json.loads(pathlib.Path(paths["json"]).read_text())
        assert written["requested_bytes"] == 256 * MiB
        try:
            try:
                raise RuntimeError(MESSAGE)
            except RuntimeError:
                raise TrainingFailed("cleanup failed")  # noqa: B904 -- the point of the test
        except TrainingFailed as unrelated:
            assert oom.report_exception(unrelated, oom.observer_calls()) is None
