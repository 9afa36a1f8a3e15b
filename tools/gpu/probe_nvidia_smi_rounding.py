"""tools/gpu/probe_nvidia_smi_rounding.py -- how nvidia-smi turns NVML's bytes into MiB.

nvidia-smi prints whole MiB and its reserved + used + free can exceed total by 1, so it does not
simply floor each value. This holds several allocation sizes and prints, for each, NVML's exact
bytes (from `vramscope --json`) next to nvidia-smi's MiB, to pin the rule down.
"""
import json
import os
import subprocess
import sys

import torch

MIB = 1 << 20
cli = os.environ.get("VRAMSCOPE_CLI", "vramscope")


def row():
    smi = subprocess.run(["nvidia-smi",
                          "--query-gpu=memory.total,memory.reserved,memory.used,memory.free",
                          "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True).stdout
    doc = json.loads(subprocess.run([cli, "--json", "--no-agents"],
                                    capture_output=True, text=True).stdout)
    d = doc["devices"][0]
    ours = [d[k] for k in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes")]
    print("smi", smi.strip(), "| bytes/MiB", ", ".join(f"{v / MIB:.4f}" for v in ours), flush=True)


row()
held = []
for extra in (1, 123 * 1024, 517 * 1024 + 3, 700 * 1024, 1000 * 1024, 3 * MIB + 999 * 1024):
    held.append(torch.empty(1024 * MIB + extra, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    row()
sys.exit(0)
