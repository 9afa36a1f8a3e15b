# python/vramscope/pytest_plugin.py -- pytest plugin: GPU-memory limits per test, a session report
"""GPU-memory budgets for tests, in the style of pytest-memray (registered as the ``pytest11``
entry point ``vramscope``, so installed with the package)::

    @pytest.mark.limit_vram("2 GiB")                  # peak allocated during the test
    @pytest.mark.limit_vram("3 GiB", kind="reserved")  # or reserved, or "driver" (NVML)
    @pytest.mark.limit_vram_leak("16 MiB")            # allocated after minus before the test
    def test_forward(vram):                           # the fixture, for explicit asserts
        ...
        assert vram.peak_allocated_bytes < 1 << 30

Markers work without ``--vramscope``; ``--vramscope`` measures every test and prints the biggest
(``--vramscope-most=N``), ``--vramscope-ops`` adds what held the memory at each test's peak, and
``--vramscope-fail-on-increase`` fails a test whose peak rose since the last run (pytest's
cache, for CI). The window of a test is its call (fixtures' setup and teardown are outside it,
as in pytest-memray); its peaks are vramscope's own (``vramscope.reset_peak``), so torch's
``max_memory_allocated()`` and a test that resets it keep their meaning. Without a GPU, marked
tests are skipped with the reason. Under pytest-xdist every worker measures its own process,
per device, and sends its numbers to the controller in the test reports.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Generator
from typing import Any, cast

import pytest

from . import _api
from . import pytest_limits as _limits
from ._core.session import SESSION
from ._core.units import non_pytorch_bytes
from .pytest_limits import DeviceMeasure, TestMeasure

#: The key of a test report's user_properties that carries its TestMeasure (as a dict).
PROPERTY = "vramscope"
#: pytest's cache key of the last run's peaks ({nodeid: peak allocated bytes}).
CACHE_KEY = "vramscope/peaks"
_MARKERS = {"limit_vram": _limits.limit_spec, "limit_vram_leak": _limits.leak_spec}
_MEASURE = pytest.StashKey[TestMeasure]()
_WINDOW = pytest.StashKey["_Window"]()
#: The post-mortem's last report's paths when the test's call began.
_REPORT_BEFORE = pytest.StashKey[dict[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vramscope", "GPU memory (vramscope)")
    group.addoption("--vramscope", action="store_true", default=False,
                    help="measure every test's GPU memory and print the biggest at the end")
    group.addoption("--vramscope-most", type=int, default=5, metavar="N",
                    help="show the N tests with the highest peak allocated (0: all; default 5)")
    group.addoption("--vramscope-ops", action="store_true", default=False,
                    help="attribute each test's peak to ops (needs the agent in events mode)")
    group.addoption("--vramscope-fail-on-increase", action="store_true", default=False,
                    help="fail a test whose peak allocated rose since the last run (pytest cache)")
    group.addoption("--vramscope-increase-tolerance", type=float, default=0.0, metavar="PCT",
                    help="percent of growth --vramscope-fail-on-increase accepts (default 0)")
    parser.addini("vramscope", "measure every test's GPU memory (like --vramscope)", type="bool",
                  default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "limit_vram(limit, device=None, kind='allocated'): fail the test when its "
        "peak GPU memory (allocated, reserved or driver) exceeds limit, e.g. '2 GiB'")
    config.addinivalue_line(
        "markers", "limit_vram_leak(limit, device=None): fail the test when its allocated GPU "
        "memory after it (gc.collect, synchronize) exceeds the one before it by more than limit")
    config.pluginmanager.register(VramscopePlugin(config), "vramscope-plugin")


def _synchronize() -> None:
    """Waits for the work queued on the devices this process uses (never creates a context)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    for d in range(_api.device_count()):
        if _api.memory_reserved(d) > 0:
            torch.cuda.synchronize(d)


class _Window:
    """The measurement of one test's call: vramscope's peaks restarted at the start, read at the
    end with the allocated bytes after gc.collect() and a synchronize."""

    def __init__(self, ops: bool) -> None:
        self.ops = ops
        self.devices: list[int] = []
        self.before: dict[int, int] = {}
        self.torch_peaks: dict[int, int] = {}
        self.driver: Any = None
        self.profile: Any = None

    def start(self) -> None:
        if SESSION.reader is None:
            return  # CUDA not initialised yet: the attach made at its init starts fresh peaks
        self.devices = list(range(_api.device_count()))
        _synchronize()
        polling = _api.mode().startswith("polling")
        for d in self.devices:
            self.before[d] = _api.memory_allocated(d)
            _api.reset_peak(d)
            if polling:
                # Sampled peaks miss what happens between reads; torch's peak is exact when it
                # rose during the test (it is read, never reset).
                self.torch_peaks[d] = int(sys.modules["torch"].cuda.max_memory_allocated(d))
        if self.ops and _api.mode().startswith("events"):
            from .attribution.profile import profile
            try:
                self.profile = profile(modules=False).__enter__()
            except RuntimeError:
                self.profile = None  # another profile() runs (one at a time): no op table

    def stop(self, nodeid: str) -> TestMeasure | None:
        top_ops: list[Any] = []
        if self.profile is not None:
            self.profile.__exit__(None, None, None)
            rows = sorted(self.profile.ops(), key=lambda r: -r.live_at_peak_bytes)
            top_ops = [(r.name, r.live_at_peak_bytes) for r in rows[:10] if r.live_at_peak_bytes]
            self.profile = None
        if SESSION.reader is None:
            return None  # the test never initialised CUDA
        gc.collect()
        _synchronize()
        if not self.devices:
            self.devices = list(range(_api.device_count()))
        polling = _api.mode().startswith("polling")
        out = []
        for d in self.devices:
            m = DeviceMeasure(device=d, peak_allocated_bytes=_api.max_memory_allocated(d),
                              peak_reserved_bytes=_api.max_memory_reserved(d),
                              allocated_before_bytes=self.before.get(d, 0),
                              allocated_after_bytes=_api.memory_allocated(d), exact=not polling)
            if polling and d in self.torch_peaks:
                torch_peak = int(sys.modules["torch"].cuda.max_memory_allocated(d))
                if torch_peak > self.torch_peaks[d]:
                    m.peak_allocated_bytes = max(m.peak_allocated_bytes, torch_peak)
            used = SESSION.driver_process_bytes(d)
            if used is not None:
                # NVML has no peak: the reserved peak (exact) plus what the driver charges
                # beyond reserved at the end (context, cuBLAS workspaces: they rarely shrink).
                extra = non_pytorch_bytes(used, _api.memory_reserved(d)) or 0
                m.peak_driver_bytes = max(used, m.peak_reserved_bytes + extra)
            out.append(m)
        return TestMeasure(nodeid=nodeid, devices=out, top_ops=top_ops,
                           worker=os.environ.get("PYTEST_XDIST_WORKER", ""))


def _specs(item: pytest.Item) -> list[Any]:
    specs = []
    for name, parse in _MARKERS.items():
        for marker in item.iter_markers(name):
            specs.append(parse(*marker.args, **marker.kwargs))
    return specs


class _Failure:
    """A failure pytest shows like an exception's: the headline, also in the short summary."""

    def __init__(self, headline: str) -> None:
        self.reprcrash = _Crash(f"vramscope: {headline}")
        self.headline = headline

    def toterminal(self, tw: Any) -> None:
        tw.line(f"vramscope: {self.headline}", red=True, bold=True)

    def __str__(self) -> str:
        return f"vramscope: {self.headline}"


class _Crash:
    def __init__(self, message: str) -> None:
        self.message = message
        self.path = ""
        self.lineno = 0


class VramscopePlugin:
    """The plugin's state for one pytest session (one per process: controller or worker)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.enabled = bool(config.getoption("vramscope") or config.getini("vramscope")
                            or config.getoption("vramscope_fail_on_increase"))
        self.ops = bool(config.getoption("vramscope_ops"))
        self.fail_on_increase = bool(config.getoption("vramscope_fail_on_increase"))
        self.tolerance = float(config.getoption("vramscope_increase_tolerance")) / 100.0
        self.measures: dict[str, TestMeasure] = {}
        #: Tests that failed on an increase keep their old baseline in the cache.
        self.increased: set = set()
        cache = getattr(config, "cache", None)
        self.previous: dict[str, int] = dict(cache.get(CACHE_KEY, {})) if cache else {}

    # ----- collection: a bad marker stops the session with a usage error
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        marked = []
        for item in items:
            try:
                if _specs(item):
                    marked.append(item)
            except (TypeError, ValueError) as e:
                raise pytest.UsageError(f"{item.nodeid}: vramscope marker: {e}") from None
        problem = SESSION.no_gpu() if marked else None
        if problem is not None:
            # A skip marker, so that the reason points at the test, never a silent pass.
            skip = pytest.mark.skip(reason=f"vramscope: GPU memory limit not checked: {problem}")
            for item in marked:
                item.add_marker(skip)

    # ----- running
    def _wants(self, item: pytest.Item) -> bool:
        return bool(_specs(item)) or "vram" in getattr(item, "fixturenames", ())

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        specs = _specs(item)
        if not specs:
            return
        if SESSION.no_gpu() is not None:
            return  # skipped by the marker added at collection
        SESSION.attach(init_cuda=True)
        if any(isinstance(s, _limits.LimitSpec) and s.kind == "driver" for s in specs) and \
                SESSION.agent is None:
            pytest.skip("vramscope: kind='driver' needs the agent and NVML "
                        f"(mode: {_api.mode()})")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, Any, None]:
        # The post-mortem's last report before the test: an OOM that fails the test and has a
        # report of its own is measured again once its failure is reported.
        pyfuncitem.stash[_REPORT_BEFORE] = SESSION.postmortem.last_report()
        if not (self.enabled or self._wants(pyfuncitem)) or SESSION.no_gpu() is not None:
            yield
            return
        SESSION.attach(init_cuda=False)
        window = _Window(self.ops)
        pyfuncitem.stash[_WINDOW] = window
        window.start()
        try:
            yield
        finally:
            measure = window.stop(pyfuncitem.nodeid)
            if measure is not None:
                pyfuncitem.stash[_MEASURE] = measure

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo) -> Generator[None, Any, None]:
        outcome = yield
        if call.when != "call":
            return
        report = outcome.get_result()
        measure = item.stash.get(_MEASURE, None)
        if measure is not None:
            report.user_properties.append((PROPERTY, measure.to_dict()))
        if call.excinfo is not None:
            self._measure_oom(item, report, call.excinfo.value)
        if report.outcome != "passed":
            return
        failure = self._failure(item, measure)
        if failure is not None:
            # Like pytest-memray: the headline as the failure, the numbers in a section.
            report.outcome = "failed"
            report.longrepr = _Failure(failure[0])
            report.sections.append(("vramscope", failure[1]))

    @staticmethod
    def _measure_oom(item: pytest.Item, report: pytest.TestReport, exc: BaseException) -> None:
        """A CUDA OOM that failed the test, with its post-mortem written during the test: the
        failing step run again and measured (vramscope.postmortem.measure), the report
        rewritten, its summary a section of the test's failure. After the failure's text is
        made: the measurement clears the traceback's frames to free the step's memory."""
        postmortem = SESSION.postmortem
        before = item.stash.get(_REPORT_BEFORE, None)
        if before is None or not postmortem.last_report() or postmortem.last_report() == before:
            return
        if postmortem.measure_and_report(exc, echo=False):
            report.sections.append(("vramscope: the OOM measured again",
                                    postmortem.last_summary))

    def _failure(self, item: pytest.Item, measure: TestMeasure | None) -> Any | None:
        specs = _specs(item)
        if measure is None:
            if not specs:
                return None
            return ("the GPU memory of this test could not be measured",
                    f"the GPU memory of this test could not be measured (mode: {_api.mode()})")
        for spec in specs:
            check = _limits.check_limit if isinstance(spec, _limits.LimitSpec) else \
                _limits.check_leak
            failure = check(spec, measure)
            if failure is not None:
                return failure
        if self.fail_on_increase:
            failure = _limits.check_increase(measure, self.previous.get(item.nodeid),
                                             self.tolerance)
            if failure is not None:
                self.increased.add(item.nodeid)
                return failure
        return None

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Generator[None, Any, None]:
        outcome = yield
        if report.when == "call" and report.outcome == "failed" and \
                any(name == "vramscope" for name, _ in report.sections):
            outcome.force_result(("failed", "V", "GPU MEMORY"))

    # ----- results (on the controller under xdist: the reports carry the measures)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                # Our property: the dict pytest_runtest_makereport put there.
                self.measures[report.nodeid] = TestMeasure.from_dict(cast(dict[str, Any], value))
                if report.outcome == "failed" and \
                        any(n == "vramscope" and "up from" in t for n, t in report.sections):
                    self.increased.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if not self.enabled or cache is None or hasattr(self.config, "workerinput"):
            return
        peaks = dict(self.previous)
        for nodeid, m in self.measures.items():
            if nodeid not in self.increased:
                peaks[nodeid] = m.peak_allocated_bytes
        cache.set(CACHE_KEY, peaks)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.enabled or hasattr(self.config, "workerinput"):
            return
        problem = None if self.measures else SESSION.no_gpu()
        terminalreporter.write_sep("=", "vramscope GPU memory report")
        for line in _limits.format_report(list(self.measures.values()),
                                          self.config.getoption("vramscope_most"), problem):
            terminalreporter.write_line(line)


class VramFixture:
    """The ``vram`` fixture: this test's GPU memory so far, read live inside the test body.
    ``device=None`` (the fixture itself) takes the maximum (peaks) or sum (bytes) over devices;
    ``vram.on(d)`` reads one device."""

    def __init__(self, node: Any, device: int | None = None) -> None:
        self.device = device
        self._node = node

    def on(self, device: int) -> VramFixture:
        """The same readings for one device."""
        return VramFixture(self._node, device)

    def _devices(self) -> list[int]:
        return [self.device] if self.device is not None else list(range(_api.device_count()))

    @property
    def peak_allocated_bytes(self) -> int:
        """Highest allocated bytes since the test body began."""
        return max((_api.max_memory_allocated(d) for d in self._devices()), default=0)

    @property
    def peak_reserved_bytes(self) -> int:
        """Highest reserved bytes since the test body began."""
        return max((_api.max_memory_reserved(d) for d in self._devices()), default=0)

    @property
    def allocated_bytes(self) -> int:
        """Allocated bytes now."""
        return sum(_api.memory_allocated(d) for d in self._devices())

    @property
    def reserved_bytes(self) -> int:
        """Reserved bytes now."""
        return sum(_api.memory_reserved(d) for d in self._devices())

    @property
    def growth_bytes(self) -> int:
        """Allocated now minus allocated when the test body began (no gc.collect() here)."""
        # The window starts right before the test body (pytest_pyfunc_call), after fixtures.
        window = self._node.stash.get(_WINDOW, None)
        before = window.before if window is not None else {}
        return sum(_api.memory_allocated(d) - before.get(d, 0) for d in self._devices())


@pytest.fixture
def vram(request: pytest.FixtureRequest) -> VramFixture:
    """This test's GPU memory (``vram.peak_allocated_bytes``, ``vram.growth_bytes``, ...);
    skips the test without a GPU."""
    problem = SESSION.no_gpu()
    if problem is not None:
        pytest.skip(f"vramscope: the vram fixture needs a GPU: {problem}")
    SESSION.attach(init_cuda=True)
    return VramFixture(request.node)
