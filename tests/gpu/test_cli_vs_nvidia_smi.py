# tests/gpu/test_cli_vs_nvidia_smi.py -- `vramscope --json` agrees with nvidia-smi on a real GPU
#
# Needs a working nvidia-smi, torch with CUDA, and the vramscope binary (env VRAMSCOPE_CLI, else
# PATH). Skipped otherwise. Run:
#   VRAMSCOPE_CLI=build/release/cli/vramscope pytest tests/gpu -k nvidia_smi
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import NO_CLI, cli_path

MIB = 1024 * 1024


def mib(value: int) -> int:
    """Whole MiB rounded up: nvidia-smi's rule (reserved 615.06 MiB prints as 616)."""
    return -(-value // MIB)
HOLD_BYTES = 2 * 1024 * MIB

GPU_QUERY = [
    "nvidia-smi",
    "--query-gpu=index,memory.total,memory.reserved,memory.used,memory.free",
    "--format=csv,noheader,nounits",
]
APPS_QUERY = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def _nvidia_smi_works():
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _nvidia_smi_works(), reason="nvidia-smi absent or failing")


def _cli():
    path = cli_path()
    if not path:
        pytest.skip(NO_CLI)
    return path


def _mib_or_none(text):
    text = text.strip()
    return None if text.startswith("[") or text in ("N/A", "") else int(text)


def _gpu_rows():
    """{index: {"total": MiB, "reserved": MiB|None, "used": MiB, "free": MiB}}"""
    out = subprocess.run(GPU_QUERY, capture_output=True, text=True, check=True, timeout=60).stdout
    rows = {}
    for line in out.strip().splitlines():
        index, total, reserved, used, free = (field.strip() for field in line.split(","))
        rows[int(index)] = {
            "total": _mib_or_none(total),
            "reserved": _mib_or_none(reserved),
            "used": _mib_or_none(used),
            "free": _mib_or_none(free),
        }
    return rows


def _apps():
    """{pid: used MiB} from nvidia-smi's compute apps."""
    out = subprocess.run(APPS_QUERY, capture_output=True, text=True, check=True, timeout=60).stdout
    apps = {}
    for line in out.strip().splitlines():
        pid, used = (field.strip() for field in line.split(","))
        apps[int(pid)] = _mib_or_none(used)
    return apps


@pytest.fixture
def torch_holder():
    """A python process holding HOLD_BYTES on cuda:0 until its stdin closes."""
    code = textwrap.dedent(
        f"""
        import sys, torch
        block = torch.empty({HOLD_BYTES}, dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()
        print("ready", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        pytest.skip("could not allocate with torch on cuda:0")
    yield proc
    proc.stdin.close()
    proc.wait(timeout=60)


def _between(value, a, b):
    return min(a, b) <= value <= max(a, b)


def test_vramscope_json_matches_nvidia_smi(torch_holder):
    cli = _cli()
    before = _gpu_rows()
    apps_before = _apps()
    result = subprocess.run([cli, "--json"], capture_output=True, text=True, timeout=60)
    after = _gpu_rows()
    apps_after = _apps()
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1

    devices = {d["index"]: d for d in doc["devices"]}
    assert set(devices) == set(before)
    for index, smi in before.items():
        ours = devices[index]
        assert not ours["lost"], ours["error"]
        assert mib(ours["total_bytes"]) == smi["total"]
        if smi["reserved"] is not None:
            assert (ours["reserved_bytes"] is not None
                    and mib(ours["reserved_bytes"]) == smi["reserved"])
        # used/free may move between the reads: ours must lie between nvidia-smi's two reads.
        assert _between(mib(ours["used_bytes"]), smi["used"], after[index]["used"]), \
            (index, ours, smi)
        assert _between(mib(ours["free_bytes"]), smi["free"], after[index]["free"]), \
            (index, ours, smi)

    pid = torch_holder.pid
    rows = [p for d in doc["devices"] for p in d["processes"] if p["pid"] == pid]
    assert len(rows) == 1, f"torch process {pid} not listed by vramscope"
    row = rows[0]
    assert row["type"] is not None and "C" in row["type"]
    assert row["used_bytes"] is not None and row["used_bytes"] >= HOLD_BYTES
    assert pid in apps_before and pid in apps_after
    assert _between(mib(row["used_bytes"]), apps_before[pid], apps_after[pid])
    if row["visible"]:
        assert "python" in row["command"]
