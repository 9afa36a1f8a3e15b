# tests/gpu/oom_programs.py -- training programs that run out of GPU memory, or fit once advised
"""``python oom_programs.py SCENARIO [--apply ADVICE_JSON]``: runs one scenario of
tests/gpu/test_oom_advice.py. Without ``--apply`` each runs out of memory (the
OutOfMemoryError ends the program, as in real life); with the first advice of its report
applied it must run to the end and print ``ok``. Advice that is not a code change is applied by
the test (an environment variable, stopping the other process).

With ``$OOM_SEEN`` set, torch's own OOM observer (attached after vramscope's) writes what
``torch.cuda.memory_stats()`` and ``torch.cuda.mem_get_info()`` say at the OOM to that file, for
the consistency checks. Memory caps (``set_per_process_memory_fraction``) keep the OOMs small and
quick on a large card; models are built from configs, never downloaded.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

import torch

GiB = 1 << 30
MiB = 1 << 20


def watch_oom() -> None:
    """torch's view of the first OOM, written to $OOM_SEEN (host calls only)."""
    path = os.environ.get("OOM_SEEN")
    if not path:
        return
    seen: dict = {}

    def observer(device, alloc_size, total_or_cap, free, *rest):
        if seen:
            return
        stats = torch.cuda.memory_stats(device)
        free_now, total = torch.cuda.mem_get_info(device)
        seen.update(device=int(device), requested=int(alloc_size),
                    allocated=int(stats["allocated_bytes.all.current"]),
                    reserved=int(stats["reserved_bytes.all.current"]),
                    free=int(free_now), total=int(total), observer_total=int(total_or_cap),
                    observer_free=int(free),
                    fraction=float(torch.cuda.get_per_process_memory_fraction(device)))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(seen, f)

    torch._C._cuda_attach_out_of_memory_observer(observer)


def cap(total_bytes: int) -> None:
    """Lets this process's allocator reserve at most ``total_bytes``."""
    device_total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(total_bytes / device_total)


def start(vramscope_attach: bool = True) -> None:
    torch.manual_seed(0)
    torch.cuda.init()
    if vramscope_attach:
        import vramscope

        vramscope.attach(init_cuda=True)
    watch_oom()


def checkpoint_children(model: torch.nn.Module, path: str) -> None:
    """Activation checkpointing on every child of ``model.get_submodule(path)``."""
    from torch.utils.checkpoint import checkpoint

    for child in model.get_submodule(path).children():
        child.forward = functools.partial(checkpoint, child.forward, use_reentrant=False)


def make_optimizer(params, advice: dict, default: str = "AdamW"):
    if advice.get("kind") == "optimizer_state":
        options = {"foreach": advice["foreach"]} if "foreach" in advice else {}
        return getattr(torch.optim, advice["optimizer"])(params, lr=1e-3, **options)
    return getattr(torch.optim, default)(params, lr=1e-4)


def gpt2(layers: int, width: int, heads: int, seq: int, vocab: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=seq,
                        vocab_size=vocab, use_cache=False)
    return GPT2LMHeadModel(config).cuda()


def lm_step(model, opt, batch: int, seq: int, vocab: int) -> None:
    x = torch.randint(0, vocab, (batch, seq), device="cuda")
    model(input_ids=x, labels=x).loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def batch_growth(advice: dict) -> None:
    """The whole card, a GPT-2 whose batch doubles every two steps (a batch-size search),
    followed by a Monitor that was told nothing about the model."""
    import vramscope

    start()
    seq, vocab = 512, 50257
    model = gpt2(4, 512, 8, seq, vocab)
    opt = make_optimizer(model.parameters(), advice)
    if advice.get("kind") == "batch_size":
        batches = [advice["batch_size"]] * 2
    else:
        batches = [8 << i for i in range(12) for _ in range(2)]
    with vramscope.Monitor(every=0) as mon:
        for batch in batches:
            lm_step(model, opt, batch, seq, vocab)
            mon.step()


def capped_growth(advice: dict) -> None:
    """Under `vramscope run` (no vramscope code here): a 3 GiB memory-fraction cap and a GPT-2
    whose batch doubles every two steps."""
    start(vramscope_attach=False)
    cap(3 * GiB)
    seq, vocab = 256, 8192
    model = gpt2(2, 256, 4, seq, vocab)
    opt = make_optimizer(model.parameters(), advice)
    if advice.get("kind") == "batch_size":
        batches = [advice["batch_size"]] * 2
    else:
        batches = [8 << i for i in range(12) for _ in range(2)]
    for batch in batches:
        lm_step(model, opt, batch, seq, vocab)


def length_growth(advice: dict) -> None:
    """Under `vramscope run`: a 3 GiB cap and a GPT-2 trained on longer and longer sequences
    (a length curriculum: 128 to 4096 tokens, two steps each, batch 16): it runs out part-way,
    and the steps after the failing one are longer still. The advice applied as a user would:
    every sequence truncated to the advised length."""
    start(vramscope_attach=False)
    cap(3 * GiB)
    vocab, batch = 8192, 16
    model = gpt2(4, 512, 8, 4096, vocab)
    opt = make_optimizer(model.parameters(), advice)
    for length in [128 << i for i in range(6) for _ in range(2)]:
        if advice.get("kind") == "sequence_length":
            length = min(length, int(advice["max_length"]))
        lm_step(model, opt, batch, length, vocab)


def fragmentation(advice: dict) -> None:
    """A 4.5 GiB cap; a long warm-up sequence leaves a 4 GiB segment in the cache, a cache of
    40 blocks of 100 MiB is carved out of it and every other block is evicted: 2 GiB free in
    100 MiB holes, and a 1 GiB request that only a reshaped cache can serve."""
    start()
    cap(4 * GiB + 512 * MiB)
    warm = torch.empty(4 * GiB, dtype=torch.uint8, device="cuda")
    del warm
    blocks = [torch.empty(100 * MiB, dtype=torch.uint8, device="cuda") for _ in range(40)]
    del blocks[::2]
    big = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    big.fill_(1)
    torch.cuda.synchronize()


def leak(advice: dict) -> None:
    """A 6 GiB cap; a classifier whose logits (256 MiB) are kept at every step for metrics,
    graph and all, until the cap is reached (about 15 steps)."""
    import vramscope

    start()
    cap(6 * GiB)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 16384)).cuda()
    opt = make_optimizer(model.parameters(), advice, "Adam")
    x = torch.randn(4096, 1024, device="cuda")
    y = torch.randint(0, 16384, (4096,), device="cuda")
    kept = []
    with vramscope.Monitor(every=0) as mon:
        for _ in range(40):
            logits = model(x)
            torch.nn.functional.cross_entropy(logits, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            # The leak: the outputs are kept; the fix keeps what the metric needs.
            kept.append(logits.detach().argmax(1).cpu() if advice.get("kind") == "leak"
                        else logits)
            mon.step()


def crowded(advice: dict) -> None:
    """No cap, but another process (the test's) holds all of the card but 12 GiB; a 4-layer
    MLP step needs about 20 GiB."""
    import vramscope

    start()
    torch.backends.cuda.matmul.allow_tf32 = True
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(131072, 4096, device="cuda")  # 2 GiB, and so is every activation
    with vramscope.Monitor(every=0) as mon:
        for _ in range(2):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step()


class Block(torch.nn.Module):
    """A transformer MLP block: 4x wide, GELU, residual."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Tower(torch.nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(depth))
        self.head = torch.nn.Linear(width, width)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def activations(advice: dict) -> None:
    """A 12 GiB cap; 8 MLP blocks over 64 x 1024 tokens of width 1024: about 2.25 GiB of saved
    activations per block, 18 GiB in all, with Monitor(model=, optimizer=). Checkpointed, the
    step peaks near 8 GiB (the blocks' inputs, one block recomputed, its gradients)."""
    import vramscope

    start()
    cap(12 * GiB)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = Tower(1024, 8).cuda()
    if advice.get("kind") == "activation_checkpointing":
        checkpoint_children(model, advice["modules"])
    opt = make_optimizer(model.parameters(), advice, "AdamW")
    x = torch.randn(64, 1024, 1024, device="cuda")
    with vramscope.Monitor(every=0, model=model, optimizer=opt) as mon:
        for _ in range(2):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step()


def optimizer_state(advice: dict) -> None:
    """A 7 GiB cap; 8 bias-free 8192x8192 layers (2 GiB of fp32 parameters, 2 GiB of
    gradients) and AdamW, whose 4 GiB of state cannot be allocated; tiny activations."""
    import vramscope

    start()
    cap(7 * GiB)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192, bias=False)
                                  for _ in range(8)]).cuda()
    opt = make_optimizer(model.parameters(), advice, "AdamW")
    x = torch.randn(8, 8192, device="cuda")
    with vramscope.Monitor(every=0, model=model, optimizer=opt) as mon:
        for _ in range(2):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step()


def hog() -> None:
    """Holds all of the card but 12 GiB until stdin closes (the "other process")."""
    torch.cuda.init()
    free, _ = torch.cuda.mem_get_info()
    held = torch.empty(free - 12 * GiB, dtype=torch.uint8, device="cuda")
    print(f"ready {held.numel()}", flush=True)
    sys.stdin.read()


SCENARIOS = {f.__name__: f for f in (batch_growth, capped_growth, length_growth, fragmentation,
                                     leak, crowded, activations, optimizer_state)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS) + ["hog"])
    parser.add_argument("--apply", default="{}", help="the advice (JSON) to apply")
    args = parser.parse_args()
    if args.scenario == "hog":
        hog()
        return
    SCENARIOS[args.scenario](json.loads(args.apply))
    print("ok", flush=True)


if __name__ == "__main__":
    main()
