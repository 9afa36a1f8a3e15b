# bench/bench_agent.py -- what the agent costs a real training step, the allocator and a read
"""Overhead of vramscope's agent against the alternatives, on one GPU.

    python bench/bench_agent.py --json results.json      # all of it, about 4-5 minutes on an H200

Every measurement runs in a fresh process (the agent and the profilers cannot be detached),
modes are interleaved across repetitions so that clock and thermal drift hit all of them alike,
and each number is the median over repetitions of the in-process median.

  gpt2   GPT-2-small-sized training step in plain torch (12 layers, d=768, 12 heads, vocab 50257,
         B=16, T=512, bf16 autocast, AdamW, random tokens): baseline, vramscope agent (+ a
         Monitor step per step), vramscope.profile() (per-op and per-module attribution),
         _record_memory_history(max_entries=100000), torch.profiler with
         profile_memory=True (a few steps only), and the seed's approach (memory_allocated() and
         memory_reserved() read every step).
  alloc  an allocator-heavy step (2000 small elementwise ops), caching_allocator_alloc/delete
         pairs (ns per pair), and the cost of reading current stats from Python (ns per call):
         baseline vs agent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

GPT2_MODES = ["baseline", "agent", "profile", "record_history", "profiler", "seed"]
ALLOC_MODES = ["baseline", "agent"]


# ----------------------------------------------------------------------------- workers
def _gpt2_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=50257, d=768, layers=12, heads=12, ctx=512):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2 (124M parameters)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def worker_gpt2(mode):
    import torch

    monitor = None
    if mode in ("agent", "profile"):
        import vramscope
        vramscope.attach()
        monitor = vramscope.Monitor(every=0, exit_table_rows=0)
        monitor.start()
    elif mode == "record_history":
        torch.cuda.memory._record_memory_history(max_entries=100000)
    model = _gpt2_model(torch).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch, seq = 16, 512

    def step():
        idx = torch.randint(0, 50257, (batch, seq + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if monitor is not None:
            monitor.step()
        elif mode == "seed":
            torch.cuda.memory_allocated()
            torch.cuda.memory_reserved()

    def timed(n):
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return times

    timed(3)
    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     profile_memory=True):
            times = timed(4)
    elif mode == "profile":
        # vramscope.profile(): per-op (RecordFunction) and per-module (hooks) attribution.
        with vramscope.profile():
            times = timed(15)
    else:
        times = timed(15)
    return {"step_ms": statistics.median(times)}


def worker_alloc(mode):
    import timeit

    import torch

    if mode == "agent":
        import vramscope
        vramscope.attach(init_cuda=True)
    torch.cuda.init()
    x = torch.randn(256, device="cuda")

    def heavy_step():
        y = x
        for _ in range(2000):
            y = y * 1.0001 + 0.001
        return y

    for _ in range(3):
        heavy_step()
    torch.cuda.synchronize()
    heavy = []
    for _ in range(10):
        t0 = time.perf_counter()
        heavy_step()
        torch.cuda.synchronize()
        heavy.append((time.perf_counter() - t0) * 1e3)

    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    pairs = 200_000

    def pair_loop():
        for _ in range(pairs):
            delete(alloc(4096))

    pair_loop()
    pair_ns = statistics.median(timeit.repeat(pair_loop, number=1, repeat=5)) / pairs * 1e9
    result = {"heavy_step_ms": statistics.median(heavy), "alloc_pair_ns": pair_ns}

    calls = 200_000
    read_torch = statistics.median(timeit.repeat(
        torch.cuda.memory_allocated, number=calls, repeat=5)) / calls * 1e9
    result["read_torch_ns"] = read_torch
    if mode == "agent":
        import vramscope
        for name, fn in (("read_vramscope_ns", vramscope.memory_allocated),
                         ("read_vramscope_dev0_ns", lambda: vramscope.memory_allocated(0))):
            result[name] = statistics.median(timeit.repeat(fn, number=calls, repeat=5)) / calls * 1e9
        result["mode"] = vramscope.mode()
    return result


# ----------------------------------------------------------------------------- runner
def run_worker(kind, mode):
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    out = subprocess.run([sys.executable, __file__, "--worker", kind, "--mode", mode],
                         capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{kind}/{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def overhead(value, base):
    return f"{(value / base - 1) * 100:+.1f}%" if base else "n/a"


def summarize(raw):
    """Medians over repetitions, and the markdown table."""
    med = {kind: {mode: {k: statistics.median(r[k] for r in runs)
                         for k in runs[0] if isinstance(runs[0][k], (int, float))}
                  for mode, runs in modes.items()}
           for kind, modes in raw.items()}
    lines = ["| benchmark | mode | median | vs baseline |", "|---|---|---:|---:|"]
    gpt2 = med.get("gpt2", {})
    for mode in GPT2_MODES:
        if mode in gpt2:
            v, b = gpt2[mode]["step_ms"], gpt2["baseline"]["step_ms"]
            lines.append(f"| GPT-2-small train step | {mode} | {v:.2f} ms | {overhead(v, b)} |")
    alloc = med.get("alloc", {})
    if alloc:
        b, a = alloc["baseline"], alloc["agent"]
        lines.append(f"| 2000 small ops step | baseline | {b['heavy_step_ms']:.2f} ms | |")
        lines.append(f"| 2000 small ops step | agent | {a['heavy_step_ms']:.2f} ms | "
                     f"{overhead(a['heavy_step_ms'], b['heavy_step_ms'])} |")
        lines.append(f"| alloc+free pair (4 KiB) | baseline | {b['alloc_pair_ns']:.0f} ns | |")
        lines.append(f"| alloc+free pair (4 KiB) | agent | {a['alloc_pair_ns']:.0f} ns | "
                     f"{a['alloc_pair_ns'] - b['alloc_pair_ns']:+.0f} ns |")
        lines.append(f"| read allocated | torch.cuda.memory_allocated() | "
                     f"{a['read_torch_ns']:.0f} ns | |")
        lines.append(f"| read allocated | vramscope.memory_allocated() | "
                     f"{a['read_vramscope_ns']:.0f} ns | |")
        lines.append(f"| read allocated | vramscope.memory_allocated(0) | "
                     f"{a['read_vramscope_dev0_ns']:.0f} ns | |")
    return med, "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write raw runs and medians to this file")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per mode (default 5)")
    parser.add_argument("--only", choices=["gpt2", "alloc"], help="run one benchmark")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        fn = {"gpt2": worker_gpt2, "alloc": worker_alloc}[args.worker]
        print(json.dumps(fn(args.mode)))
        return

    kinds = {"gpt2": GPT2_MODES, "alloc": ALLOC_MODES}
    if args.only:
        kinds = {args.only: kinds[args.only]}
    raw = {kind: {mode: [] for mode in modes} for kind, modes in kinds.items()}
    start = time.monotonic()
    for rep in range(args.reps):
        for kind, modes in kinds.items():
            for mode in modes:
                raw[kind][mode].append(run_worker(kind, mode))
        print(f"repetition {rep + 1}/{args.reps} done after {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)
    med, table = summarize(raw)
    print(table)
    if args.json:
        import torch
        meta = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                "reps": args.reps, "seconds": round(time.monotonic() - start, 1)}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "median": med, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
