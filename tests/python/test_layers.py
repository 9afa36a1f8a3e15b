# tests/python/test_layers.py -- the Python rooms: no upward import, one importer of the extension
"""The Python counterpart of tests/cpp/layers: every import statement of every module of the
package (module level and inside functions, ``importlib.import_module("vramscope...")`` too)
is resolved to the module it loads, and the rules of docs/architecture.md are checked:

1. rooms import only their own room or lower ones:
   ``_core < attribution < steps < predict < postmortem < the face`` (the face: the package's
   own modules, ``vramscope/*.py`` and ``vramscope/integrations/``);
2. no module imports the package by name (``import vramscope``, ``from vramscope import``):
   inside the package every import is relative, so that what a module depends on shows in the
   path;
3. only ``_core/session.py`` imports the agent extension (``vramscope._agent``); everyone else
   reaches it through the session.

The checker runs on the package itself, and on copies with one planted violation each, so a
checker that lets everything through fails here too.
"""

from __future__ import annotations

import ast
import pathlib
import shutil

import pytest

import vramscope

PACKAGE = pathlib.Path(vramscope.__file__).resolve().parent

#: The rooms, lowest first; a module outside them is the face, above every room.
ROOMS = ("_core", "attribution", "steps", "predict", "postmortem")
FACE_RANK = len(ROOMS)
#: Modules the build writes beside the package's sources, below every room: the extension
#: (the session alone imports it) and the build's facts (torch version) that it reads first.
EXTENSION = "vramscope._agent"
BUILD_INFO = "vramscope._build_info"
#: The one module allowed to import EXTENSION.
EXTENSION_IMPORTER = "vramscope._core.session"


def module_name(package: pathlib.Path, path: pathlib.Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["vramscope", *parts])


def room_rank(module: str) -> int:
    parts = module.split(".")
    if module in (EXTENSION, BUILD_INFO):
        return -1
    if len(parts) > 1 and parts[1] in ROOMS:
        return ROOMS.index(parts[1])
    return FACE_RANK


def room_name(module: str) -> str:
    rank = room_rank(module)
    return "the face" if rank == FACE_RANK else ROOMS[rank] if rank >= 0 else "the build"


def _is_module(package: pathlib.Path, module: str) -> bool:
    rel = pathlib.Path(*module.split(".")[1:])
    return (package / rel).with_suffix(".py").is_file() or (package / rel / "__init__.py").is_file() \
        or module in (EXTENSION, BUILD_INFO)


def imports_of(package: pathlib.Path, path: pathlib.Path) -> list[tuple[int, str, bool]]:
    """(line, module loaded, was it named absolutely?) of every import in ``path``."""
    this = module_name(package, path)
    is_init = path.name == "__init__.py"
    here = this.split(".") if is_init else this.split(".")[:-1]
    out: list[tuple[int, str, bool]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, True) for a in node.names
                    if a.name.split(".")[0] == "vramscope"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                absolute = False
            else:
                base = []
                absolute = True
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] != "vramscope":
                continue
            # `from pkg import name` loads pkg.name when that is a module, else pkg alone.
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((node.lineno, sub if _is_module(package, sub) else target, absolute))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                in ("import_module", "__import__") and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) and \
                node.args[0].value.split(".")[0] == "vramscope":
            out.append((node.lineno, node.args[0].value, True))
    return out


def violations(package: pathlib.Path) -> list[str]:
    """Every broken rule in the package at ``package``, one line each."""
    found = []
    for path in sorted(package.rglob("*.py")):
        this = module_name(package, path)
        where = f"{path.relative_to(package)}"
        for line, target, absolute in imports_of(package, path):
            if target == EXTENSION:
                if this != EXTENSION_IMPORTER:
                    found.append(f"{where}:{line}: imports the extension ({EXTENSION}); only "
                                 f"{EXTENSION_IMPORTER} may")
                continue
            if absolute and target != BUILD_INFO:
                found.append(f"{where}:{line}: imports {target} by the package's name; "
                             "use a relative import")
            if room_rank(target) > room_rank(this):
                found.append(f"{where}:{line}: {room_name(this)} imports {target} "
                             f"({room_name(target)}, a higher room)")
    return found


def test_the_package_keeps_the_import_rule():
    assert violations(PACKAGE) == []


def test_every_room_exists_as_a_package():
    for room in ROOMS:
        assert (PACKAGE / room / "__init__.py").is_file(), room


# ----- the checker must be able to fail: a copy of the package with one planted violation

@pytest.fixture
def package_copy(tmp_path):
    copy = tmp_path / "vramscope"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return copy


def _plant(copy: pathlib.Path, rel: str, code: str) -> None:
    path = copy / rel
    path.write_text(path.read_text(encoding="utf-8") + "\n" + code + "\n", encoding="utf-8")


def _new(copy: pathlib.Path) -> list[str]:
    assert violations(PACKAGE) == []
    return violations(copy)


def test_an_upward_import_fails(package_copy):
    _plant(package_copy, "_core/units.py", "from ..steps.records import StepRecord")
    assert _new(package_copy) == [
        "_core/units.py:" + str(len((package_copy / "_core/units.py").read_text().splitlines()))
        + ": _core imports vramscope.steps.records (steps, a higher room)"]


def test_an_upward_import_inside_a_function_fails(package_copy):
    _plant(package_copy, "attribution/categories.py",
           "def late():\n    from ..postmortem import oom\n    return oom")
    (found,) = _new(package_copy)
    assert "attribution imports vramscope.postmortem.oom (postmortem, a higher room)" in found


def test_a_room_importing_the_face_fails(package_copy):
    _plant(package_copy, "steps/records.py", "from .. import _api")
    (found,) = _new(package_copy)
    assert "steps imports vramscope._api (the face, a higher room)" in found


def test_importing_the_package_by_name_fails(package_copy):
    _plant(package_copy, "_core/units.py", "import vramscope._core.device")
    (found,) = _new(package_copy)
    assert "imports vramscope._core.device by the package's name" in found
    _plant(package_copy, "run.py", "def f():\n    import vramscope\n    return vramscope")
    assert any("run.py" in v and "by the package's name" in v for v in _new(package_copy))


def test_importing_the_extension_outside_the_session_fails(package_copy):
    _plant(package_copy, "steps/tensorboard.py", "from .. import _agent")
    (found,) = _new(package_copy)
    assert found.startswith("steps/tensorboard.py:") and "imports the extension" in found
    _plant(package_copy, "_core/torchcheck.py",
           "import importlib\nimportlib.import_module('vramscope._agent')")
    assert any(v.startswith("_core/torchcheck.py:") and "imports the extension" in v
               for v in _new(package_copy))


def test_the_session_may_import_the_extension_and_a_room_a_lower_one(package_copy):
    _plant(package_copy, "_core/session.py", "from .. import _agent as _again")
    _plant(package_copy, "postmortem/report.py", "from ..steps.records import StepRecord")
    assert _new(package_copy) == []
