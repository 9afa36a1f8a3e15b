# tests/python/_core/test_evidence.py -- the OOM evidence providers: merged once, by precedence
from __future__ import annotations

from vramscope._core.evidence import (
    ATTRIBUTION,
    FRAMEWORK,
    PROGRAM,
    STEPS,
    EvidenceProviders,
    PostMortemSlot,
)
from vramscope._core.session import Session


def giving(**fields):
    def provider(device, stack):
        return dict(fields, device_seen=device, stack_seen=stack)
    return provider


def test_the_higher_precedence_wins_whatever_the_registration_order():
    providers = EvidenceProviders()
    framework = giving(batch_size=32, batch_source="lightning")
    monitor = giving(batch_size=8, batch_source="forward", steps=["s"])
    providers.add(framework, FRAMEWORK)
    providers.add(monitor, STEPS)  # registered later, ranked lower
    providers.add(giving(categories={"other": 1}), ATTRIBUTION)
    merged = providers.merged(3, None)
    assert merged == {"batch_size": 32, "batch_source": "lightning", "steps": ["s"],
                      "categories": {"other": 1}, "device_seen": 3, "stack_seen": None}


def test_among_equals_the_last_registered_wins_and_the_stack_reaches_every_provider():
    providers = EvidenceProviders()
    providers.add(giving(phase="forward"), PROGRAM)
    providers.add(giving(phase="backward"), PROGRAM)
    stack = ([], False)
    merged = providers.merged(0, stack)
    assert merged["phase"] == "backward" and merged["stack_seen"] is stack


def test_a_failing_provider_is_left_out_and_the_others_still_count():
    providers = EvidenceProviders()

    def broken(device, stack):
        raise KeyError("a provider's bug")

    providers.add(giving(batch_size=4), STEPS)
    providers.add(broken, PROGRAM)
    providers.add(lambda device, stack: None, PROGRAM)  # nothing to add
    assert providers.merged(0)["batch_size"] == 4


def test_a_provider_registers_once_and_leaves():
    providers = EvidenceProviders()
    provider = giving(batch_size=4)
    providers.add(provider, STEPS)
    providers.add(provider, PROGRAM)  # a second registration is ignored, precedence too
    assert len(providers) == 1 and provider in providers
    providers.remove(provider)
    providers.remove(provider)  # no-op
    assert len(providers) == 0 and providers.merged(0) == {}


def test_a_session_starts_with_an_empty_registry_and_a_slot_that_writes_nothing():
    session = Session()
    assert len(session.evidence) == 0
    assert type(session.postmortem) is PostMortemSlot
    assert session.postmortem.observer_calls() == 0
    assert session.postmortem.report_exception(RuntimeError("CUDA out of memory."), 0) is None
    assert session.postmortem.last_report() == {}
