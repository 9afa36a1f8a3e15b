# python/vramscope/attribution/categories.py -- which storages are parameters, gradients, state
"""The walk behind per-category memory: finds the storages of a model's parameters and gradients
and of an optimizer's state, and returns only those that are new since the previous walk.

The agent's ledger tags memory by address, and a tag sticks to an allocation until it is freed,
so each storage needs tagging once. Walking and tagging everything at every step would cost
milliseconds on models with thousands of parameters; this walk costs a few attribute reads per
parameter:

* parameters: tagged once; re-tagged when a parameter's data pointer changes (``model.to()``).
* gradients: ``zero_grad(set_to_none=True)`` frees them and backward makes new ones, often at the
  same address, so a gradient is recognised by identity (a weak reference, which never keeps it
  alive) plus its data pointer, not by address alone.
* optimizer state: re-walked only when the state changes shape (a new state dict, more entries:
  the first step, ``load_state_dict``). Optimizers update their state in place, so its storages
  stay the same; one that replaces its state tensors at every step is not followed.

Parameters added to the model after the first walk are picked up when the optimizer state
changes shape (or by ``refresh()``).
"""

from __future__ import annotations

import collections
import weakref
from typing import Any

__all__ = ["StorageWalker", "Blocks"]

#: {category: {device: [(data_ptr, nbytes), ...]}}
Blocks = dict[str, dict[int, list[tuple[int, int]]]]


def _storage(tensor: Any) -> tuple[int, int, int]:
    """(device, storage data_ptr, storage nbytes): a view is charged its whole storage."""
    storage = tensor.untyped_storage()
    return tensor.device.index or 0, storage.data_ptr(), storage.nbytes()


class StorageWalker:
    """Yields the storages to tag, new ones only (see module docstring). ``cuda_only``: skip
    tensors not on a CUDA device (the default; off only for tests of the walk itself)."""

    def __init__(self, model: Any, optimizer: Any = None, cuda_only: bool = True) -> None:
        self.model = model
        self.optimizer = optimizer
        self.cuda_only = cuda_only
        self._params: list[Any] = []
        #: Per parameter: the data pointer it had when tagged (0: not tagged).
        self._param_ptrs: list[int] = []
        #: Per parameter: (weak reference to the gradient tagged, its data pointer).
        self._grads: list[tuple[Any, int] | None] = []
        self._state_shape: tuple[int, int, int] | None = None
        self.refresh()

    def refresh(self) -> None:
        """Lists the parameters again; the next walk re-tags everything."""
        self._params = list(self.model.parameters())
        self._param_ptrs = [0] * len(self._params)
        self._grads = [None] * len(self._params)
        self._state_shape = None

    def _wanted(self, tensor: Any) -> bool:
        return tensor is not None and (not self.cuda_only or getattr(tensor, "is_cuda", False))

    def _state_fingerprint(self) -> tuple[int, int, int]:
        state = self.optimizer.state
        return id(state), len(state), sum(len(s) for s in state.values())

    def walk(self) -> Blocks:
        """The storages to tag now, by category and device (empty when nothing changed)."""
        out: Blocks = collections.defaultdict(lambda: collections.defaultdict(list))
        if self.optimizer is not None:
            shape = self._state_fingerprint()
            if shape != self._state_shape:
                if self._state_shape is not None:
                    self.refresh()
                self._state_shape = shape
                seen = set()
                for state in self.optimizer.state.values():
                    for value in state.values():
                        if hasattr(value, "untyped_storage") and self._wanted(value):
                            device, ptr, nbytes = _storage(value)
                            if ptr not in seen:
                                seen.add(ptr)
                                out["optimizer_state"][device].append((ptr, nbytes))
        for i, p in enumerate(self._params):
            if not self._wanted(p):
                continue
            ptr = p.data_ptr()
            if ptr != self._param_ptrs[i]:
                self._param_ptrs[i] = ptr
                device, storage_ptr, nbytes = _storage(p)
                out["parameters"][device].append((storage_ptr, nbytes))
            grad = p.grad
            if not self._wanted(grad):
                self._grads[i] = None
                continue
            ptr = grad.data_ptr()
            known = self._grads[i]
            if known is not None and known[0]() is grad and known[1] == ptr:
                continue
            self._grads[i] = (weakref.ref(grad), ptr)
            device, storage_ptr, nbytes = _storage(grad)
            out["gradients"][device].append((storage_ptr, nbytes))
        return {category: dict(by_device) for category, by_device in out.items()}
