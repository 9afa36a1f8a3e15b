# tests/python/test_distributed.py -- reduce_step_peaks over a real 2-rank gloo group on the CPU
from __future__ import annotations

import dataclasses
import os

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

from vramscope.distributed import reduce_step_peaks  # noqa: E402


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


def _worker(rank: int, init_file: str, result_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        records = [Record(device=d, allocated_bytes=rank, peak_allocated_bytes=(rank + 1) * 100 + d,
                          peak_reserved_bytes=(2 - rank) * 1000 + d, peak_requested_bytes=2**40 + rank)
                   for d in range(2)]
        # One group for both cases: spawning ranks (each imports torch) is the slow part.
        results = [_call(records), _call(records[:1] if rank == 1 else records)]
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            f.write("\n".join(results))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dist")
    mp.spawn(_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    return [(tmp_path / f"rank{r}").read_text().split("\n") for r in (0, 1)]


def test_every_rank_gets_the_max_and_keeps_its_own_other_fields(results):
    (rank0, _), (rank1, _) = results
    # max over ranks: allocated peak from rank 1, reserved peak from rank 0, requested exact above 2^32.
    assert rank0 == repr([(0, 0, 200, 2000, 2**40 + 1), (1, 0, 201, 2001, 2**40 + 1)])
    assert rank1 == repr([(0, 1, 200, 2000, 2**40 + 1), (1, 1, 201, 2001, 2**40 + 1)])


def test_ranks_with_different_device_counts_fail_clearly(results):
    (_, rank0), (_, rank1) = results
    assert rank0.startswith("ValueError: reduce_step_peaks: ranks passed between 1 and 2 records")
    assert rank1.startswith("ValueError:")


def test_without_a_process_group_records_are_returned_unchanged():
    records = [Record(0, 1, 2, 3, 4)]
    assert reduce_step_peaks(records) == records
