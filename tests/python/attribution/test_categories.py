# tests/python/attribution/test_categories.py -- per-category memory without a GPU: the storage walk's cache,
# Monitor's records, line and table, and the TensorBoard tags
#
# The walk runs on CPU tensors (cuda_only=False): the caching logic is the same for any device.
# The Monitor tests feed it the agent's documented step records (docs/agent-api.md) through
# the session's reader, the boundary the C++ agent sits behind; tests/gpu/test_categories.py runs the
# same path against the real agent.
from __future__ import annotations

import time

import pytest

import vramscope
from vramscope.attribution.categories import StorageWalker
from vramscope.steps.records import CATEGORY_NAMES

from _vram_double import installed

torch = pytest.importorskip("torch")

MiB = 1 << 20


def model_and_adam():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def train_once(model, optimizer=None, set_to_none=True):
    model.zero_grad(set_to_none=set_to_none)
    model(torch.randn(4, next(model.parameters()).shape[1])).sum().backward()
    if optimizer is not None:
        optimizer.step()


def blocks(walk, category):
    return sorted(b for by_device in walk.get(category, {}).values() for b in by_device)


def storages(tensors):
    return sorted({(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in tensors})


def test_first_walk_tags_parameters_then_nothing_until_something_changes():
    model, _ = model_and_adam()
    walker = StorageWalker(model, cuda_only=False)
    first = walker.walk()
    assert blocks(first, "parameters") == storages(model.parameters())
    assert "gradients" not in first and "optimizer_state" not in first
    assert walker.walk() == {}, "nothing changed: nothing to tag"


def test_new_gradients_are_found_even_at_reused_addresses():
    model, _ = model_and_adam()
    walker = StorageWalker(model, cuda_only=False)
    walker.walk()
    train_once(model)
    grads = [p.grad for p in model.parameters()]
    assert blocks(walker.walk(), "gradients") == storages(grads)
    assert walker.walk() == {}
    # set_to_none frees them; backward makes new tensors, which the allocator may well put at
    # the same addresses: identity, not the address, says they are new.
    train_once(model, set_to_none=True)
    again = walker.walk()
    assert blocks(again, "gradients") == storages(p.grad for p in model.parameters())
    assert "parameters" not in again
    # Zeroed in place and accumulated into: the same tensors, nothing to tag.
    train_once(model, set_to_none=False)
    assert walker.walk() == {}


def test_optimizer_state_is_walked_when_it_changes_shape():
    model, adam = model_and_adam()
    walker = StorageWalker(model, adam, cuda_only=False)
    walker.walk()
    train_once(model, adam)
    walk = walker.walk()
    state = [v for s in adam.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    assert len(state) == 3 * len(list(model.parameters())), "Adam: step, exp_avg, exp_avg_sq"
    assert blocks(walk, "optimizer_state") == storages(state)
    # Steps that update the state in place do not walk it again.
    train_once(model, adam)
    assert "optimizer_state" not in walker.walk()
    # A new state (load_state_dict) is walked again, and the parameters re-listed with it.
    adam.load_state_dict(adam.state_dict())
    reloaded = walker.walk()
    new_state = [v for s in adam.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    assert blocks(reloaded, "optimizer_state") == storages(new_state)
    assert blocks(reloaded, "parameters") == storages(model.parameters())


def test_moved_parameters_are_tagged_again():
    model, _ = model_and_adam()
    walker = StorageWalker(model, cuda_only=False)
    walker.walk()
    model.to(torch.float64)  # new storages for every parameter
    assert blocks(walker.walk(), "parameters") == storages(model.parameters())


def test_cuda_only_skips_cpu_tensors():
    model, adam = model_and_adam()
    train_once(model, adam)
    assert StorageWalker(model, adam).walk() == {}


def test_steady_state_walk_cost(record_property):
    # The per-step cost of a Monitor(model=..., optimizer=...) on the CPU side: a model with
    # 2,000 parameter tensors whose gradients and state stay in place. Kept as a test property
    # (`pytest --junitxml=out.xml` holds it; docs/agent-api.md quotes it), not printed into
    # pytest's progress line; the assertion only guards against a walk that re-reads every
    # storage (tens of ms).
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(1000)])
    adam = torch.optim.Adam(model.parameters())
    train_once(model, adam, set_to_none=False)
    walker = StorageWalker(model, adam, cuda_only=False)
    walker.walk()
    rounds = 50
    started = time.perf_counter()
    for _ in range(rounds):
        assert walker.walk() == {}
    per_walk_ms = (time.perf_counter() - started) / rounds * 1e3
    record_property("storage_walker_steady_walk_ms", round(per_walk_ms, 3))
    assert per_walk_ms < 20, per_walk_ms


class _StepSource:
    """The agent's step() records (docs/agent-api.md) for two devices; device 1 without
    categories, as a process whose second GPU holds nothing of the model."""

    def __init__(self):
        self.calls = 0

    def mode(self):
        return "events"

    def device_count(self):
        return 2

    def step(self):
        self.calls += 1
        categories = {name: (i + 1) * MiB * self.calls for i, name in enumerate(CATEGORY_NAMES)}
        common = dict(step=self.calls, peak_allocated_bytes=30 * MiB, peak_reserved_bytes=40 * MiB,
                      peak_requested_bytes=21 * MiB * self.calls, allocated_bytes=10 * MiB,
                      reserved_bytes=40 * MiB, duration_ns=1000, end_ns=0)
        return [dict(common, device=0, categories=categories), dict(common, device=1, categories=None)]


@pytest.fixture
def agent_steps():
    # The session's reader (not the agent: the Monitor only closes steps here).
    with installed(_StepSource(), is_agent=False) as source:
        yield source


def test_monitor_records_line_and_table_carry_the_categories(agent_steps):
    lines = []
    monitor = vramscope.Monitor(every=1, print_fn=lines.append)
    first = monitor.step()
    monitor.step()
    assert first[0].categories == {name: (i + 1) * MiB for i, name in enumerate(CATEGORY_NAMES)}
    assert list(first[0].categories) == list(CATEGORY_NAMES)
    assert first[1].categories is None
    assert monitor.history[2].categories["other"] == 12 * MiB
    assert "at peak params 1.0 MiB, grads 2.0 MiB" in lines[0]
    assert lines[0].count("at peak") == 1
    table = monitor.table()
    assert table.splitlines()[0].split()[-6:] == ["params", "grads", "optim", "activ", "temp", "other"]


def test_monitor_sends_categories_to_tensorboard(agent_steps, tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    pytest.importorskip("vramscope._agent", reason="the tag scheme is the extension's")
    from vramscope.tensorboard import TensorBoardSink
    monitor = vramscope.Monitor(every=0)
    # start() (which needs a GPU) adds the tensorboard_dir sink exactly like this.
    sink = TensorBoardSink(str(tmp_path / "run"), rank=0, world_size=1)
    monitor.add_sink(sink)
    for _ in range(3):
        monitor.step()
    sink.close()
    acc = event_accumulator.EventAccumulator(str(tmp_path / "run"),
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {f"memory/cuda0/category/{name}_bytes" for name in CATEGORY_NAMES} <= tags
    assert not any(t.startswith("memory/cuda1/category/") for t in tags)
    optimizer_state = acc.Scalars("memory/cuda0/category/optimizer_state_bytes")
    assert [(e.step, e.value) for e in optimizer_state] == [(k, 3.0 * MiB * k) for k in (1, 2, 3)]


def test_monitor_rejects_an_optimizer_without_a_model():
    model, adam = model_and_adam()
    with pytest.raises(ValueError, match="optimizer= needs model="):
        vramscope.Monitor(optimizer=adam)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        vramscope.Monitor(model=adam)
