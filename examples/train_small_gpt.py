"""examples/train_small_gpt.py -- a small GPT training run whose memory has a story to tell.

Used to make the bundled recording (data/h200-training.vsrec) and as a demo; it needs a CUDA GPU
(without one it says so in one line and exits 1):

    vramscope run --record run.vsrec examples/train_small_gpt.py --seconds 40

Phases: warm-up at batch 8, growth to batch 16 and 32 (more activations, the allocator reserves
more), an evaluation pass under no_grad (activations vanish, the cache stays reserved), then
torch.cuda.empty_cache() hands the cache back to the driver before a last training phase.
"""
import argparse
import sys
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        t = x.size(1)
        mask = torch.triu(torch.ones(t, t, device=x.device, dtype=torch.bool), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class SmallGPT(nn.Module):
    def __init__(self, vocab=32000, d=768, layers=8, heads=12, ctx=512):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.head(self.blocks(self.tok(idx) + self.pos(pos)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="total run time (default 40)")
    parser.add_argument("--seq", type=int, default=512)
    args = parser.parse_args()

    # Its story is GPU memory (the caching allocator's reserve, empty_cache): on the CPU there is
    # nothing to show, so say so instead of failing deep inside torch.
    if not torch.cuda.is_available():
        sys.exit("train_small_gpt.py needs a CUDA GPU (torch.cuda.is_available() is False here); "
                 "without one, `tools/main.sh` replays a recording of this run made on an H200")
    device = torch.device("cuda")
    model = SmallGPT(ctx=args.seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    phases = [("train", 8), ("train", 16), ("train", 32), ("eval", 32), ("empty_cache", 0),
              ("train", 16)]
    per_phase_s = args.seconds / (len(phases) - 1)
    for kind, batch in phases:
        print(f"phase {kind} batch={batch}", flush=True)
        if kind == "empty_cache":
            torch.cuda.empty_cache()
            continue
        end = time.monotonic() + per_phase_s
        while time.monotonic() < end:
            idx = torch.randint(0, 32000, (batch, args.seq), device=device)
            if kind == "eval":
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    model(idx)
                torch.cuda.synchronize()
                continue
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(idx)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), idx.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
