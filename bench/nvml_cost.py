# bench/nvml_cost.py -- what one NVML call costs on this machine (the floor under `record`'s sample)
"""Times the NVML calls `vramscope record` makes, through ctypes on libnvidia-ml.so.1 (about
1 us of ctypes each): the memory reading every sample takes (v2, then v1), and the process
list and BAR1 reading it takes at their slower refresh. Prints wall and CPU a call.

    python bench/nvml_cost.py [CALLS]
"""

from __future__ import annotations

import ctypes
import resource
import sys
import time


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong),
                ("reserved", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong),
                ("gpu_instance", ctypes.c_uint), ("compute_instance", ctypes.c_uint)]


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    assert nvml.nvmlInit_v2() == 0
    handle = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0
    v2 = MemoryV2(version=(2 << 24) | ctypes.sizeof(MemoryV2))
    v1 = Memory()
    count = ctypes.c_uint(64)
    procs = (ProcessInfo * 64)()
    bar1 = (ctypes.c_ulonglong * 3)()

    cases = {
        "ctypes call of nothing (the overhead)": lambda: nvml.nvmlDeviceGetCount_v2(
            ctypes.byref(count)),
        "nvmlDeviceGetMemoryInfo_v2": lambda: nvml.nvmlDeviceGetMemoryInfo_v2(handle,
                                                                             ctypes.byref(v2)),
        "nvmlDeviceGetMemoryInfo": lambda: nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(v1)),
        "nvmlDeviceGetComputeRunningProcesses_v3": lambda: (
            setattr(count, "value", 64),
            nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), procs))[1],
        "nvmlDeviceGetBAR1MemoryInfo": lambda: nvml.nvmlDeviceGetBAR1MemoryInfo(
            handle, ctypes.byref(bar1)),
    }
    for name, call in cases.items():
        n = calls if "Processes" not in name else max(1, calls // 10)
        began, began_cpu = time.perf_counter(), cpu()
        for _ in range(n):
            call()
        wall, used = time.perf_counter() - began, cpu() - began_cpu
        print(f"{name:45s} {1e6 * wall / n:7.2f} us wall, {1e6 * used / n:7.2f} us CPU a call "
              f"({n} calls, status {call()})")
    nvml.nvmlShutdown()


if __name__ == "__main__":
    main()
