# tests/python/postmortem/test_measure.py -- the failing step run again: scene, slices, remedies
"""A small model on the host stands for the failing step; a synthetic allocator gives each
measured window the peaks of a step whose memory is known (fixed bytes plus bytes per sample,
less with checkpointing or autocast, what must fit a known share above the allocated peak), so
the true largest batch and each remedy's true need are computed here independently of the
model and the search they test."""

from __future__ import annotations

import contextlib
import functools
import math

import pytest
import torch

from vramscope.postmortem import measure as _measure
from vramscope.postmortem import scene as _scene
from vramscope.postmortem.advice import OomEvidence, StepPoint
from vramscope.postmortem.remedies import MEASURED_MARGIN, assess
from vramscope.predict.model import Probe

GiB = 1 << 30
MiB = 1 << 20
#: The synthetic step: what does not depend on the batch, and per sample.
FIXED = 1 * GiB
PER_SAMPLE = GiB // 10
#: Per-sample shares kept with checkpointing on the blocks, and under autocast.
CHECKPOINT_SHARE = 0.3
#: What must fit under a cap over the allocated peak (the measured allowance).
ALLOWANCE = 1.05
def test_the_failed_blocks_graph_is_freed_though_a_closure_of_torchs_kept_its_input():
    # With any module hook installed (Monitor(model=, optimizer=) installs global ones),
    # Module._call_impl runs the forward through a closure, inner(), whose cell keeps the
    # call's args; a finished frame keeps its function (Python 3.11 on), so the failing
    # block's input, and the graph of every block before it, outlived its frames' clearing.
    import gc
    import weakref

    from vramscope.attribution.model_probe import frames_of_traceback
    from vramscope.postmortem.oom import _free_failed_step

    outputs: list = []

    class Block(torch.nn.Linear):
        def forward(self, x):
            if self.fails:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            y = torch.relu(super().forward(x))
            outputs.append(weakref.ref(y))
            return y

    blocks = torch.nn.Sequential(*[Block(8, 8) for _ in range(4)])
    for i, block in enumerate(blocks):
        block.fails = i == 3
    hook = torch.nn.modules.module.register_module_forward_pre_hook(lambda m, args: None)
    try:
        blocks(torch.ones(2, 8))
    except torch.OutOfMemoryError as exc:
        frames = frames_of_traceback(exc.__traceback__)
        for frame in frames:
            _ = frame.f_locals  # what the evidence does
        _free_failed_step(exc.__traceback__, frames)
        del frames
    finally:
        hook.remove()
    gc.collect()
    assert len(outputs) == 3 and all(r() is None for r in outputs)
    # What the closures shared with longer-lived code is untouched: the blocks still run.
    blocks[3].fails = False
    assert blocks(torch.ones(2, 8)).shape == (2, 8)


CAP = 10 * GiB
BATCH = 128


class Blocks(torch.nn.Module):
    def __init__(self, n: int = 6) -> None:
        super().__init__()
        self.stem = torch.nn.Linear(16, 32)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(n))
        self.head = torch.nn.Linear(32, 10)
        self.fail_above: int | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail_above is not None and x.shape[0] > self.fail_above:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        x = self.stem(x)
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def _state(runner) -> tuple[bool, bool]:
    model = runner.scene.model
    checkpointed = any("forward" in vars(b) for b in model.blocks)
    return checkpointed, runner.autocast is not None


class SyntheticDevice:
    """Windows whose peaks are the synthetic step's, after really running the slice (on the
    host: the slicing, the loss and the backward are the code under test)."""

    def __init__(self, amp_share: float) -> None:
        self.amp_share = amp_share
        self.sizes: list[tuple[int, bool, bool]] = []

    def truth(self, size: int, checkpointed: bool = False, autocast: bool = False) -> int:
        share = (CHECKPOINT_SHARE if checkpointed else 1.0) * (self.amp_share if autocast else 1.0)
        return int(FIXED + size * PER_SAMPLE * share)

    def window(self, call):
        def measure(size: int):
            call(size)
            checkpointed, autocast = _state(call)
            self.sizes.append((size, checkpointed, autocast))
            peak = self.truth(size, checkpointed, autocast)
            probe = Probe(size, peak, int(peak * 1.2), peak_pinned_bytes=int(peak * ALLOWANCE))
            return probe, FIXED
        return measure

    def free(self) -> None:
        pass

    def selected(self):
        import contextlib

        return contextlib.nullcontext()


def _evidence() -> OomEvidence:
    return OomEvidence(device=0, requested_bytes=2 * GiB, device_total_bytes=80 * GiB,
                       device_free_bytes=60 * GiB, allocated_bytes=9 * GiB,
                       reserved_bytes=9 * GiB, limit_bytes=CAP)


def _usable() -> float:
    return CAP * (1.0 - MEASURED_MARGIN)


@pytest.fixture(autouse=True)
def host_inputs(monkeypatch):
    monkeypatch.setattr(_scene, "INPUT_DEVICE_TYPES", ("cuda", "cpu"))


def _oom_scene(model: Blocks, optimizer=None, batch: int = BATCH) -> _scene.OomScene:
    """The scene as the post-mortem captures it: the OOM raised inside the model's forward of
    a training loop at ``batch`` (SGD without momentum unless ``optimizer(params)`` is given),
    the frames taken from the exception's traceback."""
    from vramscope.attribution.model_probe import frames_of_traceback

    opt = (optimizer or functools.partial(torch.optim.SGD, lr=0.1))(model.parameters())

    def train(x: torch.Tensor) -> None:
        loss = model(x).logsumexp(-1).mean()
        loss.backward()
        opt.step()

    model.fail_above = 64
    try:
        train(torch.randn(batch, 16))
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    model.fail_above = None
    assert scene is not None
    return scene


def test_the_scene_holds_the_model_its_input_and_its_optimizer():
    model = Blocks()
    scene = _oom_scene(model)
    assert scene.model is model
    assert scene.inputs[0].batch_size == BATCH
    assert "forward of Blocks" in scene.inputs[0].source
    assert isinstance(scene.optimizer, torch.optim.SGD)


def test_without_a_forward_on_the_stack_the_input_is_found_beside_the_model():
    from vramscope.attribution.model_probe import frames_of_traceback

    model = Blocks()

    def train(batch: dict) -> None:
        out = model(batch["x"])
        raise torch.OutOfMemoryError(f"CUDA out of memory (in backward of {out.shape})")

    try:
        train({"x": torch.randn(BATCH, 16), "y": torch.zeros(BATCH)})
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    assert scene is not None and scene.model is model
    # The mapping as keyword arguments does not call this model; measuring tries the next.
    assert [i.batch_size for i in scene.inputs] == [BATCH]
    assert scene.inputs[0].kwargs.keys() == {"x", "y"}


def test_measured_need_and_remedies_match_the_synthetic_step():
    model = Blocks()
    scene = _oom_scene(model)
    device = SyntheticDevice(amp_share=0.6)
    scene.grad_enabled = True
    m = _measure.measure(scene, _evidence(), device=device)
    assert not isinstance(m, str), m
    assert m.size == BATCH
    # The step's need at its own size: the synthetic peak times the allowance (a line through
    # exact points extrapolates exactly).
    assert m.need_bytes == pytest.approx(device.truth(BATCH) * ALLOWANCE, rel=1e-6)
    by_kind = {r.kind: r for r in m.remedies}
    truth_batch = math.floor((_usable() / ALLOWANCE - FIXED) / PER_SAMPLE)
    assert 0.95 * truth_batch <= by_kind["batch_size"].params["batch_size"] <= truth_batch
    assert by_kind["activation_checkpointing"].params["modules"] == "blocks"
    assert by_kind["activation_checkpointing"].need_bytes == pytest.approx(
        device.truth(BATCH, checkpointed=True) * ALLOWANCE, rel=1e-6)
    # Each remedy was run at slices no larger than the batch that ran without it, then, where
    # their line said it fits, at the failing batch itself before it is promised.
    largest_plain = max(s for s, c, a in device.sizes if not c and not a)
    for kind, on in (("activation_checkpointing", (True, False)),
                     ("mixed_precision", (False, True))):
        ran = sorted(s for s, c, a in device.sizes if (c, a) == on)
        assert all(s <= largest_plain for s in ran[:2]), (kind, ran)
        assert (ran[-1] == BATCH) == (by_kind[kind].need_bytes <= _usable()), (kind, ran)
        assert by_kind[kind].ran_where_advised


def test_a_remedy_is_promised_only_when_its_need_with_the_allowance_fits():
    # Under autocast the allocated peak alone would fit, the need under the cap would not.
    share = (_usable() / ALLOWANCE - FIXED) / (BATCH * PER_SAMPLE) * 1.01
    device = SyntheticDevice(amp_share=share)
    assert device.truth(BATCH, autocast=True) < _usable() < \
        device.truth(BATCH, autocast=True) * ALLOWANCE
    model = Blocks()
    scene = _oom_scene(model)
    e = _evidence()
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str)
    e.measured = m
    a = assess(e)
    assert not a.projection_is_lower_bound
    kinds = [x.kind for x in a.advice]
    assert kinds[0] == "activation_checkpointing" and a.advice[0].fits
    assert "mixed_precision" not in kinds
    assert any(k == "mixed_precision" for k, _ in a.not_advised)
    batch = next(x for x in a.advice if x.kind == "batch_size")
    assert batch.fits and batch.params["batch_size"] < BATCH
    # What the batch leaves of the budget, as an estimated batch says it.
    [measured] = [r for r in m.remedies if r.kind == "batch_size"]
    assert batch.params["margin_bytes"] == e.budget_bytes - measured.need_bytes > 0


def test_the_optimizer_step_is_added_to_a_forward_and_backward():
    step = _measure.OptimizerStep(parameter_bytes=4 * GiB, state_bytes=0,
                                  state_full_bytes=8 * GiB, temporary_bytes=4 * GiB)
    # Forward and backward peak 6 GiB, 4.5 GiB allocated after it (parameters, inputs): the
    # optimizer's step holds that, the gradients, the whole state and its temporaries.
    got = step.adjust(Probe(8, 6 * GiB, 7 * GiB, peak_pinned_bytes=6 * GiB), 9 * GiB // 2)
    assert got.peak_allocated_bytes == 9 * GiB // 2 + 4 * GiB + 8 * GiB + 4 * GiB
    assert got.peak_pinned_bytes - 6 * GiB == got.peak_allocated_bytes - 6 * GiB
    # A forward that needs more than the step: the state still to come is added to it.
    big = step.adjust(Probe(8, 30 * GiB, 31 * GiB), GiB)
    assert big.peak_allocated_bytes == 30 * GiB + 8 * GiB


def test_the_failed_steps_locals_are_freed_even_after_the_evidence_read_them():
    import gc
    import weakref

    from vramscope.attribution.model_probe import frames_of_traceback
    from vramscope.postmortem.oom import _free_failed_step

    class Activations:
        pass

    def step() -> None:
        held = Activations()
        refs.append(weakref.ref(held))
        raise torch.OutOfMemoryError("CUDA out of memory")

    refs: list = []
    try:
        step()
    except torch.OutOfMemoryError as exc:
        frames = frames_of_traceback(exc.__traceback__)
        for frame in frames:
            _ = frame.f_locals  # what the evidence does (a dict left on the frame < 3.13)
        _free_failed_step(exc.__traceback__, frames)
        del frames
        gc.collect()
        assert refs[0]() is None


class _Armed:
    """A forward pre-hook that raises CUDA's OutOfMemoryError while armed (the failing step)."""

    def __init__(self) -> None:
        self.armed = True

    def __call__(self, module, args):
        if self.armed:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")


def _hf_gpt2():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=100,
                                     n_positions=64)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


class _HostDevice(SyntheticDevice):
    """The synthetic allocator for models without `blocks`: checkpointing read from the
    model's block list."""

    def __init__(self, path: str) -> None:
        super().__init__(amp_share=0.6)
        self.path = path

    def window(self, call):
        def measure(size: int):
            call(size)
            container = call.scene.model.get_submodule(self.path)
            checkpointed = any("forward" in vars(b) for b in container.children()) or \
                _measure.hf_switch(call.scene.model).on(call.scene.model)
            peak = self.truth(size, checkpointed, call.autocast is not None)
            self.sizes.append((size, checkpointed, call.autocast is not None))
            return Probe(size, peak, int(peak * 1.2), peak_pinned_bytes=int(peak * ALLOWANCE)), \
                FIXED
        return measure


def test_a_transformers_lm_is_run_again_from_its_forward_with_its_own_loss():
    from vramscope.attribution.model_probe import frames_of_traceback

    model = _hf_gpt2()
    opt = torch.optim.AdamW(model.parameters())
    hook = _Armed()
    model.transformer.h[1].register_forward_pre_hook(hook)
    ids = torch.randint(0, 100, (BATCH, 16))
    try:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    hook.armed = False
    assert scene.model is model and scene.inputs[0].batch_size == BATCH
    assert set(scene.inputs[0].kwargs) >= {"input_ids", "labels"}
    scene.grad_enabled = True
    device = _HostDevice("transformer.h")
    m = _measure.measure(scene, _evidence(), device=device)
    assert not isinstance(m, str), m
    kinds = {r.kind: r for r in m.remedies}
    # transformers' own switch (its blocks keep caches a plain wrapping recomputes wrongly),
    # on the model itself; measured with it on, and off again after.
    assert kinds["activation_checkpointing"].params == {
        "modules": "", "class": "GPT2Block", "count": 3, "method": _measure.hf_switch(model).enable}
    assert kinds["activation_checkpointing"].need_bytes < m.need_bytes
    assert not _measure.hf_switch(model).on(model)
    # The model's own loss ran backward: every parameter got a gradient, then it was dropped.
    assert all(p.grad is None for p in model.parameters())


def test_generate_is_run_again_at_slices_of_its_batch_without_gradients():
    from vramscope.attribution.model_probe import frames_of_traceback

    model = _hf_gpt2().eval()
    hook = _Armed()
    model.transformer.h[2].register_forward_pre_hook(hook)
    ids = torch.randint(1, 100, (BATCH, 4))
    try:
        with torch.no_grad():
            model.generate(ids, max_new_tokens=6, min_new_tokens=6, do_sample=False,
                           pad_token_id=0)
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    hook.armed = False
    assert scene.generate_kwargs is not None and scene.inputs[0].batch_size == BATCH
    calls = []
    real = model.generate

    def generate(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append((args[0].shape if args else kwargs["input_ids"].shape, out.shape,
                      torch.is_grad_enabled()))
        return out

    model.generate = generate
    m = _measure.measure(scene, _evidence(), device=_HostDevice("transformer.h"))
    assert not isinstance(m, str), m
    # Each slice generated its six new tokens, under no_grad (the search for fewer tokens
    # runs the whole batch); no checkpointing is measured.
    assert calls and all(not g for _, _, g in calls)
    assert all(o[1] == i[1] + 6 for i, o, _ in calls if i[0] < BATCH)
    assert all(i[1] < o[1] <= i[1] + 6 for i, o, _ in calls)
    assert "activation_checkpointing" not in {r.kind for r in m.remedies}


# -- a cap on what grew from step to step -------------------------------------------------

#: The synthetic step along a sequence: per sample, bytes per token and per token squared
#: (attention's scores), at the failing batch GROWN_BATCH; its input grew from PAST_LENGTH.
PER_TOKEN = 128 << 10
PER_TOKEN_SQUARED = 32
GROWN_BATCH = 32
PAST_LENGTH, FAILED_LENGTH = 1024, 2048


class Tokens(torch.nn.Module):
    """Token ids and their mask in, logits out; remembers the shape it was last called with
    (what the synthetic allocator charges)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(4))
        self.head = torch.nn.Linear(16, 100)
        self.fail_above: int | None = None
        self.seen: tuple[int, ...] = ()

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        assert mask.shape == ids.shape, (mask.shape, ids.shape)
        self.seen = tuple(ids.shape)
        if self.fail_above is not None and ids.shape[1] > self.fail_above:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        x = self.embed(ids) * mask.unsqueeze(-1)
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


class ShapeDevice(SyntheticDevice):
    """The synthetic allocator charging what ``need(shape, checkpointed)`` says for the shape
    the model last ran at, and running out of memory above the cap, as a real window does."""

    def __init__(self, model, need, repeat_share: float = 1.0) -> None:
        super().__init__(amp_share=0.6)
        self.model, self.need = model, need
        #: What a window of steps run back to back needs over one step alone (the cache the
        #: first leaves fragments the second's).
        self.repeat_share = repeat_share
        self.shapes: list[tuple[int, ...]] = []

    def window(self, call):
        def measure(size: int):
            call(size)
            checkpointed = any("forward" in vars(b) for b in self.model.blocks)
            peak = self.need(self.model.seen, checkpointed)
            if getattr(call, "repeat", 1) > 1:
                peak = int(peak * self.repeat_share)
            self.shapes.append(self.model.seen)
            if peak * ALLOWANCE > CAP:
                raise _measure.ProbeOutOfMemory(size)
            return Probe(size, peak, int(peak * 1.2), peak_pinned_bytes=int(peak * ALLOWANCE)), \
                FIXED
        return measure


def _sequence_need(shape, checkpointed: bool) -> int:
    b, length = shape
    share = CHECKPOINT_SHARE if checkpointed else 1.0
    return int(FIXED + b * (PER_TOKEN * length + PER_TOKEN_SQUARED * length ** 2) * share)


def _grown_scene(model: torch.nn.Module, x: tuple, fail_above: int,
                 optimizer: type = torch.optim.SGD) -> _scene.OomScene:
    """The scene of an OOM in the forward of a training loop whose input grew."""
    from vramscope.attribution.model_probe import frames_of_traceback

    opt = optimizer(model.parameters(), lr=0.1)

    def train(*inputs: torch.Tensor) -> None:
        model(*inputs).float().logsumexp(-1).mean().backward()
        opt.step()

    model.fail_above = fail_above
    try:
        train(*x)
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    model.fail_above = None
    scene.grad_enabled = True
    return scene


def _grown_evidence(now: tuple[int, ...], past: tuple[int, ...]) -> OomEvidence:
    e = _evidence()
    e.batch_size, e.input_shape, e.past_input_shape = now[0], now, past
    # What the program held at its OOM and asked for: no more than the grown step needs.
    e.requested_bytes = GiB // 2
    return e


def _largest(need, sizes) -> int:
    """The truth: the largest of ``sizes`` whose need, with the allowance, fits the usable
    budget (the search's kept share), by trying every one."""
    return max((s for s in sizes if need(s) * ALLOWANCE <= _usable()), default=0)


def _measure_grown_image(model: torch.nn.Module, past: int, per_pixel: int,
                         repeat_share: float = 1.0):
    """A training step at batch 8 whose square image grew from ``past`` to 448 pixels, run
    out of memory at 448 and measured on the synthetic allocator charging FIXED and
    ``per_pixel`` bytes a pixel (a share of it with checkpointing). Returns the measurement,
    the evidence, the device and the need."""
    def need(shape, checkpointed):
        b, _, h, w = shape
        return int(FIXED + b * h * w * per_pixel * (CHECKPOINT_SHARE if checkpointed else 1))

    scene = _grown_scene(model, (torch.randn(8, 3, 448, 448),), past)
    e = _grown_evidence((8, 3, 448, 448), (8, 3, past, past))
    device = ShapeDevice(model, need, repeat_share)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    return m, e, device, need


def test_a_sequence_that_grew_is_capped_at_the_longest_length_that_ran_and_fit():
    model = Tokens()
    ids = torch.randint(0, 100, (GROWN_BATCH, FAILED_LENGTH))
    scene = _grown_scene(model, (ids, torch.ones_like(ids)), PAST_LENGTH)
    e = _grown_evidence((GROWN_BATCH, FAILED_LENGTH), (GROWN_BATCH, PAST_LENGTH))
    device = ShapeDevice(model, _sequence_need)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    cap = next(r for r in m.remedies if r.kind == "sequence_length")
    # The step: the common divisor of 1024 and 2048, halved down to 64.
    truth = _largest(lambda n: _sequence_need((GROWN_BATCH, n), False),
                     range(PAST_LENGTH, FAILED_LENGTH, 64))
    assert PAST_LENGTH < truth < FAILED_LENGTH
    assert cap.params == {"max_length": truth, "from_length": FAILED_LENGTH, "dim": 1,
                          "batch_size": GROWN_BATCH}
    # The answer ran: a probe at the whole batch and that length, mask cut with the ids.
    assert (GROWN_BATCH, truth) in device.shapes
    assert cap.need_bytes == int(_sequence_need((GROWN_BATCH, truth), False) * ALLOWANCE)
    # Ranked first and promised; what was measured at the failing length only is not.
    e.measured = m
    a = assess(e)
    assert a.advice[0].kind == "sequence_length" and a.advice[0].fits
    assert "2048" in a.advice[0].title and str(truth) in a.advice[0].title
    others = [x for x in a.advice[1:] if x.kind in ("activation_checkpointing", "batch_size")]
    assert others and all(not x.fits and x.params["covers_known_need"] for x in others)
    assert all("grew from step to step (dimension 1: 1024 -> 2048)" in x.params["input_grew"]
               for x in others)


class Convs(torch.nn.Module):
    """Three convolutions over a square image, out of memory above ``fail_above`` pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Conv2d(3, 3, 3, padding=1)
                                          for _ in range(3))
        self.fail_above: int | None = None
        self.seen: tuple[int, ...] = ()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = tuple(x.shape)
        if self.fail_above is not None and x.shape[-1] > self.fail_above:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        for block in self.blocks:
            x = block(x)
        return x.flatten(1)


def test_an_image_that_grew_is_capped_in_both_dimensions():
    m, e, device, need = _measure_grown_image(Convs(), 320, per_pixel=6144)
    cap = next(r for r in m.remedies if r.kind == "image_size")
    truth = _largest(lambda s: need((8, 3, s, s), False), range(320, 448, 64))
    assert truth == 384, "the synthetic step is meant to fit 384 and not 448"
    assert cap.params == {"max_size": [truth, truth], "from_size": [448, 448], "dims": [2, 3],
                          "batch_size": 8}
    assert (8, 3, truth, truth) in device.shapes
    e.measured = m
    first = assess(e).advice[0]
    assert first.kind == "image_size" and first.fits and "384×384" in first.title


def test_an_image_cap_is_run_twice_in_a_row_before_it_is_advised():
    # The GPU's vit_growth: capped at 320 (12.3 GiB measured once, of 14), its next step at
    # 320 ran out with 1.95 GiB cached in segments a live block held. Here two steps back to
    # back need 30 % more than one: 384 fits once, not twice; 320 fits twice.
    m, e, device, need = _measure_grown_image(Convs(), 320, per_pixel=6144, repeat_share=1.3)
    cap = next(r for r in m.remedies if r.kind == "image_size")
    assert need((8, 3, 384, 384), False) * ALLOWANCE <= _usable() < \
        need((8, 3, 384, 384), False) * 1.3 * ALLOWANCE
    assert cap.params["max_size"] == [320, 320] and cap.ran_where_advised, cap
    assert "2 steps back to back at 320" in cap.basis
    e.measured = m
    first = assess(e).advice[0]
    assert first.kind == "image_size" and first.fits and "320×320" in first.title


def test_an_image_cap_is_run_after_a_step_at_the_past_size(monkeypatch):
    # The GPU's vit_growth, again: its cap at 320 ran twice in a row in the emptied cache of
    # the measurement, and its program, which had run a 224-pixel step first, ran out at its
    # second 320 step. Here a window whose steps at the cap follow a smaller one needs 25 %
    # more (the segments the smaller step left): 384 fits after 384, not after 320.
    model = Convs()
    history: list[tuple[int, ...]] = []
    forward = model.forward

    def noting(x):
        history.append(tuple(x.shape))
        return forward(x)

    monkeypatch.setattr(model, "forward", noting)
    share = 1.25

    def need(shape, checkpointed):
        b, _, h, w = shape
        return int(FIXED + b * h * w * 6144 * (CHECKPOINT_SHARE if checkpointed else 1))

    class PastDevice(ShapeDevice):
        def window(self, call):
            measure = super().window(call)

            def measured(size):
                history.clear()
                probe, final = measure(size)
                if any(shape[-1] < model.seen[-1] for shape in history):
                    if need(model.seen, False) * share * ALLOWANCE > CAP:
                        raise _measure.ProbeOutOfMemory(size)
                return probe, final
            return measured

    scene = _grown_scene(model, (torch.randn(8, 3, 448, 448),), 320)
    e = _grown_evidence((8, 3, 448, 448), (8, 3, 320, 320))
    device = PastDevice(model, need)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    cap = next(r for r in m.remedies if r.kind == "image_size")
    # The truth: the largest of the cap's sizes that runs after a step at 320.
    truth = max(s for s in range(320, 448, 64)
                if s == 320 or need((8, 3, s, s), False) * share * ALLOWANCE <= CAP)
    assert need((8, 3, 384, 384), False) * ALLOWANCE <= _usable()  # 384 fits alone
    assert truth == 320 and cap.params["max_size"] == [truth, truth], cap
    assert "after one at 320" in cap.basis


def test_steps_back_to_back_meet_the_optimizers_temporaries_while_the_gradients_live(
        monkeypatch):
    # The GPU's vit_growth ran its capped image twice in a row, in the program's AdamW loop:
    # between them, the optimizer's step allocated a parameter-sized temporary for each
    # parameter while the gradients lived, and the cache the second step met had held them.
    # The measurement's steps back to back do the same; a single step adds them by arithmetic.
    model = Convs()
    scene = _grown_scene(model, (torch.randn(8, 3, 448, 448),), 320, torch.optim.AdamW)
    e = _grown_evidence((8, 3, 448, 448), (8, 3, 320, 320))
    params = {id(p): p for p in model.parameters()}
    made: list[tuple[int, bool]] = []  # (repeat of the window, all gradients alive)
    real = torch.empty_like
    device = ShapeDevice(model, lambda shape, ckpt: int(FIXED + shape[0] * shape[2] * shape[3]
                                                        * 6144 * (CHECKPOINT_SHARE if ckpt else 1)))

    def empty_like(t, *args, **kwargs):
        if id(t) in params:
            made.append((device.repeat_now, all(p.grad is not None for p in params.values())))
        return real(t, *args, **kwargs)

    window = device.window

    def window_noting_repeat(call):
        measure = window(call)

        def noted(size):
            device.repeat_now = call.repeat
            return measure(size)
        return noted

    device.window = window_noting_repeat
    monkeypatch.setattr(torch, "empty_like", empty_like)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    assert any("2 steps back to back" in r.basis for r in m.remedies), m.remedies
    # One temporary a parameter (AdamW's square roots) after each backward of the past size's
    # step and the two at the cap, every gradient alive then; none in a window of one step.
    assert made and {r for r, _ in made} == {2} and all(alive for _, alive in made)
    assert len(made) % (3 * len(params)) == 0


def test_a_vit_whose_image_grew_is_capped_at_a_multiple_of_its_patch():
    # The GPU's vit_growth (timm's ViT-B/16 with a dynamic image size, 224 then 448 at batch
    # 48): the cap's sizes were multiples of 56, and the first, 280, is no multiple of the
    # 16-pixel patch: timm refused it, and no cap was measured.
    class Patches(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Conv2d(3, 4, kernel_size=16, stride=16)
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))
            self.fail_above: int | None = None
            self.seen: tuple[int, ...] = ()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            assert x.shape[-1] % 16 == 0, f"Input width ({x.shape[-1]}) should be divisible by 16"
            self.seen = tuple(x.shape)
            if self.fail_above is not None and x.shape[-1] > self.fail_above:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            x = self.embed(x).flatten(2).transpose(1, 2)
            for block in self.blocks:
                x = block(x)
            return x.mean(1)

    assert _measure.patch_size(Patches()) == 16
    m, _, _, need = _measure_grown_image(Patches(), 224, per_pixel=8192)
    assert not m.notes, m.notes
    cap = next(r for r in m.remedies if r.kind == "image_size")
    truth = _largest(lambda s: need((8, 3, s, s), False), range(224, 448, 32))
    assert 224 < truth < 448
    assert cap.params["max_size"] == [truth, truth]


def test_no_cap_when_the_input_did_not_grow():
    model = Tokens()
    ids = torch.randint(0, 100, (GROWN_BATCH, FAILED_LENGTH))
    scene = _grown_scene(model, (ids, torch.ones_like(ids)), PAST_LENGTH)
    # The past step at this batch had the same length: the batch is what to cut.
    e = _grown_evidence((GROWN_BATCH, FAILED_LENGTH), (GROWN_BATCH, FAILED_LENGTH))
    m = _measure.measure(scene, e, device=ShapeDevice(model, _sequence_need))
    assert not isinstance(m, str)
    assert "sequence_length" not in {r.kind for r in m.remedies}
    e.measured = m
    assert all("input_grew" not in x.params for x in assess(e).advice)


def _first_step_of_tokens(longest: int, repeat_share: float = 1.0):
    """A first training step of token ids at FAILED_LENGTH, batch GROWN_BATCH, run out of
    memory, for a model that takes ``longest`` positions; measured on the synthetic
    allocator. Returns the model, the measurement, the evidence and the device."""
    import types

    model = Tokens()
    ids = torch.randint(0, 100, (GROWN_BATCH, FAILED_LENGTH))
    scene = _grown_scene(model, (ids, torch.ones_like(ids)), PAST_LENGTH)
    e = _evidence()
    e.batch_size, e.requested_bytes = GROWN_BATCH, GiB // 2
    e.training = True
    model.config = types.SimpleNamespace(max_position_embeddings=longest)
    device = ShapeDevice(model, _sequence_need, repeat_share)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    return model, scene, m, e, device


def test_a_first_steps_tokens_shorter_than_the_models_positions_promise_the_longests_batch():
    # The GPU's gpt2_seq_growth: a length curriculum ran out at its first step (128 of
    # GPT-2's 1024 positions); checkpointing and a smaller batch, measured to fit at 128,
    # ran out at the longer steps after it. No earlier step says whether lengths change:
    # what is promised is the batch measured at the model's longest input.
    longest = 2 * FAILED_LENGTH
    model, scene, m, e, device = _first_step_of_tokens(longest)
    assert (m.length, m.max_length) == (FAILED_LENGTH, longest)
    e.measured = m
    advice = assess(e).advice
    truth = _largest(lambda b: _sequence_need((b, longest), False), range(1, GROWN_BATCH))
    assert 2 < truth < GROWN_BATCH
    first = advice[0]
    assert (first.kind, first.fits) == ("batch_size", True), [(a.kind, a.fits) for a in advice]
    assert first.params["batch_size"] == truth and first.params["at_length"] == longest
    assert f"{longest} tokens" in first.title and str(truth) in first.title
    # It ran there, ids and mask repeated to the longest length, twice in a row.
    assert (truth, longest) in device.shapes
    assert "2 steps back to back" in first.detail
    # What was measured at the failing length only is ranked after it, and not promised.
    measured = [a for a in advice[1:] if a.kind in ("activation_checkpointing", "batch_size")]
    assert {a.kind for a in measured} == {"activation_checkpointing", "batch_size"}, advice
    assert not any(a.fits for a in advice[1:]), [(a.kind, a.fits) for a in advice]
    assert all(f"its {FAILED_LENGTH} tokens are fewer than the model's {longest} "
               "positions" in a.params["input_grew"] for a in measured)
    # At the model's full length, or after steps of the same shape, they are promises.
    model.config.max_position_embeddings = FAILED_LENGTH
    e.measured = _measure.measure(scene, e, device=ShapeDevice(model, _sequence_need))
    assert not any("at_length" in r.params for r in e.measured.remedies)
    assert all(a.fits for a in assess(e).advice if a.kind in ("activation_checkpointing",
                                                              "batch_size"))
    e.measured = m
    e.steps = [StepPoint(1, 2 * GiB, GiB, batch_size=GROWN_BATCH)]
    assert any(a.fits for a in assess(e).advice if a.kind == "activation_checkpointing")


def test_the_longests_batch_is_one_that_ran_twice_in_a_row():
    # Two steps back to back need a fifth more than one (the cache the first leaves): the
    # batch the slices' line gives at the longest length runs once, not twice; a smaller one
    # that ran twice is what is promised.
    longest, share = 2 * FAILED_LENGTH, 1.2
    _, _, m, e, device = _first_step_of_tokens(longest, repeat_share=share)
    once = _largest(lambda b: _sequence_need((b, longest), False), range(1, GROWN_BATCH))
    e.measured = m
    first = assess(e).advice[0]
    assert (first.kind, first.fits) == ("batch_size", True)
    batch = first.params["batch_size"]
    assert batch < once
    assert _sequence_need((batch, longest), False) * share * ALLOWANCE <= _usable()
    assert (batch, longest) in device.shapes and "2 steps back to back" in first.detail


@pytest.mark.parametrize("how", ["keywords", "generation_config"])
def test_generate_gets_the_most_new_tokens_that_ran_and_fit_at_its_batch(how):
    from vramscope.attribution.model_probe import frames_of_traceback

    model = _hf_gpt2().eval()
    hook = _Armed()
    model.transformer.h[2].register_forward_pre_hook(hook)
    prompt, new = 4, 48
    ids = torch.randint(1, 100, (BATCH, prompt))
    try:
        with torch.no_grad():
            if how == "keywords":
                model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                               pad_token_id=0)
            else:
                from transformers import GenerationConfig

                model.generate(ids, generation_config=GenerationConfig(
                    max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0))
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    hook.armed = False
    real = model.generate
    per_token = 2 << 20

    def need(batch: int, length: int) -> int:
        # The KV cache and the logits of each sequence, token by token.
        return FIXED + batch * length * per_token

    class TokenDevice(SyntheticDevice):
        def window(self, call):
            def measure(size: int):
                call(size)
                peak = need(*self.seen)
                self.sizes.append(self.seen)
                if peak * ALLOWANCE > CAP:
                    raise _measure.ProbeOutOfMemory(size)
                return Probe(size, peak, peak, peak_pinned_bytes=int(peak * ALLOWANCE)), FIXED
            return measure

    device = TokenDevice(amp_share=1.0)

    def generate(*args, **kwargs):
        out = real(*args, **kwargs)
        device.seen = tuple(out.shape)
        return out

    model.generate = generate
    m = _measure.measure(scene, _evidence(), device=device)
    assert not isinstance(m, str), m
    cap = next(r for r in m.remedies if r.kind == "max_new_tokens")
    # Steps of one token below 64; the answer is the most that fit, by trying each.
    truth = _largest(lambda n: need(BATCH, prompt + n), range(1, new))
    assert 0 < truth < new
    assert cap.params == {"max_new_tokens": truth, "from_max_new_tokens": new,
                          "batch_size": BATCH}
    assert (BATCH, prompt + truth) in device.sizes
    e = _evidence()
    e.generating, e.measured = True, m
    a = assess(e)
    # A smaller batch changes the output least: it comes first, fewer tokens after it.
    kinds = [x.kind for x in a.advice]
    assert kinds[0] == "batch_size" and kinds.index("batch_size") < kinds.index("max_new_tokens")
    assert all(x.fits for x in a.advice if x.kind in ("batch_size", "max_new_tokens"))


def test_after_the_batch_grew_only_the_batch_that_fits_is_promised():
    from vramscope._core.step_history import StepPoint

    model = Blocks()
    scene = _oom_scene(model)
    e = _evidence()
    e.batch_size = BATCH
    # Past steps ran 32 and 64; the failing one had 128: a later batch may be larger still.
    e.steps = [StepPoint(1, FIXED + 32 * PER_SAMPLE, FIXED, 32),
               StepPoint(2, FIXED + 64 * PER_SAMPLE, FIXED, 64)]
    device = SyntheticDevice(amp_share=0.6)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str)
    e.measured = m
    a = assess(e)
    assert a.advice[0].kind == "batch_size" and a.advice[0].fits
    assert a.advice[0].params["batch_grew"]
    rest = [x for x in a.advice[1:]]
    assert {x.kind for x in rest} >= {"activation_checkpointing", "mixed_precision"}
    assert all(not x.fits and x.params["covers_known_need"] for x in rest)
    assert all("the batch grew from step to step (64 -> 128)" in x.detail for x in rest)


def test_checkpointing_is_named_from_the_model_the_program_holds():
    """A LightningModule-like wrapper whose step calls its network (never its own forward):
    the forward running at the OOM is the network's, but the advice names the blocks from the
    wrapper, as the model probe's block lists do and as the user applies it."""
    from vramscope.attribution.model_probe import block_lists, frames_of_traceback

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = Blocks()

        def training_step(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x).logsumexp(-1).mean()

    wrapper = Wrapper()
    wrapper.net.fail_above = 64
    try:
        wrapper.training_step(torch.randn(BATCH, 16)).backward()
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    wrapper.net.fail_above = None
    assert scene.model is wrapper.net
    scene.grad_enabled = True
    e = _evidence()
    e.block_lists = block_lists(wrapper)
    m = _measure.measure(scene, e, device=SyntheticDevice(amp_share=0.6))
    assert not isinstance(m, str), m
    remedy = next(r for r in m.remedies if r.kind == "activation_checkpointing")
    assert remedy.params["modules"] == "net.blocks"
    # As the advice says: wrapper.get_submodule(modules) is the list that was measured.
    assert wrapper.get_submodule(remedy.params["modules"]) is wrapper.net.blocks


class _Boom(torch.autograd.Function):
    """Identity forward; its backward runs out of memory (an OOM in backward)."""

    armed = True

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if _Boom.armed:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return grad


def test_a_lightning_backward_oom_runs_training_step_again_with_its_batch():
    """After a LightningModule's forward returned, no forward is on the stack: its batch is
    found in the loop's frames and run through training_step (the module has no forward of
    its own, and logs), as its step did."""
    L = pytest.importorskip("lightning")
    from vramscope.attribution.model_probe import block_lists, frames_of_traceback

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)])
            self.steps = []

        def training_step(self, batch, batch_idx):
            x, y = batch
            self.steps.append(x.shape[0])
            loss = torch.nn.functional.mse_loss(_Boom.apply(self.net(x)), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())

    module = Classifier()
    data = torch.utils.data.TensorDataset(torch.randn(2 * BATCH, 16), torch.randn(2 * BATCH, 16))
    trainer = L.Trainer(accelerator="cpu", max_steps=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    _Boom.armed = True
    try:
        trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=BATCH))
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    finally:
        _Boom.armed = False
    assert scene.model is module and isinstance(scene.optimizer, torch.optim.AdamW)
    assert scene.inputs[0].training_step and scene.inputs[0].batch_size == BATCH
    scene.grad_enabled = True
    e = _evidence()
    e.block_lists = block_lists(module)
    module.steps.clear()
    m = _measure.measure(scene, e, device=_HostDevice("net"))
    assert not isinstance(m, str), m
    # training_step ran at the slices (its log a no-op there), then log is the module's again.
    assert module.steps and max(module.steps) <= BATCH and "log" not in vars(module)
    remedy = next(r for r in m.remedies if r.kind == "activation_checkpointing")
    assert remedy.params["modules"] == "net"


def test_a_model_that_cannot_run_one_sample_is_measured_from_two():
    class Normed(Blocks):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.BatchNorm1d(32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.fail_above is not None and x.shape[0] > self.fail_above:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return self.head(self.norm(self.stem(x)))

    model = Normed()
    scene = _oom_scene(model)
    scene.grad_enabled = True
    device = SyntheticDevice(amp_share=0.6)
    m = _measure.measure(scene, _evidence(), device=device)
    assert not isinstance(m, str), m
    assert min(s for s, _, _ in device.sizes) == 2
    truth_batch = math.floor((_usable() / ALLOWANCE - FIXED) / PER_SAMPLE)
    batch = next(r for r in m.remedies if r.kind == "batch_size")
    assert 0.95 * truth_batch <= batch.params["batch_size"] <= truth_batch


def test_a_step_that_runs_out_even_at_one_sample_says_so():
    # Parameters and gradients alone over the budget: no slice runs, and the note says why,
    # not that no input was found.
    model = Blocks()
    scene = _oom_scene(model)
    scene.grad_enabled = True
    model.fail_above = 0
    note = _measure.measure(scene, _evidence(), device=SyntheticDevice(amp_share=0.6))
    assert isinstance(note, str) and note.startswith(
        "even the smallest slice of the batch ran out of memory"), note


def _inference_scene(model: Blocks, grad: bool) -> _scene.OomScene:
    """The scene of an inference loop (autograd off unless ``grad``) whose model ran out in its
    forward at BATCH, captured from the traceback."""
    from vramscope.attribution.model_probe import frames_of_traceback

    model.fail_above = 64
    predictions = []
    try:
        with torch.set_grad_enabled(grad):
            for _ in range(2):
                predictions.append(model(torch.randn(BATCH, 16)).argmax(-1))
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    model.fail_above = None
    scene.grad_enabled = grad
    return scene


def test_an_inference_oom_gets_the_batch_that_fits_first_and_promises_only_it():
    """Under no_grad with no earlier step to compare with (an evaluation loop whose batch
    may grow), the batch that fits caps every later call and changes no result: first, and
    the only promise; autocast fits this call but not, say, a twice larger next one."""
    from vramscope._core.step_history import StepPoint

    def inference_evidence(steps):
        scene = _inference_scene(Blocks().eval(), grad=False)
        e = _evidence()
        e.grad_enabled, e.batch_size, e.steps = False, BATCH, steps
        m = _measure.measure(scene, e, device=SyntheticDevice(amp_share=0.6))
        assert not isinstance(m, str), m
        e.measured = m
        return assess(e).advice

    advice = inference_evidence([])
    assert advice[0].kind == "batch_size" and advice[0].fits
    amp = next(x for x in advice if x.kind == "mixed_precision")
    assert not amp.fits and amp.params["covers_known_need"]
    assert "inference loop's later batches may be larger" in amp.params["input_grew"]
    # A past step at this very batch: nothing grew, autocast is promised as measured.
    advice = inference_evidence([StepPoint(1, FIXED, FIXED, BATCH)])
    assert advice[0].kind == "batch_size"
    assert next(x for x in advice if x.kind == "mixed_precision").fits


class Recording(Blocks):
    """Blocks that record, at each forward, whether autograd was on, and count backwards."""

    def __init__(self) -> None:
        super().__init__()
        self.grad_on: list[bool] = []
        self.backwards = 0
        self.head.weight.register_hook(self._backward)

    def _backward(self, grad):
        self.backwards += 1
        return grad

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.grad_on.append(torch.is_grad_enabled())
        return super().forward(x)


#: What a forward without autograd keeps of one with it, per sample (one layer's activations
#: at a time instead of all of them).
NO_GRAD_SHARE = 0.25


class GradDevice(SyntheticDevice):
    """The synthetic step, its per-sample bytes those of a forward with autograd on or off, as
    the model saw it in the window just run (the last forward's record)."""

    def window(self, call):
        def measure(size: int):
            call(size)
            grad = call.scene.model.grad_on[-1]
            self.sizes.append((size, grad, False))
            peak = int(FIXED + size * PER_SAMPLE * (1.0 if grad else NO_GRAD_SHARE))
            return Probe(size, peak, int(peak * 1.2),
                         peak_pinned_bytes=int(peak * ALLOWANCE)), FIXED
        return measure


def test_an_inference_loop_that_forgot_no_grad_is_measured_forward_only_and_told_no_grad():
    # model.eval(), no optimizer, autograd on: the program never runs a backward, so the step
    # is run again forward only, and the same with autograd off is the remedy.
    model = Recording().eval()
    scene = _inference_scene(model, grad=True)
    e = _evidence()
    e.grad_enabled, e.batch_size, e.training = True, BATCH, False
    device = GradDevice(amp_share=1.0)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    assert model.backwards == 0, "the step was run again with a backward the program never ran"
    # Needs: the synthetic peaks times the allowance (a line through exact points
    # extrapolates exactly).
    assert m.need_bytes == pytest.approx((FIXED + BATCH * PER_SAMPLE) * ALLOWANCE, rel=1e-6)
    no_grad = next(r for r in m.remedies if r.kind == "no_grad")
    assert no_grad.need_bytes == pytest.approx(
        (FIXED + BATCH * PER_SAMPLE * NO_GRAD_SHARE) * ALLOWANCE, rel=1e-6)
    assert not any(r.kind == "activation_checkpointing" for r in m.remedies)
    e.measured = m
    first = assess(e).advice[0]
    assert first.kind == "no_grad" and "torch.no_grad()" in first.title
    # The same model with gradients on its parameters (a backward ran before): no such advice.
    model.head.bias.grad = torch.zeros_like(model.head.bias)
    m = _measure.measure(scene, e, device=GradDevice(amp_share=1.0))
    assert not isinstance(m, str) and not any(r.kind == "no_grad" for r in m.remedies)
    model.head.bias.grad = None
    # The same model running out in a backward (input gradients of an evaluated model): the
    # program runs one, so the step is run again with it, and no_grad is no remedy.
    e.phase = "backward"
    m = _measure.measure(scene, e, device=GradDevice(amp_share=1.0))
    assert not isinstance(m, str) and model.backwards > 0
    assert not any(r.kind == "no_grad" for r in m.remedies)
    e.phase, model.backwards = "", 0
    # The same loop training (an optimizer): no such advice, a backward is run again.
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scene.optimizer = optimizer
    m = _measure.measure(scene, e, device=GradDevice(amp_share=1.0))
    assert not isinstance(m, str) and model.backwards > 0
    assert not any(r.kind == "no_grad" for r in m.remedies)


def test_a_t5_whose_source_grew_runs_out_in_backward_and_gets_its_length_capped():
    """An encoder-decoder trained on a dict batch (input_ids and their mask grow, labels stay),
    out of memory in its backward: the batch is found beside the model, and the cap's search
    cuts the ids and the mask, never the labels."""
    transformers = pytest.importorskip("transformers")
    from vramscope.attribution.model_probe import frames_of_traceback

    config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2,
                                   num_heads=2, decoder_start_token_id=0, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config)
    opt = torch.optim.AdamW(model.parameters())
    seen: list[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
    model.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append((tuple(kwargs["input_ids"].shape),
                                             tuple(kwargs["attention_mask"].shape),
                                             tuple(kwargs["labels"].shape))), with_kwargs=True)
    boom = model.lm_head.register_forward_hook(lambda m, i, out: _Boom.apply(out))
    past, now, batch = 80, 128, 8

    def train(step_batch: dict) -> None:
        loss = model(**step_batch).loss
        loss.backward()
        opt.step()

    ids = torch.randint(1, 64, (batch, now))
    step_batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                  "labels": torch.randint(1, 64, (batch, 16))}
    _Boom.armed = True
    try:
        train(step_batch)
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    finally:
        _Boom.armed = False
        boom.remove()
    assert scene.model is model and scene.inputs[0].kwargs.keys() == step_batch.keys()
    scene.grad_enabled = True
    per_token = 10 << 20

    def need(length: int) -> int:
        return FIXED + batch * length * per_token

    class LengthDevice(SyntheticDevice):
        def window(self, call):
            def measure(size: int):
                seen.clear()
                call(size)
                (b, length), mask, labels = seen[-1][0], seen[-1][1], seen[-1][2]
                assert mask == (b, length) and labels == (b, 16)
                peak = FIXED + b * length * per_token
                if peak * ALLOWANCE > CAP:
                    raise _measure.ProbeOutOfMemory(size)
                return Probe(size, peak, peak, peak_pinned_bytes=int(peak * ALLOWANCE)), FIXED
            return measure

    e = _grown_evidence((batch, now), (batch, past))
    m = _measure.measure(scene, e, device=LengthDevice(amp_share=1.0))
    assert not isinstance(m, str), m
    assert [r.kind for r in m.remedies if r.kind == "sequence_length"], m.notes
    cap = next(r for r in m.remedies if r.kind == "sequence_length")
    # Multiples of 16 (the common divisor of 80 and 128); the truth by trying each.
    assert cap.params["max_length"] == _largest(need, range(past, now, 16)) == 96
    assert cap.params["from_length"] == now and cap.params["dim"] == 1


def test_a_remedy_the_model_cannot_run_is_a_note_and_the_rest_is_measured():
    """Blocks that refuse to run under torch.utils.checkpoint (the T5 decoder's cache did,
    before transformers' own switch was used): checkpointing is not advised, one note says
    why, and the batch and the other remedies are still measured."""

    class Stubborn(torch.nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if "forward" in vars(self):
                raise RuntimeError("this block cannot be recomputed\nsecond line")
            return super().forward(x)

    model = Blocks()
    model.blocks = torch.nn.ModuleList(Stubborn(32, 32) for _ in range(6))
    scene = _oom_scene(model)
    scene.grad_enabled = True
    m = _measure.measure(scene, _evidence(), device=SyntheticDevice(amp_share=0.6))
    assert not isinstance(m, str), m
    kinds = {r.kind for r in m.remedies}
    assert "activation_checkpointing" not in kinds and {"batch_size", "mixed_precision"} <= kinds
    assert ("activation checkpointing on blocks: the step did not run with it (RuntimeError: "
            "this block cannot be recomputed)") in m.notes
    assert all("forward" not in vars(b) for b in model.blocks)


def test_a_frameworks_optimizer_wrapper_is_judged_by_the_optimizer_inside():
    """accelerate and Lightning hand the step a wrapper that keeps the optimizer as
    ``.optimizer``: its class, not the wrapper's, says what its state and its step are."""
    pytest.importorskip("lightning")
    from lightning.pytorch.core.optimizer import LightningOptimizer

    model = Blocks()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    wrapped = LightningOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    step = _measure.optimizer_step(wrapped, model, False)
    # SGD with momentum: one state per parameter, no foreach temporaries without decay.
    assert (step.name, step.state_full_bytes, step.temporary_bytes) == ("SGD", params, 0)
    light, advice = step.lighter(False)
    assert advice == {"optimizer": "SGD", "from_optimizer": "SGD", "state_bytes": params}
    assert light.state_full_bytes == 0


def _how(advice) -> str:
    """The code an advice's detail says to run ("How: <code>.")."""
    assert ". How: " in advice.detail, advice.detail
    return advice.detail.split(". How: ", 1)[1].removesuffix(".")


def test_the_advices_code_applies_the_remedy_that_was_measured():
    """Run as written against the model, each advice's code does what was measured: the
    blocks wrapped in checkpoint, transformers' switch on, the lighter optimizer built."""
    model = Blocks()
    scene = _oom_scene(model, torch.optim.AdamW)
    scene.grad_enabled = True
    e = _evidence()
    e.measured = _measure.measure(scene, e, device=SyntheticDevice(amp_share=0.6))
    by_kind = {a.kind: a for a in assess(e).advice}
    exec(_how(by_kind["activation_checkpointing"]),  # noqa: S102 -- the advice's own code
         {"model": model, "functools": functools, "torch": torch})
    assert all("forward" in vars(b) for b in model.blocks)
    model(torch.randn(4, 16)).sum().backward()  # and the model still runs with it
    # (The model's state is too small to matter here: the lighter optimizer is measured, and
    # its code is what the advice would say.)
    from vramscope.postmortem.remedies import _measured_text

    lighter = next(r for r in e.measured.remedies if r.kind == "optimizer_state")
    _, how = _measured_text("optimizer_state", lighter.params)
    optimizer = eval(how, {"model": model, "torch": torch})  # noqa: S307 -- the advice's code
    assert type(optimizer).__name__ == lighter.params["optimizer"] == "Adafactor"

    gpt2 = _hf_gpt2()
    hook = _Armed()
    gpt2.transformer.h[1].register_forward_pre_hook(hook)
    ids = torch.randint(0, 100, (BATCH, 16))
    try:
        gpt2(input_ids=ids, labels=ids).loss.backward()
    except torch.OutOfMemoryError as exc:
        from vramscope.attribution.model_probe import frames_of_traceback

        hf_scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    hook.armed = False
    hf_scene.grad_enabled = True
    e = _evidence()
    e.measured = _measure.measure(hf_scene, e, device=_HostDevice("transformer.h"))
    advice = next(a for a in assess(e).advice if a.kind == "activation_checkpointing")
    exec(_how(advice), {"model": gpt2})  # noqa: S102 -- the advice's own code
    assert _measure.hf_switch(gpt2).on(gpt2)


class PeakDevice(SyntheticDevice):
    """Windows whose peak is ``peak(size)`` after really running the slice, ``resident`` bytes
    allocated at their end, out of memory above ``cap``."""

    def __init__(self, peak, cap: int, resident: int) -> None:
        super().__init__(amp_share=1.0)
        self.peak, self.cap, self.resident = peak, cap, resident

    def window(self, call):
        def measure(size: int):
            call(size)
            self.sizes.append((size, False, False))
            peak = self.peak(size)
            if peak > self.cap:
                raise _measure.ProbeOutOfMemory(size)
            return Probe(size, peak, peak, peak_pinned_bytes=peak,
                         resident_bytes=self.resident), self.resident
        return measure


def test_slices_past_the_gradients_flat_measure_what_grows():
    # The pytest plugin's OOM on an H100: 8 Linear(4096) layers at batch 8192 under 2 GiB,
    # SGD. Up to about a thousand samples a slice peaks at the backward's end (parameters,
    # their gradients, the input: 1.125 GiB), past it on the activations (176 KiB a sample).
    # Six slices, each no more than the last grown in proportion, stayed on that flat; their
    # line measured 1.5 GiB at 8192 where the program held 1.9 GiB and asked for more.
    batch, params, x = 8192, 512 * MiB, 128 * MiB

    def peak(size: int) -> int:
        return max(2 * params + x, params + x + 300 * MiB + size * 176 * 1024)

    scene = _oom_scene(Blocks(), batch=batch)
    scene.grad_enabled = True
    e = _evidence()
    e.limit_bytes = e.reserved_bytes = e.allocated_bytes = 2 * GiB
    device = PeakDevice(peak, CAP, params + x)
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    sizes = [s for s, _, _ in device.sizes]
    # Past the flat: the line runs through slices on the activations' peak, and holds the need.
    assert sum(peak(s) > 2 * params + x for s in set(sizes)) >= 2, sizes
    assert m.need_bytes >= peak(batch), (m.need_bytes, peak(batch), sizes)


def test_when_not_one_sample_fits_with_adams_state_the_lighter_optimizer_is_measured():
    """A first step whose optimizer state fills the budget: not even a slice of one sample
    fits with AdamW's step, so the search stops at once. The step's need still comes from the
    slices' own line with AdamW's step added at the failing batch (not a line through steps
    that the optimizer dominates, flat at small sizes), and Adafactor is measured to fit."""
    fixed, per_sample = 10_000, 400

    class SmallDevice(SyntheticDevice):
        def window(self, call):
            def measure(size: int):
                call(size)
                peak = fixed + size * per_sample
                self.sizes.append((size, False, False))
                return Probe(size, peak, peak, peak_pinned_bytes=peak), fixed
            return measure

    model = Blocks()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    scene = _oom_scene(model, torch.optim.AdamW)
    scene.grad_enabled = True
    cap = 100_000
    e = OomEvidence(device=0, requested_bytes=50_000, device_total_bytes=80 * GiB,
                    device_free_bytes=60 * GiB, allocated_bytes=90_000, reserved_bytes=90_000,
                    limit_bytes=cap)
    m = _measure.measure(scene, e, device=SmallDevice(amp_share=1.0))
    assert not isinstance(m, str), m

    def truth(state: int, temporaries: int) -> int:
        # The step at BATCH: its forward with the whole state, or the optimizer's step over
        # what stays allocated, the gradients, the state and its temporaries.
        return max(fixed + BATCH * per_sample + state, fixed + params + state + temporaries)

    assert m.need_bytes == truth(2 * params, params)  # AdamW: two states, foreach temporaries
    kinds = {r.kind: r for r in m.remedies}
    assert "batch_size" not in kinds  # not even one sample fits with AdamW
    adafactor = kinds["optimizer_state"]
    assert adafactor.params["optimizer"] == "Adafactor"
    assert adafactor.need_bytes == truth(int(params * 0.02), 0) < cap * (1 - MEASURED_MARGIN)
    e.measured = m
    a = assess(e)
    assert a.advice[0].kind == "optimizer_state" and a.advice[0].fits
    # A smaller batch is not advised, and the report says why.
    assert "batch_size" not in [x.kind for x in a.advice]
    [(_, why)] = [n for n in a.not_advised if n[0] == "batch_size"]
    assert why.startswith(f"measured: no batch below {BATCH} was found to fit")


class Detector(torch.nn.Module):
    """A detection-like model: a list of images (C, H, W) of any size and a list of targets
    in, a dict of losses out (as torchvision's detectors in training)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Conv2d(3, 3, 3, padding=1) for _ in range(3))
        self.box = torch.nn.Linear(3, 4)
        self.fail_above: int | None = None
        self.seen: list[int] = []
        self.box_grads = 0
        self.box.weight.register_hook(lambda g: setattr(self, "box_grads", self.box_grads + 1))

    def forward(self, images: list, targets: list) -> dict:
        assert len(images) == len(targets)
        self.seen.append(len(images))
        if self.fail_above is not None and len(images) > self.fail_above:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        feats = []
        for image in images:
            x = image.unsqueeze(0)
            for block in self.blocks:
                x = block(x)
            feats.append(x.mean((2, 3)))
        pooled = torch.cat(feats)
        return {"loss_classifier": pooled.square().mean(),
                "loss_box_reg": self.box(pooled).abs().mean()}


def test_a_list_of_images_is_the_batch_when_a_tensors_leading_dimension_is_not():
    """Images (3, H, W) in a list: their leading 3 is channels. Cut as a batch of 3, the step
    runs at 1 by broadcasting and fails at 2; the list's length is the batch, and every loss
    of the dict runs backward."""
    from vramscope.attribution.model_probe import frames_of_traceback

    model = Detector()
    images = [torch.rand(3, 24 + 8 * (i % 3), 24) for i in range(BATCH)]
    targets = [{"labels": torch.tensor([1])} for _ in range(BATCH)]
    model.fail_above = 64
    try:
        sum(model(images, targets).values()).backward()
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False)
    model.fail_above = None
    assert [(i.batch_size, i.list_batch) for i in scene.inputs] == [(3, False), (BATCH, True)]
    scene.grad_enabled = True
    model.seen.clear()
    device = SyntheticDevice(amp_share=0.6)
    # What the model probe kept is one image's shape: the last step's first image was smaller,
    # which says nothing of what grew (each sample has its own size).
    e = _grown_evidence((3, 40, 24), (3, 24, 24))
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    assert m.size == BATCH
    assert max(model.seen) <= BATCH and len(set(model.seen)) > 2  # lists cut to the slices
    assert model.box_grads > 0  # the box loss ran backward too
    truth_batch = math.floor((_usable() / ALLOWANCE - FIXED) / PER_SAMPLE)
    batch = next(r for r in m.remedies if r.kind == "batch_size")
    assert 0.95 * truth_batch <= batch.params["batch_size"] <= truth_batch
    assert "image_size" not in {r.kind for r in m.remedies}
    e.measured = m
    assert all("input_grew" not in a.params for a in assess(e).advice)


def test_a_slice_that_fails_for_another_reason_than_memory_is_a_note():
    class Picky(Blocks):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if 2 < x.shape[0] < BATCH:
                raise ValueError("this model takes 1, 2 or 128 samples")
            return super().forward(x)

    model = Picky()
    scene = _oom_scene(model)
    scene.grad_enabled = True
    m = _measure.measure(scene, _evidence(), device=SyntheticDevice(amp_share=0.6))
    assert isinstance(m, str) and "ValueError: this model takes 1, 2 or 128 samples" in m


def test_an_oom_in_a_loss_module_after_the_forward_measures_the_model_from_the_loops_locals():
    from vramscope.attribution.model_probe import frames_of_traceback

    model = Blocks()
    criterion = torch.nn.CrossEntropyLoss()
    armed = _Armed()
    criterion.register_forward_pre_hook(armed)  # the OOM comes in the loss, not the model
    models = {"net": model}  # the script's global: not a local of train()

    def train(x: torch.Tensor, y: torch.Tensor) -> None:
        criterion(models["net"](x), y).backward()

    try:
        train(torch.randn(BATCH, 16), torch.randint(0, 10, (BATCH,)))
    except torch.OutOfMemoryError as exc:
        scene = _scene.capture(frames_of_traceback(exc.__traceback__), at_oom=False,
                               model=model)
    armed.armed = False
    # A module without parameters is not the model; the input is train()'s x.
    assert scene is not None and scene.model is model
    assert scene.inputs[0].batch_size == BATCH and "the local x of train()" in \
        scene.inputs[0].source
    scene.grad_enabled = True
    m = _measure.measure(scene, _evidence(), device=SyntheticDevice(amp_share=0.6))
    assert not isinstance(m, str), m
    assert m.size == BATCH and not m.lower_bound


def test_a_program_that_held_more_at_its_oom_than_the_step_needs_makes_it_a_lower_bound():
    # The synthetic step at BATCH needs FIXED + BATCH * PER_SAMPLE (13.8 GiB); a program that
    # held 13 GiB at its OOM and asked for 2 GiB more does more in its step (its own loss)
    # than the measurement ran: no remedy is promised.
    e = _evidence()
    e.allocated_bytes, e.reserved_bytes = 13 * GiB, 13 * GiB
    e.limit_bytes = e.device_total_bytes = 80 * GiB
    device = SyntheticDevice(amp_share=0.6)
    m = _measure.measure(_with_grad(_oom_scene(Blocks())), e, device=device)
    assert not isinstance(m, str), m
    assert "at its OOM the program held 13.0 GiB and asked for 2.0 GiB more" in m.lower_bound
    e.measured = m
    a = assess(e)
    assert a.projection_is_lower_bound and not any(x.fits for x in a.advice)
    # Held no more than the step needs: the measurement is the need.
    e.allocated_bytes = 11 * GiB
    e.measured = _measure.measure(_with_grad(_oom_scene(Blocks())), e, device=device)
    assert not e.measured.lower_bound and not assess(e).projection_is_lower_bound


def _with_grad(scene: _scene.OomScene) -> _scene.OomScene:
    scene.grad_enabled = True
    return scene


def test_an_oom_while_the_model_is_moved_is_not_run_again():
    scene = _with_grad(_oom_scene(Blocks()))
    e = _evidence()
    e.phase = "load"
    device = SyntheticDevice(amp_share=0.6)
    got = _measure.measure(scene, e, device=device)
    assert got == ("the OOM came while the model was moved to the device: there is no step to "
                   "run again yet")
    assert device.sizes == []


@pytest.mark.parametrize("per_sample_kib, flat_mib", [(190, 100), (200, 150), (200, 200)])
def test_what_is_promised_ran_where_it_is_advised(per_sample_kib, flat_mib):
    # The pytest plugin's OOM on an H100, its shape: Linear layers under a 2 GiB cap whose small
    # slices peak at the backward's end (parameters, gradients, input, a fixed workspace: flat)
    # and larger ones on the activations, which grow past the cap at the failing 8192. A line
    # through slices on both sides of that change says 8192 needs less than the program held
    # at its OOM, and remedies measured at small slices (here they save nothing) were promised
    # from their own lines. Promised now: only what ran where it is advised -- the batch at
    # that batch, the others at the failing batch itself.
    batch, params, x = 8192, 512 * MiB, 128 * MiB
    cap = 2 * GiB

    def peak(size: int) -> int:
        return max(2 * params + x + flat_mib * MiB, params + x + size * per_sample_kib * 1024)

    scene = _oom_scene(Blocks(), batch=batch)
    scene.grad_enabled = True
    e = _evidence()
    e.limit_bytes = cap
    e.allocated_bytes = e.reserved_bytes = cap - 90 * MiB
    e.requested_bytes = 128 * MiB
    assert peak(batch) > cap
    m = _measure.measure(scene, e, device=PeakDevice(peak, cap, params + x))
    assert not isinstance(m, str), m
    assert m.need_bytes >= peak(batch) or m.lower_bound, (m.need_bytes, peak(batch))
    e.measured = m
    usable = cap * (1.0 - MEASURED_MARGIN)
    for advice in assess(e).advice:
        if not advice.fits:
            continue
        if advice.kind == "batch_size":
            assert peak(advice.params["batch_size"]) <= usable, advice
        else:
            # Checkpointing and autocast save nothing on this device: neither may be promised.
            assert advice.kind not in ("activation_checkpointing", "mixed_precision"), advice


class CappedDevice(SyntheticDevice):
    """The synthetic step with a cap that can be raised: at the failing batch under a raised
    cap, steps run back to back need ``whole_share`` more than the slices' line says (the KV
    cache of generate() at its whole batch, on an H100); above the cap in force, out of memory."""

    def __init__(self, whole_share: float, others: int = 0) -> None:
        super().__init__(amp_share=1.0)
        self.whole_share = whole_share
        self.cap = CAP
        self.caps: list[tuple[float, float]] = []
        #: Bytes other processes hold on the device.
        self.others = others

    def memory(self):
        from vramscope.predict.budget import DeviceMemory

        reserved = 9 * GiB
        return DeviceMemory(80 * GiB, 80 * GiB - reserved - self.others, reserved,
                            self.cap / (80 * GiB))

    @contextlib.contextmanager
    def capped(self, fraction: float, restore: float):
        self.caps.append((fraction, restore))
        self.cap = int(fraction * 80 * GiB)
        try:
            yield
        finally:
            self.cap = int(restore * 80 * GiB)

    def window(self, call):
        def measure(size: int):
            call(size)
            self.sizes.append((size, False, False))
            peak = self.truth(size)
            if size == BATCH and getattr(call, "repeat", 1) > 1:
                peak = int(peak * self.whole_share)
            if peak * ALLOWANCE > self.cap:
                raise _measure.ProbeOutOfMemory(size)
            return Probe(size, peak, int(peak * 1.2), peak_pinned_bytes=int(peak * ALLOWANCE)), \
                FIXED
        return measure


@pytest.mark.parametrize("whole_share", [1.0, 1.3])
def test_a_raised_cap_is_promised_only_where_the_step_ran_under_it(whole_share):
    # The GPU's gpt2_generate: the cap raised to 16.6 GiB by the slices' need (15.9 GiB) ran
    # out with 12.6 GiB allocated and 3.6 GiB cached. The step is now run at the failing batch
    # under the raised cap, twice in a training step, before the cap is advised; the cap the
    # program had is set back.
    scene = _oom_scene(Blocks())
    scene.grad_enabled = True
    device = CappedDevice(whole_share)
    e = _evidence()
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    [raised] = [r for r in m.remedies if r.kind == "memory_fraction"]
    fraction = raised.params["fraction"]
    assert device.caps == [(fraction, CAP / (80 * GiB))] and device.cap == CAP
    e.measured = m
    a = assess(e)
    cap = next((x for x in a.advice if x.kind == "memory_fraction"), None)
    fits_truly = device.truth(BATCH) * whole_share * ALLOWANCE <= \
        fraction * 80 * GiB * (1 - MEASURED_MARGIN)
    assert fits_truly == (whole_share == 1.0)
    if fits_truly:
        assert cap is not None and cap.fits, a.advice
    else:
        assert cap is None or not cap.fits, cap
        assert "memory_fraction" in dict(a.not_advised)


@pytest.mark.parametrize("others_gib", [0.5, 2.0])
def test_a_raised_cap_is_run_only_where_no_other_process_uses_the_device(others_gib):
    # On an H100, cnn_fp32's raised cap took 66 GiB in the dying process while four capped
    # programs ran beside it; two ran out of memory for it. Beside more than a compositor's
    # bytes, the cap is advised without being run, and never promised.
    scene = _oom_scene(Blocks())
    scene.grad_enabled = True
    device = CappedDevice(1.0, others=int(others_gib * GiB))
    e = _evidence()
    m = _measure.measure(scene, e, device=device)
    assert not isinstance(m, str), m
    alone = others_gib * GiB <= _measure.SHARED_DEVICE_BYTES
    assert bool(device.caps) == alone and device.cap == CAP
    assert any(r.kind == "memory_fraction" for r in m.remedies) == alone
    noted = [n for n in m.notes if "other processes use" in n]
    assert bool(noted) != alone, m.notes
    e.measured = m
    cap = next((x for x in assess(e).advice if x.kind == "memory_fraction"), None)
    assert cap is None or cap.fits == alone, cap


def test_a_batch_predicted_and_not_run_for_lack_of_time_is_not_promised():
    # Predicted by the slices' line (1, 2, 42 -> 84 here), then no time left to run it there.
    scene = _oom_scene(Blocks())
    scene.grad_enabled = True
    device = SyntheticDevice(amp_share=0.6)
    e = _evidence()
    m = _measure.measure(scene, e, device=device, deadline_s=0.0)
    assert not isinstance(m, str), m
    [batch] = [r for r in m.remedies if r.kind == "batch_size"]
    assert batch.params["batch_size"] not in {s for s, _, _ in device.sizes}
    assert not batch.ran_where_advised and "no time left" in batch.basis
    e.measured = m
    advised = next(x for x in assess(e).advice if x.kind == "batch_size")
    assert not advised.fits and advised.params["covers_known_need"]
    # With time, the same batch is run before it is promised.
    timed = SyntheticDevice(amp_share=0.6)
    m = _measure.measure(_oom_scene(Blocks()), _evidence(), device=timed)
    [batch] = [r for r in m.remedies if r.kind == "batch_size"]
    assert batch.ran_where_advised and batch.params["batch_size"] in {s for s, _, _ in timed.sizes}
