# python/vramscope/oom.py -- public path of the OOM post-mortem (it lives in postmortem/)
"""``vramscope.oom``: the import path of the OOM post-mortem's functions that programs, docs and
tests use (``last_report()``, ``report_exception()``, ...); the code is in the post-mortem room
(``vramscope.postmortem``); the process's ``PostMortem`` is ``SESSION.postmortem``."""

from .postmortem.oom import (
    OomEvidence,
    PostMortem,
    StepPoint,
    add_provider,
    collect_evidence,
    evidence_from_exception,
    last_report,
    observer_calls,
    remove_provider,
    report_exception,
)

__all__ = ["OomEvidence", "StepPoint", "PostMortem", "add_provider", "remove_provider",
           "collect_evidence", "evidence_from_exception", "report_exception", "observer_calls",
           "last_report"]
