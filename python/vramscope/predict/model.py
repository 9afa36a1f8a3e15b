# python/vramscope/predict/model.py -- one model of a step's memory against its size (pure)
"""Peak memory of a training step as a function of one size ``x`` (the batch, or the sequence
length at a fixed batch), fitted to exact step peaks measured at a few small sizes::

    peak allocated(x) = fixed + per_unit * x (+ per_unit2 * x**2 where asked: attention)
    need(x)           = peak allocated(x) * allowance

What must fit under a cap is not the reserved peak measured without pressure: before it
raises, the caching allocator frees every cached segment without a live block and retries, so
what must fit is the segments holding live blocks as it lays them out under the cap: the need
of the allocator simulated under a cap (vramscope.predict.capped). That simulated need over the
allocated peak, measured at the two largest probes, is the *allowance* (1.02-1.09 on the
calibration models; the largest alone where the one below it lies on a fixed peak's flat).
Without a measured allowance (no memory history), or where the allocator does not retry
(torch >= 2.12 with ``throw_on_cudamalloc_oom``), the need is the reserved peak, fitted the
same way.

A ``Prediction`` says what a size needs, with the basis, a stated margin and a sound lower
bound. Both the batch-size search (``vramscope.fit``) and the OOM advice read this one model,
so they cannot disagree. Pure functions of ``Probe`` values: tested with synthetic numbers.

Why the prediction is conservative: it is the higher of the least-squares curve and the line
through the two largest probes (a step whose memory grows faster per sample at larger sizes,
as cuDNN workspaces and attention do, is followed), plus the largest residual of the fit.
Where the second largest probe lies on a flat (its peak grew from the one below it by a tenth
of the growth per unit above it, or less: the optimizer's step holds the peak there), that line
is too shallow, and past the largest probe its peak is grown in proportion to the size, its
resident bytes kept.
The lower bound assumes only that memory does not grow slower per unit beyond the probes than
it did between any two of them (each sample keeps its own activations): the largest peak
measured at a size at most ``x``, plus the smallest measured per-unit increase times the rest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

__all__ = ["Probe", "MemoryModel", "Prediction", "block_bytes", "ends_on_flat", "fit_model",
           "segment_bytes"]

#: The caching allocator's rounding (c10/cuda/CUDACachingAllocator.cpp): every block is a
#: multiple of 512 bytes; requests up to 1 MiB come from 2 MiB segments (the small pool),
#: up to 10 MiB from 20 MiB segments, larger ones get a segment of their own rounded to 2 MiB.
MIN_BLOCK_BYTES = 512
SMALL_REQUEST_BYTES = 1 << 20
SMALL_SEGMENT_BYTES = 2 << 20
LARGE_SEGMENT_BYTES = 20 << 20
MIN_LARGE_ALLOC_BYTES = 10 << 20
ROUND_LARGE_BYTES = 2 << 20
#: A probe whose peak grew from the probe below it by at most this share of the growth per
#: unit above it sits on a flat where the optimizer's step or a fixed workspace holds the
#: peak (an H100: 0.2 MB per sample from 2 to 4, 16 MB from 4 to 54): its layout is not the
#: activations' (the allowance is not read from it) and no line of what grows runs through it.
FLAT_SLOPE_SHARE = 0.1


def ends_on_flat(probes: Sequence[Probe]) -> bool:
    """Do the two largest probes lie on one fixed peak's flat: their peak grew between them by
    at most FLAT_SLOPE_SHARE of the largest's growth per unit above what stays allocated, so
    nothing of the growing part is seen yet?"""
    top = max(probes, key=lambda p: p.size, default=None)
    below = [p for p in probes if top is not None and p.size < top.size]
    if top is None or not below:
        return False
    low = max(below, key=lambda p: p.size)
    between = (top.peak_allocated_bytes - low.peak_allocated_bytes) / (top.size - low.size)
    above = (top.peak_allocated_bytes - min(top.resident_bytes, top.peak_allocated_bytes)) \
        / top.size
    return between <= FLAT_SLOPE_SHARE * above


def block_bytes(request_bytes: int) -> int:
    """The block the allocator hands out for a request (what ``allocated_bytes`` counts)."""
    return max(MIN_BLOCK_BYTES, -(-request_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def segment_bytes(request_bytes: int) -> int:
    """The new segment a request needs when no cached block can serve it (what
    ``reserved_bytes`` grows by, and what the memory-fraction cap is checked against)."""
    if request_bytes <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if request_bytes < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-block_bytes(request_bytes) // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


@dataclasses.dataclass(frozen=True)
class Probe:
    """The exact peaks of real steps at one size (the highest over the steps measured)."""

    #: The size the step ran at (a batch, or a sequence length).
    size: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    #: How many steps were measured, and their wall time in seconds (0: unknown).
    steps: int = 1
    seconds: float = 0.0
    #: The peak of segments holding live blocks (with the one being created): what must fit
    #: under a cap (vramscope.predict.pinned); 0 when not measured.
    peak_pinned_bytes: int = 0
    #: Bytes allocated when the steps were over (the parameters, the optimizer's state: what a
    #: step at any size holds before it starts); 0 when not known.
    resident_bytes: int = 0

    @property
    def must_fit_bytes(self) -> int:
        """What this size needs of a budget: the pinned peak when measured, else the reserved
        peak (an upper bound of it)."""
        return self.peak_pinned_bytes or max(self.peak_reserved_bytes, self.peak_allocated_bytes)

    def need_at(self, factor: float, degree: int = 1) -> float:
        """An upper bound of what ``factor`` times this size needs: the resident bytes stay,
        the rest grows at most in proportion to the size (to its square for degree 2) -- sound
        for any peak that is a polynomial of the size with non-negative coefficients."""
        return grown(self.must_fit_bytes, self.resident_bytes, factor, degree)


def grown(peak: float, resident: int, factor: float, degree: int = 1) -> float:
    """``peak`` at ``factor`` times its size: the resident bytes (at most the peak) stay, the
    rest grows in proportion to the size (to its square for degree 2)."""
    base = min(resident, peak)
    return base + (peak - base) * factor ** degree


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What a step at ``size`` needs by the model."""

    size: int
    #: The expected peak of allocated and of reserved bytes (reserved: what the budget holds).
    allocated_bytes: int
    reserved_bytes: int
    #: Bytes the prediction may be short by (the largest amount a probe lay above the fitted
    #: curve).
    margin_bytes: int
    #: The step needs at least this many allocated bytes (see the module docstring).
    lower_bound_bytes: int
    #: How the numbers were obtained, in words.
    basis: str
    #: The stated need: what must fit in the budget (the allocated peak and its margin times
    #: the measured allowance; or the reserved peak and the margin, see the module docstring).
    need_bytes: int = 0


def _poly_fit(xs: Sequence[float], ys: Sequence[float], degree: int) -> list[float] | None:
    """Least-squares coefficients [c0, c1(, c2)] of ys against 1, x(, x²); None when the
    sizes cannot determine them."""
    n = degree + 1
    if len(set(xs)) < n:
        return None
    # Normal equations, solved by Gaussian elimination (n <= 3); x scaled for conditioning.
    scale = max(abs(x) for x in xs) or 1.0
    rows = [[(x / scale) ** k for k in range(n)] for x in xs]
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [u - f * v for u, v in zip(a[r], a[col])]
                b[r] -= f * b[col]
    return [b[k] / a[k][k] / scale ** k for k in range(n)]


def _eval(coef: Sequence[float], x: float) -> float:
    return sum(c * x ** k for k, c in enumerate(coef))


@dataclasses.dataclass(frozen=True)
class _Curve:
    """One fitted quantity (allocated or reserved peaks) against the size."""

    coef: tuple[float, ...]
    #: Largest amount by which a probe lies above the fitted curve.
    residual_bytes: float
    #: (size, peak) of the two largest probes: the local line for extrapolation.
    anchor: tuple[tuple[int, int], tuple[int, int]]
    #: The smallest increase per unit between consecutive probes (>= 0).
    slope_low: float

    def central(self, x: float) -> float:
        return _eval(self.coef, x)

    def local(self, x: float) -> float:
        (x0, y0), (x1, y1) = self.anchor
        return y1 + (y1 - y0) / (x1 - x0) * (x - x1)


def _curve(points: dict[int, int], degree: int) -> _Curve | None:
    xs = sorted(points)
    coef = _poly_fit(xs, [points[x] for x in xs], degree)
    if coef is None:
        return None
    residual = max(0.0, max(points[x] - _eval(coef, x) for x in xs))
    slopes = [(points[b] - points[a]) / (b - a) for a, b in zip(xs, xs[1:])]
    return _Curve(tuple(coef), residual, ((xs[-2], points[xs[-2]]), (xs[-1], points[xs[-1]])),
                  max(0.0, min(slopes)))


@dataclasses.dataclass(frozen=True)
class MemoryModel:
    """A step's peak memory against one size, fitted to probes (``fit_model``)."""

    #: Allocated bytes that do not depend on the size (parameters, gradients, optimizer state,
    #: buffers), bytes per unit of size and, for a quadratic model, per unit squared.
    fixed_bytes: int
    bytes_per_unit: int
    bytes_per_unit2: int
    #: The cache's overhead at the largest probe: peak reserved less peak allocated, and the
    #: ratio of the two.
    cache_overhead_bytes: int
    cache_ratio: float
    #: "sample" (the size is the batch) or "token" (a sequence length).
    unit: str
    probes: tuple[Probe, ...]
    _allocated: _Curve
    _reserved: _Curve
    #: Pinned over allocated peak at the two largest probes that measured it, averaged (>= 1;
    #: None: none did, or the allocator does not free and retry, and the need is the reserved
    #: curve).
    allowance: float | None = None
    #: Is the second largest probe off any flat (FLAT_SLOPE_SHARE), so that the line through
    #: the two largest is the growing part's? When it is on one (the optimizer's step holds the peak
    #: there), that line is too shallow: the need past the largest probe is then its peak
    #: grown in proportion to the size, its resident bytes kept (as Probe.need_at).
    anchored: bool = True

    @property
    def degree(self) -> int:
        return len(self._allocated.coef) - 1

    @property
    def largest_probe(self) -> Probe:
        return max(self.probes, key=lambda p: p.size)

    def predict(self, size: int) -> Prediction:
        """The need of a step at ``size``."""
        alloc, reserved = self._allocated, self._reserved
        a_central, a_local = alloc.central(size), alloc.local(size)
        r_central, r_local = reserved.central(size), reserved.local(size)
        a_high = max(a_central, a_local)
        top = self.largest_probe
        inside = size <= top.size
        proportional = ""
        if not inside and not self.anchored:
            scaled = grown(top.peak_allocated_bytes, top.resident_bytes, size / top.size,
                           self.degree)
            if scaled > a_high:
                a_high = scaled
                proportional = (f", {top.size}'s peak grown in proportion (the probes below it "
                                "lie on the flat of a fixed peak)")
        r_high = max(r_central, r_local, a_high)
        lower = self.lower_bound(size)
        basis = (f"{'a quadratic' if self.degree == 2 else 'a line'} through the exact step "
                 f"peaks at {len(self.probes)} sizes "
                 f"({', '.join(str(p.size) for p in sorted(self.probes, key=lambda p: p.size))})"
                 + ("" if inside else f", extrapolated from {top.size}") + proportional)
        if self.allowance is not None:
            margin = alloc.residual_bytes
            need = (a_high + margin) * self.allowance
            basis += f", times the measured allowance {self.allowance:.3f}"
        else:
            margin = max(alloc.residual_bytes, reserved.residual_bytes)
            need = r_high + margin
            basis += ", reserved peaks"
        return Prediction(size, int(math.ceil(a_high)), int(math.ceil(r_high)),
                          int(math.ceil(margin)), lower, basis, int(math.ceil(need)))

    def lower_bound(self, size: int) -> int:
        """Allocated bytes a step at ``size`` needs at least: the largest peak measured at a
        size at most ``size``, plus the smallest measured increase per unit for the rest."""
        below = [p for p in self.probes if p.size <= size]
        if not below:
            return 0
        base = max(below, key=lambda p: p.size)
        top = max(p.peak_allocated_bytes for p in below)
        return int(top + self._allocated.slope_low * (size - base.size))

    def largest_fitting(self, budget_bytes: int, margin_fraction: float = 0.05,
                        limit: int | None = None) -> int:
        """The largest size whose stated need fits ``budget_bytes`` less ``margin_fraction`` of
        it (0 when even size 1 does not); no more than ``limit``."""
        usable = budget_bytes * (1.0 - margin_fraction)
        if self.predict(1).need_bytes > usable:
            return 0
        low, high = 1, 2
        cap = limit if limit is not None else 1 << 40
        while high <= cap and self.predict(high).need_bytes <= usable:
            low, high = high, high * 2
        high = min(high, cap + 1)
        while high - low > 1:  # need is increasing in size: bisect the boundary
            mid = (low + high) // 2
            if self.predict(mid).need_bytes <= usable:
                low = mid
            else:
                high = mid
        return low

    def describe(self) -> str:
        """One line: the fitted numbers."""
        from .._core.units import format_bytes

        text = (f"fixed {format_bytes(self.fixed_bytes)} + {format_bytes(self.bytes_per_unit)} "
                f"per {self.unit}")
        if self.degree == 2:
            text += f" + {format_bytes(self.bytes_per_unit2)} per {self.unit}²"
        text += (f"; cache overhead {format_bytes(self.cache_overhead_bytes)} "
                 f"(reserved/allocated {self.cache_ratio:.3f}) at {self.unit} "
                 f"{self.largest_probe.size}")
        if self.allowance is not None:
            text += f"; allowance under a cap {self.allowance:.3f} (simulated need/allocated)"
        return text


def fit_model(probes: Sequence[Probe], quadratic: bool = False,
              unit: str = "sample", retries: bool = True) -> MemoryModel | None:
    """The model through ``probes`` (two sizes or more; three for ``quadratic``); None when
    they cannot determine it. Several probes at one size keep their highest peaks.
    ``retries``: does the allocator free its cache and retry before it raises (False with
    ``throw_on_cudamalloc_oom``: the reserved peak is then what must fit)?"""
    allocated: dict[int, int] = {}
    reserved: dict[int, int] = {}
    pinned: dict[int, int] = {}
    best: dict[int, Probe] = {}
    for p in probes:
        if p.size <= 0:
            raise ValueError(f"vramscope: a probe's size must be positive, got {p.size}")
        allocated[p.size] = max(allocated.get(p.size, 0), p.peak_allocated_bytes)
        reserved[p.size] = max(reserved.get(p.size, 0), p.peak_reserved_bytes,
                               p.peak_allocated_bytes)
        if p.peak_pinned_bytes:
            pinned[p.size] = max(pinned.get(p.size, 0), p.peak_pinned_bytes)
        if p.size not in best or p.steps > best[p.size].steps:
            best[p.size] = p
    degree = 2 if quadratic else 1
    a_curve = _curve(allocated, degree)
    r_curve = _curve(reserved, degree)
    if a_curve is None or r_curve is None:
        return None
    top = max(allocated)
    coef = list(a_curve.coef) + [0.0] * (3 - len(a_curve.coef))
    merged = tuple(dataclasses.replace(best[s], peak_allocated_bytes=allocated[s],
                                       peak_reserved_bytes=reserved[s],
                                       peak_pinned_bytes=pinned.get(s, 0)) for s in sorted(best))
    # Is the second largest probe on a flat (a fixed peak, the optimizer's step, holds it):
    # its peak grew from the probe below it by a small share of the growth per unit up to
    # the largest one? (A line grows alike on both sides; a quadratic a few times faster.)
    xs = sorted(allocated)
    anchored = True
    if len(xs) >= 3:
        (x1, y1), (x2, y2), (x3, y3) = ((x, allocated[x]) for x in xs[-3:])
        rising = (y3 - y2) / (x3 - x2)
        anchored = not (rising > 0 and (y2 - y1) / (x2 - x1) <= FLAT_SLOPE_SHARE * rising)
    allowance = None
    if retries and pinned:
        # The two largest probes that measured it (the layouts nearest the answer), averaged:
        # the ratio moves by 2-4 % from one size to the next as blocks land in segments
        # (tests/data/fit-calibration), and the local line runs through the same two probes.
        # Not one on a flat (the optimizer's step or a workspace holds the peak there): it has
        # that step's layout, not the answer's (an H100 run: 1.003 at 4 beside 1.194 at 54
        # averaged to an answer of 83 where 79 was the largest that ran).
        near = sorted(pinned)[-2 if anchored else -1:]
        ratios = [pinned[x] / allocated[x] for x in near if allocated[x]]
        allowance = max(1.0, sum(ratios) / len(ratios)) if ratios else 1.0
    return MemoryModel(
        fixed_bytes=int(coef[0]), bytes_per_unit=int(coef[1]), bytes_per_unit2=int(coef[2]),
        cache_overhead_bytes=reserved[top] - allocated[top],
        cache_ratio=reserved[top] / allocated[top] if allocated[top] else 1.0,
        unit=unit, probes=merged, _allocated=a_curve, _reserved=r_curve, allowance=allowance,
        anchored=anchored)
