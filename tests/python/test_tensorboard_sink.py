# tests/python/test_tensorboard_sink.py -- Monitor's TensorBoard sink: run dirs, tags, user writers
from __future__ import annotations

import dataclasses

import pytest

from vramscope.tensorboard import TensorBoardSink, step_scalars


@dataclasses.dataclass(frozen=True)
class Record:
    """The StepRecord fields the sink reads."""
    step: int
    device: int
    rank: int
    world_size: int
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    peak_requested_bytes: int


RECORD = Record(step=3, device=1, rank=1, world_size=2, allocated_bytes=1 << 30, reserved_bytes=2 << 30,
                peak_allocated_bytes=3 << 20, peak_reserved_bytes=4 << 20, peak_requested_bytes=5)


def test_tag_scheme():
    assert step_scalars(RECORD) == [
        ("memory/cuda1/allocated_bytes", float(1 << 30)),
        ("memory/cuda1/reserved_bytes", float(2 << 30)),
        ("memory/cuda1/step_peak_allocated_bytes", float(3 << 20)),
        ("memory/cuda1/step_peak_reserved_bytes", float(4 << 20)),
        ("memory/cuda1/step_peak_requested_bytes", 5.0),
    ]
    assert step_scalars(RECORD, qualify_rank=True)[0][0] == "memory/rank1/cuda1/allocated_bytes"
    single = dataclasses.replace(RECORD, world_size=1, rank=0)
    assert step_scalars(single, qualify_rank=True)[0][0] == "memory/cuda1/allocated_bytes"


class UserWriter:
    """Stands in for a user's SummaryWriter: anything with add_scalar is accepted."""

    def __init__(self):
        self.calls = []
        self.closed = False
        self.flushed = 0

    def add_scalar(self, tag, value, global_step, walltime):
        self.calls.append((tag, value, global_step))

    def flush(self):
        self.flushed += 1

    def close(self):
        self.closed = True


def test_user_writer_gets_rank_qualified_tags_and_is_not_closed():
    writer = UserWriter()
    sink = TensorBoardSink(writer, rank=1)
    sink.write_step(RECORD)
    sink.close()
    assert writer.calls[0] == ("memory/rank1/cuda1/allocated_bytes", float(1 << 30), 3)
    assert len(writer.calls) == 5
    assert not writer.closed and writer.flushed == 1
    assert sink.logdir is None


def test_directory_target_reads_back_in_tensorboard(tmp_path):
    pytest.importorskip("torch.utils.tensorboard")
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    sink = TensorBoardSink(tmp_path / "runs", rank=1, world_size=2)
    assert sink.logdir == str(tmp_path / "runs" / "rank1")
    for step in (1, 2, 3):
        sink.write_step(dataclasses.replace(RECORD, step=step, peak_allocated_bytes=step << 20))
    sink.close()
    acc = ea.EventAccumulator(sink.logdir)
    acc.Reload()
    peaks = acc.Scalars("memory/cuda1/step_peak_allocated_bytes")
    assert [(e.step, e.value) for e in peaks] == [(1, float(1 << 20)), (2, float(2 << 20)), (3, float(3 << 20))]
    assert oct((tmp_path / "runs").stat().st_mode & 0o777) == "0o700"
