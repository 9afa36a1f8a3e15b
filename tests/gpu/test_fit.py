# tests/gpu/test_fit.py -- vramscope fit against the true largest batch, each size a fresh process
#
# fit_program.py is a plain training program under a 2 GiB cap. The true largest batch is found
# by bisection, each batch in a fresh process; fit's answer (the API in-process, and the CLI
# with a fresh process per probe) must run, never exceed it, and be at most 10 % (or one
# multiple of 8) below it, with no OOM during the search. About a minute on an H200.
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import CLI, HERE, NO_CLI, gpu_env

#: Bisections in fresh processes: the slow group (pytest tests/gpu -m slow).
pytestmark = pytest.mark.slow

PROGRAM = str(HERE / "fit_program.py")


def runs(batch: int) -> bool:
    out = subprocess.run([sys.executable, PROGRAM, "run", str(batch)], env=gpu_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 3), out.stderr[-3000:]
    return out.returncode == 0


def true_largest(start: int) -> int:
    low, high = 0, start
    while runs(high):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if runs(mid) else (low, mid)
    return low


@pytest.fixture(scope="module")
def api_answer():
    out = subprocess.run([sys.executable, PROGRAM, "fit"], env=gpu_env(), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def truth(api_answer):
    return true_largest(max(1, api_answer["answer"]))


def close_below(answer: int, truth: int) -> bool:
    return 0 < answer <= truth and (answer >= 0.9 * truth or truth - answer <= 8)


def test_the_api_answer_runs_and_is_close_below_the_truth(api_answer, truth):
    assert api_answer["ooms"] == 0, api_answer["describe"]
    # (size, peak allocated, pinned, resident bytes) of each probe: beside the CLI's, whose
    # probes are fresh processes, they say where the two answers part.
    assert close_below(api_answer["answer"], truth), (truth, api_answer["describe"],
                                                      api_answer["probes"])
    assert runs(api_answer["answer"])


@pytest.mark.skipif(not CLI, reason=NO_CLI)
def test_the_cli_answer_from_fresh_processes_is_close_below_the_truth(truth):
    cli = CLI
    out = subprocess.run([cli, "fit", "--budget", "cap", "--json", "--", sys.executable, PROGRAM,
                          "run", "{}"], env=gpu_env(VRAMSCOPE_PYTHON=sys.executable),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert close_below(result["answer"], truth), (truth, out.stdout)
