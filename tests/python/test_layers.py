# tests/python/test_layers.py -- the Python rooms: no upward import, one importer of the extension
"""The Python counterpart of tests/cpp/layers: every import of every module of the package is
resolved to the module it loads -- import statements at module level and inside functions, and
the dynamic forms: ``importlib.import_module(name[, package])``, ``__import__(name, ..., level)``
and ``sys.modules[name]`` (``.get(name)`` too) -- and the rules of docs/architecture.md are
checked:

1. rooms import only their own room or lower ones:
   ``_core < attribution < steps < predict < postmortem < integrations < the face`` (the face:
   the package's own modules, ``vramscope/*.py``);
2. no module imports the package by name (``import vramscope``, ``from vramscope import``):
   inside the package every import is relative, so that what a module depends on shows in the
   path;
3. only ``_core/session.py`` imports the agent extension (``vramscope._agent``); everyone else
   reaches it through the session;
4. a dynamic import names its module with constants (a computed name, package or level cannot be
   checked, so it is refused).

The checker runs on the package itself, and on copies with one planted violation each, so a
checker that lets everything through fails here too. ``tools/lint.sh``'s pre-commit hook runs
this file (0.3 s).
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import shutil
import sys

import pytest

#: The package under test, found without importing it (the pre-commit hook runs this file as a
#: script: PYTHONPATH=python python tests/python/test_layers.py).
PACKAGE = pathlib.Path(importlib.util.find_spec("vramscope").origin).resolve().parent

#: The rooms, lowest first; a module outside them is the face, above every room.
ROOMS = ("_core", "attribution", "steps", "predict", "postmortem", "integrations")
FACE_RANK = len(ROOMS)
#: Old paths of moved code, kept as thin re-exports for one release, and that release: they
#: rank as the face (their import points up at the code's new room) until they go.
DEPRECATED = {"vramscope.predict.lightning": "0.2.0", "vramscope.predict.transformers": "0.2.0"}
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
    if module in DEPRECATED:
        return FACE_RANK
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


#: What imports_of() reports for an import whose module it cannot name.
UNRESOLVED = "<computed>"


def _constant(node: ast.AST | None) -> object:
    """The value of a constant node; UNRESOLVED for anything computed (a missing node: None)."""
    if node is None:
        return None
    return node.value if isinstance(node, ast.Constant) else UNRESOLVED


def _argument(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _relative(here: list[str], level: int, name: str) -> str:
    """The absolute name of ``from <level dots><name>`` in the package ``here``."""
    base = here[:len(here) - level + 1]
    return ".".join(base + ([name] if name else []))


def _is_sys_modules(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules" and \
        isinstance(node.value, ast.Name) and node.value.id == "sys"


def _dynamic_target(node: ast.AST, this: str, here: list[str]) -> tuple[str, bool] | None:
    """(the module a dynamic import in ``node`` names, was it named absolutely?): None when
    ``node`` is no dynamic import; the module is UNRESOLVED when its name, package or level is
    computed."""
    if isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
        if isinstance(node.slice, ast.Name) and node.slice.id == "__name__":
            return this, False  # the module itself
        name = _constant(node.slice)
        return (name if isinstance(name, str) else UNRESOLVED), True
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "get" and _is_sys_modules(func.value):
        name = _constant(_argument(node, 0, "key"))
        return (name if isinstance(name, str) else UNRESOLVED), True
    called = getattr(func, "attr", getattr(func, "id", ""))
    if called == "import_module":
        name = _constant(_argument(node, 0, "name"))
        if not isinstance(name, str):
            return UNRESOLVED, False
        if not name.startswith("."):
            return name, True
        stripped = name.lstrip(".")
        level = len(name) - len(stripped)
        package = _argument(node, 1, "package")
        if isinstance(package, ast.Name) and package.id == "__package__":
            return _relative(here, level, stripped), False
        package_name = _constant(package)
        if not isinstance(package_name, str):
            return UNRESOLVED, False
        return _relative(package_name.split("."), level, stripped), False
    if called == "__import__":
        name = _constant(_argument(node, 0, "name"))
        level = _constant(_argument(node, 4, "level")) or 0
        if not isinstance(name, str) or not isinstance(level, int):
            return UNRESOLVED, False
        return (_relative(here, level, name), False) if level else (name, True)
    return None


def imports_of(package: pathlib.Path, path: pathlib.Path) -> list[tuple[int, str, bool]]:
    """(line, module loaded, was it named absolutely?) of every import in ``path``; the module
    is UNRESOLVED for a dynamic import whose name is computed."""
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
                target = _relative(here, node.level, node.module or "")
                absolute = False
            else:
                target = node.module or ""
                absolute = True
            if target.split(".")[0] != "vramscope":
                continue
            # `from pkg import name` loads pkg.name when that is a module, else pkg alone.
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((node.lineno, sub if _is_module(package, sub) else target, absolute))
        else:
            dynamic = _dynamic_target(node, this, here)
            if dynamic is not None and (dynamic[0] == UNRESOLVED
                                        or dynamic[0].split(".")[0] == "vramscope"):
                out.append((node.lineno, *dynamic))
    return out


def violations(package: pathlib.Path) -> list[str]:
    """Every broken rule in the package at ``package``, one line each."""
    found = []
    for path in sorted(package.rglob("*.py")):
        this = module_name(package, path)
        where = f"{path.relative_to(package)}"
        for line, target, absolute in imports_of(package, path):
            if target == UNRESOLVED:
                found.append(f"{where}:{line}: a dynamic import of a computed name (the rooms "
                             "cannot be checked); name the module with constants")
                continue
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


# ----- the dynamic forms: each resolved when its names are constants, refused when computed

def test_an_upward_import_module_fails_absolute_or_relative(package_copy):
    _plant(package_copy, "_core/units.py",
           "import importlib\nlate = importlib.import_module('vramscope.steps.records')")
    found = _new(package_copy)
    assert any("_core imports vramscope.steps.records (steps, a higher room)" in v for v in found)
    assert any("imports vramscope.steps.records by the package's name" in v for v in found)
    _plant(package_copy, "attribution/categories.py",
           "import importlib\nlate = importlib.import_module('..predict.fit', __package__)")
    assert any(v.startswith("attribution/categories.py:") and
               "attribution imports vramscope.predict.fit (predict, a higher room)" in v
               for v in _new(package_copy))


def test_a_computed_import_module_name_fails(package_copy):
    _plant(package_copy, "steps/records.py",
           "def late(name):\n    import importlib\n    return importlib.import_module(name)")
    (found,) = _new(package_copy)
    assert found.startswith("steps/records.py:") and "a dynamic import of a computed name" in found


def test_sys_modules_of_a_higher_room_or_a_computed_name_fails(package_copy):
    _plant(package_copy, "steps/pipeline.py",
           "import sys\ndef late():\n    return sys.modules['vramscope.postmortem.oom']")
    assert any(v.startswith("steps/pipeline.py:") and
               "steps imports vramscope.postmortem.oom (postmortem, a higher room)" in v
               for v in _new(package_copy))
    copy2 = package_copy.parent / "copy2"
    shutil.copytree(package_copy.parent / "vramscope", copy2 / "vramscope",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    _plant(copy2 / "vramscope", "_core/device.py",
           "import sys\ndef late(name):\n    return sys.modules.get('vramscope.' + name)")
    assert any(v.startswith("_core/device.py:") and "a dynamic import of a computed name" in v
               for v in violations(copy2 / "vramscope"))


def test_dunder_import_with_a_level_fails_upward_or_computed(package_copy):
    _plant(package_copy, "steps/records.py",
           "late = __import__('postmortem.oom', globals(), None, ['x'], 2)")
    (found,) = _new(package_copy)
    assert "steps imports vramscope.postmortem.oom (postmortem, a higher room)" in found
    _plant(package_copy, "_core/units.py",
           "def late(n):\n    return __import__('steps', globals(), None, ['x'], n)")
    assert any(v.startswith("_core/units.py:") and "a dynamic import of a computed name" in v
               for v in _new(package_copy))


def test_the_old_paths_are_the_only_upward_imports_allowed(package_copy):
    # A deprecated re-export may point up (it ranks as the face); any other module of its room
    # may not.
    for module in DEPRECATED:
        assert _is_module(PACKAGE, module), module
    _plant(package_copy, "predict/budget.py", "from ..integrations import common")
    (found,) = _new(package_copy)
    assert "predict imports vramscope.integrations.common (integrations, a higher room)" in found


def main() -> int:
    """The check alone, without pytest (tools/lint.sh --only py-layers): the violations of the
    package on the import path, one a line; exit 1 when there is one."""
    found = violations(PACKAGE)
    for line in found:
        print(f"{PACKAGE.name}/{line}")
    print(f"python rooms: {len(found)} violations in {PACKAGE}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
