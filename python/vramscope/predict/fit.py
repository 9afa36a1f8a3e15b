# python/vramscope/predict/fit.py -- vramscope.fit(step, budget=...): the largest batch, in-process
"""``fit`` runs a few real steps of ``step`` at small sizes in this process, reads their exact
peaks, fits the memory model and returns the largest batch (or sequence length) whose predicted
peak fits the budget with a margin::

    def step(batch_size):
        x = torch.randn(batch_size, 3, 224, 224, device="cuda")
        loss = model(x).logsumexp(-1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    result = vramscope.fit(step, budget="card", margin=0.01, restore=(model, opt))
    print(result.describe())          # the model, the answer, its margin, the probes
    train(batch_size=result.size)

Every probe is a size the evidence says fits (see ``search``); the step is never run at a size
that could run out of memory by the model. Peaks come from the agent's step records (exact,
from allocator events; torch's own peak counters are left alone); without the agent, from
torch's counters, reset before each step; what must fit under a cap, from torch's memory
history of the probe's steps (vramscope.predict.window). The cache is emptied before each size
so that its reserved peak is that of a fresh layout. Under torch.distributed every rank
searches and all use the smallest answer (``agree_min``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable

from .._core.session import SESSION
from .._core.torchcheck import is_oom_error
from .budget import Budget, DeviceMemory, agree_min, device_memory, resolve_budget
from .model import Probe
from .search import DEFAULT_MARGIN, FitResult, ProbeOutOfMemory, search
from .window import Window, WindowPeaks, allocator_retries

__all__ = ["CudaDevice", "fit", "measure_in_process"]


def _host_copy(state: Any) -> Any:
    """A deep copy of a state dict with every tensor on the host."""
    import torch

    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, dict):
        return {k: _host_copy(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_host_copy(v) for v in state)
    return copy.deepcopy(state)


def measure_in_process(call: Callable[[int], Any], steps: int, device: int,
                       pinned: bool = True,
                       on_window: Callable[[int, WindowPeaks], None] | None = None
                       ) -> Callable[[int], Probe]:
    """``measure(size)`` for ``search``: runs ``call(size)`` ``steps`` times in one measured
    window (vramscope.predict.window: exact peaks, and the pinned peak when ``pinned``) and
    returns them; a step that runs out of memory raises ProbeOutOfMemory. ``on_window(size,
    peaks)`` sees each window's peaks whole (what stayed allocated at its end among them)."""
    import torch

    def measure(size: int) -> Probe:
        gc.collect()
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()  # a fresh layout for this size, as a new process has
        began = time.perf_counter()
        window = Window(torch, device, pinned)
        window.start()
        try:
            for _ in range(steps):
                call(size)
            peaks = window.stop()
        except Exception as e:
            window.abandon()
            if not is_oom_error(e):
                raise
            del e
            gc.collect()
            torch.cuda.empty_cache()
            raise ProbeOutOfMemory(size) from None
        if on_window is not None:
            on_window(size, peaks)
        return Probe(size, peaks.allocated_bytes, peaks.reserved_bytes, steps,
                     time.perf_counter() - began, peak_pinned_bytes=peaks.pinned_bytes,
                     resident_bytes=peaks.final_allocated_bytes)

    return measure


class CudaDevice:
    """The device in-process measurements run on (``fit``'s probes, the OOM post-mortem's):
    windows of the CUDA allocator (exact peaks and what must fit, vramscope.predict.window),
    its memory and its cache. Tests give a synthetic one with the same methods."""

    def __init__(self, device: int) -> None:
        self.index = device

    def memory(self) -> DeviceMemory:
        """What the driver and torch say of the device now (for the budget)."""
        return device_memory(self.index)

    def window(self, call: Callable[[int], Any],
               steps: int = 1) -> Callable[[int], tuple[Probe, int]]:
        """``measure(size) -> (probe, bytes allocated at its end)``: ``steps`` runs of
        ``call(size)`` in one window; ProbeOutOfMemory when one runs out of memory."""
        finals: dict[int, int] = {}

        def keep(size: int, peaks: Any) -> None:
            finals[size] = int(peaks.final_allocated_bytes)

        inner = measure_in_process(call, steps, self.index, on_window=keep)

        def measure(size: int) -> tuple[Probe, int]:
            probe = inner(size)
            return probe, finals[size]
        return measure

    @contextlib.contextmanager
    def capped(self, fraction: float, restore: float) -> Iterator[None]:
        """Runs with torch's per-process cap at ``fraction`` of the device (a raised cap run
        before it is advised), then sets it to ``restore``: the cap it had, as the OOM's
        evidence read it."""
        torch = sys.modules["torch"]
        torch.cuda.set_per_process_memory_fraction(fraction, self.index)
        try:
            yield
        finally:
            torch.cuda.set_per_process_memory_fraction(restore, self.index)

    def free(self) -> None:
        """Lets go of what nothing holds any more, back to the driver."""
        gc.collect()
        sys.modules["torch"].cuda.empty_cache()

    def selected(self) -> Any:
        """The context that makes this device the current one."""
        return sys.modules["torch"].cuda.device(self.index)

    def step_peak(self) -> tuple[int, int]:
        """(peak, now) of allocated bytes since the agent's last step boundary: the failed
        step's own peak when the OOM came before its end (closes that step)."""
        torch = sys.modules["torch"]
        from .._core.session import SESSION

        for r in SESSION.step_all():
            if int(r["device"]) == self.index:
                return int(r["peak_allocated_bytes"]), int(torch.cuda.memory_allocated(self.index))
        raise RuntimeError(f"the agent returned no step record for cuda:{self.index}")


def fit(step: Callable[..., Any], budget: Any = None, *, margin: float = DEFAULT_MARGIN,
        over: str = "batch_size", seq_len: int | None = None, batch_size: int | None = None,
        quadratic: bool | None = None, start: int | None = None, limit: int | None = None,
        multiple: int | None = None, steps: int = 2, device: int | None = None,
        max_probes: int = 8, group: Any = None, restore: Sequence[Any] = (),
        on: Any = None) -> FitResult:
    """The largest batch (``over="batch_size"``, the default) or sequence length
    (``over="seq_len"``) at which ``step`` fits ``budget`` with ``margin``.

    ``step(batch_size)`` runs one training step; with ``seq_len=S`` it is called as
    ``step(batch_size, S)``; with ``over="seq_len"`` as ``step(batch_size, seq_len)`` at the
    given ``batch_size``. ``budget``: "card" (default), "cap", a size ("12 GiB", bytes) or a
    fraction of the device. ``margin``: the share of the budget kept free. ``quadratic``: fit a
    term in the size squared (default: for ``seq_len``, where attention can be quadratic).
    ``start``: the first size probed (1 for a batch, 32 for a sequence). ``limit``: never
    answer above it (the dataset's size); ``multiple``: round the answer down to it.
    ``steps``: steps per probe (the first step of a run allocates the optimizer's state).
    ``group``: the process group whose ranks agree on the smallest answer (default: the job).
    ``restore``: objects with ``state_dict``/``load_state_dict`` (the model, the optimizer)
    whose state is copied to the host before the probes and loaded back after them: the probe
    steps are real steps and change the weights. ``on``: where the probes run (a CudaDevice
    of ``device`` by default; the tests give a synthetic allocator).
    """

    if over not in ("batch_size", "seq_len"):
        raise ValueError(f"vramscope: over must be 'batch_size' or 'seq_len', got {over!r}")
    if steps < 1:
        raise ValueError("vramscope: steps must be at least 1")
    if over == "seq_len":
        if batch_size is None:
            raise ValueError("vramscope: over='seq_len' needs batch_size= (the batch it runs at)")
        fixed_batch = batch_size

        def call(size: int) -> Any:
            return step(fixed_batch, size)
        unit, quad, first = "token", True if quadratic is None else quadratic, start or 32
    else:
        if seq_len is not None:
            fixed_seq = seq_len

            def call(size: int) -> Any:
                return step(size, fixed_seq)
        else:
            call = step
        unit, quad, first = "sample", bool(quadratic), start or 1
    if on is None:
        import torch

        SESSION.attach(init_cuda=True)
        on = CudaDevice(torch.cuda.current_device() if device is None else int(device))
    chosen: Budget = resolve_budget(budget, on.memory())
    saved = [(obj, _host_copy(obj.state_dict())) for obj in restore]
    window = on.window(call, steps)
    try:
        result = search(lambda size: window(size)[0], chosen.bytes, margin=margin,
                        start=first, limit=limit, multiple=multiple, quadratic=quad,
                        max_probes=max_probes, unit=unit, what=over,
                        retries=allocator_retries())
    finally:
        for obj, state in saved:
            obj.load_state_dict(state)
    on.free()
    agreed = agree_min(result.size, group)
    if agreed != result.size:
        prediction = result.model.predict(agreed) if result.model is not None and agreed else None
        result = dataclasses.replace(result, size=agreed, prediction=prediction,
                                     reason=result.reason + f"; another rank's answer, {agreed}, "
                                     "is the smallest")
    return dataclasses.replace(result, budget_source=chosen.source)
