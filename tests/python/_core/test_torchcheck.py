# tests/python/_core/test_torchcheck.py -- the library/torch version rule and the fallback reasons
import pytest
import torch

from vramscope._core import torchcheck as _torchcheck
from vramscope._core import torchlib_build as _torchlib
from vramscope._core.session import load_agent
from vramscope._core.torchcheck import agent_version_problem, major_minor


@pytest.mark.parametrize("text, expected", [
    ("2.11.0+cu130", (2, 11)), ("2.11.0a0+git1234", (2, 11)), ("2.4", (2, 4)),
    ("10.0.1", (10, 0)), ("dev", None), ("", None),
])
def test_major_minor(text, expected):
    assert major_minor(text) == expected


@pytest.mark.parametrize("loaded, built", [
    ("2.11.0+cu130", "2.11.0+cu130"), ("2.11.1", "2.11.0+cu126"), ("2.11.0a0", "2.11.0"),
])
def test_same_minor_is_accepted(loaded, built):
    assert agent_version_problem(loaded, built) is None


@pytest.mark.parametrize("loaded, built", [
    ("2.11.0", "2.10.0"), ("2.10.0", "2.11.0"), ("3.11.0", "2.11.0"), ("2.11.0", "unknown"),
])
def test_other_minor_is_refused_with_the_fix(loaded, built):
    problem = agent_version_problem(loaded, built)
    assert f"built for torch {built} but torch {loaded} is loaded" in problem
    assert "pip install --no-build-isolation --no-binary vramscope --force-reinstall" in problem


def test_load_agent_reports_a_reason_or_a_matching_module():
    module, reason = load_agent(torch)
    if module is None:
        assert reason and "\n" not in reason
    else:
        assert reason is None
        assert major_minor(module.torch_version()) == major_minor(torch.__version__)


@pytest.mark.parametrize("version, release", [
    ("2.11.0", True), ("2.11.0+cu130", True), ("2.15.0+cpu", True),
    ("2.12.0.dev20260101+cu130", False), ("2.11.0a0+git1234", False), ("2.11", False),
])
def test_only_a_release_is_served_by_a_carried_library(version, release):
    assert _torchlib.is_release(version) is release


def test_a_carried_library_serves_its_minor_version_of_a_release_only(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "vramscope._build_info", types.SimpleNamespace(
        TORCH_LIBRARIES={"2.11.0+cu130": "libvramscope_torch_2_11.so"}, BENCH_HOOKS=False))
    for version, abi in (("2.12.0", True), ("2.11.0a0+git1234", True), ("2.11.0", False)):
        assert _torchcheck.carried_library(version, abi) is None


def test_without_a_library_or_a_compiler_the_extension_is_never_loaded(monkeypatch, tmp_path):
    # A torch the package carries no library for, on a machine without a C++ compiler: finding
    # the library comes first, so load_agent gives the reason without importing the extension.
    # (Since the extension holds no torch code, the session then imports it to publish what
    # polling reads: test_polling_segment.py.)
    import sys
    import types

    monkeypatch.setitem(sys.modules, "vramscope._build_info",
                        types.SimpleNamespace(TORCH_LIBRARIES={}, BENCH_HOOKS=False))
    monkeypatch.delitem(sys.modules, "vramscope._agent", raising=False)
    monkeypatch.setenv("VRAMSCOPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CXX", raising=False)
    module, reason = load_agent(torch)
    assert module is None
    assert reason.startswith(("no C++ compiler", "this vramscope carries no agent")), reason
    assert "\n" not in reason
    assert "vramscope._agent" not in sys.modules


def test_polling_warning_is_issued_once():
    with pytest.warns(_torchcheck.VramscopeWarning, match="Falling back to polling"):
        _torchcheck._warned = False
        _torchcheck.warn_polling_once("reason one")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _torchcheck.warn_polling_once("reason two")
