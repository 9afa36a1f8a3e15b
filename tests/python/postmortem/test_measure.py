# tests/python/postmortem/test_measure.py -- the failing step run again: scene, slices, remedies
"""A small model on the host stands for the failing step; a synthetic allocator gives each
measured window the peaks of a step whose memory is known (fixed bytes plus bytes per sample,
less with checkpointing or autocast, what must fit a known share above the allocated peak), so
the true largest batch and each remedy's true need are computed here independently of the
model and the search they test."""

from __future__ import annotations

import math

import pytest
import torch

from vramscope.postmortem import measure as _measure
from vramscope.postmortem import scene as _scene
from vramscope.postmortem.advice import OomEvidence
from vramscope.postmortem.remedies import MEASURED_MARGIN, assess
from vramscope.predict.model import Probe

GiB = 1 << 30
#: The synthetic step: what does not depend on the batch, and per sample.
FIXED = 1 * GiB
PER_SAMPLE = GiB // 10
#: Per-sample shares kept with checkpointing on the blocks, and under autocast.
CHECKPOINT_SHARE = 0.3
#: What must fit under a cap over the allocated peak (the measured allowance).
ALLOWANCE = 1.05
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


def _oom_scene(model: Blocks) -> _scene.OomScene:
    """The scene as the post-mortem captures it: the OOM raised inside the model's forward of
    a training loop, the frames taken from the exception's traceback."""
    from vramscope.attribution.model_probe import frames_of_traceback

    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train(x: torch.Tensor) -> None:
        loss = model(x).logsumexp(-1).mean()
        loss.backward()
        opt.step()

    model.fail_above = 64
    try:
        train(torch.randn(BATCH, 16))
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
    # Each remedy was run, at slices no larger than the batch that ran without it.
    largest_plain = max(s for s, c, a in device.sizes if not c and not a)
    assert all(s <= largest_plain for s, c, a in device.sizes if c or a)
    assert any(c for _, c, _ in device.sizes) and any(a for _, _, a in device.sizes)


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
            checkpointed = any("forward" in vars(b) for b in container.children())
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
    assert kinds["activation_checkpointing"].params["modules"] == "transformer.h"
    assert kinds["activation_checkpointing"].need_bytes < m.need_bytes
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
    # Each slice generated its six new tokens, under no_grad; no checkpointing is measured.
    assert calls and all(o[0] == i[0] and o[1] == i[1] + 6 and not g for i, o, g in calls)
    assert "activation_checkpointing" not in {r.kind for r in m.remedies}
