# tests/gpu/test_attribution.py -- per-op and per-module attribution against torch on a real GPU
#
# Run on the GPU machine: pytest tests/gpu/test_attribution.py (fresh processes per test).
from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import gpu_env


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=gpu_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_per_op_self_memory_matches_the_profiler_within_one_percent():
    run("""
        import torch, vramscope
        from torch.profiler import profile as tprofile, ProfilerActivity
        torch.cuda.init(); vramscope.attach()
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                    torch.nn.Linear(4096, 1024)).cuda()
        x = torch.randn(256, 1024, device="cuda")
        def step():
            model(x).sum().backward()
        step(); torch.cuda.synchronize()
        with vramscope.profile() as p:
            step(); torch.cuda.synchronize()
        with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                      profile_memory=True) as prof:
            step(); torch.cuda.synchronize()
        ours = {r.name: r.self_bytes for r in p.ops(0)}
        theirs = {e.key: e.self_device_memory_usage for e in prof.key_averages()}
        checked = 0
        for name, value in theirs.items():
            if abs(value) < (1 << 20) or name not in ours:
                continue
            assert abs(ours[name] - value) <= 0.01 * abs(value), (name, ours[name], value)
            checked += 1
        assert checked >= 2, (ours, theirs)
        print(p.table(row_limit=8))
    """)


def test_module_forward_retention_matches_hand_computed_activation_sizes():
    run("""
        import torch, vramscope
        torch.cuda.init(); vramscope.attach()
        model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                                    torch.nn.Linear(2048, 512)).cuda()
        x = torch.randn(64, 1024, device="cuda")
        with vramscope.profile() as p:
            y = model(x)
        rows = {r.path: r for r in p.module_rows()}
        f32 = 4
        # Each layer's forward leaves its output alive (autograd keeps it for backward).
        assert rows["Sequential.0"].retained_bytes == 64 * 2048 * f32
        assert rows["Sequential.1"].retained_bytes == 64 * 2048 * f32
        assert rows["Sequential.2"].retained_bytes == 64 * 512 * f32
        assert rows["Sequential"].retained_bytes == (2 * 64 * 2048 + 64 * 512) * f32
    """)


def test_categories_split_a_training_step():
    run("""
        import torch, vramscope
        torch.cuda.init(); vramscope.attach()
        model = torch.nn.Linear(4096, 4096).cuda()
        opt = torch.optim.Adam(model.parameters())
        tracker = vramscope.CategoryTracker(model, opt)
        x = torch.randn(512, 4096, device="cuda")
        for _ in range(2):
            model(x).sum().backward(); opt.step(); cats = tracker.step()[0]
            opt.zero_grad(set_to_none=False)
        params = sum(p.numel() * 4 for p in model.parameters())
        assert cats["parameters"][0] == params
        assert cats["gradients"][0] == params
        assert cats["optimizer_state"][0] >= 2 * params
        assert cats["activations"][1] >= 0
        tracker.close()
    """)
