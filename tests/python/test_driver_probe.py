# tests/python/test_driver_probe.py -- _agent.driver_process_bytes through the real dlopen path,
# against the NVML test double (Monitor's per-step non-PyTorch bytes), and its TensorBoard tag
import subprocess
import sys

import pytest

from _exporter_paths import DATA, nvml_double

GPU0 = "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00"
GPU1 = "GPU-5d0c1a53-1c2e-4c3f-9b7e-0a1b2c3d4e01"

PROBE = f"""
import torch  # the extension binds to the libc10 that torch loads
from vramscope import _agent
print(_agent.driver_process_bytes("{GPU0}", 5001001))
print(_agent.driver_process_bytes("{GPU1}", 5001004))  # NVML: not available
print(_agent.driver_process_bytes("{GPU0}", 4242))     # not listed: another pid namespace
print(_agent.driver_process_bytes("MIG-{GPU0[4:]}", 5001001))
print(repr(_agent.driver_probe_error()))
"""


def run_probe(env_extra):
    import os
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.fixture
def agent_built():
    pytest.importorskip("torch")
    pytest.importorskip("vramscope._agent", reason="the agent extension is not built")


def test_reads_the_pid_on_the_gpu_named_by_uuid(agent_built):
    double = nvml_double()
    if double is None:
        pytest.skip("the NVML test double is not built (VRAMSCOPE_TEST=ON)")
    lines = run_probe({"VRAMSCOPE_NVML_LIBRARY": str(double),
                       "VRAMSCOPE_NVML_DOUBLE_SCRIPT": str(DATA / "nvml" / "two_gpus.json")})
    assert lines == ["81604378624", "None", "None", "None", "''"], lines


def test_without_a_driver_every_answer_is_none_with_a_reason(agent_built, tmp_path):
    lines = run_probe({"VRAMSCOPE_NVML_LIBRARY": str(tmp_path / "libnvidia-ml.so.1")})
    assert lines[:4] == ["None"] * 4, lines
    assert "NVML" in lines[4] or "libnvidia-ml" in lines[4], lines


def test_non_pytorch_bytes_becomes_a_tensorboard_scalar_only_when_known():
    import dataclasses

    from vramscope.steps.records import StepRecord

    pytest.importorskip("torch")  # the extension binds to the libc10 torch loaded first
    agent = pytest.importorskip("vramscope._agent", reason="the agent extension is not built")
    step_scalars = agent.tensorboard_step_scalars

    record = StepRecord(step=3, device=1, rank=0, world_size=1, allocated_bytes=10,
                        reserved_bytes=20, peak_allocated_bytes=30, peak_reserved_bytes=40,
                        peak_requested_bytes=25, delta_allocated_bytes=0,
                        non_pytorch_bytes=524288000)
    tags = dict(step_scalars(record))
    assert tags["memory/cuda1/non_pytorch_bytes"] == 524288000.0
    record = dataclasses.replace(record, non_pytorch_bytes=None)
    assert "memory/cuda1/non_pytorch_bytes" not in dict(step_scalars(record))
