# tools/gpu/read_trace.py -- what a traced window needed under a cap: replay, simulation, truth
"""Reads the traces `tests/gpu/fit_program.py trace B OUT.json` writes on the GPU machine
(`tools/gpu/call.sh recheck` saves them as fit-trace-B.json) and prints, for each, what the
window's steps needed by torch's counters and by vramscope's two readings of what must fit
under a cap, beside whether the steps ran under the program's cap::

    python3 tools/gpu/read_trace.py fit-trace-48.json fit-trace-79.json

Columns: the batch; ran (the steps ran under the cap) and torch's num_alloc_retries (the
allocator freed its cache and retried: it was near the cap); torch's allocated and reserved
peaks; the replay's pinned peak (vramscope.predict.pinned); the simulated need
(vramscope.predict.capped); each over the allocated peak, the allowance fit would use. Runs on
the development machine (no GPU)."""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from vramscope.predict.pinned import pinned_peak  # noqa: E402

MiB = 1 << 20


def main(paths: list[str]) -> None:
    if not paths:
        sys.exit(__doc__)
    print(f"{'batch':>5} {'ran':>5} {'retries':>7} {'alloc':>9} {'reserved':>9} {'replay':>13} "
          f"{'simulated':>13}  (MiB; x allocated)")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            t = json.load(f)
        peaks = pinned_peak(t["segments"], t["events"])
        alloc = int(t["peak_allocated_bytes"])
        print(f"{t['batch']:>5} {str(t['ran']):>5} {t['num_alloc_retries']:>7} "
              f"{alloc // MiB:>9} {int(t['peak_reserved_bytes']) // MiB:>9} "
              f"{peaks.pinned_bytes // MiB:>7} {peaks.pinned_bytes / alloc:5.3f} "
              f"{peaks.capped_bytes // MiB:>7} {peaks.capped_bytes / alloc:5.3f}"
              f"  (cap {int(t['cap_bytes']) // MiB} MiB, {len(t['events'])} events,"
              f" {peaks.unknown_events} unknown)")


if __name__ == "__main__":
    main(sys.argv[1:])
