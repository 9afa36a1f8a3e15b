# tests/gpu/test_nvml_backend.py -- the C++ NVML backend on the real driver, against nvidia-smi
#
# Runs the RealNvml.* gtests of test_backends (built in $VRAMSCOPE_BUILD_DIR, default build/dev)
# with VRAMSCOPE_TEST_REAL_NVML=1, and the NVML benchmark in real mode for a short while.
# Skipped where no NVIDIA GPU answers nvidia-smi.
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("VRAMSCOPE_BUILD_DIR", ROOT / "build" / "dev"))


def _gpu_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return result.returncode == 0 and "GPU" in result.stdout


pytestmark = pytest.mark.skipif(not _gpu_present(), reason="needs an NVIDIA GPU and nvidia-smi")


def test_backend_matches_nvidia_smi():
    binary = BUILD / "tests" / "cpp" / "test_backends"
    if not binary.exists():
        pytest.fail(f"{binary} not built (configure with -DVRAMSCOPE_TEST=ON)")
    env = dict(os.environ, VRAMSCOPE_TEST_REAL_NVML="1")
    result = subprocess.run([str(binary), "--gtest_filter=RealNvml.*", "--gtest_brief=0"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[  SKIPPED ]" not in result.stdout, result.stdout
    assert "[  PASSED  ] 3 tests" in result.stdout, result.stdout


def test_sustained_sampling_benchmark_runs():
    binary = BUILD / "bench" / "bench_nvml"
    if not binary.exists():
        pytest.skip(f"{binary} not built (configure with -DVRAMSCOPE_BENCH=ON)")
    env = dict(os.environ, VRAMSCOPE_BENCH_REAL_NVML="1", VRAMSCOPE_BENCH_SUSTAINED_SECONDS="1")
    result = subprocess.run([str(binary), "--benchmark_filter=BM_Sustained"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cpu_percent_of_one_core=" in result.stdout, result.stdout
