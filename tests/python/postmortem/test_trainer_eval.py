# tests/python/postmortem/test_trainer_eval.py -- a Trainer evaluation's OOM: what it kept, its advice applied
"""transformers' Trainer keeps every evaluation step's predictions on the device, joined with
torch.cat at each step, until the loop ends. Here a real Trainer evaluates a small GPT-2 on the
host (scene.INPUT_DEVICE_TYPES gets "cpu"), and a cap on what one join of the logits may hold
(its two inputs and its result) stands for the device's: the loop runs out at a known step,
and the shapes the test chose say exactly what was kept."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from vramscope.attribution.model_probe import frames_of_traceback, frames_outward  # noqa: E402
from vramscope.postmortem import holders as _holders  # noqa: E402
from vramscope.postmortem import measure as _measure  # noqa: E402
from vramscope.postmortem import oom as _oom  # noqa: E402
from vramscope.postmortem import remedies as _remedies  # noqa: E402
from vramscope.postmortem import scene as _scene  # noqa: E402
from vramscope.postmortem.advice import (  # noqa: E402
    Measured,
    MeasuredRemedy,
    OomEvidence,
    StepPoint,
)

BATCH, LENGTH, VOCAB, STEPS = 4, 16, 64, 10
#: One step's logits (float32), labels (int64) and losses (the loss repeated per row, float32).
LOGITS = BATCH * LENGTH * VOCAB * 4
LABELS = BATCH * LENGTH * 8
LOSSES = BATCH * 4
#: The join of the logits may hold 13 steps' worth: the join at step d (d steps kept, the
#: new one, the result: 2(d+1) steps) fails first at d = 6.
CAP = 13 * LOGITS
FAILS_AT = 6


@pytest.fixture(autouse=True)
def host_tensors(monkeypatch):
    monkeypatch.setattr(_scene, "INPUT_DEVICE_TYPES", ("cuda", "cpu"))


class Rows(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return BATCH * STEPS

    def __getitem__(self, i: int) -> dict:
        x = (torch.arange(LENGTH) + i) % VOCAB
        return {"input_ids": x, "labels": x}


def _evaluate(tmp_path, monkeypatch, **arguments) -> tuple[dict, list]:
    """Trainer.evaluate() under the cap on the logits' joins: (its metrics, or {} when it ran
    out) and what was read at the OOM, as the observer reads it (from inside the failing
    torch.cat), with the exception's traceback, then the exception."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=VOCAB,
                                     n_positions=LENGTH, bos_token_id=0, eos_token_id=0)
    args = transformers.TrainingArguments(str(tmp_path), per_device_eval_batch_size=BATCH,
                                          use_cpu=True, report_to=[], **arguments)
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config), args=args, eval_dataset=Rows(),
        compute_metrics=lambda p: {"rows": len(p.predictions)})
    real_cat, seen = torch.cat, []

    def cat(tensors, *a, **k):
        if len(tensors) == 2 and tensors[0].dim() == 3 and \
                2 * sum(t.nbytes for t in tensors) > CAP:
            seen.append(_holders.trainer_evaluation(frames_outward(sys._getframe())))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 MiB.")
        return real_cat(tensors, *a, **k)

    monkeypatch.setattr(torch, "cat", cat)
    try:
        return trainer.evaluate(), seen
    except torch.OutOfMemoryError as exc:
        seen.append(_holders.trainer_evaluation(frames_of_traceback(exc.__traceback__)))
        seen.append(exc)
        return {}, seen
    finally:
        monkeypatch.setattr(torch, "cat", real_cat)


def test_the_evaluation_that_kept_every_step_is_named_and_its_advice_makes_it_run(
        tmp_path, monkeypatch):
    metrics, seen = _evaluate(tmp_path / "first", monkeypatch)
    assert not metrics, "the evaluation did not run out under the cap"
    failed = seen.pop()
    # At the join of step 6's logits: 6 steps of logits and labels kept, 7 of losses (added
    # first in each step).
    kept = FAILS_AT * (LOGITS + LABELS) + (FAILS_AT + 1) * LOSSES
    expected = {"eval_kept_bytes": kept, "eval_step": FAILS_AT, "eval_accumulation_steps": 0}
    assert seen == [expected, expected]
    # The post-mortem's evidence from the exception carries them.
    read = _oom.evidence_from_exception(
        "CUDA out of memory. Tried to allocate 1.00 MiB.", 0,
        (frames_of_traceback(failed.__traceback__), True))
    assert {k: getattr(read, k) for k in expected} == expected

    e = OomEvidence(device=0, requested_bytes=(FAILS_AT + 1) * LOGITS,
                    device_total_bytes=8 * CAP, device_free_bytes=4 * CAP,
                    allocated_bytes=kept + LOGITS, reserved_bytes=CAP, limit_bytes=CAP,
                    process_driver_bytes=CAP, **expected)
    # Training steps before the evaluation (at this very batch) say nothing of the loop's join:
    # the projection stays the failing request, at least, and nothing is promised.
    trained = OomEvidence(**{**vars(e), "batch_size": BATCH, "steps": [
        StepPoint(i + 1, 2 * CAP, CAP // 8, batch_size=BATCH) for i in range(4)]})
    assert _remedies.assess(trained).projection_is_lower_bound
    assert not any(a.fits for a in _remedies.rank_advice(trained))
    first = _remedies.rank_advice(e)[0]
    assert first.kind == "eval_accumulation"
    every = first.params["eval_accumulation_steps"]
    assert every == FAILS_AT // 2 and f"eval_accumulation_steps={every}" in first.title
    # The step is not run again (it ran; keeping its predictions failed), and a smaller batch
    # measured at some other step's OOM in the loop is never promised: the loop keeps growing.
    scene = _scene.capture(frames_of_traceback(failed.__traceback__), at_oom=False)
    assert scene is not None, "the Trainer's model and batch are on the stack"
    assert "evaluation loop" in _measure.measure(scene, e, device=object())
    e.measured = Measured(size=BATCH, what="batch_size", need_bytes=CAP // 2, basis="",
                          remedies=[MeasuredRemedy("batch_size", {
                              "batch_size": 2, "from_batch_size": BATCH}, CAP // 4, "")])
    advice = _remedies.rank_advice(e)
    assert advice[0].kind == "eval_accumulation" and not any(a.fits for a in advice), \
        [(a.kind, a.fits) for a in advice]
    assert "batch_size" in [a.kind for a in advice]

    # Applied in a fresh Trainer: the evaluation runs to its end, on every row.
    metrics, seen = _evaluate(tmp_path / "applied", monkeypatch, eval_accumulation_steps=every)
    assert not seen and metrics["eval_rows"] == BATCH * STEPS


def test_an_evaluation_that_already_moves_each_step_or_kept_nothing_gets_no_such_advice():
    base = dict(device=0, requested_bytes=LOGITS, device_total_bytes=8 * CAP,
                device_free_bytes=0, allocated_bytes=CAP, reserved_bytes=CAP,
                process_driver_bytes=CAP)
    for fields in ({"eval_kept_bytes": 0, "eval_step": 5},          # nothing kept
                   {"eval_kept_bytes": LOGITS, "eval_step": 0},     # the first step
                   {"eval_kept_bytes": LOGITS, "eval_step": 7,      # moved every step
                    "eval_accumulation_steps": 1},
                   {"eval_kept_bytes": LOGITS, "eval_step": 8,      # just moved (every 4)
                    "eval_accumulation_steps": 4}):
        advice = _remedies.assess(OomEvidence(**base, **fields)).advice
        assert "eval_accumulation" not in [a.kind for a in advice], fields
    # Every 8 steps, 5 kept since the last move: fewer, every 2. At the join of the sixth,
    # 12 steps' worth are held, 4 with it; in a step's forward, the 5 kept less the 2 that stay.
    e = OomEvidence(**base, eval_kept_bytes=5 * LOGITS, eval_step=13, eval_accumulation_steps=8)
    a = _remedies.assess(e).advice[0]
    assert a.kind == "eval_accumulation" and a.params["eval_accumulation_steps"] == 2
    assert a.recovers_bytes == 8 * LOGITS
    e.phase = "forward"
    a = next(x for x in _remedies.assess(e).advice if x.kind == "eval_accumulation")
    assert a.recovers_bytes == 3 * LOGITS
