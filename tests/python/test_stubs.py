# tests/python/test_stubs.py -- the _agent.pyi stub, the extension and the polling fallback agree
#
# The polling fallback must answer every call the extension answers (the API swaps one for the
# other), and the stub must describe the extension exactly once it is built.
import ast
import importlib
import pathlib
import shutil
import subprocess

import pytest

import vramscope
from vramscope._polling import PollingReader

STUB = pathlib.Path(vramscope.__file__).with_name("_agent.pyi")
# Functions of the extension that only make sense for the real agent.
AGENT_ONLY = {"attach", "is_attached", "segment_path", "torch_version", "load_torch", "recent_events",
              "allocator_backend",
              # Attribution and the OOM post-mortem need the allocator's trace events, which the
              # polling fallback does not have.
              "profile_start", "profile_stop", "attribution_acquire", "attribution_release",
              "attribution_active", "attribution_summary", "op_table", "categories", "tag",
              "set_phase", "restart_attribution_peak", "segments", "set_oom_callback", "oom_snapshot",
              "module_enter", "module_exit", "module_table", "live_by_owner", "note_oom",
              "step_categories",
              # NVML's view of this process: Monitor asks for it only when the agent is there.
              "driver_process_bytes", "driver_probe_error"}


def stub_functions():
    tree = ast.parse(STUB.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def stub_classes():
    tree = ast.parse(STUB.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def test_stub_lists_the_contract():
    names = set(stub_functions())
    assert {"attach", "memory_allocated", "memory_reserved", "memory_requested", "step",
            "stats", "empty_cache", "reset_peak", "torch_version"} <= names


def test_polling_reader_answers_every_agent_call():
    for name, node in stub_functions().items():
        if name in AGENT_ONLY:
            continue
        assert hasattr(PollingReader, name), f"PollingReader lacks {name}"
        stub_args = [a.arg for a in node.args.args]
        impl_args = PollingReader.__dict__[name].__code__.co_varnames[1:1 + len(stub_args)]
        assert list(impl_args) == stub_args, name


def test_stub_matches_the_built_extension():
    pytest.importorskip("torch")  # the extension binds to the libc10 torch loaded first
    agent = pytest.importorskip("vramscope._agent", reason="the agent extension is not built")
    public = {n for n in dir(agent) if not n.startswith("_")}
    assert public == set(stub_functions()) | set(stub_classes())
    for name, node in stub_classes().items():
        members = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        built = {n for n in dir(getattr(agent, name)) if not n.startswith("_")}
        assert members - {"__init__"} == built, name


def test_a_built_extension_imports():
    """The agent's share of the core is listed file by file (agent/CMakeLists.txt): a file left
    out links (a module may have undefined symbols) and then fails to load. That must fail here
    rather than skip every test that needs the extension."""
    pytest.importorskip("torch")  # the extension binds to the libc10 torch loaded first
    package = pathlib.Path(vramscope.__file__).parent
    if not list(package.glob("_agent*.so")):
        pytest.skip("the agent extension is not built")
    importlib.import_module("vramscope._agent")  # ImportError names a missing symbol



def test_the_extension_exports_only_its_entry_point():
    """Every exported function of a shared library is interposable, so calls to it from inside
    the library go through the PLT; the tracker's hot path once made two such calls per
    allocator event (agent/CMakeLists.txt). The core's symbols must stay hidden."""
    package = pathlib.Path(vramscope.__file__).parent
    built = list(package.glob("_agent*.so"))
    if not built:
        pytest.skip("the agent extension is not built")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("binutils' nm is not installed")
    listing = subprocess.run([nm, "-D", "-C", "--defined-only", str(built[0])],
                             capture_output=True, text=True, check=True).stdout
    exported = [line.split(maxsplit=2)[2] for line in listing.splitlines()
                if len(line.split(maxsplit=2)) == 3]
    assert "PyInit__agent" in exported
    # (Instantiations of std templates over our types keep libstdc++'s default visibility.)
    ours = [name for name in exported if name.startswith("vramscope::")]
    assert ours == [], f"vramscope symbols exported from {built[0].name}: {ours[:5]}"
