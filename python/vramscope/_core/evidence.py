# python/vramscope/_core/evidence.py -- the post-mortem's slot in the session, and its providers
"""How the rooms below the OOM post-mortem feed it and call it without importing it.

The session owns both halves (``SESSION.evidence``, ``SESSION.postmortem``):

- ``EvidenceProviders``: who adds fields to an OOM report. A provider is
  ``provider(device, stack) -> {OomEvidence field: value}`` (``stack``: the frames of the OOM,
  innermost first, and whether it is the main thread; None when unknown). Each registers with a
  precedence; when several give a field, the highest precedence wins, and among equals the one
  registered last. The post-mortem asks for ``merged(device, stack)`` once per report: the
  providers' dicts are merged here, never written one by one into a shared evidence object.
- ``PostMortemSlot``: what the step pipeline and ``vramscope run`` call when an exception
  leaves their code (``report_exception``) and to mark the observer's count before it
  (``observer_calls``). The slot answers "nothing written" until the post-mortem room fills it
  with its ``PostMortem`` at import (the package imports that room, so in practice always).

The slot sits in the lowest room so that the dependency points down: ``postmortem/`` imports
the session and fills the slot; nothing below the post-mortem names it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any, Callable, Optional

__all__ = ["ATTRIBUTION", "STEPS", "FRAMEWORK", "PROGRAM", "EvidenceProviders",
           "PostMortemSlot", "Provider", "Stack"]

#: The frames at an OOM (innermost first) and whether they are the main thread's.
Stack = tuple[list[FrameType], bool]
#: ``provider(device, stack)``: OomEvidence fields for ``device`` (None or {} when it has none).
Provider = Callable[[int, Optional[Stack]], Optional[Mapping[str, Any]]]

#: Precedences, lowest first. profile() and CategoryTracker: the modules and categories.
ATTRIBUTION = 10
#: A Monitor's step pipeline: its steps and what the model probe read.
STEPS = 20
#: A framework callback's step pipeline: the batch size the framework knows beats the probe's.
FRAMEWORK = 30
#: A program's own provider (vramscope.oom.add_provider): the program knows best.
PROGRAM = 40


class EvidenceProviders:
    """The registered providers; thread-safe (registration on the training thread, the report
    on whichever thread hit the OOM)."""

    def __init__(self) -> None:
        #: (precedence, registration number, provider), in registration order.
        self._providers: list[tuple[int, int, Provider]] = []
        self._registered = 0
        self._lock = threading.Lock()

    def add(self, provider: Provider, precedence: int) -> None:
        """Registers ``provider`` (a second registration of the same one is ignored)."""
        with self._lock:
            if any(p == provider for _, _, p in self._providers):
                return
            self._registered += 1
            self._providers.append((precedence, self._registered, provider))

    def remove(self, provider: Provider) -> None:
        """Unregisters ``provider`` (no-op when it is not registered)."""
        with self._lock:
            self._providers = [t for t in self._providers if t[2] != provider]

    def __contains__(self, provider: object) -> bool:
        with self._lock:
            return any(p == provider for _, _, p in self._providers)

    def __len__(self) -> int:
        with self._lock:
            return len(self._providers)

    def merged(self, device: int, stack: Stack | None = None) -> dict[str, Any]:
        """Every provider's fields for ``device``, merged by precedence (see the module
        docstring). A provider that raises is left out: its bug must not hide the report."""
        with self._lock:
            ordered = sorted(self._providers, key=lambda t: (t[0], t[1]))
        out: dict[str, Any] = {}
        for _, _, provider in ordered:
            try:
                out.update(provider(device, stack) or {})
            except Exception:  # noqa: BLE001 -- see above
                pass
        return out


class PostMortemSlot:
    """The post-mortem as the rooms below it see it; this base answers "nothing written" and
    is what the session holds until ``vramscope.postmortem`` replaces it."""

    def observer_calls(self) -> int:
        """How many times the OOM observer ran in this process."""
        return 0

    def step_ended(self) -> None:
        """A training step ended: the OOMs observed since the last one did not end it."""

    def report_exception(self, exc: BaseException, observer_calls_before: int,
                         device: int | None = None) -> dict[str, str] | None:
        """Makes sure an OOM leaving a block has its report; the report's paths, or None."""
        return None

    def last_report(self) -> dict[str, str]:
        """Paths of the last report written by this process ({} if none)."""
        return {}

    #: The summary of the last measurement after an OOM ("" before the first).
    last_summary = ""

    def measure_and_report(self, exc: BaseException, echo: bool = True) -> dict[str, str] | None:
        """For a process the OOM ``exc`` is ending (or a test it failed): the failing step
        measured again and its report rewritten, the summary printed when ``echo``; the
        report's paths, or None."""
        return None

