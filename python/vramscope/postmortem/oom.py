# python/vramscope/postmortem/oom.py -- the automatic OOM post-mortem: evidence, advice, files
"""When the CUDA allocator runs out of memory, vramscope writes ``vramscope-oom-<pid>-<time>.txt``
and ``.json`` (in ``$VRAMSCOPE_OOM_DIR`` or the working directory), a ``.pickle`` snapshot that
``torch.cuda._memory_viz`` and pytorch.org/memory_viz open, and prints a short summary to stderr,
before the ``OutOfMemoryError`` reaches the program.

Everything that decides (fragmentation, advice ranking, text) is a pure function of an
``OomEvidence`` so that it is tested with synthetic numbers. ``PostMortem`` is the one object
that reads the session and keeps the post-mortem's state (reports written, the last report, the
observer's calls); the session holds it (``SESSION.postmortem``, filled when this module is
imported) and its evidence providers (``SESSION.evidence``, merged by precedence). One report
reads the agent's record once (the observer's snapshot, or one read now when the observer did
not run) and assesses the evidence once. The post-mortem allocates no GPU memory and bounded
host memory. Environment: ``VRAMSCOPE_OOM_REPORT=0`` disables it; ``VRAMSCOPE_OOM_MAX_REPORTS``
(default 3) bounds how many one process writes (programs that catch OOMs and retry smaller).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from types import TracebackType
from typing import Any

from .._core.evidence import PROGRAM, PostMortemSlot, Provider, Stack
from .._core.session import SESSION, Session
from .._core.torchcheck import oom_in_chain
from ..attribution.model_probe import (
    TRAINING_PHASES,
    block_lists,
    frames_of_traceback,
    oom_frames,
    optimizer_summary,
    parameter_summary,
    stack_evidence,
)
from .advice import (
    Holder,
    OomEvidence,
    StepPoint,
    fragmentation_of,
    growing_ops,
    leak_rate,
    parse_oom_message,
)
from .holders import earlier_tensors, find, release, tensors_of, trainer_evaluation
from .remedies import few_per_step
from .report import (
    format_measured_summary,
    format_summary,
    memory_viz_snapshot,
    report_paths,
    rewrite_report,
    write_report,
)

# What the package's modules and a program's own evidence providers use; the pure parts
# (advice, rendering) are advice.py's, remedies.py's and report.py's.
__all__ = ["OomEvidence", "StepPoint", "PostMortem", "add_provider", "remove_provider",
           "collect_evidence", "evidence_from_exception", "report_exception", "observer_calls",
           "last_report"]

#: The fields a provider may set (anything else it returns is ignored).
_FIELDS = frozenset(f.name for f in dataclasses.fields(OomEvidence))
#: Reports kept to be settled at the next step end (each one's evidence and paths): the
#: report limit (VRAMSCOPE_OOM_MAX_REPORTS) bounds them already; this bounds a limit set high.
MAX_UNSETTLED = 16


def _alloc_conf_expandable() -> bool:
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = os.environ.get(name, "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            return True
    return False


def _agent_record(agent: Any, device: int, at_oom: bool) -> dict[str, Any]:
    """The agent's record of an OOM on ``device``, in one call: what its observer captured at the
    OOM (``oom_snapshot()``) when ``at_oom`` and it has one for that device, else the same
    snapshot taken now (``oom_snapshot_now(device)``). Either carries the counters, the
    segments, the recent events, the attribution rows, what the driver charges this process
    and the settled breakdown (docs/agent-api.md)."""
    if at_oom:
        snapshot = agent.oom_snapshot()
        if snapshot is not None and snapshot["device"] == device:
            return dict(snapshot)
    return dict(agent.oom_snapshot_now(device))


class PostMortem(PostMortemSlot):
    """The OOM post-mortem of one process: its observer, its reports and their count. The
    session holds it (``SESSION.postmortem``); a test makes its own over its own session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        #: Reports written so far (bounded by VRAMSCOPE_OOM_MAX_REPORTS).
        self.reports_written = 0
        #: Paths of the last report written ({} before the first).
        self.last_paths: dict[str, str] = {}
        #: OOM observer calls so far: a handler that sees no new call knows it did not run.
        self.observer_count = 0
        #: The evidence of the last report written, for its measurement once the OOM ends
        #: the process (``measure_and_report``).
        self.last_evidence: OomEvidence | None = None
        #: Grad mode and autocast dtype on the failing thread at the last OOM the observer
        #: saw (read live there; the exception's unwinding restores both).
        self.oom_modes: tuple[bool, Any] | None = None
        #: Where the last OOM the observer saw came: the innermost Python frame running then
        #: (its id) and its instruction; None off Python frames (the autograd engine's thread).
        self.oom_site: tuple[int, int] | None = None
        #: Is the failing step being measured again now? Its probes may run out of memory on
        #: purpose: those OOMs are the measurement's, not the program's, and get no report.
        self.measuring = False
        #: The observer's reports since the last step end, oldest first: each is the OOM that
        #: fails the program, or one it survives (``settle_survived``).
        self._unsettled: list[tuple[OomEvidence, dict[str, str]]] = []
        #: The summary of the last measurement after an OOM ("" before the first).
        self.last_summary = ""
        #: The sys.excepthook this post-mortem wrapped (None: not wrapped).
        self._next_hook: Any = None

    # ----- what the rooms below call through the session's slot
    def observer_calls(self) -> int:
        """How many times the OOM observer ran in this process (mark it before a block)."""
        return self.observer_count

    def last_report(self) -> dict[str, str]:
        """Paths of the last post-mortem written by this process ({} if none)."""
        return dict(self.last_paths)

    def install(self, agent: Any) -> None:
        """Makes ``on_oom`` the agent's OOM callback (the session runs this at attach), and an
        uncaught OOM measured before the interpreter reports it."""
        agent.set_oom_callback(self.on_oom)
        self.wrap_excepthook()

    # ----- evidence
    def _device_facts(self, e: OomEvidence, device: int,
                      snapshot: dict[str, Any] | None) -> None:
        """Puts the device's real total in ``device_total_bytes`` and the memory-fraction cap in
        ``limit_bytes``: torch's OOM observer passes the cap as "device_total" when one is set,
        and its message prints the device total and the cap ("12.00 GiB allowed") apart. Adds
        what the driver charges this process (NVML) and the non-PyTorch parts, as the agent's
        ``snapshot`` carries them (None in polling mode: unknown), and whether segments are
        expandable. Host calls only."""
        torch = sys.modules.get("torch")
        reported_total = e.device_total_bytes
        if torch is not None:
            try:
                # cudaMemGetInfo's total: the one torch's allocator and its cap are computed from.
                total = int(torch.cuda.mem_get_info(device)[1])
                fraction = float(torch.cuda.get_per_process_memory_fraction(device)) \
                    if hasattr(torch.cuda, "get_per_process_memory_fraction") else 1.0
            except Exception:  # noqa: BLE001 -- the report keeps what the OOM said
                total, fraction = reported_total, 1.0
            if e.limit_bytes is None:
                if 0 < reported_total < total:
                    e.limit_bytes = reported_total  # the observer's "total": torch's exact cap
                elif fraction < 1.0:
                    e.limit_bytes = int(fraction * total)
            e.device_total_bytes = total
        if snapshot is not None:
            driver, parts = snapshot.get("driver_process_bytes"), snapshot.get("driver_breakdown")
            if e.process_driver_bytes is None and driver is not None:
                e.process_driver_bytes = int(driver)
            if e.driver_parts is None and parts is not None:
                e.driver_parts = dict(parts)
        e.expandable_segments = e.expandable_segments or _alloc_conf_expandable()

    def fill(self, e: OomEvidence, agent: Any, device: int, stack: Stack | None = None,
             snapshot: dict[str, Any] | None = None) -> OomEvidence:
        """Adds the device facts and attribution (from ``snapshot``, the agent's record; None
        in polling mode), the step history, then one merge of what the stack at the OOM says
        (batch size, phase) under the providers' fields (SESSION.evidence, by precedence);
        returns ``e``."""
        self._device_facts(e, device, snapshot)
        # Without the agent the step history holds polled peaks, not exact ones.
        e.peaks_exact = agent is not None
        if snapshot is not None and snapshot["ops"] is not None:
            e.top_ops = sorted(((r["name"], int(r["live_bytes"])) for r in snapshot["ops"]
                                if r["live_bytes"]), key=lambda t: -t[1])[:10]
            e.categories = {k: int(v[0]) for k, v in (snapshot["categories"] or {}).items()
                            if v[0]}
        history = self.session.history
        e.steps = history.steps(device)
        e.growing_ops = growing_ops(history.op_snapshots(device))
        e.growing_modules = growing_ops(history.module_snapshots(device))
        fields: dict[str, Any] = {}
        if stack is not None:
            try:
                fields.update(stack_evidence(stack[0], None, stack[1]))
                fields.update(trainer_evaluation(stack[0]))
            except Exception:  # noqa: BLE001 -- the stack is optional evidence
                pass
        fields.update(self.session.evidence.merged(device, stack))
        for key, value in fields.items():
            if key in _FIELDS:
                setattr(e, key, value)
        return e

    def collect_evidence(self, device: int, stack: Stack | None = None,
                         snapshot: dict[str, Any] | None = None) -> OomEvidence:
        """The evidence of an OOM the observer saw on ``device``, from the agent's ``snapshot``
        (_agent_record(at_oom=True) when not given; host-side only: no GPU allocation);
        ``stack``: the OOM thread's frames (innermost first) and whether it is the main thread.
        Needs the agent (the observer that calls this is the agent's)."""
        agent = self.session.agent
        if snapshot is None:
            snapshot = _agent_record(agent, device, at_oom=True)
        oom, stats, segments = snapshot["oom"], snapshot["stats"], snapshot["segments"]
        cached_free, largest = fragmentation_of(segments, device)
        e = OomEvidence(device=device, requested_bytes=int(oom.get("requested_bytes", 0)),
                        device_total_bytes=int(oom.get("device_total_bytes", 0)),
                        device_free_bytes=int(oom.get("device_free_bytes", 0)),
                        allocated_bytes=int(stats.get("allocated_bytes", 0)),
                        reserved_bytes=int(stats.get("reserved_bytes", 0)),
                        cached_free_bytes=cached_free, largest_free_block_bytes=largest,
                        expandable_segments=any(s.get("is_expandable") for s in segments
                                                if int(s.get("device", 0)) == device))
        return self.fill(e, agent, device, stack, snapshot)

    def evidence_from_exception(self, message: str, device: int, stack: Stack | None = None,
                                record: dict[str, Any] | None = None) -> OomEvidence:
        """Evidence when the observer did not run: the numbers torch printed in ``message``,
        the session reader's counters for what the message lacks, then the driver's bytes and
        attribution (from ``record``, the agent's snapshot taken now; taken here when not given
        and the agent is there), steps and providers (``stack``: the frames of the exception's
        traceback, innermost first). An OOM that is not the caching allocator's ("CUDA error: out of
        memory" from a library's cudaMalloc) has oom_source "other"."""
        parsed = parse_oom_message(message)
        device = parsed.get("device", device)
        reader, agent = self.session.reader, self.session.agent
        stats: dict[str, Any] = {}
        if reader is not None and ("allocated_bytes" not in parsed
                                   or "reserved_bytes" not in parsed):
            stats = dict(reader.stats(device))
        e = OomEvidence(
            device=device, requested_bytes=parsed.get("requested_bytes", 0),
            device_total_bytes=parsed.get("device_total_bytes", 0),
            device_free_bytes=parsed.get("device_free_bytes", 0),
            allocated_bytes=parsed.get("allocated_bytes", int(stats.get("allocated_bytes", 0))),
            reserved_bytes=parsed.get("reserved_bytes", int(stats.get("reserved_bytes", 0))),
            from_exception=True, limit_bytes=parsed.get("limit_bytes"),
            process_driver_bytes=parsed.get("process_driver_bytes"),
            oom_source="allocator" if "Tried to allocate" in message else "other")
        if record is None and agent is not None:
            record = _agent_record(agent, device, at_oom=False)
        if record is not None:
            e.cached_free_bytes, e.largest_free_block_bytes = fragmentation_of(
                record["segments"], device)
        return self.fill(e, agent, device, stack, record)

    # ----- reports
    def _may_write(self) -> bool:
        """Counts one report against VRAMSCOPE_OOM_MAX_REPORTS; False when disabled or spent."""
        if os.environ.get("VRAMSCOPE_OOM_REPORT", "1").strip() in ("0", "false", "off", "no"):
            return False
        limit = int(os.environ.get("VRAMSCOPE_OOM_MAX_REPORTS", "3") or 3)
        if self.reports_written >= limit:
            return False
        self.reports_written += 1
        return True

    def _emit(self, e: OomEvidence, record: dict[str, Any] | None) -> dict[str, str]:
        """Writes the report files (with a memory_viz pickle from ``record``, the agent's
        _agent_record(), when the C++ agent is there), prints the summary to stderr and returns
        the paths."""
        now = time.time()
        paths = report_paths(os.getpid(), now)
        snapshot = None
        if record is not None:
            offset = time.time_ns() - time.monotonic_ns()
            snapshot = memory_viz_snapshot(record["segments"], record["recent_events"], offset)
        advice = write_report(e, paths, snapshot, time.strftime("%Y-%m-%d %H:%M:%S"))
        if snapshot is None:
            del paths["pickle"]
        self.last_paths = dict(paths)
        self.last_evidence = e
        print(format_summary(e, advice, paths["txt"]), file=sys.stderr, flush=True)
        return paths

    def on_oom(self, device: int) -> None:
        """The agent's OOM callback: write the post-mortem and print its summary (never
        raises). Its caller's frame is the program's, where the allocation failed."""
        if self.measuring:
            return
        self.observer_count += 1
        try:
            agent = self.session.agent
            if agent is None or not self._may_write():
                return
            record = _agent_record(agent, device, at_oom=True)
            # The observer's caller: the frame that was running when the allocation failed.
            stack = oom_frames(sys._getframe(0).f_back)
            self.oom_site = (id(stack[0][0]), stack[0][0].f_lasti) if stack[0] else None
            modes = _modes()
            e = self.collect_evidence(device, stack, record)
            self.oom_modes = _step_modes(e, modes)
            paths = self._emit(e, record)
            if len(self._unsettled) < MAX_UNSETTLED:
                self._unsettled.append((e, dict(paths)))
        except Exception as exc:  # noqa: BLE001 -- never replace the program's OutOfMemoryError
            print(f"vramscope: could not write the OOM report ({exc})", file=sys.stderr,
                  flush=True)

    def report_exception(self, exc: BaseException, observer_calls_before: int,
                         device: int | None = None) -> dict[str, str] | None:
        """For the step pipelines' users and ``vramscope run`` when ``exc`` leaves their block:
        makes sure an OOM (or the OOM it was raised from: a wrapper's ``raise ... from``) has
        its post-mortem. When the observer ran since
        ``observer_calls_before`` it already wrote the report and printed its summary;
        otherwise (polling mode, an OOM raised outside the caching allocator) writes it now from
        the message, with one call to the agent (its snapshot taken now), and prints the
        summary. Handles each
        exception once (nested Monitor and run); returns the report's paths, None when none was
        written. Never raises: the caller re-raises ``exc``."""
        oom = self.oom_of(exc)
        if oom is None or getattr(oom, "_vramscope_oom_handled", False):
            return None
        exc = oom
        try:
            exc._vramscope_oom_handled = True  # type: ignore[attr-defined]  # our mark on it
        except (AttributeError, TypeError):
            pass
        if self.observer_count > observer_calls_before:
            # This OOM is the last the observer saw; the ones before it were survived.
            self.settle_survived(keep_last=True)
            return self.last_report() or None
        try:
            if not self._may_write():
                return None
            session = self.session
            if device is None:
                device = session.current() if session.reader is not None else 0
            stack = (frames_of_traceback(exc.__traceback__),
                     threading.current_thread() is threading.main_thread())
            message = str(exc)
            device = parse_oom_message(message).get("device", device)
            agent = session.agent
            record = _agent_record(agent, device, at_oom=False) if agent is not None else None
            e = self.evidence_from_exception(message, device, stack, record)
            # The observer did not see this OOM: the modes and the site it read are another's.
            self.oom_modes = self.oom_site = None
            paths = self._emit(e, record)
            if agent is not None:
                # The segment (and `vramscope record` / `vramscope run --record`) gets its OOM
                # marker for an OOM the observer did not see.
                agent.note_oom(e.device, e.requested_bytes, e.device_total_bytes,
                               e.device_free_bytes)
            return paths
        except Exception as err:  # noqa: BLE001 -- never replace the program's exception
            print(f"vramscope: could not write the OOM report ({err})", file=sys.stderr,
                  flush=True)
            return None

    def step_ended(self) -> None:
        """A step ended: every OOM the observer saw since the last one was survived."""
        if self._unsettled:
            self.settle_survived(keep_last=False)

    def settle_survived(self, keep_last: bool) -> None:
        """Marks the reports of OOMs the program went on after as ``survived`` (rewritten in
        place), takes them off ``VRAMSCOPE_OOM_MAX_REPORTS`` (a later OOM still gets its
        report) and says so in one line; ``keep_last``: the last one is the OOM that is failing
        the program. Never raises."""
        unsettled, self._unsettled = self._unsettled, []
        survived = unsettled[:-1] if keep_last else unsettled
        for e, paths in survived:
            try:
                e.survived = True
                rewrite_report(e, paths, time.strftime("%Y-%m-%d %H:%M:%S"))
                self.reports_written = max(0, self.reports_written - 1)
                print(f"vramscope: the program went on after the OOM of {paths['txt']} (caught: "
                      "cuDNN tries a smaller workspace when one does not fit); a later OOM "
                      "gets a report of its own", file=sys.stderr, flush=True)
            except Exception as err:  # noqa: BLE001 -- never fail the program's step
                print(f"vramscope: could not mark the report {paths.get('txt')} ({err})",
                      file=sys.stderr, flush=True)

    def oom_of(self, exc: BaseException) -> BaseException | None:
        """The OOM ``exc`` is (torchcheck.oom_in_chain: it, or the one it was raised from), or
        ``exc`` itself when it is a RuntimeError raised by the very call that the observer saw
        run out of memory (``oom_site``): cuDNN tries its engines' workspaces one by one, and
        when every one of them ran out it raises "GET was unable to find an engine to execute
        this computation", no OutOfMemoryError, after the allocator's OOM; a convolution
        that ran out of memory ends that way. None otherwise."""
        oom = oom_in_chain(exc)
        if oom is not None or self.oom_site is None or not isinstance(exc, RuntimeError):
            return oom
        tb, last = exc.__traceback__, None
        while tb is not None:
            last, tb = tb, tb.tb_next
        if last is not None and (id(last.tb_frame), last.tb_lasti) == self.oom_site:
            return exc
        return None

    # ----- the measurement, once the OOM ends the process
    def measure_and_report(self, exc: BaseException, echo: bool = True) -> dict[str, str] | None:
        """For a process the OOM ``exc`` is ending (``vramscope run``'s program raised it;
        an uncaught OOM, through ``sys.excepthook``), or a test it failed (the pytest plugin,
        once the failure's report is made): frees what the failed step held (the traceback's
        locals, graphs in the program's globals), runs the step again at slices of its batch
        and its remedies (vramscope.postmortem.measure), rewrites the report with the
        measurements and prints their summary (``echo``; ``last_summary`` holds it either
        way). Once per exception; never raises. ``VRAMSCOPE_OOM_MEASURE=0`` turns it off."""
        oom = self.oom_of(exc)
        if oom is not None:
            exc = oom
        if (oom is None or getattr(exc, "_vramscope_oom_measured", False)
                or os.environ.get("VRAMSCOPE_OOM_MEASURE", "1").strip() in ("0", "false", "off",
                                                                             "no")
                or os.environ.get("VRAMSCOPE_FIT_OUT")):
            # (A probe of `vramscope fit` that ran out of memory says so in its peak file;
            # its parent measures by probing, and waits for this process.)
            return None
        self.settle_survived(keep_last=True)  # (the hook's way here: no report_exception)
        e, paths = self.last_evidence, dict(self.last_paths)
        if e is None or not paths or e.measured is not None or self.session.agent is None:
            return None
        try:
            exc._vramscope_oom_measured = True  # type: ignore[attr-defined]  # our mark on it
        except (AttributeError, TypeError):
            pass
        try:
            from .measure import measure
            from .scene import capture

            frames = frames_of_traceback(exc.__traceback__)
            scene = capture(frames, at_oom=False)
            if scene is not None and self.oom_modes is not None:
                scene.grad_enabled, scene.autocast_dtype = self.oom_modes
            if scene is not None:
                e.training = bool(getattr(scene.model, "training", True))
                _scene_evidence(e, scene)
            e.holders = _release_holders(frames, e)
            # What earlier steps left alive (their outputs, data on the device) stays alive
            # through the measurement, as it does through the program's next step.
            resident = _earlier_tensors(frames)
            _free_failed_step(exc.__traceback__, frames)
            del frames
            if scene is None:
                e.measure_note = "no model was found on the stack at the OOM"
            else:
                seconds = float(os.environ.get("VRAMSCOPE_OOM_MEASURE_SECONDS", "120") or 120)
                self.measuring = True
                try:
                    result = measure(scene, e, seconds)
                finally:
                    self.measuring = False
                if isinstance(result, str):
                    e.measure_note = result
                else:
                    e.measured = result
                del scene
            del resident
            advice = rewrite_report(e, paths, time.strftime("%Y-%m-%d %H:%M:%S"))
            self.last_summary = format_measured_summary(e, advice, paths["txt"])
            if echo:
                print(self.last_summary, file=sys.stderr, flush=True)
            return paths
        except Exception as err:  # noqa: BLE001 -- never replace the program's exception
            print(f"vramscope: could not measure the failing step again ({err})",
                  file=sys.stderr, flush=True)
            return None

    def wrap_excepthook(self) -> None:
        """Makes an OOM that nobody catches measured before the interpreter reports it (the
        program's own hook, or the default, still runs after)."""
        if self._next_hook is not None:
            return
        self._next_hook = sys.excepthook

        def hook(kind: type[BaseException], value: BaseException,
                 tb: TracebackType | None) -> None:
            if self.last_evidence is not None:
                self.measure_and_report(value)
            self._next_hook(kind, value, tb)

        sys.excepthook = hook


def _modes() -> tuple[bool, Any]:
    """(grad mode, autocast dtype or None) of this thread, now."""
    torch = sys.modules["torch"]
    dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
    return bool(torch.is_grad_enabled()), dtype


def _step_modes(e: OomEvidence, thread: tuple[bool, Any]) -> tuple[bool, Any]:
    """The modes the failing step is run again in: the OOM thread's ``thread`` modes, except
    in a backward or an optimizer step (TRAINING_PHASES), whose own code runs without autograd
    or autocast: there the step recorded a graph, and its forward ran with the autocast the
    model probe saw (the thread's when the probe saw none)."""
    if e.phase not in TRAINING_PHASES:
        return thread
    torch = sys.modules["torch"]
    if e.autocast is None:
        return True, thread[1]
    return True, getattr(torch, e.autocast_dtype, None) if e.autocast else None


def _scene_evidence(e: OomEvidence, scene: Any) -> None:
    """What the scene knows and the evidence lacks: a first step's OOM under `vramscope run`
    comes before the model probe found the model (at that step's end), so its optimizer,
    parameters and block lists are read from the scene; they weigh the estimates where the
    step cannot be measured. Never raises."""
    try:
        if not e.optimizer and scene.optimizer is not None:
            for key, value in optimizer_summary(scene.optimizer).items():
                setattr(e, key, value)
        elif not e.parameter_bytes:
            e.parameter_bytes, e.parameter_dtype = parameter_summary(scene.model.parameters())
        if not e.block_lists:
            e.block_lists = block_lists(scene.model)
    except Exception:  # noqa: BLE001 -- evidence, never a failure
        pass


def _holds_graph(value: Any) -> bool:
    """Is ``value`` a tensor (or a container one level deep of tensors: a tuple, a dict,
    transformers' ModelOutput) that keeps an autograd graph, with the activations it saved?"""
    return any(t.grad_fn is not None for t in tensors_of(value, sys.modules["torch"]))


def _release_holders(frames: list[Any], e: OomEvidence,
                     allocated: Callable[[], int] | None = None) -> list[Holder]:
    """The program's containers that kept tensors on the failing device (vramscope.postmortem.
    holders), each emptied and what that freed measured: those that keep autograd graphs
    always (a graph kept from step to step is never wanted, and the failed step's frames are
    freed next anyway), those of plain tensors only when step-end memory grew at every step
    and they hold no more than a few items per step so far (else they may be data the program
    keeps on purpose). ``allocated``: the allocator's allocated bytes now
    (torch.cuda.memory_allocated of the failing device by default). Never raises."""
    try:
        found = find(frames)
        if not found:
            return []
        if allocated is None:
            torch = sys.modules["torch"]
            device = e.device

            def allocated() -> int:
                return int(torch.cuda.memory_allocated(device))

        rate = leak_rate(e.steps)

        def which(h: Holder) -> bool:
            # Plain tensors: part of a per-step leak when no more than a few per step so far
            # (a dataset kept on the device stays: the step measured next needs it there).
            return h.keeps_graphs or rate is not None and few_per_step(h, e.steps)

        release(found, allocated, which)
        return [f.holder for f in found]
    except Exception:  # noqa: BLE001 -- a leak's names are evidence, never a failure
        return []


def _earlier_tensors(frames: list[Any]) -> list[Any]:
    """vramscope.postmortem.holders.earlier_tensors, never raising (nothing kept then)."""
    try:
        return earlier_tensors(frames)
    except Exception:  # noqa: BLE001 -- the measurement runs with what is left
        return []


def _own_cells(frame: Any) -> list[types.CellType]:
    """The cells of ``frame``'s own cell variables: made by its call and shared with the
    closures it made (torch's ``Module._call_impl`` keeps its ``args`` in one, for its
    ``inner()``), not the free variables an enclosing function gave it, which outlive the call
    (a decorator's ``func``). Read before the frame is cleared; [] when they cannot be told
    apart."""
    code = frame.f_code
    if not code.co_cellvars:
        return []
    referents = gc.get_referents(frame)
    free: set[int] = set()
    if code.co_freevars:
        function = next((r for r in referents if isinstance(r, types.FunctionType)
                         and r.__code__ is code), None)
        if function is None:
            return []
        free = {id(c) for c in function.__closure__ or ()}
    return [r for r in referents if isinstance(r, types.CellType) and id(r) not in free]


def _free_failed_step(tb: TracebackType | None, frames: list[Any]) -> None:
    """Lets the failed step's memory go: the locals of the traceback's frames, the cells of
    their own closures that hold an autograd graph, and the program's globals that hold one
    (a script's top-level ``loss``, ``out``). A frame object keeps its function (Python 3.11
    on), and a closure's function keeps its cells: ``Module._call_impl``'s ``inner()`` kept
    the failing block's input, and with it every block's activations before it, through the
    measurement (9 GiB of a 12 GiB cap on the GPU, read as the step's own need)."""
    seen: set[int] = set()
    for frame in frames:
        names = frame.f_globals
        if id(names) in seen or frame.f_code.co_name != "<module>":
            continue
        seen.add(id(names))
        for name in [k for k, v in list(names.items()) if _holds_graph(v)]:
            del names[name]
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
        cells = _own_cells(frame)
        try:
            frame.clear()
        except RuntimeError:
            continue  # still running (the caller's own): its locals are its own
        for cell in cells:
            with contextlib.suppress(ValueError):  # an empty cell
                if _holds_graph(cell.cell_contents):
                    del cell.cell_contents
        # Before Python 3.13 reading f_locals (the evidence did) leaves a dict on the frame
        # that frame.clear() keeps: its values, the step's tensors among them, stay alive.
        if frame.f_code.co_name != "<module>":
            snapshot = frame.f_locals
            if isinstance(snapshot, dict):
                snapshot.clear()
    gc.collect()


#: The process's post-mortem, in the session's slot; its observer is installed at attach.
POSTMORTEM = PostMortem(SESSION)
SESSION.postmortem = POSTMORTEM
SESSION.when_attached(POSTMORTEM.install)


# ----- the module's functions: the process's post-mortem, whichever the session holds now

def add_provider(provider: Provider, precedence: int = PROGRAM) -> None:
    """Registers ``provider(device, stack) -> dict`` adding OomEvidence fields (steps, modules,
    batch size) to every report; ``precedence`` decides between providers that give the same
    field (vramscope._core.evidence: a program's own beats vramscope's)."""
    SESSION.evidence.add(provider, precedence)


def remove_provider(provider: Provider) -> None:
    """Unregisters ``provider``."""
    SESSION.evidence.remove(provider)


def _postmortem() -> PostMortem:
    slot = SESSION.postmortem
    return slot if isinstance(slot, PostMortem) else POSTMORTEM


def collect_evidence(device: int, stack: Stack | None = None,
                     snapshot: dict[str, Any] | None = None) -> OomEvidence:
    """``PostMortem.collect_evidence`` of the process's post-mortem."""
    return _postmortem().collect_evidence(device, stack, snapshot)


def evidence_from_exception(message: str, device: int, stack: Stack | None = None,
                            record: dict[str, Any] | None = None) -> OomEvidence:
    """``PostMortem.evidence_from_exception`` of the process's post-mortem."""
    return _postmortem().evidence_from_exception(message, device, stack, record)


def report_exception(exc: BaseException, observer_calls_before: int,
                     device: int | None = None) -> dict[str, str] | None:
    """``PostMortem.report_exception`` of the process's post-mortem."""
    return SESSION.postmortem.report_exception(exc, observer_calls_before, device)


def observer_calls() -> int:
    """How many times the OOM observer ran in this process (mark it before a block of code)."""
    return SESSION.postmortem.observer_calls()


def last_report() -> dict[str, str]:
    """Paths of the last post-mortem written by this process ({} if none)."""
    return SESSION.postmortem.last_report()
