# python/vramscope/predict/child.py -- a probe process of `vramscope fit`: N steps' peaks, then exit
"""The child side of ``vramscope fit -- python train.py --batch-size {}``. The parent runs the
command under ``python -m vramscope.run`` with ``VRAMSCOPE_FIT_OUT`` (a file in a folder only
this user can enter) and ``VRAMSCOPE_FIT_STEPS``; ``run`` plugs ``ProbeSink`` into its Monitor.
After that many steps the sink writes the exact step peaks and what the driver says of the
device, then ends the process (exit 0, ``os._exit``: the rest of the training, its ``finally``
blocks and atexit handlers are not run; the agent's shared-memory segment is unlinked by the
next reader, which removes dead writers' files). A program that ends earlier leaves what it
measured when the Monitor closes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["ENV_OUT", "ENV_STEPS", "ProbeSink", "from_env"]

ENV_OUT = "VRAMSCOPE_FIT_OUT"
ENV_STEPS = "VRAMSCOPE_FIT_STEPS"


class ProbeSink:
    """A Monitor sink (``write_step``/``close``) that keeps each step's peaks and, after
    ``steps`` steps, writes them to ``path`` and ends the process."""

    def __init__(self, path: str, steps: int) -> None:
        self.path = path
        self.steps = steps
        self._records: list[dict[str, int]] = []
        self._written = False

    def write_step(self, record: Any) -> None:
        self._records.append({"step": record.step, "device": record.device,
                              "peak_allocated_bytes": record.peak_allocated_bytes,
                              "peak_reserved_bytes": record.peak_reserved_bytes})
        if len({r["step"] for r in self._records}) >= self.steps:
            self.close()
            # The probe is measured: the rest of the program is not run (no atexit handlers,
            # no second report; the parent reads the file).
            os._exit(0)

    def close(self) -> None:
        if self._written:
            return
        self._written = True
        data = {"steps": self._records, "devices": _devices()}
        # O_EXCL: the parent's private folder holds no file of this name; never follow one.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)


def _devices() -> list[dict[str, Any]]:
    """What the driver says of each device this process used (for the parent's budget)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return []
    from .budget import device_memory

    return [dict(device_memory(d)._asdict(), device=d) for d in range(torch.cuda.device_count())]


def from_env(env: Mapping[str, str]) -> ProbeSink | None:
    """The sink the parent asked for through the environment, or None."""
    path = env.get(ENV_OUT)
    if not path:
        return None
    try:
        steps = int(env.get(ENV_STEPS, "3"))
    except ValueError:
        steps = 3
    return ProbeSink(path, max(1, steps))
