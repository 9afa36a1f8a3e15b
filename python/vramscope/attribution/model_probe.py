# python/vramscope/attribution/model_probe.py -- what is known of the model: batch, blocks, dtypes
"""The model-side evidence of the OOM post-mortem, read without a hook on every module call.

- The batch size is the leading dimension of the first tensor the top-level module's forward
  receives: one forward pre-hook on that module alone (one Python call per model forward, so
  about one per step), or, at the OOM, the arguments of the outermost module forward on the
  stack. The top-level module is ``Monitor(model=)``'s, else found once in the caller's frames
  at the first steps (a local holding the module that owns the optimizer's parameters: the
  training loop's ``model``, a Trainer's ``self.model``). When that module's own forward does
  not run in a step (a LightningModule's training_step calls its layers), its direct children
  are hooked instead, and the first of them to run in a step gives the batch.
- Block lists (containers of 2+ children of one class, e.g. ``transformer.h``: 12 GPT2Block)
  are the activation-checkpointing candidates; the stack at the OOM says how far through them
  the forward was.
- Parameter bytes and dtype, the optimizer's class and its state (now, and once complete).

Everything here reads host-side metadata only (shapes, dtypes, nbytes): nothing allocates on the
GPU, so it is safe in the OOM handler.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
import types
import weakref
from collections.abc import Iterable, Mapping
from types import FrameType
from typing import Any

#: How many caller frames the discovery and the OOM stack walk look at.
MAX_FRAMES = 64
#: Steps at which a Monitor without model= looks for the model before giving up.
DISCOVERY_STEPS = 3
#: Optimizer state tensors per parameter of the optimizers torch ships (Adam's exp_avg and
#: exp_avg_sq, SGD's momentum buffer, ...).
STATE_PER_PARAMETER = {"Adam": 2, "AdamW": 2, "NAdam": 2, "RAdam": 2, "Adamax": 2,
                       "Adadelta": 2, "Adagrad": 1, "RMSprop": 1, "SGD": 1, "ASGD": 1,
                       "Adafactor": 0, "LBFGS": 2}
MODULE_CALLS = ("_call_impl", "_wrapped_call_impl", "forward", "__call__")
#: Phases whose own code runs with autograd off on the OOM's thread while the step they belong
#: to records a graph: the autograd engine runs a backward with grad mode off (on only under
#: create_graph), and Optimizer.step under no_grad; autocast is off in both as a rule (the
#: forward ran under it). The step's modes are not the thread's there.
TRAINING_PHASES = frozenset({"backward", "optimizer"})
#: Functions that put a model's weights on the device from a checkpoint, their local ``model``
#: the model being loaded: transformers' and diffusers' from_pretrained (transformers first
#: reserves the whole model's bytes at once: caching_allocator_warmup), accelerate's loaders.
LOADERS = frozenset({"from_pretrained", "_load_pretrained_model", "caching_allocator_warmup",
                     "load_model_dict_into_meta",
                     "_load_state_dict_into_meta_model", "load_checkpoint_in_model",
                     "load_checkpoint_and_dispatch", "dispatch_model"})


def _module_type() -> Any:
    torch = sys.modules.get("torch")
    return getattr(getattr(torch, "nn", None), "Module", None) if torch is not None else None


def _tensor_type() -> Any:
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def first_tensor(args: Any, kwargs: Any = None) -> Any:
    """The first tensor of at least one dimension among ``args`` then ``kwargs`` values (one
    level into lists, tuples and mappings: a batch dict of input_ids and labels); None if
    none. The model's input whose shape is kept, and which the OOM post-mortem cuts."""
    tensor = _tensor_type()
    if tensor is None:
        return None
    values: list[Any] = list(args or ()) + list((kwargs or {}).values())
    for value in values:
        inner = value.values() if isinstance(value, Mapping) else (
            value if isinstance(value, (list, tuple)) else (value,))
        for item in inner:
            if isinstance(item, tensor) and item.dim() >= 1:
                return item
    return None


def input_shape(args: Any, kwargs: Any = None) -> tuple[int, ...] | None:
    """The shape of that first tensor; None if none."""
    item = first_tensor(args, kwargs)
    return tuple(int(d) for d in item.shape) if item is not None else None


def loop_input_shape(frame: FrameType | None, model: Any) -> tuple[int, ...] | None:
    """The shape of what looks like the step's input in the training loop, the first frame
    from ``frame`` outward (at most MAX_FRAMES) that holds ``model`` in a local: the first
    tensor among its locals (one level into lists, tuples and dicts) of two or more dimensions
    that needs no gradient and no graph made (a batch, not an output, a loss or a parameter).
    None without one. A guess: the probe keeps it only where a forward's input has its rank
    and batch. Never raises (it runs in the program's step end)."""
    tensor = _tensor_type()
    for _ in range(MAX_FRAMES):
        if frame is None or any(v is model for v in list(frame.f_locals.values())):
            break
        frame = frame.f_back
    if frame is None or tensor is None:
        return None
    for value in list(frame.f_locals.values()):
        if value is model:
            continue
        try:
            inner = value.values() if isinstance(value, Mapping) else (
                value if isinstance(value, (list, tuple)) else (value,))
            for item in itertools.islice(inner, 16):
                if isinstance(item, tensor) and item.dim() >= 2 and not item.requires_grad \
                        and item.grad_fn is None:
                    return tuple(int(d) for d in item.shape)
        except Exception:  # noqa: BLE001 -- a mapping of the program's that fails is no input
            continue
    return None


def leading_dim(args: Any, kwargs: Any = None) -> int | None:
    """The leading dimension of that first tensor (the batch size); None if none."""
    shape = input_shape(args, kwargs)
    return shape[0] if shape is not None else None


def block_lists(model: Any, limit: int = 4) -> list[tuple[str, str, int]]:
    """(path, child class, count) of the ModuleLists and Sequentials in ``model`` whose 2+
    children are all of one class (the stacks of blocks models are built of; a block's own
    pair of Linears is not one), the ones holding most parameters first; paths as
    ``model.get_submodule`` takes them ("" is the model itself)."""
    torch = sys.modules["torch"]  # there is a model: torch is imported
    containers = (torch.nn.ModuleList, torch.nn.Sequential)
    found = []
    for path, module in model.named_modules():
        if not isinstance(module, containers):
            continue
        children = list(module.children())
        if len(children) < 2 or len({type(c) for c in children}) != 1:
            continue
        params = sum(p.numel() for p in module.parameters())
        found.append((params, len(children), path, type(children[0]).__name__))
    found.sort(key=lambda t: (-t[0], -t[1], t[2]))
    return [(path, cls, count) for _, count, path, cls in found[:limit]]


def parameter_summary(params: Iterable[Any]) -> tuple[int, str]:
    """(bytes, dtype holding most of them) of trainable parameters."""
    by_dtype: dict[str, int] = {}
    seen = set()
    for p in params:
        if id(p) in seen or not getattr(p, "requires_grad", False):
            continue
        seen.add(id(p))
        name = str(p.dtype).removeprefix("torch.")
        by_dtype[name] = by_dtype.get(name, 0) + p.numel() * p.element_size()
    if not by_dtype:
        return 0, ""
    return sum(by_dtype.values()), max(by_dtype, key=lambda k: by_dtype[k])


#: Factored second moments keep about this share of the parameters' bytes (Adafactor).
FACTORED_STATE_SHARE = 0.02


def unwrap_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a framework's wrapper (accelerate's AcceleratedOptimizer,
    Lightning's LightningOptimizer keep it as ``.optimizer``): its class says what its state
    is."""
    for _ in range(4):
        inner = getattr(optimizer, "optimizer", None)
        if inner is None or inner is optimizer or not hasattr(inner, "param_groups"):
            break
        optimizer = inner
    return optimizer


def optimizer_summary(optimizer: Any) -> dict[str, Any]:
    """{optimizer, optimizer_state_bytes, optimizer_state_full_bytes,
    optimizer_temporary_bytes, parameter_bytes, parameter_dtype} of a torch optimizer (a
    framework's wrapper: the one inside): the state as allocated now, and as it will be once
    every parameter has its state (states per parameter times the parameter bytes;
    Adafactor's factored moments a small share); the parameter-sized temporaries of its step
    (the multi-tensor path, torch's default on CUDA, of Adam's family, or with a weight decay
    copied: the square root of every second moment at once, the decayed gradients)."""
    optimizer = unwrap_optimizer(optimizer)
    tensor = _tensor_type()
    name = type(optimizer).__name__
    params = [p for group in optimizer.param_groups for p in group["params"]]
    parameter_bytes, dtype = parameter_summary(params)
    state = 0
    for values in optimizer.state.values():
        for value in values.values():
            if tensor is not None and isinstance(value, tensor) and value.dim() > 0:
                state += value.numel() * value.element_size()
    per_param = STATE_PER_PARAMETER.get(name, 2)
    if name == "SGD" and not any(g.get("momentum", 0) for g in optimizer.param_groups):
        per_param = 0
    full = int(parameter_bytes * FACTORED_STATE_SHARE) if name == "Adafactor" \
        else per_param * parameter_bytes
    groups = optimizer.param_groups
    foreach = not any(g.get("fused") for g in groups) and \
        any(g.get("foreach") in (None, True) for g in groups)
    decay_copy = name in ("SGD", "Adam", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop") and \
        any(g.get("weight_decay", 0) for g in groups)
    temporaries = parameter_bytes if foreach and (
        STATE_PER_PARAMETER.get(name, 2) >= 2 or decay_copy) else 0
    return {"optimizer": name, "optimizer_state_bytes": state,
            "optimizer_state_full_bytes": max(state, full),
            "optimizer_temporary_bytes": temporaries,
            "parameter_bytes": parameter_bytes, "parameter_dtype": dtype}


def _owns(module: Any, first_param: Any) -> bool:
    return any(p is first_param for p in module.parameters())


def find_model(frame: FrameType | None, optimizer: Any = None) -> Any | None:
    """The top-level module of the training loop, from the locals of ``frame`` and its callers
    (and the attributes ``model``, ``module``, ``lightning_module`` of their ``self``): the
    one owning the optimizer's first parameter with the most parameters, else the local module
    with the most parameters. Looked for once, at a step end."""
    module_type = _module_type()
    if module_type is None:
        return None
    first = None
    if optimizer is not None:
        first = next((p for g in optimizer.param_groups for p in g["params"]), None)
    candidates: dict[int, Any] = {}
    for _ in range(MAX_FRAMES):
        if frame is None:
            break
        for value in list(frame.f_locals.values()):
            if isinstance(value, (type, types.ModuleType)):
                continue  # a module-level frame's globals: never touch lazy modules' attributes
            objects = [value]
            for name in ("model", "module", "lightning_module"):
                try:
                    objects.append(getattr(value, name, None))
                except Exception:  # noqa: BLE001 -- a property that fails is not a model
                    pass
            for obj in objects:
                if isinstance(obj, module_type):
                    candidates[id(obj)] = obj
        frame = frame.f_back
    if first is not None:
        owners = [m for m in candidates.values() if _owns(m, first)]
        if owners:
            return max(owners, key=lambda m: sum(1 for _ in m.parameters()))
    modules = [m for m in candidates.values() if any(True for _ in m.parameters())]
    return max(modules, key=lambda m: sum(1 for _ in m.parameters())) if modules else None


def frames_outward(frame: FrameType | None) -> list[FrameType]:
    """``frame`` and its callers, innermost first."""
    out: list[FrameType] = []
    while frame is not None and len(out) < MAX_FRAMES:
        out.append(frame)
        frame = frame.f_back
    return out


def frames_of_traceback(tb: Any) -> list[FrameType]:
    """The frames of an exception's traceback, innermost first (they keep their locals)."""
    out: list[FrameType] = []
    while tb is not None and len(out) < MAX_FRAMES:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out[::-1]


def stack_evidence(frames: list[FrameType], blocks: dict[int, tuple[int, int]] | None = None,
                   main_thread: bool = True) -> dict[str, Any]:
    """What the stack at the OOM says (``frames`` innermost first): the phase ("forward",
    "backward", "optimizer", or "load" while ``Module.to()``/``.cuda()``, a checkpoint loader
    of LOADERS or torch.load put the model on the device, with what that takes), the batch
    size of the outermost module forward running, and with ``blocks`` ({id(block): (index,
    count)}) how far through them the forward was."""
    module_type = _module_type()
    out: dict[str, Any] = {}
    outermost = None
    moving = _loading(frames, module_type)
    for frame in frames:
        code = frame.f_code
        name = code.co_filename.replace("\\", "/")
        if "/torch/optim/" in name and "phase" not in out:
            out["phase"] = "optimizer"
        if "/torch/autograd/" in name and code.co_name in ("backward", "grad") and \
                "phase" not in out:
            out["phase"] = "backward"
        if code.co_name == "generate" and "generating" not in out:
            out["generating"] = True  # transformers' generate(): a KV cache grows per token
        if module_type is None or code.co_name not in MODULE_CALLS:
            continue
        owner = frame.f_locals.get("self")
        if not isinstance(owner, module_type):
            continue
        outermost = frame
        if blocks and "forward_progress" not in out and id(owner) in blocks:
            index, count = blocks[id(owner)]
            out["forward_progress"] = (index + 1) / count
    if outermost is not None:
        out.setdefault("phase", "forward")
        local = outermost.f_locals
        if "args" in local or "kwargs" in local:
            shape = input_shape(local.get("args"), local.get("kwargs"))
        else:  # a forward(self, x, ...) frame: its parameters are its first locals
            names = outermost.f_code.co_varnames[1:outermost.f_code.co_argcount]
            shape = input_shape([local.get(n) for n in names])
        if shape is not None:
            out.update(batch_size=shape[0], batch_source="stack", input_shape=shape)
    elif "phase" not in out:
        pool = not main_thread and _pool_thread(frames)
        if moving is None and pool:
            # A thread of the program's own (a loader's pool copying weights to the device
            # while the main thread waits for it): what the main thread is doing says why.
            waiting = sys._current_frames().get(threading.main_thread().ident or -1)
            moving = _loading(frames_outward(waiting), module_type)
        if moving is not None:
            out.update(phase="load", load_call=moving[1], **_load_evidence(*moving))
        elif checkpoint := _checkpoint_load(frames):
            out.update(checkpoint)
        elif not main_thread and not pool:
            # The autograd engine runs a CUDA backward on its own thread, with no Python frames.
            out["phase"] = "backward"
    return out


def _loading(frames: list[FrameType], module_type: Any) -> tuple[Any, str] | None:
    """The model being put on the device in ``frames`` (innermost first), and how: "to"
    (``Module.to()``/``.cuda()``, the outermost ``_apply``'s module) or "from_pretrained" (a
    checkpoint loader of LOADERS, its local ``model``); None if neither runs."""
    if module_type is None:
        return None
    found = None
    for frame in frames:
        code = frame.f_code
        local = frame.f_locals
        if code.co_name == "_apply" and "/torch/nn/modules/" in \
                code.co_filename.replace("\\", "/") and isinstance(local.get("self"), module_type):
            found = (local["self"], "to")
        elif code.co_name in LOADERS and isinstance(local.get("model"), module_type):
            found = (local["model"], "from_pretrained")
    return found


def _checkpoint_load(frames: list[FrameType]) -> dict[str, Any]:
    """OomEvidence fields while torch.load restores a checkpoint's tensors to the device (the
    device each was saved from, or its map_location): the phase "load" with ``load_call``
    "torch.load", ``loaded_bytes`` the bytes of the storages it already put on a CUDA device,
    ``load_bytes`` the checkpoint file's size (0 when it is not a file); {} outside it."""
    found: dict[str, Any] = {}
    for frame in frames:
        code = frame.f_code
        if not code.co_filename.replace("\\", "/").endswith("/torch/serialization.py"):
            continue
        local = frame.f_locals
        if code.co_name == "_load" and isinstance(local.get("loaded_storages"), dict):
            found["loaded_bytes"] = sum(
                s.nbytes() for s in itertools.islice(local["loaded_storages"].values(), 1 << 16)
                if getattr(getattr(s, "device", None), "type", None) == "cuda")
        elif code.co_name == "load" and "map_location" in local:
            found["load_bytes"] = _file_size(local.get("f"))
    if not found:
        return {}
    return {"phase": "load", "load_call": "torch.load", "load_bytes": found.get("load_bytes", 0),
            "loaded_bytes": found.get("loaded_bytes", 0)}


def _file_size(f: Any) -> int:
    """The size of the file torch.load reads (a path or an open file), 0 when unknown."""
    try:
        if isinstance(f, (str, os.PathLike)):
            return os.stat(f).st_size
        fileno = getattr(f, "fileno", None)
        return os.fstat(fileno()).st_size if callable(fileno) else 0
    except (OSError, ValueError, TypeError):
        return 0


def _pool_thread(frames: list[FrameType]) -> bool:
    """Do ``frames`` (innermost first) run on a thread Python started (``threading``'s
    bootstrap outermost), not on one of torch's own (the autograd engine's)?"""
    return bool(frames) and frames[-1].f_code.co_name.startswith("_bootstrap") and \
        frames[-1].f_code.co_filename.replace("\\", "/").endswith("/threading.py")


def _load_evidence(model: Any, call: str) -> dict[str, Any]:
    """What putting ``model`` on the device takes (``call`` as _loading says): the bytes of its
    parameters and buffers (``load_bytes``; the sizes they have now), those already on a CUDA
    device (``loaded_bytes``), and the dtype of most of them (``parameter_dtype``). A
    transformers model being loaded has its tied weights (the output layer that is the
    embedding) untied until the checkpoint is in: those are not counted twice."""
    total = loaded = 0
    by_dtype: dict[str, int] = {}
    seen: set[int] = set()
    tied = getattr(model, "all_tied_weights_keys", None) if call == "from_pretrained" else None
    if isinstance(tied, Mapping) and tied:
        named = dict(model.named_parameters(remove_duplicate=False))
        seen.update(id(named[target]) for target, source in tied.items()
                    if target in named and source in named and named[target] is not named[source])
    for t in itertools.chain(model.parameters(), model.buffers()):
        if id(t) in seen:
            continue
        seen.add(id(t))
        size = t.numel() * t.element_size()
        total += size
        loaded += size if t.device.type == "cuda" else 0
        dtype = str(t.dtype).removeprefix("torch.")
        by_dtype[dtype] = by_dtype.get(dtype, 0) + size
    out: dict[str, Any] = {"load_bytes": total, "loaded_bytes": loaded}
    if by_dtype:
        out["parameter_dtype"] = max(by_dtype, key=lambda k: by_dtype[k])
    return out


class ModelProbe:
    """The batch size from one forward pre-hook on the top-level module, and the model's and
    optimizer's OOM evidence. ``attach(model)`` once the model is known; ``close()`` removes the
    hook. The hook keeps only ints and a bool; the model is held weakly."""

    def __init__(self) -> None:
        self._model: weakref.ref | None = None
        self._optimizer: weakref.ref | None = None
        self._handle: Any = None
        self._blocks: list[tuple[str, str, int]] = []
        #: {id(block): (index, count)} of the first block list, for the forward's progress.
        self._block_index: dict[int, tuple[int, int]] = {}
        #: Hooks on the top-level module's children, once its own forward was seen never to
        #: run in a step (Lightning calls training_step, which calls the layers).
        self._child_handles: list[Any] = []
        #: Did a hooked forward read the batch since the last step end?
        self._seen_in_step = False
        self.batch_size: int | None = None
        #: The model input's shape at the last forward, and the smallest shape seen at a step
        #: end per batch size (a sequence that grew at the same batch is told apart by it: over
        #: the run, not only since the last step, which may have had the failing length).
        self.input_shape: tuple[int, ...] | None = None
        self._shapes_by_batch: dict[int, tuple[int, ...]] = {}
        #: The shape of the input found beside the model in the loop's locals when discovery
        #: found the model (that step ran before the hook): a past shape once a forward's input
        #: has its rank and batch (then dropped). The step a curriculum runs out at may be the
        #: one right after it.
        self._before_attach: tuple[int, ...] | None = None
        #: Was autocast on in the last forward (None: no forward seen), and its dtype ("" when
        #: off)?
        self.autocast: bool | None = None
        self.autocast_dtype = ""
        self.discovery_tries = 0

    @property
    def attached(self) -> bool:
        return self._handle is not None

    def attach(self, model: Any, optimizer: Any = None) -> None:
        if self._handle is not None:
            return
        self._model = weakref.ref(model)
        if optimizer is not None:
            self.set_optimizer(optimizer)
        self._handle = model.register_forward_pre_hook(self._on_forward, with_kwargs=True)
        self._blocks = block_lists(model)
        if self._blocks:
            container = model.get_submodule(self._blocks[0][0])
            children = list(container.children())
            self._block_index = {id(c): (i, len(children)) for i, c in enumerate(children)}

    def set_optimizer(self, optimizer: Any) -> None:
        if optimizer is not None and self._optimizer is None:
            self._optimizer = weakref.ref(optimizer)

    def discover(self, frame: FrameType | None) -> None:
        """Looks for the model in the callers of a step end (at the first DISCOVERY_STEPS)."""
        if self._handle is not None or self.discovery_tries >= DISCOVERY_STEPS:
            return
        self.discovery_tries += 1
        optimizer = self._optimizer() if self._optimizer is not None else None
        model = find_model(frame, optimizer)
        if model is not None:
            self.attach(model)
            self._before_attach = loop_input_shape(frame, model)

    def _past_shape(self, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The smallest input shape that ran at ``shape``'s batch, of the same rank: the steps
        seen, and the input found at discovery."""
        found = [s for s in (self._shapes_by_batch.get(shape[0]), self._before_attach)
                 if s is not None and len(s) == len(shape) and s[0] == shape[0]]
        return min(found, key=math.prod) if found else None

    def step_end(self) -> None:
        """At a step end: when the top-level forward did not run during the step, hooks its
        direct children instead (the first of them to run in a step gives the batch)."""
        model = self._model() if self._model is not None else None
        if model is not None and self._handle is not None and not self._seen_in_step and \
                not self._child_handles:
            self._child_handles = [c.register_forward_pre_hook(self._on_child_forward,
                                                               with_kwargs=True)
                                   for c in model.children()]
        self._seen_in_step = False
        shape = self.input_shape
        if shape is not None:
            smallest = min(shape, self._past_shape(shape) or shape, key=math.prod)
            self._before_attach = None
            if shape[0] in self._shapes_by_batch or len(self._shapes_by_batch) < 64:
                self._shapes_by_batch[shape[0]] = smallest

    def _on_forward(self, module: Any, args: Any, kwargs: Any) -> None:
        # One call per forward of the top-level module: the leading dimension and autocast.
        shape = input_shape(args, kwargs)
        if shape is not None:
            self.batch_size, self.input_shape = shape[0], shape
            self._seen_in_step = True
        torch = sys.modules.get("torch")
        if torch is None:
            return
        self.autocast = bool(torch.is_autocast_enabled("cuda"))
        self.autocast_dtype = str(torch.get_autocast_dtype("cuda")).removeprefix("torch.") \
            if self.autocast else ""

    def _on_child_forward(self, module: Any, args: Any, kwargs: Any) -> None:
        if not self._seen_in_step:
            self._on_forward(module, args, kwargs)

    def evidence(self, frames: list[FrameType] | None = None,
                 main_thread: bool = True) -> dict[str, Any]:
        """OomEvidence fields: the batch size, phase and progress (from ``frames`` when given),
        block lists, parameter and optimizer numbers."""
        out: dict[str, Any] = {}
        model = self._model() if self._model is not None else None
        optimizer = self._optimizer() if self._optimizer is not None else None
        if optimizer is not None:
            out.update(optimizer_summary(optimizer))
        elif model is not None:
            out["parameter_bytes"], out["parameter_dtype"] = parameter_summary(model.parameters())
        if self._blocks:
            out["block_lists"] = list(self._blocks)
        if self.autocast is not None:
            out["autocast"], out["autocast_dtype"] = self.autocast, self.autocast_dtype
        if self.batch_size is not None:
            out.update(batch_size=self.batch_size, batch_source="forward")
            if self.input_shape is not None:
                out["input_shape"] = self.input_shape
        if frames is not None:
            stack = stack_evidence(frames, self._block_index, main_thread)
            if "batch_size" in out:
                stack.pop("batch_size", None)
                stack.pop("batch_source", None)
                stack.pop("input_shape", None)
            out.update(stack)
            # Read on the OOM's own thread (grad mode is per thread): False under no_grad or
            # inference_mode, where nothing is saved for a backward; a backward or an
            # optimizer step belongs to a step that records (TRAINING_PHASES).
            torch = sys.modules.get("torch")
            if torch is not None:
                out["grad_enabled"] = out.get("phase") in TRAINING_PHASES or \
                    bool(torch.is_grad_enabled())
        shape = out.get("input_shape")
        past = self._past_shape(shape) if shape is not None else None
        if past is not None:
            out["past_input_shape"] = past
        return out

    def close(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        for handle in self._child_handles:
            handle.remove()
        self._child_handles = []


def oom_frames(first: FrameType | None) -> tuple[list[FrameType], bool]:
    """The frames of the thread that hit the OOM (the observer runs on it), innermost first,
    from ``first``, the frame that was running when the allocation failed (the observer's
    caller; None on a thread without Python frames, the autograd engine's); and is it the main
    thread?"""
    return frames_outward(first), threading.current_thread() is threading.main_thread()
