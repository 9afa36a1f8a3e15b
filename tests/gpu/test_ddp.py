# tests/gpu/test_ddp.py -- two NCCL ranks: each records its own rank and device
import json
import os
import socket
import subprocess
import sys

from conftest import HERE, gpu_env, needs_two_gpus

WORKER = r"""
import json, os, sys
import torch, torch.distributed as dist, torch.nn as nn
import vramscope

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
model = nn.parallel.DistributedDataParallel(nn.Linear(512, 512).cuda(), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters())
with vramscope.Monitor(every=0, auto_step=True, devices=[rank], exit_table_rows=0) as mon:
    for _ in range(4):
        model(torch.randn(64, 512, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad()
dist.barrier()
records = mon.history
print(json.dumps([{"rank": r.rank, "world_size": r.world_size, "device": r.device,
                   "step": r.step} for r in records]))
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_two_gpus
def test_each_rank_records_its_rank(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=gpu_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                          MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
             for r in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for rank, (p, (out, err)) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, err
        records = json.loads(out.strip().splitlines()[-1])
        assert [r["step"] for r in records] == [1, 2, 3, 4]
        assert all(r["rank"] == rank and r["world_size"] == 2 and r["device"] == rank
                   for r in records), records
