# bench/fit_models.py -- real models for `vramscope fit` against the true largest batch (GPU)
"""One process per use, so that each measurement starts with a fresh allocator:

    python bench/fit_models.py run   MODEL BATCH FRACTION   # 3 steps at BATCH: exit 0, 3 on OOM
    python bench/fit_models.py fit   MODEL FRACTION         # vramscope.fit in-process: JSON line
    python bench/fit_models.py both  MODEL FRACTION START   # fit, then accelerate's
                                                            # find_executable_batch_size: JSON

FRACTION is the memory-fraction cap every process sets (the budget): a share of the device
(0.042), or bytes ("6331680423B": the same cap on an H100 and an H200). Models are built from
configs (random weights, no download): cnn (torchvision ResNet-50), vit (torchvision ViT-B/16),
gpt2 (transformers GPT-2, 6 layers, seq 512), t5 (transformers T5-small shape, 256 -> 64),
lightning (a LightningModule on ResNet-18, FitBatchSize), hf_trainer (BERT 6 layers, seq 256,
Trainer and fit_trainer). bench/bench_fit.py drives them.
"""

from __future__ import annotations

import json
import sys
import time

import torch

MODELS = ("cnn", "vit", "gpt2", "t5", "lightning", "hf_trainer")


def plain_step(name: str):
    """(step(batch), model) of one of the plain models, AdamW, fp32."""
    dev = "cuda"
    if name in ("cnn", "vit"):
        import torchvision

        model = (torchvision.models.resnet50() if name == "cnn"
                 else torchvision.models.vit_b_16()).to(dev)

        def inputs(b):
            return (torch.randn(b, 3, 224, 224, device=dev),
                    torch.randint(0, 1000, (b,), device=dev))

        def loss_of(batch):
            x, y = batch
            return torch.nn.functional.cross_entropy(model(x), y)
    elif name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(n_layer=6)).to(dev)

        def inputs(b):
            return torch.randint(0, 50257, (b, 512), device=dev)

        def loss_of(ids):
            return model(input_ids=ids, labels=ids).loss
    elif name == "t5":
        from transformers import T5Config, T5ForConditionalGeneration

        model = T5ForConditionalGeneration(T5Config(
            d_model=512, d_ff=2048, num_layers=6, num_heads=8, decoder_start_token_id=0,
            pad_token_id=0)).to(dev)

        def inputs(b):
            return (torch.randint(0, 32000, (b, 256), device=dev),
                    torch.randint(0, 32000, (b, 64), device=dev))

        def loss_of(batch):
            src, tgt = batch
            return model(input_ids=src, labels=tgt).loss
    else:
        raise SystemExit(f"unknown model {name}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(b: int) -> None:
        loss = loss_of(inputs(b))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def lightning_trainer(batch: int, callbacks):
    import lightning.pytorch as pl
    import torchvision

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return 4096

        def __getitem__(self, i):
            return torch.randn(3, 224, 224), i % 1000

    class Module(pl.LightningModule):
        def __init__(self, batch_size):
            super().__init__()
            self.batch_size = batch_size
            self.net = torchvision.models.resnet18()

        def training_step(self, batch, idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

        def train_dataloader(self):
            return torch.utils.data.DataLoader(Images(), batch_size=self.batch_size)

    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=3, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    return trainer, Module(batch)


def hf_trainer(batch: int):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    class Texts(torch.utils.data.Dataset):
        def __len__(self):
            return 4096

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"input_ids": torch.randint(0, 30522, (256,), generator=g),
                    "labels": torch.tensor(i % 2)}

    model = BertForSequenceClassification(BertConfig(num_hidden_layers=6))
    args = TrainingArguments(output_dir="/tmp/hf-fit", per_device_train_batch_size=batch,
                             max_steps=3, report_to=[], save_strategy="no", logging_strategy="no",
                             dataloader_num_workers=0)
    return Trainer(model=model, args=args, train_dataset=Texts())


def run(name: str, batch: int) -> None:
    if name == "lightning":
        trainer, module = lightning_trainer(batch, [])
        trainer.fit(module)
    elif name == "hf_trainer":
        hf_trainer(batch).train()
    else:
        step = plain_step(name)
        for _ in range(3):
            step(batch)
    torch.cuda.synchronize()


def fit(name: str) -> dict:
    import vramscope

    began = time.perf_counter()
    if name == "lightning":
        from vramscope.predict.lightning import FitBatchSize

        finder = FitBatchSize(budget="cap")
        trainer, module = lightning_trainer(1, [finder])
        trainer.fit(module)
        result = finder.result
    elif name == "hf_trainer":
        from vramscope.predict.transformers import fit_trainer

        trainer = hf_trainer(1)
        trainer.model.to("cuda")
        result = fit_trainer(trainer, budget="cap")
    else:
        result = vramscope.fit(plain_step(name), budget="cap")
    seconds = time.perf_counter() - began
    return {"model": name, "answer": result.size, "fit_seconds": round(seconds, 2),
            "ooms": int(torch.cuda.memory_stats().get("num_ooms", 0)),
            "probes": [p.size for p in result.probes], "describe": result.describe()}


def both(name: str, start: int) -> dict:
    """fit, then accelerate's find_executable_batch_size, on the same step in one process: a
    plain model's step function (its model and optimizer built once), or a whole Lightning or
    HF Trainer run of 3 steps at each batch (what Trainer(auto_find_batch_size=True) does)."""
    from accelerate.utils import find_executable_batch_size

    out = fit(name)
    import gc

    gc.collect()
    torch.cuda.empty_cache()
    if name in ("lightning", "hf_trainer"):
        def steps(batch_size: int) -> None:
            run(name, batch_size)
    else:
        step = plain_step(name)

        def steps(batch_size: int) -> None:
            for _ in range(3):
                step(batch_size)
            torch.cuda.synchronize()
    ooms_before = int(torch.cuda.memory_stats().get("num_ooms", 0))
    began = time.perf_counter()
    tried: list[int] = []

    @find_executable_batch_size(starting_batch_size=start)
    def probe(batch_size):
        tried.append(batch_size)
        steps(batch_size)
        return batch_size

    found = probe()
    out.update({"accelerate_answer": found, "accelerate_seconds":
                round(time.perf_counter() - began, 2), "accelerate_tried": tried,
                "accelerate_ooms": int(torch.cuda.memory_stats().get("num_ooms", 0)) - ooms_before})
    return out


def cap_fraction(cap: str) -> float:
    """The memory fraction of a FRACTION argument: a share, or bytes ("...B") of this device."""
    if cap.endswith("B"):
        return int(cap[:-1]) / torch.cuda.mem_get_info()[1]
    return float(cap)


def main() -> None:
    mode, name = sys.argv[1], sys.argv[2]
    fraction = cap_fraction(sys.argv[-1] if mode != "both" else sys.argv[3])
    torch.cuda.set_per_process_memory_fraction(fraction)
    if mode == "run":
        try:
            run(name, int(sys.argv[3]))
        except torch.OutOfMemoryError:
            print("OOM", flush=True)
            raise SystemExit(3) from None
        print("OK", flush=True)
    elif mode == "fit":
        print(json.dumps(fit(name)), flush=True)
    elif mode == "both":
        print(json.dumps(both(name, int(sys.argv[4]))), flush=True)


if __name__ == "__main__":
    main()
