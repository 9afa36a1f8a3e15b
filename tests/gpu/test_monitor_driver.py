# tests/gpu/test_monitor_driver.py -- the Monitor's per-step non-PyTorch bytes agree with the
# driver: reserved + non-PyTorch = what nvidia-smi charges the training pid, and it reaches the
# TensorBoard run.
#
# The trainer closes its last step, prints the record and holds still (blocked on stdin) while
# the test asks nvidia-smi, so both describe the same memory.
import json
import struct
import subprocess
import sys

import pytest

from conftest import gpu_env
from test_cli_vs_nvidia_smi import _apps, _nvidia_smi_works, mib

pytestmark = pytest.mark.skipif(not _nvidia_smi_works(), reason="nvidia-smi absent or failing")

TRAINER = r"""
import json, sys
import torch, vramscope
torch.cuda.init()
vramscope.attach()
model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(),
                            torch.nn.Linear(8192, 2048)).cuda()
opt = torch.optim.AdamW(model.parameters())
with vramscope.Monitor(every=0, exit_table_rows=0, devices=[0], tensorboard_dir=sys.argv[1]) as mon:
    for batch in (64, 256, 128):
        model(torch.randn(batch, 2048, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        mon.step()
print(json.dumps({"records": [{"step": r.step, "reserved_bytes": r.reserved_bytes,
                               "non_pytorch_bytes": r.non_pytorch_bytes} for r in mon.history],
                  "reserved_now": torch.cuda.memory_reserved(0)}), flush=True)
sys.stdin.readline()
"""


def test_non_pytorch_plus_reserved_is_what_the_driver_charges_the_pid(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, str(tmp_path / "tb")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=gpu_env())
    try:
        line = trainer.stdout.readline()
        assert line, trainer.stderr.read()
        state = json.loads(line)
        apps = _apps()
    finally:
        trainer.stdin.close()
        trainer.wait(timeout=60)
    records = state["records"]
    assert [r["step"] for r in records] == [1, 2, 3], records
    assert all(r["non_pytorch_bytes"] is not None for r in records), \
        f"NVML did not list the trainer's pid {trainer.pid}: {records}"
    last = records[-1]
    assert last["reserved_bytes"] == state["reserved_now"], (last, state)
    # The CUDA context alone is hundreds of MiB on an H200.
    assert last["non_pytorch_bytes"] >= 100 << 20, last
    driver_mib = apps.get(trainer.pid)
    assert driver_mib is not None, f"pid {trainer.pid} not in nvidia-smi's apps: {apps}"
    assert mib(last["reserved_bytes"] + last["non_pytorch_bytes"]) == driver_mib, \
        (last, driver_mib)

    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"),
                                             size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    got = {e.step: e.value for e in acc.Scalars("memory/cuda0/non_pytorch_bytes")}
    # Event files hold float32.
    want = {r["step"]: struct.unpack("f", struct.pack("f", float(r["non_pytorch_bytes"])))[0]
            for r in records}
    assert got == want, (got, want)
