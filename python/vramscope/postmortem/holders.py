# python/vramscope/postmortem/holders.py -- the containers that keep tensors from step to step
"""A leak that ends in an OOM is usually a list or dict of the program's own that keeps a
tensor per step: losses appended for logging (each with its autograd graph, and so with the
activations its step saved), outputs kept for metrics. Once the OOM has unwound, the frames of
its traceback still hold them. ``find(frames)`` names them: the program's locals and globals,
and one level into the objects of the program's own classes among them (``self.outputs`` of a
LightningModule, a trainer's lists). ``release(found, allocated)`` empties each, in a process
the OOM is ending, and measures what that freed: the bytes the fix gives back, exactly, before
the step is run again.

Only the program's own frames are read (not installed libraries': an optimizer's lists of
gradients are its step, not a leak), and only a bounded part of each container.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import itertools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

from ..attribution.model_probe import MODULE_CALLS
from . import scene as _scene
from .advice import HOLDER_MIN_ITEMS as MIN_ITEMS
from .advice import Holder
from .scene import library_roots, programs_class, programs_frame

__all__ = ["Found", "earlier_tensors", "find", "graph_alive", "release", "tensors_of",
           "trainer_evaluation"]

#: Items read of one container (the newest, at its end), and entries of one item (a tuple
#: (loss, logits), a dict of outputs).
SCAN_ITEMS = 4096
ITEM_ENTRIES = 16
#: Containers reported, the most graphs and bytes first.
MAX_HOLDERS = 8
#: Submodules of a model whose attributes are read.
MAX_MODULES = 4096
#: Graph nodes looked at to tell whether a tensor's graph still holds what it saved (a few
#: microseconds each).
GRAPH_NODES = 4096
#: transformers' Trainer loop that keeps every step's predictions (evaluate(), predict()),
#: and how deep into its kept structures (tuples of logits, dicts of outputs) tensors are read.
EVAL_LOOP = "evaluation_loop"
EVAL_DEPTH = 4


@dataclasses.dataclass
class Found:
    """A holder and its container (kept until it is released)."""

    holder: Holder
    container: Any


def tensors_of(item: Any, torch: Any) -> list[Any]:
    """The tensors an item is or holds one level down (a tuple, a list, a dict, transformers'
    ModelOutput: its first ITEM_ENTRIES), parameters left out."""
    if isinstance(item, torch.Tensor):
        values: Sequence[Any] = [item]
    elif isinstance(item, Mapping):
        values = list(itertools.islice(item.values(), ITEM_ENTRIES))
    elif isinstance(item, (list, tuple)):
        values = item[:ITEM_ENTRIES]
    else:
        return []
    return [v for v in values if isinstance(v, torch.Tensor)
            and not isinstance(v, torch.nn.Parameter)]


def _holder(name: str, where: str, container: Any, torch: Any) -> Holder | None:
    """The holder a container is, or None: too few items, or no tensor on the device kept."""
    try:
        count = len(container)
    except TypeError:
        return None
    if count < MIN_ITEMS:
        return None
    # The newest items (a dict keeps its insertion order), never a copy of the whole.
    newest: Any = reversed(container.values()) if isinstance(container, dict) else \
        reversed(container)
    items = list(itertools.islice(newest, SCAN_ITEMS))
    tensors = graphs = data = 0
    storages: set[int] = set()
    for item in items:
        for t in tensors_of(item, torch):
            if t.device.type not in _scene.INPUT_DEVICE_TYPES:
                continue
            tensors += 1
            graphs += t.grad_fn is not None
            try:
                storage = t.untyped_storage()
                if storage.data_ptr() not in storages:
                    storages.add(storage.data_ptr())
                    data += storage.nbytes()
            except Exception:  # noqa: BLE001 -- no storage (sparse, nested, a subclass): counted only
                pass
    if graphs < MIN_ITEMS and tensors < MIN_ITEMS:
        return None
    return Holder(name=name, where=where, kind=type(container).__name__, items=count,
                  tensors=tensors, graphs=graphs, data_bytes=data)


def _containers(value: Any) -> bool:
    return isinstance(value, (list, dict, collections.deque))


def _record(value: Any) -> bool:
    """Is ``value`` a dict keyed by names ({"loss": ..., "logits": ...}: a batch, a step's
    outputs, a table of metric lists), not an accumulator keyed by step or sample?"""
    return isinstance(value, dict) and all(isinstance(k, str)
                                           for k in itertools.islice(value, 64))


def find(frames: Sequence[FrameType]) -> list[Found]:
    """The containers of the program's frames (innermost first) that keep tensors on the
    device: lists, deques and dicts keyed by step among the locals (a script's globals at its
    top level), the lists in a dict keyed by names (``metrics['loss']``), and the same one
    level into the objects of the program's own classes among them (``self.outputs``) and
    into a model's submodules of its classes (``model.cache.kept``).
    Host-side only; nothing is changed."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    libraries = library_roots()
    seen: set[int] = set()
    out: list[Found] = []

    def look(name: str, where: str, value: Any) -> None:
        if id(value) in seen or not _containers(value):
            return
        seen.add(id(value))
        if _record(value):
            for key, inner in list(itertools.islice(value.items(), 64)):
                if isinstance(inner, (list, collections.deque)):
                    look(f"{name}[{key!r}]", where, inner)
            return
        holder = _holder(name, where, value, torch)
        if holder is not None:
            out.append(Found(holder, value))

    def attributes_of(name: str, where: str, value: Any) -> None:
        attributes = getattr(value, "__dict__", None)
        if not isinstance(attributes, dict) or id(value) in seen:
            return
        seen.add(id(value))  # an object (a model) is read once, under its first name
        for attr, inner in list(attributes.items())[:256]:
            if not attr.startswith("__") and _containers(inner) and \
                    attr not in ("_parameters", "_buffers", "_modules"):
                look(f"{name}.{attr}", where, inner)

    for frame in frames:
        if not programs_frame(frame, libraries):
            continue
        code = frame.f_code
        base = os.path.basename(code.co_filename)
        where = (f"the globals of {base}" if code.co_name == "<module>" else
                 f"{code.co_name}() in {base}:{frame.f_lineno}")
        for name, value in list(frame.f_locals.items()):
            if _containers(value):
                look(name, where, value)
                continue
            if isinstance(value, torch.nn.Module):
                # A model and its submodules of the program's own classes (a cache module
                # keeping its outputs), named by their paths.
                for path, module in itertools.islice(value.named_modules(), MAX_MODULES):
                    if id(module) not in seen and programs_class(module, libraries):
                        attributes_of(f"{name}.{path}" if path else name, where, module)
            elif not isinstance(value, type) and not callable(value) and \
                    programs_class(value, libraries):
                attributes_of(name, where, value)
    out.sort(key=lambda f: (-f.holder.graphs, -f.holder.data_bytes))
    return out[:MAX_HOLDERS]


def _empty(container: Any) -> None:
    if isinstance(container, list):
        del container[:]
    else:
        container.clear()


def release(found: Sequence[Found], allocated: Callable[[], int],
            which: Callable[[Holder], bool] | None = None) -> list[Holder]:
    """Empties each container (those ``which`` accepts, all by default), in order, and records
    in its holder the bytes that freed (``allocated()`` before and after, with a collection
    between: what giving up the kept tensors gives back). Returns the holders released. For a
    process the OOM is ending: the program's containers are emptied."""
    out = []
    for f in found:
        if which is not None and not which(f.holder):
            continue
        gc.collect()
        before = allocated()
        _empty(f.container)
        gc.collect()
        f.holder.freed_bytes = max(0, before - allocated())
        out.append(f.holder)
    return out


# ----- what earlier steps left alive, for the measurement

def _saved_names(node: Any) -> list[str]:
    """The ``_saved_*`` attributes of an autograd node's class (read once per class)."""
    kind = type(node)
    names = _SAVED_NAMES.get(kind)
    if names is None:
        names = _SAVED_NAMES[kind] = [n for n in dir(node) if n.startswith("_saved_")]
    return names


_SAVED_NAMES: dict[type, list[str]] = {}


def graph_alive(t: Any) -> bool:
    """Does tensor ``t``'s autograd graph still hold something it saved (the failing step's
    own: no backward ran through it, or one failed part-way), rather than a graph a backward
    freed whole (an earlier step's output)? Dead only when every saved tensor among the
    GRAPH_NODES nodes looked at (depth first: the input's end of the graph, which a backward
    reaches last) was freed; a graph that saved nothing there counts as alive. A saved tensor
    with the program's unpack hook is not unpacked to find out (the hook may copy it back to
    the device): such a graph counts as alive."""
    torch = sys.modules["torch"]
    stack = [t.grad_fn]
    # The nodes looked at, held: a node's Python object may be made for the asking, and an
    # id is only unique while its object lives.
    visited: dict[int, Any] = {}
    freed = False
    while stack and len(visited) < GRAPH_NODES:
        node = stack.pop()
        if node is None or id(node) in visited:
            continue
        visited[id(node)] = node
        for name in _saved_names(node):
            raw = getattr(node, "_raw" + name, None)
            if getattr(raw, "unpack_hook", None) is not None:
                return True
            try:
                value = getattr(node, name)
            except RuntimeError:  # "Trying to backward through the graph a second time ..."
                freed = True
                continue
            if isinstance(value, torch.Tensor) or isinstance(value, (list, tuple)) and any(
                    isinstance(v, torch.Tensor) for v in value):
                return True
        stack.extend(f for f, _ in node.next_functions)
    return not freed


def earlier_tensors(frames: Sequence[FrameType]) -> list[Any]:
    """The tensors on the device that the program's frames outside the failing forward
    (the training loop, its helpers, a script's globals) hold and that are not the failing
    step's own graph: an earlier step's outputs (their graphs freed by its backward), data kept
    on the device. In the program they stay alive through the next step; the measurement of
    the step keeps them alive too (freeing the traceback's frames would let them go), so that
    its need is the program's. ``frames``: innermost first."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    # Frames up to the outermost module call running at the OOM are the failing forward's.
    outer = 0
    for i, frame in enumerate(frames):
        if frame.f_code.co_name in MODULE_CALLS and \
                isinstance(frame.f_locals.get("self"), torch.nn.Module):
            outer = i + 1
    libraries = library_roots()
    kept: list[Any] = []
    seen: set[int] = set()
    for frame in frames[outer:]:
        if not programs_frame(frame, libraries):
            continue
        for value in list(frame.f_locals.values()):
            for t in tensors_of(value, torch):
                if id(t) in seen or t.device.type not in _scene.INPUT_DEVICE_TYPES:
                    continue
                seen.add(id(t))
                if t.grad_fn is None or not graph_alive(t):
                    kept.append(t)
    return kept


def trainer_evaluation(frames: Sequence[FrameType]) -> dict[str, int]:
    """OomEvidence fields for an OOM inside transformers' Trainer evaluation or prediction loop
    (``frames`` innermost first; {} outside it). The loop keeps each step's predictions,
    labels and losses on the device until it ends, or, with ``eval_accumulation_steps``, until
    it moves them to the host every that many steps: ``eval_kept_bytes``, the bytes its
    containers (EvalLoopContainer's ``tensors``; ``*_host`` before 4.40) hold on the
    device, ``eval_step`` the failing step's index, ``eval_accumulation_steps`` (0: unset).
    Host-side only; nothing is changed."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    for frame in frames:
        code = frame.f_code
        if code.co_name != EVAL_LOOP or \
                "/transformers/" not in code.co_filename.replace("\\", "/"):
            continue
        local = frame.f_locals
        seen: set[int] = set()
        kept = 0
        for name, value in list(local.items()):
            if hasattr(value, "to_cpu_and_numpy") and hasattr(value, "tensors"):
                kept += _nested_bytes(value.tensors, torch, seen, EVAL_DEPTH)
            elif name.endswith("_host"):
                kept += _nested_bytes(value, torch, seen, EVAL_DEPTH)
        step = local.get("step")
        every = getattr(local.get("args"), "eval_accumulation_steps", None)
        return {"eval_kept_bytes": kept,
                "eval_step": step if isinstance(step, int) and step >= 0 else 0,
                "eval_accumulation_steps": every if isinstance(every, int) and every > 0 else 0}
    return {}


def _nested_bytes(value: Any, torch: Any, seen: set[int], depth: int) -> int:
    """The bytes of the device tensors in ``value`` (a tensor, or tuples, lists and dicts of
    them ``depth`` levels down, SCAN_ITEMS of each), each counted once."""
    if isinstance(value, torch.Tensor):
        if id(value) in seen or value.device.type not in _scene.INPUT_DEVICE_TYPES:
            return 0
        seen.add(id(value))
        return value.numel() * value.element_size()
    if depth <= 0:
        return 0
    items = value.values() if isinstance(value, Mapping) else \
        value if isinstance(value, (list, tuple)) else ()
    return sum(_nested_bytes(v, torch, seen, depth - 1)
               for v in itertools.islice(items, SCAN_ITEMS))
