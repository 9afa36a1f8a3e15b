# python/vramscope/postmortem/measure.py -- the failing step run again, at slices, and its remedies
"""After an OOM has unwound in a process it is ending (``vramscope run``; an uncaught OOM under
Monitor or a callback), the failing step is run again from its ``OomScene``: the model's
forward and backward at slices of the failing batch, with no optimizer step and the gradients
dropped after each. Each slice is one measured window (vramscope.predict.window: exact peaks and
what must fit under a cap); the optimizer's step is added from the parameters and the optimizer's
type (its full state, the gradients, its temporaries). The memory model and the search of
``vramscope fit`` turn the slices into the step's need at its own size and the largest batch
that fits: advice and fit read one model.

Each remedy is measured the same way before it is ranked: activation checkpointing on the block
list found, autocast, a lighter optimizer (the same slices, another optimizer step). A remedy is
promised to fit only where it ran where it is to hold and fit there (``confirm``): the batch
that fits at that batch, checkpointing and autocast at the failing batch itself, a cap on what
grew twice in a row (a later step runs in the cache the one before left), the program's own
cap raised and the step run under it. A line through the slices is what picks each, never
what promises it: past the largest slice it missed a change of what holds the peak (the
gradients at the backward's end, then the activations), a workspace, the fragmentation of a
KV cache at the whole batch (each seen on an H100). Where the failing size needs less by the
slices' line than the program held and asked for at its OOM, slices nearer it are run first
(``_nearer``).

Where the input grew from step to step in another dimension than the batch (a longer sequence, a
larger image: the model probe keeps the input's shape per batch size), a later step may be
larger still, so the remedy that holds for the rest of the run is a cap on what grew: the
largest size of that dimension that runs at the failing batch, found by running the step at
sizes between the past step's and the failing one (each answer one that ran, never one
extrapolated). Inside ``generate()`` the same search runs over its new tokens. At a first step
whose token ids are fewer than the model's positions nothing says whether a later batch is
longer: the batch search also runs at the model's longest input (the ids repeated to it), and
its answer, run there twice in a row, holds for every length.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from .._core.torchcheck import is_oom_error
from .._core.units import format_bytes
from ..attribution.model_probe import (
    FACTORED_STATE_SHARE,
    STATE_PER_PARAMETER,
    TRAINING_PHASES,
    block_lists,
    optimizer_summary,
    parameter_summary,
)
from ..predict.fit import CudaDevice
from ..predict.model import MemoryModel, Probe, ends_on_flat, fit_model
from ..predict.search import DEFAULT_MARGIN, FitResult, ProbeOutOfMemory, search
from ..predict.window import allocator_retries
from .advice import Measured, MeasuredRemedy, OomEvidence
from .remedies import grown_dims, open_length, raised_fraction
from .scene import Inputs, OomScene, resize_inputs, slice_inputs

__all__ = ["measure", "OptimizerStep", "CudaDevice"]

#: Probes of one search (each one forward and backward at a slice of the batch).
MAX_PROBES = 6
#: Probes of a cap's search (a dimension that grew, generate()'s new tokens), each one at the
#: failing batch.
MAX_CAP_PROBES = 5
#: A cap is a multiple of a divisor of the past and failing sizes' common divisor, at most
#: this (8 for sequences of 512 and 1024 would be finer than any user asks): the one with the
#: most factors of two, and a multiple of the model's patch (a ViT's patch, a CNN's strides
#: are powers of two; 224 -> 448 has 32, where halving 224 to 56 lost the 16 of a patch).
CAP_STEP_MAX = 64


@dataclasses.dataclass(frozen=True)
class OptimizerStep:
    """What the optimizer adds to a step measured without it: its state (what is missing now is
    allocated at the first step, and resident through every later forward) and, at its step,
    the gradients and its temporaries over what stays allocated."""

    #: Trainable parameter bytes (the gradients are as large).
    parameter_bytes: int
    #: State bytes allocated now, and once every parameter has its state.
    state_bytes: int
    state_full_bytes: int
    #: Parameter-sized temporaries of its step (the multi-tensor path of Adam's family:
    #: sqrt of the second moment for every parameter at once).
    temporary_bytes: int
    #: Are the gradients allocated through the forward too (zero_grad(set_to_none=False))?
    gradients_resident: bool = False
    name: str = ""

    def lighter(self, gradients_resident: bool) -> tuple[OptimizerStep, dict[str, Any]]:
        """The lighter optimizer advised instead of this one, as a step, and its advice's
        parameters: Adam's family (two states per parameter) -> Adafactor without foreach
        (factored moments, no parameter-sized temporaries); one state or none -> SGD without
        momentum (none)."""
        lighter = "SGD" if STATE_PER_PARAMETER.get(self.name, 2) < 2 else "Adafactor"
        state = int(self.parameter_bytes * FACTORED_STATE_SHARE) if lighter == "Adafactor" else 0
        params: dict[str, Any] = {"optimizer": lighter, "from_optimizer": self.name,
                                  "state_bytes": self.state_full_bytes}
        if lighter == "Adafactor":
            params["foreach"] = False
        return OptimizerStep(self.parameter_bytes, 0, state, 0, gradients_resident,
                             lighter), params

    def adjust(self, probe: Probe, final_allocated_bytes: int) -> Probe:
        """``probe`` (a forward and backward, gradients dropped) as a whole step: the state
        still missing added to every peak; the peak at least the optimizer's step, where what
        stays allocated, the gradients, the whole state and the temporaries are live."""
        missing = max(0, self.state_full_bytes - self.state_bytes)
        grads = self.parameter_bytes if self.gradients_resident else 0
        forward = probe.peak_allocated_bytes + missing + grads
        step = (final_allocated_bytes + self.parameter_bytes + missing + self.temporary_bytes)
        peak = max(forward, step)
        added = peak - probe.peak_allocated_bytes
        return dataclasses.replace(
            probe, peak_allocated_bytes=peak, peak_reserved_bytes=probe.peak_reserved_bytes + added,
            peak_pinned_bytes=probe.peak_pinned_bytes + added if probe.peak_pinned_bytes else 0,
            resident_bytes=final_allocated_bytes + missing + grads)


def optimizer_step(optimizer: Any, model: Any, gradients_resident: bool) -> OptimizerStep:
    """The optimizer's part of a step (none without an optimizer: inference, or not found)."""
    if optimizer is None:
        return OptimizerStep(0, 0, 0, 0, gradients_resident)
    summary = optimizer_summary(optimizer)
    return OptimizerStep(summary["parameter_bytes"], summary["optimizer_state_bytes"],
                         summary["optimizer_state_full_bytes"],
                         summary["optimizer_temporary_bytes"], gradients_resident,
                         summary["optimizer"])


def _scalar(output: Any) -> Any:
    """What to run backward from: the model's own loss when it computed one (labels given; a
    dict of losses, their sum), else a cross-entropy-like reduction of its first floating
    output (log-softmax over the last dimension, in float32: the memory a loss on logits
    takes)."""
    torch = sys.modules["torch"]
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        return loss if loss.dim() == 0 else loss.sum()
    if isinstance(output, dict) and output and all(
            isinstance(v, torch.Tensor) and v.dim() == 0 and v.requires_grad
            for v in output.values()):
        return sum(output.values())  # a dict of losses (a detection model in training)
    first = getattr(output, "logits", None)
    if first is None:
        stack = [output]
        while stack and first is None:
            value = stack.pop(0)
            if isinstance(value, torch.Tensor):
                if value.is_floating_point() and value.requires_grad:
                    first = value
            elif isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, (list, tuple)):
                stack.extend(value)
            elif hasattr(value, "values") and callable(value.values):
                stack.extend(value.values())
    if first is None or not first.requires_grad:
        return None
    if first.dim() >= 2 and first.shape[-1] > 1:
        return torch.nn.functional.log_softmax(first.float(), dim=-1).mean()
    return first.float().mean()


@contextlib.contextmanager
def _no_logging(model: Any, inputs: Inputs) -> Any:
    """Around a LightningModule's ``training_step`` run outside its loop: ``self.log`` and
    ``self.log_dict`` do nothing (the loop that collects them has ended)."""
    if not inputs.training_step:
        yield
        return
    for name in ("log", "log_dict"):
        setattr(model, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for name in ("log", "log_dict"):
            model.__dict__.pop(name, None)


class _Runner:
    """Runs the failing step at a slice of its batch: forward (and backward), nothing kept.
    With ``grad`` off, the forward alone; with ``backward`` off, the forward alone with
    autograd on (an inference loop that forgot no_grad: autograd keeps what a backward would
    need, and none comes)."""

    def __init__(self, scene: OomScene, inputs: Inputs, grad: bool,
                 backward: bool = True) -> None:
        self.scene = scene
        self.inputs = inputs
        self.grad = grad
        self.backward = backward
        self.autocast: Any = scene.autocast_dtype
        self.params = [p for p in scene.model.parameters()]
        #: The arguments at a size (None: the batch cut to it): a cap's search sets another
        #: dimension's size, or generate()'s new tokens, at the whole batch.
        self.along: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]] | None = None
        #: Steps run back to back in one window: two where a cap is confirmed, as the
        #: program's later steps will run it, each in the cache the one before left.
        self.repeat = 1
        #: A size run once before them (None: none): the past step's, whose segments shaped
        #: the cache the program's capped steps meet.
        self.prelude: int | None = None
        #: Parameter-sized temporaries of the optimizer's step (its ``temporary_bytes`` over
        #: the parameters' bytes): allocated after each backward of steps run back to back,
        #: while the gradients live, as the step allocates them (its arithmetic adds them
        #: to one step; back to back, the cache the second step meets has had them).
        self.temporaries = 0

    def __call__(self, size: int) -> None:
        if self.prelude is not None:
            self._once(self.prelude)
        for _ in range(self.repeat):
            self._once(size)

    def _once(self, size: int) -> None:
        torch = sys.modules["torch"]
        args, kwargs = (slice_inputs(self.inputs, size) if self.along is None
                        else self.along(size))
        cast = (torch.autocast("cuda", dtype=self.autocast) if self.autocast is not None
                else contextlib.nullcontext())
        try:
            with cast, torch.set_grad_enabled(self.grad), _no_logging(self.scene.model,
                                                                      self.inputs):
                if self.scene.generate_kwargs is not None:
                    self.scene.model.generate(*args, **kwargs)
                else:
                    call = (self.scene.model.training_step if self.inputs.training_step
                            else self.scene.model)
                    output = call(*args, **kwargs)
                    loss = _scalar(output) if self.grad and self.backward else None
                    if loss is not None:
                        loss.backward()
                        if self.repeat > 1 and self.temporaries:
                            held = [torch.empty_like(p) for _ in range(self.temporaries)
                                    for p in self.params if p.grad is not None]
                            del held
                    del output, loss
        finally:
            for p in self.params:
                p.grad = None


def _measure_fn(runner: _Runner, device: Any, opt: OptimizerStep,
                raw: dict[int, tuple[Probe, int]]) -> Callable[[int], Probe]:
    """``measure(size)`` for the search: one window per slice, the optimizer's step added; the
    raw window kept in ``raw`` (size -> (probe, allocated at its end)) for other optimizers."""
    window = device.window(runner)

    def measure(size: int) -> Probe:
        probe, final = window(size)
        raw[size] = (probe, final)
        return opt.adjust(probe, final)

    return measure


def _step_need(raw: dict[int, tuple[Probe, int]], step: OptimizerStep, size: int,
               retries: bool) -> tuple[int, str] | None:
    """What a step at ``size`` with ``step``'s optimizer needs, and how it was read: the
    forward and backward predicted at ``size`` from the slices as they ran (no optimizer
    step), then the optimizer's step added there. (A line through slices with the step
    already added would be flat at small sizes, where the optimizer's step hides the bytes
    per sample.) None with fewer than two slices."""
    model = fit_model([p for p, _ in raw.values()], retries=retries)
    if model is None:
        return None
    at = model.predict(size)
    final = max(f for _, f in raw.values())
    probe = Probe(size, at.allocated_bytes, at.reserved_bytes, peak_pinned_bytes=at.need_bytes)
    return step.adjust(probe, final).must_fit_bytes, at.basis


def _need(model: MemoryModel | None, size: int) -> int | None:
    return model.predict(size).need_bytes if model is not None else None


def _variant(runner: _Runner, device: Any, opt: OptimizerStep, sizes: list[int], size: int,
             setup: Callable[[], Callable[[], None]], usable: float,
             late: Callable[[], bool]) -> tuple[int | None, str, bool]:
    """The failing step's need at ``size`` with a remedy applied (``setup()`` applies it and
    returns its undo), measured at ``sizes`` (their line, the optimizer's step added at
    ``size``), and how; None and why when it cannot be measured. Where that line says it fits
    ``usable``, the step is then run at ``size`` itself with it (``confirm``): the need
    measured there is the one given. Last: was it run at ``size`` (or found not to fit)?"""
    raw: dict[int, tuple[Probe, int]] = {}
    try:
        undo = setup()
    except Exception as exc:  # noqa: BLE001 -- the remedy cannot be applied to this model
        return None, f"could not be applied ({_error_text(exc)})", False
    try:
        measure = _measure_fn(runner, device, opt, raw)
        for at in sizes:
            measure(at)
    except ProbeOutOfMemory as oom:
        return None, f"ran out of memory at {oom.size}", False
    except Exception as exc:  # noqa: BLE001 -- the step does not run with it: not advised
        return None, f"the step did not run with it ({_error_text(exc)})", False
    finally:
        undo()
    stepped = _step_need(raw, opt, size, allocator_retries())
    if stepped is None:
        return None, f"one size only ({', '.join(map(str, sizes))}): no line", False
    need, how = stepped[0], f"probes at {', '.join(map(str, sizes))}"
    if need > usable or size in sizes:
        return need, how, True
    return confirm(runner, device, opt, size, need, how, usable, late, setup)


def confirm(runner: _Runner, device: Any, opt: OptimizerStep, size: int, need: int, how: str,
            usable: float, late: Callable[[], bool],
            setup: Callable[[], Callable[[], None]] | None = None,
            repeat: int = 1, before: int | None = None) -> tuple[int | None, str, bool]:
    """A remedy predicted to fit (``need`` by ``how``) run at ``size`` itself, ``repeat``
    steps back to back (after one at ``before``, where given: the past step's size, whose
    segments the program's cache still holds when its steps reach the cap): what it needs
    there, measured, how, and True; None and why when it ran
    out of memory there. Unconfirmed (no time left, or it does not run there for another
    reason): the prediction, why, and False: it is not promised. A prediction past the largest
    slice misses what changes between (a step 2.3 times past its slices needed 3 % more than
    its line said, on an H100), and one step measured alone misses the fragmentation that the
    steps before leave in the cache (an image capped at a size that ran once, whose second
    step ran out)."""
    if late():
        return need, f"{how}; not run at {size} (no time left)", False
    undo = setup() if setup is not None else None
    runner.repeat, runner.prelude = repeat, before
    after = f" after one at {before}" if before is not None else ""
    try:
        measured = _measure_fn(runner, device, opt, {})(size)
    except ProbeOutOfMemory:
        return None, (f"{how}: predicted ≈{format_bytes(need)} at {size}, and ran out of memory "
                      f"when run there{' twice in a row' if repeat > 1 else ''}{after}"), True
    except Exception as exc:  # noqa: BLE001 -- it ran at the slices: unconfirmed, not promised
        return need, f"{how}; did not run at {size} ({_error_text(exc)})", False
    finally:
        runner.repeat, runner.prelude = 1, None
        if undo is not None:
            undo()
    steps = f"{repeat} steps back to back" if repeat > 1 else "run"
    return measured.must_fit_bytes, (f"{how}, then {steps} at {size}{after}: "
                                     f"{format_bytes(measured.must_fit_bytes)}"), True


def _nearer(result: FitResult, measure_slice: Callable[[int], Probe], e: OomEvidence,
            size: int, start: int, retries: bool, early: bool) -> FitResult:
    """``result`` again, with slices nearer the failing size, where its model says the failing
    size needs less than the program held and asked for at its OOM (``_short_of_the_program``)
    and its slices stayed below it: the line through them missed a change of what holds the
    peak past them (8 Linear layers at 8192: up to about 2500 samples the gradients at the
    backward's end, above it the activations; the line through 2518 and 4096 said 8192 fits
    the cap it ran out of). At 0.6 and 0.8 of the failing size, then the search on all of
    them. ``early``: is there time for it (half the deadline left)?"""
    top = max((p.size for p in result.probes), default=0)
    if not early or result.model is None or not 0 < top < size or \
            not _short_of_the_program(e, result.model, size, 0):
        return result
    known = list(result.probes)
    for share in (0.6, 0.8):
        at = int(size * share)
        if at <= max(p.size for p in known):
            continue
        try:
            known.append(measure_slice(at))
        except ProbeOutOfMemory:
            break
    if len(known) == len(result.probes):
        return result
    return search(measure_slice, result.budget_bytes, start=start, limit=size,
                  max_probes=len(known) + MAX_PROBES, retries=retries, known=known,
                  confirm=False)


def _batch_remedy(result: FitResult, probes: list[Probe], measure_slice: Callable[[int], Probe],
                  size: int, usable: float, late: Callable[[], bool]) -> MeasuredRemedy | None:
    """The batch that fits, run at that batch before it is advised: the search's answer where
    it ran and fit, else the largest slice measured to fit; not promised where there was no
    time to run it (None where no slice below the failing batch fits)."""
    assert result.prediction is not None
    batch, need, basis = result.size, result.prediction.need_bytes, result.prediction.basis
    measured = {p.size: p for p in probes}
    if batch in measured:
        return MeasuredRemedy("batch_size", {"batch_size": batch, "from_batch_size": size},
                              need, basis)
    if late():
        return MeasuredRemedy("batch_size", {"batch_size": batch, "from_batch_size": size},
                              need, f"{basis}; not run at {batch} (no time left)", False)
    try:
        got: Probe | None = measure_slice(batch)
    except ProbeOutOfMemory:
        got = None
    if got is not None:
        probes.append(got)
        if got.must_fit_bytes <= usable:
            return MeasuredRemedy("batch_size", {"batch_size": batch, "from_batch_size": size},
                                  got.must_fit_bytes,
                                  f"{basis}, then run at {batch}: "
                                  f"{format_bytes(got.must_fit_bytes)}")
    fitting = [p for p in measured.values() if p.size < size and p.must_fit_bytes <= usable]
    if not fitting:
        return None
    best = max(fitting, key=lambda p: p.size)
    missed = ("ran out of memory" if got is None
              else f"needed {format_bytes(got.must_fit_bytes)}")
    return MeasuredRemedy("batch_size", {"batch_size": best.size, "from_batch_size": size},
                          best.must_fit_bytes,
                          f"measured at {best.size} ({format_bytes(best.must_fit_bytes)}); "
                          f"{batch}, predicted by {basis}, {missed} when run")


#: What other processes may hold on the device while a raised cap is run in the dying process
#: (a desktop's compositor, a monitor's context). A program that caps itself often shares its
#: card: beside a process holding more, the raised cap could take memory that process is about
#: to use (on an H100, one such measurement took 66 GiB while four capped programs ran beside
#: it, and two of them ran out of memory for it), so it is advised without being run.
SHARED_DEVICE_BYTES = 1 << 30


def _others_bytes(e: OomEvidence, total: int, free: int, reserved: int) -> int:
    """What is used on the device now outside this process: the driver's used bytes less this
    process's allocator (``reserved`` now) and its non-PyTorch bytes at the OOM; where NVML
    could not tell those, all that is outside its allocator (an upper bound)."""
    return max(0, total - free - reserved - (e.non_pytorch_bytes or 0))


def _raised_cap(runner: _Runner, device: Any, opt: OptimizerStep, e: OomEvidence, size: int,
                need: int, late: Callable[[], bool]) -> MeasuredRemedy | str | None:
    """The program's own cap raised to what the failing step needs, and the step run at its
    size under it (twice in a row in training: the later steps run in the cache the first
    leaves), before it is advised: what it needed there; where it ran out, more than that cap.
    A note instead where other processes use the device (``SHARED_DEVICE_BYTES``); None where
    the program set no cap, the device has no room for it now, or the device cannot raise one."""
    total, limit = e.device_total_bytes, e.limit_bytes
    capped = getattr(device, "capped", None)
    if capped is None or limit is None or not 0 < limit < total:
        return None
    fraction = raised_fraction(need, total)
    raised = int(fraction * total)
    now = device.memory()
    if raised <= limit or now.free_bytes + now.reserved_bytes < raised:
        return None
    others = _others_bytes(e, now.total_bytes, now.free_bytes, now.reserved_bytes)
    if others > SHARED_DEVICE_BYTES:
        return (f"the cap raised to {fraction}: not run, since other processes use "
                f"{format_bytes(others)} of the device (a raised cap run beside them could take "
                f"memory they need)")
    how = f"the step run at {size} under the cap {fraction}"
    with capped(fraction, limit / total):
        got, text, ran = confirm(runner, device, opt, size, need, how,
                                 raised * (1.0 - DEFAULT_MARGIN), late,
                                 repeat=1 if runner.scene.generate_kwargs is not None else 2)
    if got is None:
        return MeasuredRemedy("memory_fraction", {"fraction": fraction}, raised + 1, text)
    return MeasuredRemedy("memory_fraction", {"fraction": fraction}, got, text, ran)


def _error_text(exc: BaseException) -> str:
    """An exception in one line: its type and its message's first line, bounded."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:160]}" if first else type(exc).__name__


def _hf_model(model: Any) -> tuple[str, Any] | None:
    """The outermost transformers model inside ``model`` (itself included) that has its own
    gradient checkpointing, and its path; None without one. Its blocks keep caches and
    position biases that a plain wrapping recomputes differently (T5's decoder: "a different
    number of tensors was saved"); its own switch handles them."""
    for name, module in model.named_modules():
        if getattr(module, "supports_gradient_checkpointing", False) and \
                callable(getattr(module, "gradient_checkpointing_enable", None)):
            return name, module
    return None


@dataclasses.dataclass(frozen=True)
class HfSwitch:
    """transformers' own checkpointing switch of a model, by the names its release has."""

    #: The method that turns it on, its keyword arguments' name, the one that turns it off,
    #: and the property that says whether it is on.
    enable: str
    kwargs: str
    disable: str
    state: str

    def on(self, module: Any) -> bool:
        """Is checkpointing on in ``module``?"""
        return bool(getattr(module, self.state, False))


def hf_switch(module: Any) -> HfSwitch:
    """transformers' own checkpointing switch on ``module``: ``activation_checkpointing_*``
    where the release has it (there the ``gradient_checkpointing_*`` names are deprecated
    aliases, to go in v6), else the old names."""
    if callable(getattr(module, "activation_checkpointing_enable", None)):
        return HfSwitch("activation_checkpointing_enable", "activation_checkpointing_kwargs",
                        "activation_checkpointing_disable", "is_activation_checkpointing")
    return HfSwitch("gradient_checkpointing_enable", "gradient_checkpointing_kwargs",
                    "gradient_checkpointing_disable", "is_gradient_checkpointing")


def _hf_checkpointing(module: Any) -> Callable[[], Callable[[], None]]:
    """transformers' own gradient checkpointing on ``module`` (non-reentrant, as the advice
    says to)."""
    switch = hf_switch(module)

    def setup() -> Callable[[], None]:
        was = switch.on(module)
        getattr(module, switch.enable)(**{switch.kwargs: {"use_reentrant": False}})

        def undo() -> None:
            if not was:
                getattr(module, switch.disable)()
        return undo
    return setup


def _checkpointing(model: Any, path: str) -> Callable[[], Callable[[], None]]:
    """Applies torch.utils.checkpoint to every child of ``path`` (as the advice says to)."""
    def setup() -> Callable[[], None]:
        from torch.utils.checkpoint import checkpoint

        children = list(model.get_submodule(path).children())
        for child in children:
            child.forward = functools.partial(checkpoint, child.forward, use_reentrant=False)

        def undo() -> None:
            for child in children:
                child.__dict__.pop("forward", None)
        return undo
    return setup


def grown(e: OomEvidence, inputs: Inputs) -> dict[int, tuple[int, int]]:
    """dimension -> (its size at a past step of the same batch, now) for each non-leading
    dimension of the failing input that grew; empty when none did, or when it is not known
    (no past step at this batch, another input than the model probe saw)."""
    now, past = e.input_shape, e.past_input_shape
    first = inputs.first
    if inputs.list_batch:
        return {}  # a list of samples: each its own size (detection images), none the batch's
    if not now or not past or len(now) != len(past) or first is None or \
            tuple(int(d) for d in first.shape) != tuple(now):
        return {}
    return {d: (past[d], now[d]) for d in range(1, len(now)) if now[d] > past[d]}


#: Where a model's configuration keeps its maximum number of positions (transformers' names).
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx")


def token_length(inputs: Inputs) -> int:
    """The length of the token ids the model was called with (``input_ids``, or a leading
    integer tensor of rank 2: batch, length); 0 when the input is not token ids."""
    torch = sys.modules["torch"]
    found = inputs.kwargs.get("input_ids")
    if found is None and inputs.args and isinstance(inputs.args[0], dict):
        found = inputs.args[0].get("input_ids")  # a training_step's batch
    if found is None:
        found = inputs.first
    if isinstance(found, torch.Tensor) and found.dim() == 2 and \
            found.dtype in (torch.int64, torch.int32):
        return int(found.shape[1])
    return 0


def max_positions(model: Any) -> int:
    """The most positions the model takes (its configuration's, as transformers names it, of
    the model or the first module under it that has one); 0 when it does not say."""
    for module in model.modules():
        config = getattr(module, "config", None)
        for name in POSITION_FIELDS:
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return 0


def cap_step(sizes: list[tuple[int, int]], unit: int = 1) -> int:
    """The step of a cap's sizes: of the divisors of every past and failing size's common
    divisor, the one at most CAP_STEP_MAX, a multiple of ``unit`` (the model's patch), with
    the most factors of two, then the largest (224 -> 448: 32; 512 -> 768: 64); the common
    divisor itself where none is (a patch above CAP_STEP_MAX)."""
    common = 0
    for past, now in sizes:
        common = math.gcd(common, math.gcd(past, now))
    common = max(1, common)
    unit = unit if unit >= 1 and common % unit == 0 else 1  # sizes the model ran: it divides
    fits = [d for d in range(unit, min(common, CAP_STEP_MAX) + 1, unit) if common % d == 0]
    return max(fits, key=lambda d: ((d & -d).bit_length(), d)) if fits else common


def patch_size(model: Any) -> int:
    """The patch an image model cuts its input into: the stride of its first convolution whose
    kernel is its stride (a ViT's, a Swin's, a ConvNeXt's stem); 1 when it has none. Its input
    sides must be multiples of it (timm's ViT asserts so)."""
    torch = sys.modules["torch"]
    kinds = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
    for module in model.modules():
        if isinstance(module, kinds):
            kernel, stride = tuple(module.kernel_size), tuple(module.stride)
            if kernel == stride and len(set(stride)) == 1 and stride[0] > 1:
                return int(stride[0])
    return 1


def cap_search(measure: Callable[[int], Probe], low: int, high: int, high_need: int,
               usable: float, step: int, late: Callable[[], bool]
               ) -> tuple[int, Probe | None, str]:
    """The largest multiple of ``step`` in [``low``, ``high``) whose step was measured to fit
    ``usable`` (0 when ``low`` does not), that probe, and the sizes run in words. ``high``
    needs ``high_need`` (more than usable). Regula falsi from below: a step's need is convex
    in the size of a dimension (linear, or quadratic under attention), so the chord between a
    size that fits and one that does not crosses the budget at a size that fits; each guess is
    run, and the answer is the largest one that fit."""
    ran: list[str] = []

    def run(size: int) -> Probe | None:
        try:
            probe = measure(size)
        except ProbeOutOfMemory:
            ran.append(f"{size} (out of memory)")
            return None
        ran.append(f"{size} ({format_bytes(probe.must_fit_bytes)})")
        return probe

    best = run(low)
    if best is None or best.must_fit_bytes > usable:
        return 0, best, ", ".join(ran)
    lo, lo_need, hi, hi_need = low, best.must_fit_bytes, high, max(high_need, int(usable) + 1)
    for _ in range(MAX_CAP_PROBES - 1):
        if hi - lo <= step or late():
            break
        guess = lo + (usable - lo_need) * (hi - lo) / (hi_need - lo_need)
        size = min(max(int(guess) // step * step, lo + step), hi - step)
        probe = run(size)
        if probe is not None and probe.must_fit_bytes <= usable:
            lo, lo_need, best = size, probe.must_fit_bytes, probe
        else:
            hi = size
            hi_need = probe.must_fit_bytes if probe is not None else max(hi_need, lo_need + 1)
            hi_need = max(hi_need, int(usable) + 1)
    return lo, best, ", ".join(ran)


def _twice(runner: _Runner, device: Any, opt: OptimizerStep, sizes: list[int],
           need: Callable[[int], int], how: str, usable: float, late: Callable[[], bool],
           before: int | None = None) -> tuple[int, int | None, str, bool] | str:
    """The first of ``sizes`` (the largest first) whose step runs twice in a row (after one at
    ``before``, where given) and fits ``usable``, or could not be run there (unconfirmed, not
    promised): it, what it needed (``confirm``), how, and whether it ran; where every one ran
    out or needed more, the last run's words."""
    text = ""
    for size in sizes:
        got, text, ran = confirm(runner, device, opt, size, need(size), how, usable, late,
                                 repeat=2, before=before)
        if not ran or got is not None and got <= usable:
            return size, got, text, ran
    return text


def _input_cap(runner: _Runner, device: Any, opt: OptimizerStep,
               sizes: dict[int, tuple[int, int]], need: int, usable: float,
               late: Callable[[], bool]) -> MeasuredRemedy | str:
    """The cap on the dimensions that grew: their largest size, at the failing batch, that
    was run and fit (the first grown dimension's size; the others in proportion)."""
    (lead, (past, now)), *_ = sorted(sizes.items())
    step = cap_step(list(sizes.values()), patch_size(runner.scene.model))

    def at(size: int) -> dict[int, tuple[int, int]]:
        return {d: (n, max(step, n * size // now // step * step)) for d, (_, n) in sizes.items()}

    runner.along = lambda size: resize_inputs(runner.inputs, at(size))
    window = device.window(runner)
    try:
        answer, probe, how = cap_search(lambda size: opt.adjust(*window(size)), past, now,
                                        need, usable, step, late)
        if answer == 0 or probe is None:
            return f"even the past step's size {past} does not fit at this batch ({how})"
        # Every later step runs at the cap, each in the cache the one before left, and the
        # first of them in the one the past, smaller step left (on an H100 a ViT's image cap
        # that ran twice in a row in an emptied cache ran out at its second step after a
        # 224-pixel one, 1.95 GiB cached in segments live blocks held): the cap is run twice
        # in a row after one step at the past size (one size lower where that runs out)
        # before it is advised.
        how = f"run at sizes {how}"
        measured = probe.must_fit_bytes
        tries = [answer] + ([answer - step] if answer - step >= past else [])
        found = _twice(runner, device, opt, tries, lambda _: measured, how, usable, late,
                       before=past)
        if isinstance(found, str):
            return (f"capped at {answer}, the step ran once and fit, but not twice in a row "
                    f"({found})")
        answer, got, how, ran = found
        need_at = got if got is not None else measured
    except Exception as exc:  # noqa: BLE001 -- the model refused the cut input
        return f"the input cut to a smaller size did not run ({_error_text(exc)})"
    finally:
        runner.along = None
    batch = runner.inputs.batch_size
    if len(sizes) == 1:
        return MeasuredRemedy("sequence_length", {
            "max_length": answer, "from_length": now, "dim": lead, "batch_size": batch},
            need_at, how, ran)
    cut = at(answer)
    dims = sorted(sizes)
    return MeasuredRemedy("image_size", {
        "max_size": [cut[d][1] for d in dims], "from_size": [sizes[d][1] for d in dims],
        "dims": dims, "batch_size": batch}, need_at, how, ran)


def _longest_batch(runner: _Runner, device: Any, opt: OptimizerStep, length: int,
                   longest: int, start: int, budget: int, usable: float, retries: bool,
                   late: Callable[[], bool]) -> MeasuredRemedy | str:
    """At a first step whose ``length`` token ids are fewer than the model's ``longest``
    positions (``open_length``: a later batch may be longer): the largest batch that runs at
    the longest input, each sample's ids repeated to ``longest`` (its mask and labels with
    them). The search runs over slices at that length; its answer is then run twice in a
    row (the later, longer steps each run in the cache the one before left), the largest
    slice that fit where two in a row run out. It holds for every length up to ``longest``."""
    inputs = runner.inputs
    size, first = inputs.batch_size, inputs.first
    if first is None or first.dim() < 2 or int(first.shape[1]) != length:
        return (f"the batch at the model's longest input ({longest} tokens): the token ids "
                "are not the second dimension of the first input; not run")

    def at(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = slice_inputs(inputs, batch)
        return resize_inputs(dataclasses.replace(inputs, args=args, kwargs=kwargs,
                                                 batch_size=batch), {1: (length, longest)})

    runner.along = at
    try:
        result = search(_measure_fn(runner, device, opt, {}), budget, start=start, limit=size,
                        max_probes=MAX_PROBES, retries=retries, confirm=False)
        fitting = sorted(p.size for p in result.probes if p.must_fit_bytes <= usable)
        if result.size < 1 or result.prediction is None or not fitting:
            return (f"the batch at the model's longest input ({longest} tokens): even "
                    f"{start} does not fit ({result.reason})")
        needs = {p.size: p.must_fit_bytes for p in result.probes}
        needs.setdefault(result.size, result.prediction.need_bytes)
        how = (f"slices at {longest} tokens ({', '.join(map(str, sorted(needs)))}: "
               f"{result.prediction.basis})")
        tries = [result.size] + [b for b in fitting if b < result.size][-1:]
        found = _twice(runner, device, opt, tries, needs.__getitem__, how, usable, late)
        if isinstance(found, str):
            return (f"the batch at the model's longest input ({longest} tokens): "
                    f"{', '.join(map(str, tries))} ran once and fit, but not twice in a row "
                    f"({found})")
        batch, got, text, ran = found
    except Exception as exc:  # noqa: BLE001 -- the model refused the longer input
        return (f"the batch at the model's longest input ({longest} tokens): the step did not "
                f"run there ({_error_text(exc)})")
    finally:
        runner.along = None
    return MeasuredRemedy("batch_size", {
        "batch_size": batch, "from_batch_size": size, "at_length": longest,
        "from_length": length}, got if got is not None else needs[batch], text, ran)


def _new_tokens(kwargs: dict[str, Any]) -> int | None:
    """The new tokens a generate() call asked for (max_new_tokens), None when not given."""
    tokens = kwargs.get("max_new_tokens")
    if tokens is None:
        tokens = getattr(kwargs.get("generation_config"), "max_new_tokens", None)
    return int(tokens) if isinstance(tokens, int) and tokens > 1 else None


def _with_tokens(kwargs: dict[str, Any], tokens: int) -> dict[str, Any]:
    """generate()'s keyword arguments with at most ``tokens`` new tokens (and the minimum no
    higher), its generation config copied, not changed."""
    out = dict(kwargs)
    config = out.get("generation_config")
    if config is not None:
        out["generation_config"] = config = copy.deepcopy(config)
        config.max_new_tokens = tokens
        if (getattr(config, "min_new_tokens", None) or 0) > tokens:
            config.min_new_tokens = tokens
    if "max_new_tokens" in out:
        out["max_new_tokens"] = tokens
    if (out.get("min_new_tokens") or 0) > tokens:
        out["min_new_tokens"] = tokens
    return out


def _token_cap(runner: _Runner, device: Any, tokens: int, need: int, usable: float,
               late: Callable[[], bool]) -> MeasuredRemedy | str:
    """Fewer new tokens for a generate() call, at its whole batch: the most that ran and fit."""
    args, kwargs = runner.inputs.args, runner.inputs.kwargs
    runner.along = lambda size: (args, _with_tokens(kwargs, size))
    window = device.window(runner)
    step = 8 if tokens >= 64 else 1
    try:
        answer, probe, how = cap_search(lambda size: window(size)[0], max(1, tokens // 16),
                                        tokens, need, usable, step, late)
    except Exception as exc:  # noqa: BLE001 -- generate() refused fewer tokens
        return f"fewer new tokens: generate() did not run with them ({_error_text(exc)})"
    finally:
        runner.along = None
    if answer == 0 or probe is None:
        return f"fewer new tokens: even {max(1, tokens // 16)} do not fit ({how})"
    return MeasuredRemedy("max_new_tokens", {
        "max_new_tokens": answer, "from_max_new_tokens": tokens,
        "batch_size": runner.inputs.batch_size}, probe.must_fit_bytes,
        f"generate() run with {how} new tokens")


def top_path(e: OomEvidence, path: str, cls: str, count: int) -> str:
    """``path`` (a block list in the module whose forward ran at the OOM) as the program's
    top-level model names it: a LightningModule's ``net.layer3`` where the ResNet it calls
    says ``layer3``. The model probe's block lists are the top-level model's; the one of the
    same class and count that ends in ``path`` is it. ``path`` itself when none is."""
    for top, top_cls, top_count in e.block_lists:
        if top_cls == cls and top_count == count and (
                top == path or not path or top.endswith("." + path)):
            return top
    return path


def _pick_inputs(scene: OomScene, grad: bool,
                 backward: bool = True) -> tuple[Inputs | None, int, str, bool]:
    """The first candidate input with which the step runs at slices of 1 and 2 (a wrong
    reading of the batch can run at 1 by broadcasting, not at 2), and the smallest slice that
    ran: 1, or 2 where one sample cannot run (batch norm in training needs two); without one,
    why, and did every candidate run out of memory?"""
    errors = []
    ran_out = True
    # A generate() call has one reading of its input, and each run is a whole generation.
    tries = (1,) if scene.generate_kwargs is not None else (1, 2)
    for candidate in scene.inputs:
        runner = _Runner(scene, candidate, grad, backward)
        ran: list[int] = []
        for size in tries[:min(len(tries), candidate.batch_size)]:
            try:
                runner(size)
                ran.append(size)
            except Exception as exc:  # noqa: BLE001 -- a wrong guess at the input: try the next
                if size == min(tries[-1], candidate.batch_size):
                    errors.append(f"{candidate.source}: {_error_text(exc)}")
                    ran_out = ran_out and is_oom_error(exc)
                    ran.clear()
            finally:
                gc.collect()
        if ran:
            return candidate, ran[0], "", False
    return None, 0, "; ".join(errors), ran_out and bool(errors)


def measure(scene: OomScene, e: OomEvidence, deadline_s: float = 120.0,
            device: Any = None) -> Measured | str:
    """The failing step measured again, and its remedies; a one-line reason instead when it
    cannot be run. Allocates on the GPU: only in a process the OOM is ending, or once a test it
    failed is reported. ``device``: where it runs (a CudaDevice of the OOM's device by
    default)."""
    torch = sys.modules["torch"]
    began = time.monotonic()
    device = CudaDevice(e.device) if device is None else device
    grad = scene.grad_enabled if scene.grad_enabled is not None else (
        scene.generate_kwargs is None and bool(getattr(scene.model, "training", False)))
    if scene.generate_kwargs is not None:
        grad = False
    # A model in evaluation mode with no optimizer, no optimizer step seen, no gradient on its
    # parameters, run with autograd on, outside a backward: an inference loop that forgot
    # no_grad. It runs the forward alone, and autograd keeps what a backward would need; the
    # remedy is measured with autograd off.
    forgot_no_grad = grad and e.phase not in TRAINING_PHASES and scene.optimizer is None \
        and not e.optimizer and not e.steps \
        and getattr(scene.model, "training", True) is False \
        and all(p.grad is None for p in scene.model.parameters())
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized() and \
            dist.get_world_size() > 1:
        return ("a distributed job: the step was not run again (its collectives would wait "
                "for the other ranks, which are not running it)")
    if e.phase == "load":
        return ("the OOM came while the model was moved to the device: there is no step to "
                "run again yet")
    if e.eval_joining:
        return ("the OOM came in transformers' Trainer evaluation loop, keeping a step's "
                "predictions with those of the steps before, not in the step: it ran")
    if not scene.inputs:
        if e.phase == "optimizer" and grad and scene.optimizer is not None:
            with device.selected():
                device.free()
                return _optimizer_only(scene, e, device, began)
        return ("the model's input was not found on the stack (no forward running at the OOM, "
                "no tensor beside the model in the caller's locals)")
    first = next(iter(scene.model.parameters()), None)
    if first is not None and first.device != scene.inputs[0].device:
        # A framework's teardown moved the model to the host after the OOM (Lightning does).
        scene.model.to(scene.inputs[0].device)
    with device.selected():
        device.free()
        inputs, start, why, ran_out = _pick_inputs(scene, grad, not forgot_no_grad)
        if inputs is None and ran_out:
            return ("even the smallest slice of the batch ran out of memory when the step was "
                    "run again: what does not grow with the batch (the parameters, their "
                    f"gradients, the optimizer's state) does not fit ({why})")
        if inputs is None:
            return f"the step did not run again with any input found on the stack ({why})"
        size = inputs.batch_size
        if inputs.list_batch:
            # The shapes the model probe kept are one sample's (its first image): they say
            # nothing of what grew from step to step.
            e.input_shape = e.past_input_shape = None
        runner = _Runner(scene, inputs, grad, not forgot_no_grad)
        opt = optimizer_step(scene.optimizer if grad else None, scene.model,
                             scene.gradients_resident)
        if opt.parameter_bytes > 0:
            runner.temporaries = round(opt.temporary_bytes / opt.parameter_bytes)
        budget = e.budget_bytes
        raw: dict[int, tuple[Probe, int]] = {}
        retries = allocator_retries()
        measure_slice = _measure_fn(runner, device, opt, raw)
        try:
            result = search(measure_slice, budget, start=start, limit=size,
                            max_probes=MAX_PROBES, retries=retries, confirm=False)
            if ends_on_flat(result.probes) and 2 * result.probes[-1].size <= size and \
                    result.size < size and not result.reason.startswith("probing stopped") \
                    and time.monotonic() - began < deadline_s / 2:
                # Every slice so far peaked at the same fixed point (the gradients at the
                # backward's end): a line through them says nothing of what grows, and each
                # next slice may only grow in proportion. More slices, to get past it.
                result = search(measure_slice, budget, start=start, limit=size,
                                max_probes=len(result.probes) + MAX_PROBES, retries=retries,
                                known=result.probes, confirm=False)
            result = _nearer(result, measure_slice, e, size, start, retries,
                             time.monotonic() - began < deadline_s / 2)
        except Exception as exc:  # noqa: BLE001 -- a slice that does not run: say so, not raise
            return (f"the step ran at a slice of {start} but not at a larger one "
                    f"({_error_text(exc)})")
        probes = list(result.probes)
        model = result.model
        need = _need(model, size)
        basis = f"the step run again at slices of its batch: {model.predict(size).basis}" \
            if model is not None else ""
        if model is None and len({p.size for p in probes}) == 1 and probes[0].size < size:
            # Not even the smallest slice fits with the optimizer's step (its state fills the
            # budget), so the search stopped there: a second size still gives the slices'
            # line, and the optimizer's step is added at the failing size.
            with contextlib.suppress(ProbeOutOfMemory):
                probes.append(measure_slice(min(size, 2 * probes[0].size)))
            stepped = _step_need(raw, opt, size, retries)
            if stepped is not None:
                need, how = stepped
                basis = (f"the step run again at slices of its batch (without its optimizer "
                         f"step: {how}), and {opt.name}'s step added at {size}")
        if need is None:
            top = max(probes, key=lambda p: p.size, default=None)
            if top is None:
                return "no slice of the batch could be measured"
            need = int(top.need_at(size / top.size))
            basis = (f"{result.what} {top.size} measured ({format_bytes(top.must_fit_bytes)}), "
                     f"what stays allocated kept and the rest scaled to {size} "
                     f"({result.reason})")
        remedies: list[MeasuredRemedy] = []
        notes: list[str] = []

        def late() -> bool:
            if time.monotonic() - began > deadline_s:
                if not any("VRAMSCOPE_OOM_MEASURE_SECONDS" in n for n in notes):
                    notes.append(f"measuring stopped after {deadline_s:.0f} s "
                                 "(VRAMSCOPE_OOM_MEASURE_SECONDS)")
                return True
            return False

        usable = budget * (1.0 - DEFAULT_MARGIN)
        if 0 < result.size < size and result.prediction is not None:
            batch = _batch_remedy(result, probes, measure_slice, size, usable, late)
            if batch is not None:
                remedies.append(batch)
        # The two largest sizes that ran: each remedy saves memory, so they run with it too.
        sizes = sorted({p.size for p in probes})[-2:]
        dims = grown(e, inputs) if scene.generate_kwargs is None else {}
        if dims and need > usable and not late():
            # First: a later step may grow further, and only a cap holds for it.
            capped = _input_cap(runner, device, opt, dims, int(need), usable, late)
            if isinstance(capped, str):
                notes.append(f"a cap on what grew ({grown_dims(e)}): {capped}")
            else:
                remedies.append(capped)

        length = token_length(inputs) if scene.generate_kwargs is None else 0
        longest = max_positions(scene.model) if length else 0
        if open_length(e, length, longest) and need > usable and not late():
            # A later batch may be longer: the batch that fits the longest input holds.
            at_longest = _longest_batch(runner, device, opt, length, longest, start, budget,
                                        usable, retries, late)
            if isinstance(at_longest, str):
                notes.append(at_longest)
            else:
                remedies.append(at_longest)

        if forgot_no_grad and not late():
            def grad_off() -> Callable[[], None]:
                runner.grad = False

                def undo() -> None:
                    runner.grad = True
                return undo
            variant, how, ran = _variant(runner, device, opt, sizes, size, grad_off, usable,
                                         late)
            if variant is not None:
                remedies.append(MeasuredRemedy("no_grad", {}, variant, how, ran))
            else:
                notes.append(f"torch.no_grad(): {how}")
        blocks = block_lists(scene.model)
        if grad and not forgot_no_grad and blocks and not late():
            path, cls, count = blocks[0]
            where = top_path(e, path, cls, count)
            ckpt: dict[str, Any] = {"modules": where, "class": cls, "count": count}
            hf = _hf_model(scene.model)
            if hf is not None:
                # transformers' own switch, on the model that holds it, named from the top.
                name, module = hf
                inner = path[len(name) + 1:] if name and path.startswith(name + ".") else path
                ckpt["modules"] = where[:len(where) - len(inner)].rstrip(".") \
                    if inner and where.endswith(inner) else name
                ckpt["method"] = hf_switch(module).enable
                setup = _hf_checkpointing(module)
            else:
                setup = _checkpointing(scene.model, path)
            variant, how, ran = _variant(runner, device, opt, sizes, size, setup, usable, late)
            if variant is not None:
                remedies.append(MeasuredRemedy("activation_checkpointing", ckpt, variant, how,
                                               ran))
            else:
                notes.append(f"activation checkpointing on {where or 'the model'}: {how}")
        _, dtype = parameter_summary(scene.model.parameters())
        if scene.autocast_dtype is None and dtype == "float32" and not late():
            def autocast_on() -> Callable[[], None]:
                runner.autocast = torch.bfloat16

                def undo() -> None:
                    runner.autocast = None
                return undo
            variant, how, ran = _variant(runner, device, opt, sizes, size, autocast_on,
                                         usable, late)
            if variant is not None:
                remedies.append(MeasuredRemedy("mixed_precision", {"dtype": "bfloat16"},
                                               variant, how, ran))
            else:
                notes.append(f"mixed precision: {how}")
        tokens = _new_tokens(scene.generate_kwargs) if scene.generate_kwargs else None
        if tokens and need > usable and not late():
            capped = _token_cap(runner, device, tokens, int(need), usable, late)
            if isinstance(capped, str):
                notes.append(capped)
            else:
                remedies.append(capped)
        if need > usable and not late():
            raised = _raised_cap(runner, device, opt, e, size, int(need), late)
            if isinstance(raised, str):
                notes.append(raised)
            elif raised is not None:
                remedies.append(raised)
        if opt.state_full_bytes > 0 and raw:
            light, params = opt.lighter(opt.gradients_resident)
            lighter = _step_need(raw, light, size, retries)
            if lighter is not None:
                remedies.append(MeasuredRemedy(
                    "optimizer_state", params, lighter[0],
                    f"the same slices ({lighter[1]}), with its optimizer step added"))
        device.free()
    return Measured(size=size, what="batch_size", need_bytes=int(need), basis=basis,
                    remedies=remedies, notes=notes, seconds=time.monotonic() - began,
                    lower_bound=_short_of_the_program(e, model, size, int(need)),
                    length=length, max_length=longest)


#: What the step run again may lack of what the program held at its OOM before its measurement
#: counts as short of it: a share (a linear fit through slices), and bytes (the OOM's request
#: is the segment the allocator asked the driver for: 20 MiB for a request of a few MiB).
OBSERVED_TOLERANCE = 0.03
OBSERVED_TOLERANCE_BYTES = 32 << 20


def _short_of_the_program(e: OomEvidence, model: MemoryModel | None, size: int,
                          need: int) -> str:
    """Why the measured need is only a lower bound, or "": at its OOM the program held and
    asked for more (allocated + the request, less what emptying its containers freed) than
    the step run again needs at the same size by its own measurement. The program's step then
    does more than the model's forward and backward (its own loss after the forward, metrics
    on the device, a second model), which the measurement does not run."""
    observed = e.allocated_bytes + e.requested_bytes - sum(h.freed_bytes or 0
                                                           for h in e.holders)
    if model is not None:
        p = model.predict(size)
        measured = p.allocated_bytes + p.margin_bytes
    else:
        measured = need
    if measured >= observed * (1.0 - OBSERVED_TOLERANCE) - OBSERVED_TOLERANCE_BYTES:
        return ""
    return (f"at its OOM the program held {format_bytes(e.allocated_bytes)} and asked for "
            f"{format_bytes(e.requested_bytes)} more, beyond the ≈{format_bytes(measured)} the "
            f"step run again needs at {size}: the program's step does more than the model's "
            "forward and backward (its own loss, metrics, another model), which was not run")


def _optimizer_only(scene: OomScene, e: OomEvidence, device: Any, began: float) -> Measured:
    """An OOM in the optimizer's step, with no input left to run the step again: its forward
    and backward ran (the agent's peak of the failed step says what they needed), and what the
    optimizer's step needs is the parameters, gradients, state and temporaries now allocated or
    still to come. A lighter optimizer is judged the same way; a smaller batch cannot be."""
    opt = optimizer_step(scene.optimizer, scene.model, False)
    peak, now = device.step_peak()
    missing = max(0, opt.state_full_bytes - opt.state_bytes)

    def need(step: OptimizerStep, state_now: int) -> int:
        # Later steps hold the whole state through their forward, and the step itself holds
        # what is allocated now (parameters, gradients), the rest of the state, temporaries.
        later = max(0, step.state_full_bytes - state_now)
        return max(peak + later, now - opt.state_bytes + state_now + later
                   + step.temporary_bytes)

    total = max(peak + missing, now + missing + opt.temporary_bytes)
    basis = (f"the failed step's own peak before its optimizer step "
             f"({format_bytes(peak)}), and {opt.name}'s step: {format_bytes(now)} allocated "
             f"now, {format_bytes(missing)} of state still to come, "
             f"{format_bytes(opt.temporary_bytes)} of temporaries")
    remedies = []
    light, params = opt.lighter(False)
    remedies.append(MeasuredRemedy("optimizer_state", params, need(light, 0),
                                   "the failed step's peak and the lighter state"))
    return Measured(size=0, what="step", need_bytes=int(total), basis=basis,
                    remedies=remedies,
                    notes=["the batch could not be run again (its input was not found on the "
                           "stack): no smaller batch is measured"],
                    seconds=time.monotonic() - began)

