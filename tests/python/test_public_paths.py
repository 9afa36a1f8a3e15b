# tests/python/test_public_paths.py -- the import paths programs and docs use still work
"""The code lives in rooms (vramscope._core, .attribution, .steps, .postmortem); the paths that
programs, docs and the CLI use stay those of the face."""
from __future__ import annotations

import importlib

import pytest

import vramscope

#: Public module -> names that programs and docs take from it.
PUBLIC = {
    "vramscope": ["Monitor", "StepRecord", "CategoryTracker", "profile", "attach", "mode",
                  "memory_allocated", "VramscopeWarning", "show", "load_ipython_extension"],
    "vramscope.monitor": ["Monitor", "StepSink"],
    "vramscope.oom": ["last_report", "report_exception", "observer_calls", "add_provider",
                      "remove_provider", "OomEvidence", "StepPoint"],
    "vramscope.profile": ["profile", "Profile", "CategoryTracker", "format_op_table", "OpRow"],
    "vramscope.tensorboard": ["TensorBoardSink", "open_writer"],
    "vramscope.distributed": ["reduce_step_peaks", "resolve_rank", "PEAK_FIELDS"],
    "vramscope.integrations": ["KEYS"],
    "vramscope.run": ["main", "parse_args"],  # `python -m vramscope.run`, which the CLI execs
    "vramscope.pytest_plugin": [],  # the pytest11 entry point
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_module_imports_with_its_names(name):
    module = importlib.import_module(name)
    assert [attr for attr in PUBLIC[name] if not hasattr(module, attr)] == []


def test_importing_the_profile_module_leaves_the_profile_function():
    # The package binds vramscope.profile to the function after loading the module of that
    # name; a later import of the module must not rebind it.
    importlib.import_module("vramscope.profile")
    from vramscope.profile import profile  # noqa: F401

    assert callable(vramscope.profile) and not isinstance(vramscope.profile, type(vramscope))


@pytest.mark.parametrize("framework, name", [("lightning.pytorch", "lightning"),
                                             ("transformers", "transformers")])
def test_framework_callbacks_import_from_their_public_paths(framework, name):
    pytest.importorskip(framework)
    module = importlib.import_module(f"vramscope.integrations.{name}")
    assert module.VramscopeCallback.__name__ == "VramscopeCallback"
    assert module.KEYS == vramscope.integrations.KEYS
