# tests/python/attribution/test_model_probe.py -- batch size, blocks, optimizer state and the OOM stack, on CPU modules
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from vramscope.attribution import model_probe as probe  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, width: int, seen=None) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)
        self.seen = seen

    def forward(self, x):
        if self.seen is not None and not self.seen:
            # Where the OOM observer would run: inside an op of this block.
            self.seen.append(probe.frames_outward(sys._getframe()))
        return x + self.down(torch.relu(self.up(x)))


class Tower(torch.nn.Module):
    def __init__(self, width: int = 8, depth: int = 4, stop_at=None) -> None:
        super().__init__()
        self.seen = []
        self.blocks = torch.nn.ModuleList(
            Block(width, self.seen if i == stop_at else None) for i in range(depth))
        self.head = torch.nn.Linear(width, 2)

    def forward(self, x, mask=None):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_leading_dim_of_the_first_tensor_in_args_kwargs_and_batch_dicts():
    t = torch.zeros(5, 3)
    assert probe.leading_dim((t,)) == 5
    assert probe.leading_dim((), {"input_ids": torch.zeros(7, 2), "labels": t}) == 7
    assert probe.leading_dim(({"pixels": torch.zeros(9, 3)},)) == 9
    assert probe.leading_dim((3, [torch.zeros(4)])) == 4
    assert probe.leading_dim((torch.tensor(1.0),)) is None  # a scalar has no batch
    assert probe.leading_dim(()) is None


def test_block_lists_find_the_repeated_children_with_their_paths():
    model = Tower(depth=4)
    assert probe.block_lists(model) == [("blocks", "Block", 4)]
    assert model.get_submodule("blocks") is model.blocks
    seq = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(3)])
    assert probe.block_lists(seq) == [("", "Linear", 3)]


def test_the_pre_hook_reads_the_batch_once_per_forward_and_is_removed():
    model = Tower()
    p = probe.ModelProbe()
    p.attach(model)
    calls = []
    original = p._on_forward
    p._on_forward = lambda *a: (calls.append(1), original(*a))  # type: ignore[assignment]
    model(torch.zeros(6, 8))
    assert p.batch_size == 6 and p.autocast is False
    model(x=torch.zeros(3, 8))
    assert p.batch_size == 3
    evidence = p.evidence()
    assert evidence["batch_size"] == 3 and evidence["batch_source"] == "forward"
    assert evidence["block_lists"] == [("blocks", "Block", 4)]
    assert evidence["parameter_dtype"] == "float32"
    assert evidence["parameter_bytes"] == sum(q.numel() * 4 for q in model.parameters())
    p.close()
    model(torch.zeros(2, 8))
    assert p.batch_size == 3 and not p.attached
    # Only the top-level module was hooked: one call per model forward, none per block.
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_optimizer_summary_counts_the_state_now_and_once_complete():
    model = torch.nn.Linear(16, 16)
    params = sum(q.numel() * 4 for q in model.parameters())
    opt = torch.optim.AdamW(model.parameters())
    before = probe.optimizer_summary(opt)
    assert before["optimizer"] == "AdamW" and before["optimizer_state_bytes"] == 0
    assert before["optimizer_state_full_bytes"] == 2 * params
    model(torch.ones(2, 16)).sum().backward()
    opt.step()
    after = probe.optimizer_summary(opt)
    assert after["optimizer_state_bytes"] == 2 * params  # exp_avg, exp_avg_sq (step is 0-d)
    sgd = probe.optimizer_summary(torch.optim.SGD(model.parameters(), lr=0.1))
    assert sgd["optimizer_state_full_bytes"] == 0  # no momentum, no state
    # The step's parameter-sized temporaries: Adam's multi-tensor path (torch's default where
    # foreach is not set), none fused or single-tensor, none for plain SGD.
    assert before["optimizer_temporary_bytes"] == params
    for kwargs in ({"foreach": False}, {"fused": True}):
        assert probe.optimizer_summary(torch.optim.AdamW(model.parameters(), **kwargs))[
            "optimizer_temporary_bytes"] == 0
    assert sgd["optimizer_temporary_bytes"] == 0


def test_find_model_prefers_the_module_owning_the_optimizers_parameters():
    def training_loop():
        model = Tower()
        other = torch.nn.Linear(100, 100)  # more parameters, not the one being trained
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return model, other, opt, probe.find_model(sys._getframe(), opt), \
            probe.find_model(sys._getframe())

    model, other, _, found, without_optimizer = training_loop()
    assert found is model
    assert without_optimizer is model  # more parameter tensors than the lone Linear

    class Trainer:
        def __init__(self, model):
            self.model = model

        def train(self):
            return probe.find_model(sys._getframe())

    assert Trainer(model).train() is model


def test_discovery_gives_up_after_a_few_steps_without_a_model():
    p = probe.ModelProbe()
    for _ in range(probe.DISCOVERY_STEPS + 2):
        p.discover(sys._getframe())
    assert p.discovery_tries == probe.DISCOVERY_STEPS and not p.attached


def test_the_stack_at_an_oom_in_a_block_says_forward_batch_and_progress():
    model = Tower(depth=4, stop_at=2)
    p = probe.ModelProbe()
    p.attach(model)
    model(torch.zeros(5, 8))
    (frames,) = model.seen
    found = probe.stack_evidence(frames, p._block_index)
    assert found == {"phase": "forward", "forward_progress": 3 / 4, "batch_size": 5,
                     "batch_source": "stack", "input_shape": (5, 8)}
    # Without the probe's blocks: still the phase and the outermost module's batch.
    assert probe.stack_evidence(frames) == {"phase": "forward", "batch_size": 5,
                                            "batch_source": "stack", "input_shape": (5, 8)}
    # The probe prefers its own pre-hook's batch (the same forward).
    evidence = p.evidence(frames)
    assert evidence["batch_source"] == "forward" and evidence["forward_progress"] == 3 / 4


def test_the_stack_in_an_optimizer_step_and_on_the_autograd_thread():
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    opt.register_step_pre_hook(lambda *a: seen.append(probe.frames_outward(sys._getframe())))
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    assert probe.stack_evidence(seen[0])["phase"] == "optimizer"
    # An OOM with no Python frames off the main thread: the autograd engine's backward.
    assert probe.stack_evidence([], main_thread=False) == {"phase": "backward"}


def test_grad_mode_is_the_steps_in_a_backward_and_an_optimizer_step():
    # Both run with autograd off on their own thread (the engine's grad mode, the optimizer's
    # no_grad) inside a step that records: the evidence says the step's mode. Under no_grad
    # (inference) it says off.
    model = torch.nn.Linear(4, 4)
    p = probe.ModelProbe()
    p.attach(model)
    seen = {}

    class Reading(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen["forward"] = p.evidence(probe.frames_outward(sys._getframe()))
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            assert not torch.is_grad_enabled()  # the engine's own mode
            seen["backward"] = p.evidence(probe.frames_outward(sys._getframe()))
            return grad

    class Stepping(torch.optim.SGD):
        @torch.no_grad()
        def step(self, closure=None):
            seen["optimizer"] = p.evidence(probe.frames_outward(sys._getframe()))
            return super().step(closure)

    opt = Stepping(model.parameters(), lr=0.1)
    Reading.apply(model(torch.ones(1, 4))).sum().backward()
    opt.step()
    with torch.no_grad():
        Reading.apply(model(torch.ones(1, 4)))
    assert [(seen[k]["phase"], seen[k]["grad_enabled"]) for k in ("backward", "optimizer")] \
        == [("backward", True), ("optimizer", True)]
    assert seen["forward"]["grad_enabled"] is False  # the last forward: under no_grad
    p.close()


def test_a_traceback_keeps_the_frames_of_the_failing_forward():
    class Failing(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB.")

    model = torch.nn.Sequential(torch.nn.Identity(), Failing())
    try:
        model(torch.zeros(11, 2))
    except RuntimeError as exc:
        frames = probe.frames_of_traceback(exc.__traceback__)
    found = probe.stack_evidence(frames)
    assert found["phase"] == "forward" and found["batch_size"] == 11


def test_an_oom_while_the_model_is_moved_to_the_device_says_what_moving_it_takes():
    # Module.to()/.cuda() convert each parameter and buffer in turn (Module._apply, recursively
    # per child); the third conversion runs out of memory.
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.BatchNorm1d(32),
                                torch.nn.Linear(32, 8))
    calls = []

    def convert(t):
        calls.append(t)
        if len(calls) == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")
        return t

    try:
        model._apply(convert)
    except torch.OutOfMemoryError as exc:
        frames = probe.frames_of_traceback(exc.__traceback__)
    parameters = (64 * 32 + 32 + 32 * 8 + 8 + 2 * 32) * 4
    buffers = 2 * 32 * 4 + 8  # BatchNorm's running mean and variance, its int64 count
    assert probe.stack_evidence(frames) == {"phase": "load", "load_call": "to",
                                            "load_bytes": parameters + buffers,
                                            "loaded_bytes": 0, "parameter_dtype": "float32"}


def test_an_oom_in_from_pretrained_is_a_load_seen_from_its_copying_thread_and_its_traceback(
        tmp_path, monkeypatch):
    # transformers' from_pretrained(device_map=...) copies the checkpoint's tensors to the device
    # on a pool of threads while the main thread waits: the OOM observer runs on a pool thread
    # whose frames hold no model, and the exception reaches the program through the main thread.
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64,
                                     n_positions=16, bos_token_id=0, eos_token_id=0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    seen = []
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        if kwargs.get("device") is None or seen:
            return real_to(self, *args, **kwargs)
        frames, main_thread = probe.oom_frames(sys._getframe())  # as the observer reads them
        seen.append((main_thread, probe.stack_evidence(frames, None, main_thread)))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB.")

    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.delenv("HF_DEACTIVATE_ASYNC_LOAD", raising=False)
    with pytest.raises(torch.OutOfMemoryError) as caught:
        transformers.GPT2LMHeadModel.from_pretrained(tmp_path, device_map="cpu",
                                                     dtype=torch.float32)
    monkeypatch.undo()
    main_thread, at_oom = seen[0]
    assert not main_thread, "the copy ran on the main thread: nothing to find out here"
    # The model being loaded, on the meta device: its parameters' and buffers' bytes, none of
    # them on a CUDA device yet.
    model = transformers.GPT2LMHeadModel(config)
    size = sum(t.numel() * t.element_size() for t in
               {id(t): t for t in [*model.parameters(), *model.buffers()]}.values())
    expected = {"phase": "load", "load_call": "from_pretrained", "load_bytes": size,
                "loaded_bytes": 0, "parameter_dtype": "float32"}
    assert at_oom == expected
    assert probe.stack_evidence(probe.frames_of_traceback(caught.value.__traceback__)) == \
        expected


def test_an_oom_in_torch_load_is_a_checkpoint_load_with_its_files_size(tmp_path):
    # torch.load restores each storage through its map_location; the third one runs out. On
    # the host nothing lands on a CUDA device: loaded_bytes counts only those that did.
    path = tmp_path / "checkpoint.pt"
    torch.save({"model": torch.nn.Linear(64, 64).state_dict(),
                "step": 7, "state": [torch.zeros(1000) for _ in range(3)]}, path)
    restored = []

    def to_device(storage, location):
        restored.append(storage)
        if len(restored) == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB.")
        return storage

    for f in (str(path), path, open(path, "rb")):  # noqa: SIM115 -- closed below
        restored.clear()
        with pytest.raises(torch.OutOfMemoryError) as caught:
            torch.load(f, map_location=to_device)
        assert probe.stack_evidence(probe.frames_of_traceback(caught.value.__traceback__)) == {
            "phase": "load", "load_call": "torch.load", "load_bytes": path.stat().st_size,
            "loaded_bytes": 0}
    f.close()


def test_an_oom_on_a_thread_of_the_program_is_not_taken_for_the_backward():
    # A thread the program started (a prefetcher copying batches) has Python frames down to
    # threading's bootstrap; the autograd engine's thread has none of its own.
    import threading
    seen = []
    thread = threading.Thread(target=lambda: seen.append(probe.oom_frames(sys._getframe())))
    thread.start()
    thread.join()
    frames, main_thread = seen[0]
    assert not main_thread and probe.stack_evidence(frames, None, main_thread) == {}
    assert probe.stack_evidence([], None, False) == {"phase": "backward"}


def test_a_module_whose_own_forward_never_runs_gets_its_children_hooked():
    # A LightningModule-like wrapper: training_step calls the layers, never forward().
    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 2)

        def training_step(self, x):
            return self.head(self.encoder(x))

    model = Wrapper()
    p = probe.ModelProbe()
    p.attach(model)
    model.training_step(torch.zeros(3, 4))
    p.step_end()  # the wrapper's forward did not run: hook its children
    assert p.batch_size is None
    model.training_step(torch.zeros(5, 4))
    p.step_end()
    assert p.batch_size == 5
    p.close()
    assert not any(m._forward_pre_hooks for m in model.modules())
    # A model whose forward runs keeps only its own hook.
    tower = Tower()
    q = probe.ModelProbe()
    q.attach(tower)
    tower(torch.zeros(2, 8))
    q.step_end()
    assert not any(m._forward_pre_hooks for m in tower.modules() if m is not tower)
    q.close()
