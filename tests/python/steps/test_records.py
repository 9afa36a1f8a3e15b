# tests/python/steps/test_records.py -- human units, step lines, the step table and leak detection
import dataclasses

import pytest

from vramscope._core.units import format_bytes, format_delta
from vramscope.steps.records import (
    LeakDetector,
    LeakReport,
    StepRecord,
    format_leak_warning,
    format_step_line,
    format_step_table,
    history_limit_deque,
)

MiB = 1 << 20
GiB = 1 << 30


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1, "1 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (MiB, "1.0 MiB"), (12 * MiB + MiB // 2, "12.5 MiB"), (1023 * MiB, "1023.0 MiB"),
    (GiB + GiB // 4, "1.2 GiB"), (141 * GiB, "141.0 GiB"), (3 << 40, "3.0 TiB"),
    (5 << 50, "5.0 PiB"), (2048 << 50, "2048.0 PiB"), (-3 * 1024, "-3.0 KiB"),
])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize("n, text", [(0, "+0 B"), (12 * MiB, "+12.0 MiB"), (-512, "-512 B")])
def test_format_delta(n, text):
    assert format_delta(n) == text


def record(step, device=0, allocated=GiB, reserved=2 * GiB, peak=3 * GiB // 2,
           peak_reserved=2 * GiB, delta=0, rank=0, world_size=1):
    return StepRecord(step=step, device=device, rank=rank, world_size=world_size,
                      allocated_bytes=allocated, reserved_bytes=reserved,
                      peak_allocated_bytes=peak, peak_reserved_bytes=peak_reserved,
                      peak_requested_bytes=peak - 100, delta_allocated_bytes=delta)


def test_step_line_single_and_multi_device(golden):
    one = format_step_line([record(7, delta=12 * MiB)])
    two = format_step_line([record(8, rank=1, world_size=2, delta=-MiB),
                            record(8, device=1, rank=1, world_size=2, allocated=512)])
    golden("step_lines.txt", one + "\n" + two + "\n")
    assert format_step_line([]) == ""


def test_rank_prefix_only_when_distributed():
    assert not format_step_line([record(1, rank=0, world_size=1)]).startswith("[rank")
    assert format_step_line([record(1, rank=0, world_size=2)]).startswith("[rank 0] step 1 |")


def test_step_table(golden):
    rows = [record(1, allocated=GiB, delta=GiB),
            record(1, device=1, allocated=300 * MiB, reserved=512 * MiB, peak=400 * MiB,
                   peak_reserved=512 * MiB, delta=300 * MiB),
            record(2, allocated=GiB + 5 * MiB, delta=5 * MiB),
            record(2, device=1, allocated=0, reserved=0, peak=0, peak_reserved=0,
                   delta=-300 * MiB)]
    golden("step_table.txt", format_step_table(rows))


CATEGORIES = {"parameters": GiB, "gradients": GiB, "optimizer_state": 2 * GiB,
              "activations": 300 * MiB, "temporaries": 12 * MiB, "other": 512}


def test_step_line_shows_categories_only_when_tracked(golden):
    tracked = dataclasses.replace(record(9, delta=MiB), categories=CATEGORIES)
    plain = record(9, device=1)
    line = format_step_line([tracked, plain])
    golden("step_line_categories.txt", line + "\n")
    assert line.count("at peak") == 1, "the untracked device gets no breakdown"
    assert format_step_line([record(9)]) == format_step_line([record(9)]).split("; at peak")[0]


def test_step_table_adds_category_columns_when_any_record_has_them(golden):
    rows = [dataclasses.replace(record(1, delta=GiB), categories=CATEGORIES),
            record(1, device=1, allocated=300 * MiB, reserved=512 * MiB, peak=400 * MiB,
                   peak_reserved=512 * MiB, delta=300 * MiB)]
    table = format_step_table(rows)
    golden("step_table_categories.txt", table)
    header = table.splitlines()[0].split()
    assert header[-6:] == ["params", "grads", "optim", "activ", "temp", "other"]
    assert table.splitlines()[2].split()[-6:] == ["-"] * 6, "no categories shows '-', never 0"
    assert "params" not in format_step_table(rows[1:]), "no columns when nobody tracks them"


def test_empty_table_is_just_the_header():
    assert format_step_table([]).count("\n") == 1


def feed(detector, values, device=0):
    return [detector.observe(device, v) for v in values]


def test_leak_reported_once_after_n_growing_steps():
    d = LeakDetector(steps=3, threshold_bytes=MiB)
    reports = feed(d, [10 * MiB, 11 * MiB, 12 * MiB, 13 * MiB, 14 * MiB, 15 * MiB])
    assert reports[:3] == [None, None, None]
    assert reports[3] == LeakReport(device=0, steps=3, total_bytes=3 * MiB)
    assert reports[3].per_step_bytes == MiB
    assert reports[4:] == [None, None]


def test_leak_needs_growth_at_every_step():
    d = LeakDetector(steps=3, threshold_bytes=0)
    assert feed(d, [1, 2, 3, 3, 4, 5]) == [None] * 6
    assert d.observe(0, 6) == LeakReport(device=0, steps=3, total_bytes=3)


def test_leak_below_threshold_is_ignored_until_it_adds_up():
    d = LeakDetector(steps=2, threshold_bytes=10)
    assert feed(d, [0, 4, 8]) == [None] * 3
    assert d.observe(0, 16) == LeakReport(device=0, steps=2, total_bytes=12)


def test_leak_rearms_after_a_drop():
    d = LeakDetector(steps=2, threshold_bytes=0)
    assert feed(d, [1, 2, 3])[-1] is not None
    assert feed(d, [1, 2]) == [None, None]
    assert d.observe(0, 3) is not None


def test_leak_devices_are_independent():
    d = LeakDetector(steps=2, threshold_bytes=0)
    assert feed(d, [1, 2], device=0) == [None, None]
    assert feed(d, [5, 4], device=1) == [None, None]
    assert d.observe(1, 3) is None
    assert d.observe(0, 3) == LeakReport(device=0, steps=2, total_bytes=2)


def test_leak_warning_text(golden):
    report = LeakReport(device=1, steps=5, total_bytes=10 * MiB)
    golden("leak_warning.txt", format_leak_warning(report) + "\n"
           + format_leak_warning(report, rank=3, world_size=4) + "\n")


@pytest.mark.parametrize("kwargs", [{"steps": 0}, {"threshold_bytes": -1}])
def test_leak_detector_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        LeakDetector(**kwargs)


def test_history_is_bounded():
    history = history_limit_deque(3)
    history.extend(record(i) for i in range(1, 6))
    assert [r.step for r in history] == [3, 4, 5]
    with pytest.raises(ValueError):
        history_limit_deque(0)


def test_polled_peaks_are_marked_at_least_in_the_line_and_the_table():
    polled = dataclasses.replace(record(4), peaks_exact=False)
    exact = record(4, device=1)
    line = format_step_line([polled, exact])
    assert "cuda:0 alloc 1.0 GiB, reserved 2.0 GiB, step peak ≥1.5 GiB" in line
    assert "cuda:1 alloc 1.0 GiB, reserved 2.0 GiB, step peak 1.5 GiB" in line
    assert line.endswith("(≥: sampled peaks, not exact: polling mode, vramscope.mode() says why "
                         "and what to install)")
    table = format_step_table([polled]).splitlines()
    assert table[1].split()[6:10] == ["≥1.5", "GiB", "≥2.0", "GiB"]
    assert table[-1].startswith("≥: sampled peaks, not exact")
    assert "≥" not in format_step_line([exact]) + format_step_table([exact])


def test_a_polling_readers_step_says_its_peaks_are_not_exact():
    from vramscope._core.polling import PollingReader

    class Torch:
        class cuda:  # noqa: N801 -- torch's name
            @staticmethod
            def device_count():
                return 1

            @staticmethod
            def memory_stats(device):
                return {"allocated_bytes.all.current": 10, "reserved_bytes.all.current": 20}

    raw = PollingReader(Torch, "no agent").step()[0]
    assert raw["peaks_exact"] is False
    assert StepRecord.from_agent(raw, 1, 0, 1, 0).peaks_exact is False
