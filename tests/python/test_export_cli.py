# tests/python/test_export_cli.py -- `vramscope export` of a recording made by the test (NVML double)
from __future__ import annotations

import json
import pathlib
import struct
import subprocess

import pytest

from _exporter_paths import cli_binary, double_env, nvml_double


@pytest.fixture
def recording(tmp_path):
    if cli_binary() is None or nvml_double() is None:
        pytest.skip("vramscope binary or NVML test double not built")
    env = double_env("two_gpus.json", tmp_path)
    path = tmp_path / "run.vsrec"
    subprocess.run([str(cli_binary()), "record", "-o", str(path), "--interval", "10ms", "--duration", "200ms"],
                   env=env, check=True, capture_output=True, timeout=60)
    return path, env


def export(recording, *args):
    path, env = recording
    return subprocess.run([str(cli_binary()), "export", str(path), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_all_formats_in_one_pass(recording, tmp_path):
    out = tmp_path / "out"
    result = export(recording, "--trace", str(tmp_path / "t.json"), "--csv", str(tmp_path / "d.csv"),
                    "--csv-processes", str(tmp_path / "p.csv"), "--jsonl", str(tmp_path / "s.jsonl"),
                    "--tensorboard", str(out))
    assert result.returncode == 0, result.stderr
    samples = len((tmp_path / "s.jsonl").read_text().splitlines())
    assert samples >= 3
    assert f"exported {samples} samples" in result.stderr
    for line in (tmp_path / "s.jsonl").read_text().splitlines():
        assert len(json.loads(line)["devices"]) == 2
    csv_lines = (tmp_path / "d.csv").read_text().splitlines()
    assert csv_lines[0].startswith("timestamp_ns,") and len(csv_lines) == 1 + 2 * samples

    trace = json.loads((tmp_path / "t.json").read_text())
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert {"GPU0 used", "GPU1 used", "GPU0 free"} <= names
    assert any(name.endswith("driver used") for name in names)
    assert all(isinstance(e["args"]["bytes"], int) for e in counters)
    process_names = [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert any(name.startswith("GPU 0 (") for name in process_names)

    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(str(out), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    assert len(acc.Scalars("driver/gpu0/used_bytes")) == samples
    assert all(oct(f.stat().st_mode & 0o777) == "0o600" for f in out.iterdir())


def test_refuses_to_overwrite_without_force(recording, tmp_path):
    target = tmp_path / "t.json"
    assert export(recording, "--trace", str(target)).returncode == 0
    again = export(recording, "--trace", str(target))
    assert again.returncode == 1 and "--force" in again.stderr
    assert export(recording, "--trace", str(target), "--force").returncode == 0


def test_usage_errors(recording, tmp_path):
    none = export(recording)
    assert none.returncode == 2 and "at least one output" in none.stderr
    path, env = recording
    foreign = tmp_path / "foreign.vsrec"
    foreign.write_bytes(b"not a recording at all")
    bad = subprocess.run([str(cli_binary()), "export", str(foreign), "--trace", str(tmp_path / "x.json")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.startswith("vramscope: ")


def test_max_events_bounds_the_trace(recording, tmp_path):
    result = export(recording, "--trace", str(tmp_path / "t.json"), "--max-events", "5")
    assert result.returncode == 0, result.stderr
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["max_events"] == 5
    assert trace["otherData"]["dropped_events"] > 0 and "dropped by --max-events" in result.stderr


GPU0 = "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00"  # tests/data/nvml/two_gpus.json
CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")


def fake_agent_binary():
    from _exporter_paths import build_dir
    path = build_dir() / "tests" / "cpp" / "top_fake_agent"
    return path if path.is_file() else None


def expected_categories(peak_requested_bytes):
    # top_fake_agent's rule: 1/2, 1/4, ... of the peak, the rest to "other".
    left, out = peak_requested_bytes, {}
    for name in CATEGORIES[:-1]:
        out[name] = left // 2
        left -= out[name]
    out[CATEGORIES[-1]] = left
    return out


def test_a_step_with_categories_reaches_every_export(tmp_path):
    """An agent's step with a category breakdown, recorded by `vramscope record`, comes out of
    `export` in the step CSV, the TensorBoard run (read by TensorBoard's own reader) and the
    trace with the same bytes."""
    if cli_binary() is None or nvml_double() is None or fake_agent_binary() is None:
        pytest.skip("vramscope binary, NVML test double or top_fake_agent not built")
    env = double_env("two_gpus.json", tmp_path)
    allocated, reserved = 3 << 30, 4 << 30
    agent = subprocess.Popen([str(fake_agent_binary()), GPU0, str(allocated), str(reserved), "0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=dict(env, VRAMSCOPE_FAKE_AGENT_STEP="1"))
    path = tmp_path / "run.vsrec"
    try:
        assert agent.stdout.readline().startswith("ready"), "the fake agent did not start"
        subprocess.run([str(cli_binary()), "record", "-o", str(path), "--interval", "10ms",
                        "--duration", "200ms"], env=env, check=True, capture_output=True,
                       timeout=60)
    finally:
        agent.stdin.close()
        agent.wait(timeout=30)
    want = expected_categories(allocated)
    out = tmp_path / "out"
    result = export((path, env), "--csv-steps", str(out / "steps.csv"), "--tensorboard",
                    str(out / "tb"), "--trace", str(out / "trace.json"))
    assert result.returncode == 0, result.stderr

    import csv
    rows = [r for r in csv.DictReader(open(out / "steps.csv", newline="")) if r["step"] == "42"]
    assert len(rows) == 1, rows
    assert {n: int(rows[0][f"category_{n}_bytes"]) for n in CATEGORIES} == want, rows[0]

    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(str(out / "tb"),
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    for name in CATEGORIES:
        events = acc.Scalars(f"memory/rank0/cuda0/category/{name}_bytes")
        assert [(e.step, e.value) for e in events] == [(42, float(want[name]))], (name, events)

    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    for name in CATEGORIES:
        counters = [e for e in events if e.get("ph") == "C" and e.get("name", "").endswith(
            f"step peak {name}")]
        assert counters and any(want[name] in e["args"].values() for e in counters), \
            (name, counters)


def float32(value: int) -> float:
    """`value` as TensorBoard stores a scalar (float32 simple_value)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def test_the_settled_non_pytorch_bytes_of_a_real_recording_reach_tensorboard_and_the_trace(tmp_path):
    """The bundled H200 recording (format 4) carries the agent's settled pairings: its export has
    them per sample, as TensorBoard's own reader and the trace show, equal to the JSON lines."""
    if cli_binary() is None:
        pytest.skip("vramscope binary not built")
    recording = pathlib.Path(__file__).resolve().parents[2] / "data" / "h200-training.vsrec"
    out = tmp_path / "out"
    result = export((recording, None), "--jsonl", str(out / "s.jsonl"), "--tensorboard",
                    str(out / "tb"), "--trace", str(out / "trace.json"))
    assert result.returncode == 0, result.stderr
    settled = []  # (step, non-PyTorch, context) of every agent record with a pairing
    for line in (out / "s.jsonl").read_text().splitlines():
        for agent in json.loads(line)["allocators"]:
            if agent["driver_parts"] is not None:
                parts = agent["driver_parts"]
                settled.append((agent["step"], parts["non_pytorch_bytes"], parts["context_bytes"]))
    assert len(settled) > 100, len(settled)

    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(str(out / "tb"),
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    [non_pytorch] = [t for t in tags if t.endswith("/non_pytorch_bytes")]
    [context] = [t for t in tags if t.endswith("/non_pytorch/context_bytes")]
    assert [(e.step, e.value) for e in acc.Scalars(non_pytorch)] == \
        [(step, float32(value)) for step, value, _ in settled]
    assert [e.value for e in acc.Scalars(context)] == [float32(c) for _, _, c in settled]

    trace = json.loads((out / "trace.json").read_text())
    counters = [e["args"]["bytes"] for e in trace["traceEvents"]
                if e.get("ph") == "C" and e["name"].endswith(" non-PyTorch")]
    # Written when the value changes (and once more at the end): every value is a settled one.
    assert counters and set(counters) <= {value for _, value, _ in settled}, counters
