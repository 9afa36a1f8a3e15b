# bench/oom_kinds.py -- realistic OOMs of the kinds issue 33 lists, their first advice applied (GPU)
"""Each program below is plain PyTorch (no vramscope code), configured by JSON advice the way a
user would apply it. The driver runs it under ``python -m vramscope.run`` until it runs out of
memory, reads the JSON report, applies the first advice (and every other ``fits: true`` one) in a
fresh process, and records whether the program then completes::

    python bench/oom_kinds.py OUT.json [--only vit_fp32,t5_seq,...]     # the driver
    python bench/oom_kinds.py --program NAME --apply '{"kind": ...}'    # one program

Written for the H200 (the caps keep each program to a few GiB). Status: written on 2026-12-03
after the session's GPU time was spent; not yet run (docs/oom-advice.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile

GiB = 1 << 30


def _setup(cap_gib: float, advice: dict):
    import torch

    fraction = advice.get("fraction") if advice.get("kind") == "memory_fraction" else None
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(fraction or cap_gib * GiB / total)
    return torch


def _batch(default: int, advice: dict) -> int:
    return int(advice["batch_size"]) if advice.get("kind") == "batch_size" else default


def _autocast(torch, on: bool, advice: dict):
    if on or advice.get("kind") == "mixed_precision":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    import contextlib

    return contextlib.nullcontext()


def _optimizer(torch, params, advice: dict):
    if advice.get("kind") == "optimizer_state":
        options = {"foreach": advice["foreach"]} if "foreach" in advice else {}
        return getattr(torch.optim, advice["optimizer"])(params, lr=1e-3, **options)
    return torch.optim.AdamW(params, lr=1e-4)


def _checkpoint(model, advice: dict) -> None:
    if advice.get("kind") != "activation_checkpointing" or advice.get("modules") is None:
        return
    from torch.utils.checkpoint import checkpoint

    for child in model.get_submodule(advice["modules"]).children():
        child.forward = functools.partial(checkpoint, child.forward, use_reentrant=False)


def _train(torch, model, loss_of, inputs, steps: int, amp: bool, advice: dict) -> None:
    _checkpoint(model, advice)
    opt = _optimizer(torch, model.parameters(), advice)
    for i in range(steps):
        with _autocast(torch, amp, advice):
            loss = loss_of(inputs(i))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def vision(name: str, batch: int, cap: float, amp: bool, advice: dict) -> None:
    """A first-step OOM of a torchvision model at too large a batch (fp32 or AMP)."""
    torch = _setup(cap, advice)
    import torchvision

    model = getattr(torchvision.models, name)().cuda()
    b = _batch(batch, advice)
    _train(torch, model, lambda x: torch.nn.functional.cross_entropy(model(x[0]), x[1]),
           lambda i: (torch.randn(b, 3, 224, 224, device="cuda"),
                      torch.randint(0, 1000, (b,), device="cuda")), 3, amp, advice)


def t5_seq(advice: dict) -> None:
    """A transformer whose source length grows: 256, 512, 1024, 2048 at batch 32, 12 GiB."""
    torch = _setup(12, advice)
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(T5Config(num_layers=8, num_decoder_layers=8,
                                                decoder_start_token_id=0, pad_token_id=0)).cuda()
    b = _batch(32, advice)
    lengths = (256, 512, 1024, 2048)
    _train(torch, model, lambda x: model(input_ids=x[0], labels=x[1]).loss,
           lambda i: (torch.randint(0, 32000, (b, lengths[i]), device="cuda"),
                      torch.randint(0, 32000, (b, 128), device="cuda")), 4, False, advice)


def gpt2_generate(advice: dict) -> None:
    """Inference: generate() under no_grad, 1024 new tokens at batch 192, 8 GiB."""
    torch = _setup(8, advice)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).cuda().eval()
    b = _batch(192, advice)
    with torch.no_grad(), _autocast(torch, False, advice):
        model.generate(torch.randint(0, 50257, (b, 16), device="cuda"), max_new_tokens=1024,
                       min_new_tokens=1024, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()


def bert_large_amp(advice: dict) -> None:
    """BERT-large MLM, seq 512, bf16 autocast, batch 96, 12 GiB."""
    torch = _setup(12, advice)
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig(hidden_size=1024, num_hidden_layers=24,
                                       num_attention_heads=16, intermediate_size=4096)).cuda()
    b = _batch(96, advice)

    def ids(i):
        return torch.randint(0, 30522, (b, 512), device="cuda")

    _train(torch, model, lambda x: model(input_ids=x, labels=x).loss, ids, 3, True, advice)


def backward_oom(advice: dict) -> None:
    """An MLP whose forward fits and whose backward (gradients of wide layers) does not."""
    torch = _setup(6, advice)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(12)]).cuda()
    b = _batch(2048, advice)
    _train(torch, model, lambda x: model(x).square().mean(),
           lambda i: torch.randn(b, 8192, device="cuda"), 3, False, advice)


def optimizer_first_step(advice: dict) -> None:
    """1.5 GiB of fp32 parameters with AdamW under a 5 GiB cap: the state's lazy
    allocation at the first optimizer step runs out."""
    torch = _setup(5, advice)
    model = torch.nn.Sequential(*[torch.nn.Linear(8192, 8192) for _ in range(6)]).cuda()
    b = _batch(64, advice)
    _train(torch, model, lambda x: model(x).square().mean(),
           lambda i: torch.randn(b, 8192, device="cuda"), 3, False, advice)


PROGRAMS = {
    "vit_fp32": lambda a: vision("vit_b_16", 192, 14, False, a),
    "vit_amp": lambda a: vision("vit_b_16", 384, 14, True, a),
    "cnn_fp32": lambda a: vision("resnet152", 384, 10, False, a),
    "t5_seq": t5_seq,
    "gpt2_generate": gpt2_generate,
    "bert_large_amp": bert_large_amp,
    "backward_oom": backward_oom,
    "optimizer_first_step": optimizer_first_step,
}


def _run(name: str, advice: dict, folder: str) -> tuple[int, dict | None, str]:
    """(exit code, the OOM report or None, the output's tail) of one program under the agent."""
    env = dict(os.environ, VRAMSCOPE_OOM_DIR=folder, NCCL_NVLS_ENABLE="0",
               TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    if advice.get("kind") == "expandable_segments":
        env[advice["env"]] = advice["value"]
    before = set(os.listdir(folder))
    out = subprocess.run([sys.executable, "-m", "vramscope.run", os.path.abspath(__file__),
                          "--program", name, "--apply", json.dumps(advice)], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    reports = sorted(f for f in set(os.listdir(folder)) - before if f.endswith(".json"))
    report = None
    if reports:
        with open(os.path.join(folder, reports[-1]), encoding="utf-8") as f:
            report = json.load(f)
    return out.returncode, report, (out.stdout + out.stderr)[-1500:]


def drive(names: list[str]) -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            rc, report, tail = _run(name, {}, folder)
            row: dict = {"oom": report is not None, "rc": rc}
            if report is None:
                row["tail"] = tail
                results[name] = row
                continue
            advice = report["advice"]
            row.update(projection=report["projection"],
                       lower_bound=report.get("projection_is_lower_bound"),
                       need_bytes=report["need_bytes"],
                       first={k: v for k, v in advice[0].items() if k != "detail"},
                       applied=[])
            tried = [advice[0]] + [a for a in advice[1:] if a.get("fits")]
            for a in tried:
                rc2, report2, tail2 = _run(name, a, folder)
                row["applied"].append({"kind": a["kind"], "fits": a.get("fits"),
                                       "covers_known_need": a.get("covers_known_need"),
                                       "completed": rc2 == 0 and report2 is None,
                                       "tail": "" if rc2 == 0 else tail2[-600:]})
            results[name] = row
            print(json.dumps({name: row})[:3000], flush=True)
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?")
    p.add_argument("--only", default=",".join(PROGRAMS))
    p.add_argument("--program", choices=sorted(PROGRAMS))
    p.add_argument("--apply", default="{}")
    args = p.parse_args()
    if args.program:
        PROGRAMS[args.program](json.loads(args.apply))
        print("ok", flush=True)
        return
    results = drive([n for n in args.only.split(",") if n])
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
