# tests/python/test_public_paths.py -- the import paths programs and docs use still work
"""The code lives in rooms (vramscope._core, .attribution, .steps, .predict, .postmortem,
.integrations); the paths that programs, docs and the CLI use stay those of the face, and the
frameworks' room is its own public path (``vramscope.integrations.*``). Old paths of moved code
keep working for one release (test_layers.DEPRECATED)."""
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


#: Each framework's module: its callback and its fit adapter, and the old path of the adapter.
FRAMEWORKS = [("lightning.pytorch", "lightning", "FitBatchSize"),
              ("transformers", "transformers", "fit_trainer")]


@pytest.mark.parametrize("framework, name, adapter", FRAMEWORKS)
def test_framework_callbacks_and_adapters_import_from_one_public_path(framework, name, adapter):
    pytest.importorskip(framework)
    import vramscope.integrations

    module = importlib.import_module(f"vramscope.integrations.{name}")
    assert module.VramscopeCallback.__name__ == "VramscopeCallback"
    assert getattr(module, adapter).__name__ == adapter
    assert module.KEYS == vramscope.integrations.KEYS


@pytest.mark.parametrize("framework, name, adapter", FRAMEWORKS)
def test_the_adapters_old_paths_still_work_for_one_release(framework, name, adapter):
    pytest.importorskip(framework)
    old = importlib.import_module(f"vramscope.predict.{name}")
    new = importlib.import_module(f"vramscope.integrations.{name}")
    assert getattr(old, adapter) is getattr(new, adapter)
