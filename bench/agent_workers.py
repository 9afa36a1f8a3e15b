# bench/agent_workers.py -- the measuring side of bench_agent.py: one mode, one fresh process
"""Workers of bench/bench_agent.py (see its docstring for the modes). Each runs in a fresh
process started by the runner and prints one JSON line of results."""

from __future__ import annotations

import os
import statistics
import sys
import time


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


def gpt2_training_step(torch):
    """The GPT-2-small training step of the gpt2 benchmark (model and AdamW built on the GPU)."""
    with torch.device("cuda"):  # initialise on the GPU: CPU init of 124M parameters is slow
        model = _gpt2_model(torch)
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
    return step


def small_ops_step(torch, device="cuda"):
    """The allocator-heavy step: 2000 small elementwise ops on a 1 KiB tensor (launch-bound,
    4000 allocations, 12000 allocator events). On device "cpu" the same loop is dispatch-bound,
    and its allocations are traced through the agent's CPU proxy (attach_mode(cpu_proxy=True))."""
    x = torch.randn(256, device=device)

    def step():
        y = x
        for _ in range(2000):
            y = y * 1.0001 + 0.001
        return y
    return step


def require_bench_hooks():
    """Exits with the way out when the agent was built without its benchmark hooks (the
    default: they are compiled only with VRAMSCOPE_BENCH_HOOKS=ON)."""
    from vramscope import _agent
    if not hasattr(_agent, "_bench_pause_tracking"):
        sys.exit("bench: this mode needs the agent's benchmark hooks; reinstall vramscope with "
                 "pip install --no-build-isolation -C cmake.define.VRAMSCOPE_BENCH_HOOKS=ON .")


def loaded_agent():
    """The agent extension with its torch-facing library loaded (the extension holds no torch
    code: nothing of it runs before load_torch)."""
    import torch

    from vramscope._core.session import load_agent
    agent, problem = load_agent(torch)
    if agent is None:
        sys.exit(f"bench: the agent cannot load: {problem}")
    return agent


def attach_mode(what, interval_ms=10.0, cpu_proxy=False):
    """Attaches what a mode measures: "agent", "agent_paused" (attached, its callback's work
    paused), "agent_1s" (ticking once a second), "agent_ledgers" (with attribution's ledgers
    held, as a Monitor with categories does: every event also goes through the ring to the
    agent thread), "noop" (an empty trace tracker), or "". With `cpu_proxy` (no GPU) only
    "agent" and "" exist: the agent is attached to torch's CPU tensors instead
    (_bench_attach_cpu_proxy)."""
    if cpu_proxy:
        if what not in ("agent", ""):
            raise ValueError(f"mode {what!r} has no CPU proxy (only agent, agent_toggled and "
                             "baseline do)")
        if what:
            require_bench_hooks()
            loaded_agent()._bench_attach_cpu_proxy(interval_ms)
        return
    if what in ("agent_paused", "noop"):
        require_bench_hooks()
    if what.startswith("agent"):
        import vramscope
        vramscope.attach(init_cuda=True,
                         interval_ms=1000.0 if what == "agent_1s" else interval_ms)
        if what == "agent_paused":
            vramscope._agent._bench_pause_tracking(True)
        elif what == "agent_ledgers":
            vramscope._agent.attribution_acquire()
    elif what == "noop":
        loaded_agent()._bench_attach_noop_tracker()
    elif what:
        raise ValueError(f"unknown attach mode {what!r}")


def worker_gpt2(mode, phases):
    import torch

    phases.mark("import torch")
    monitor = None
    if mode in ("agent", "monitor", "profile_ops", "profile"):
        import vramscope
        vramscope.attach(init_cuda=True)
        if mode != "agent":
            monitor = vramscope.Monitor(every=0, exit_table_rows=0)
            monitor.start()
    elif mode == "record_history":
        torch.cuda.memory._record_memory_history(max_entries=100000)
    elif mode == "noop_tracker":
        # torch's own cost of having any trace tracker (it builds a TraceEntry per event).
        torch.cuda.init()
        attach_mode("noop")
    phases.mark("attach")
    plain_step = gpt2_training_step(torch)
    phases.mark("model")
    monitor_ms = []  # what Monitor.step() itself costs (under profile(): leak snapshots too)

    def step():
        plain_step()
        if monitor is not None:
            t0 = time.perf_counter()
            monitor.step()
            monitor_ms.append((time.perf_counter() - t0) * 1e3)
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
    phases.mark("warm-up")
    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     profile_memory=True):
            times = timed(4)
    elif mode in ("profile", "profile_ops"):
        # vramscope.profile(): per-op attribution (RecordFunction, in C++), plus per-module
        # attribution (torch's global module hooks, in Python) unless profile_ops.
        with vramscope.profile(modules=mode == "profile"):
            times = timed(15)
    else:
        times = timed(30)
    phases.mark("measure")
    result = {"step_ms": statistics.median(times)}
    if monitor_ms:
        result["monitor_step_ms"] = statistics.median(monitor_ms[-len(times):])
    return result


def worker_alloc(mode, phases, parts):
    import timeit

    import torch

    from vramscope import _agent

    torch.cuda.init()
    heavy_step = small_ops_step(torch)
    attach = attach_mode
    if mode in ("agent", "agent_1s", "agent_toggle"):
        # agent_1s: the agent thread ticks once a second instead of every 10 ms, which separates
        # the tracker callback's cost from the thread's (draining, polling, publishing).
        attach("agent_1s" if mode == "agent_1s" else "agent")
    elif mode == "noop_tracker":
        attach("noop")

    process_cpus = os.sched_getaffinity(0)
    main_cpu = os.environ.get("VRAMSCOPE_BENCH_MAIN_CPU")
    if main_cpu:
        # This thread only (Linux: pid 0 is the calling thread); threads made earlier (CUDA's,
        # the agent's) keep the process's CPUs. A launch-bound step then always runs on the
        # same core, whatever the mode.
        os.sched_setaffinity(0, {int(main_cpu)})

    if mode in MIDWAY_ATTACH:
        def attach_unpinned():
            # Threads inherit their creator's CPUs: give the agent's thread the process's.
            pinned = os.sched_getaffinity(0)
            os.sched_setaffinity(0, process_cpus)
            attach(MIDWAY_ATTACH[mode])
            os.sched_setaffinity(0, pinned)
        result = midway_steps(heavy_step, torch.cuda.synchronize, attach_unpinned)
        phases.mark("measure")
        return result

    for _ in range(5):
        heavy_step()
    torch.cuda.synchronize()
    heavy = timed_steps(heavy_step, torch.cuda.synchronize, 30)
    result = {"heavy_step_ms": statistics.median(heavy), "heavy_step_min_ms": min(heavy)}
    if mode == "agent_toggle":
        result.update(toggled_steps(heavy_step, torch.cuda.synchronize))
    if "pairs" not in parts:
        phases.mark("measure")
        return result

    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    pairs = 100_000

    def pair_loop():
        for _ in range(pairs):
            delete(alloc(4096))

    pair_loop()
    pair_ns = statistics.median(timeit.repeat(pair_loop, number=1, repeat=5)) / pairs * 1e9
    # The same pairs timed in C++: no Python loop around them, so tens of ns are visible.
    require_bench_hooks()
    native = [_agent._bench_alloc_pairs(1_000_000, 4096) for _ in range(5)]
    result.update(alloc_pair_ns=pair_ns, alloc_pair_native_ns=statistics.median(native))

    calls = 200_000
    # torch's read costs ~100 us: 10k calls are plenty and keep this process short.
    read_torch = statistics.median(timeit.repeat(
        torch.cuda.memory_allocated, number=10_000, repeat=5)) / 10_000 * 1e9
    result["read_torch_ns"] = read_torch
    if mode == "agent":
        import vramscope
        for name, fn in (("read_vramscope_ns", vramscope.memory_allocated),
                         ("read_vramscope_dev0_ns", lambda: vramscope.memory_allocated(0))):
            seconds = statistics.median(timeit.repeat(fn, number=calls, repeat=5))
            result[name] = seconds / calls * 1e9
        result["mode"] = vramscope.mode()
    phases.mark("measure")
    return result


# Modes that run a block of steps with nothing attached, then attach, then a second block: the
# whole cost (torch's tracker included) as a ratio inside one process, which the process-to-process
# spread of a launch-bound step (±5 %) does not blur. midway_control attaches nothing: it gives
# the drift from the first block to the second, which the others are read against. Diagnostics:
# midway_agent_paused attaches the agent and pauses its callback's work at once (everything the
# agent costs but that work: its thread, the tracker's call into it); midway_agent_1s ticks the
# agent thread once a second instead of every 10 ms.
MIDWAY_ATTACH = {"midway_control": "", "midway_noop": "noop", "midway_agent": "agent",
                 "midway_agent_paused": "agent_paused", "midway_agent_1s": "agent_1s"}


def parse_cpus(text):
    """"0-3,8" -> {0, 1, 2, 3, 8}."""
    cpus = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def timed_steps(step, synchronize, count):
    """Wall time of each of `count` steps in ms, each ended by `synchronize` (the GPU's work is
    part of the step)."""
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        step()
        synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def midway_steps(step, synchronize, attach, steps=40, warmup=10):
    def block():
        for _ in range(warmup):  # after an attach: the ring's pages, first seen by these steps
            step()
        synchronize()
        times = timed_steps(step, synchronize, steps)
        return statistics.median(times), min(times)

    before, before_min = block()
    attach()
    after, after_min = block()
    return {"before_ms": before, "after_ms": after,
            "after_vs_before_pct": (after / before - 1) * 100,
            "after_vs_before_min_pct": (after_min / before_min - 1) * 100}


def toggled_steps(step, synchronize, rounds=16, steps=3):
    """vramscope's own share of the step, in one process: the tracker stays attached and blocks
    of steps alternate between the callback doing its work and returning at once (the order
    flips every round). Immune to the process-to-process spread; torch's cost of having a
    tracker at all is the no-op-tracker mode's."""
    require_bench_hooks()
    from vramscope import _agent

    on, off, ratios = [], [], []
    try:
        for r in range(rounds):
            block = {}
            for paused in ((False, True) if r % 2 == 0 else (True, False)):
                _agent._bench_pause_tracking(paused)
                block[paused] = statistics.median(timed_steps(step, synchronize, steps))
            on.append(block[False])
            off.append(block[True])
            ratios.append(block[False] / block[True])
    finally:
        _agent._bench_pause_tracking(False)
    return {"toggle_on_ms": statistics.median(on), "toggle_off_ms": statistics.median(off),
            "toggle_overhead_pct": (statistics.median(ratios) - 1) * 100}


class Phases:
    """Wall time of each phase of a worker, on stderr: where a fresh process spends its time."""

    def __init__(self):
        self.last = time.monotonic()
        self.seconds = {}

    def mark(self, name):
        now = time.monotonic()
        self.seconds[name] = round(now - self.last, 2)
        self.last = now
