# python/vramscope/postmortem/advice.py -- OOM evidence and the advice it supports (pure functions)
"""What the post-mortem knows (``OomEvidence``) and the pure functions of those numbers (the
message parsed, fragmentation, growth), tested with synthetic evidence; the batch that fits is
``remedies``' (through the memory model of ``vramscope.predict``).
``remedies`` concludes from it (``rank_advice``), ``vramscope.oom`` collects it live and
``report`` renders it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from .._core.step_history import StepPoint
from .._core.units import format_bytes, non_pytorch_bytes, unit_bytes

__all__ = ["Advice", "Holder", "Measured", "MeasuredRemedy", "OomEvidence", "StepPoint"]


#: A holder's tensors keep graphs from one step to the next from this many on (one per step: a
#: leak seen for a few steps); a container is read as a holder from this many tensors on.
HOLDER_MIN_ITEMS = 4


@dataclasses.dataclass
class Holder:
    """A container of the program's that kept tensors on the device at the OOM (a list of
    losses appended with their graphs, outputs kept for metrics), found in the frames of the
    OOM's traceback (vramscope.postmortem.holders)."""

    #: Its name as the program spells it ("losses", "self.outputs") and where it lives
    #: ("train() in train.py:42", "the globals of train.py").
    name: str
    where: str
    #: Its type ("list", "dict", "deque") and length.
    kind: str
    items: int
    #: Tensors on the device among its newest items (one level into tuples and dicts), and
    #: how many of them keep an autograd graph (with the activations their step saved).
    tensors: int
    graphs: int
    #: Bytes of those tensors' own storages (their graphs not counted).
    data_bytes: int
    #: What emptying it freed, measured in a process the OOM was ending (graphs included);
    #: None when it was not emptied.
    freed_bytes: int | None = None

    @property
    def keeps_graphs(self) -> bool:
        """Do its tensors keep autograd graphs (their steps' saved activations)?"""
        return self.graphs >= HOLDER_MIN_ITEMS

    def describe(self) -> str:
        """"losses (a list of 37 in train() in train.py:42: 37 tensors with autograd graphs;
        emptying it freed 5.2 GiB)"."""
        kept = (f"{self.graphs} tensors with autograd graphs" if self.keeps_graphs else
                f"{self.tensors} tensors, {format_bytes(self.data_bytes)}")
        freed = (f"; emptying it freed {format_bytes(self.freed_bytes)}"
                 if self.freed_bytes is not None else "")
        return f"{self.name} (a {self.kind} of {self.items} in {self.where}: {kept}{freed})"


@dataclasses.dataclass
class MeasuredRemedy:
    """One remedy measured after the OOM: the failing step run again with it, at slices of its
    batch, in the same process (vramscope.postmortem.measure)."""

    #: The advice kind it measures ("batch_size", "activation_checkpointing", ...) and its
    #: parameters as the JSON report gives them ({"batch_size": 96}, {"modules": "encoder"}).
    kind: str
    params: dict[str, Any]
    #: What the failing step needs with it, by the memory model through its probes (what must
    #: fit under a cap: the allocated peak times the measured allowance, and the margin).
    need_bytes: int
    #: How it was obtained, in words (the probes and the model).
    basis: str
    #: Was it run where it is to hold (the failing size itself, the batch it advises, a cap
    #: run twice in a row), or found not to fit there? A remedy predicted to fit from smaller
    #: slices and not run there (no time left) is not promised.
    ran_where_advised: bool = True


@dataclasses.dataclass
class Measured:
    """What vramscope measured after the OOM: the failing step's real need, and the remedies.
    Filled by vramscope.postmortem.measure in a process the OOM is ending (``vramscope run``,
    an uncaught OOM under Monitor or a callback); None where nothing could be run."""

    #: The size the failing step ran at, what it is ("batch_size"), and what it needs there.
    size: int
    what: str
    need_bytes: int
    #: How the need was obtained (the probes and the model), in words.
    basis: str
    #: The remedies measured, each with its need at the failing size (batch_size: at its own).
    remedies: list[MeasuredRemedy] = dataclasses.field(default_factory=list)
    #: What could not be measured and why, one line each.
    notes: list[str] = dataclasses.field(default_factory=list)
    #: Wall time of the measurements.
    seconds: float = 0.0
    #: Why ``need_bytes`` is only a lower bound ("": it is the step's need): the program held
    #: more at its OOM than the step run again needs.
    lower_bound: str = ""
    #: The token length of the failing input (0: not token ids) and the most positions the
    #: model takes (0: unknown). Shorter than the model's maximum at a first step, a later
    #: batch may be longer: what fits this step is then not promised for the run.
    length: int = 0
    max_length: int = 0


@dataclasses.dataclass
class OomEvidence:
    """What was known at the OOM. Byte counts are for the failing device.

    The numbers follow the allocator's own accounting: torch refuses a new segment when
    ``reserved + size`` passes the memory-fraction cap (``limit_bytes``) or when the driver has
    no ``size`` bytes free, so the most PyTorch could hold is ``budget_bytes`` and what it could
    still get is ``available_bytes``; the request lacked ``shortfall_bytes``."""

    device: int
    requested_bytes: int
    #: The device's memory (cudaMemGetInfo's total), never the memory-fraction cap.
    device_total_bytes: int
    #: Free on the whole device, as the driver says (other processes' use already taken off).
    device_free_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    #: Inactive blocks in the cache (reserved, not allocated), and the largest of them.
    cached_free_bytes: int = 0
    largest_free_block_bytes: int = 0
    #: (name, live bytes) of the ops / modules holding the most memory, largest first.
    top_ops: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    top_modules: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: Live bytes per category (parameters, gradients, optimizer_state, activations, ...).
    categories: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Recent steps, oldest first.
    steps: list[StepPoint] = dataclasses.field(default_factory=list)
    #: Module classes repeated in the model with their retained forward bytes per instance,
    #: e.g. [("Block", 12, 210e6)] (checkpointing candidates, from profile()'s module rows).
    repeated_modules: list[tuple[str, int, int]] = dataclasses.field(default_factory=list)
    #: The batch size of the failing step (the leading dimension of the model's input), and
    #: where it was read: "forward" (the model's forward pre-hook), "stack" (the model's
    #: forward running at the OOM) or "" (unknown).
    batch_size: int | None = None
    batch_source: str = ""
    #: The failing step's model input shape (its first tensor), and the shape of a past step's
    #: input at the same batch size: which dimension grew (None: unknown).
    input_shape: tuple[int, ...] | None = None
    past_input_shape: tuple[int, ...] | None = None
    #: Was autograd recording in the failing step (None: unknown)? Read on the OOM's thread,
    #: and true in a backward or an optimizer step, whose own code turns it off there. Was a
    #: ``generate()`` call on the stack (a KV cache growing with every token)?
    grad_enabled: bool | None = None
    generating: bool = False
    world_size: int = 1
    #: Why op/module/category data is missing (shown instead of their tables).
    attribution_note: str = ""
    #: (op, bytes per step) of ops whose live bytes grew at each of the last steps, fastest
    #: first (needs profiling data at step boundaries).
    growing_ops: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: (module path, bytes per step) of modules whose live bytes grew at each of the last steps,
    #: fastest first: bytes allocated while the module was the innermost running forward and
    #: still live (a list of outputs, a cache); needs ``vramscope.profile()`` at step boundaries.
    growing_modules: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    #: Were the numbers read from the exception's message (the OOM observer did not run), so
    #: rounded to what torch prints?
    from_exception: bool = False
    #: Did the program go on past this OOM (a step ended after it, or a later OOM propagated
    #: instead)? Caught: cuDNN tries a smaller workspace after its allocation runs out; a
    #: program may catch it. Not the OOM that failed the program.
    survived: bool = False
    #: The per-process cap of ``torch.cuda.set_per_process_memory_fraction`` (None: no cap).
    limit_bytes: int | None = None
    #: What the driver charges this process on the device (NVML); None when it cannot tell.
    process_driver_bytes: int | None = None
    #: The non-PyTorch bytes named, from the agent's last settled pairing before the OOM
    #: (``vramscope.memory_breakdown``: context_bytes, other_bytes, nccl_bytes, nccl_version,
    #: private_pool_bytes, paired_ns, ...); None without one.
    driver_parts: dict[str, Any] | None = None
    #: Did the allocator already use expandable segments?
    expandable_segments: bool = False
    #: "allocator" (the caching allocator ran out) or "other" (a cudaMalloc outside it:
    #: cuBLAS/cuDNN/NCCL workspaces, "CUDA error: out of memory").
    oom_source: str = "allocator"
    #: Where the step was: "forward", "backward", "optimizer", "load" (the model being put on
    #: the device: ``Module.to()``, ``.cuda()``, a checkpoint loader such as from_pretrained)
    #: or "" (unknown).
    phase: str = ""
    #: At a "load" OOM: the bytes of the model's parameters and buffers, and of them already on
    #: the device; how they were being put there: "to" (``Module.to()``, ``.cuda()``),
    #: "from_pretrained" (a checkpoint loader: transformers', diffusers', accelerate's) or
    #: "torch.load" (then load_bytes is the checkpoint file's size, loaded_bytes its storages
    #: already restored to the device).
    load_bytes: int = 0
    loaded_bytes: int = 0
    load_call: str = ""
    #: At an OOM inside transformers' Trainer evaluation or prediction loop: the bytes on the
    #: device its containers kept of the steps before (predictions, labels, losses: all of
    #: them until the loop ends unless ``eval_accumulation_steps`` moves them to the host),
    #: the failing step's index, and eval_accumulation_steps (0: unset).
    eval_kept_bytes: int = 0
    eval_step: int = 0
    eval_accumulation_steps: int = 0
    #: In forward: the fraction of the repeated blocks already run (block i of n: (i+1)/n).
    forward_progress: float | None = None
    #: (container path, block class, count) of the model's runs of same-class children, the
    #: biggest first, e.g. [("transformer.h", "GPT2Block", 12)] (checkpointing candidates).
    block_lists: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    #: dtype of most parameter bytes ("float32", "bfloat16", ...), "" when unknown; was
    #: autocast on in the last forward (None: unknown), and its dtype ("" when off or unknown)?
    parameter_dtype: str = ""
    autocast: bool | None = None
    autocast_dtype: str = ""
    #: Bytes of the trainable parameters (0: unknown).
    parameter_bytes: int = 0
    #: The optimizer's class name, its state bytes now, what its state will be once every
    #: parameter has one (the state is allocated lazily at the first step), and the
    #: parameter-sized temporaries of its step (multi-tensor Adam: the second moments' roots).
    optimizer: str = ""
    optimizer_state_bytes: int = 0
    optimizer_state_full_bytes: int = 0
    optimizer_temporary_bytes: int = 0
    #: Were the step peaks exact, from the agent's events? False in polling mode (the highest
    #: values polled, possibly far below the real peaks): no projection from them is more
    #: than a lower bound.
    peaks_exact: bool = True
    #: The failing step measured again after the OOM, and its remedies (None: not measured).
    measured: Measured | None = None
    #: Why the step could not be measured (no model on the stack, ...); "" when it was or was
    #: not tried.
    measure_note: str = ""
    #: The program's containers that kept tensors on the device, most graphs first (read from
    #: the traceback once the OOM ended the process; empty before).
    holders: list[Holder] = dataclasses.field(default_factory=list)
    #: Was the model in training mode (``model.training``) when the OOM ended the process
    #: (None: no model was found, or not read)? An evaluation sets it off.
    training: bool | None = None

    @property
    def limit_or_total_bytes(self) -> int:
        """The cap when one is set (and below the device), else the device."""
        if self.limit_bytes is not None and 0 < self.limit_bytes < self.device_total_bytes:
            return self.limit_bytes
        return self.device_total_bytes

    @property
    def eval_joining(self) -> bool:
        """Did the OOM come joining an evaluation step's predictions to those transformers'
        Trainer kept on the device (its step had run), not inside a step?"""
        return bool(self.eval_kept_bytes) and self.phase not in ("forward", "backward")

    @property
    def budget_bytes(self) -> int:
        """The most PyTorch could have reserved at the OOM: the cap (or the device), and no
        more than what it holds plus what the driver has free."""
        return max(0, min(self.limit_or_total_bytes, self.reserved_bytes + self.device_free_bytes))

    @property
    def available_bytes(self) -> int:
        """What the allocator could still get for a new segment: free for PyTorch."""
        return max(0, self.budget_bytes - self.reserved_bytes)

    @property
    def non_pytorch_bytes(self) -> int | None:
        """What the driver charges this process beyond the allocator's reserved bytes (CUDA
        context, cuBLAS/NCCL workspaces), as everywhere in vramscope; None when NVML cannot
        tell (``outside_bytes`` then says what is used outside this allocator)."""
        return non_pytorch_bytes(self.process_driver_bytes, self.reserved_bytes)

    @property
    def outside_bytes(self) -> int:
        """Used on the device but not by this process's allocator (this process's CUDA context
        and libraries, and other processes)."""
        return max(0, self.device_total_bytes - self.device_free_bytes - self.reserved_bytes)

    @property
    def other_processes_bytes(self) -> int | None:
        """Used on the device by other processes; None when NVML cannot tell."""
        if self.process_driver_bytes is None:
            return None
        return max(0, self.device_total_bytes - self.device_free_bytes - self.process_driver_bytes)

    @property
    def shortfall_bytes(self) -> int:
        """How much the failing request lacked: a request the cache could not serve needs a new
        segment of its size from what is available."""
        return max(0, self.requested_bytes - self.available_bytes)

    @property
    def fragmentation(self) -> float:
        """1 - largest free block / cached free bytes (0 when nothing is cached free)."""
        if self.cached_free_bytes <= 0:
            return 0.0
        return 1.0 - self.largest_free_block_bytes / self.cached_free_bytes


@dataclasses.dataclass
class Advice:
    """One suggestion. ``kind`` and ``params`` say what to change in machine-readable form
    (``{"kind": "batch_size", "batch_size": 24}`` in the JSON report); ``recovers_bytes`` is
    what it gives back against ``need_bytes`` of the report; ``fits``: would the failing step
    fit with it alone? ``score``: the fraction of the need it recovers."""

    score: float
    title: str
    detail: str
    kind: str = "generic"
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    recovers_bytes: int = 0
    fits: bool = False


def fragmentation_of(segments: Sequence[dict[str, Any]], device: int) -> tuple[int, int]:
    """(cached free bytes, largest free block) of ``device`` from ``_agent.segments()`` dicts:
    the one place Python measures fragmentation (the agent hands out segments, not a figure)."""
    total = largest = 0
    for segment in segments:
        if int(segment.get("device", 0)) != device:
            continue
        for size, _requested, state in segment.get("blocks", ()):
            if state == "inactive":
                total += int(size)
                largest = max(largest, int(size))
    return total, largest


def leak_rate(steps: Sequence[StepPoint], min_steps: int = 4) -> int | None:
    """Bytes per step by which step-end allocated memory grew at every one of the last
    ``min_steps`` steps; None when it did not grow at each."""
    tail = list(steps)[-(min_steps + 1):]
    if len(tail) < min_steps + 1:
        return None
    diffs = [b.allocated_bytes - a.allocated_bytes for a, b in zip(tail, tail[1:])]
    if min(diffs) <= 0:
        return None
    return sum(diffs) // len(diffs)


def growing_ops(snapshots: Sequence[dict[str, int]], min_steps: int = 3) -> list[tuple[str, int]]:
    """(name, bytes per step) of the ops (or modules) whose live bytes grew at each of the last
    ``min_steps`` steps, fastest first; ``snapshots`` are {name: live bytes} at consecutive step
    ends."""
    tail = list(snapshots)[-(min_steps + 1):]
    if len(tail) < min_steps + 1:
        return []
    out = []
    for name in tail[-1]:
        values = [snap.get(name, 0) for snap in tail]
        diffs = [b - a for a, b in zip(values, values[1:])]
        if min(diffs) > 0:
            out.append((name, sum(diffs) // len(diffs)))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def growing_text(modules: Sequence[tuple[str, int]], ops: Sequence[tuple[str, int]],
                 limit: int = 3) -> str:
    """"module a +4.0 MiB/step, module b ...; op aten::cat +4.0 MiB/step" (the ``limit``
    fastest of each; modules first: they say where in the model)."""
    groups = [", ".join(f"{kind} {name} +{format_bytes(b)}/step" for name, b in rows[:limit])
              for kind, rows in (("module", modules), ("op", ops))]
    return "; ".join(g for g in groups if g)


_SIZE = r"([0-9]+(?:\.[0-9]+)?) ?(bytes|B|KiB|MiB|GiB|TiB|PiB)"


def _size(match: re.Match[str] | None, group: int = 1) -> int | None:
    if match is None:
        return None
    return int(float(match.group(group)) * unit_bytes(match.group(group + 1)))


def parse_oom_message(text: str) -> dict[str, int]:
    """What torch's "CUDA out of memory" message says: device, requested_bytes,
    device_total_bytes, device_free_bytes, allocated_bytes, reserved_bytes, limit_bytes (the
    memory-fraction cap), process_driver_bytes (only those present; sizes as printed, rounded
    to 2 decimals of their unit)."""
    out: dict[str, int] = {}
    found = {
        "requested_bytes": _size(re.search(r"Tried to allocate " + _SIZE, text)),
        # "capacty": the spelling of torch before 2.2.
        "device_total_bytes": _size(re.search(r"total capac[a-z]* of " + _SIZE, text)),
        "device_free_bytes": _size(re.search(r"of which " + _SIZE + r" is free", text)),
        "allocated_bytes": _size(re.search(_SIZE + r" is allocated by PyTorch", text)),
    }
    # "12.00 GiB allowed;": the memory-fraction cap; "this process has X memory in use": what
    # the driver (NVML) charges this process, context included.
    found["limit_bytes"] = _size(re.search(_SIZE + r" allowed;", text))
    found["process_driver_bytes"] = _size(re.search(r"this process has " + _SIZE, text))
    unallocated = _size(re.search(_SIZE + r" is reserved by PyTorch but unallocated", text))
    if found["allocated_bytes"] is not None and unallocated is not None:
        found["reserved_bytes"] = found["allocated_bytes"] + unallocated
    device = re.search(r"GPU ([0-9]+) has a total capac", text)
    if device is not None:
        out["device"] = int(device.group(1))
    out.update({k: v for k, v in found.items() if v is not None})
    return out
