# tests/gpu/test_ddp_exact.py -- under DDP (2 NCCL ranks, 2 GPUs) each rank's numbers are exact at
# every step, its Monitor records carry its rank, and the CLI shows both ranks beside NVML.
#
# Each rank trains, checks vramscope against torch.cuda.memory_stats() after every step, then
# writes its numbers to a file and holds still until the test has read the CLI (a file handshake,
# polled with a deadline: no sleeps as synchronisation).
import json
import pathlib
import subprocess
import sys
import time

import pytest

from conftest import CLI, HERE, gpu_env, needs_two_gpus
from test_cli_join import flat, rows_for_pid
from test_ddp import free_port

WORKER = r"""
import json, os, pathlib, sys
sys.path.insert(0, os.environ["VRAMSCOPE_TEST_DIR"])
import torch, torch.distributed as dist
import vramscope
from workload import assert_exact, make_model

rank = int(os.environ["RANK"])
vramscope.attach(interval_ms=5.0)          # before CUDA, as `vramscope run` does
torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
model = torch.nn.parallel.DistributedDataParallel(make_model(rank), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
with vramscope.Monitor(every=0, auto_step=True, devices=[rank], exit_table_rows=0) as mon:
    for i in range(8):
        # Ranks see different batch sizes, so their memory differs.
        tokens = torch.randint(0, 1000, (4 + 4 * rank + i % 3, 128), device=rank)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(rank)
        assert_exact(rank, i)
records = [{"rank": r.rank, "world_size": r.world_size, "device": r.device, "step": r.step}
           for r in mon.history]
state = {"pid": os.getpid(), "records": records,
         "allocated_bytes": vramscope.memory_allocated(rank),
         "reserved_bytes": vramscope.memory_reserved(rank)}
out = pathlib.Path(os.environ["VRAMSCOPE_TEST_OUT"])
tmp = out.with_suffix(".tmp")
tmp.write_text(json.dumps(state))
tmp.rename(out)
go = pathlib.Path(os.environ["VRAMSCOPE_TEST_GO"])
import time
while not go.exists():          # the test reads the CLI meanwhile; it creates `go` when done
    time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
print("ok")
"""


def wait_for(paths, procs, deadline_s=240):
    deadline = time.monotonic() + deadline_s
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"a rank exited early ({proc.returncode}):\n{out}\n{err[-4000:]}")
        assert time.monotonic() < deadline, "ranks did not finish training in time"
        time.sleep(0.05)


@needs_two_gpus
def test_ddp_ranks_are_exact_and_the_cli_shows_both(tmp_path: pathlib.Path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = str(free_port())
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    go = tmp_path / "go"
    procs = [subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=gpu_env(RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=port, VRAMSCOPE_TEST_DIR=str(HERE),
                    VRAMSCOPE_TEST_OUT=str(outs[r]), VRAMSCOPE_TEST_GO=str(go)))
        for r in range(2)]
    try:
        wait_for(outs, procs)
        states = [json.loads(p.read_text()) for p in outs]
        for rank, state in enumerate(states):
            assert [r["step"] for r in state["records"]] == list(range(1, 9)), state
            assert all(r["rank"] == rank and r["world_size"] == 2 and r["device"] == rank
                       for r in state["records"]), state["records"]
        if CLI:
            # Both ranks hold still: the CLI must show each pid with its rank and exact numbers.
            for _ in range(200):
                doc = json.loads(subprocess.run([CLI, "--json"], capture_output=True, text=True,
                                                timeout=60, env=gpu_env(), check=True).stdout)
                rows = {}
                for rank, state in enumerate(states):
                    found = [flat(r) for r in rows_for_pid(doc, state["pid"])]
                    rows[rank] = next((r for r in found if "allocated_bytes" in r
                                           and r.get("cuda_device") == rank), None)
                if all(rows[r] and rows[r]["reserved_bytes"] == states[r]["reserved_bytes"]
                       for r in range(2)):
                    break
            else:
                pytest.fail(f"the CLI never showed both ranks' numbers: {rows}")
            for rank, state in enumerate(states):
                row = rows[rank]
                assert row["rank"] == rank, row
                assert row["allocated_bytes"] == state["allocated_bytes"], (row, state)
                assert row["non_pytorch_bytes"] + row["cached_free_bytes"] + \
                    row["allocated_bytes"] == row["used_bytes"], row
    finally:
        go.touch()
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            assert proc.returncode == 0, err[-4000:]
