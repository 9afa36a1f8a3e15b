# python/vramscope/_core/units.py -- byte quantities as text, and text as bytes: one definition each
"""Sizes, the way every Python output of vramscope writes and reads them.

All units are binary (1 KiB = 1024 B): the allocator's blocks and the GPU's memory are powers
of two, and torch's own messages print ``MiB``/``GiB``. One formatter and one unit table, so
that a report, a step line and a test failure always print the same number the same way.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["format_bytes", "format_delta", "unit_bytes", "parse_size", "non_pytorch_bytes"]

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")
#: Power of 1024 by a unit's first letter (``B``, ``bytes``, ``K``/``KB``/``KiB``, ...).
_POWERS = {"B": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def format_bytes(n_bytes: int) -> str:
    """Human binary units: ``512 B``, ``1.5 KiB``, ``12.0 MiB``, ``1.2 GiB``."""
    sign = "-" if n_bytes < 0 else ""
    value = float(abs(n_bytes))
    if value < 1024:
        return f"{sign}{int(value)} B"
    unit = _UNITS[0]
    for unit in _UNITS:
        value /= 1024.0
        if value < 1024 or unit == _UNITS[-1]:
            break
    return f"{sign}{value:.1f} {unit}"


def format_delta(n_bytes: int) -> str:
    """A signed size: ``+12.0 MiB``, ``-3.0 KiB``, ``+0 B``."""
    return ("+" if n_bytes >= 0 else "") + format_bytes(n_bytes)


def unit_bytes(unit: str) -> int:
    """Bytes in one ``unit`` (case-insensitive; ``KB`` is ``KiB``, as in pytest-memray and in
    torch's messages); KeyError for a unit that is not one of B/bytes/K.../P...."""
    return 1024 ** _POWERS[unit[:1].upper()]


#: A size as a person writes it: a number, optional spaces, a unit.
_SIZE = re.compile(r"^\s*(?P<number>\+?(?:\d+\.?\d*|\.\d+))\s*(?P<unit>[KMGTP]i?B|B)\s*$",
                   re.IGNORECASE)


def parse_size(value: Any) -> int:
    """Bytes of ``"24 MB"``, ``"1.5 GiB"``, ``"512KB"`` (binary units: as in pytest-memray,
    ``KB`` is ``KiB``) or of an int; raises ValueError with the accepted forms for anything
    else (negative, no unit, unknown unit)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid size {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"invalid size {value!r}: sizes are not negative")
        return value
    if not isinstance(value, str):
        raise ValueError(f"invalid size {value!r}: expected a string like '24 MB' or '1.5 GiB', "
                         "or an int of bytes")
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"invalid size {value!r}: expected a number and a unit "
                         "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. '24 MB' or '1.5 GiB'")
    return int(float(match.group("number")) * unit_bytes(match.group("unit")))


def non_pytorch_bytes(driver_bytes: int | None, reserved_bytes: int) -> int | None:
    """What the driver charges one process on one GPU beyond its caching allocator's reserved
    bytes (CUDA context, cuBLAS/NCCL workspaces): ``driver - reserved``. None when NVML cannot
    tell (``driver_bytes`` None) or its number is below reserved (the two were read at
    different moments; the CLI's join flags the same case rather than print a number)."""
    if driver_bytes is None or driver_bytes < reserved_bytes:
        return None
    return driver_bytes - reserved_bytes
