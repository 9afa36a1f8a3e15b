# bench/bench_fit.py -- `vramscope fit`'s answer against the true largest batch, on a GPU
"""For each model of bench/fit_models.py, under one memory-fraction cap:

1. fit in a fresh process (the API; the Lightning and HF integrations for those two);
2. the true largest batch by bisection, each batch size in a fresh process (3 steps);
3. (--timing) fit and accelerate's find_executable_batch_size on the same step in one
   process, for their wall times (first, alone on the GPU);
4. the CLI once: ``vramscope fit --budget cap -- python bench/fit_models.py run gpt2 {} F``.

Models run side by side (one thread per model, each starting its own processes). Writes a JSON
file and prints a table. --known model=N,... takes the true largest batch of an earlier run
(same cap) and only checks that fit's answer runs in a fresh process.

    python bench/bench_fit.py OUT.json [--fraction 6331680423B] [--models cnn,vit,...]
                                       [--timing cnn,...] [--no-cli]

The default cap is 0.042 of an H200 (143771 MiB) in bytes, so an H100 runs the same budget.
The timings run first, alone on the GPU; with --beside, in one more lane beside the
bisections (fit and accelerate then share the card with them alike), so that the six truths,
the six timings and the CLI fit one 10-minute call. Every GPU process takes a lane, the CLI
four (its probes run side by side), and the card holds as many lanes as it has room for a cap
and a context each (--lanes): a step of the bisection must meet its cap, never a full card.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "fit_models.py")
#: What one process of a capped model holds beyond its cap (its CUDA context, cuBLAS, cuDNN).
CONTEXT_BYTES = 1 << 30
#: Probe processes `vramscope fit` may run side by side, counted as that many lanes.
CLI_LANES = 4


class Lanes:
    """The GPU processes the bench runs at once: each takes its cap and a context, and the card
    holds so many (an H100's 80 GB nine at a 5.9 GiB cap, an H200's seventeen), so that no
    bisection's step runs out of the card's memory instead of its cap's."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.count = count
        self.cond = threading.Condition()

    def take(self, n: int = 1) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.free >= min(n, self.count))
            self.free -= min(n, self.count)

    def give(self, n: int = 1) -> None:
        with self.cond:
            self.free += min(n, self.count)
            self.cond.notify_all()


LANES = Lanes(8)


def card_lanes(cap: str) -> int:
    """How many capped processes the card holds at once (8 where nvidia-smi does not say)."""
    try:
        total = int(subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, check=True, timeout=60).stdout.split()[0]) << 20
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return 8
    cap_bytes = int(cap[:-1]) if cap.endswith("B") else int(float(cap) * total)
    return max(2, int(0.9 * total) // (cap_bytes + CONTEXT_BYTES))


def child(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    LANES.take()
    try:
        return subprocess.run([sys.executable, MODELS, *args], capture_output=True, text=True,
                              timeout=timeout, check=False)
    finally:
        LANES.give()


def runs(model: str, batch: int, fraction: str, log: list) -> bool:
    proc = child("run", model, str(batch), fraction)
    ok = proc.returncode == 0
    log.append((batch, ok))
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{model} at {batch}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return ok


def true_largest(model: str, answer: int, fraction: str) -> dict:
    """Bisection in fresh processes around fit's answer."""
    log: list = []
    if answer < 1 or not runs(model, answer, fraction, log):
        low, high = 0, max(answer, 1)
    else:
        low, high = answer, None
        step = max(1, answer // 8)
        while high is None:
            trial = low + step
            if runs(model, trial, fraction, log):
                low, step = trial, step * 2
            else:
                high = trial
    while high - low > 1:
        mid = (low + high) // 2
        if runs(model, mid, fraction, log):
            low = mid
        else:
            high = mid
    return {"true_largest": low, "bisection": log}


def one_model(model: str, fraction: str, known: dict[str, int]) -> dict:
    began = time.perf_counter()
    proc = child("fit", model, fraction)
    if proc.returncode != 0:
        return {"model": model, "error": proc.stderr[-3000:]}
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
    out = json.loads(line)
    out["fit_process_seconds"] = round(time.perf_counter() - began, 2)
    if model in known:
        # The true largest batch was found by bisection in an earlier run (same cap, same
        # machine kind): check only that the answer runs in a fresh process.
        log: list = []
        runs(model, out["answer"], fraction, log)
        out.update(true_largest=known[model], bisection=log, truth_from="an earlier run")
    else:
        out.update(true_largest(model, out["answer"], fraction))
    return out


def cli_fit(fraction: str) -> dict:
    LANES.take(CLI_LANES)
    try:
        began = time.perf_counter()
        proc = subprocess.run(["vramscope", "fit", "--budget", "cap", "--json", "--",
                               sys.executable, MODELS, "run", "gpt2", "{}", fraction],
                              capture_output=True, text=True, timeout=400, check=False)
        seconds = time.perf_counter() - began
    finally:
        LANES.give(CLI_LANES)
    return {"rc": proc.returncode, "seconds": round(seconds, 2),
            "stdout": proc.stdout[-20000:], "stderr": proc.stderr[-3000:]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--fraction", default="6331680423B",
                   help="the cap: a share of the device, or bytes ('...B')")
    p.add_argument("--models", default="cnn,vit,gpt2,t5,lightning,hf_trainer")
    p.add_argument("--timing", default="cnn,vit,gpt2,t5,lightning,hf_trainer")
    p.add_argument("--accelerate-start", default="512",
                   help="accelerate's starting_batch_size (above every truth: Lightning's is 266)")
    p.add_argument("--known", default="", help="model=true largest batch,... (no bisection)")
    p.add_argument("--no-cli", action="store_true")
    p.add_argument("--beside", action="store_true",
                   help="run the timings in a lane beside the bisections, not first alone")
    p.add_argument("--lanes", type=int, default=0,
                   help="GPU processes at once (default: as many as the card holds at the cap)")
    args = p.parse_args()
    global LANES
    LANES = Lanes(args.lanes if args.lanes > 0 else card_lanes(args.fraction))
    print(f"bench_fit: {LANES.count} lanes", flush=True)
    known = {k: int(v) for k, v in (x.split("=") for x in args.known.split(",") if x)}
    results: dict = {"fraction": args.fraction, "models": {}, "timing": {},
                     "timing_beside_bisections": args.beside, "lanes": LANES.count}
    models = [m for m in args.models.split(",") if m]
    lock = threading.Lock()

    def timings() -> None:
        for m in [m for m in args.timing.split(",") if m]:
            proc = child("both", m, args.fraction, args.accelerate_start, timeout=400)
            lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
            with lock:
                results["timing"][m] = json.loads(lines[-1]) if lines else {
                    "error": proc.stderr[-3000:]}
                print(json.dumps(results["timing"][m])[:2000], flush=True)
                with open(args.out, "w", encoding="utf-8") as f:
                    json.dump(results, f, indent=1)

    if not args.beside:
        timings()  # the wall-time comparison first, alone on the GPU
    with concurrent.futures.ThreadPoolExecutor(len(models) + 2) as pool:
        futures = {pool.submit(one_model, m, args.fraction, known): m for m in models}
        cli = None if args.no_cli else pool.submit(cli_fit, args.fraction)
        lane = pool.submit(timings) if args.beside else None
        for future in concurrent.futures.as_completed(futures):
            m = futures[future]
            try:
                results["models"][m] = future.result()
            except Exception as e:  # noqa: BLE001 -- record and go on with the others
                results["models"][m] = {"model": m, "error": str(e)[-3000:]}
            print(json.dumps(results["models"][m])[:2000], flush=True)
        results["cli"] = cli.result() if cli is not None else None
        if lane is not None:
            lane.result()
    print(json.dumps(results["cli"])[:6000], flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print("model        fit  true  below%  probes  fit_s  ooms | in-process fit_s  "
          "accelerate  acc_s  acc_ooms")
    for m, r in results["models"].items():
        if "answer" in r and "true_largest" in r:
            below = 100.0 * (r["true_largest"] - r["answer"]) / max(1, r["true_largest"])
            t = results["timing"].get(m) or {}
            acc = (f"{t.get('fit_seconds', '-'):>16} {t.get('accelerate_answer', '-'):>11} "
                   f"{t.get('accelerate_seconds', '-'):>6} {t.get('accelerate_ooms', '-'):>9}")
            print(f"{m:12s} {r['answer']:4d} {r['true_largest']:5d} {below:6.1f}  "
                  f"{len(r['probes']):6d} {r['fit_seconds']:6.1f} {r['ooms']:5d} | {acc}")
        else:
            print(f"{m:12s} error: {str(r.get('error', ''))[-300:]}")
    if results.get("cli"):
        c = results["cli"]
        try:
            out = json.loads(c["stdout"])
            slowest = max(q["seconds"] for q in out["probes"])
            # Issue 44's speed: the CLI's wall time at most 2x one probe process's.
            extra = (f"; answer {out['answer']}, {len(out['probes'])} probes, the slowest "
                     f"{slowest:.1f} s: wall {c['seconds'] / slowest:.2f}x one probe")
        except (ValueError, KeyError, TypeError):
            extra = ""
        print(f"cli (gpt2): rc {c['rc']}, {c['seconds']} s{extra}")


if __name__ == "__main__":
    main()
