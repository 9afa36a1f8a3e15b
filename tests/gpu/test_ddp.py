# tests/gpu/test_ddp.py -- two NCCL ranks: each records its own rank and device; reduce_peaks
import json
import socket
import subprocess
import sys

from conftest import gpu_env, needs_two_gpus

WORKER = r"""
import json, os, sys
import torch, torch.distributed as dist, torch.nn as nn
import vramscope

rank = int(os.environ["RANK"])
reduce_peaks = os.environ.get("REDUCE_PEAKS") == "1"
torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
model = nn.parallel.DistributedDataParallel(nn.Linear(512, 512).cuda(), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters())
own = []
with vramscope.Monitor(every=0, auto_step=True, devices=[rank], exit_table_rows=0,
                       reduce_peaks=reduce_peaks) as mon:
    for i in range(4):
        # Ranks differ in batch (rank 1 larger at even steps, rank 0 at odd ones), so the
        # job-wide peak comes from a different rank at different steps.
        batch = 256 * (1 + 7 * ((rank + i) % 2))
        model(torch.randn(batch, 512, device="cuda")).sum().backward()
        opt.step()  # the Monitor closes the step here (and all-reduces its peaks)
        # The agent keeps this rank's own peaks of the step just closed.
        stats = vramscope.memory_stats(rank)
        own.append([stats["step_peak_allocated_bytes"], stats["step_peak_reserved_bytes"],
                    stats["step_peak_requested_bytes"]])
        opt.zero_grad()
dist.barrier()
records = mon.history
print(json.dumps([{"rank": r.rank, "world_size": r.world_size, "device": r.device,
                   "step": r.step, "own": own[r.step - 1],
                   "peaks": [r.peak_allocated_bytes, r.peak_reserved_bytes, r.peak_requested_bytes]}
                  for r in records]))
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, **env):
    """Runs WORKER as ranks 0 and 1; returns each rank's records."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=gpu_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                          MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **env))
             for r in range(2)]
    try:
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    results = []
    for rank, (p, (out, err)) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank}:\n{out}\n{err}"
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


@needs_two_gpus
def test_each_rank_records_its_rank(tmp_path):
    for rank, records in enumerate(run_ranks(tmp_path)):
        assert [r["step"] for r in records] == [1, 2, 3, 4]
        assert all(r["rank"] == rank and r["world_size"] == 2 and r["device"] == rank
                   for r in records), records
        # Without reduce_peaks each rank keeps its own peaks.
        assert all(r["peaks"] == r["own"] for r in records), records


@needs_two_gpus
def test_reduce_peaks_gives_every_rank_the_job_peak(tmp_path):
    rank0, rank1 = run_ranks(tmp_path, REDUCE_PEAKS="1")
    assert [r["step"] for r in rank0] == [r["step"] for r in rank1] == [1, 2, 3, 4]
    for a, b in zip(rank0, rank1):
        job = [max(x, y) for x, y in zip(a["own"], b["own"])]
        assert a["peaks"] == job and b["peaks"] == job, (a, b)
    # The ranks' own peaks do differ, so the comparison above shows a reduction happened.
    assert any(a["own"][0] != b["own"][0] for a, b in zip(rank0, rank1)), (rank0, rank1)
