# tests/python/postmortem/test_oom_projection.py -- the OOM's projected need: measured, or only a lower bound
from __future__ import annotations

from vramscope.postmortem import remedies as _oom_remedies
from vramscope.postmortem import report as _oom_report
from vramscope.postmortem.advice import StepPoint

from test_oom_advice import GiB, MiB, card, doubling_steps


def test_a_past_step_at_the_same_batch_that_the_failing_step_outgrew_is_only_a_lower_bound():
    # The T5: batch 32 ran at source length 256 (4 GiB peak); at 512 the same batch
    # already holds 11 GiB at the OOM under a 12 GiB cap. The past peak says nothing of it.
    steps = [StepPoint(1, 4 * GiB, GiB, batch_size=32, peak_reserved_bytes=5 * GiB)]
    e = card(allocated=11 * GiB, cached_free=int(0.8 * GiB), largest=300 * MiB,
             requested=1536 * MiB, limit=12 * GiB, batch_size=32, steps=steps)
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound
    assert "another input dimension grew" in a.projection
    assert a.projected_peak_bytes == 11 * GiB + 1536 * MiB
    assert a.advice and not any(x.fits for x in a.advice)
    text = _oom_report.format_report(e, a.advice, when="2026-12-03 00:00:00")
    assert "at least" in text and "lower bound" in text


def test_the_memory_model_through_past_batches_is_a_projection_that_can_promise():
    # GPT-2 doubling its batch on the card: batch 256 after 8 ... 128. The model's line is not
    # a lower bound: the batch that fits is promised, as vramscope fit would promise it.
    steps = doubling_steps([8.3, 16.1, 31.8, 63.0, 125.5])
    e = card(allocated=87 * GiB, cached_free=int(5.8 * GiB), largest=int(3.4 * GiB),
             requested=int(49.1 * GiB), batch_size=256, steps=steps)
    a = _oom_remedies.assess(e)
    assert not a.projection_is_lower_bound
    assert a.projection.startswith("the memory model: a line through the exact step peaks at 5")
    # Independently of the model's code: the higher of the least-squares line through the five
    # peaks and the line through the two largest, at 256 (the model's conservative choice).
    import statistics

    batches = [8, 16, 32, 64, 128]
    peaks = [s.peak_allocated_bytes for s in steps]
    slope, intercept = statistics.linear_regression(batches, peaks)
    local = peaks[-1] + (peaks[-1] - peaks[-2]) / 64 * 128
    assert abs(a.projected_peak_bytes - max(intercept + slope * 256, local)) <= 1
    assert a.advice[0].kind == "batch_size" and a.advice[0].fits


def test_the_failing_request_alone_promises_nothing():
    e = card(allocated=70 * GiB, cached_free=0, largest=0, requested=80 * GiB)
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound and a.projection.startswith("the failing request")
    assert not any(x.fits for x in a.advice)
    assert "at least" in a.advice[0].detail


def test_a_first_step_oom_in_the_forward_counts_the_gradients_and_state_still_to_come():
    # vramscope run, first step, ViT-like: 1.3 GiB of fp32 parameters, AdamW's state not yet
    # allocated; the OOM came early in the forward with 3 GiB allocated under a 4 GiB cap.
    e = card(allocated=3 * GiB, cached_free=0, largest=0, requested=900 * MiB, limit=4 * GiB,
             phase="forward", parameter_bytes=int(1.3 * GiB), optimizer="AdamW",
             optimizer_state_full_bytes=int(2.6 * GiB))
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound
    assert a.projected_peak_bytes == int(1.3 * GiB) * 2 + int(2.6 * GiB)
    assert a.projection.startswith("parameters, gradients and the full AdamW state")
    assert a.need_bytes == a.projected_peak_bytes - e.budget_bytes
    # AdamW's multi-tensor step makes parameter-sized temporaries too: live at that step.
    e.optimizer_temporary_bytes = int(1.3 * GiB)
    a = _oom_remedies.assess(e)
    assert a.projected_peak_bytes == int(1.3 * GiB) * 3 + int(2.6 * GiB)
    assert "and its step's temporaries" in a.projection


def test_a_sequence_that_grew_at_the_same_batch_is_named_and_only_bounds_the_need():
    # The T5 under vramscope run: batch 32 ran at source length 256 (peak 9 GiB); the
    # first step at 512 fails early, below that peak: the past peak is not this step's.
    steps = [StepPoint(1, 9 * GiB, GiB, batch_size=32, peak_reserved_bytes=10 * GiB)]
    e = card(allocated=5 * GiB, cached_free=int(0.5 * GiB), largest=200 * MiB,
             requested=2 * GiB, limit=12 * GiB, batch_size=32, steps=steps,
             input_shape=(32, 512), past_input_shape=(32, 256))
    assert _oom_remedies.grown_dims(e) == "dimension 1: 256 -> 512"
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound
    assert "smaller input (dimension 1: 256 -> 512)" in a.projection
    assert not any(x.fits for x in a.advice)


def test_the_probe_keeps_the_input_shape_per_batch_for_the_report():
    import torch

    from vramscope.attribution.model_probe import ModelProbe, input_shape

    assert input_shape(({"input_ids": torch.zeros(4, 7, dtype=torch.long)},)) == (4, 7)
    model = torch.nn.Embedding(10, 3)
    probe = ModelProbe()
    probe.attach(model)
    # A length curriculum, two steps each: the second step at 9 runs out. The past shape is
    # the smallest that ran at that batch, not the last (9 already, which would say nothing
    # grew); a larger batch's shapes are its own.
    for length in (5, 5, 9):
        model(torch.zeros(2, length, dtype=torch.long))
        probe.step_end()
    model(torch.zeros(4, 3, dtype=torch.long))
    probe.step_end()
    model(torch.zeros(2, 9, dtype=torch.long))
    evidence = probe.evidence()
    probe.close()
    assert evidence["input_shape"] == (2, 9) and evidence["past_input_shape"] == (2, 5)


def test_the_input_of_the_step_before_discovery_is_a_past_shape_when_the_next_has_its_rank():
    # A curriculum under `vramscope run`: the probe finds the model at the first step's end
    # (its forward ran without the hook), and the second step, longer, runs out. The first
    # step's input is read beside the model in the loop's locals, and kept once the next
    # forward shows an input of its rank and batch.
    import sys

    import torch

    from vramscope.attribution.model_probe import ModelProbe

    model = torch.nn.Embedding(10, 3)
    probe = ModelProbe()

    def optimizer_hook():
        # A step end from inside the optimizer's hook: the loop is further out.
        probe.discover(sys._getframe())

    def loop(net, lengths, then):
        for i, length in enumerate(lengths):
            batch = {"input_ids": torch.zeros(2, length, dtype=torch.long)}
            net(**{"input": batch["input_ids"]}).sum().backward()
            if i == 0:
                optimizer_hook()
            else:
                probe.step_end()
        then()

    def out_of_memory():
        model(torch.zeros(2, 9, dtype=torch.long))
        seen.append(probe.evidence())

    seen: list = []
    loop(model, [5], out_of_memory)
    assert probe.attached
    assert seen[0]["input_shape"] == (2, 9) and seen[0]["past_input_shape"] == (2, 5)
    probe.close()
    # A guess of another rank (the labels, say) is no past shape of this input.
    probe, seen = ModelProbe(), []

    class Failing(dict):
        def values(self):
            raise RuntimeError("a mapping of the program's that fails")

    def labels_only(net):
        odd = Failing(a=1)  # noqa: F841 -- read first, and passed over
        labels = torch.zeros(2, 1, 1)  # noqa: F841 -- what the loop holds at the step end
        probe.discover(sys._getframe())
        model(torch.zeros(2, 9, dtype=torch.long))
        seen.append(probe.evidence())

    labels_only(model)
    assert "past_input_shape" not in seen[0]
    probe.close()


def test_inference_under_no_grad_in_generate_weighs_neither_checkpointing_nor_the_optimizer():
    # The GPT-2 generate(): batch 192, 1024 new tokens under no_grad and an 8 GiB cap.
    e = card(allocated=int(7.5 * GiB), cached_free=int(0.4 * GiB), largest=100 * MiB,
             requested=384 * MiB, limit=8 * GiB, batch_size=192, phase="forward",
             grad_enabled=False, generating=True, parameter_bytes=500 * MiB, optimizer="AdamW",
             optimizer_state_full_bytes=GiB, categories={"activations": 6 * GiB},
             block_lists=[("transformer.h", "GPT2Block", 12)])
    a = _oom_remedies.assess(e)
    assert a.projection_is_lower_bound and "inside generate()" in a.projection
    reasons = dict(a.not_advised)
    assert "autograd was off" in reasons["activation_checkpointing"]
    assert "autograd was off" in reasons["optimizer_state"]
    assert not any(x.fits for x in a.advice)


def test_the_probe_says_whether_autograd_was_on_at_the_oom():
    import sys

    import torch

    from vramscope.attribution.model_probe import ModelProbe

    probe = ModelProbe()
    with torch.no_grad():
        assert probe.evidence([sys._getframe()])["grad_enabled"] is False
    assert probe.evidence([sys._getframe()])["grad_enabled"] is True
    assert "grad_enabled" not in probe.evidence()


def test_an_oom_inside_the_optimizers_step_is_no_inference_though_autograd_is_off():
    # Optimizer.step turns autograd off itself: the GPU's AdamW program (8 x 256 MiB Linear, a
    # 7 GiB cap) ran out while AdamW made its state, with grad_enabled False at the OOM.
    e = card(allocated=int(6.81 * GiB), cached_free=2 * MiB, largest=2 * MiB,
             requested=256 * MiB, limit=7 * GiB, batch_size=8, phase="optimizer",
             grad_enabled=False, parameter_bytes=2 * GiB, optimizer="AdamW",
             optimizer_state_bytes=int(2.75 * GiB), optimizer_state_full_bytes=4 * GiB,
             categories={"parameters": 2 * GiB, "gradients": 2 * GiB,
                         "optimizer_state": int(2.75 * GiB), "activations": 32 * MiB},
             block_lists=[("", "Linear", 8)])
    a = _oom_remedies.assess(e)
    assert "optimizer_state" not in dict(a.not_advised)
    assert a.advice[0].kind == "optimizer_state", [x.kind for x in a.advice]


def test_polled_step_peaks_give_only_a_lower_bound():
    # The same evidence whose past step at the failing batch would be a measured projection:
    # with polled peaks it is only "at least", and nothing is promised to fit.
    from vramscope.postmortem.advice import OomEvidence, StepPoint
    from vramscope.postmortem.remedies import assess

    GiB = 1 << 30
    e = OomEvidence(device=0, requested_bytes=GiB, device_total_bytes=80 * GiB,
                    device_free_bytes=0, allocated_bytes=6 * GiB, reserved_bytes=7 * GiB,
                    steps=[StepPoint(s, 9 * GiB, 5 * GiB, 64, 10 * GiB) for s in (1, 2, 3)],
                    batch_size=64, limit_bytes=8 * GiB)
    exact = assess(e)
    assert not exact.projection_is_lower_bound
    e.peaks_exact = False
    polled = assess(e)
    assert polled.projection_is_lower_bound and "polling mode" in polled.projection
    assert not any(a.fits for a in polled.advice)
