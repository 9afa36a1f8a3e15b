# tests/python/attribution/test_module_hooks.py -- the module window edges profile() sends, from real torch hooks
#
# Runs real nn.Modules on the CPU through the global module hooks of profile.py; the agent (the
# C++ extension, which counts the bytes and is tested by tests/cpp/attribution) is replaced by a
# recorder of the calls it receives, so what is checked is the order torch fires the hooks in
# and what our hooks make of it.
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from vramscope.attribution.module_hooks import _ModuleHooks, module_rows_from_agent  # noqa: E402


class RecordingAgent:
    def __init__(self):
        self.calls = []

    def module_enter(self, module_id, backward=False):
        self.calls.append(("bw_enter" if backward else "enter", module_id))

    def module_exit(self, module_id, backward=False, measured=True):
        self.calls.append(("bw_exit" if backward else "exit", module_id) +
                          ((measured,) if backward else ()))

    def set_phase(self, phase):
        self.calls.append(("phase", phase))

    def module_table(self, device):
        return [{"module_id": 3, "forward_calls": 2, "retained_bytes": 64, "max_retained_bytes": 32,
                 "backward_calls": 1, "backward_peak_bytes": 128, "live_bytes": 96},
                {"module_id": 99, "forward_calls": 1, "retained_bytes": 1, "max_retained_bytes": 1,
                 "backward_calls": 0, "backward_peak_bytes": 0, "live_bytes": 0}]


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def run(backward: bool, x_requires_grad: bool = False, model=None, normalize: bool = True):
    """Hooks one forward and backward of `model` (a fresh MLP by default). Module ids are
    process-wide (each new module gets the next one), so by default they are renumbered 1..N in
    the order the modules were first seen, which is their id order."""
    agent = RecordingAgent()
    hooks = _ModuleHooks(agent, 0, frames=True, backward=backward)
    with warnings.catch_warnings(record=True) as caught:
        # Show every warning, except what the hooks filter out themselves.
        warnings.simplefilter("always")
        hooks.install()
        try:
            x = torch.randn(2, 8, requires_grad=x_requires_grad)
            (model or mlp())(x).sum().backward()
        finally:
            hooks.remove()
    if not normalize:
        return agent.calls, hooks, caught
    order = {module_id: n + 1 for n, module_id in enumerate(sorted(hooks.paths))}
    calls = [(c[0], order[c[1]]) + c[2:] if c[0] in MODULE_EDGES else c for c in agent.calls]
    hooks.paths = {order[i]: path for i, path in hooks.paths.items()}
    return calls, hooks, caught


MODULE_EDGES = {"enter", "exit", "bw_enter", "bw_exit"}


def test_module_ids_are_stable_per_module_and_never_reused():
    model = mlp()
    _, first, _ = run(backward=False, model=model, normalize=False)
    _, second, _ = run(backward=False, model=model, normalize=False)
    _, other, _ = run(backward=False, normalize=False)
    # The same modules keep their ids in a second profile: a ledger kept between the two still
    # charges each block to the module that allocated it.
    assert first.paths == second.paths
    # Another model's modules get new ids, never one of the first model's.
    assert len(other.paths) == 4 and not set(other.paths) & set(first.paths), (first.paths,
                                                                                 other.paths)


def edges(calls, kinds):
    return [c for c in calls if c[0] in kinds]


def test_forward_frames_nest_like_the_modules_and_name_their_paths():
    calls, hooks, _ = run(backward=False)
    assert edges(calls, {"enter", "exit"}) == [
        ("enter", 1), ("enter", 2), ("exit", 2), ("enter", 3), ("exit", 3), ("enter", 4),
        ("exit", 4), ("exit", 1)], calls
    assert hooks.paths == {1: "Sequential", 2: "Sequential.0", 3: "Sequential.1",
                           4: "Sequential.2"}
    assert hooks.classes["Sequential.1"] == "ReLU"
    assert edges(calls, {"bw_enter", "bw_exit"}) == []
    # Phases: forward while the outermost module runs, backward after it returned.
    assert edges(calls, {"phase"})[:2] == [("phase", "forward"), ("phase", "backward")]


def test_backward_hooks_do_not_change_the_forward_frames():
    without, _, _ = run(backward=False)
    with_bw, _, _ = run(backward=True)
    assert edges(with_bw, {"enter", "exit"}) == edges(without, {"enter", "exit"})


def test_modules_whose_inputs_need_no_grad_close_at_the_end_of_backward():
    calls, _, caught = run(backward=True)
    assert edges(calls, {"bw_enter", "bw_exit"}) == [
        # The input x needs no grad: torch fires Sequential's and Linear0's post hooks with
        # their pre hooks; their windows stay open until the backward pass ends, innermost first.
        ("bw_enter", 1),
        ("bw_enter", 4), ("bw_exit", 4, True),
        ("bw_enter", 3), ("bw_exit", 3, True),
        ("bw_enter", 2),
        ("bw_exit", 2, True), ("bw_exit", 1, True)], calls
    assert not [w for w in caught if "Full backward hook" in str(w.message)]


def test_with_an_input_that_needs_grad_every_window_closes_in_place():
    calls, _, _ = run(backward=True, x_requires_grad=True)
    assert edges(calls, {"bw_enter", "bw_exit"}) == [
        ("bw_enter", 1), ("bw_enter", 4), ("bw_exit", 4, True), ("bw_enter", 3),
        ("bw_exit", 3, True), ("bw_enter", 2), ("bw_exit", 2, True), ("bw_exit", 1, True)]


def test_remove_restores_the_warning_filters():
    before = list(warnings.filters)
    run(backward=True)
    assert warnings.filters == before


def test_phase_only_hooks_send_no_module_edges():
    agent = RecordingAgent()
    hooks = _ModuleHooks(agent, 0)
    hooks.install()
    try:
        mlp()(torch.randn(2, 8)).sum().backward()
    finally:
        hooks.remove()
    assert edges(agent.calls, {"enter", "exit", "bw_enter", "bw_exit"}) == []
    assert hooks.rows() == []


def test_agent_rows_get_paths_and_unknown_ids_are_dropped():
    rows = module_rows_from_agent(RecordingAgent().module_table(0), {3: "Net.block"})
    assert len(rows) == 1
    r = rows[0]
    assert (r.path, r.calls, r.retained_bytes, r.max_retained_bytes, r.backward_calls,
            r.backward_peak_bytes, r.live_bytes) == ("Net.block", 2, 64, 32, 1, 128, 96)
