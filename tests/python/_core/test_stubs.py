# tests/python/_core/test_stubs.py -- the _agent.pyi stub, the extension and the polling fallback agree
#
# The polling fallback must answer every call the extension answers (the API swaps one for the
# other), and the stub must describe the extension exactly once it is built.
import ast
import importlib
import pathlib
import re
import shutil
import subprocess
import types

import pytest

import vramscope
from vramscope._core.polling import PollingReader

STUB = pathlib.Path(vramscope.__file__).with_name("_agent.pyi")
# Functions of the extension that only make sense for the real agent.
AGENT_ONLY = {"attach", "is_attached", "segment_path", "torch_version", "load_torch", "recent_events",
              "allocator_backend",
              # Attribution and the OOM post-mortem need the allocator's trace events, which the
              # polling fallback does not have.
              "profile_start", "profile_stop", "attribution_acquire", "attribution_release",
              "attribution_active", "attribution_summary", "op_table", "categories", "tag",
              "set_phase", "restart_attribution_peak", "segments", "set_oom_callback", "oom_snapshot",
              "oom_snapshot_now",
              "module_enter", "module_exit", "module_table", "live_by_owner", "note_oom",
              "step_categories",
              # NVML's view of this process: Monitor asks for it only when the agent is there.
              "driver_process_bytes", "driver_probe_error",
              # The settled pairing needs the segment events (events mode only).
              "driver_breakdown", "set_nccl",
              # The TensorBoard tag scheme of the exporter, not a reader call.
              "tensorboard_step_scalars",
              # What the polling fallback publishes through (the session calls them).
              "polling_segment_open", "polling_segment_publish", "polling_segment_set_rank",
              "polling_segment_close"}


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


# stats()'s keys exist once, as the C++ table device_stats_fields (the extension builds stats()
# from it and exports its names as _device_stats_fields); the stub, docs/agent-api.md and the
# polling fallback are held to it here.
AGENT_API_DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "agent-api.md"


def stub_stats_keys() -> list[str]:
    doc = ast.get_docstring(stub_functions()["stats"])
    assert doc is not None and "by:" in doc, "the stub's stats() docstring lists its keys"
    return doc.split("by:", 1)[1].split()


def doc_stats_keys() -> list[str]:
    """The keys of docs/agent-api.md's "`stats(d)` keys:" paragraph, braces expanded
    (`peak_{allocated,reserved,requested}_bytes`; `{…}` repeats the braces before it)."""
    text = AGENT_API_DOC.read_text()
    paragraph = text.split("`stats(d)` keys:", 1)[1].split("\n\n", 1)[0]
    keys: list[str] = []
    choices: list[str] = []
    for span in re.findall(r"`([^`]+)`", paragraph):
        for word in span.split():
            match = re.fullmatch(r"([a-z_]*)\{([^}]*)\}([a-z_]*)", word)
            if match is None:
                keys.append(word)
                continue
            if match.group(2) != "…":
                choices = match.group(2).split(",")
            keys += [match.group(1) + choice + match.group(3) for choice in choices]
    return keys


def test_the_docs_list_the_stats_keys_of_the_stub():
    assert doc_stats_keys() == stub_stats_keys()


def test_the_polling_fallback_answers_stats_with_agent_keys():
    # torch stands in as a namespace: the reader needs only these three calls of torch.cuda.
    cuda = types.SimpleNamespace(device_count=lambda: 1, memory_stats=lambda device: {},
                                 empty_cache=lambda: None)
    reader = PollingReader(types.SimpleNamespace(cuda=cuda), "test")
    keys = set(reader.stats(0))
    assert keys <= set(stub_stats_keys()), sorted(keys - set(stub_stats_keys()))
    assert {"allocated_bytes", "peak_allocated_bytes", "step", "polling_only"} <= keys


def test_the_stub_lists_the_stats_keys_of_the_built_extension():
    pytest.importorskip("torch")  # the extension binds to the libc10 torch loaded first
    agent = pytest.importorskip("vramscope._agent", reason="the agent extension is not built")
    assert list(agent._device_stats_fields) == stub_stats_keys()
