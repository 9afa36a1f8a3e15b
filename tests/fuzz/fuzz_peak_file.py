# tests/fuzz/fuzz_peak_file.py -- structure-aware fuzzing of `fit`'s peak-file reader (atheris)
"""Feeds ``vramscope.predict.peak_file.parse_report`` (and, for one input in 16, the whole
``read_peak_file`` through a real file) what a hostile probe could write.

Half the mutations know the format: the input is parsed as JSON and one thing is changed -- a
number set to an edge (2^50 - 1, 2^50, 2^64 - 1, -1, 0, true, 2.5, "3", null), a key dropped,
added or doubled, a record copied many times, a list or object put where the other belongs,
the value nested deep, ``NaN``/``Infinity`` written in, the version or outcome changed -- and
written back; the other half are libFuzzer's byte mutations. Every input must either be
refused with PeakFileError or give a report that holds every promise of docs/json-schema.md
(and that `fit` turns into a probe and a budget without an exception); anything else is a
crash. Run by tools/fuzz.sh with libFuzzer's flags (-rss_limit_mb, -timeout, -max_total_time):

    PYTHONPATH=python python tests/fuzz/fuzz_peak_file.py -max_total_time=60 CORPUS
    python tests/fuzz/fuzz_peak_file.py --write-seeds DIR     (the seeds: honest reports)
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile

import atheris

with atheris.instrument_imports():
    from vramscope.predict import peak_file
    from vramscope.predict.budget import DeviceMemory, resolve_budget
    from vramscope.predict.peak_file import (
        MAX_BYTES,
        DeviceReport,
        PeakFileError,
        PeakReport,
        StepPeak,
    )

GiB = 1 << 30
#: Numbers at the edges of every bound the reader has.
EDGES = [0, 1, -1, MAX_BYTES - 1, MAX_BYTES, 2**63 - 1, 2**64 - 1, -(2**63), 1023, 1024,
         2**62 - 1, 2**62, True, False, None, 2.5, 1.0, 0.0, 1e308, -0.0, "3", "", [], {}]
_FOLDER = tempfile.mkdtemp(prefix="vramscope-fuzz-peak-")


def seeds() -> list[bytes]:
    """Honest reports: every outcome, one and several devices, a cap, no step."""
    def report(outcome: str, devices: int, steps: int, fraction: float = 1.0) -> bytes:
        return peak_file.encode_report(PeakReport(
            outcome,
            tuple(StepPeak(s, d, (3 + d) * GiB, (4 + d) * GiB, (7 + 2 * d) * GiB // 2, GiB, 1)
                  for s in range(1, steps + 1) for d in range(devices)),
            tuple(DeviceReport(d, 80 * GiB, 70 * GiB, (4 + d) * GiB, fraction)
                  for d in range(devices))))

    return [report("measured", 1, 3), report("ended", 2, 2, 0.5),
            report("out_of_memory", 1, 0), report("measured", 8, 3)]


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node[:8]):
            yield from _paths(value, prefix + (i,))


def _mutate_doc(doc, rng: random.Random):
    """One structural change to ``doc`` (in place where it can); returns the new document."""
    paths = list(_paths(doc))
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    choice = rng.randrange(9)
    if not path:  # the top itself
        return rng.choice([[doc], [], "x", 0, None, {"steps": doc}])
    key = path[-1]
    if choice <= 3:
        parent[key] = rng.choice(EDGES)
    elif choice == 4 and isinstance(parent, dict):
        del parent[key]
    elif choice == 5 and isinstance(parent, dict):
        name = rng.choice(["extra", "step", "device", "format", "version"])
        parent[name + rng.choice(["", "_"])] = 1
    elif choice == 6 and isinstance(parent[key], list) and parent[key]:
        # Bounded: the mutator itself must not need gigabytes (the limit is the reader's).
        factor = rng.choice([2, 100, 9000])
        if len(parent[key]) * factor <= 10000:
            parent[key] = parent[key] * factor
    elif choice == 7:
        value = parent[key]
        for _ in range(rng.choice([2, 50, 5000])):
            value = [value]
        parent[key] = value
    else:
        value = parent[key]
        if isinstance(value, int) and not isinstance(value, bool):
            parent[key] = value + rng.choice([-1, 1, MAX_BYTES, -MAX_BYTES, 2**64])
        else:
            parent[key] = rng.choice(["measured", "ended", "out_of_memory", "oom", 2, 0])
    return doc


def mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.5:
        return atheris.Mutate(data, max_size)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        doc = json.loads(rng.choice(seeds()))
    if len(data) > max_size:
        return atheris.Mutate(data[:max_size], max_size)
    try:
        doc = _mutate_doc(doc, rng)
        text = json.dumps(doc)
    except (RecursionError, ValueError, TypeError):
        return atheris.Mutate(data, max_size)
    # Spellings json.dumps never writes: NaN, a key twice, an int of many digits.
    trick = rng.randrange(8)
    if trick == 0:
        text = text.replace("1.0", rng.choice(["NaN", "Infinity", "-Infinity"]), 1)
    elif trick == 1 and f'"version": {peak_file.VERSION}' in text:
        version = f'"version": {peak_file.VERSION}'
        text = text.replace(version, f"{version}, {version}", 1)
    elif trick == 2:
        text = text.replace("0", "9" * rng.choice([20, 5000]), 1)
    out = text.encode()
    return out[:max_size] if len(out) > max_size else out


def _check(report: PeakReport) -> None:
    """The promises of an accepted report (docs/json-schema.md), and `fit`'s use of it."""
    assert report.outcome in peak_file.OUTCOMES
    totals = {d.device: d.total_bytes for d in report.devices}
    assert len(totals) == len(report.devices)
    for d in report.devices:
        assert type(d.total_bytes) is int and 1 <= d.total_bytes < MAX_BYTES
        assert 0 <= d.free_bytes <= d.total_bytes and 0 <= d.reserved_bytes <= d.total_bytes
        assert 0.0 < d.fraction <= 1.0
        budget = resolve_budget("card", DeviceMemory(d.total_bytes, d.free_bytes,
                                                     d.reserved_bytes, d.fraction))
        assert 0 <= budget.bytes <= d.total_bytes
    for s in report.steps:
        assert s.device in totals
        for value in (s.peak_allocated_bytes, s.peak_reserved_bytes):
            assert type(value) is int and 0 <= value <= totals[s.device]
    assert peak_file.parse_report(peak_file.encode_report(report)) == report
    if report.steps:
        from vramscope.predict.probe import probe_of

        probe, device = probe_of(report, 1)
        assert probe.peak_reserved_bytes <= totals[device]


def test_one(data: bytes) -> None:
    try:
        if data[:1] == b"\x00" and len(data) % 16 == 0:
            path = os.path.join(_FOLDER, "p.json")
            if os.path.lexists(path):
                os.unlink(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            report = peak_file.read_peak_file(path)
        else:
            report = peak_file.parse_report(data)
    except PeakFileError as e:
        assert "\n" not in str(e), str(e)
        return
    _check(report)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        os.makedirs(sys.argv[2], exist_ok=True)
        for i, seed in enumerate(seeds()):
            with open(os.path.join(sys.argv[2], f"seed-{i}.json"), "wb") as f:
                f.write(seed)
        return
    atheris.Setup(sys.argv, test_one, custom_mutator=mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
