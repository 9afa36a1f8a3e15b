# python/vramscope/pytest_limits.py -- GPU-memory limits of tests: markers, checks, report text
"""What the pytest plugin decides, as plain functions of numbers.

Nothing here reads a GPU: ``pytest_plugin`` measures a ``TestMeasure`` per test and these
functions parse the markers' arguments, decide whether a limit is exceeded and write the failure
text and the session report, so that all of it is tested with synthetic values.

Sizes parse like pytest-memray's (``"24 MB"``, ``"1.5 GiB"``, ``"512 KB"``; ``parse_size`` in
``_core/units.py``, which ``vramscope fit``'s budgets read too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._core.units import format_bytes, format_delta, parse_size

__all__ = ["KINDS", "TestMeasure", "LimitSpec", "LeakSpec", "parse_size", "limit_spec",
           "leak_spec", "check_limit", "check_leak", "check_increase", "format_report"]

#: What a limit can apply to: allocated (tensors), reserved (the caching allocator's segments),
#: driver (what NVML charges the process: reserved plus CUDA context and library workspaces).
KINDS = ("allocated", "reserved", "driver")


@dataclasses.dataclass(frozen=True)
class LimitSpec:
    """A ``limit_vram`` marker, validated."""

    limit_bytes: int
    #: One of KINDS.
    kind: str = "allocated"
    #: A CUDA ordinal; None: every device the process uses, each held to the limit.
    device: int | None = None


@dataclasses.dataclass(frozen=True)
class LeakSpec:
    """A ``limit_vram_leak`` marker, validated."""

    limit_bytes: int
    device: int | None = None


def _device_arg(device: Any) -> int | None:
    """A marker's ``device``: None, "cuda" and ``torch.device("cuda")`` mean every device (the
    current device is only known at run time), else the ordinal."""
    from ._core.device import parse_device

    if device is None or (isinstance(device, str) and device.strip() == "cuda"):
        return None
    if getattr(device, "type", None) == "cuda" and getattr(device, "index", 0) is None:
        return None
    return parse_device(device, lambda: 0)


def limit_spec(*args: Any, **kwargs: Any) -> LimitSpec:
    """The LimitSpec of ``limit_vram(limit, device=None, kind="allocated")``; raises ValueError
    (TypeError for a wrong signature) with a message meant for the user."""
    def bind(limit: Any, device: Any = None, kind: str = "allocated") -> LimitSpec:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        return LimitSpec(parse_size(limit), kind, _device_arg(device))

    return bind(*args, **kwargs)


def leak_spec(*args: Any, **kwargs: Any) -> LeakSpec:
    """The LeakSpec of ``limit_vram_leak(limit, device=None)``."""
    def bind(limit: Any, device: Any = None) -> LeakSpec:
        return LeakSpec(parse_size(limit), _device_arg(device))

    return bind(*args, **kwargs)


@dataclasses.dataclass
class DeviceMeasure:
    """One device's numbers over one test's call."""

    device: int
    peak_allocated_bytes: int = 0
    peak_reserved_bytes: int = 0
    #: Estimated driver peak (peak reserved + non-PyTorch bytes at the end); None: NVML can't tell.
    peak_driver_bytes: int | None = None
    allocated_before_bytes: int = 0
    #: Allocated after the test, after gc.collect() and a synchronize.
    allocated_after_bytes: int = 0
    #: Were the peaks exact (allocator events) rather than sampled (polling)?
    exact: bool = True

    @property
    def leaked_bytes(self) -> int:
        """Growth of allocated bytes over the test (negative when it freed memory)."""
        return self.allocated_after_bytes - self.allocated_before_bytes

    def peak_of(self, kind: str) -> int | None:
        return {"allocated": self.peak_allocated_bytes, "reserved": self.peak_reserved_bytes,
                "driver": self.peak_driver_bytes}[kind]


@dataclasses.dataclass
class TestMeasure:
    """What the plugin measured over one test's call (also sent from xdist workers)."""

    #: Not a test class, whatever its name (pytest collects classes named Test*).
    __test__ = False

    nodeid: str
    devices: list[DeviceMeasure]
    #: (op name, bytes live at the peak), biggest first, with --vramscope-ops in events mode.
    top_ops: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: The xdist worker ("gw0") or "" without xdist.
    worker: str = ""

    @property
    def peak_allocated_bytes(self) -> int:
        return max((d.peak_allocated_bytes for d in self.devices), default=0)

    @property
    def peak_reserved_bytes(self) -> int:
        return max((d.peak_reserved_bytes for d in self.devices), default=0)

    @property
    def leaked_bytes(self) -> int:
        return sum(d.leaked_bytes for d in self.devices)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestMeasure:
        devices = [DeviceMeasure(**d) for d in data.get("devices", [])]
        return cls(nodeid=data["nodeid"], devices=devices,
                   top_ops=[tuple(t) for t in data.get("top_ops", [])],
                   worker=data.get("worker", ""))


def _chosen(measure: TestMeasure, device: int | None) -> list[DeviceMeasure]:
    if device is None:
        return measure.devices
    return [d for d in measure.devices if d.device == device]


def _held_at_peak(measure: TestMeasure, peak_bytes: int, rows: int = 5) -> list[str]:
    if not measure.top_ops:
        return []
    lines = ["what held the memory at the peak (per op, requested bytes):"]
    for name, size in measure.top_ops[:rows]:
        share = f" ({size / peak_bytes:.0%})" if peak_bytes > 0 else ""
        lines.append(f"    {name}: {format_bytes(size)}{share}")
    return lines


def check_limit(spec: LimitSpec, measure: TestMeasure) -> tuple[str, str] | None:
    """None when every chosen device stayed within the limit, else (headline, details)."""
    for d in _chosen(measure, spec.device):
        peak = d.peak_of(spec.kind)
        if peak is None or peak <= spec.limit_bytes:
            continue
        sampled = "" if d.exact else " (sampled peak: polling mode)"
        headline = (f"test used {format_bytes(peak)} of a limit of {format_bytes(spec.limit_bytes)}"
                    f" (peak {spec.kind} on cuda:{d.device}){sampled}")
        lines = [headline,
                 f"peak allocated {format_bytes(d.peak_allocated_bytes)}, peak reserved "
                 f"{format_bytes(d.peak_reserved_bytes)}"
                 + ("" if d.peak_driver_bytes is None else
                    f", driver (estimated) {format_bytes(d.peak_driver_bytes)}")]
        lines += _held_at_peak(measure, d.peak_allocated_bytes)
        return headline, "\n".join(lines)
    return None


def check_leak(spec: LeakSpec, measure: TestMeasure) -> tuple[str, str] | None:
    """None when allocated grew by at most the limit on every chosen device."""
    for d in _chosen(measure, spec.device):
        if d.leaked_bytes <= spec.limit_bytes:
            continue
        headline = (f"test leaked {format_bytes(d.leaked_bytes)} of GPU memory on cuda:{d.device}"
                    f", more than the limit of {format_bytes(spec.limit_bytes)}")
        details = (f"{headline}\nallocated before the test {format_bytes(d.allocated_before_bytes)}"
                   f", after it (after gc.collect() and a synchronize) "
                   f"{format_bytes(d.allocated_after_bytes)}\n"
                   "tensors still referenced: module globals, caches, fixtures of a wider scope, "
                   "or an exception traceback kept alive")
        return headline, details
    return None


def check_increase(measure: TestMeasure, previous_bytes: int | None,
                   tolerance: float = 0.0) -> tuple[str, str] | None:
    """None unless the peak allocated bytes rose above the last run's ``previous_bytes`` by more
    than the fraction ``tolerance``."""
    if previous_bytes is None:
        return None
    now = measure.peak_allocated_bytes
    if now <= previous_bytes * (1.0 + tolerance):
        return None
    growth = now - previous_bytes
    share = f" (+{growth / previous_bytes:.1%})" if previous_bytes > 0 else ""
    headline = (f"peak allocated {format_bytes(now)}, up from {format_bytes(previous_bytes)} in "
                f"the last run{share}")
    return headline, (f"{headline}\nbaseline kept in pytest's cache (vramscope/peaks); "
                      "run with --cache-clear to accept the new peak")


def format_report(measures: Sequence[TestMeasure], most: int = 5,
                  problem: str | None = None) -> list[str]:
    """The lines of the session report: the ``most`` biggest tests by peak allocated (0: all),
    with peak reserved, leak and top ops. ``problem``: why nothing could be measured."""
    if problem is not None:
        return [f"nothing measured: {problem}"]
    ordered = sorted(measures, key=lambda m: (-m.peak_allocated_bytes, m.nodeid))
    if not ordered:
        return ["no test ran on a GPU"]
    shown = ordered[:most] if most > 0 else ordered
    rows = [("peak allocated", "peak reserved", "leak", "test")]
    for m in shown:
        rows.append((format_bytes(m.peak_allocated_bytes), format_bytes(m.peak_reserved_bytes),
                     format_delta(m.leaked_bytes),
                     m.nodeid + (f" [{m.worker}]" if m.worker else "")))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{len(shown)} of {len(ordered)} tests by peak allocated"
             + ("" if all(d.exact for m in shown for d in m.devices) else
                " (some peaks sampled: polling mode)")]
    for row in rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
    for m in shown:
        if m.top_ops:
            lines.append(f"top ops at the peak of {m.nodeid}:")
            lines += [f"    {name}: {format_bytes(size)}" for name, size in m.top_ops[:5]]
    return lines
