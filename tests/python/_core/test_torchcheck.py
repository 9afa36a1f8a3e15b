# tests/python/_core/test_torchcheck.py -- the agent/torch version rule and the fallback reasons
import pytest
import torch

from vramscope._core import torchcheck as _torchcheck
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


def test_the_recorded_version_is_checked_before_the_extension_loads(monkeypatch):
    # A wheel built for another torch minor: the extension must not even be loaded.
    import sys
    import types

    monkeypatch.setitem(sys.modules, "vramscope._build_info",
                        types.SimpleNamespace(TORCH_VERSION="1.0.0", TORCH_CXX11_ABI=1))
    monkeypatch.delitem(sys.modules, "vramscope._agent", raising=False)
    module, reason = load_agent(torch)
    assert module is None
    assert f"built for torch 1.0.0 but torch {torch.__version__} is loaded" in reason
    assert "vramscope._agent" not in sys.modules


def test_polling_warning_is_issued_once():
    with pytest.warns(_torchcheck.VramscopeWarning, match="Falling back to polling"):
        _torchcheck._warned = False
        _torchcheck.warn_polling_once("reason one")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _torchcheck.warn_polling_once("reason two")
