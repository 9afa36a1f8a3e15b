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
    # Retention = bytes allocated inside a module's forward (children included) still live when
    # the outermost forward returns. Sequential(Linear, act, Linear) on x (64, 1024) without
    # grad; every size is a multiple of 512 B, so requested bytes equal allocated bytes.
    # ReLU saves its output: Linear0's output is freed once ReLU returned (Linear0 retains 0);
    # GELU saves its input: Linear0's output stays. Linear2's output is the returned value.
    # With backward=True, the full backward hooks must not change any of it.
    run("""
        import json, torch, vramscope
        torch.cuda.init(); vramscope.attach()
        f32 = 4
        hidden, out = 64 * 2048 * f32, 64 * 512 * f32
        want = {
            "ReLU": {"Sequential": (1, hidden + out), "Sequential.0": (1, 0),
                     "Sequential.1": (1, hidden), "Sequential.2": (1, out)},
            "GELU": {"Sequential": (1, 2 * hidden + out), "Sequential.0": (1, hidden),
                     "Sequential.1": (1, hidden), "Sequential.2": (1, out)},
        }
        failures = []
        for act in (torch.nn.ReLU, torch.nn.GELU):
            for backward in (False, True):
                torch.manual_seed(0)
                model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), act(),
                                            torch.nn.Linear(2048, 512)).cuda()
                x = torch.randn(64, 1024, device="cuda")
                model(x).sum().backward()  # warm up: cuBLAS workspace, lazy initialisation
                torch.cuda.synchronize()
                with vramscope.profile(backward=backward) as p:
                    y = model(x)
                    torch.cuda.synchronize()
                got = {r.path: (r.calls, r.retained_bytes) for r in p.module_rows()}
                print(act.__name__, "backward" if backward else "forward only", json.dumps(got))
                print(p.module_table())
                if got != want[act.__name__]:
                    failures.append((act.__name__, backward, got, want[act.__name__]))
                del y, model, x
        assert not failures, json.dumps(failures, indent=1)
    """)


def test_module_backward_peak_of_a_linear_is_its_gradients():
    # Linear(1024, 4096) at batch 256 in fp32 inside an MLP (its input needs grad). Its backward
    # window runs from its output's gradient (already allocated) to its input's gradient: inside
    # it, addmm's backward allocates grad-input (256x1024), grad-weight (4096x1024) and
    # grad-bias (4096), all live together at the end of the node. Other temporaries are at most
    # the size of the incoming gradient (256x4096).
    run("""
        import json, torch, vramscope
        torch.cuda.init(); vramscope.attach()
        f32 = 4
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, 16)).cuda()
        x = torch.randn(256, 512, device="cuda")
        def step():
            model(x).sum().backward()
        step(); step(); torch.cuda.synchronize()  # warm up (workspaces, .grad buffers)
        with vramscope.profile(backward=True) as p:
            step(); torch.cuda.synchronize()
        rows = {r.path: r for r in p.module_rows()}
        print(p.module_table())
        dump = json.dumps({k: vars(v) for k, v in rows.items()}, indent=1)
        lin = rows["Sequential.2"]
        low = (256 * 1024 + 4096 * 1024 + 4096) * f32
        high = low + 256 * 4096 * f32
        assert lin.backward_calls == 1, dump
        assert low <= lin.backward_peak_bytes <= high, (low, lin.backward_peak_bytes, high, dump)
        # Linear0's input needs no grad: its window lasts to the end of backward and so holds
        # at least its own weight and bias gradients.
        first = rows["Sequential.0"]
        assert first.backward_calls == 1, dump
        assert first.backward_peak_bytes >= (1024 * 512 + 1024) * f32, dump
        # The whole model's backward contains its children's.
        assert rows["Sequential"].backward_peak_bytes >= lin.backward_peak_bytes, dump
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
