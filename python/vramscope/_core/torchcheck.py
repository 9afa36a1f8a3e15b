# python/vramscope/_core/torchcheck.py -- find torch; one line when torch or the agent does not fit
"""Every way the agent can be unusable, each with one clear line.

torch missing -> ImportError; torch without CUDA or no visible GPU -> RuntimeError from attach()
(the readers then answer like torch.cuda: zeros); a torch the package carries no library for
and no C++ compiler to build one (or a failed build) -> a one-time warning and the polling
fallback, because loading C++ compiled against other allocator struct layouts would be unsafe.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
import warnings
from types import ModuleType

from . import torchlib_build as _torchlib

#: Message of the ImportError raised when torch is not installed.
TORCH_MISSING = "vramscope's agent needs PyTorch: pip install torch"


class VramscopeWarning(UserWarning):
    """Something in vramscope degraded (for example to polling); the program keeps running."""


def import_torch() -> ModuleType:
    """Returns the torch module, or raises ImportError with one actionable line."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(TORCH_MISSING) from e
    return torch


def cuda_problem(torch: ModuleType) -> str | None:
    """Why this torch cannot use a CUDA GPU (one line, starting "vramscope: "), or None."""
    if getattr(torch.version, "cuda", None) is None:
        return (f"vramscope: this PyTorch build ({torch.__version__}) has no CUDA support; "
                "install a CUDA build of torch")
    if not torch.cuda.is_available():
        return "vramscope: no CUDA GPU is visible to PyTorch (torch.cuda.is_available() is False)"
    return None


def check_cuda(torch: ModuleType) -> None:
    """Raises RuntimeError (one line) unless this torch can use a CUDA GPU."""
    problem = cuda_problem(torch)
    if problem is not None:
        raise RuntimeError(problem)


def major_minor(version: str) -> tuple[int, int] | None:
    """``"2.11.0+cu130"`` -> ``(2, 11)``; None when the string is not a version."""
    m = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def agent_version_problem(torch_version: str, built_for: str) -> str | None:
    """Why a torch-facing library built against torch ``built_for`` must not run under
    ``torch_version``, or None when both have the same major.minor."""
    loaded, built = major_minor(torch_version), major_minor(built_for)
    if loaded is not None and loaded == built:
        return None
    return (f"the agent was built for torch {built_for} but torch {torch_version} is loaded; "
            "install a vramscope built for it, or build one: `pip install --no-build-isolation "
            "--no-binary vramscope --force-reinstall vramscope`")


def carried_library(torch_version: str, cxx11_abi: bool) -> pathlib.Path | None:
    """The torch-facing library the package carries for this torch, or None: one built for
    the same minor version of a release (the wheel's libraries are built against PyPI's
    releases, with the C++11 ABI). A nightly or a source build of the same minor version may
    have other allocator structs: it gets a library compiled for it."""
    try:
        build_info = importlib.import_module("vramscope._build_info")
    except ImportError:
        return None
    if not cxx11_abi or not _torchlib.is_release(torch_version):
        return None
    for built, name in dict(build_info.TORCH_LIBRARIES).items():
        if agent_version_problem(torch_version, built) is None:
            path = _torchlib.package_dir() / "_torch" / name
            return path if path.is_file() else None
    return None


def bench_hooks() -> bool:
    """Were the extension's benchmark hooks compiled in (a library compiled here must agree)?"""
    try:
        return bool(importlib.import_module("vramscope._build_info").BENCH_HOOKS)
    except ImportError:
        return False


def find_library(torch: ModuleType) -> tuple[pathlib.Path | None, str | None]:
    """The torch-facing library for the imported ``torch``: the one the package carries for
    its minor version, else one compiled for it on first use (cached per torch build).
    Returns ``(path, None)`` or ``(None, reason)``."""
    cxx11_abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    # The carried libraries are built without the benchmark hooks (which change the tracker's
    # structs): an extension with them always gets a library compiled for it.
    carried = None if bench_hooks() else carried_library(torch.__version__, cxx11_abi)
    if carried is not None:
        return carried, None
    return _torchlib.compiled_library(torch, cxx11_abi, bench_hooks())


_warned = False


def warn_polling_once(reason: str) -> None:
    """The one warning of a process that falls back to polling."""
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        f"vramscope: {reason}. Falling back to polling torch.cuda.memory_stats "
        "(slower; peaks are sampled, not exact).",
        VramscopeWarning,
        stacklevel=3,
    )


def oom_in_chain(exc: BaseException | None) -> BaseException | None:
    """``exc`` when it is a CUDA out-of-memory error, else the one it was raised from (``raise
    Wrapper(...) from oom``: a framework or a program that wraps the OOM in its own error),
    following ``__cause__`` a few links; None without one. Not ``__context__``: an error
    raised while an OOM was being handled is that program's own failure."""
    for _ in range(8):
        if exc is None:
            return None
        if is_oom_error(exc):
            return exc
        exc = exc.__cause__
    return None


def is_oom_error(exc: BaseException) -> bool:
    """Is ``exc`` a CUDA out-of-memory error (torch.OutOfMemoryError, or a RuntimeError that
    says so)? Does not import torch. Here, below every room, because the post-mortem and the
    memory model's probes (predict/) both ask."""
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc) if isinstance(exc, RuntimeError) else ""
    return "CUDA out of memory" in text or "CUDA error: out of memory" in text
