# python/vramscope/_core/session.py -- the process's one attach: its reader, devices, mode and agent
"""The session: what the process attached to, in one object that every module reads through
methods instead of module globals.

``SESSION.reader`` answers the ``torch.cuda``-style reads: the C++ agent, or a
``PollingReader`` when the agent cannot load. ``SESSION.agent`` is the capability: the agent when
it is the reader, None when polling (or detached), so that a caller asks one question ("is the
agent here?") instead of probing the reader for each method it needs.

Attach: the agent can only hook allocators that exist, that is after CUDA is initialised. When
it is not yet, the attach is queued with ``torch.cuda._lazy_call`` and runs right after the
program initialises CUDA; until then nothing is allocated and the readers answer 0, as
``torch.cuda`` does. Layering: the session is the lowest room's (docs/architecture.md). It knows
the step history (it records every step it closes, in ``history``) and holds the OOM
post-mortem's slot (``postmortem``) and its evidence providers (``evidence``), both defined in
``_core/evidence.py``: the post-mortem room fills the slot at import and installs its observer
with ``when_attached``, so that no room below it imports it.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Callable

from . import torchcheck
from .distributed import nccl_memory, resolve_rank
from .evidence import EvidenceProviders, PostMortemSlot
from .polling import PollingReader
from .step_history import StepHistory

__all__ = ["SESSION", "Session", "extension", "load_agent"]


def _device_uuids(torch: ModuleType, count: int) -> list[str]:
    """NVML's names of the first ``count`` CUDA devices (torch prints a bare UUID)."""
    uuids = []
    for i in range(count):
        text = str(torch.cuda.get_device_properties(i).uuid)
        uuids.append(text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}")
    return uuids


def extension() -> ModuleType | None:
    """The agent extension module, imported but not attached (its TensorBoard writer needs no
    attach); None when it is not built or cannot load. The session is the only importer of the
    extension (tests/python/test_layers.py checks it)."""
    try:
        from .. import _agent
    except ImportError:
        return None
    return _agent


def load_agent(torch: ModuleType) -> tuple[ModuleType | None, str | None]:
    """Imports the agent extension to attach it and has it load the torch-facing library for
    this torch (torch must already be imported so that the library binds the same
    libc10_cuda). Returns ``(module, None)`` or ``(None, reason)``.

    The library is chosen by torch's version before anything is loaded (``torchcheck``: the one
    the package carries, or one compiled on first use), so that a library compiled against
    another torch's allocator structs is never loaded; the library's own answer is checked
    again after loading it. Without a library the extension is not imported here: the session
    imports it afterwards only to publish what polling reads (``Session._polling_segment``);
    it holds no torch code, so that import is safe under any torch."""
    path, problem = torchcheck.find_library(torch)
    if path is None:
        return None, problem
    try:
        from .. import _agent
    except ImportError as e:
        return None, f"the agent extension could not be loaded ({e})"
    try:
        built = _agent.load_torch(str(path))
    except RuntimeError as e:
        return None, f"the agent's torch library could not be loaded ({e})"
    problem = torchcheck.agent_version_problem(torch.__version__, built)
    if problem is not None:
        return None, problem
    return _agent, None


class _PollingSegment:
    """The extension's polling segment (docs/agent-segment.md), as a PollingReader publishes to
    it: what each read and step polled, marked polled, beside the reason the segment's note
    holds."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def publish(self, device: int, counters: dict[str, int]) -> None:
        self._module.polling_segment_publish(device, counters)

    def set_rank(self, rank: int, world_size: int) -> None:
        self._module.polling_segment_set_rank(rank, world_size)


class Session:
    """One process's attach. ``reader``, ``count`` and ``current`` are read on the hot path of
    the readers (``vramscope.memory_allocated()``): plain attributes, set once by ``adopt``,
    ``count`` and ``current`` before ``reader``, so that no reader is seen without them."""

    def __init__(self) -> None:
        #: The agent module or a PollingReader once attached; None before.
        self.reader: Any = None
        #: The C++ agent when it is the reader; None in polling mode and before attach.
        self.agent: Any = None
        #: Devices the reader tracks.
        self.count = 0
        #: The current CUDA device (torch's own getter once attached).
        self.current: Callable[[], int] = int
        #: Every step this session closed, for the OOM post-mortem.
        self.history = StepHistory()
        #: Who adds fields to an OOM report (the step pipelines, profile(), programs).
        self.evidence = EvidenceProviders()
        #: The OOM post-mortem (vramscope.postmortem's PostMortem once that room is imported).
        self.postmortem: PostMortemSlot = PostMortemSlot()
        self._mode = "detached"
        self._options: dict[str, Any] = {"interval_ms": 10.0, "publish": True, "rank": None,
                                         "world_size": None}
        self._uuids: list[str] = []
        self._on_agent: list[Callable[[Any], None]] = []
        self._lock = threading.RLock()
        #: Why no reader can ever attach in this process (no torch, torch without CUDA, no
        #: visible GPU), once found out: the readers then answer as torch.cuda does on such a
        #: machine (0, {}).
        self._no_gpu: str | None = None

    # ----- state
    def mode(self) -> str:
        """``"detached"``, ``"pending"`` (attach queued until CUDA initialises), ``"events"``
        (exact, from allocator events) or ``"polling: <reason>"``."""
        return self.reader.mode() if self.reader is not None else self._mode

    def device_count(self) -> int:
        """Devices the reader tracks (0 before attach)."""
        return self.count if self.reader is not None else 0

    def no_gpu(self) -> str | None:
        """Why this process can have no reader, or None: the one no-GPU test of the package
        (Monitor, the framework callbacks, the pytest plugin and ``%vramscope`` ask it). One
        line without the "vramscope: " prefix, which each caller's own sentence carries: no
        PyTorch, torch without CUDA, no visible GPU."""
        if self.reader is not None:
            return None
        if self._no_gpu is None:
            try:
                torch = torchcheck.import_torch()
            except ImportError as e:
                self._no_gpu = str(e)
            else:
                problem = torchcheck.cuda_problem(torch)
                self._no_gpu = None if problem is None else problem.removeprefix("vramscope: ")
        return self._no_gpu

    def ready(self) -> bool:
        """True once a reader exists; else attaches (or queues the attach) and says whether it
        can answer now. Without a usable GPU it says False, like torch.cuda before CUDA is
        initialised; no torch raises ImportError."""
        if self.reader is not None:
            return True
        torch = torchcheck.import_torch()
        if self.no_gpu() is not None:
            return False
        with self._lock:
            if self.reader is None:
                self._attach_or_queue(torch)
        return self.reader is not None

    # ----- attach
    def attach(self, interval_ms: float = 10.0, publish: bool = True,
               rank: int | None = None, world_size: int | None = None,
               init_cuda: bool = False) -> str:
        """``vramscope.attach`` (its docstring says what the arguments do); returns the mode."""
        if interval_ms <= 0:
            raise ValueError("vramscope: interval_ms must be positive")
        if self.reader is not None:
            return self.mode()  # a reader exists only where torch has CUDA: nothing to check
        torch = torchcheck.import_torch()
        torchcheck.check_cuda(torch)
        with self._lock:
            if self.reader is not None:
                return self.mode()
            self._options.update(interval_ms=float(interval_ms), publish=bool(publish),
                                 rank=rank, world_size=world_size)
            if init_cuda:
                torch.cuda.init()
            return self._attach_or_queue(torch)

    def _attach_or_queue(self, torch: ModuleType) -> str:
        if torch.cuda.is_initialized():
            self._attach_now(torch)
            return self.mode()
        if self._mode != "pending":
            self._mode = "pending"
            torch.cuda._lazy_call(lambda: self._attach_deferred(torch))
        return self._mode

    def _attach_deferred(self, torch: ModuleType) -> None:
        # Runs inside torch.cuda._lazy_init: an exception here would become the user's
        # DeferredCudaCallError, so every failure degrades to a warning instead.
        try:
            self._attach_now(torch)
        except Exception as e:  # noqa: BLE001 -- see above
            self._mode = "detached"
            torchcheck.warn_polling_once(f"the agent could not attach ({e})")

    def _attach_now(self, torch: ModuleType) -> None:
        with self._lock:
            if self.reader is not None:
                return
            agent, problem = load_agent(torch)
            uuids: list[str] = []
            if agent is not None:
                uuids = _device_uuids(torch, torch.cuda.device_count())
                (rank, world), _ = resolve_rank(self._options["rank"])
                if self._options["world_size"] is not None:
                    world = int(self._options["world_size"])
                try:
                    agent.attach(self._options["interval_ms"], self._options["publish"], rank,
                                 world, uuids)
                except RuntimeError as e:
                    agent, problem = None, f"the agent could not attach ({e})"
            if agent is not None:
                self.adopt(agent, torch._C._cuda_getDevice, is_agent=True, uuids=uuids)
            else:
                torchcheck.warn_polling_once(str(problem))
                reader = PollingReader(torch, str(problem),
                                       self._polling_segment(torch, str(problem)))
                self.adopt(reader, torch._C._cuda_getDevice, is_agent=False)

    def _polling_segment(self, torch: ModuleType, reason: str) -> _PollingSegment | None:
        """The segment a polling process publishes its polls in, so that ``vramscope top``, the
        table and ``record`` show its numbers marked sampled with ``reason`` (and its fix)
        instead of a plain driver-only row; None when not publishing. The extension is what
        publishes: it has no torch inside, so it serves a torch it carries no library for."""
        if not self._options["publish"]:
            return None
        module = extension()
        if module is None:
            # The extension does not load in this interpreter: built for another CPython (a
            # wheel copied between environments), or a source checkout without a build. Its
            # own import error is the reason, and nothing of it can publish: the CLI then
            # shows this process as the driver sees it, without torch's numbers.
            return None
        (rank, world), _ = resolve_rank(self._options["rank"])
        if self._options["world_size"] is not None:
            world = int(self._options["world_size"])
        try:
            module.polling_segment_open(reason, _device_uuids(torch, torch.cuda.device_count()),
                                        rank, world)
        except (RuntimeError, ValueError) as e:
            warnings.warn(f"vramscope: the polled numbers are not published ({e}); vramscope "
                          "top shows this process as the driver sees it",
                          torchcheck.VramscopeWarning, stacklevel=4)
            return None
        return _PollingSegment(module)

    def adopt(self, reader: Any, current: Callable[[], int], is_agent: bool,
              uuids: Sequence[str] = ()) -> None:
        """Makes ``reader`` the session's (the last step of an attach): ``is_agent`` when it is
        the C++ agent, whose callers registered with ``when_attached`` then run; ``uuids``:
        NVML's name of each device, for ``driver_process_bytes``."""
        self.count = reader.device_count()
        self.current = current
        self._uuids = list(uuids)
        self.agent = reader if is_agent else None
        self.reader = reader
        self._mode = reader.mode()
        if is_agent:
            for fn in list(self._on_agent):
                fn(reader)

    def when_attached(self, fn: Callable[[Any], None]) -> None:
        """Runs ``fn(agent)`` when the C++ agent attaches (now when it already has); polling
        readers do not count. The OOM post-mortem installs its observer this way."""
        with self._lock:
            self._on_agent.append(fn)
            agent = self.agent
        if agent is not None:
            fn(agent)

    # ----- what the attached reader does for everyone
    def step_all(self) -> list[dict[str, Any]]:
        """Closes the current step on every device; the records the reader returns (one per
        device), or an empty list before CUDA is initialised. Every step lands in the step
        history."""
        if not self.ready():
            return []
        records = list(self.reader.step())
        self.history.record(records, self.agent)
        return records

    def set_rank(self, rank: int, world_size: int) -> None:
        """Tells the agent which distributed rank this process is (published with its stats)."""
        if self.reader is not None:
            self.reader.set_rank(rank, world_size)

    def driver_process_bytes(self, device: int) -> int | None:
        """What the driver (NVML) charges this process on ``device``: one NVML process-list
        call (9-16 us per GPU on an H200). None when NVML cannot tell (no driver, a MIG
        instance, another pid namespace) and in polling mode (NVML is reached through the
        agent)."""
        agent = self.agent
        if agent is None or not 0 <= device < len(self._uuids):
            return None
        used = agent.driver_process_bytes(self._uuids[device], os.getpid())
        return None if used is None else int(used)

    def driver_breakdown(self, device: int) -> dict[str, Any] | None:
        """The driver's bytes for this process on ``device``, part by part, at the agent's last
        settled pairing (``vramscope.memory_breakdown``); None before the first one, in polling
        mode and without a driver."""
        agent = self.agent
        if agent is None or not 0 <= device < self.count:
            return None
        parts = agent.driver_breakdown(device)
        return None if parts is None else dict(parts)

    def report_nccl(self) -> None:
        """Tells the agent what NCCL reports of its memory on each device (at step ends):
        torch's ``Backend.memory_stats()`` where this torch and NCCL have it, else the NCCL
        version alone (its bytes are then inside the breakdown's ``other``)."""
        agent = self.agent
        if agent is None:
            return
        for device, (version, nccl) in nccl_memory().items():
            if 0 <= device < self.count:
                agent.set_nccl(device, version, nccl)


#: The process's session (one per process: the agent's hooks and segment are process-wide).
SESSION = Session()
