# python/vramscope/postmortem/scene.py -- what the OOM's stack holds to run the failing step again
"""At an OOM, the frames of the failing thread still hold the model, the input it was called
with and the optimizer. ``capture(frames)`` keeps them (an ``OomScene``), so that once the
exception has unwound and freed the step's activations, the step can be run again at slices of
its batch and measured (vramscope.postmortem.measure).

Where the input comes from, in order: the outermost module forward running at the OOM (its
``args``/``kwargs``); a ``generate()`` call (its input ids and arguments); else the locals of
the frames that hold the model (a training loop's ``x``, ``batch``, ``inputs``), each tried in
turn when measured. Host-side only: nothing here allocates on the GPU.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from ..attribution.model_probe import MODULE_CALLS, find_model, first_tensor

__all__ = ["OomScene", "Inputs", "capture", "library_roots", "programs_class", "programs_frame",
           "resize_inputs", "slice_inputs"]

#: Where a model input lives (tests add "cpu": their steps run on the host).
INPUT_DEVICE_TYPES: tuple[str, ...] = ("cuda",)


@dataclasses.dataclass
class Inputs:
    """One way to call the model: positional and keyword arguments, and the batch size (the
    leading dimension of the first tensor among them)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    batch_size: int
    #: Where they were found, in words ("the forward running at the OOM", "local x of train").
    source: str
    #: Are they the arguments of the model's ``training_step`` (a LightningModule's batch,
    #: found beside it after its forward had returned), not of its forward?
    training_step: bool = False
    #: Is the batch a list of samples (a detection model's images, each (C, H, W), and their
    #: targets), not the leading dimension of a tensor?
    list_batch: bool = False

    @property
    def device(self) -> Any:
        """The device of the first tensor (the batch's)."""
        return self.first.device

    @property
    def first(self) -> Any:
        """The first tensor among the arguments: the one whose shape the model probe reads."""
        return first_tensor(self.args, self.kwargs)


@dataclasses.dataclass
class OomScene:
    """What is needed to run the failing step again."""

    model: Any
    #: Candidate inputs, the most likely first (one when a forward was on the stack).
    inputs: list[Inputs]
    optimizer: Any = None
    #: Was autograd recording, and autocast on (its dtype), on the failing thread at the OOM
    #: (None: not known, read after the unwinding)?
    grad_enabled: bool | None = None
    autocast_dtype: Any = None
    #: A ``generate()`` call on the stack: its keyword arguments (the input is in ``inputs``).
    generate_kwargs: dict[str, Any] | None = None
    #: Did the parameters hold gradients at a forward OOM (zero_grad(set_to_none=False): the
    #: gradients stay allocated through the next forward)?
    gradients_resident: bool = False


def library_roots() -> tuple[str, ...]:
    """Folders of installed code: the standard library and site-packages (a frame there is
    a library's, not the program's)."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # vramscope's own
    return tuple(sorted(os.path.join(r, "") for r in roots if r))


def _programs_file(path: str, libraries: tuple[str, ...]) -> bool:
    """Is the source file at ``path`` the program's own (not under ``libraries``, nor an
    installed package's)?"""
    path = os.path.abspath(path)
    return not path.startswith(libraries) and "site-packages" not in path \
        and "dist-packages" not in path


def programs_frame(frame: FrameType, libraries: tuple[str, ...]) -> bool:
    """Is ``frame`` the program's own code (not the standard library's, an installed
    package's, or generated code's; ``python -c`` and a script on stdin are the program's)?"""
    name = frame.f_code.co_filename
    if name in ("<string>", "<stdin>"):
        return True
    return bool(name) and not name.startswith("<") and _programs_file(name, libraries)


def programs_class(value: Any, libraries: tuple[str, ...]) -> bool:
    """Is ``value``'s class the program's own (a LightningModule, a trainer of its own), whose
    attributes are program state, not a library's (an optimizer's state, a cache object)?"""
    import inspect

    try:
        path = inspect.getfile(type(value))
    except (TypeError, OSError):  # a built-in class, or one without a file (python -c)
        return type(value).__module__ == "__main__"
    return _programs_file(path, libraries)


def _torch() -> Any:
    return sys.modules.get("torch")


def _inputs(args: Sequence[Any], kwargs: Mapping[str, Any], source: str) -> Inputs | None:
    first = first_tensor(args, kwargs)
    if first is None or first.device.type not in INPUT_DEVICE_TYPES:
        return None
    return Inputs(tuple(args), dict(kwargs), int(first.shape[0]), source)


def _list_batch(got: Inputs) -> Inputs | None:
    """The same arguments read as a list of samples, when the first tensor is an item of a
    list or tuple of tensors (a detection model's images): the batch is that list's length.
    Tried after the tensor reading, which a tuple (x, mask) of batches needs."""
    torch = _torch()
    for value in [*got.args, *got.kwargs.values()]:
        if isinstance(value, (list, tuple)) and value and \
                all(isinstance(v, torch.Tensor) for v in value):
            if got.first is not value[0]:
                return None
            return dataclasses.replace(got, batch_size=len(value), list_batch=True,
                                       source=got.source + ", as a list of samples")
    return None


def _with_lists(found: Sequence[Inputs]) -> list[Inputs]:
    """Each reading of the inputs, followed by its list-of-samples reading where there is one."""
    out: list[Inputs] = []
    for got in found:
        out.append(got)
        listed = _list_batch(got)
        if listed is not None:
            out.append(listed)
    return out


def _frame_inputs(frame: FrameType, positional: int | None = None
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments a method's frame was called with, from its parameters (``self`` left
    out): the named positional ones (the first ``positional`` of them when given), then
    ``*args``, with ``**kwargs`` and the keyword-only ones as keywords."""
    import inspect

    local = frame.f_locals
    code = frame.f_code
    names = code.co_varnames
    count = code.co_argcount
    named = list(names[1:count])
    if positional is not None:
        named = named[:positional]
    args: list[Any] = [local.get(n) for n in named]
    at = count + code.co_kwonlyargcount
    kwargs = {n: local.get(n) for n in names[count:at] if n in local}
    if code.co_flags & inspect.CO_VARARGS:
        args += list(local.get(names[at]) or ())
        at += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(dict(local.get(names[at]) or {}))
    return tuple(args), kwargs


def _candidate(value: Any) -> bool:
    """Could ``value`` be (part of) a model input: a CUDA tensor that is no parameter and no
    result of the graph, or a mapping/sequence holding one?"""
    torch = _torch()

    def leaf(v: Any) -> bool:
        return (isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)
                and v.device.type in INPUT_DEVICE_TYPES and v.dim() >= 1 and v.grad_fn is None)

    if isinstance(value, Mapping):
        return any(leaf(v) for v in value.values())
    if isinstance(value, (list, tuple)) and value and len(value) <= 8:
        return leaf(value[0])
    return leaf(value)


def _training_step_args(model: Any) -> int:
    """How many positional arguments the model's Lightning ``training_step`` takes (batch, and
    batch_idx when it has one); 0 when it has none to call, or steps its optimizers itself
    (manual optimization: calling it would change the weights)."""
    import inspect

    step = getattr(model, "training_step", None)
    if not callable(step) or not getattr(model, "automatic_optimization", True) or \
            not hasattr(model, "trainer"):
        return 0
    try:
        params = [p for p in inspect.signature(step).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return 0
    return 1 if len(params) == 1 and params[0].kind != params[0].VAR_POSITIONAL else 2


def _local_inputs(frames: Sequence[FrameType], model: Any) -> list[Inputs]:
    """Inputs guessed from the locals of the frames that hold the model (innermost first),
    then of the program's other frames (a ``train(x, y)`` of a script whose model is a
    global): each candidate local as the one argument, a mapping as keyword arguments, a short
    sequence (x, y) as its first element. For a LightningModule, whose forward may not be what
    its step calls, the batch as ``training_step``'s argument comes first."""
    found: list[Inputs] = []
    steps: list[Inputs] = []
    seen: set[int] = set()
    step_args = _training_step_args(model)
    holding = [f for f in frames if any(v is model or getattr(v, "model", None) is model
                                        for v in f.f_locals.values())]
    libraries = library_roots()
    others = [f for f in frames if f not in holding and programs_frame(f, libraries)]
    for frame in holding + others:
        local = frame.f_locals
        where = f"{frame.f_code.co_name}() line {frame.f_lineno}"
        for name, value in list(local.items()):
            if id(value) in seen or not _candidate(value):
                continue
            seen.add(id(value))
            if step_args:
                got = _inputs((value, 0)[:step_args], {},
                              f"the local {name} of {where}, as training_step's batch")
                if got is not None:
                    steps.append(dataclasses.replace(got, training_step=True))
            if isinstance(value, Mapping):
                got = _inputs((), {str(k): v for k, v in value.items()},
                              f"the local {name} of {where}, as keyword arguments")
            elif isinstance(value, (list, tuple)):
                got = _inputs((value[0],), {}, f"{name}[0], a local of {where}")
            else:
                got = _inputs((value,), {}, f"the local {name} of {where}")
            if got is not None:
                found.append(got)
    return steps + found


def _optimizer(frames: Sequence[FrameType], model: Any) -> Any:
    """The optimizer among the frames' locals (and their ``self``'s attributes) that holds the
    model's first parameter."""
    torch = _torch()
    first = next(iter(model.parameters()), None)
    if first is None:
        return None
    for frame in frames:
        for value in list(frame.f_locals.values()):
            for obj in (value, getattr(value, "optimizer", None)):
                if isinstance(obj, torch.optim.Optimizer) and any(
                        p is first for g in obj.param_groups for p in g["params"]):
                    return obj
    return None


def capture(frames: Sequence[FrameType], at_oom: bool, model: Any = None,
            optimizer: Any = None) -> OomScene | None:
    """The scene of an OOM from its thread's frames (innermost first). ``at_oom``: the frames
    are live (the observer runs on the failing thread): grad mode and autocast are read now.
    ``model``/``optimizer``: known already (Monitor(model=...), the model probe). None when no
    model is found."""
    torch = _torch()
    if torch is None:
        return None
    module_type = torch.nn.Module
    outermost: FrameType | None = None
    generate: FrameType | None = None
    for frame in frames:
        owner = frame.f_locals.get("self")
        if not isinstance(owner, module_type):
            continue
        if frame.f_code.co_name == "generate":
            generate = frame
        elif frame.f_code.co_name in MODULE_CALLS and \
                next(iter(owner.parameters()), None) is not None:
            # (A module without parameters -- a loss, an activation -- is not the model: an
            # OOM in the loss after the model's forward is measured from the loop's locals.)
            outermost = frame
    inputs: list[Inputs] = []
    generate_kwargs = None
    if generate is not None:
        model = generate.f_locals["self"]
        # generate(inputs, generation_config=..., ..., **kwargs): its input, its configuration
        # and the keywords it was given (the other parameters are its own machinery by now).
        args, kwargs = _frame_inputs(generate, positional=1)
        kwargs = {k: v for k, v in kwargs.items()
                  if k not in generate.f_code.co_varnames[:generate.f_code.co_argcount]}
        config = generate.f_locals.get("generation_config")
        if config is not None:
            kwargs["generation_config"] = config
        got = _inputs(args, kwargs, "the generate() call running at the OOM")
        if got is None:
            ids = kwargs.get("input_ids")
            got = _inputs((), {"input_ids": ids} | kwargs, "the generate() call at the OOM") \
                if ids is not None else None
        if got is not None:
            inputs.append(got)
            generate_kwargs = got.kwargs
    elif outermost is not None:
        model = outermost.f_locals["self"]
        args, kwargs = _frame_inputs(outermost)
        got = _inputs(args, kwargs, f"the forward of {type(model).__name__} running at the OOM")
        if got is not None:
            inputs.append(got)
    if model is None:
        model = find_model(frames[0] if frames else None, optimizer)
    if model is None:
        return None
    if not inputs:
        inputs = _local_inputs(frames, model)
    inputs = _with_lists(inputs)
    if optimizer is None:
        optimizer = _optimizer(frames, model)
    grad = autocast = None
    if at_oom:
        grad = bool(torch.is_grad_enabled())
        if torch.is_autocast_enabled("cuda"):
            autocast = torch.get_autocast_dtype("cuda")
    resident = outermost is not None and any(p.grad is not None for p in model.parameters())
    return OomScene(model, inputs, optimizer, grad, autocast, generate_kwargs, resident)


def _map_tensors(inputs: Inputs, change: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with ``change(tensor)`` in place of each tensor, inside lists, tuples
    (named ones too) and mappings."""
    torch = _torch()

    def cut(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return change(value)
        if isinstance(value, Mapping):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
            return type(value)(*[cut(v) for v in value])
        if isinstance(value, (list, tuple)):
            return type(value)(cut(v) for v in value)
        return value

    return tuple(cut(a) for a in inputs.args), {k: cut(v) for k, v in inputs.kwargs.items()}


def slice_inputs(inputs: Inputs, size: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with every tensor whose leading dimension is the batch cut to ``size``
    (views: nothing is copied); for a list of samples, every argument that is a list or tuple
    of the batch's length (the images and their targets) cut to its first ``size``."""
    batch = inputs.batch_size
    if inputs.list_batch:
        def cut(value: Any) -> Any:
            return value[:size] if isinstance(value, (list, tuple)) and len(value) == batch \
                else value
        return tuple(cut(a) for a in inputs.args), {k: cut(v) for k, v in inputs.kwargs.items()}
    return _map_tensors(inputs, lambda t: t[:size] if t.dim() >= 1 and t.shape[0] == batch
                        else t)


def resize_inputs(inputs: Inputs, sizes: Mapping[int, tuple[int, int]]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments cut along the dimensions that grew (views: nothing is copied), or
    lengthened: to a larger size, a tensor is repeated along the dimension (new tensors: token
    ids, their mask and labels at a longer length, each value one the model took).
    ``sizes``: dimension of the first tensor -> (its size now, the size to cut to). The first
    tensor is cut at those dimensions; another tensor at each of its non-leading dimensions of
    the same index and size (an attention mask, labels of the same length), or, when one
    dimension grew and its number of dimensions differs, at any non-leading dimension of that
    size (a mask of shape (batch, 1, length, length))."""
    first = inputs.first
    single = next(iter(sizes.values())) if len(sizes) == 1 else None

    def dims_of(t: Any) -> list[tuple[int, int]]:
        if t is first:
            return [(d, new) for d, (_, new) in sizes.items()]
        if single is not None and t.dim() != first.dim():
            return [(d, single[1]) for d in range(1, t.dim()) if t.shape[d] == single[0]]
        return [(d, new) for d, (now, new) in sizes.items() if d < t.dim() and t.shape[d] == now]

    def cut(t: Any) -> Any:
        for d, new in (dims_of(t) if t.dim() >= 2 else ()):
            if new > t.shape[d] > 0:
                times = [1] * t.dim()
                times[d] = -(-new // t.shape[d])
                t = t.repeat(*times)
            t = t.narrow(d, 0, new)
        return t

    return _map_tensors(inputs, cut)
