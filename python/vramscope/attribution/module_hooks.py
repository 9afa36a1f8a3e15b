# python/vramscope/attribution/module_hooks.py -- per-module attribution: torch's module hooks, rows
"""The module side of ``vramscope.profile()``: global forward (and optionally full backward)
module hooks that open and close module frames in the agent, which counts the bytes in C++
(src/attribution/module_frames.*); and the rows and table built from the agent's numbers.
See profile.py for what the numbers mean."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import threading
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

from .._core.units import format_bytes

__all__ = ["ModuleRow", "module_rows_from_agent", "format_module_table", "repeated_modules"]


@dataclasses.dataclass
class ModuleRow:
    """One module path's forward calls and what they left alive, and its backward peak."""

    path: str
    calls: int = 0
    #: Bytes allocated inside the forward (children included) still live when the outermost
    #: forward returned, summed over calls, and the largest of one call.
    retained_bytes: int = 0
    max_retained_bytes: int = 0
    #: Backward calls measured, and the largest peak of live bytes during one of them above
    #: the live bytes at its start.
    backward_calls: int = 0
    backward_peak_bytes: int = 0
    #: Bytes live now that were allocated while this module was the innermost running forward
    #: (children not included), whenever they are freed: a module whose value grows from step
    #: to step keeps what it allocates (the OOM post-mortem's growing_modules).
    live_bytes: int = 0


def module_rows_from_agent(raw: Sequence[dict[str, Any]], paths: dict[int, str]) -> list[ModuleRow]:
    """The agent's ``module_table()`` rows with module ids turned into paths."""
    out = []
    for r in raw:
        path = paths.get(int(r["module_id"]))
        if path is None:
            continue
        out.append(ModuleRow(path, int(r["forward_calls"]), int(r["retained_bytes"]),
                             int(r["max_retained_bytes"]), int(r["backward_calls"]),
                             int(r["backward_peak_bytes"]), int(r["live_bytes"])))
    return out


def format_module_table(rows: Sequence[ModuleRow], row_limit: int = 20) -> str:
    """Module tree order (paths sorted), with indentation by depth. "left alive/call" is the
    forward's retention per call; "backward peak" the largest rise of live memory during one of
    its backward calls ("-" when not measured: ``profile(backward=False)``)."""
    lines = [f"{'module':<50} {'calls':>6} {'left alive/call':>16} {'backward peak':>14}"]
    for r in sorted(rows, key=lambda r: r.path)[:row_limit or None]:
        depth = r.path.count(".")
        name = "  " * depth + r.path.rsplit(".", 1)[-1]
        per_call = r.retained_bytes // max(r.calls, 1)
        backward = format_bytes(r.backward_peak_bytes) if r.backward_calls else "-"
        lines.append(f"{name:<50} {r.calls:>6} {format_bytes(per_call):>16} {backward:>14}")
    return "\n".join(lines) + "\n"


def repeated_modules(rows: Sequence[ModuleRow],
                     classes: dict[str, str]) -> list[tuple[str, int, int]]:
    """(class, instances, bytes left alive per instance and call) for module classes used 2+
    times: the activation-checkpointing candidates of the OOM advice."""
    by_class: dict[str, list[int]] = collections.defaultdict(list)
    for r in rows:
        cls = classes.get(r.path)
        if cls and r.calls:
            by_class[cls].append(r.retained_bytes // r.calls)
    return [(cls, len(v), sum(v) // len(v)) for cls, v in by_class.items() if len(v) >= 2]


#: The agent's id of each module ever hooked, for the life of the module. Stable across
#: profiles: a ledger kept alive between two profile()s (a Monitor with categories holds it)
#: still charges a block to the module that allocated it, and an id never names two modules.
_module_ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_next_module_id = itertools.count(1)
_module_ids_lock = threading.Lock()


def _module_id(module: Any) -> int:
    with _module_ids_lock:
        known = _module_ids.get(module)
        if known is None:
            known = _module_ids[module] = next(_next_module_id)
        return known


#: torch warns at every backward through a module whose inputs need no gradient once global
#: full backward hooks exist; profile(backward=True) expects that and handles it.
_NO_INPUT_GRAD_WARNING = "Full backward hook is firing when gradients are computed"


class _ModuleHooks:
    """Global module hooks while profiling: training-phase markers always; with ``frames`` the
    agent's module frames (forward retention); with ``backward`` its backward windows.

    Window edges go through the agent, which drains the event rings first, so every edge lands
    in event order; the bytes are counted in C++ (src/attribution/module_frames.*).
    """

    def __init__(self, agent: Any, device: int, frames: bool = False,
                 backward: bool = False) -> None:
        self._agent = agent
        self._device = device
        self._frames = frames
        self._backward = backward and frames
        self._stack: list[tuple[Any, int]] = []
        #: id(module) -> (path, module id given to the agent).
        self._modules: dict[int, tuple[str, int]] = {}
        self.paths: dict[int, str] = {}
        self.classes: dict[str, str] = {}
        self._handles: list[Any] = []
        self._deferred: list[int] = []
        self._lock = threading.Lock()
        self._filter: Any = None

    def install(self) -> None:
        import torch.nn.modules.module as m
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )
        self._handles = [m.register_module_forward_pre_hook(self._pre),
                         m.register_module_forward_hook(self._post, always_call=True),
                         register_optimizer_step_pre_hook(self._opt_pre),
                         register_optimizer_step_post_hook(self._opt_post)]
        if self._backward:
            self._handles += [m.register_module_full_backward_pre_hook(self._bw_pre),
                              m.register_module_full_backward_hook(self._bw_post)]
            warnings.filterwarnings("ignore", message=_NO_INPUT_GRAD_WARNING)
            self._filter = warnings.filters[0]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self._agent.set_phase("other")
        if self._filter is not None:
            if self._filter in warnings.filters:
                # A list at run time; typeshed declares a Sequence.
                warnings.filters.remove(self._filter)  # type: ignore[attr-defined]
                getattr(warnings, "_filters_mutated", lambda: None)()
            self._filter = None

    def _module(self, module: Any) -> tuple[str, int]:
        known = self._modules.get(id(module))
        if known is None:
            parent = self._stack[-1] if self._stack else None
            if parent is None:
                path = type(module).__name__
            else:
                parent_path = self._modules[id(parent[0])][0]
                child = next((k for k, v in parent[0]._modules.items() if v is module),
                             type(module).__name__)
                path = f"{parent_path}.{child}"
            known = (path, _module_id(module))
            self._modules[id(module)] = known
            self.paths[known[1]] = path
            self.classes[path] = type(module).__name__
        return known

    def _pre(self, module: Any, args: Any) -> None:
        if not self._stack:
            self._agent.set_phase("forward")
        _, module_id = self._module(module)
        self._stack.append((module, module_id))
        if self._frames:
            self._agent.module_enter(module_id)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self._stack or self._stack[-1][0] is not module:
            return
        _, module_id = self._stack.pop()
        if self._frames:
            self._agent.module_exit(module_id)
        if not self._stack:
            # Forward done: what follows until the optimizer is backward (or evaluation).
            self._agent.set_phase("backward")

    def _bw_pre(self, module: Any, grad_output: Any) -> None:
        known = self._modules.get(id(module))
        if known is not None:
            self._agent.module_enter(known[1], True)

    def _bw_post(self, module: Any, grad_input: Any, grad_output: Any) -> None:
        known = self._modules.get(id(module))
        if known is None:
            return
        if any(g is not None for g in grad_input):
            self._agent.module_exit(known[1], True, True)
            return
        # No input of this module needed a gradient: torch calls this hook as soon as the
        # output's gradient arrives, before the module's own backward (its weight gradients)
        # ran. Its window ends with this backward pass instead.
        with self._lock:
            first = not self._deferred
            self._deferred.append(known[1])
        if first:
            try:
                from torch.autograd import Variable
                Variable._execution_engine.queue_callback(self._close_deferred)
            except RuntimeError:
                self._close_deferred(measured=False)

    def _close_deferred(self, measured: bool = True) -> None:
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for module_id in reversed(deferred):  # innermost first
            self._agent.module_exit(module_id, True, measured)

    def rows(self) -> list[ModuleRow]:
        """The agent's per-module rows of the hooked device, by path."""
        if not self._frames:
            return []
        return module_rows_from_agent(self._agent.module_table(self._device), self.paths)

    def _opt_pre(self, *args: Any) -> None:
        self._agent.set_phase("optimizer")

    def _opt_post(self, *args: Any) -> None:
        self._agent.set_phase("other")
