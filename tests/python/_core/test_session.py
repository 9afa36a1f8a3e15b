# tests/python/_core/test_session.py -- the session's interface: adopt, the agent capability, steps, NVML
#
# Each test makes its own Session (the process's SESSION stays untouched) and hands it a
# scripted stand-in for the C++ agent (tests/python/_vram_double.py), as a successful attach
# would; the session code itself runs unchanged.
from __future__ import annotations

import os

import pytest

from vramscope._core.session import Session
from vramscope._core.step_history import STEP_HISTORY, StepHistory

from _vram_double import FakeAgent

MiB = 1 << 20


class NvmlAgent(FakeAgent):
    """An agent whose NVML charges each (uuid, pid) asked for 100 MiB more than reserved, and
    whose attribution is running with one op holding 64 KiB."""

    def __init__(self, devices: int = 2) -> None:
        super().__init__(devices)
        self.asked: list[tuple[str, int]] = []

    def driver_process_bytes(self, uuid: str, pid: int) -> int | None:
        self.asked.append((uuid, pid))
        return self.reserved[int(uuid[-1])] + 100 * MiB

    def attribution_active(self) -> bool:
        return True

    def live_by_owner(self, device: int) -> tuple[dict[str, int], dict[int, int]]:
        return {"aten::mm": 64 << 10}, {}


def test_a_new_session_is_detached_and_has_no_agent():
    session = Session()
    assert session.mode() == "detached"
    assert session.reader is None and session.agent is None
    assert session.device_count() == 0
    assert session.driver_process_bytes(0) is None


def test_adopting_the_agent_makes_it_the_reader_and_the_capability():
    session, agent = Session(), FakeAgent(devices=3, mode="events")
    session.adopt(agent, lambda: 2, is_agent=True, uuids=["GPU-a", "GPU-b", "GPU-c"])
    assert session.reader is agent and session.agent is agent
    assert (session.device_count(), session.current(), session.mode()) == (3, 2, "events")
    # attach() on an attached session answers the mode, without looking for CUDA again (this
    # machine has none).
    assert session.attach() == "events"
    with pytest.raises(ValueError, match="interval_ms"):
        session.attach(interval_ms=0)


def test_a_polling_reader_is_no_agent():
    session, reader = Session(), FakeAgent(mode="polling: stand-in")
    session.adopt(reader, lambda: 0, is_agent=False, uuids=["GPU-0"])
    assert session.reader is reader and session.agent is None
    assert session.mode() == "polling: stand-in"
    assert session.driver_process_bytes(0) is None  # NVML is reached through the agent


def test_when_attached_runs_once_for_the_agent_whenever_it_registers():
    session, seen = Session(), []
    session.when_attached(lambda agent: seen.append(("early", agent)))
    session.adopt(FakeAgent(mode="polling: stand-in"), lambda: 0, is_agent=False)
    assert seen == []  # a polling reader has no agent to hand over
    agent = FakeAgent()
    session.adopt(agent, lambda: 0, is_agent=True)
    session.when_attached(lambda agent: seen.append(("late", agent)))
    assert seen == [("early", agent), ("late", agent)]


def test_driver_bytes_ask_nvml_by_the_devices_uuid_and_this_pid():
    session, agent = Session(), NvmlAgent(devices=2)
    agent.alloc(10 * MiB, device=1)
    session.adopt(agent, lambda: 0, is_agent=True, uuids=["GPU-0", "GPU-1"])
    assert session.driver_process_bytes(1) == agent.reserved[1] + 100 * MiB
    assert agent.asked == [("GPU-1", os.getpid())]
    assert session.driver_process_bytes(2) is None  # no such device: NVML is not asked
    assert session.driver_process_bytes(-1) is None
    assert len(agent.asked) == 1


def test_every_step_lands_in_the_history_with_the_agents_live_ops():
    session, agent = Session(), NvmlAgent(devices=2)
    session.adopt(agent, lambda: 0, is_agent=True)
    agent.alloc(3 * MiB)
    records = session.step_all()
    assert [r["device"] for r in records] == [0, 1]
    (point,) = session.history.steps(0)
    assert (point.step, point.allocated_bytes, point.peak_allocated_bytes) == (1, 3 * MiB, 3 * MiB)
    assert session.history.op_snapshots(1) == [{"aten::mm": 64 << 10}]
    assert session.history.module_snapshots(0) == []  # no module hooks are running


def test_a_polling_session_keeps_the_steps_but_no_attribution():
    session, reader = Session(), NvmlAgent()
    session.adopt(reader, lambda: 0, is_agent=False)
    session.step_all()
    assert len(session.history.steps(0)) == 1
    assert session.history.op_snapshots(0) == []


def test_the_history_is_bounded_per_device():
    history = StepHistory()
    assert history.limit == STEP_HISTORY
    for step in range(1, STEP_HISTORY + 6):
        history.record([{"device": 0, "step": step, "peak_allocated_bytes": step,
                         "allocated_bytes": step}], agent=None)
    steps = history.steps(0)
    assert len(steps) == STEP_HISTORY and (steps[0].step, steps[-1].step) == (6, STEP_HISTORY + 5)
    assert history.steps(1) == []
