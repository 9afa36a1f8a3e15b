# bench/oom_kinds.py -- realistic OOMs of the kinds issue 33 lists, their first advice applied (GPU)
"""Each program below is plain PyTorch (no vramscope code), configured by JSON advice the way a
user would apply it. The driver runs it under ``python -m vramscope.run`` until it runs out of
memory, reads the JSON report, applies the first advice (and every other ``fits: true`` one) in a
fresh process, and records whether the program then completes::

    python bench/oom_kinds.py OUT.json [--only vit_fp32,t5_seq,...] [--jobs 4]   # the driver
    python bench/oom_kinds.py --program NAME --apply '{"kind": ...}'    # one program

Written for the H200: each program caps its own allocator (set_per_process_memory_fraction) to
a few GiB, so ``--jobs`` programs share the card without touching each other's budget (the
largest raised cap an advice can ask for, 0.25 of the card, times the jobs stays below it).
Results: docs/oom-advice.md.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

GiB = 1 << 30


def _setup(cap_gib: float, advice: dict):
    import torch

    fraction = advice.get("fraction") if advice.get("kind") == "memory_fraction" else None
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(fraction or cap_gib * GiB / total)
    return torch


def _batch(default: int, advice: dict) -> int:
    return int(advice["batch_size"]) if advice.get("kind") == "batch_size" else default


def _length(length: int, advice: dict) -> int:
    """A sequence length the program wants, cut to the advised cap."""
    return min(length, int(advice["max_length"])) if advice.get("kind") == "sequence_length" \
        else length


def _side(side: int, advice: dict) -> int:
    """An image side the program wants (square images), cut to the advised cap."""
    return min(side, int(min(advice["max_size"]))) if advice.get("kind") == "image_size" \
        else side


def _chunks(batch: int, advice: dict) -> list[int]:
    """A batch the program wants, in pieces no larger than the advised batch."""
    most = int(advice["batch_size"]) if advice.get("kind") == "batch_size" else batch
    return [min(most, batch - i) for i in range(0, batch, most)]


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
    method = advice.get("method")
    if method:  # transformers' own switch (activation_ or gradient_checkpointing_enable)
        getattr(model.get_submodule(advice["modules"]), method)(
            **{method.replace("_enable", "_kwargs"): {"use_reentrant": False}})
        return
    from torch.utils.checkpoint import checkpoint

    for child in model.get_submodule(advice["modules"]).children():
        child.forward = functools.partial(checkpoint, child.forward, use_reentrant=False)


def _train(torch, model, loss_of, inputs, steps: int, amp: bool, advice: dict) -> None:
    _checkpoint(model, advice)
    opt = _optimizer(torch, model.parameters(), advice)
    for i in range(steps):
        batch = inputs(i)  # held through the step, as a training loop's batch is
        with _autocast(torch, amp, advice):
            loss = loss_of(batch)
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
    _train(torch, model, lambda x: model(**x).loss,
           lambda i: {"input_ids": torch.randint(0, 32000, (b, _length(lengths[i], advice)),
                                                 device="cuda"),
                      "labels": torch.randint(0, 32000, (b, 128), device="cuda")},
           4, False, advice)


def gpt2_generate(advice: dict) -> None:
    """Inference: generate() under no_grad, 512 new tokens at batch 384, 8 GiB (a KV cache of
    about 15 GB at the end). The model has room for them: 2048 positions (GPT-2's 1024 would
    index past its table, a device-side assert). Once 1024 tokens at batch 192: the same cache,
    twice the sequential steps, and the lane, whose measurement and remedies are whole
    generations, outran the bench's 400 s call on an H100."""
    torch = _setup(8, advice)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_positions=2048)).cuda().eval()
    b = _batch(384, advice)
    new = int(advice["max_new_tokens"]) if advice.get("kind") == "max_new_tokens" else 512
    with torch.no_grad(), _autocast(torch, False, advice):
        model.generate(torch.randint(0, 50257, (b, 16), device="cuda"), max_new_tokens=new,
                       min_new_tokens=new, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()


def gpt2_seq_growth(advice: dict) -> None:
    """A causal LM fine-tuned on longer and longer sequences (a length curriculum: 128, 256,
    512, 768, 1024 at batch 48), fp32, AdamW, 10 GiB. On an H100 (torch 2.11) it runs out at
    its first step, at 128 tokens, and every later step is longer: no earlier step shows the
    growth, so what fits the first step is not promised (the model takes 1024 positions); the
    batch run at 1024 tokens is."""
    torch = _setup(10, advice)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).cuda()
    b = _batch(48, advice)
    lengths = (128, 256, 512, 768, 1024)

    def ids(i):
        x = torch.randint(0, 50257, (b, _length(lengths[i], advice)), device="cuda")
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x}

    _train(torch, model, lambda x: model(**x).loss, ids, len(lengths), False, advice)


def bert_large_amp(advice: dict) -> None:
    """BERT-large MLM, seq 512, bf16 autocast, batch 96, 12 GiB."""
    torch = _setup(12, advice)
    from transformers import BertConfig, BertForMaskedLM

    model = BertForMaskedLM(BertConfig(hidden_size=1024, num_hidden_layers=24,
                                       num_attention_heads=16, intermediate_size=4096)).cuda()
    b = _batch(96, advice)

    def ids(i):
        x = torch.randint(0, 30522, (b, 512), device="cuda")
        return {"input_ids": x, "labels": x}

    _train(torch, model, lambda x: model(**x).loss, ids, 3, True, advice)


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


def seg_highres(advice: dict) -> None:
    """Semantic segmentation at high resolution: torchvision FCN-ResNet50 (21 classes) at
    1024x1024, batch 12, fp32, AdamW, 16 GiB."""
    torch = _setup(16, advice)
    import torchvision

    model = torchvision.models.segmentation.fcn_resnet50(
        weights=None, weights_backbone=None, num_classes=21, aux_loss=False).cuda()
    b = _batch(12, advice)
    _train(torch, model,
           lambda x: torch.nn.functional.cross_entropy(model(x[0])["out"], x[1]),
           lambda i: (torch.randn(b, 3, 1024, 1024, device="cuda"),
                      torch.randint(0, 21, (b, 1024, 1024), device="cuda")), 2, False, advice)


def vit_growth(advice: dict) -> None:
    """A ViT (timm, dynamic image size) whose image grows: 224, 320, 448, 640 at batch 48,
    fp32, AdamW, 14 GiB."""
    torch = _setup(14, advice)
    import timm

    model = timm.create_model("vit_base_patch16_224", pretrained=False,
                              dynamic_img_size=True).cuda()
    b = _batch(48, advice)
    sides = (224, 320, 448, 640)
    _train(torch, model,
           lambda x: torch.nn.functional.cross_entropy(model(x[0]), x[1]),
           lambda i: (torch.randn(b, 3, _side(sides[i], advice), _side(sides[i], advice),
                                  device="cuda"),
                      torch.randint(0, 1000, (b,), device="cuda")), 4, False, advice)


def eval_growth(advice: dict) -> None:
    """An evaluation loop under no_grad whose batch grows (512, 1024, 2048, 4096, 8192):
    torchvision ResNet-50 inference in fp32, 6 GiB."""
    torch = _setup(6, advice)
    import torchvision

    model = torchvision.models.resnet50().cuda().eval()
    with torch.no_grad(), _autocast(torch, False, advice):
        for batch in (512, 1024, 2048, 4096, 8192):
            for part in _chunks(batch, advice):
                model(torch.randn(part, 3, 224, 224, device="cuda")).argmax(-1)
    torch.cuda.synchronize()


def _kept(t, advice: dict):
    """What a loop keeps of a tensor: the tensor itself (the leak: its graph and its memory
    on the device), or, with the leak advice applied, a copy on the host without its graph."""
    return t.detach().cpu() if advice.get("kind") == "leak" else t


def _grad(torch, advice: dict):
    """The no_grad advice applied (torch.no_grad() around the model's calls), else nothing."""
    if advice.get("kind") == "no_grad":
        return torch.no_grad()
    import contextlib

    return contextlib.nullcontext()


def vit_eval_forgot_no_grad(advice: dict) -> None:
    """Predictions of a torchvision ViT-B/16 in evaluation mode over 4 batches of 256 images,
    fp32, 8 GiB, without torch.no_grad(): autograd keeps every activation of the forward."""
    torch = _setup(8, advice)
    import torchvision

    model = torchvision.models.vit_b_16().cuda().eval()
    predictions = []
    with _grad(torch, advice):
        for _ in range(4):
            for b in _chunks(256, advice):
                predictions.append(model(torch.randn(b, 3, 224, 224, device="cuda"))
                                   .argmax(-1).cpu())
    torch.cuda.synchronize()


def eval_keeps_outputs(advice: dict) -> None:
    """An evaluation loop that forgot torch.no_grad() and keeps every batch's logits for its
    metrics, graph and all: torchvision ResNet-18 at batch 16, 40 batches, fp32, 6 GiB."""
    torch = _setup(6, advice)
    import torchvision

    model = torchvision.models.resnet18().cuda().eval()
    b = _batch(16, advice)
    outputs = []
    with _grad(torch, advice):
        for _ in range(40):
            outputs.append(_kept(model(torch.randn(b, 3, 224, 224, device="cuda")), advice))
    torch.cat([o.cpu() for o in outputs]).argmax(-1)
    torch.cuda.synchronize()


def gpt2_logits_kept(advice: dict) -> None:
    """A causal LM fine-tuned (batch 4 x 512, fp32, AdamW) that keeps each step's logits for a
    perplexity at the end: 400 MiB more every step until the 10 GiB cap, 30 steps."""
    torch = _setup(10, advice)
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config()).cuda()
    opt = _optimizer(torch, model.parameters(), advice)
    b = _batch(4, advice)
    kept = []
    for _ in range(30):
        x = torch.randint(0, 50257, (b, 512), device="cuda")
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(_kept(out.logits, advice))
    torch.cuda.synchronize()


def _saved_lm() -> str:
    """A GPT-2-shaped causal LM (24 layers of width 1280: 2 GiB in float32) saved once in
    bfloat16 under the temporary folder, the way a hub checkpoint arrives; its path."""
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    path = os.path.join(tempfile.gettempdir(), "vramscope-oom-kinds-lm-1280x24")
    if not os.path.isdir(path):
        staging = tempfile.mkdtemp(dir=tempfile.gettempdir())
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config(n_embd=1280, n_layer=24, n_head=20)) \
            .to(torch.bfloat16).save_pretrained(staging)
        try:
            os.rename(staging, path)
        except OSError:  # another process saved it first
            shutil.rmtree(staging, ignore_errors=True)
    return path


def lm_load_fp32(advice: dict) -> None:
    """Inference with a bfloat16 checkpoint loaded in float32 (from_pretrained(dtype=
    torch.float32, device_map="cuda"): 2 GiB of weights) under a 1.5 GiB cap, then 32 new
    tokens at batch 4: the OOM is in the load."""
    torch = _setup(1.5, advice)
    from transformers import GPT2LMHeadModel

    path = _saved_lm()
    dtype = getattr(torch, advice["dtype"]) if advice.get("kind") == "model_dtype" \
        else torch.float32
    model = GPT2LMHeadModel.from_pretrained(path, dtype=dtype, device_map="cuda").eval()
    with torch.no_grad():
        model.generate(torch.randint(0, 50257, (4, 16), device="cuda"), max_new_tokens=32,
                       min_new_tokens=32, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()


def trainer_eval(advice: dict) -> None:
    """transformers' Trainer.evaluate() of a causal LM (GPT-2, 24 batches of 8 x 128 tokens,
    an accuracy from the logits) under a 3 GiB cap: with eval_accumulation_steps unset the
    loop keeps every step's logits on the device (206 MB a step) and runs out part-way."""
    _setup(3, advice)
    import numpy as np
    import torch
    import transformers

    class Rows(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 24 * 8

        def __getitem__(self, i: int) -> dict:
            x = torch.randint(0, 50257, (128,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x}

    def accuracy(p) -> dict:
        return {"accuracy": float((np.argmax(p.predictions, -1) == p.label_ids).mean())}

    every = int(advice["eval_accumulation_steps"]) if advice.get("kind") == \
        "eval_accumulation" else None
    args = transformers.TrainingArguments(
        tempfile.mkdtemp(), per_device_eval_batch_size=_batch(8, advice), report_to=[],
        eval_accumulation_steps=every)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    transformers.Trainer(model=model, args=args, eval_dataset=Rows(),
                         compute_metrics=accuracy).evaluate()
    torch.cuda.synchronize()


def _saved_training_checkpoint() -> str:
    """A GPT-2 (124M) training checkpoint, its model and its AdamW state after one step
    (1.5 GB), saved once under the temporary folder; its path."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    path = os.path.join(tempfile.gettempdir(), "vramscope-oom-kinds-gpt2-adamw.pt")
    if not os.path.exists(path):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config())
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randint(0, 50257, (1, 32))
        model(input_ids=x, labels=x).loss.backward()
        optimizer.step()
        fd, staging = tempfile.mkstemp(dir=tempfile.gettempdir())
        os.close(fd)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": 1}, staging)
        os.replace(staging, path)
    return path


def checkpoint_inference(advice: dict) -> None:
    """Inference from a training checkpoint (a GPT-2 and its AdamW state, 1.5 GB) loaded with
    torch.load(path, map_location="cuda") under a 1.2 GiB cap, then 32 new tokens at batch 4:
    the OOM is in torch.load."""
    path = _saved_training_checkpoint()
    torch = _setup(1.2, advice)
    from transformers import GPT2Config, GPT2LMHeadModel

    where = advice["map_location"] if advice.get("kind") == "map_location" else "cuda"
    checkpoint = torch.load(path, map_location=where)
    model = GPT2LMHeadModel(GPT2Config())
    model.load_state_dict(checkpoint["model"])
    del checkpoint
    model = model.cuda().eval()
    with torch.no_grad():
        model.generate(torch.randint(0, 50257, (4, 16), device="cuda"), max_new_tokens=32,
                       min_new_tokens=32, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()


def lightning_cnn(advice: dict) -> None:
    """A Lightning Trainer fitting a ResNet-50 at 224x224, batch 192, fp32, SGD with momentum:
    out of memory at its first step, 10 GiB."""
    torch = _setup(10, advice)
    import lightning as L
    import torchvision

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torchvision.models.resnet50()

        def training_step(self, batch, batch_idx):
            x, y = batch
            with _autocast(torch, False, advice):
                return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return _optimizer(torch, self.parameters(), advice) \
                if advice.get("kind") == "optimizer_state" else \
                torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)

    module = Classifier()
    _checkpoint(module, advice)
    b = _batch(192, advice)
    data = torch.utils.data.TensorDataset(torch.randn(2 * b, 3, 224, 224),
                                          torch.randint(0, 1000, (2 * b,)))
    trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=2, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=b))
    torch.cuda.synchronize()


PROGRAMS = {
    "vit_fp32": lambda a: vision("vit_b_16", 192, 14, False, a),
    "vit_amp": lambda a: vision("vit_b_16", 384, 14, True, a),
    "cnn_fp32": lambda a: vision("resnet152", 384, 10, False, a),
    "t5_seq": t5_seq,
    "gpt2_seq_growth": gpt2_seq_growth,
    "gpt2_generate": gpt2_generate,
    "bert_large_amp": bert_large_amp,
    "backward_oom": backward_oom,
    "optimizer_first_step": optimizer_first_step,
    "seg_highres": seg_highres,
    "vit_growth": vit_growth,
    "eval_growth": eval_growth,
    "lightning_cnn": lightning_cnn,
    "eval_keeps_outputs": eval_keeps_outputs,
    "gpt2_logits_kept": gpt2_logits_kept,
    "lm_load_fp32": lm_load_fp32,
    "trainer_eval": trainer_eval,
    "vit_eval_forgot_no_grad": vit_eval_forgot_no_grad,
    "checkpoint_inference": checkpoint_inference,
}

#: The lanes that took longest on an H100 (2026-12-05: 100-170 s; gpt2_generate past 400 s).
LONG = ("gpt2_generate", "gpt2_logits_kept", "lightning_cnn", "gpt2_seq_growth")


class _Card:
    """The card the lanes share: each program caps its own allocator at its lane's share, so
    they run side by side; a raised cap (a `memory_fraction` advice applied) may take most of
    the card, so it runs alone (on an H100, `seg_highres`'s 52 GiB cap ran out beside a lane
    holding 70 GiB: the card's room, not the advice)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._alone = False
        self._waiting = 0

    @contextlib.contextmanager
    def share(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._alone and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self):
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._alone and not self._shared)
            self._waiting -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cond:
                self._alone = False
                self._cond.notify_all()


CARD = _Card()


def _run(name: str, advice: dict, folder: str) -> tuple[int, dict | None, str]:
    """(exit code, the OOM report or None, the output's tail) of one program under the agent;
    a raised cap alone on the card."""
    with CARD.alone() if advice.get("kind") == "memory_fraction" else CARD.share():
        return _run_now(name, advice, folder)


def _run_now(name: str, advice: dict, folder: str) -> tuple[int, dict | None, str]:
    env = dict(os.environ, VRAMSCOPE_OOM_DIR=folder, NCCL_NVLS_ENABLE="0",
               TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    if advice.get("kind") == "expandable_segments":
        env[advice["env"]] = advice["value"]
    before = set(os.listdir(folder))
    out = subprocess.run([sys.executable, "-m", "vramscope.run", os.path.abspath(__file__),
                          "--program", name, "--apply", json.dumps(advice)], env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    # The report of the OOM that ended the program: the newest one not marked survived (an OOM
    # the program went on after, as cuDNN does when a workspace does not fit, has its own).
    report = None
    for name in sorted((f for f in set(os.listdir(folder)) - before if f.endswith(".json")),
                       key=lambda f: os.stat(os.path.join(folder, f)).st_mtime_ns):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            found = json.load(f)
        if not found.get("survived"):
            report = found
    return out.returncode, report, (out.stdout + out.stderr)[-1500:]


def _lane(name: str, folder: str) -> dict:
    """One program: run until its OOM, then its first advice and every other ``fits: true`` one
    applied in fresh processes."""
    began = time.monotonic()
    rc, report, tail = _run(name, {}, folder)
    row: dict = {"oom": report is not None, "rc": rc, "oom_seconds": time.monotonic() - began}
    if report is None:
        row["tail"] = tail
        return row
    advice = report["advice"]
    measured = report.get("measured")
    row.update(phase=report.get("phase"), load_call=report.get("load_call"),
               projection=report["projection"],
               lower_bound=report.get("projection_is_lower_bound"),
               need_bytes=report["need_bytes"], budget_bytes=report["budget_bytes"],
               measured=None if measured is None else {
                   "need_bytes": measured["need_bytes"], "seconds": measured["seconds"],
                   "remedies": [(r["kind"], r["need_bytes"]) for r in measured["remedies"]],
                   "notes": measured["notes"]},
               measure_note=report.get("measure_note"),
               first={k: v for k, v in advice[0].items() if k != "detail"},
               applied=[],
               # The OOM run's last output (the summaries, the exception that ended it) and
               # its whole report: what a result that surprises is read from afterwards.
               tail=tail, report=report)
    tried = [advice[0]] + [a for a in advice[1:] if a.get("fits")]
    for a in tried:
        rc2, report2, tail2 = _run(name, a, folder)
        row["applied"].append({"kind": a["kind"], "fits": a.get("fits"),
                               "completed": rc2 == 0 and report2 is None,
                               "tail": "" if rc2 == 0 else tail2[-600:]})
    row["seconds"] = time.monotonic() - began
    return row


def drive(names: list[str], jobs: int = 1, out: str | None = None) -> dict:
    """Every program's lane, ``jobs`` at once; each result printed (and the whole written to
    ``out``) as soon as its lane ends, so a run cut short keeps what finished."""
    import concurrent.futures

    results = {}
    with tempfile.TemporaryDirectory() as root:
        def lane(name: str) -> dict:
            folder = os.path.join(root, name)
            os.mkdir(folder, 0o700)
            return _lane(name, folder)

        # The longest lanes first (whole generations; a leak's many steps; Lightning's start),
        # so that a call's time limit cuts short ones.
        names = sorted(names, key=lambda n: n not in LONG)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            running = {pool.submit(lane, name): name for name in names}
            for done in concurrent.futures.as_completed(running):
                name = running[done]
                results[name] = done.result()
                print(json.dumps({name: results[name]})[:3000], flush=True)
                if out:
                    with open(out, "w", encoding="utf-8") as f:
                        json.dump(results, f, indent=1)
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?")
    p.add_argument("--only", default=",".join(PROGRAMS))
    p.add_argument("--program", choices=sorted(PROGRAMS))
    p.add_argument("--apply", default="{}")
    p.add_argument("--jobs", type=int, default=1, help="programs run at once (each capped)")
    args = p.parse_args()
    if args.program:
        PROGRAMS[args.program](json.loads(args.apply))
        print("ok", flush=True)
        return
    drive([n for n in args.only.split(",") if n], args.jobs, args.out)


if __name__ == "__main__":
    main()
