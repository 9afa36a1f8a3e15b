# python/vramscope/predict/search.py -- which sizes to probe, and the answer they support (pure)
"""The search behind ``vramscope fit``: measure a few real steps at small sizes, fit the model,
and return the largest size whose stated need fits the budget with a margin, without ever
running a step that the evidence does not say fits.

``search(measure, budget_bytes)`` calls ``measure(size) -> Probe`` (in-process steps, or a fresh
process per size under ``vramscope fit --``) at sizes it picks:

1. ``start`` (default 1), then twice that, when one probe's peaks doubled fit (with one
   point, k times a size needs at most k times its peak: the fixed bytes are not doubled);
2. then sizes at growing shares of the model's current answer (half, then 80 %), each one
   predicted to fit with the margin and no larger than the largest probe's peak scaled in
   proportion to the size allows (a fixed peak at small sizes, such as the optimizer's step,
   can hide the per-sample bytes), so the last fit extrapolates little;
3. it stops when the answer moved by less than ``settle`` between fits, after ``max_probes``
   probes, or when the next size would not be larger than the last;
4. an answer above every probe that fits, with no probe above it that does not, is an
   extrapolation: it is run before it is given (up to ``CONFIRMS`` times, the model fit again
   each time), and where it could not be, the answer is the largest size measured to fit.
   An answer between a probe that fits and one that does not is read from the line through
   them.

Pure: ``measure`` is the only contact with a GPU, so the CPU tests drive it with a synthetic
step of known memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from .model import MemoryModel, Prediction, Probe, fit_model

__all__ = ["DEFAULT_MARGIN", "FitResult", "ProbeOutOfMemory", "guard_answer", "search",
           "round_down"]

#: Shares of the current answer probed after the first two sizes.
PROBE_SHARES = (0.5, 0.8)
#: Probes the search adds at its own answer before it gives it (step 4).
CONFIRMS = 2
#: The share of the budget an answer keeps free by default: the need already holds the
#: measured allowance under a cap (vramscope.predict.model); this covers what the probes did
#: not see at the answer's size (another cuDNN algorithm and its workspace). With it the
#: calibration models answer their true largest batch or one multiple of 8 below.
DEFAULT_MARGIN = 0.01


class ProbeOutOfMemory(Exception):
    """Raised by a ``measure`` whose step ran out of memory after all (the model was wrong, or
    another process took memory meanwhile): the search answers below that size."""

    def __init__(self, size: int, detail: str = "") -> None:
        super().__init__(f"size {size} ran out of memory{': ' + detail if detail else ''}")
        self.size = size


def round_down(size: int, multiple: int | None) -> int:
    """``size`` rounded down to ``multiple``: 0 when it is less than one multiple."""
    if multiple and multiple > 1:
        return size - size % multiple
    return size


@dataclasses.dataclass(frozen=True)
class FitResult:
    """The answer of a search: the size, the model and the probes it stands on."""

    #: The largest size that fits with the margin (0: not even the smallest).
    size: int
    #: The budget the reserved peak must stay within, and the share of it kept free.
    budget_bytes: int
    margin_fraction: float
    model: MemoryModel | None
    #: What the model says of ``size`` (None without a model or when nothing fits).
    prediction: Prediction | None
    probes: tuple[Probe, ...]
    #: Why the search stopped, in words.
    reason: str
    #: "batch_size" or "seq_len": what the size is.
    what: str = "batch_size"
    #: Where the budget came from ("the card", "the cap 0.5 of the device", "12 GiB asked").
    budget_source: str = ""

    @property
    def margin_bytes(self) -> int:
        """What the answer leaves free of the budget by the model: the budget less the stated
        need (the kept share is inside it)."""
        if self.prediction is None:
            return 0
        return self.budget_bytes - self.prediction.need_bytes

    def describe(self) -> str:
        """The model, the answer, its margin and the probes, a few lines of text."""
        from .._core.units import format_bytes

        source = f", {self.budget_source}" if self.budget_source else ""
        lines = [f"budget: {format_bytes(self.budget_bytes)}{source} (kept free: "
                 f"{self.margin_fraction:.0%})"]
        lines.append("probes: " + (", ".join(
            f"{p.size} -> {format_bytes(p.peak_allocated_bytes)} allocated, "
            f"{format_bytes(p.peak_reserved_bytes)} reserved" for p in self.probes)
            or "none measured"))
        if self.model is not None:
            lines.append("model: " + self.model.describe())
        if self.size > 0 and self.prediction is None:
            lines.append(f"answer: {self.what} {self.size}")
        elif self.prediction is not None and self.size > 0:
            p = self.prediction
            lines.append(
                f"answer: {self.what} {self.size}: needs ≈{format_bytes(p.need_bytes)} "
                f"(peak ≈{format_bytes(p.allocated_bytes)} allocated "
                f"± {format_bytes(p.margin_bytes)}; at least "
                f"{format_bytes(p.lower_bound_bytes)}), {format_bytes(self.margin_bytes)} "
                f"of the budget left free; {p.basis}")
        else:
            lines.append(f"answer: none: {self.reason}")
        if self.size > 0:
            lines.append(f"stopped: {self.reason}")
        return "\n".join(lines)


def _measured(size: int, probes: Sequence[Probe], what: str) -> Prediction | None:
    """The need at ``size`` without a model: the peaks of the smallest probe at ``size`` or
    above (a step's peak does not shrink as its size grows)."""
    above = [p for p in probes if p.size >= size]
    if not above:
        return None
    p = min(above, key=lambda q: q.size)
    below = [q.peak_allocated_bytes for q in probes if q.size <= size]
    basis = (f"measured at {what} {size}" if p.size == size
             else f"at most the peaks measured at {what} {p.size}")
    return Prediction(size, p.peak_allocated_bytes, p.peak_reserved_bytes, 0,
                      max(below, default=0), basis, p.must_fit_bytes)


def _fits_doubled(probe: Probe, factor: float, usable: float, degree: int = 1) -> bool:
    return probe.need_at(factor, degree) <= usable


def _proportional_bound(probe: Probe, usable: float, degree: int) -> int:
    """The largest size whose need, grown from ``probe``'s (its resident bytes kept, the rest
    in proportion to the size, to its square for degree 2: model.grown, inverted), stays within
    ``usable``: sound for any peak that is a polynomial of the size with non-negative
    coefficients, or the largest of several such."""
    need = probe.must_fit_bytes
    base = min(probe.resident_bytes, need)
    if need <= base or usable <= base:
        return probe.size
    return int(probe.size * ((usable - base) / (need - base)) ** (1.0 / degree))


def search(measure: Callable[[int], Probe], budget_bytes: int, *,
           margin: float = DEFAULT_MARGIN, start: int = 1, limit: int | None = None,
           multiple: int | None = None,
           quadratic: bool = False, max_probes: int = 8, settle: float = 0.03,
           unit: str = "sample", what: str = "batch_size",
           known: Sequence[Probe] = (), retries: bool = True,
           measure_many: Callable[[Sequence[int]], Sequence[Probe | ProbeOutOfMemory]]
           | None = None, confirm: bool = True) -> FitResult:
    """Probes sizes (see the module docstring) and returns the answer. ``limit``: never answer
    (or probe) above it; ``multiple``: round the answer down to it; ``quadratic``: fit a
    quadratic term (a sequence length under attention); ``known``: probes measured before;
    ``retries``: does the allocator free its cache and retry before it raises (see
    vramscope.predict.model)? ``measure_many(sizes)``: measures several sizes at once (probe
    processes side by side), each a Probe or the ProbeOutOfMemory it raised; given, the search
    asks it for every size it may probe together: the doublings the first probe alone shows to
    fit, then each share of the answer within what the largest probe shows to fit.
    ``confirm``: run the answer before giving it (step 4; the OOM post-mortem runs the batch it
    advises itself, within its time)."""
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"vramscope: margin must be in [0, 1), got {margin}")
    if start < 1:
        raise ValueError(f"vramscope: the first size must be at least 1, got {start}")
    if limit is not None and limit < start:
        raise ValueError(f"vramscope: the limit ({limit}) is below the first size ({start})")
    if multiple is not None and multiple < 1:
        raise ValueError(f"vramscope: multiple must be at least 1, got {multiple}")
    usable = budget_bytes * (1.0 - margin)
    probes: list[Probe] = list(known)

    def done(size: int, model: MemoryModel | None, reason: str) -> FitResult:
        # The one way out: the answer rounded down to the multiple, and what it stands on.
        rounded = round_down(size, multiple)
        if size > 0 and rounded == 0:
            reason = (f"no multiple of {multiple} fits: {what} {size} is the largest size that "
                      f"does ({reason})")
        size = rounded
        prediction = None
        if size > 0:
            # A size measured is given with its own peaks, not the line's.
            prediction = (model.predict(size)
                          if model is not None and all(p.size != size for p in probes)
                          else _measured(size, probes, what))
        return FitResult(size, budget_bytes, margin, model, prediction,
                         tuple(sorted(probes, key=lambda p: p.size)), reason, what)

    def run(size: int) -> Probe:
        probe = measure(size)
        probes.append(probe)
        return probe

    def run_many(sizes: Sequence[int], answer: int | None = None) -> list[int]:
        # Every size measured is kept; the smallest that ran out of memory then ends the search,
        # unless it is ``answer`` (the model's answer run beside its shares, step 4's probe):
        # that one only bounds the answer, and its size is returned.
        if measure_many is None or len(sizes) < 2:
            for size in sizes:
                run(size)
            return []
        failed = []
        for got in measure_many(sizes):
            if isinstance(got, ProbeOutOfMemory):
                failed.append(got)
            else:
                probes.append(got)
        hard = [oom for oom in failed if oom.size != answer]
        if hard:
            raise min(hard, key=lambda oom: oom.size)
        return [oom.size for oom in failed]

    try:
        return _search(run, run_many if measure_many is not None else None, probes, usable,
                       done, start=start, limit=limit,
                       multiple=multiple, quadratic=quadratic, max_probes=max_probes,
                       settle=settle, unit=unit, what=what, budget_bytes=budget_bytes,
                       margin=margin, retries=retries, confirm=confirm)
    except ProbeOutOfMemory as oom:
        # The model missed: answer only what ran.
        ran = [p.size for p in probes if p.size < oom.size]
        return done(max(ran, default=0), fit_model(probes, quadratic, unit, retries),
                    f"probing stopped: {oom}; the answer is the largest size that ran")


def _search(run: Callable[[int], Probe],
            run_many: Callable[..., list[int]] | None,
            probes: list[Probe], usable: float,
            done: Callable[[int, MemoryModel | None, str], FitResult], *, start: int,
            limit: int | None, multiple: int | None, quadratic: bool, max_probes: int,
            settle: float, unit: str, what: str, budget_bytes: int, margin: float,
            retries: bool, confirm: bool) -> FitResult:
    needed = 3 if quadratic else 2

    # 1. The first sizes: each at most twice the last (a sound bound from one point).
    if not probes:
        run(start)
    first = min(probes, key=lambda p: p.size)
    if first.must_fit_bytes > usable:
        return done(0, None, f"{what} {first.size} already needs more than the budget allows")
    degree = 2 if quadratic else 1
    # Every doubling the first probe alone shows to fit, at once (up to three), when they may
    # run side by side: the farther the largest, the nearer the next round's shares may go to
    # the answer (each within what the largest probe shows to fit). With few probes left, as
    # many as the model needs.
    first_top = max(probes, key=lambda p: p.size)
    ladder = [first_top.size * 2 ** k for k in (1, 2, 3)
              if (limit is None or first_top.size * 2 ** k <= limit)
              and _fits_doubled(first_top, 2 ** k, usable, degree)]
    if run_many is not None and len(ladder) >= 2 and len({p.size for p in probes}) < needed:
        assert run_many is not None
        left = max_probes - len(probes)
        run_many(ladder if left >= len(ladder) + 3
                 else ladder[:max(needed - len({p.size for p in probes}), 2)] if left >= 2
                 else ladder[:1])
    while len({p.size for p in probes}) < needed:
        last = max(probes, key=lambda p: p.size)
        nxt = last.size * 2
        if limit is not None and nxt > limit:
            return done(last.size, fit_model(probes, quadratic, unit, retries),
                        f"the limit {limit} leaves no room for a second size")
        if not _fits_doubled(last, nxt / last.size, usable, 2 if quadratic else 1):
            answer = last.size  # the peaks measured there fit; doubling may not
            model = fit_model(probes, quadratic, unit, retries) if len(probes) >= needed else None
            return done(answer, model, f"{what} {nxt} might not fit by {what} {last.size}'s peaks")
        run(nxt)

    # 2. Toward the answer: the model's answer, but never past what the largest probe alone
    # says fits (a step's peak grows at most in proportion to its size, squared for a
    # quadratic model): at small sizes a fixed peak (the optimizer's step, loading) can hide
    # the per-sample bytes, and the model then promises far too much.
    answer_before = 0
    reason = f"{max_probes} probes taken"
    failed: list[int] = []  # answers run beside their shares that ran out of memory
    while True:
        model = fit_model(probes, quadratic, unit, retries)
        if model is None:
            return done(0, None, "the probes do not determine a model")
        answer = model.largest_fitting(budget_bytes, margin, limit)
        top = max(probes, key=lambda p: p.size)
        bound = _proportional_bound(top, usable, degree)
        close = top.size >= PROBE_SHARES[0] * answer
        if answer_before and abs(answer - answer_before) <= settle * answer_before and close:
            reason = "the answer settled"
            break
        if len(probes) >= max_probes:
            break
        # A new probe worth its step: at least a quarter above the largest one.
        share = next((s for s in PROBE_SHARES if int(answer * s) >= 1.25 * top.size), None)
        cap = limit if limit is not None else bound
        if share is None and not model.anchored and min(answer, bound, cap) > top.size:
            # The probes below the largest lie on a fixed peak's flat: the answer is that
            # probe's peak grown in proportion (a bound, not the line). The answer itself
            # fits by that bound: measured, it anchors the line of what grows.
            share = 1.0
        if share is None:
            reason = "the last probe is close to the answer"
            break
        nxt = min(int(answer * share), bound, cap)
        if nxt <= top.size:
            reason = f"no size above {top.size} is known to fit"
            break
        answer_before = answer
        # The later shares too, each within what the largest probe shows to fit: side by side.
        together = sorted({min(int(answer * s), bound, cap) for s in PROBE_SHARES
                           if s >= share and int(answer * s) >= 1.25 * top.size})
        together = [x for x in together if x > top.size][:max(1, max_probes - len(probes))]
        # Side by side, the answer itself too (rounded as it will be given): step 4 then seldom
        # needs a round of its own.
        given = round_down(answer, multiple) if confirm else 0  # the model keeps within limit
        if run_many is not None and together and given > together[-1] and \
                len(together) < max_probes - len(probes) and all(given < f for f in failed):
            together.append(given)
        if run_many is not None and len(together) >= 2:
            failed += run_many(together, given)
        else:
            run(nxt)
    answer, far = guard_answer(answer, probes, usable, degree, what)
    if far:
        reason += f"; {far}"
        if failed:
            answer = min(answer, min(failed) - 1)
    elif confirm:
        answer, model, confirmed = _confirm(run, probes, answer, model, usable, budget_bytes,
                                            margin=margin, limit=limit, multiple=multiple,
                                            quadratic=quadratic, unit=unit, retries=retries,
                                            max_probes=max_probes, what=what, failed=failed,
                                            settle=settle if run_many is not None else 0.0)
        if confirmed:
            reason += f"; {confirmed}"
    return done(answer, model, reason)


def _confirm(run: Callable[[int], Probe], probes: list[Probe], answer: int,
             model: MemoryModel, usable: float, budget_bytes: int, *, margin: float,
             limit: int | None, multiple: int | None, quadratic: bool, unit: str,
             retries: bool, max_probes: int, what: str,
             failed: Sequence[int] = (), settle: float = 0.0) -> tuple[int, MemoryModel, str]:
    """Step 4: the answer as measured. A size to be given (``answer`` rounded down to
    ``multiple``) above every probe that fits is run first, unless a probe above it measured
    more than the budget allows (the line through the two brackets it); the model is then fit
    again. A size that ran out of memory says nothing of the need below it: the next size tried
    is halfway to it from the largest that fits. Returns the answer, the model and what was
    done, in words ("" when the answer was measured or bracketed already). ``failed``: sizes
    that ran out of memory before (no Probe). An answer within ``settle`` above the largest
    size that fits is given as that size (the CLI's: one more probe is a process's time for a
    few percent; in-process probes are cheap, and ``settle`` is 0 there)."""
    def bounds() -> tuple[int, int | None]:
        # The largest size measured to fit (0: none) and the smallest measured to need more.
        fits = max((p.size for p in probes if p.must_fit_bytes <= usable), default=0)
        over = min((p.size for p in probes if p.must_fit_bytes > usable), default=None)
        return fits, over

    ran: list[str] = [f"{size} ran out of memory" for size in failed]
    failed = list(failed)
    for attempt in range(CONFIRMS + 1):
        fits, over = bounds()
        if failed and min(failed) <= answer:
            answer = fits + (min(failed) - fits) // 2
        given = round_down(answer, multiple)
        bracketed = over is not None and given < over and all(f > over for f in failed)
        if given <= fits or bracketed:
            break
        if fits and given <= fits * (1.0 + settle):
            ran.append(f"{given} is within {settle:.0%} of {fits}, measured: {fits} given")
            answer = fits
            break
        if attempt == CONFIRMS or len(probes) >= max_probes:
            ran.append(f"{given} not measured, so the answer is the largest size that was")
            answer = fits
            break
        try:
            probe = run(given)
            verdict = "fits" if probe.must_fit_bytes <= usable else "needs more than allowed"
            ran.append(f"{given} measured ({verdict})")
        except ProbeOutOfMemory:
            failed.append(given)
            ran.append(f"{given} ran out of memory")
        refit = fit_model(probes, quadratic, unit, retries)
        if refit is not None:
            model = refit
        fits, over = bounds()
        answer = max(model.largest_fitting(budget_bytes, margin, limit), fits)
        if over is not None:
            answer = min(answer, over - 1)
    return answer, model, ("the answer checked: " + ", ".join(ran)) if ran else ""


def guard_answer(answer: int, probes: Sequence[Probe], usable: float, degree: int = 1,
                 what: str = "batch_size") -> tuple[int, str]:
    """The model's ``answer`` as far as the probes can stand behind it: when they stayed far
    below it (the largest under half of it), no more than the largest probe's need grown in
    proportion to the size allows (a fixed peak at small sizes, the optimizer's step, can hide
    the bytes per sample). Returns the answer and, when it was cut, why in words. The OOM
    advice's batch from past steps is held to the same rule as ``vramscope fit``."""
    top = max(probes, key=lambda p: p.size)
    if top.size >= PROBE_SHARES[0] * answer:
        return answer, ""
    guarded = min(answer, max(top.size, _proportional_bound(top, usable, degree)))
    return guarded, f"far from the probes, the answer is what {what} {top.size}'s peak allows"
