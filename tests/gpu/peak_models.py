# tests/gpu/peak_models.py -- real models from other projects trained a few steps: step peaks
#
# Run in a fresh process by test_step_peaks.py, once per mode:
#   truth      no vramscope; torch's peaks reset at each step start, read after synchronize()
#   vramscope  vramscope attached (torch's peaks never touched); its step records
#   both       vramscope attached AND the program resets torch's peaks each step (a common habit)
# Prints one JSON line: per step, the peaks and the allocation counts that show whether two runs
# made the same allocations (allocation.all.allocated, requested_bytes.all.allocated: the requests;
# allocated_bytes.all.allocated: the blocks they got).
#
#   python peak_models.py MODEL MODE [--steps N]
#   MODEL: gpt2 (transformers), resnet50 (timm), resnet18_graphs (torchvision, torch.compile
#          reduce-overhead: CUDA graphs in private pools), lightning (a LightningModule's own
#          training_step), gpt2_expandable (run with expandable_segments:True by the test)
import argparse
import json
import sys

import torch


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 50257, (8, 512), device="cuda")

    def step(i):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tokens[:, : 384 + 64 * (i % 3)],
                         labels=tokens[:, : 384 + 64 * (i % 3)]).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def resnet50():
    import timm

    model = timm.create_model("resnet50", pretrained=False).cuda().to(
        memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (64,), device="cuda")

    def step(i):
        batch = 48 + 8 * (i % 3)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images[:batch]), labels[:batch])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def resnet18_graphs():
    import torchvision

    model = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, mode="reduce-overhead")
    images = torch.randn(32, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (32,), device="cuda")

    def step(i):
        torch.compiler.cudagraph_mark_step_begin()
        loss = torch.nn.functional.cross_entropy(compiled(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def lightning():
    import lightning.pytorch as pl

    class Net(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.GELU(),
                                           torch.nn.Linear(4096, 2048))

        def training_step(self, batch, _index):
            return self.net(batch).square().mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    net = Net().cuda()
    opt = net.configure_optimizers()
    data = torch.randn(512, 2048, device="cuda")

    def step(i):
        loss = net.training_step(data[: 256 + 128 * (i % 3)], i)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


MODELS = {"gpt2": gpt2, "gpt2_expandable": gpt2, "resnet50": resnet50,
          "resnet18_graphs": resnet18_graphs, "lightning": lightning}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("mode", choices=("truth", "vramscope", "both", "profile"))
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.cuda.init()
    free_at_start, total = torch.cuda.mem_get_info()
    vramscope = None
    if args.mode != "truth":
        import vramscope

        mode = vramscope.attach()
        assert mode == "events", mode
    step = MODELS[args.model]()
    if args.mode == "profile":
        # Two steps inside vramscope.profile(): its allocated peak against torch's, reset
        # right before (vramscope's peaks do not depend on torch's).
        step(0)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        with vramscope.profile() as p:
            step(1)
            step(2)
            torch.cuda.synchronize()
        print(json.dumps({"profile_peak": p.peak_allocated_bytes(0),
                          "torch_peak": torch.cuda.max_memory_allocated()}))
        return 0
    resets = args.mode in ("truth", "both")
    if vramscope is not None:
        vramscope._core.session.SESSION.step_all()  # the model's setup is not step 0
    rows = []
    for i in range(args.steps):
        if resets:
            torch.cuda.reset_peak_memory_stats()
        step(i)
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        row = {"torch_peak": stats["allocated_bytes.all.peak"],
               "allocations": stats["allocation.all.allocated"],
               "allocated_total": stats["allocated_bytes.all.allocated"],
               "requested_total": stats["requested_bytes.all.allocated"],
               "reserved_peak": stats["reserved_bytes.all.peak"]}
        if vramscope is not None:
            record = vramscope._core.session.SESSION.step_all()[0]
            row["vramscope_peak"] = int(record["peak_allocated_bytes"])
            row["vramscope_reserved_peak"] = int(record["peak_reserved_bytes"])
            row["allocated"] = int(record["allocated_bytes"])
            row["torch_allocated"] = stats["allocated_bytes.all.current"]
        rows.append(row)
    stats = torch.cuda.memory_stats()
    # cudaMalloc failures that torch answered by freeing its cache and retrying: such a run's
    # blocks depend on what else held the card, and cannot be compared with another run's.
    out = {"rows": rows, "alloc_retries": stats["num_alloc_retries"], "ooms": stats["num_ooms"],
           "free_at_start": free_at_start, "total": total}
    if vramscope is not None:
        view = vramscope.memory_stats()
        out["mismatches"] = int(view.get("allocated_mismatch_count", -1))
        out["unsettled"] = int(view.get("unsettled_count", -1))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
