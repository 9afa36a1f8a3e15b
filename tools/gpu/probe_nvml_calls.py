# tools/gpu/probe_nvml_calls.py -- what each NVML call of one vramscope sample costs on this driver
"""Times every NVML call the backend makes per sample, alone, through ctypes.

    python3 tools/gpu/probe_nvml_calls.py [--calls N] [--with-process]

A full sample measured 197 us on an H200 while the memory call alone took 3.7 us: this finds the
expensive call(s) so the sampler can read them at a lower rate. `--with-process` first starts a
child that holds a CUDA context, so the process lists are not empty. Times are wall-clock medians
of N calls (ctypes overhead, about 0.3 us, included; `nvmlDeviceGetCount` shows it).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import sys
import time


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class ProcessV3(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                ("gi", ctypes.c_uint), ("ci", ctypes.c_uint)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--with-process", action="store_true")
    args = parser.parse_args()
    child = None
    if args.with_process:
        child = subprocess.Popen([sys.executable, "-c",
                                  "import torch,sys; x=torch.ones(1<<28,device='cuda'); "
                                  "print('ready',flush=True); sys.stdin.read()"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        assert nvml.nvmlInit_v2() == 0
        handle = ctypes.c_void_p()
        assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0
        mem2 = MemoryV2(version=0x02000028)
        mem1, bar1 = Memory(), Memory()
        procs = (ProcessV3 * 64)()
        count = ctypes.c_uint()
        cur, pend = ctypes.c_uint(), ctypes.c_uint()
        n = ctypes.c_uint()

        def plist(fn):
            def call():
                count.value = 64
                return fn(handle, ctypes.byref(count), procs)
            return call

        calls = {
            "nvmlDeviceGetCount_v2 (ctypes floor)":
                lambda: nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)),
            "nvmlDeviceGetMemoryInfo_v2":
                lambda: nvml.nvmlDeviceGetMemoryInfo_v2(handle, ctypes.byref(mem2)),
            "nvmlDeviceGetMemoryInfo (v1)":
                lambda: nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem1)),
            "nvmlDeviceGetBAR1MemoryInfo":
                lambda: nvml.nvmlDeviceGetBAR1MemoryInfo(handle, ctypes.byref(bar1)),
            "nvmlDeviceGetMigMode":
                lambda: nvml.nvmlDeviceGetMigMode(handle, ctypes.byref(cur), ctypes.byref(pend)),
            "nvmlDeviceGetComputeRunningProcesses_v3":
                plist(nvml.nvmlDeviceGetComputeRunningProcesses_v3),
            "nvmlDeviceGetGraphicsRunningProcesses_v3":
                plist(nvml.nvmlDeviceGetGraphicsRunningProcesses_v3),
            "nvmlDeviceGetMPSComputeRunningProcesses_v3":
                plist(nvml.nvmlDeviceGetMPSComputeRunningProcesses_v3),
        }
        print(f"{'call':<46} {'status':>6} {'median us':>10} {'p90 us':>8}  entries")
        for name, call in calls.items():
            status = call()
            times = []
            for _ in range(args.calls):
                t0 = time.perf_counter_ns()
                call()
                times.append(time.perf_counter_ns() - t0)
            times.sort()
            entries = count.value if "Processes" in name else ""
            print(f"{name:<46} {status:>6} {statistics.median(times) / 1e3:>10.2f} "
                  f"{times[int(len(times) * 0.9)] / 1e3:>8.2f}  {entries}")
        nvml.nvmlShutdown()
    finally:
        if child is not None:
            child.stdin.close()
            child.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
