# tests/python/steps/test_pipeline.py -- the one step pipeline: records built once, kept, and the evidence
"""StepPipeline over the scripted agent (tests/python/_vram_double.py): what a Monitor's and a
framework's pipeline put into the records, and what they give the OOM post-mortem."""
from __future__ import annotations

from vramscope._core.session import SESSION
from vramscope.steps.pipeline import StepPipeline

from _vram_double import FakeAgent, installed

MiB = 1 << 20


def test_a_step_becomes_one_record_per_followed_device_with_its_delta():
    with installed(FakeAgent(devices=2)) as agent:
        agent.alloc(3 * MiB, device=1)
        pipeline = StepPipeline(devices=[1])
        pipeline.start()  # the baseline: 3 MiB allocated before the loop
        agent.alloc(5 * MiB, device=1)
        agent.free(2 * MiB, device=1)
        agent.alloc(7 * MiB, device=0)  # not followed
        (record,) = pipeline.close_step()
        pipeline.close()
    assert (record.step, record.device, record.rank, record.world_size) == (1, 1, 0, 1)
    assert (record.allocated_bytes, record.peak_allocated_bytes) == (6 * MiB, 8 * MiB)
    assert record.delta_allocated_bytes == 3 * MiB
    assert record.categories is None and record.non_pytorch_bytes is None  # no NVML here
    assert list(pipeline.history) == [record] and pipeline.steps == 1


def test_a_frameworks_pipeline_carries_its_batch_size_and_rank_and_outranks_a_monitors():
    with installed(FakeAgent()) as agent:
        monitor = StepPipeline()
        framework = StepPipeline(framework="lightning")
        framework.follow([0])
        framework.set_rank(1, 2)
        assert agent.rank == (1, 2)  # published with the agent's stats
        framework.batch_size = 16
        for pipeline in (framework, monitor):  # the Monitor's registers last, and still loses
            pipeline.start()
        agent.alloc(4 * MiB)
        (record,) = framework.close_step()
        assert (record.rank, record.world_size, record.batch_size) == (1, 2, 16)
        merged = SESSION.evidence.merged(0, None)
        assert (merged["batch_size"], merged["batch_source"]) == (16, "lightning")
        assert [(s.step, s.peak_allocated_bytes, s.batch_size) for s in merged["steps"]] == [
            (1, 4 * MiB, 16)]
        framework.close()
        monitor.close()
        assert len(SESSION.evidence) == 0


def test_without_a_step_from_the_agent_nothing_is_kept():
    class Silent(FakeAgent):
        def step(self):
            return []

    with installed(Silent()):
        pipeline = StepPipeline()
        pipeline.start()
        assert pipeline.close_step() == [] and not pipeline.history
        pipeline.close()


def test_a_step_record_names_the_non_pytorch_parts_of_the_agents_settled_pairing():
    class PairedAgent(FakeAgent):
        """The extension's answers when its driver thread has a settled pairing."""

        def __init__(self) -> None:
            super().__init__()
            self.nccl: list[tuple[int, int, int | None]] = []

        def driver_breakdown(self, device: int) -> dict:
            return {"paired_ns": 1, "driver_bytes": 900 * MiB, "reserved_bytes": 200 * MiB,
                    "private_pool_bytes": 34 * MiB, "nccl_bytes": None,
                    "other_bytes": 64 * MiB, "context_bytes": 636 * MiB,
                    "first_context_bytes": 518 * MiB, "non_pytorch_bytes": 700 * MiB,
                    "excess_bytes": 0, "nccl_version": 0, "unsettled_count": 0}

        def set_nccl(self, device: int, version: int, nccl_bytes: int | None) -> None:
            self.nccl.append((device, version, nccl_bytes))

    with installed(PairedAgent()) as agent:
        pipeline = StepPipeline()
        pipeline.start()
        agent.alloc(4 * MiB)
        (record,) = pipeline.close_step()
        pipeline.close()
    assert (record.context_bytes, record.other_bytes) == (636 * MiB, 64 * MiB)
    assert record.nccl_bytes is None  # not reported is not zero
    assert record.private_pool_bytes == 34 * MiB
    assert agent.nccl == []  # no process group here: nothing to tell the agent


def test_a_driverless_pipeline_asks_the_agent_nothing():
    with installed(FakeAgent()) as agent:
        agent.driver_breakdown = None  # would raise if called
        pipeline = StepPipeline(driver=False)
        pipeline.start()
        (record,) = pipeline.close_step()
        pipeline.close()
    assert (record.context_bytes, record.other_bytes, record.nccl_bytes) == (None, None, None)
