# tests/python/postmortem/test_holders.py -- the program's containers that kept tensors, named and measured
"""Host tensors stand for the device's (scene.INPUT_DEVICE_TYPES gets "cpu"). Each graph a loss
keeps holds one activation of a known size, made by the test and followed by a weak reference,
so what emptying a container frees is known here independently of the code under test."""

from __future__ import annotations

import json
import types
import weakref

import pytest
import torch

from vramscope.attribution.model_probe import frames_of_traceback
from vramscope.postmortem import holders as _holders
from vramscope.postmortem import remedies as _remedies
from vramscope.postmortem import report as _report
from vramscope.postmortem import scene as _scene
from vramscope.postmortem.advice import Holder, Measured, MeasuredRemedy, OomEvidence, StepPoint

MiB = 1 << 20
GiB = 1 << 30
#: The activation each kept graph holds.
SAVED = MiB


@pytest.fixture(autouse=True)
def host_tensors(monkeypatch):
    monkeypatch.setattr(_scene, "INPUT_DEVICE_TYPES", ("cuda", "cpu"))


class Tracked:
    """Tensors made by the test, alive or not: the allocator's count of them."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []

    def make(self, nbytes: int) -> torch.Tensor:
        t = torch.empty(nbytes, dtype=torch.uint8)
        self.refs.append(weakref.ref(t))
        return t

    def allocated(self) -> int:
        return sum(t.nbytes for t in (r() for r in self.refs) if t is not None)


def _keeping(tracked: Tracked):
    """An op whose graph node keeps one SAVED-byte activation until the graph is freed."""

    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.activation = tracked.make(SAVED)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    return Keep.apply


def _oom_frames(body):
    """The frames of the traceback of an OOM that ``body()`` raises at its end."""
    try:
        body()
    except torch.OutOfMemoryError as exc:
        return frames_of_traceback(exc.__traceback__)
    raise AssertionError("no OOM")


def test_losses_kept_with_their_graphs_are_named_and_emptying_them_is_measured():
    tracked = Tracked()
    keep = _keeping(tracked)
    weight = torch.nn.Parameter(torch.ones(4))
    kept = types.SimpleNamespace()  # the test's view of the program's containers

    def train() -> None:
        losses = []   # the leak: one graph per step
        metrics = {"acc": [tracked.make(2 * MiB) for _ in range(5)]}  # a table of lists
        sizes = [1, 2, 3]  # no tensor: not a holder
        for _ in range(6):
            losses.append(keep(weight).sum())
        outputs = [tracked.make(3 * MiB) for _ in range(4)]  # plain tensors kept
        kept.losses, kept.outputs = losses, outputs  # the same lists: named once, as locals
        raise torch.OutOfMemoryError(f"CUDA out of memory ({len(metrics)}, {len(sizes)})")

    found = _holders.find(_oom_frames(train))
    by_name = {f.holder.name: f.holder for f in found}
    assert set(by_name) == {"losses", "outputs", "metrics['acc']"}, by_name
    losses, outputs = by_name["losses"], by_name["outputs"]
    assert by_name["metrics['acc']"].data_bytes == 5 * 2 * MiB
    assert (losses.kind, losses.items, losses.tensors, losses.graphs) == ("list", 6, 6, 6)
    assert losses.where.startswith("train() in test_holders.py:")
    assert losses.keeps_graphs and not outputs.keeps_graphs
    assert (outputs.items, outputs.tensors, outputs.graphs) == (4, 4, 0)
    assert outputs.data_bytes == 4 * 3 * MiB
    # The graphs first; find changes nothing.
    assert found[0].holder is losses
    assert len(kept.losses) == 6 and len(kept.outputs) == 4

    # Without a leak rate only the graphs are given up: what they held, exactly.
    metrics_kept = found[[f.holder.name for f in found].index("metrics['acc']")].container
    released = _holders.release(found, tracked.allocated, lambda h: h.keeps_graphs)
    assert released == [losses]
    assert losses.freed_bytes == 6 * SAVED
    assert outputs.freed_bytes is None and len(kept.outputs) == 4
    assert kept.losses == [] and len(metrics_kept) == 5
    # With one, the plain tensors too.
    _holders.release([f for f in found if f.holder is outputs], tracked.allocated)
    assert outputs.freed_bytes == 4 * 3 * MiB


def test_an_objects_lists_are_read_one_level_down_and_libraries_frames_are_not():
    tracked = Tracked()
    keep = _keeping(tracked)

    class Module(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))
            self.validation_outputs = []

        def step(self) -> None:
            self.validation_outputs.append({"loss": keep(self.weight).sum(), "n": 3})
            if len(self.validation_outputs) == 5:
                raise torch.OutOfMemoryError("CUDA out of memory")

    module = Module()

    def loop() -> None:
        for _ in range(10):
            module.step()

    frames = _oom_frames(loop)
    found = _holders.find(frames)
    assert [f.holder.name for f in found] == ["self.validation_outputs"]
    assert found[0].holder.graphs == 5
    # A library's frame (here: made to look installed) is not the program's.
    roots = _scene.library_roots()
    assert all(not f.f_code.co_filename.startswith(roots) for f in frames
               if _scene.programs_frame(f, roots))
    assert not any(_scene.programs_frame(f, roots) for f in frames
                   if "site-packages" in f.f_code.co_filename)


def test_parameters_batches_optimizer_state_and_short_lists_are_not_holders():
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(6)])
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    opt.step()  # its state: a tensor or three per parameter, in a library's object

    def step() -> None:
        params = list(model.parameters())  # 12 parameters: the model, not a leak
        pair = [torch.ones(3), torch.ones(3)]  # too short to be kept per step
        mixed = [1, 2, 3, torch.ones(3)]  # one tensor among its items
        batch = {k: torch.ones(8, 3) for k in ("input_ids", "mask", "labels", "pixels")}
        out = model(batch["pixels"][:, :1].expand(8, 4))
        outputs = {"loss": out.sum(), "logits": out, "a": out * 2, "b": out * 3}  # a record
        raise torch.OutOfMemoryError(f"CUDA out of memory ({len(params)}, {len(pair)}, "
                                     f"{len(mixed)}, {len(outputs)}, {opt})")

    assert _holders.find(_oom_frames(step)) == []


def _leaking_evidence(**fields) -> OomEvidence:
    return OomEvidence(device=0, requested_bytes=2 * GiB, device_total_bytes=80 * GiB,
                       device_free_bytes=60 * GiB, allocated_bytes=9 * GiB,
                       reserved_bytes=10 * GiB, limit_bytes=10 * GiB, **fields)


def _holder(freed: int, graphs: int = 37, name: str = "losses") -> Holder:
    return Holder(name=name, where="train() in train.py:42", kind="list", items=graphs,
                  tensors=graphs, graphs=graphs, data_bytes=graphs * 4, freed_bytes=freed)


def test_a_leak_rate_names_the_holders_and_counts_what_emptying_them_freed():
    # The last 7 of 37 steps, each 256 MiB more at its end.
    steps = [StepPoint(i, 3 * GiB, GiB + i * 256 * MiB) for i in range(31, 38)]
    e = _leaking_evidence(steps=steps, optimizer="AdamW", holders=[_holder(5 * GiB)])
    e.measured = Measured(size=64, what="batch_size", need_bytes=12 * GiB, basis="slices")
    first = _remedies.rank_advice(e)[0]
    assert first.kind == "leak" and first.fits
    # Emptying them freed more than the 1.5 GiB the last steps show.
    assert first.recovers_bytes == 5 * GiB
    assert first.params["holders"][0] == {"name": "losses", "where": "train() in train.py:42",
                                          "graphs": 37, "freed_bytes": 5 * GiB}
    assert "; in the program: losses (a list of 37 in train() in train.py:42" in first.detail
    assert "loss.item()" in first.detail
    # A list whose items each held far more than a step's growth is not what leaked (the
    # failing step's own, its graphs alive): not named, nor counted.
    e.holders.append(_holder(40 * GiB, graphs=4, name="micro_losses"))
    # Nor one that held more items than the steps so far could have added (a dataset kept on
    # the device: 1000 batches of 4 MiB at step 37).
    dataset = _holder(4000 * MiB, graphs=0, name="batches")
    dataset.items = dataset.tensors = 1000
    e.holders.append(dataset)
    first = _remedies.rank_advice(e)[0]
    assert [h["name"] for h in first.params["holders"]] == ["losses"]
    assert first.recovers_bytes == 5 * GiB


def test_graphs_kept_across_a_loop_without_steps_are_a_leak_when_measured_to_fit():
    e = _leaking_evidence(holders=[_holder(6 * GiB, name="preds")])
    e.measured = Measured(size=64, what="batch_size", need_bytes=3 * GiB, basis="slices")
    a = _remedies.assess(e)
    first = a.advice[0]
    assert first.kind == "leak" and first.fits, first
    # The step fits the 10 GiB cap it has: raising it is no remedy (it was once advised at
    # a fraction below the cap).
    assert "memory_fraction" not in [x.kind for x in a.advice]
    assert "within the 10.0 GiB cap" in dict(a.not_advised)["memory_fraction"]
    assert first.params["bytes_per_step"] is None
    assert "torch.no_grad()" in first.detail and "preds" in first.detail

    # Not measured with them emptied: not promised (listed by what it recovers, or not
    # advised beside a remedy that covers the need).
    e.measured = None
    a = _remedies.assess(e)
    assert not any(x.fits for x in a.advice if x.kind == "leak")
    assert any(x.kind == "leak" for x in a.advice) or "leak" in dict(a.not_advised)

    # Freeing them does not cover the need: not promised either.
    e = _leaking_evidence(holders=[_holder(GiB // 2, name="preds")])
    e.measured = Measured(size=64, what="batch_size", need_bytes=3 * GiB, basis="slices")
    assert not any(a.fits for a in _remedies.rank_advice(e) if a.kind == "leak")


def test_beside_a_leak_no_other_remedy_is_promised():
    # The GPU's eval_keeps_outputs: an evaluation loop under autograd kept 16 steps' outputs
    # (5.3 GiB) under a 6 GiB cap; the step, measured with them emptied, needs 0.45 GiB, and
    # a measured autocast remedy needs less. Both fit the failing step; the steps after it
    # kept more, and expandable segments, promised there, ran out. Only the leak's fix holds.
    e = _leaking_evidence(holders=[_holder(int(5.3 * GiB), graphs=16, name="outputs")],
                          training=False, cached_free_bytes=GiB, largest_free_block_bytes=MiB,
                          oom_source="allocator")
    e.limit_bytes = 6 * GiB
    e.measured = Measured(size=16, what="batch_size", need_bytes=int(0.45 * GiB),
                          basis="slices", remedies=[MeasuredRemedy(
                              "mixed_precision", {"dtype": "bfloat16"}, int(0.32 * GiB),
                              "slices")])
    advice = _remedies.rank_advice(e)
    assert advice[0].kind == "leak" and advice[0].fits
    others = [a for a in advice[1:]]
    assert {a.kind for a in others} >= {"mixed_precision"}, [a.kind for a in advice]
    assert not any(a.fits for a in others), [(a.kind, a.fits) for a in others]
    assert all("before the leak is fixed" in a.detail for a in others)
    # Without the leak's holders the same measured remedy is a promise.
    e.holders = []
    assert any(a.fits for a in _remedies.rank_advice(e) if a.kind == "mixed_precision")


def test_graphs_in_a_list_of_a_training_step_are_not_called_a_leak():
    # Micro-batches summed before one backward keep their graphs on purpose.
    e = _leaking_evidence(holders=[_holder(6 * GiB)], optimizer="AdamW")
    e.measured = Measured(size=64, what="batch_size", need_bytes=3 * GiB, basis="slices")
    assert "leak" not in [a.kind for a in _remedies.rank_advice(e)]
    # An evaluation inside the training (the model in eval mode) keeps them by mistake.
    e.training = False
    assert _remedies.rank_advice(e)[0].kind == "leak"
    # Nor plain tensors without a leak rate.
    plain = _holder(6 * GiB)
    plain.graphs = 0
    e = _leaking_evidence(holders=[plain])
    e.measured = Measured(size=64, what="batch_size", need_bytes=3 * GiB, basis="slices")
    assert "leak" not in [a.kind for a in _remedies.rank_advice(e)]


def test_the_report_lists_the_holders():
    e = _leaking_evidence(holders=[_holder(5 * GiB), _holder(None, graphs=0, name="cache")])
    text = _report.format_report(e, _remedies.rank_advice(e))
    assert "tensors kept on the device by the program's containers at the OOM:" in text
    assert "  losses (a list of 37 in train() in train.py:42: 37 tensors with autograd " \
           "graphs; emptying it freed 5.0 GiB)" in text
    assert "  cache (a list of 0 in train() in train.py:42: 0 tensors, 0 B)" in text
    d = json.loads(json.dumps(_report.report_json(e, _remedies.rank_advice(e))))
    assert d["holders"][0] == {"name": "losses", "where": "train() in train.py:42",
                               "kind": "list", "items": 37, "tensors": 37, "graphs": 37,
                               "data_bytes": 148, "freed_bytes": 5 * GiB}
    assert d["training"] is None


def test_at_the_measurement_graphs_are_given_up_always_and_plain_tensors_only_with_a_leak():
    from vramscope.postmortem.oom import _release_holders

    def program(tracked: Tracked, batches: int = 4):
        keep = _keeping(tracked)
        weight = torch.nn.Parameter(torch.ones(4))

        def loop() -> None:
            preds = [keep(weight) for _ in range(5)]  # graphs: 5 x SAVED
            kept = [tracked.make(2 * MiB) for _ in range(batches)]  # data kept on purpose?
            raise torch.OutOfMemoryError(f"CUDA out of memory ({len(preds)}, {len(kept)})")

        return _oom_frames(loop)

    def released(e: OomEvidence, batches: int = 4) -> dict:
        tracked = Tracked()
        return {h.name: h.freed_bytes for h in _release_holders(program(tracked, batches), e,
                                                                tracked.allocated)}

    assert released(_leaking_evidence()) == {"preds": 5 * SAVED, "kept": None}
    # Step-end memory that grew at each of steps 1 to 6: the plain tensors are part of the
    # leak, up to 4 per step so far ...
    e = _leaking_evidence(steps=[StepPoint(i, 3 * GiB, GiB + i * MiB) for i in range(1, 7)])
    assert released(e) == {"preds": 5 * SAVED, "kept": 4 * 2 * MiB}
    assert released(e, batches=28) == {"preds": 5 * SAVED, "kept": 28 * 2 * MiB}
    # ... not more (data kept from the start, which the step measured next needs).
    assert released(e, batches=29) == {"preds": 5 * SAVED, "kept": None}


def test_a_submodule_that_keeps_its_outputs_is_named_by_its_path():
    tracked = Tracked()
    keep = _keeping(tracked)

    class Cache(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kept = []

        def forward(self, x):
            y = keep(x)
            self.kept.append(y)  # the leak: same storage, kept forever
            return y

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(4, 4), Cache())

        def forward(self, x):
            return self.body(x)

    net = Net()

    def loop() -> None:
        for _ in range(5):
            net(torch.ones(2, 4, requires_grad=True)).sum().backward()
        raise torch.OutOfMemoryError("CUDA out of memory")

    found = _holders.find(_oom_frames(loop))
    assert [(f.holder.name, f.holder.items) for f in found] == [("net.body.1.kept", 5)]


def test_a_graph_is_alive_until_a_backward_frees_it_and_hooks_are_not_run_to_tell():
    w = torch.nn.Parameter(torch.ones(4, 4))
    out = (torch.ones(2, 4) @ w).relu()
    assert _holders.graph_alive(out)
    out.sum().backward()
    assert not _holders.graph_alive(out)
    # A graph that saved nothing can not be told: alive (the failing step's, freed).
    assert _holders.graph_alive(torch.ones(3, requires_grad=True).sum())
    unpacked = []

    def unpack(t):
        unpacked.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        hooked = (torch.ones(2, 4) @ w).relu()
    assert _holders.graph_alive(hooked) and unpacked == []


class _Failing(torch.nn.Module):
    """A layer whose forward (``in_forward``) or backward runs out of memory on its third
    step."""

    def __init__(self, in_forward: bool) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.in_forward = in_forward
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3 and self.in_forward:
            raise torch.OutOfMemoryError("CUDA out of memory (forward)")
        y = self.linear(x)
        if self.calls == 3:
            def fail(grad):
                raise torch.OutOfMemoryError("CUDA out of memory (backward)")
            y.register_hook(fail)
        return y


@pytest.mark.parametrize("in_forward", [True, False], ids=["forward", "backward"])
def test_an_earlier_steps_outputs_and_data_stay_for_the_measurement_not_the_failing_graph(
        in_forward):
    model = _Failing(in_forward)
    data = torch.randn(64, 4)  # kept on the device by the program
    seen = {}

    def loop() -> None:
        for i in range(3):
            out = model(data[8 * i:8 * (i + 1)])
            loss = out.square().mean()
            seen[i] = (out, loss)
            loss.backward()

    frames = _oom_frames(loop)
    kept = {id(t) for t in _holders.earlier_tensors(frames)}
    assert id(data) in kept
    assert not any(id(p) in kept for p in model.parameters())
    if in_forward:  # out and loss are the second step's: their graphs were freed by its backward
        assert {id(seen[1][0]), id(seen[1][1])} <= kept
    else:  # the failing step's own, their graph alive: the measurement makes its own
        assert not {id(seen[2][0]), id(seen[2][1])} & kept
