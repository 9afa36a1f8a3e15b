# python/vramscope/postmortem/remedies.py -- the OOM's remedies, judged by what each recovers
"""``assess(evidence)``: how much the failing step lacked (``need_bytes``) and, for every remedy
the evidence speaks to, how many bytes it gives back. A remedy is advised only when its own
mechanism can cover the need (expandable segments only when the cache holds the bytes in
pieces, a smaller batch only when the numbers say which batch fits); the others are listed as
not advised, with the reason. Pure functions of an ``OomEvidence``, tested with synthetic
numbers; the GPU tests apply the first advice and rerun the program.

Among remedies that fit, the order prefers what changes least in the training: fix a leak, free
the card from other processes, an allocator setting, then (when the batch just grew past what
fits) the batch that fits, then checkpointing, mixed precision, a lighter optimizer, a smaller
batch (it changes the optimisation), and a larger memory-fraction cap last: the cap is a limit
the program set itself (a share of a card that others use too), which the other remedies keep.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from .._core.units import format_bytes
from ..attribution.model_probe import STATE_PER_PARAMETER, TRAINING_PHASES
from ..predict.model import MemoryModel, Probe, fit_model
from ..predict.search import DEFAULT_MARGIN, guard_answer
from .advice import Advice, Holder, Measured, OomEvidence, StepPoint, growing_text, leak_rate

#: Share of the budget a suggested batch size or memory fraction keeps free: the allocator's
#: rounding and the next step's temporaries are not in a linear fit.
MARGIN_FRACTION = 0.05
#: Suggested batches of 16 and more are rounded down to a multiple of this.
BATCH_MULTIPLE = 8
#: Without per-module numbers, the share of the activations assumed to live inside the repeated
#: blocks (embeddings, the head and the loss are outside them): deliberately low, so that
#: checkpointing is not promised more than it gives.
BLOCK_ACTIVATION_SHARE = 0.75
#: Saved-tensor bytes that autocast to bfloat16 keeps (matmul/conv outputs are halved, norms
#: and softmax stay fp32): a conservative estimate of its saving.
AUTOCAST_KEPT_SHARE = 0.6
#: The share of the budget a measured remedy keeps free (the search's: vramscope.predict).
MEASURED_MARGIN = DEFAULT_MARGIN
#: A container named as a leak's keeps at most this many steps' growth per item, and at most
#: this many items per step so far (``few_per_step``).
LEAK_ITEM_STEPS = 3
LEAK_ITEMS_PER_STEP = 4
#: Remedy kinds in the order they are preferred when several fit (see the module docstring).
PRIORITY = ("eval_accumulation", "leak", "no_grad", "map_location", "other_processes",
            "expandable_segments",
            "empty_cache", "batch_grew", "sequence_length", "image_size",
            "activation_checkpointing", "mixed_precision", "optimizer_state", "model_dtype",
            "batch_size", "max_new_tokens", "memory_fraction", "generic")


@dataclasses.dataclass
class Assessment:
    """The judgement of one OOM."""

    #: Remedies that cover the need, preferred first; when none does, the partial ones, the
    #: largest first; a generic hint when the evidence supports nothing.
    advice: list[Advice]
    #: (kind, why not) of the remedies considered and not advised.
    not_advised: list[tuple[str, str]]
    #: What the failing step lacked: the shortfall of the request, or more when the step's
    #: projected peak is known to exceed the budget.
    need_bytes: int
    #: The step's expected peak of allocated bytes, and how it was estimated.
    projected_peak_bytes: int
    projection: str
    #: Is the projection only a lower bound (the failing request, a step that already outgrew
    #: every measured one)? Then ``need_bytes`` is "at least", and no remedy is ``fits``.
    projection_is_lower_bound: bool = False


def _peaks_by_batch(steps: Sequence[StepPoint]) -> dict[int, StepPoint]:
    best: dict[int, StepPoint] = {}
    for s in steps:
        if s.batch_size and (s.batch_size not in best or
                             s.peak_allocated_bytes > best[s.batch_size].peak_allocated_bytes):
            best[s.batch_size] = s
    return best


def batch_model(steps: Sequence[StepPoint]) -> MemoryModel | None:
    """The memory model against the batch (vramscope.predict, the one ``vramscope fit`` uses)
    through the step peaks at two or more batch sizes; None with fewer or when it does not
    rise with the batch."""
    by_batch = _peaks_by_batch(steps)
    model = fit_model([Probe(b, s.peak_allocated_bytes, s.peak_reserved_bytes)
                       for b, s in by_batch.items()])
    if model is None or model.bytes_per_unit <= 0:
        return None
    return model


def batch_line(steps: Sequence[StepPoint]) -> tuple[float, float] | None:
    """(fixed bytes, bytes per sample) of the model through (batch, step peak) over two or more
    batch sizes; None with fewer or a line that does not rise."""
    model = batch_model(steps)
    if model is None:
        return None
    return float(model.fixed_bytes), float(model.bytes_per_unit)


def _activations(e: OomEvidence) -> int:
    """Activation bytes the step will hold at its peak: live at the OOM, scaled up when the OOM
    came part-way through the forward's blocks."""
    live = e.categories.get("activations", 0)
    if e.phase == "forward" and e.forward_progress and 0 < e.forward_progress < 1:
        return int(live / e.forward_progress)
    return live


def grown_dims(e: OomEvidence) -> str:
    """"dimension 1: 256 -> 512" for each non-leading dimension of the model's input that is
    larger than at a past step of the same batch size; "" when none grew or it is unknown."""
    now, past = e.input_shape, e.past_input_shape
    if not now or not past or len(now) != len(past):
        return ""
    return ", ".join(f"dimension {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(past, now))
                     if i > 0 and b > a)


def _projection(e: OomEvidence) -> tuple[int, str, bool]:
    """The failing step's expected peak of allocated bytes, the basis of the estimate, and
    whether it is only a lower bound. A measured basis (a past step at the failing batch, the
    memory model through past batch sizes, the last step) counts only while the failing step
    has not already outgrown it: a step that needs more than the measured one at the same batch
    grew in another dimension (a longer sequence, a larger image, a growing cache), and then
    only the lower bound is known."""
    lower = e.allocated_bytes + e.requested_bytes
    if e.eval_joining:
        return lower, ("the failing request, joining an evaluation step's predictions to those "
                       "the loop keeps on the device: each later step keeps more, so at least "
                       "that much"), True
    grown = grown_dims(e)
    outgrew = ("the step already needs {need} at the OOM, more than {what} "
               f"({grown or 'another input dimension grew'}): at least that much")
    by_batch = _peaks_by_batch(e.steps)
    if e.batch_size and e.batch_size in by_batch:
        past = by_batch[e.batch_size].peak_allocated_bytes
        if grown and lower <= past:
            return lower, (f"the failing request: the past step at batch {e.batch_size} had a "
                           f"smaller input ({grown}), so its peak {format_bytes(past)} is not "
                           "this step's: at least that much"), True
        if lower > past:
            return lower, outgrew.format(need=format_bytes(lower), what="the peak "
                                         f"{format_bytes(past)} of a past step at batch "
                                         f"{e.batch_size}"), True
        return past, f"the peak of a past step at batch {e.batch_size}", False
    model = batch_model(e.steps)
    if model is not None and e.batch_size:
        p = model.predict(e.batch_size)
        if lower > p.allocated_bytes + p.margin_bytes:
            return lower, outgrew.format(need=format_bytes(lower), what="the memory model "
                                         f"predicts at batch {e.batch_size} "
                                         f"({format_bytes(p.allocated_bytes)})"), True
        return max(lower, p.allocated_bytes), f"the memory model: {p.basis}", False
    live = e.categories.get("activations", 0)
    if live and _activations(e) > live:
        return lower + _activations(e) - live, \
            f"the activations so far, {e.forward_progress:.0%} through the forward's blocks " \
            "(backward's gradients and temporaries not counted: at least that much)", True
    if e.phase == "optimizer" and e.optimizer_state_full_bytes > e.optimizer_state_bytes:
        missing = e.optimizer_state_full_bytes - e.optimizer_state_bytes - e.requested_bytes
        return lower + max(0, missing), "the optimizer state still to be allocated", True
    if e.phase == "load" and e.load_bytes and e.load_call != "torch.load":
        still = max(e.requested_bytes, e.load_bytes - e.loaded_bytes)
        return e.allocated_bytes + still, (
            f"the model's parameters and buffers still to be moved to the device "
            f"({format_bytes(still)} of {format_bytes(e.load_bytes)}): its steps need more, "
            "at least that much"), True
    if e.generating:
        return lower, ("the failing request, inside generate(): the KV cache grows with every "
                       "new token, so the call needs more than this: at least that much"), True
    if e.steps and not any(s.batch_size for s in e.steps):
        past = e.steps[-1].peak_allocated_bytes
        if lower <= past:
            return past, "the peak of the last step", False
        return lower, outgrew.format(need=format_bytes(lower), what="the peak "
                                     f"{format_bytes(past)} of the last step"), True
    return lower, "the failing request (the rest of the step is not known)", True


def _autograd_off(e: OomEvidence) -> bool:
    """Was autograd off at the OOM because the program ran without it (no_grad, inference_mode)?
    Never in a backward or an optimizer step (``grad_enabled`` is the step's mode there, not
    the engine's or ``Optimizer.step``'s own): a training step that runs out there is no
    inference."""
    return e.grad_enabled is False and e.phase not in TRAINING_PHASES


def _optimizer_step_floor(e: OomEvidence) -> int:
    """Allocated bytes the step needs at least at its optimizer step, where the parameters,
    their gradients, the optimizer's full state and its step's temporaries are live at once
    (0 without an optimizer): on a first step, gradients and the lazily allocated state are
    still to come."""
    if e.parameter_bytes <= 0 or not e.optimizer or _autograd_off(e) or e.generating:
        return 0  # inference: no optimizer step in this call
    return 2 * e.parameter_bytes + max(e.optimizer_state_full_bytes, e.optimizer_state_bytes) \
        + e.optimizer_temporary_bytes


def projection(e: OomEvidence) -> tuple[int, str, bool]:
    """The failing step's expected peak of allocated bytes, the basis of the estimate, and
    whether it is only a lower bound (raised, when it is one, to what the optimizer's step
    needs at least: parameters, gradients and the full state)."""
    peak, basis, only_lower = _projection(e)
    if not e.peaks_exact and not only_lower:
        only_lower = True
        basis += " (sampled peaks, polling mode: at least that much)"
    floor = _optimizer_step_floor(e)
    if only_lower and floor > peak:
        return floor, (f"parameters, gradients and the full {e.optimizer} state"
                       + (" and its step's temporaries" if e.optimizer_temporary_bytes else "")
                       + f", live at once at the optimizer's step ({format_bytes(floor)}; "
                       f"larger than {basis})"), \
            True
    return peak, basis, only_lower


def projected_peak(e: OomEvidence) -> tuple[int, str]:
    """The failing step's expected peak of allocated bytes and the basis of the estimate."""
    peak, basis, _ = projection(e)
    return peak, basis


def few_per_step(h: Holder, steps: Sequence[StepPoint]) -> bool:
    """Does ``h`` hold no more items than a few per step so far (what a per-step leak adds),
    unlike a dataset kept on the device, which holds its batches from the start?"""
    return h.items <= LEAK_ITEMS_PER_STEP * (max((p.step for p in steps), default=0) + 1)


def _leak(e: OomEvidence, need: int) -> Advice | None:
    """A leak: step-end memory that grew at every step, or, with no optimizer or a model in
    evaluation mode, containers of the program's that kept autograd graphs from one iteration
    to the next (an evaluation loop recording its outputs under autograd). The containers
    found in the traceback (``e.holders``) are named, with what emptying each freed, measured."""
    rate = leak_rate(e.steps)
    held = [h for h in e.holders if h.freed_bytes]
    if rate is not None:
        # A container that explains a per-step leak holds about a step's growth per item (the
        # failing step's own list, its graphs alive, holds far more), and a few items per step.
        held = [h for h in held if (h.freed_bytes or 0) <= LEAK_ITEM_STEPS * rate * h.items
                and few_per_step(h, e.steps)]
    else:
        # In a training step, graphs in a list may be the step's own (micro-batches summed
        # before one backward; with steps between them, their ends would show a leak): only a
        # program with no optimizer, or a model in evaluation mode, keeps them by mistake.
        held = [h for h in held if h.keeps_graphs]
        if not held or (e.steps or e.optimizer) and e.training is not False:
            return None
    freed = sum(h.freed_bytes or 0 for h in held)
    names = ", ".join(h.name for h in held[:3])
    how = (f" How: keep a number (loss.item()) or a copy off the device (.detach().cpu()) in "
           f"{names} instead of the tensor" + (", or run the loop under torch.no_grad() where "
                                                "nothing needs a backward"
                                                if any(h.keeps_graphs for h in held) else "")
           + "." if held else "")
    kept = ("; in the program: " + "; ".join(h.describe() for h in held[:3])) if held else ""
    params: dict[str, Any] = {
        "holders": [{"name": h.name, "where": h.where, "graphs": h.graphs,
                     "freed_bytes": h.freed_bytes} for h in held[:3]]}
    if rate is None:
        # No step to compare: the measured step (run again once they were emptied) must fit.
        m = e.measured
        fits = freed >= need and m is not None and m.need_bytes <= _usable(e.budget_bytes)
        return Advice(
            score=freed / need, kind="leak", recovers_bytes=freed, fits=fits,
            params={"bytes_per_step": None, **params},
            title="memory leak: autograd graphs kept from one iteration to the next",
            detail=(f"{format_bytes(freed)} held by the graphs{kept}" +
                    ("" if m is None else f"; measured with them emptied, the step needs "
                     f"≈{format_bytes(m.need_bytes)} of the {format_bytes(e.budget_bytes)} "
                     "budget") + "." + how))
    grown = e.steps[-1].allocated_bytes - e.steps[0].allocated_bytes
    recovers = max(grown, freed)
    if e.growing_ops or e.growing_modules:
        where = "; growing: " + growing_text(e.growing_modules, e.growing_ops)
    elif e.top_ops:
        where = f" (largest holder now: {e.top_ops[0][0]})"
    else:
        where = ""
    return Advice(
        score=recovers / need, kind="leak", recovers_bytes=recovers, fits=recovers >= need,
        params={"bytes_per_step": rate, "modules": [m for m, _ in e.growing_modules[:3]],
                "ops": [o for o, _ in e.growing_ops[:3]], **params},
        title="memory leak: step-end allocated memory grows every step",
        detail=(f"+{format_bytes(rate)} per step over the last {len(e.steps) - 1} steps "
                f"(+{format_bytes(grown)} in total){where}{kept}" +
                (f".{how}" if held else "; look for tensors kept across steps (losses appended "
                 "without .item(), outputs kept for metrics, caches, hooks).")))


#: The most evaluation steps eval_accumulation advises to keep on the device at once.
EVAL_ACCUMULATION_MAX = 16


def _eval_accumulation(e: OomEvidence, need: int) -> Advice | None:
    """An OOM in transformers' Trainer evaluation or prediction loop, which keeps every step's
    predictions, labels and losses on the device (joined by torch.cat at each step, so the
    join needs the old and the new together) until it ends, unless eval_accumulation_steps
    moves them to the host every that many steps. Kept at the failing step s: ``kept`` for
    the d steps since the last move (d = s without it), b = kept / d a step; the join at the
    failing step holds the old d·b, the step's b and the new (d+1)·b. Moving them every k
    steps keeps at most k of them: the largest join holds 2k·b (k = 1: none, the step's own
    b). k = d // 2, at most EVAL_ACCUMULATION_MAX: each step's join then stays below those of
    the steps that already ran. An OOM inside a step (its forward) beside what was kept
    recovers the kept d·b less the k·b that stay."""
    every = e.eval_accumulation_steps
    done = e.eval_step % every if every else e.eval_step
    if not e.eval_kept_bytes or done < 1 or every == 1:
        return None
    per_step = e.eval_kept_bytes // done
    k = max(1, min(done // 2, EVAL_ACCUMULATION_MAX))
    if e.eval_joining:
        joined = (2 * done + 2) * per_step
        recovers = max(0, joined - (per_step if k == 1 else 2 * k * per_step))
    else:
        # The OOM came in a step, beside what was kept: at most k steps' worth stays.
        recovers = max(0, e.eval_kept_bytes - k * per_step)
    now = (f"every {every} steps" if every else "at the end of the loop (eval_accumulation_steps "
           "unset)")
    return Advice(
        score=recovers / need, kind="eval_accumulation", recovers_bytes=recovers,
        fits=recovers >= need,
        # Estimated from what the steps that ran kept: ranked first, never promised.
        params={"eval_accumulation_steps": k, "kept_bytes": e.eval_kept_bytes,
                "bytes_per_step": per_step, "steps_kept": done, "estimated": True},
        title=(f"move the evaluation's predictions to the host: "
               f"TrainingArguments(eval_accumulation_steps={k})"),
        detail=(f"transformers' Trainer keeps every evaluation step's predictions, labels and "
                f"losses on the device and moves them to the host {now}: "
                f"{format_bytes(e.eval_kept_bytes)} kept after {done} steps, "
                f"≈{format_bytes(per_step)} a step, and joining the next step's needs the old "
                f"and the new together. Every {k} step{'s' if k > 1 else ''} they take at most "
                f"≈{format_bytes(per_step if k == 1 else 2 * k * per_step)} "
                f"({format_bytes(recovers)} less at this step); metrics are unchanged, computed "
                "on the host at the end. Where the metric needs only the predicted ids, "
                "Trainer(preprocess_logits_for_metrics=lambda logits, labels: "
                "logits.argmax(-1)) keeps one number a token instead of the vocabulary's "
                "logits."))


def _other_processes(e: OomEvidence, need: int, rejected: list[tuple[str, str]]
                     ) -> Advice | None:
    others = e.other_processes_bytes
    estimated = others is None
    if others is None:
        # NVML could not say whose the bytes outside this allocator are; a CUDA context and
        # its libraries take about a GiB, so only what is well beyond it counts.
        others = e.outside_bytes - (1 << 30)
    if others < max(need, e.device_total_bytes // 20, 1):
        return None
    gain = min(e.limit_or_total_bytes, e.budget_bytes + others) - e.budget_bytes
    if gain < need:
        rejected.append(("other_processes",
                         f"other processes hold {format_bytes(others)} but the memory-fraction "
                         "cap, not the device, limits this process"))
        return None
    what = ("used outside this process's allocator (NVML could not say by whom)" if estimated
            else "held by other processes")
    return Advice(
        score=gain / need, kind="other_processes", recovers_bytes=gain, fits=True,
        params={"other_processes_bytes": others, "estimated": estimated},
        title="other processes hold the GPU: stop them or run on a free GPU",
        detail=(f"{format_bytes(others)} of the device is {what}; without it PyTorch could "
                f"have {format_bytes(gain)} more, {format_bytes(need)} was needed. `vramscope` "
                "lists the processes."))


def _expandable(e: OomEvidence, need: int, peak: int, rejected: list[tuple[str, str]]
                ) -> Advice | None:
    if e.cached_free_bytes <= 0 or e.oom_source != "allocator":
        return None
    if e.expandable_segments:
        rejected.append(("expandable_segments", "expandable segments are already on"))
        return None
    if e.cached_free_bytes + e.available_bytes < e.requested_bytes or peak > e.budget_bytes:
        rejected.append(("expandable_segments",
                         f"only {format_bytes(e.cached_free_bytes)} is free inside the cache "
                         f"against {format_bytes(need)} needed: the step does not fit the "
                         "budget in any layout (capacity, not fragmentation)"))
        return None
    return Advice(
        score=e.cached_free_bytes / need, kind="expandable_segments",
        recovers_bytes=e.cached_free_bytes, fits=True,
        params={"env": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"},
        title="set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        detail=(f"{format_bytes(e.cached_free_bytes)} is free inside the cache but the "
                f"largest free block is {format_bytes(e.largest_free_block_bytes)} "
                f"(fragmentation {e.fragmentation:.0%}); the step needs "
                f"{format_bytes(peak)} of {format_bytes(e.budget_bytes)}, so with expandable "
                "segments (free pages returned and remapped) the request would have fit."))


def _empty_cache(e: OomEvidence, need: int, rejected: list[tuple[str, str]]) -> Advice | None:
    if e.cached_free_bytes <= 0:
        return None
    if e.oom_source == "allocator":
        rejected.append(("empty_cache",
                         "torch.cuda.empty_cache() cannot help: the allocator already returned "
                         "its unused segments before raising; the "
                         f"{format_bytes(e.cached_free_bytes)} still cached are free blocks "
                         "inside segments in use"))
        return None
    fits = e.cached_free_bytes >= need
    return Advice(
        score=e.cached_free_bytes / need, kind="empty_cache", recovers_bytes=e.cached_free_bytes,
        fits=fits, params={},
        title="call torch.cuda.empty_cache() before the allocation outside PyTorch",
        detail=(f"the failing allocation was not the caching allocator's (cuBLAS/cuDNN/NCCL "
                f"workspaces, a library's cudaMalloc) and PyTorch keeps "
                f"{format_bytes(e.cached_free_bytes)} cached but unused, which that consumer "
                "cannot take until it is released."))


def _batch_size(e: OomEvidence, need: int, peak: int, rejected: list[tuple[str, str]]
                ) -> Advice | None:
    """The batch that fits, from the exact step peaks of past steps at two or more batch sizes
    by the model and the guard of ``vramscope fit`` (so the two cannot disagree): a promise.
    From one batch size it is an estimate (the activations per sample, or the peak less the
    model's state), never promised: the measurement at exit settles it."""
    current = e.batch_size
    if not current:
        if e.steps:
            rejected.append(("batch_size", "the batch size was not seen (no model forward "
                             "was found); Monitor(model=...) reads it"))
        return None
    ran = _peaks_by_batch(e.steps)
    usable = _usable(e.budget_bytes)
    model = batch_model(e.steps)
    promised = model is not None
    if model is not None:
        probes = [Probe(b, s.peak_allocated_bytes, s.peak_reserved_bytes) for b, s in ran.items()]
        batch = model.largest_fitting(e.budget_bytes, MEASURED_MARGIN, limit=current - 1)
        batch, far = guard_answer(batch, probes, usable)
        per_sample, fixed = float(model.bytes_per_unit), float(model.fixed_bytes)
        basis = (f"the exact step peaks at {len(ran)} batch sizes "
                 f"({', '.join(map(str, sorted(ran)))})" + (f"; {far}" if far else ""))
    else:
        if _activations(e) > 0:
            per_sample = _activations(e) / current
            fixed = peak - _activations(e)
            basis = (f"{format_bytes(int(per_sample))} of activations per sample at batch "
                     f"{current}")
        elif e.parameter_bytes > 0:
            fixed = 2 * e.parameter_bytes + max(e.optimizer_state_full_bytes,
                                                e.optimizer_state_bytes)
            per_sample = (peak - fixed) / current
            basis = f"the peak less parameters, gradients and optimizer state, at batch {current}"
        else:
            rejected.append(("batch_size", f"one batch size ({current}) and no activation "
                             "numbers: the bytes per sample are unknown"))
            return None
        if fixed >= usable or per_sample <= 0:
            rejected.append(("batch_size", f"even batch 1 does not fit: "
                             f"{format_bytes(int(fixed))} does not depend on the batch, "
                             f"{format_bytes(e.budget_bytes)} is the budget"))
            return None
        batch = int(math.floor((usable - fixed) / per_sample))
    if batch >= 2 * BATCH_MULTIPLE:
        batch -= batch % BATCH_MULTIPLE  # the sizes kernels are tuned for; more margin
    if batch >= current:
        rejected.append(("batch_size", f"batch {current} fits by {basis}: the batch is not the "
                         "cause"))
        return None
    if batch < 1:
        rejected.append(("batch_size", f"even batch 1 does not fit ({basis}; "
                         f"{format_bytes(e.budget_bytes)} is the budget)"))
        return None
    predicted = model.predict(batch).need_bytes if model is not None \
        else int(fixed + per_sample * batch)
    grew = bool(ran) and current > max(ran)
    how = "" if promised else " Estimated from one batch size: not promised to fit."
    params: dict[str, Any] = {"batch_size": batch, "from_batch_size": current,
                              "bytes_per_sample": int(per_sample), "fixed_bytes": int(fixed),
                              "margin_bytes": e.budget_bytes - predicted, "batch_grew": grew}
    if not promised:
        params["estimated"] = True  # covers the need by the estimate; assess promises nothing
    return Advice(
        score=per_sample * (current - batch) / need, kind="batch_size",
        recovers_bytes=int(per_sample * (current - batch)), fits=True, params=params,
        title=f"use batch size {batch} (the largest that fits; the failing step had {current})",
        detail=(f"{format_bytes(int(per_sample))} per sample and {format_bytes(int(fixed))} "
                f"fixed ({basis}): batch {batch} needs ≈{format_bytes(predicted)} of the "
                f"{format_bytes(e.budget_bytes)} budget.{how}"))


def _checkpointing(e: OomEvidence, need: int, peak: int, rejected: list[tuple[str, str]]
                   ) -> Advice | None:
    activations = _activations(e)
    if activations <= 0:
        return None
    if _autograd_off(e):
        rejected.append(("activation_checkpointing", "autograd was off at the OOM (no_grad or "
                         "inference_mode): nothing is kept for a backward to recompute"))
        return None
    if activations < 0.3 * peak:
        rejected.append(("activation_checkpointing", f"activations are only "
                         f"{format_bytes(activations)} of a {format_bytes(peak)} peak"))
        return None
    params: dict[str, object] = {}
    path: str | None
    if e.repeated_modules:
        cls, count, per_instance = max(e.repeated_modules, key=lambda r: r[1] * r[2])
        saves = max(0, (count - 1) * per_instance)
        path = next((p for p, c, _ in e.block_lists if c == cls), None)
    elif e.block_lists:
        path, cls, count = e.block_lists[0]
        saves = int(activations * BLOCK_ACTIVATION_SHARE * (count - 1) / count)
    else:
        rejected.append(("activation_checkpointing", "no repeated blocks were found in the "
                         "model to checkpoint"))
        return None
    # "modules": the container's path for model.get_submodule ("" is the model itself); None
    # when only profile()'s per-class numbers named the blocks.
    params.update({"modules": path, "class": cls, "count": count})
    where = f"the {count} {cls} modules" + (f" of {path or 'the model'}" if path is not None
                                            else "")
    return Advice(
        score=saves / need, kind="activation_checkpointing", recovers_bytes=saves,
        fits=saves >= need, params=params,
        title=f"activation checkpointing on {where}",
        detail=(f"activations are {format_bytes(activations)} of the "
                f"{format_bytes(peak)} peak; torch.utils.checkpoint on each of {where} "
                f"keeps only its input and saves ≈{format_bytes(saves)} "
                f"({format_bytes(need)} was needed), for about a third more compute."))


def _mixed_precision(e: OomEvidence, need: int, rejected: list[tuple[str, str]]
                     ) -> Advice | None:
    activations = _activations(e)
    if activations <= 0 or e.parameter_dtype != "float32":
        return None  # without float32 parameters the activations are not known to be float32
    if e.autocast:
        rejected.append(("mixed_precision", "autocast is already on"))
        return None
    saves = int(activations * (1 - AUTOCAST_KEPT_SHARE))
    return Advice(
        score=saves / need, kind="mixed_precision", recovers_bytes=saves, fits=saves >= need,
        params={"dtype": "bfloat16"},
        title="mixed precision: run the forward under torch.autocast('cuda', dtype=torch.bfloat16)",
        detail=(f"the {format_bytes(activations)} of activations are float32; in bfloat16 the "
                f"saved matmul outputs halve, ≈{format_bytes(saves)} less "
                f"({format_bytes(need)} was needed). Parameters and optimizer state stay "
                "float32."))


def _optimizer_state(e: OomEvidence, need: int, peak: int, rejected: list[tuple[str, str]]
                     ) -> Advice | None:
    state = max(e.optimizer_state_full_bytes, e.optimizer_state_bytes,
                e.categories.get("optimizer_state", 0))
    if state <= 0:
        return None
    if _autograd_off(e):
        rejected.append(("optimizer_state", "autograd was off at the OOM (no_grad or "
                         "inference_mode): the optimizer's state is not what ran out"))
        return None
    if state < 0.3 * peak:
        rejected.append(("optimizer_state", f"the optimizer state is only "
                         f"{format_bytes(state)} of a {format_bytes(peak)} peak"))
        return None
    states = STATE_PER_PARAMETER.get(e.optimizer, 2)
    if states >= 2:
        # Factored second moment, no first; foreach=False: its multi-tensor path makes
        # parameter-sized temporaries of every parameter at once.
        lighter, options = "Adafactor", {"foreach": False}
        saves = int(state * 0.9) + e.optimizer_temporary_bytes
        how = ("torch.optim.Adafactor(..., foreach=False) keeps a factored second moment and "
               "no first moment, and its temporaries one parameter at a time")
    else:
        lighter, saves, options = "SGD", state, {}
        how = "SGD without momentum keeps no state"
    if e.world_size > 1:
        how += f"; ZeRO/FSDP sharding over the {e.world_size} ranks keeps 1/{e.world_size}"
    else:
        how += "; ZeRO/FSDP sharding over N GPUs keeps 1/N"
    name = e.optimizer or "the optimizer"
    return Advice(
        score=saves / need, kind="optimizer_state", recovers_bytes=saves, fits=saves >= need,
        params={"optimizer": lighter, **options, "from_optimizer": e.optimizer,
                "state_bytes": state},
        title=f"optimizer state dominates: use {lighter} instead of {name}, or shard it",
        detail=(f"{name}'s state is {format_bytes(state)} of the {format_bytes(peak)} peak; "
                f"{how}: ≈{format_bytes(saves)} less ({format_bytes(need)} was needed)."))


def _memory_fraction(e: OomEvidence, need: int, rejected: list[tuple[str, str]]
                     ) -> Advice | None:
    if e.limit_bytes is None or e.limit_bytes >= e.device_total_bytes or e.device_total_bytes <= 0:
        return None
    room = min(e.device_total_bytes, e.reserved_bytes + e.device_free_bytes)
    if room <= e.budget_bytes:
        rejected.append(("memory_fraction", "the device itself has no room beyond the "
                         "memory-fraction cap"))
        return None
    wanted = (e.budget_bytes + need) / (1 - MARGIN_FRACTION)
    fraction = min(1.0, math.ceil(wanted / e.device_total_bytes * 100) / 100)
    gain = min(room, int(fraction * e.device_total_bytes)) - e.budget_bytes
    return Advice(
        score=gain / need, kind="memory_fraction", recovers_bytes=gain, fits=gain >= need,
        params={"fraction": fraction},
        title=f"raise the cap: torch.cuda.set_per_process_memory_fraction({fraction})",
        detail=(f"the cap allows {format_bytes(e.limit_bytes)} while the device has "
                f"{format_bytes(room)} for this process; {fraction} gives "
                f"{format_bytes(gain)} more ({format_bytes(need)} was needed)."))


def _model_dtype(e: OomEvidence, need: int) -> Advice | None:
    """At an OOM while the model was moved to the device, with float32 weights: the same model
    in bfloat16 takes half (its parameters and buffers are known exactly on the host)."""
    if e.phase != "load" or not e.load_bytes or e.parameter_dtype != "float32":
        return None
    saved = e.load_bytes // 2
    how = ("from_pretrained(..., dtype=torch.bfloat16)" if e.load_call == "from_pretrained"
           else "model.to(torch.bfloat16) before moving it")
    return Advice(
        score=saved / need, kind="model_dtype", recovers_bytes=saved, fits=saved >= need,
        params={"dtype": "bfloat16", "load_bytes": e.load_bytes},
        title=f"load the model in bfloat16: {how}",
        detail=(f"its parameters and buffers take {format_bytes(e.load_bytes)} in float32, "
                f"{format_bytes(e.load_bytes - saved)} in bfloat16" + (
                    "" if e.load_call == "from_pretrained" else
                    " (transformers: from_pretrained(..., dtype=torch.bfloat16))") +
                "; for training, mixed precision keeps float32 weights, which must then fit "
                "themselves."))


def _map_location(e: OomEvidence, need: int) -> Advice | None:
    """At an OOM inside torch.load, which restores each tensor to the device it was saved from
    (or its map_location): loaded to the host, none of the checkpoint takes the device's
    memory until load_state_dict copies it into the model's and the optimizer's own tensors.
    What that keeps off the device is at least what it already put there and the failing
    request."""
    if e.phase != "load" or e.load_call != "torch.load":
        return None
    recovers = e.loaded_bytes + e.requested_bytes
    size = f" of a {format_bytes(e.load_bytes)} checkpoint file" if e.load_bytes else ""
    return Advice(
        score=recovers / need, kind="map_location", recovers_bytes=recovers,
        fits=recovers >= need, params={"map_location": "cpu", "loaded_bytes": e.loaded_bytes},
        title="load the checkpoint to the host: torch.load(path, map_location='cpu')",
        detail=(f"torch.load puts each tensor back on the device it was saved from, or on its "
                f"map_location: {format_bytes(e.loaded_bytes)} were already on the device "
                f"at the OOM{size}, with {format_bytes(e.requested_bytes)} more asked for. "
                "Loaded to the host, they reach the device only where "
                "model.load_state_dict() and optimizer.load_state_dict() copy them into the "
                "model's and the optimizer's own tensors; what is not needed (an optimizer's "
                "state for inference) never does."))


def _measured_text(kind: str, p: dict[str, Any]) -> tuple[str, str]:
    """The title of a measured remedy of ``kind`` with its parameters ``p``, and how to apply
    it, in one line of code or words (the way it was measured)."""
    if kind == "batch_size" and "at_length" in p:
        return (f"use batch size {p['batch_size']} (the largest measured to fit at the "
                f"model's longest input, {p['at_length']} tokens, so at any length up to it; "
                f"the failing step had {p['from_batch_size']} at {p['from_length']} tokens)",
                f"a batch size of {p['batch_size']} (the DataLoader's batch_size, or each "
                f"batch split into pieces of at most {p['batch_size']})")
    if kind == "batch_size":
        return (f"use batch size {p['batch_size']} (the largest that fits, measured; the "
                f"failing step had {p['from_batch_size']})",
                f"a batch size of {p['batch_size']} (the DataLoader's batch_size, or each "
                f"batch split into pieces of at most {p['batch_size']})")
    if kind == "activation_checkpointing" and "method" in p:
        model = "model" + (f".get_submodule({p['modules']!r})" if p["modules"] else "")
        return (f"activation checkpointing with transformers' own switch over the "
                f"{p['count']} {p['class']} blocks",
                f"{model}.{p['method']}({p['method'].replace('_enable', '_kwargs')}="
                "{'use_reentrant': False})")
    if kind == "activation_checkpointing":
        return (f"activation checkpointing on the {p['count']} {p['class']} modules of "
                f"{p['modules'] or 'the model'}",
                f"for block in model.get_submodule({p['modules']!r}).children(): block.forward "
                "= functools.partial(torch.utils.checkpoint.checkpoint, block.forward, "
                "use_reentrant=False)")
    if kind == "no_grad":
        return ("run the model under torch.no_grad(): it is in evaluation mode with no "
                "optimizer, yet autograd keeps every activation for a backward that never comes",
                "with torch.no_grad(): (or torch.inference_mode():) around the model's calls")
    if kind == "mixed_precision":
        return ("mixed precision: run the forward under torch.autocast('cuda', "
                "dtype=torch.bfloat16)", "with torch.autocast('cuda', dtype=torch.bfloat16): "
                "around the forward and the loss (the backward and the step outside it)")
    if kind == "optimizer_state":
        extra = ", foreach=False" if p.get("foreach") is False else ""
        return (f"use {p['optimizer']} instead of {p['from_optimizer']} (its state is what the "
                "step lacks room for)",
                f"torch.optim.{p['optimizer']}(model.parameters(){extra})")
    if kind == "sequence_length":
        return (f"cap the input's length (dimension {p['dim']}) at {p['max_length']} (the "
                f"longest measured to fit at batch {p['batch_size']}; the failing step had "
                f"{p['from_length']}, and it grew from step to step)",
                f"truncate every input to {p['max_length']} along dimension {p['dim']} (a "
                f"tokenizer's max_length={p['max_length']}, truncation=True)")
    if kind == "image_size":
        size, was = "×".join(map(str, p["max_size"])), "×".join(map(str, p["from_size"]))
        return (f"cap the input's size (dimensions {', '.join(map(str, p['dims']))}) at "
                f"{size} (the largest measured to fit at batch {p['batch_size']}; the failing "
                f"step had {was}, and it grew from step to step)",
                f"resize or crop every input to at most {size}")
    if kind == "max_new_tokens":
        return (f"generate at most {p['max_new_tokens']} new tokens (the most measured to fit "
                f"at batch {p['batch_size']}; the call asked for {p['from_max_new_tokens']})",
                f"generate(..., max_new_tokens={p['max_new_tokens']})")
    raise ValueError(f"vramscope: no text for the measured remedy {kind!r}")


#: Measured remedies that cap what grew from step to step, and so hold for the larger steps
#: still to come; the others were measured at the failing step only.
_CAPS = ("sequence_length", "image_size")


def _usable(budget: int) -> int:
    return int(budget * (1.0 - MEASURED_MARGIN))


def raised_fraction(need: int, total: int) -> float:
    """The memory-fraction cap, in hundredths of the device, under which a step needing
    ``need`` keeps the measured share free (at most the whole device)."""
    wanted = need / (1.0 - MEASURED_MARGIN)
    return min(1.0, math.ceil(wanted / total * 100) / 100)


def open_length(e: OomEvidence, length: int, longest: int) -> bool:
    """Are the failing step's token ids (``length`` of them) shorter than the model's
    ``longest`` positions, at a first step (no step before it, nothing seen to grow, no
    evaluation keeping predictions, no generate())? A later batch may then be longer (a
    length curriculum, padding to each batch's longest): only what fits the longest input
    holds for the run."""
    kept = e.eval_kept_bytes and e.eval_accumulation_steps != 1
    return (not _peaks_by_batch(e.steps) and not e.generating and not grown_dims(e)
            and not kept and 0 < length < longest)


def _measured_advice(e: OomEvidence, m: Measured, need: int,
                     rejected: list[tuple[str, str]]) -> list[Advice]:
    """The remedies measured after the OOM (vramscope.postmortem.measure): each fits when its
    own need fits the budget, with the search's kept share."""
    out = []
    usable = _usable(e.budget_bytes)
    ran = _peaks_by_batch(e.steps)
    # What grew from step to step: the batch (past steps ran smaller ones), or another
    # dimension of the input at the same batch. Then only a cap on it holds for later steps.
    batch_grew = m.what == "batch_size" and bool(ran) and m.size > max(ran)
    dims = "" if e.generating else grown_dims(e)
    # transformers' Trainer evaluation keeps each step's predictions on the device: a later
    # step has less room, whatever was measured at this one (no remedy of the step caps it).
    kept = (f"the evaluation loop keeps every step's predictions on the device "
            f"({format_bytes(e.eval_kept_bytes)} so far)"
            if e.eval_kept_bytes and e.eval_accumulation_steps != 1 else "")
    # A first step's token ids shorter than the model's positions: what fits this one, a
    # smaller batch included, is measured at this length only (a batch measured at the
    # model's longest input holds for every length: ``at_length``).
    is_open = open_length(e, m.length, m.max_length)
    grew = kept or (
        f"the batch grew from step to step ({max(ran)} -> {m.size})" if batch_grew else
        f"the input grew from step to step ({dims})" if dims else
        # An inference loop has no steps to compare with: its later batches may be larger
        # (an evaluation whose batch grows), and only the batch that fits caps them.
        "no earlier step was seen to compare it with (an inference loop's later batches "
        "may be larger)" if (_autograd_off(e) or any(r.kind == "no_grad" for r in m.remedies))
        and not e.generating and not ran else
        f"no earlier step was seen, and its {m.length} tokens are fewer than the model's "
        f"{m.max_length} positions (a later batch may be longer)" if is_open else "")
    for r in m.remedies:
        if r.kind == "memory_fraction":
            continue  # the raised cap, below
        params = dict(r.params)
        fits = r.need_bytes <= usable
        recovers = max(0, m.need_bytes - r.need_bytes)
        if r.kind == "batch_size":
            params["batch_grew"] = bool(ran) and int(params["from_batch_size"]) > max(ran)
            params["margin_bytes"] = e.budget_bytes - r.need_bytes
        caps = not kept and (r.kind in _CAPS or r.kind == "batch_size" and (
            "at_length" in params or not is_open and (params["batch_grew"] or not dims)))
        title, how = _measured_text(r.kind, params)
        detail = (f"measured: the step needs ≈{format_bytes(r.need_bytes)} with it "
                  f"({r.basis}), ≈{format_bytes(m.need_bytes)} without, of a "
                  f"{format_bytes(e.budget_bytes)} budget")
        if not fits:
            detail += f": {format_bytes(r.need_bytes - usable)} short"
            rejected.append((r.kind, f"measured: needs ≈{format_bytes(r.need_bytes)} with it, "
                             f"more than the {format_bytes(usable)} usable of the budget"))
            continue
        if grew and not caps:
            params["input_grew"] = grew
        if not r.ran_where_advised:
            # Predicted from smaller slices, and not run where it is to hold: not promised.
            params["unconfirmed"] = True
            detail += (". Not promised: predicted from smaller slices, and not run where it "
                       "is to hold")
        out.append(Advice(score=recovers / max(need, 1), title=title,
                          detail=f"{detail}. How: {how}.", kind=r.kind, params=params,
                          recovers_bytes=recovers, fits=True))
    limit = e.limit_bytes
    if limit is not None and 0 < limit < e.device_total_bytes and e.device_total_bytes > 0:
        room = min(e.device_total_bytes, e.reserved_bytes + e.device_free_bytes)
        wanted = m.need_bytes / (1.0 - MEASURED_MARGIN)
        fraction = raised_fraction(m.need_bytes, e.device_total_bytes)
        # Promised only where the step ran under the raised cap (a KV cache that grows by a
        # new tensor at every token fragments the cache more at the whole batch than at its
        # slices: a cap raised by the slices' need ran out, on an H100).
        run = next((r for r in m.remedies if r.kind == "memory_fraction"), None)
        if wanted <= limit:
            # The step fits the cap it has: what ran out was held by something else.
            rejected.append(("memory_fraction", f"measured: the step needs "
                             f"≈{format_bytes(m.need_bytes)}, within the "
                             f"{format_bytes(limit)} cap"))
        elif run is not None and run.ran_where_advised and run.need_bytes > _usable(
                int(float(run.params["fraction"]) * e.device_total_bytes)):
            rejected.append(("memory_fraction", f"run under the raised cap "
                             f"{run.params['fraction']}: {run.basis}"))
        elif wanted <= room and \
                fraction * e.device_total_bytes <= room + e.device_total_bytes // 100:
            under = run is not None and run.ran_where_advised
            raise_params: dict[str, Any] = {"fraction": fraction} | (
                {"input_grew": grew} if grew else {}) | ({} if under else {"unconfirmed": True})
            detail = (f"measured: the step needs ≈{format_bytes(m.need_bytes)}; the cap allows "
                      f"{format_bytes(limit)} and the device had {format_bytes(room)} for this "
                      f"process: {fraction} of it fits")
            detail += (f"; {run.basis}" if under and run is not None else
                       ". Not promised: the step was not run under the raised cap"
                       + (f" ({run.basis})" if run is not None else ""))
            out.append(Advice(
                score=1.0, kind="memory_fraction", params=raise_params,
                recovers_bytes=int(fraction * e.device_total_bytes) - e.budget_bytes, fits=True,
                title=f"raise the cap: torch.cuda.set_per_process_memory_fraction({fraction})",
                detail=detail + ". It holds while the device keeps that room free."))
        else:
            rejected.append(("memory_fraction", f"measured: the step needs "
                             f"≈{format_bytes(m.need_bytes)}, the device has "
                             f"{format_bytes(room)} for this process"))
    if m.what == "batch_size" and m.size > 1 and m.need_bytes > usable and \
            not any(r.kind == "batch_size" for r in m.remedies):
        rejected.append(("batch_size", f"measured: no batch below {m.size} was found to fit "
                         f"the {format_bytes(usable)} usable of the budget (what does not grow "
                         "with the batch takes it: parameters, gradients, optimizer state)"))
    for note in m.notes:
        rejected.append(("measurement", note))
    return out


def _caveat(detail: str, text: str) -> str:
    """``detail`` with ``text`` (a sentence) added before its "How: <code>." (which stays
    last, the code alone), or at its end."""
    body, how, code = detail.partition(" How: ")
    return f"{body} {text}{how}{code}" if how else f"{detail} {text}"


def assess(e: OomEvidence) -> Assessment:
    """The need, the advised remedies (first the one that fixes the OOM) and the others. With
    ``e.measured`` (the step run again after the OOM) the need and the step's remedies are
    measurements; without, estimates from the evidence, and a need only known as a lower
    bound promises nothing."""
    m = e.measured
    if m is not None:
        peak, basis, only_lower = m.need_bytes, m.basis, bool(m.lower_bound)
    else:
        peak, basis, only_lower = projection(e)
    need = max(e.shortfall_bytes, peak - e.budget_bytes, 1)
    rejected: list[tuple[str, str]] = []
    found: list[Advice | None] = [
        _eval_accumulation(e, need),
        _leak(e, need),
        _other_processes(e, need, rejected),
        _expandable(e, need, peak, rejected),
        _empty_cache(e, need, rejected),
    ]
    if m is not None:
        found += _measured_advice(e, m, need, rejected)
    else:
        found += [
            _batch_size(e, need, peak, rejected),
            _checkpointing(e, need, peak, rejected),
            _mixed_precision(e, need, rejected),
            _optimizer_state(e, need, peak, rejected),
            _memory_fraction(e, need, rejected),
            _model_dtype(e, need),
            _map_location(e, need),
        ]
    candidates = [a for a in found if a is not None]
    # Against a need that is only "at least", no remedy is promised to fit: the ones that
    # cover the known part keep their order (``covers_known_need``), the others follow by what
    # they recover.
    covers = {id(a): a.fits for a in candidates}
    if only_lower:
        known = (f"The step needs at least {format_bytes(need)} more than the budget allows"
                 if peak > e.budget_bytes else
                 f"The failing request lacked {format_bytes(need)} of what was free")
        for a in candidates:
            a.params["covers_known_need"] = a.fits
            a.fits = False
            a.detail = _caveat(a.detail, f"{known}; the rest of the step's need is not known, "
                               "so this is not promised to fit (`vramscope fit` measures what a "
                               "step needs).")
    # A leak keeps more at every step: what else fits the failing step (measured with the
    # leak's holders emptied, or beside what it kept so far) has less room at the next one,
    # until the leak is fixed (seen on the GPU: expandable segments and checkpointing
    # promised beside kept outputs ran out steps later).
    leak = next((a for a in candidates if a.kind == "leak"), None)
    for a in candidates:
        if leak is not None and a is not leak and a.fits:
            a.params["covers_known_need"] = True
            a.params["leak_first"] = True
            a.fits = False
            a.detail = _caveat(a.detail, "The program keeps more at every step (the leak): "
                               "this fits the failing step, and a later one has less room, so "
                               "it is not promised before the leak is fixed.")
        if a.params.get("input_grew") and a.fits:
            # It fits the failing step, measured; a later, larger one may need more.
            a.params["covers_known_need"] = True
            a.fits = False
            a.detail = _caveat(a.detail, f"It was measured at the failing step's input, and "
                               f"{a.params['input_grew']}: a larger step later needs more, so "
                               "this is not promised to fit the rest of the run.")
        if (a.params.get("estimated") or a.params.get("unconfirmed")) and a.fits:
            # It covers the need by an estimate, or by a prediction from smaller slices that
            # was not run where it is to hold: ranked, never promised.
            a.params["covers_known_need"] = True
            a.fits = False

    # Without autograd (inference, generate()) a smaller batch changes no result: it comes
    # first, as it does when the batch just grew.
    inference = _autograd_off(e) or e.generating

    def rank(a: Advice) -> int:
        kind = "batch_grew" if a.kind == "batch_size" and (
            a.params.get("batch_grew") or inference and "input_grew" not in a.params) \
            else a.kind
        return PRIORITY.index(kind)

    # A cause first (a leak, a forgotten no_grad, ... expandable segments, what is cached);
    # then of the step's remedies a promise before one that covers the failing step only
    # (measured at its input alone, or not run where it is to hold).
    causes = PRIORITY.index("batch_grew")

    def order(a: Advice) -> tuple[bool, int]:
        return rank(a) >= causes and not a.fits, rank(a)

    advice = sorted((a for a in candidates if covers[id(a)]), key=order)
    partial = sorted((a for a in candidates if not covers[id(a)]),
                     key=lambda a: -a.recovers_bytes)
    if advice:
        rejected += [(a.kind, f"recovers {format_bytes(a.recovers_bytes)} of the "
                      f"{'at least ' if only_lower else ''}{format_bytes(need)} needed")
                     for a in partial]
    else:
        advice = partial
    if not advice and e.phase == "load":
        advice = [Advice(
            score=0.0, kind="generic", title="the model itself does not fit the budget",
            detail=(f"its parameters and buffers take {format_bytes(e.load_bytes)} and the "
                    f"budget is {format_bytes(e.budget_bytes)} "
                    f"({format_bytes(e.allocated_bytes)} allocated at the OOM): a smaller or "
                    "quantized model, a lower-precision copy of it, or its layers split over "
                    "more devices" + (
                        " (from_pretrained(..., device_map='auto') puts the layers that do not "
                        "fit on the host, and runs them there, much slower)"
                        if e.load_call == "from_pretrained" else "") + "."))]
    if not advice:
        advice = [Advice(
            score=0.0, kind="generic", title="reduce the batch size or sequence length",
            detail=(f"{'at least ' if only_lower else ''}{format_bytes(need)} was missing and "
                    "no single cause stands out in the evidence; run under "
                    "Monitor(model=..., optimizer=...) or vramscope.profile() to see who holds "
                    "the memory, or `vramscope fit` for the largest batch that fits."))]
    return Assessment(advice=advice, not_advised=rejected, need_bytes=need,
                      projected_peak_bytes=peak, projection=basis,
                      projection_is_lower_bound=only_lower)


def rank_advice(e: OomEvidence) -> list[Advice]:
    """The advised remedies, the first one the one that fixes the OOM."""
    return assess(e).advice
