# tests/python/_core/test_distributed.py -- reduce_step_peaks over a 2-rank gloo group on the CPU; NCCL's report read
from __future__ import annotations

import dataclasses
import os

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

from vramscope import Monitor  # noqa: E402
from vramscope.distributed import reduce_step_peaks  # noqa: E402
from vramscope.tensorboard import TensorBoardSink  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Record:
    device: int
    allocated_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_requested_bytes: int


def _call(records):
    try:
        return repr([dataclasses.astuple(r) for r in reduce_step_peaks(records)])
    except ValueError as e:
        return "ValueError: " + str(e)


# Peaks per (rank, step): rank 1 is worse at step 1 (allocated) and step 2 (reserved), rank 0
# at step 1 (reserved) and step 2 (allocated); requested is above 2^32 to catch narrowing.
STEP_PEAKS = {(0, 1): (300 << 20, 900 << 20, 2**33 + 1), (1, 1): (500 << 20, 700 << 20, 2**33),
              (0, 2): (800 << 20, 1000 << 20, 5), (1, 2): (100 << 20, 1200 << 20, 7)}


class _ScriptedSteps:
    """The session's reader for one rank: the agent's step() records of STEP_PEAKS (its own
    device is its rank's, of two)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.steps = 0

    def mode(self) -> str:
        return "events"

    def device_count(self) -> int:
        return 2

    def set_rank(self, rank: int, world_size: int) -> None:
        pass

    def step(self) -> list[dict]:
        self.steps += 1
        allocated, reserved, requested = STEP_PEAKS[(self.rank, self.steps)]
        return [dict(device=self.rank, step=self.steps, allocated_bytes=self.rank << 20,
                     reserved_bytes=self.rank << 21, peak_allocated_bytes=allocated,
                     peak_reserved_bytes=reserved, peak_requested_bytes=requested,
                     duration_ns=0, end_ns=0, categories=None)]


def _monitor_steps(rank: int, result_dir: str) -> str:
    # The Monitor's own step path from the agent's records on: reduction, history, printed
    # line, TensorBoard run. Monitor() learns rank and world size from the initialised group.
    from _vram_double import installed

    lines = []
    with installed(_ScriptedSteps(rank), is_agent=False):
        mon = Monitor(every=1, print_fn=lines.append, reduce_peaks=True, exit_table_rows=0)
        # Monitor.start() (which adds the tensorboard_dir sink and attaches) needs a GPU.
        sink = TensorBoardSink(os.path.join(result_dir, "tb"), rank=mon.rank,
                               world_size=mon.world_size)
        mon.add_sink(sink)
        for _ in (1, 2):
            mon.step()
        sink.close()
    return repr(([dataclasses.astuple(r) for r in mon.history], lines))


def _worker(rank: int, init_file: str, result_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        records = [Record(device=d, allocated_bytes=rank, peak_allocated_bytes=(rank + 1) * 100 + d,
                          peak_reserved_bytes=(2 - rank) * 1000 + d, peak_requested_bytes=2**40 + rank)
                   for d in range(2)]
        # One group for both cases: spawning ranks (each imports torch) is the slow part.
        results = [_call(records), _call(records[:1] if rank == 1 else records),
                   _monitor_steps(rank, result_dir)]
        with open(os.path.join(result_dir, f"rank{rank}"), "w", encoding="utf-8") as f:
            f.write("\n".join(results))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    return tmp_path


@pytest.fixture(scope="module")
def results(results_dir):
    return [(results_dir / f"rank{r}").read_text(encoding="utf-8").split("\n") for r in (0, 1)]


def test_every_rank_gets_the_max_and_keeps_its_own_other_fields(results):
    (rank0, _, _), (rank1, _, _) = results
    # max over ranks: allocated peak from rank 1, reserved peak from rank 0, requested exact above 2^32.
    assert rank0 == repr([(0, 0, 200, 2000, 2**40 + 1), (1, 0, 201, 2001, 2**40 + 1)])
    assert rank1 == repr([(0, 1, 200, 2000, 2**40 + 1), (1, 1, 201, 2001, 2**40 + 1)])


def test_ranks_with_different_device_counts_fail_clearly(results):
    (_, rank0, _), (_, rank1, _) = results
    assert rank0.startswith("ValueError: reduce_step_peaks: ranks passed between 1 and 2 records")
    assert rank1.startswith("ValueError:")


def test_without_a_process_group_records_are_returned_unchanged():
    records = [Record(0, 1, 2, 3, 4)]
    assert reduce_step_peaks(records) == records


def test_monitor_reduce_peaks_records_and_prints_the_job_peak(results):
    for rank, (_, _, monitor) in enumerate(results):
        history, lines = eval(monitor)  # our own repr of tuples, strings and ints
        expected = []
        for step in (1, 2):
            peaks = [max(STEP_PEAKS[(r, step)][i] for r in (0, 1)) for i in range(3)]
            # Only the peaks are job-wide; the rest stays this rank's own.
            # Δ allocated: from 0 before the first step (Monitor.start() takes no baseline
            # here). The trailing Nones: no per-category breakdown (Monitor(model=...) not
            # used), no non-PyTorch bytes and no parts (context, other, NCCL, private pools:
            # no agent, so no driver) and no batch size (no model forward ran).
            delta = rank << 20 if step == 1 else 0
            expected.append((step, rank, rank, 2, rank << 20, rank << 21, *peaks, delta, 0,
                             None, None, None, None, None, None, None, True))
        assert history == expected, (rank, history)
        assert lines[0].startswith(f"[rank {rank}] step 1 | cuda:{rank} ") and "step peak 500.0 MiB" in lines[0], lines
        assert "step peak 800.0 MiB" in lines[1], lines


def test_monitor_reduce_peaks_rank0_tensorboard_run_has_the_job_peak(results_dir):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    for rank in (0, 1):
        acc = ea.EventAccumulator(str(results_dir / "tb" / f"rank{rank}"))
        acc.Reload()
        got = {tag: [(e.step, e.value) for e in acc.Scalars(f"memory/cuda{rank}/{tag}")]
               for tag in ("step_peak_allocated_bytes", "step_peak_reserved_bytes")}
        assert got == {"step_peak_allocated_bytes": [(1, float(500 << 20)), (2, float(800 << 20))],
                       "step_peak_reserved_bytes": [(1, float(900 << 20)), (2, float(1200 << 20))]}, (rank, got)


def test_nccls_memory_report_is_read_from_a_number_or_a_mapping_with_a_total():
    from vramscope._core.distributed import _total_of

    assert _total_of(123) == 123
    assert _total_of({"total": 7, "current": 3}) == 7
    assert _total_of({"current": 3}) == 3
    assert _total_of({"peak": 9}) is None  # no total among its keys: not reported
    assert _total_of("12 MiB") is None


def test_no_process_group_no_nccl_report():
    from vramscope._core.distributed import nccl_memory

    assert nccl_memory() == {}
