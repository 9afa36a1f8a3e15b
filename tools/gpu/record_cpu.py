# tools/gpu/record_cpu.py -- `vramscope record -i 1ms`'s CPU a sample, its start and end taken out
"""Runs `vramscope record -o FILE -i 1ms` for 2 s and for 12 s (FLAGS added to both) and prints
the CPU a sample of the 10 s between them: (CPU of the long run - CPU of the short one) /
(samples of the long run - samples of the short one). The start (loading NVML, its init: tens of
milliseconds of CPU, 10-15 us a sample of a 10 s run) and the end (the index, the last sync)
cost both runs the same and drop out. The CPU is the kernel's (getrusage of the child: its
scheduler time, exact in total; the user/system split is the tick's).

    python tools/gpu/record_cpu.py FILE [FLAGS...]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys


def run(path: str, seconds: int, flags: list[str]) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["vramscope", "record", "-o", path, "-i", "1ms", "-d", f"{seconds}s",
                    "--force", *flags], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    show = subprocess.run(["vramscope", "show", "--json", path], check=True,
                          capture_output=True, text=True).stdout
    return cpu, int(json.loads(show)["sample_count"])


def main() -> None:
    path, flags = sys.argv[1], sys.argv[2:]
    short_cpu, short_n = run(path, 2, flags)
    long_cpu, long_n = run(path, 12, flags)
    per = (long_cpu - short_cpu) / max(1, long_n - short_n)
    print(f"record -i 1ms {' '.join(flags)}: {1e6 * per:.1f} us of CPU a sample between 2 s and "
          f"12 s ({long_n - short_n} samples); whole 12 s run {1e6 * long_cpu / long_n:.1f} us a "
          f"sample, its start and end included")


if __name__ == "__main__":
    main()
