# tests/python/test_tensorboard.py -- our C++ event files read back by TensorBoard's own reader
from __future__ import annotations

import pathlib
import subprocess

import pytest

from _exporter_paths import fixture_binary

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

GIB = 1 << 30
MIB = 1 << 20


def load(run_dir: pathlib.Path):
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return acc


@pytest.fixture
def event_file(tmp_path):
    binary = fixture_binary()
    if binary is None:
        pytest.skip("exporters_fixture not built (build the C++ tests: VRAMSCOPE_TEST=ON)")
    out = subprocess.run([str(binary), "tensorboard", str(tmp_path / "run")], capture_output=True, text=True,
                         check=True, timeout=60)
    return pathlib.Path(out.stdout.strip())


def test_every_tag_and_value_reads_back(event_file):
    acc = load(event_file.parent)
    tags = set(acc.Tags()["scalars"])
    expected = {
        "driver/gpu0/used_bytes", "driver/gpu0/free_bytes", "driver/gpu0/reserved_bytes", "driver/gpu0/total_bytes",
        "driver/gpu1/used_bytes", "driver/gpu1/free_bytes", "driver/gpu1/total_bytes",
        "custom/answer",
    }
    for rank in (0, 1):
        for name in ("allocated_bytes", "reserved_bytes", "requested_bytes", "active_bytes",
                     "step_peak_allocated_bytes", "step_peak_reserved_bytes", "step_peak_requested_bytes"):
            expected.add(f"memory/rank{rank}/cuda0/{name}")
    expected.add("memory/rank1/cuda0/oom_requested_bytes")
    # Rank 0's steps carry categories, rank 1's do not.
    categories = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")
    expected.update(f"memory/rank0/cuda0/category/{name}_bytes" for name in categories)
    # Rank 0's agent has a settled driver pairing (NCCL 2.28.9, which reports none): non-PyTorch
    # and its measured parts per sample.
    expected.update(f"memory/rank0/cuda0/{name}" for name in (
        "non_pytorch_bytes", "non_pytorch/context_bytes", "non_pytorch/other_bytes", "private_pool_bytes"))
    assert tags == expected
    # Unsupported values (GPU 1 has no reserved in v1 mode, GPU 2 is lost) are absent, never 0.
    assert "driver/gpu1/reserved_bytes" not in tags and not any(t.startswith("driver/gpu2/") for t in tags)

    used = acc.Scalars("driver/gpu0/used_bytes")
    assert [e.step for e in used] == [0, 1, 2, 3, 4]
    assert [e.value for e in used] == [float((40 + i) * GIB) for i in range(5)]
    assert used[1].wall_time - used[0].wall_time == pytest.approx(1.0)

    allocated = acc.Scalars("memory/rank1/cuda0/allocated_bytes")
    assert [e.step for e in allocated] == [7, 8, 9, 10, 11]
    # simple_value is float32: compare at float32 precision.
    assert allocated[0].value == pytest.approx(13 * GIB, rel=1e-7)
    peaks = acc.Scalars("memory/rank0/cuda0/step_peak_allocated_bytes")
    assert [e.step for e in peaks] == [7, 8, 9, 10, 11]
    assert peaks[0].value == float(13 * GIB)
    optimizer_state = acc.Scalars("memory/rank0/cuda0/category/optimizer_state_bytes")
    assert [(e.step, e.value) for e in optimizer_state] == [(k, float(6 * GIB)) for k in range(7, 12)]
    temporaries = acc.Scalars("memory/rank0/cuda0/category/temporaries_bytes")
    assert [e.value for e in temporaries] == [float(3 * MIB)] * 5
    context = acc.Scalars("memory/rank0/cuda0/non_pytorch/context_bytes")
    assert [(e.step, e.value) for e in context] == [(k, float(700 * MIB)) for k in range(7, 12)]
    assert [e.value for e in acc.Scalars("memory/rank0/cuda0/non_pytorch_bytes")] == [float(764 * MIB)] * 5
    answer = acc.Scalars("custom/answer")
    assert [(e.step, e.value, e.wall_time) for e in answer] == [(3, 42.0, 1700000100.0)]
    assert acc.file_version == 2.0  # the reader parses "brain.Event:2"


def test_a_file_cut_anywhere_in_the_last_record_reads_up_to_the_cut(event_file, tmp_path):
    data = event_file.read_bytes()
    # Find the start of the last record by walking the TFRecord framing.
    pos = last = 0
    while pos < len(data):
        last = pos
        length = int.from_bytes(data[pos:pos + 8], "little")
        pos += 8 + 4 + length + 4
    assert pos == len(data)
    full = load(event_file.parent)
    before_last = {tag: len(full.Scalars(tag)) for tag in full.Tags()["scalars"] if tag != "custom/answer"}
    for cut in range(last, len(data)):
        run = tmp_path / f"cut{cut}"
        run.mkdir()
        (run / event_file.name).write_bytes(data[:cut])
        acc = load(run)
        tags = set(acc.Tags()["scalars"])
        assert "custom/answer" not in tags, cut
        assert {tag: len(acc.Scalars(tag)) for tag in tags} == before_last, cut
