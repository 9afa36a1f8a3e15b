# tests/gpu/test_driver_parts.py -- every byte the driver charges, named: context, other, NCCL
#
# Each scenario runs in a fresh process (driver_parts_program.py) whose non-PyTorch memory is
# known from outside: CuPy's allocation, torch's own snapshot of its pools, NVML's number for a
# process that only initialised CUDA, NCCL's version. The growth scenario is read by the
# one-shot CLI while segments move, and recorded at 10 ms and read back (VRAMSCOPE_CLI).
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import CLI, HERE, NO_CLI, gpu_env, wait_for_idle_card

MiB = 1 << 20
PAGE = 2 * MiB  # the driver's allocation granularity


def scenario(name: str) -> dict:
    wait_for_idle_card()
    out = subprocess.run([sys.executable, str(HERE / "driver_parts_program.py"), name],
                         env=gpu_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{name} failed:\n{out.stdout}\n{out.stderr}"
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("ok "), out.stdout
    return json.loads(last[3:])


def adds_up(parts: dict) -> None:
    assert parts["excess_bytes"] == 0, parts
    assert parts["driver_bytes"] == parts["reserved_bytes"] + parts["non_pytorch_bytes"], parts


def test_bare_init_is_all_context_and_equals_the_drivers_number():
    r = scenario("init")
    parts = r["parts"]
    adds_up(parts)
    assert parts["reserved_bytes"] == 0
    assert parts["other_bytes"] == 0, parts
    assert parts["context_bytes"] == r["nvml_used"], r
    assert parts["first_context_bytes"] == parts["context_bytes"]


def test_another_librarys_gigabyte_is_other_within_a_page():
    r = scenario("cupy")
    before, after = r["before"], r["after"]
    adds_up(before)
    adds_up(after)
    assert abs((after["other_bytes"] - before["other_bytes"]) - (1 << 30)) <= PAGE, r
    assert abs(after["other_bytes"] - (1 << 30)) <= PAGE, r
    assert abs(after["context_bytes"] - before["context_bytes"]) <= PAGE, r


def test_reduce_overhead_graph_pool_equals_torchs_snapshot():
    r = scenario("graphs")
    parts = r["parts"]
    adds_up(parts)
    assert r["torch_private_pool_bytes"] > 0, r["pools"]
    assert parts["private_pool_bytes"] == r["torch_private_pool_bytes"], r


def test_nccl_is_named_or_honestly_not_reported():
    r = scenario("nccl")
    parts = r["parts"]
    adds_up(parts)
    major, minor, patch = (int(v) for v in r["nccl_version"].split("."))
    assert parts["nccl_version"] == major * 10000 + minor * 100 + patch
    if parts["nccl_bytes"] is None:
        # This NCCL has no memory report: its communicator's buffers are listed in other.
        assert parts["other_bytes"] > 0, parts
    else:
        assert parts["nccl_bytes"] > 0, parts


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_frames_taken_while_segments_grow_show_the_settled_non_pytorch():
    wait_for_idle_card()
    program = subprocess.Popen([sys.executable, str(HERE / "driver_parts_program.py"), "grow"],
                               env=gpu_env(), stdout=subprocess.PIPE, text=True)
    try:
        first = program.stdout.readline()
        assert first.startswith("ready "), first
        settled = json.loads(first[6:])
        frames = []
        while program.poll() is None and len(frames) < 400:
            out = subprocess.run([CLI, "--json"], capture_output=True, text=True, timeout=60)
            doc = json.loads(out.stdout)
            for device in doc["devices"]:
                for row in device["processes"]:
                    if row["pid"] == program.pid and row["torch"] is not None:
                        frames.append((row["used_bytes"], row["torch"]))
        rest = program.stdout.read()
    finally:
        program.kill()
        program.wait()
    result = json.loads(rest.strip().splitlines()[-1][3:])
    # How many frames a machine takes depends on its speed; every frame taken is checked.
    assert frames, "no frame of the program was taken"
    naive_off = 0
    for used, torch_row in frames:
        # Every frame shows a settled value: the one before the growth, or a later settled one
        # that differs from it by no more than a page (nothing outside torch was allocated).
        assert abs(torch_row["non_pytorch_bytes"] - settled["non_pytorch_bytes"]) <= PAGE, \
            (torch_row, settled)
        naive = used - torch_row["reserved_bytes"]
        naive_off += abs(naive - settled["non_pytorch_bytes"]) > 256 * MiB
    after = result["after"]
    adds_up(after)
    assert abs(after["non_pytorch_bytes"] - settled["non_pytorch_bytes"]) <= PAGE, result
    print(f"frames {len(frames)}, frames whose driver - reserved was > 256 MiB off: {naive_off}, "
          f"driver thread CPU {result['driver_thread_cpu_s']} s")


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_a_growth_recorded_at_10ms_shows_the_settled_non_pytorch_in_every_frame(tmp_path):
    """The same growth, recorded by `vramscope run --record` at 10 ms (format 4 carries the
    agent's settled breakdown): every frame of the program read back, the peak among them, shows a
    non-PyTorch value within a page of the settled one; `top --replay --once` (the view at the
    recording's peak) says so too."""
    wait_for_idle_card()
    recording = tmp_path / "grow.vsrec"
    out = subprocess.run([CLI, "run", "--quiet", "--record", str(recording), "--interval", "10ms",
                          str(HERE / "driver_parts_program.py"), "grow"],
                         env=gpu_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}"
    lines = out.stdout.strip().splitlines()
    settled = json.loads(next(line for line in lines if line.startswith("ready "))[6:])
    result = json.loads(lines[-1][3:])
    samples = tmp_path / "samples.jsonl"
    exported = subprocess.run([CLI, "export", str(recording), "--jsonl", str(samples)],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    # The card may hold other processes with agents (pytest's own, when an in-process test
    # attached one): only the program's rows are its frames.
    frames = []  # (device used, process row) of the program, from its settled pairing on
    peak_frame = None  # (every device's used, every process row) of the sample `top` replays
    for line in samples.read_text().splitlines():
        doc = json.loads(line)
        used = sum(device["used_bytes"] or 0 for device in doc["devices"])
        if peak_frame is None or used > peak_frame[0]:
            peak_frame = (used, [row for device in doc["devices"] for row in device["processes"]])
        for device in doc["devices"]:
            for row in device["processes"]:
                parts = row["torch"] and row["torch"]["driver_parts"]
                if row["pid"] == settled["pid"] and parts and \
                        parts["paired_ns"] >= settled["paired_ns"]:
                    frames.append((device["used_bytes"], row))
    # How many samples a machine records depends on its speed; every one is checked.
    assert frames, "no sample of the program was recorded"
    naive_off = 0
    for _, row in frames:
        assert abs(row["torch"]["non_pytorch_bytes"] - settled["non_pytorch_bytes"]) <= PAGE, \
            (row, settled)
        naive = row["used_bytes"] - row["torch"]["reserved_bytes"]
        naive_off += abs(naive - settled["non_pytorch_bytes"]) > 256 * MiB
    peak_used, peak_row = max(frames, key=lambda frame: frame[0])
    assert abs(peak_row["torch"]["non_pytorch_bytes"] - settled["non_pytorch_bytes"]) <= PAGE, \
        peak_row
    adds_up(result["after"])
    # The replayed view at the recording's peak (the first sample of the largest used bytes):
    # its legend's non-torch amount, as `top` prints amounts (MiB, no decimals below 10 GiB), is
    # the sum of the agents' joined non-PyTorch there -- the program's settled one among them --
    # not driver - reserved.
    rows_at_peak = [row for row in peak_frame[1] if row["torch"] is not None]
    ours = [row for row in rows_at_peak if row["pid"] == settled["pid"]]
    assert ours and abs(ours[0]["torch"]["non_pytorch_bytes"] - settled["non_pytorch_bytes"]) \
        <= PAGE, ours
    expected = sum(row["torch"]["non_pytorch_bytes"] or 0 for row in rows_at_peak)
    top = subprocess.run([CLI, "top", "--replay", str(recording), "--once"],
                         env={**os.environ, "COLUMNS": "160", "LINES": "40"},
                         capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    shown = re.search(r"non-torch (\d+(?:\.\d)?)([KMG])", top.stdout)
    assert shown, top.stdout
    unit = 1 << {"K": 10, "M": 20, "G": 30}[shown.group(2)]
    resolution = unit // 10 if "." in shown.group(1) else unit  # the last digit printed
    assert abs(float(shown.group(1)) * unit - expected) <= resolution, \
        (shown.group(0), expected, settled["non_pytorch_bytes"], top.stdout)
    print(f"recorded frames {len(frames)}, peak {peak_used / MiB:.0f} MiB with non-PyTorch "
          f"{peak_row['torch']['non_pytorch_bytes'] / MiB:.0f} MiB (settled "
          f"{settled['non_pytorch_bytes'] / MiB:.0f} MiB); frames whose driver - reserved was "
          f"> 256 MiB off: {naive_off}; other processes with agents at the peak: "
          f"{sorted(row['pid'] for row in rows_at_peak if row['pid'] != settled['pid'])}")
    print(top.stdout)
