# python/vramscope/_core/device.py -- turn the `device` argument users pass into a CUDA ordinal
"""Device arguments accepted everywhere in vramscope, exactly as in ``torch.cuda``.

``None`` (the current device), an ``int`` ordinal, a string such as ``"cuda"`` or ``"cuda:1"``,
or a ``torch.device`` of type ``cuda``. Kept free of torch imports so that it can be tested and
used before torch is loaded; a ``torch.device`` is recognised by its ``type``/``index`` attributes.
"""

from __future__ import annotations

from typing import Any, Callable, Union

#: What every vramscope function accepts as ``device``.
Device = Union[None, int, str, Any]


def parse_device(device: Device, current: Callable[[], int], count: int | None = None) -> int:
    """Returns the CUDA ordinal named by ``device``.

    ``current`` is called only when the argument names the current device. When ``count`` is
    given, ordinals outside ``[0, count)`` raise ``ValueError``.
    """
    if device is None:
        return current()
    # bool is an int subclass; True as a device is always a mistake.
    if isinstance(device, bool):
        raise TypeError(f"vramscope: expected a CUDA device, got {device!r}")
    if isinstance(device, int):
        index = device
    elif isinstance(device, str):
        index = _parse_device_string(device, current)
    elif hasattr(device, "type") and hasattr(device, "index"):
        if device.type != "cuda":
            raise ValueError(f"vramscope: expected a CUDA device, got {str(device)!r}")
        index = current() if device.index is None else int(device.index)
    else:
        raise TypeError(
            "vramscope: device must be None, an int, a string like 'cuda:0' or a torch.device, "
            f"got {type(device).__name__}"
        )
    if index < 0 or (count is not None and index >= count):
        visible = f" ({count} visible)" if count is not None else ""
        raise ValueError(f"vramscope: no CUDA device {index}{visible}")
    return index


def _parse_device_string(text: str, current: Callable[[], int]) -> int:
    kind, sep, rest = text.strip().partition(":")
    if kind != "cuda":
        raise ValueError(f"vramscope: expected a CUDA device, got {text!r}")
    if not sep:
        return current()
    if not rest.isdigit():
        raise ValueError(f"vramscope: invalid device string {text!r} (expected 'cuda:N')")
    return int(rest)
