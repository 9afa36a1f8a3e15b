# python/vramscope/_ipython.py -- notebooks: `%vramscope`, `%%vramscope` and vramscope.show()
"""In a notebook (IPython or Jupyter)::

    %load_ext vramscope
    %vramscope            # this kernel's GPU memory: driver view + allocator view, per device
    %%vramscope           # (first line of a cell) the cell's peak and what it left allocated

``vramscope.show()`` returns the same view as ``%vramscope`` (HTML in a notebook, text in a
terminal). The decomposition per device is exact where the agent and NVML can tell:
allocated + cached free (reserved - allocated) + non-PyTorch (CUDA context, library
workspaces: driver - reserved) = what the driver charges this process; beside it, the GPU's
total, free and what other processes use. When memory stays allocated, the hints name what a
notebook keeps alive: the last exception's traceback (IPython keeps it for ``%debug``) and
the output history (``Out[n]``, ``_``).
"""

from __future__ import annotations

import dataclasses
import gc
import html
import sys
from typing import Any, Callable

from . import _api
from ._core.session import SESSION
from ._core.units import format_bytes, format_delta, non_pytorch_bytes

__all__ = ["show", "load_ipython_extension", "MemoryView", "DeviceView", "held_hints"]


@dataclasses.dataclass
class DeviceView:
    """One device as this process and the driver see it (bytes; None: unknown)."""

    device: int
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    #: What NVML charges this process on the device.
    driver_bytes: int | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None

    @property
    def cached_free_bytes(self) -> int:
        return self.reserved_bytes - self.allocated_bytes

    @property
    def non_pytorch_bytes(self) -> int | None:
        return non_pytorch_bytes(self.driver_bytes, self.reserved_bytes)

    @property
    def other_processes_bytes(self) -> int | None:
        if self.driver_bytes is None or self.total_bytes is None or self.free_bytes is None:
            return None
        return max(0, self.total_bytes - self.free_bytes - self.driver_bytes)


def _size(n: int | None) -> str:
    return "?" if n is None else format_bytes(n)


def _rows(d: DeviceView) -> list[tuple]:
    return [("allocated (tensors)", _size(d.allocated_bytes)),
            ("+ cached free (reserved - allocated)", _size(d.cached_free_bytes)),
            ("+ non-PyTorch (context, workspaces)", _size(d.non_pytorch_bytes)),
            ("= this process (driver)", _size(d.driver_bytes)),
            ("peak allocated (vramscope)", _size(d.peak_allocated_bytes)),
            ("other processes", _size(d.other_processes_bytes)),
            ("GPU free / total", f"{_size(d.free_bytes)} / {_size(d.total_bytes)}")]


@dataclasses.dataclass
class MemoryView:
    """What ``%vramscope`` and ``vramscope.show()`` display (HTML in a notebook)."""

    devices: list[DeviceView]
    mode: str = ""
    #: Why nothing could be read (no GPU, no torch).
    problem: str | None = None
    hints: list[str] = dataclasses.field(default_factory=list)

    def __repr__(self) -> str:
        if self.problem is not None:
            return f"vramscope: {self.problem}"
        lines = [f"vramscope ({self.mode})"]
        for d in self.devices:
            lines.append(f"cuda:{d.device}")
            lines += [f"  {name:<38} {value:>12}" for name, value in _rows(d)]
        lines += [f"hint: {h}" for h in self.hints]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        if self.problem is not None:
            return f"<p><b>vramscope</b>: {html.escape(self.problem)}</p>"
        parts = [f"<div><b>vramscope</b> <small>({html.escape(self.mode)})</small>"]
        for d in self.devices:
            parts.append(f"<table><caption>cuda:{d.device}</caption>")
            parts += [f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>"
                      f"{html.escape(value)}</td></tr>" for name, value in _rows(d)]
            parts.append("</table>")
        parts += [f"<p>&#9888; {html.escape(h)}</p>" for h in self.hints]
        parts.append("</div>")
        return "".join(parts)


def snapshot(hints: list[str] | None = None) -> MemoryView:
    """The view of every device of this process now (attaches the agent if needed)."""
    problem = SESSION.no_gpu()
    if problem is not None:
        return MemoryView([], problem=problem)
    SESSION.attach(init_cuda=True)
    torch = sys.modules.get("torch")
    views = []
    for d in range(_api.device_count()):
        view = DeviceView(d, _api.memory_allocated(d), _api.memory_reserved(d),
                          _api.max_memory_allocated(d))
        view.driver_bytes = SESSION.driver_process_bytes(d)
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            view.free_bytes, view.total_bytes = (int(v) for v in torch.cuda.mem_get_info(d))
        views.append(view)
    return MemoryView(views, mode=_api.mode(), hints=list(hints or ()))


def show() -> MemoryView:
    """This process's GPU memory per device (displayed as HTML in a notebook)."""
    return snapshot(held_hints(_user_ns()))


def _is_device_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor) and value.is_cuda


def _tensor_bytes(values: Any, is_device_tensor: Callable[[Any], bool]) -> int:
    total = 0
    for value in values:
        items = value.values() if isinstance(value, dict) else (
            value if isinstance(value, (list, tuple)) else (value,))
        for item in items:
            if is_device_tensor(item):
                total += item.untyped_storage().nbytes()
    return total


def held_hints(user_ns: dict[str, Any] | None, traceback: Any = None,
               is_device_tensor: Callable[[Any], bool] | None = None) -> list[str]:
    """What a notebook keeps alive that holds GPU tensors: the frames of the last exception's
    traceback (``sys.last_traceback`` unless ``traceback`` is given) and the output history.
    One line per finding, with the bytes and how to release them. ``is_device_tensor``
    (default: a CUDA tensor) says which values count."""
    is_device_tensor = is_device_tensor or _is_device_tensor
    hints = []
    tb = traceback if traceback is not None else getattr(sys, "last_traceback", None)
    held = 0
    while tb is not None:
        held += _tensor_bytes(list(tb.tb_frame.f_locals.values()), is_device_tensor)
        tb = tb.tb_next
    if held:
        hints.append(f"the last exception's traceback keeps {format_bytes(held)} of GPU tensors "
                     "alive in its frames (IPython keeps it for %debug); release it with "
                     "`import sys; sys.last_traceback = sys.last_value = sys.last_exc = None`")
    if user_ns:
        outputs = user_ns.get("Out") or {}
        for number in sorted(outputs):
            size = _tensor_bytes([outputs[number]], is_device_tensor)
            if size:
                hints.append(f"Out[{number}] holds {format_bytes(size)} of GPU tensors; "
                             "`%reset -f out` clears the output history (and _, __, ___)")
        for name in ("_", "__", "___"):
            value = user_ns.get(name)
            if value is not None and not any(value is v for v in outputs.values()):
                size = _tensor_bytes([value], is_device_tensor)
                if size:
                    hints.append(f"{name} holds {format_bytes(size)} of GPU tensors")
    return hints


def _user_ns() -> dict[str, Any] | None:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell.user_ns if shell is not None else None


@dataclasses.dataclass
class CellReport:
    """What ``%%vramscope`` displays after a cell: its peak and what it left allocated."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    #: Allocated after the cell (after gc.collect()) minus before it, summed over devices.
    left_bytes: int
    hints: list[str]

    def __repr__(self) -> str:
        lines = [f"vramscope: cell peak {format_bytes(self.peak_allocated_bytes)} allocated, "
                 f"{format_bytes(self.peak_reserved_bytes)} reserved; left allocated "
                 f"{format_delta(self.left_bytes)}"]
        return "\n".join(lines + [f"hint: {h}" for h in self.hints])

    def _repr_html_(self) -> str:
        head = html.escape(repr(self).splitlines()[0])
        return "<div>" + head + "".join(f"<p>&#9888; {html.escape(h)}</p>"
                                        for h in self.hints) + "</div>"


def _cell_magic(shell: Any, line: str, cell: str) -> Any:
    problem = SESSION.no_gpu()
    if problem is not None:
        shell.run_cell(cell)
        return MemoryView([], problem=f"{problem} (the cell ran unmeasured)")
    SESSION.attach(init_cuda=True)
    devices = range(_api.device_count())
    before = {d: _api.memory_allocated(d) for d in devices}
    for d in devices:
        _api.reset_peak(d)
    shell.run_cell(cell)
    gc.collect()
    report = CellReport(max((_api.max_memory_allocated(d) for d in devices), default=0),
                        max((_api.max_memory_reserved(d) for d in devices), default=0),
                        sum(_api.memory_allocated(d) - before[d] for d in devices), [])
    if report.left_bytes > 0:
        report.hints = held_hints(shell.user_ns)
    return report


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext vramscope``: registers ``%vramscope`` and ``%%vramscope``."""
    def line_magic(line: str) -> MemoryView:
        return snapshot(held_hints(ipython.user_ns))

    def cell_magic(line: str, cell: str) -> Any:
        return _cell_magic(ipython, line, cell)

    ipython.register_magic_function(line_magic, "line", "vramscope")
    ipython.register_magic_function(cell_magic, "cell", "vramscope")
