# tests/gpu/test_oom.py -- a real OOM: the post-mortem files, their numbers, the memory_viz snapshot
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from conftest import gpu_env

#: Whole programs run to their OOM (then measured again at exit): the slow group
#: (pytest tests/gpu -m slow).
pytestmark = pytest.mark.slow


def test_real_oom_writes_a_consistent_post_mortem(tmp_path: pathlib.Path):
    code = textwrap.dedent("""
        import json, torch, vramscope
        torch.cuda.init(); vramscope.attach()
        seen = {}
        torch._C._cuda_attach_out_of_memory_observer(
            lambda *a: seen.update(torch.cuda.memory_stats()))
        keep = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(4)]
        try:
            torch.empty(10 << 40, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            print(json.dumps({"allocated": seen.get("allocated_bytes.all.current")}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                         env=gpu_env(VRAMSCOPE_OOM_DIR=str(tmp_path)), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "vramscope: CUDA out of memory on cuda:0" in out.stderr
    report = json.loads(next(tmp_path.glob("vramscope-oom-*.json")).read_text())
    handler = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["allocated_bytes"] == handler["allocated"]
    assert report["requested_bytes"] >= 10 << 40
    assert report["advice"]
    txt = next(tmp_path.glob("vramscope-oom-*.txt")).read_text()
    assert "\nadvice" in txt and "\n  1. " in txt
    pickle_path = next(tmp_path.glob("vramscope-oom-*.pickle"))
    check = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats",
                            str(pickle_path)], env=gpu_env(), capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_leaking_monitor_loop_reports_the_leak_first(tmp_path: pathlib.Path):
    # Most of the card is filled by one tensor, then each step keeps a new 256 MiB tensor until
    # the allocator fails (about ten steps). The report must list the Monitor's steps and put
    # the leak first with 256 MiB per step; the summary is printed once (observer, not again by
    # the Monitor's handler), and the OutOfMemoryError still reaches the program.
    code = textwrap.dedent("""
        import json, torch, vramscope
        from vramscope.postmortem import oom
        torch.cuda.init(); vramscope.attach()
        chunk = 256 << 20
        free, _ = torch.cuda.mem_get_info()
        two_mib = 2 << 20
        fill = torch.empty((free - 10 * chunk) // two_mib * two_mib, dtype=torch.uint8,
                           device="cuda")
        leak = []
        mon = vramscope.Monitor(every=0)
        try:
            with mon:
                for _ in range(100):
                    leak.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
                    mon.step()
        except torch.OutOfMemoryError:
            print(json.dumps({"report": oom.last_report(), "steps": mon.steps}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                         env=gpu_env(VRAMSCOPE_OOM_DIR=str(tmp_path)), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.stderr.count("vramscope: CUDA out of memory on cuda:0") == 1, out.stderr
    report = json.loads(pathlib.Path(result["report"]["json"]).read_text())
    summary = json.dumps({k: report[k] for k in ("steps", "leak_rate_bytes", "advice",
                                                  "requested_bytes", "device_free_bytes",
                                                  "cached_free_bytes")}, indent=1)
    assert result["steps"] >= 5, summary
    assert [s["step"] for s in report["steps"]] == list(range(1, result["steps"] + 1)), summary
    assert abs(report["leak_rate_bytes"] - (256 << 20)) <= 0.01 * (256 << 20), summary
    assert report["advice"][0]["title"].startswith("memory leak"), summary
    assert "+256.0 MiB per step" in report["advice"][0]["detail"], summary
    txt = pathlib.Path(result["report"]["txt"]).read_text()
    assert "recent steps" in txt, txt


def test_leak_advice_names_the_module_that_keeps_its_outputs(tmp_path: pathlib.Path):
    # Net(encoder, cache, head) trained under vramscope.profile() with a Monitor; `cache`
    # appends its output (x * 2, a 256 MiB fp32 tensor allocated inside its own forward, so it
    # is charged to Net.cache) to a list at every forward. Most of the card is filled so that the
    # OOM comes after about a dozen steps. The report's leak advice must name module Net.cache,
    # and growing_modules must give exactly the kept tensor's bytes per step (the ledger counts
    # requested bytes; 256 MiB is a multiple of the 512 B block granularity, so block bytes
    # would agree). No other module grows: activations die in backward, gradients and
    # parameters are allocated outside forwards.
    code = textwrap.dedent("""
        import json, torch, vramscope
        from vramscope.postmortem import oom
        torch.cuda.init(); vramscope.attach()

        class Cache(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.kept = []
            def forward(self, x):
                y = x * 2
                self.kept.append(y.detach())  # the leak: same storage, kept forever
                return y

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU())
                self.cache = Cache()
                self.head = torch.nn.Linear(1024, 8)
            def forward(self, x):
                return self.head(self.cache(self.encoder(x)))

        torch.manual_seed(0)
        model = Net().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(65536, 1024, device="cuda")  # 256 MiB: so is every activation
        def step():
            model(x).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        step(); torch.cuda.synchronize()  # warm up: cuBLAS workspace, lazy initialisation
        kept = model.cache.kept[0]
        kept_bytes = kept.numel() * kept.element_size()
        chunk = 256 << 20
        free, _ = torch.cuda.mem_get_info()
        two_mib = 2 << 20
        fill = torch.empty((free - 16 * chunk) // two_mib * two_mib, dtype=torch.uint8,
                           device="cuda")
        mon = vramscope.Monitor(every=0)
        try:
            with vramscope.profile():
                with mon:
                    for _ in range(100):
                        step()
                        mon.step()
        except torch.OutOfMemoryError:
            print(json.dumps({"report": oom.last_report(), "steps": mon.steps,
                              "kept_bytes": kept_bytes, "kept": len(model.cache.kept)}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                         env=gpu_env(VRAMSCOPE_OOM_DIR=str(tmp_path)), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines, "no OOM within 100 steps:\n" + out.stdout + out.stderr
    result = json.loads(lines[-1])
    report = json.loads(pathlib.Path(result["report"]["json"]).read_text())
    summary = json.dumps({"result": result, **{k: report[k] for k in (
        "schema_version", "steps", "leak_rate_bytes", "growing_modules", "growing_ops",
        "top_modules", "advice")}}, indent=1)
    kept_bytes = result["kept_bytes"]
    assert kept_bytes == 256 << 20, summary
    assert report["schema_version"] == 6, summary
    assert result["steps"] >= 5, summary
    # Exact: the growth is the kept tensor, charged to the module that allocated it.
    assert report["growing_modules"], summary
    assert report["growing_modules"][0] == ["Net.cache", kept_bytes], summary
    assert [m for m, _ in report["growing_modules"]] == ["Net.cache"], summary
    leak = [a for a in report["advice"] if a["title"].startswith("memory leak")]
    assert leak, summary
    assert "growing: module Net.cache +256.0 MiB/step" in leak[0]["detail"], summary
    txt = pathlib.Path(result["report"]["txt"]).read_text()
    assert "by module (innermost forward that allocated it):" in txt, txt
    assert "+ 256.0 MiB/step  Net.cache" in txt, txt

def test_run_reports_an_oom_that_ends_the_program(tmp_path: pathlib.Path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.cuda.init()
        torch.empty(10 << 40, dtype=torch.uint8, device="cuda")
    """))
    out = subprocess.run([sys.executable, "-m", "vramscope.run", str(script)], cwd=tmp_path,
                         env=gpu_env(VRAMSCOPE_OOM_DIR=str(tmp_path)), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0, out.stderr
    assert "OutOfMemoryError" in out.stderr, out.stderr
    assert out.stderr.count("vramscope: CUDA out of memory on cuda:0") == 1, out.stderr
    assert "1 OOM" in out.stderr, out.stderr
    assert len(list(tmp_path.glob("vramscope-oom-*.json"))) == 1, out.stderr
