# tests/gpu/test_oom_advice.py -- realistic OOMs: the report's numbers and its first advice, applied
#
# Each test runs one program of oom_programs.py until it runs out of memory, checks the report
# against what torch's own OOM observer saw (memory_stats, mem_get_info, the cap) and the NVML
# figure in torch's message, then applies the report's FIRST advice in a fresh process (the
# environment variable, the suggested batch, checkpointing of the named modules, the lighter
# optimizer, the leak fixed, the other process stopped) and requires the same program to run to
# the end without any OOM. Caps (set_per_process_memory_fraction) keep most of them to a few
# GiB; the whole file takes about two minutes on an H200.
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from vramscope.postmortem.advice import parse_oom_message

from conftest import HERE, gpu_env, wait_for_idle_card

#: Whole programs run out of memory, are measured, then run again with the advice: the slow
#: group (pytest tests/gpu -m slow).
pytestmark = pytest.mark.slow

PROGRAMS = HERE / "oom_programs.py"
GiB = 1 << 30
MiB = 1 << 20
#: The report's numbers shown when an assertion fails.
NUMBERS = ("requested_bytes", "shortfall_bytes", "need_bytes", "projected_peak_bytes",
           "projection", "budget_bytes", "available_bytes", "limit_bytes", "reserved_bytes",
           "allocated_bytes", "cached_free_bytes", "largest_free_block_bytes",
           "device_total_bytes", "device_free_bytes", "process_driver_bytes",
           "non_pytorch_bytes", "other_processes_bytes", "outside_bytes", "batch_size",
           "phase", "forward_progress", "block_lists", "optimizer", "optimizer_state_bytes",
           "optimizer_state_full_bytes", "categories", "steps", "holders", "advice",
           "not_advised")


def _run(tmp_path: pathlib.Path, name: str, scenario: str, advice: dict[str, Any] | None,
         via_run: bool, **env: str) -> tuple[subprocess.CompletedProcess, pathlib.Path,
                                             pathlib.Path]:
    reports = tmp_path / f"{name}-reports"
    seen = tmp_path / f"{name}-seen.json"
    command = [sys.executable] + (["-m", "vramscope.run"] if via_run else []) + \
        [str(PROGRAMS), scenario] + (["--apply", json.dumps(advice)] if advice else [])
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=gpu_env(VRAMSCOPE_OOM_DIR=str(reports), OOM_SEEN=str(seen), **env))
    return out, reports, seen


def run_out_of_memory(tmp_path: pathlib.Path, scenario: str, via_run: bool = False,
                      **env: str) -> tuple[dict[str, Any], str]:
    """Runs the scenario until its OOM; returns (the JSON report, a summary for messages) after
    checking the report's numbers."""
    out, reports, seen = _run(tmp_path, "oom", scenario, None, via_run, **env)
    log = f"--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-6000:]}"
    assert out.returncode != 0 and "OutOfMemoryError" in out.stderr, log
    # The OOM that ended the program's report (one it went on after is marked survived).
    found = [f for f in sorted(reports.glob("vramscope-oom-*.json"))
             if not json.loads(f.read_text())["survived"]]
    assert len(found) == 1, f"{found}\n{log}"
    report = json.loads(found[0].read_text())
    summary = json.dumps({k: report.get(k) for k in NUMBERS}, indent=1)
    summary += "\n--- seen by torch's observer\n" + seen.read_text() + "\n" + log
    check_numbers(report, json.loads(seen.read_text()), out.stderr, summary)
    return report, summary


def check_numbers(r: dict[str, Any], seen: dict[str, Any], stderr: str, summary: str) -> None:
    """The report against torch at the same OOM: free <= budget <= total, the cap, NVML."""
    assert r["schema_version"] == 6, summary
    assert r["from_exception"] is False, summary
    assert r["allocated_bytes"] == seen["allocated"], summary
    assert r["reserved_bytes"] == seen["reserved"], summary
    assert r["requested_bytes"] == seen["requested"], summary
    assert r["device_total_bytes"] == seen["total"], summary
    assert r["device_free_bytes"] == seen["observer_free"], summary
    if seen["fraction"] < 1.0:
        # torch hands the cap to OOM observers as "device_total"; the report keeps both.
        assert r["limit_bytes"] == seen["observer_total"], summary
        assert abs(r["limit_bytes"] - seen["fraction"] * seen["total"]) <= MiB, summary
    else:
        assert r["limit_bytes"] is None, summary
    total, free, reserved = seen["total"], seen["observer_free"], seen["reserved"]
    cap = r["limit_bytes"] or total
    assert r["budget_bytes"] == min(cap, reserved + free), summary
    assert 0 <= r["available_bytes"] <= r["budget_bytes"] <= r["device_total_bytes"], summary
    assert r["available_bytes"] == r["budget_bytes"] - reserved, summary
    assert r["shortfall_bytes"] == max(0, r["requested_bytes"] - r["available_bytes"]), summary
    assert r["shortfall_bytes"] > 0, summary
    assert r["need_bytes"] >= r["shortfall_bytes"], summary
    assert r["outside_bytes"] == max(0, total - free - reserved), summary
    message = parse_oom_message(stderr)
    assert abs(message["requested_bytes"] - r["requested_bytes"]) <= \
        0.01 * r["requested_bytes"] + MiB, summary
    driver = r["process_driver_bytes"]
    if driver is not None:
        # NVML's bytes for this pid: the allocator's reserved plus context and libraries.
        assert driver >= reserved, summary
        assert r["non_pytorch_bytes"] == driver - reserved, summary
        assert r["non_pytorch_bytes"] < 4 * GiB, summary
        assert r["other_processes_bytes"] == max(0, total - free - driver), summary
        if "process_driver_bytes" in message:  # torch asked NVML too, in its message
            assert abs(message["process_driver_bytes"] - driver) <= \
                0.01 * driver + 64 * MiB, summary
    else:
        assert r["non_pytorch_bytes"] is None and r["other_processes_bytes"] is None, summary
    first = r["advice"][0]
    # A remedy is promised to fit only against a projection that is not a lower bound; against
    # a lower bound the first one covers at least the known need.
    assert first["fits"] is True or (r["projection_is_lower_bound"] and
                                     first["covers_known_need"] is True), summary
    assert first["recovers_bytes"] >= r["need_bytes"] or first["kind"] == "batch_size", summary


def rerun_fits(tmp_path: pathlib.Path, scenario: str, advice: dict[str, Any],
               via_run: bool = False, **env: str) -> subprocess.CompletedProcess:
    """The same program with ``advice`` applied runs to the end, without a single OOM."""
    out, reports, _ = _run(tmp_path, "fixed", scenario, advice, via_run, **env)
    log = f"advice {json.dumps(advice)}\n--- stdout\n{out.stdout[-3000:]}\n" \
          f"--- stderr\n{out.stderr[-6000:]}"
    assert out.returncode == 0, log
    assert out.stdout.strip().splitlines()[-1] == "ok", log
    assert not list(reports.glob("vramscope-oom-*")), log
    return out


def kinds(report: dict[str, Any]):
    return [a["kind"] for a in report["advice"]]


def largest_that_runs(tmp_path: pathlib.Path, scenario: str, runs: int, fails: int,
                      via_run: bool = False) -> int:
    """The true largest batch of ``scenario`` between a batch that ran and one that failed,
    by bisection, each batch in a fresh process (the scenario's own batch advice applied)."""
    while fails - runs > 1:
        mid = (runs + fails) // 2
        out, reports, _ = _run(tmp_path, f"bisect-{mid}", scenario,
                               {"kind": "batch_size", "batch_size": mid}, via_run)
        ok = out.returncode == 0 and not list(reports.glob("vramscope-oom-*"))
        runs, fails = (mid, fails) if ok else (runs, mid)
    return runs


def test_batch_growth_on_the_full_card_advises_the_batch_that_fits(tmp_path):
    # GPT-2 (4 layers, 512 wide, 512 tokens), batch 8, 16, 32, ... two steps each, a plain
    # Monitor(): the card itself runs out. Expandable segments cannot make that fit.
    report, summary = run_out_of_memory(tmp_path, "batch_growth")
    first = report["advice"][0]
    assert first["kind"] == "batch_size", summary
    batches = [s["batch_size"] for s in report["steps"]]
    assert len({b for b in batches if b}) >= 2, summary  # read without being told
    assert report["batch_size"] > max(b for b in batches if b), summary
    assert first["from_batch_size"] == report["batch_size"], summary
    assert 0 < first["batch_size"] < report["batch_size"], summary
    assert first["margin_bytes"] > 0, summary
    assert "expandable_segments" not in kinds(report), summary
    assert report["limit_bytes"] is None, summary
    rerun_fits(tmp_path, "batch_growth", first)


def test_memory_fraction_cap_under_vramscope_run(tmp_path):
    # `vramscope run` on a program with no vramscope code, under a 3 GiB cap: the numbers are
    # the cap's (free for PyTorch within the cap, while the device has far more free), and the
    # batch that fits under the cap is advised first; raising the cap fits too, later.
    report, summary = run_out_of_memory(tmp_path, "capped_growth", via_run=True)
    assert abs(report["limit_bytes"] - 3 * GiB) <= MiB, summary
    assert report["budget_bytes"] == report["limit_bytes"], summary
    assert report["device_free_bytes"] > report["budget_bytes"], summary
    first = report["advice"][0]
    assert first["kind"] == "batch_size", summary
    # The raised cap is considered: advised later, or, where the step run under it ran out,
    # said why not.
    assert "memory_fraction" in kinds(report)[1:] or any(
        n["kind"] == "memory_fraction" and "raised cap" in n["reason"]
        for n in report["not_advised"]), summary
    out = rerun_fits(tmp_path, "capped_growth", first, via_run=True)
    assert "0 OOMs" in out.stderr, out.stderr
    # Not any batch below the failing one: at least 90 % of the true largest (or one multiple
    # of 8 below it), found by bisection in fresh processes.
    truth = largest_that_runs(tmp_path, "capped_growth", first["batch_size"],
                              report["batch_size"], via_run=True)
    assert first["batch_size"] >= min(0.9 * truth, truth - 8), (truth, summary)


def test_a_length_that_grew_is_capped_first_and_the_capped_run_ends(tmp_path):
    # `vramscope run`, no vramscope code: a GPT-2 length curriculum runs out part-way. Measured
    # after the OOM, the longest length that runs at the failing batch comes first, promised;
    # what was measured at the failing length only (a smaller batch, checkpointing) is listed
    # but not promised: the next steps are longer.
    report, summary = run_out_of_memory(tmp_path, "length_growth", via_run=True)
    assert report["measured"] is not None, summary
    first = report["advice"][0]
    assert first["kind"] == "sequence_length" and first["fits"], summary
    assert first["dim"] == 1 and first["batch_size"] == 16, summary
    assert 128 <= first["max_length"] < first["from_length"] == report["input_shape"][1], summary
    assert report["past_input_shape"][1] < first["from_length"], summary
    for other in report["advice"][1:]:
        assert not other["fits"] and "input_grew" in other, summary
    rerun_fits(tmp_path, "length_growth", first, via_run=True)


def test_fragmentation_expandable_segments_make_the_rerun_fit(tmp_path):
    report, summary = run_out_of_memory(tmp_path, "fragmentation")
    first = report["advice"][0]
    assert first["kind"] == "expandable_segments", summary
    assert report["cached_free_bytes"] + report["available_bytes"] >= \
        report["requested_bytes"], summary
    assert report["largest_free_block_bytes"] < report["requested_bytes"], summary
    assert any(n["kind"] == "empty_cache" for n in report["not_advised"]), summary
    rerun_fits(tmp_path, "fragmentation", first, **{first["env"]: first["value"]})


def test_leak_of_kept_outputs_is_advised_first(tmp_path):
    report, summary = run_out_of_memory(tmp_path, "leak")
    first = report["advice"][0]
    assert first["kind"] == "leak", summary
    assert abs(first["bytes_per_step"] - 256 * MiB) <= 0.01 * 256 * MiB, summary
    assert abs(report["leak_rate_bytes"] - 256 * MiB) <= 0.01 * 256 * MiB, summary
    # The list is named from the traceback, and emptying it freed exactly its logits (each
    # backward had freed what their graphs saved), but for the last one when the OOM came in
    # the model's forward: the loop's `logits` still held it.
    assert [h["name"] for h in first["holders"]] == ["kept"], summary
    [kept] = [h for h in report["holders"] if h["name"] == "kept"]
    assert kept["graphs"] == kept["items"] >= 4, summary
    held_by_loop = 1 if report["phase"] == "forward" else 0
    assert kept["freed_bytes"] == (kept["items"] - held_by_loop) * 256 * MiB, summary
    rerun_fits(tmp_path, "leak", first)


def test_another_process_holding_the_card(tmp_path):
    hog = subprocess.Popen([sys.executable, str(PROGRAMS), "hog"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env=gpu_env())
    try:
        ready = hog.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        held = int(ready[1])
        report, summary = run_out_of_memory(tmp_path, "crowded")
    finally:
        hog.stdin.close()
        hog.wait(timeout=60)
    # The rerun needs the card the hog held: its context is torn down after it exits.
    wait_for_idle_card()
    first = report["advice"][0]
    assert first["kind"] == "other_processes", summary
    if not first["estimated"]:  # NVML named this process's bytes: the rest is the hog's
        assert abs(first["other_processes_bytes"] - held) <= 0.02 * held + GiB, summary
    assert first["other_processes_bytes"] >= 0.9 * held, summary
    rerun_fits(tmp_path, "crowded", first)  # the other process has stopped


def test_activation_heavy_model_checkpointing_the_named_blocks_fits(tmp_path):
    report, summary = run_out_of_memory(tmp_path, "activations")
    first = report["advice"][0]
    assert first["kind"] == "activation_checkpointing", summary
    assert (first["modules"], first["class"], first["count"]) == ("blocks", "Block", 8), summary
    assert report["phase"] == "forward" and 0 < report["forward_progress"] < 1, summary
    assert report["categories"]["activations"] > 0, summary
    rerun_fits(tmp_path, "activations", first)


def test_optimizer_state_dominated_model_lighter_optimizer_fits(tmp_path):
    report, summary = run_out_of_memory(tmp_path, "optimizer_state")
    first = report["advice"][0]
    assert first["kind"] == "optimizer_state", summary
    assert first["from_optimizer"] == "AdamW" and first["optimizer"] == "Adafactor", summary
    assert report["phase"] == "optimizer", summary
    params = 8 * 8192 * 8192 * 4
    assert report["optimizer_state_full_bytes"] == 2 * params, summary
    assert any(n["kind"] == "batch_size" for n in report["not_advised"]), summary
    rerun_fits(tmp_path, "optimizer_state", first)
