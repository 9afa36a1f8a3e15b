# tests/python/steps/test_tensorboard_sink.py -- Monitor's TensorBoard sink: run dirs, tags, writers
from __future__ import annotations

import dataclasses
import os
import re
import struct
import time

import pytest

from vramscope.tensorboard import TensorBoardSink, open_writer

from conftest import run_python


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
    peaks_exact: bool = True


RECORD = Record(step=3, device=1, rank=1, world_size=2, allocated_bytes=1 << 30, reserved_bytes=2 << 30,
                peak_allocated_bytes=3 << 20, peak_reserved_bytes=4 << 20, peak_requested_bytes=5)


def _agent():
    pytest.importorskip("torch")  # the extension binds to the libc10 torch loaded first
    return pytest.importorskip("vramscope._agent", reason="the agent extension is not built")


def test_tag_scheme():
    # The exporter's tables (src/exporters/include/vramscope/exporters/tensorboard.hpp), handed over by the extension.
    step_scalars = _agent().tensorboard_step_scalars
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
    # A polled record (the agent's own polling, the Python fallback): the peaks get a mark beside
    # them, a chart that exists only for runs whose peaks are not exact.
    polled = step_scalars(dataclasses.replace(RECORD, peaks_exact=False))
    assert polled[5] == ("memory/cuda1/step_peaks_sampled", 1.0)
    assert polled[:5] == step_scalars(RECORD)
    assert not any("sampled" in tag for tag, _ in step_scalars(RECORD))


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
    _agent()  # the tags come from the extension, whatever the writer
    writer = UserWriter()
    sink = TensorBoardSink(writer, rank=1)
    sink.write_step(RECORD)
    sink.close()
    assert writer.calls[0] == ("memory/rank1/cuda1/allocated_bytes", float(1 << 30), 3)
    assert len(writer.calls) == 5
    assert not writer.closed and writer.flushed == 1
    assert sink.logdir is None


def test_directory_target_reads_back_in_tensorboard(tmp_path):
    _agent()
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


# ----- which writer a directory target gets: native, else SummaryWriter, else a clear error

EVENT_FILE = re.compile(r"events\.out\.tfevents\.\d{10}\.[^./][^/]*\.(\d+)\.\d+$")


def _native_writer_class():
    return _agent().TensorBoardWriter


def test_native_writer_is_first_choice_and_reads_back_exactly(tmp_path):
    native = _native_writer_class()
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    writer = open_writer(str(tmp_path / "a" / "run"))
    assert isinstance(writer, native)
    # Above 2^24 float32 rounds: the file holds float32(value), as TensorBoard's own writer does.
    values = [(1, 5.0), (2, float(3 << 20)), (3, float((1 << 33) + 12345)), (7, 0.0)]
    for step, value in values:
        writer.add_scalar("memory/cuda0/step_peak_allocated_bytes", value, step, 1_700_000_000.5 + step)
    writer.add_scalar("other", 1.5)  # defaults: step 0, now
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_scalar("late", 1.0, 1, 1.0)

    files = list((tmp_path / "a" / "run").iterdir())
    assert [f.name for f in files] == [os.path.basename(writer.path)]
    match = EVENT_FILE.match(files[0].name)
    assert match and int(match.group(1)) == os.getpid(), files[0].name
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    for d in (tmp_path / "a", tmp_path / "a" / "run"):
        assert oct(d.stat().st_mode & 0o777) == "0o700", d

    acc = ea.EventAccumulator(str(tmp_path / "a" / "run"))
    acc.Reload()
    got = [(e.step, e.value, e.wall_time) for e in acc.Scalars("memory/cuda0/step_peak_allocated_bytes")]
    assert got == [(s, float(struct.unpack("f", struct.pack("f", v))[0]), 1_700_000_000.5 + s)
                   for s, v in values]
    other = acc.Scalars("other")
    assert [(e.step, e.value) for e in other] == [(0, 1.5)]
    assert abs(other[0].wall_time - time.time()) < 600


def test_native_writer_rejects_bad_arguments(tmp_path):
    native = _native_writer_class()
    with pytest.raises(ValueError, match="empty log_dir"):
        native("")
    (tmp_path / "file").write_text("")
    with pytest.raises(RuntimeError, match="not a directory"):
        native(str(tmp_path / "file" / "run"))
    writer = native(str(tmp_path / "run"))
    with pytest.raises(ValueError, match="empty tag"):
        writer.add_scalar("", 1.0, 1, 1.0)
    with pytest.raises(ValueError, match="global_step"):
        writer.add_scalar("t", 1.0, -1, 1.0)
    with pytest.raises(ValueError, match="walltime"):
        writer.add_scalar("t", 1.0, 1, float("nan"))
    writer.close()


def test_two_native_writers_in_one_directory_get_distinct_files(tmp_path):
    native = _native_writer_class()
    first, second = native(str(tmp_path)), native(str(tmp_path))
    assert first.path != second.path
    first.close()
    second.close()
    assert len(list(tmp_path.iterdir())) == 2


FALLBACK = """
import sys
sys.modules["vramscope._agent"] = None          # as if the extension were not built
if "no-tensorboard" in sys.argv:
    sys.modules["torch.utils.tensorboard"] = None  # as if the tensorboard package were absent
from vramscope.tensorboard import TensorBoardSink, open_writer
try:
    TensorBoardSink(sys.argv[1])
except RuntimeError as e:
    print("sink:", e)
try:
    writer = open_writer(sys.argv[1])
except RuntimeError as e:
    print("RuntimeError:", e)
else:
    print(type(writer).__module__ + "." + type(writer).__name__)
    writer.close()
"""


def test_without_the_extension_the_sink_says_so_and_open_writer_takes_summary_writer(tmp_path):
    pytest.importorskip("torch.utils.tensorboard")
    out = run_python(["-c", FALLBACK, str(tmp_path / "run")])
    assert out.returncode == 0, out.stderr
    sink, writer = out.stdout.strip().split("\n")
    # The tag scheme is the extension's: no extension, no TensorBoard scalars from a Monitor.
    assert sink == "sink: vramscope: tensorboard_dir needs the vramscope agent extension, which " \
                   "holds the tag scheme (it is not built or cannot load here)", sink
    assert writer == "torch.utils.tensorboard.writer.SummaryWriter"
    assert any(EVENT_FILE.match(f.name) for f in (tmp_path / "run").iterdir())


def test_without_extension_and_tensorboard_the_error_says_what_to_install(tmp_path):
    pytest.importorskip("torch")
    out = run_python(["-c", FALLBACK, str(tmp_path / "run"), "no-tensorboard"])
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().split("\n")[-1]
    assert line.startswith("RuntimeError: vramscope: tensorboard_dir needs"), line
    assert "pip install tensorboard" in line and "SummaryWriter" in line, line
