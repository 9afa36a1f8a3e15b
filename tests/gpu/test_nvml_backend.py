# tests/gpu/test_nvml_backend.py -- the C++ NVML backend on the real driver, against nvidia-smi
#
# With a build folder ($VRAMSCOPE_BUILD_DIR, default build/dev): the RealNvml.* gtests of
# test_backends with VRAMSCOPE_TEST_REAL_NVML=1, and the NVML benchmark in real mode for a short
# while. Without one (the wheel installed on a GPU machine): the same checks through the
# installed CLI, whose one-shot JSON and `watch` read the same backend.
# Skipped where no NVIDIA GPU answers nvidia-smi.
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import CLI, NO_CLI

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("VRAMSCOPE_BUILD_DIR", ROOT / "build" / "dev"))


def _gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return result.returncode == 0 and "GPU" in result.stdout


pytestmark = pytest.mark.skipif(not _gpu_present(), reason="needs an NVIDIA GPU and nvidia-smi")


def _smi(query: str) -> list[list[str]]:
    out = subprocess.run(["nvidia-smi", f"--query-{query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return [[f.strip() for f in line.split(",")] for line in out.strip().splitlines()]


def _backend_through_the_cli() -> None:
    """RealNvml.MatchesNvidiaSmi through `vramscope --json`: each GPU's identity and totals."""
    if not CLI:
        pytest.skip(NO_CLI)
    out = subprocess.run([CLI, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    devices = {d["index"]: d for d in json.loads(out.stdout)["devices"]}
    rows = _smi("gpu=index,uuid,pci.bus_id,memory.total,memory.reserved")
    assert len(rows) == len(devices)
    for index, uuid, bus, total, reserved in rows:
        ours = devices[int(index)]
        assert not ours["lost"] and not ours["error"], ours
        assert ours["uuid"] == uuid
        assert ours["pci_bus_id"] == bus
        assert ours["total_bytes"] // (1 << 20) == int(total)
        assert ours["reserved_bytes"] // (1 << 20) == int(reserved)
        assert ours["memory_info_version"] == 2, "GetMemoryInfo_v2 failed: the version word?"


def test_backend_matches_nvidia_smi():
    binary = BUILD / "tests" / "cpp" / "test_backends"
    if not binary.exists():
        _backend_through_the_cli()
        return
    env = dict(os.environ, VRAMSCOPE_TEST_REAL_NVML="1")
    result = subprocess.run([str(binary), "--gtest_filter=RealNvml.*", "--gtest_brief=0"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[  SKIPPED ]" not in result.stdout, result.stdout
    assert "[  PASSED  ] 3 tests" in result.stdout, result.stdout


def _thousand_samples_through_the_cli() -> None:
    """RealNvml.ThousandSamplesWithoutErrors through `vramscope watch` at 1 ms."""
    if not CLI:
        pytest.skip(NO_CLI)
    out = subprocess.run([CLI, "watch", "--interval", "1ms", "--count", "1000", "--format",
                          "jsonl", "--no-agents"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    samples = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(samples) == 1000
    for i, doc in enumerate(samples):
        for device in doc["devices"]:
            assert not device["error"] and device["used_bytes"] is not None, (i, device)


def test_sustained_sampling_benchmark_runs():
    binary = BUILD / "bench" / "bench_nvml"
    if not binary.exists():
        _thousand_samples_through_the_cli()
        return
    env = dict(os.environ, VRAMSCOPE_BENCH_REAL_NVML="1", VRAMSCOPE_BENCH_SUSTAINED_SECONDS="1")
    result = subprocess.run([str(binary), "--benchmark_filter=BM_Sustained"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cpu_percent_of_one_core=" in result.stdout, result.stdout
