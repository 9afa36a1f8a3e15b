# tests/python/test_pytest_plugin.py -- the pytest plugin's logic, in pytester runs over a scripted agent
#
# The inner runs use tests/python/_vram_double.py as the agent (no GPU): their tests move its
# counters by hand, so the limits, leaks, reports and cache are checked against known numbers.
# tests/gpu/test_integrations_gpu.py runs the same plugin on a real GPU.
from __future__ import annotations

import importlib.metadata
import os
import pathlib

import pytest

import vramscope
from vramscope import pytest_limits as _limits

pytest_plugins = ["pytester"]

HERE = pathlib.Path(__file__).resolve().parent
MiB = 1 << 20

CONFTEST = """
import _vram_double

def pytest_configure(config):
    _vram_double.DOUBLE = _vram_double.FakeAgent(devices=int(__import__("os").environ.get(
        "FAKE_DEVICES", "1")))
    config._vram_double = _vram_double.installed(_vram_double.DOUBLE)
    config._vram_double.__enter__()

def pytest_unconfigure(config):
    config._vram_double.__exit__(None, None, None)
"""


def plugin_args() -> list:
    """``-p vramscope.pytest_plugin`` unless the installed package's entry point loads it."""
    points = importlib.metadata.entry_points(group="pytest11")
    if any(p.value == "vramscope.pytest_plugin" for p in points):
        return []
    return ["-p", "vramscope.pytest_plugin"]


@pytest.fixture
def fake(pytester, monkeypatch):
    """A pytester whose runs have the scripted agent installed (also in xdist workers)."""
    package_root = str(pathlib.Path(vramscope.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(HERE), package_root, os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("COLUMNS", "200")  # short summary lines unabridged
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester, *args):
    return pytester.runpytest(*plugin_args(), *args)


# ----- sizes and markers (pure)

@pytest.mark.parametrize("text, expected", [
    ("24 MB", 24 * MiB), ("24MB", 24 * MiB), ("1.5 GiB", 3 << 29), ("512 kb", 512 << 10),
    ("2 GB", 2 << 30), ("100 B", 100), (".5 MiB", MiB // 2), ("+3 TiB", 3 << 40), (4096, 4096),
])
def test_sizes_parse_like_pytest_memray(text, expected):
    assert _limits.parse_size(text) == expected


@pytest.mark.parametrize("bad", ["24", "24 XB", "MB", "-1 MB", "1,5 GB", "", -5, 1.5, True,
                                 None, "2 GiB extra"])
def test_other_sizes_are_usage_errors_naming_the_forms(bad):
    with pytest.raises(ValueError, match="invalid size"):
        _limits.parse_size(bad)


def test_marker_arguments_are_validated():
    assert _limits.limit_spec("1 GiB", kind="reserved", device="cuda:1") == \
        _limits.LimitSpec(1 << 30, "reserved", 1)
    assert _limits.limit_spec("1 GiB", device="cuda").device is None
    with pytest.raises(ValueError, match="kind must be one of allocated, reserved, driver"):
        _limits.limit_spec("1 GiB", kind="peak")
    with pytest.raises(TypeError):
        _limits.limit_spec()
    with pytest.raises(ValueError, match="expected a CUDA device"):
        _limits.leak_spec("1 MiB", device="cpu")


# ----- limits

def test_over_the_limit_fails_with_what_was_used(fake):
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.mark.limit_vram("256 MiB")
        def test_big():
            d = _vram_double.DOUBLE
            d.alloc(300 << 20)
            d.free(300 << 20)

        @pytest.mark.limit_vram("256 MiB")
        def test_small():
            d = _vram_double.DOUBLE
            d.alloc(200 << 20)
            d.free(200 << 20)
    """)
    result = run(fake, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test used 300.0 MiB of a limit of 256.0 MiB (peak allocated on cuda:0)*",
        "GPU MEMORY test_over_the_limit_fails_with_what_was_used.py::test_big - vramscope: test used "
        "300.0 MiB of a limit of 256.0 MiB*",
    ])
    assert "test_small - vramscope" not in result.stdout.str()


def test_the_window_is_the_call_and_memory_held_before_does_not_count(fake):
    # 200 MiB held by a fixture and a peak before the test: the test itself stays at +100 MiB
    # but its peak is allocated bytes (what is live), 300 MiB, over 256 MiB.
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.fixture
        def held():
            d = _vram_double.DOUBLE
            d.alloc(900 << 20)
            d.free(700 << 20)
            yield
            d.free(200 << 20)

        @pytest.mark.limit_vram("256 MiB")
        def test_uses_fixture(held):
            _vram_double.DOUBLE.alloc(100 << 20)
            _vram_double.DOUBLE.free(100 << 20)

        @pytest.mark.limit_vram("350 MiB")
        def test_within(held):
            _vram_double.DOUBLE.alloc(100 << 20)
            _vram_double.DOUBLE.free(100 << 20)
    """)
    result = run(fake)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test used 300.0 MiB of a limit of 256.0 MiB*"])


def test_reserved_kind_and_device_choice(fake, monkeypatch):
    monkeypatch.setenv("FAKE_DEVICES", "2")
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.mark.limit_vram("3 MiB", kind="reserved")
        def test_reserved():
            _vram_double.DOUBLE.alloc(3 << 20)      # 4 MiB of 2 MiB segments

        @pytest.mark.limit_vram("3 MiB", device=0)
        def test_other_device_is_not_limited():
            _vram_double.DOUBLE.alloc(8 << 20, device=1)
            _vram_double.DOUBLE.free(8 << 20, device=1)

        @pytest.mark.limit_vram("3 MiB")
        def test_every_device_by_default():
            _vram_double.DOUBLE.alloc(8 << 20, device=1)
            _vram_double.DOUBLE.free(8 << 20, device=1)
    """)
    result = run(fake)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*test used 4.0 MiB of a limit of 3.0 MiB (peak reserved on cuda:0)*",
        "*test used 8.0 MiB of a limit of 3.0 MiB (peak allocated on cuda:1)*",
    ])


def test_a_leak_is_caught_and_freed_memory_is_not_one(fake):
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.mark.limit_vram_leak("16 MiB")
        def test_leaks():
            _vram_double.DOUBLE.alloc(40 << 20)

        @pytest.mark.limit_vram_leak("16 MiB")
        def test_small_growth():
            _vram_double.DOUBLE.alloc(10 << 20)

        @pytest.mark.limit_vram_leak("16 MiB")
        def test_frees():
            _vram_double.DOUBLE.alloc(400 << 20)
            _vram_double.DOUBLE.free(400 << 20)
    """)
    result = run(fake)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*test leaked 40.0 MiB of GPU memory on cuda:0, more than the limit of 16.0 MiB*",
    ])


def test_a_failing_test_keeps_its_own_failure(fake):
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.mark.limit_vram("1 MiB")
        def test_fails_itself():
            _vram_double.DOUBLE.alloc(8 << 20)
            assert 1 == 2
    """)
    result = run(fake)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert 1 == 2*"])
    assert "test used" not in result.stdout.str()


def test_a_bad_marker_is_a_usage_error_before_anything_runs(fake):
    fake.makepyfile("""
        import pytest

        @pytest.mark.limit_vram("lots")
        def test_x():
            raise AssertionError("must not run")
    """)
    result = run(fake)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_x: vramscope marker: invalid size 'lots'*"])


def test_without_a_gpu_marked_tests_are_skipped_with_the_reason(pytester):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    pytester.makepyfile("""
        import pytest

        @pytest.mark.limit_vram("1 GiB")
        def test_marked():
            pass

        @pytest.mark.limit_vram_leak("1 MiB")
        def test_leak_marked():
            pass

        def test_fixture(vram):
            pass

        def test_plain():
            pass
    """)
    result = pytester.runpytest(*plugin_args(), "-rs", "--vramscope")
    result.assert_outcomes(passed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_without_a_gpu*.py:3: vramscope: GPU memory limit not checked: no "
        "CUDA GPU is visible*",
        "SKIPPED [[]1[]] test_without_a_gpu*.py:7: vramscope: GPU memory limit not checked*",
        "SKIPPED*vramscope: the vram fixture needs a GPU: no CUDA GPU is visible*",
    ])
    result.stdout.fnmatch_lines(["*vramscope GPU memory report*",
                                 "nothing measured: no CUDA GPU is visible*"])


# ----- the fixture, the report, the cache

def test_the_vram_fixture_reads_the_test_so_far(fake):
    fake.makepyfile("""
        import _vram_double

        def test_reads(vram):
            d = _vram_double.DOUBLE
            d.alloc(64 << 20)
            d.free(48 << 20)
            assert vram.peak_allocated_bytes == 64 << 20
            assert vram.growth_bytes == 16 << 20
            assert vram.allocated_bytes == 16 << 20
            assert vram.on(0).peak_reserved_bytes == 64 << 20
    """)
    run(fake).assert_outcomes(passed=1)


def test_the_report_lists_the_biggest_tests(fake):
    fake.makepyfile("""
        import _vram_double

        def test_a():
            _vram_double.DOUBLE.alloc(10 << 20); _vram_double.DOUBLE.free(10 << 20)

        def test_b():
            _vram_double.DOUBLE.alloc(30 << 20); _vram_double.DOUBLE.free(30 << 20)

        def test_c():
            _vram_double.DOUBLE.alloc(20 << 20)
    """)
    result = run(fake, "--vramscope", "--vramscope-most=2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*vramscope GPU memory report*",
        "2 of 3 tests by peak allocated",
        "*peak allocated*peak reserved*leak*test",
        "*30.0 MiB*30.0 MiB*+0 B*test_the_report_lists_the_biggest_tests.py::test_b",
        "*20.0 MiB*30.0 MiB*+20.0 MiB*::test_c",  # the cache keeps its segments,
    ])
    assert "::test_a" not in result.stdout.str().split("memory report")[1]


def test_fail_on_increase_compares_with_the_last_run(fake, monkeypatch):
    fake.makepyfile("""
        import os, _vram_double

        def test_grows():
            n = int(os.environ["ALLOC_MIB"]) << 20
            _vram_double.DOUBLE.alloc(n); _vram_double.DOUBLE.free(n)
    """)
    monkeypatch.setenv("ALLOC_MIB", "100")
    run(fake, "--vramscope-fail-on-increase").assert_outcomes(passed=1)  # first run: baseline
    monkeypatch.setenv("ALLOC_MIB", "104")
    run(fake, "--vramscope-fail-on-increase", "--vramscope-increase-tolerance=5") \
        .assert_outcomes(passed=1)
    monkeypatch.setenv("ALLOC_MIB", "110")
    result = run(fake, "--vramscope-fail-on-increase")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*peak allocated 110.0 MiB, up from 104.0 MiB in the last run "
                                 "(+5.8%)*"])
    # The baseline stays the old one until the increase is accepted (--cache-clear).
    run(fake, "--vramscope-fail-on-increase").assert_outcomes(failed=1)
    monkeypatch.setenv("ALLOC_MIB", "90")
    run(fake, "--vramscope-fail-on-increase").assert_outcomes(passed=1)


def test_under_xdist_each_worker_measures_and_the_controller_reports(fake):
    pytest.importorskip("xdist")
    fake.makepyfile("""
        import pytest, _vram_double

        @pytest.mark.parametrize("mib", [1, 2, 3, 4])
        def test_sizes(mib):
            _vram_double.DOUBLE.alloc(mib << 20); _vram_double.DOUBLE.free(mib << 20)

        @pytest.mark.limit_vram("2 MiB")
        def test_limited():
            _vram_double.DOUBLE.alloc(5 << 20)
    """)
    result = fake.runpytest_subprocess(*plugin_args(), "-n", "2", "--vramscope",
                                       "--vramscope-most=0")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines([
        "*test used 5.0 MiB of a limit of 2.0 MiB*",
        "5 of 5 tests by peak allocated",
        "*5.0 MiB*::test_limited ?gw?]",
        "*4.0 MiB*::test_sizes?4? ?gw?]",
    ])
