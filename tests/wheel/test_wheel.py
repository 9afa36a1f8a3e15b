# tests/wheel/test_wheel.py -- the built wheel, installed with plain pip into a venv with only torch
#
# Run: VRAMSCOPE_WHEEL=dist/vramscope-...whl pytest tests/wheel   (tools/test.sh does, after
# tools/build-wheel.sh). The fresh venv gets torch (and what torch requires, nothing else) by
# linking the distributions of the torch this pytest imports, so no download happens and no
# compiler, CMake, nanobind or scikit-build-core is in it. VRAMSCOPE_BUILD_DIR (a dev build)
# adds the NVML test double; on a machine with a GPU the agent is also checked in events mode.
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

WHEEL = os.environ.get("VRAMSCOPE_WHEEL")
pytestmark = pytest.mark.skipif(not WHEEL, reason="set VRAMSCOPE_WHEEL to a built wheel "
                                                  "(tools/build-wheel.sh prints its path)")
ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_DIR = os.environ.get("VRAMSCOPE_BUILD_DIR")
NVML_DOUBLE = (pathlib.Path(BUILD_DIR).resolve() / "tests/nvml_double/libvramscope_nvml_double.so"
               if BUILD_DIR else None)

#: Shared libraries every Linux has (glibc and the GCC runtime): the only ones the wheel may
#: need from the system.
SYSTEM_LIBRARIES = re.compile(
    r"^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|dl|rt|pthread)\.so\.6|"
    # The sonames before glibc 2.34 merged them into libc (the CLI is linked for 2.28).
    r"libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|"
    r"libstdc\+\+\.so\.6|libgcc_s\.so\.1)$")


def _torch_closure() -> list:
    """The installed distributions of torch and of everything torch requires (markers evaluated
    for this interpreter, extras not taken)."""
    from importlib import metadata

    try:
        from packaging.requirements import Requirement
    except ImportError:  # a bare machine: pip's own copy
        from pip._vendor.packaging.requirements import Requirement

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    installed = {norm(d.metadata["Name"]): d for d in metadata.distributions()}
    todo, seen = ["torch"], {}
    while todo:
        name = norm(todo.pop())
        if name in seen or name not in installed:
            continue
        seen[name] = installed[name]
        for text in installed[name].requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _link_torch(site: pathlib.Path) -> None:
    """Links torch's distributions (packages, modules and .dist-info) into ``site``."""
    for dist in _torch_closure():
        base = pathlib.Path(dist.locate_file(""))
        for rel in dist.files or []:
            top = pathlib.PurePosixPath(rel).parts[0]
            if top in ("..", "__pycache__"):
                continue
            target = site / top
            if not target.exists() and not target.is_symlink():
                target.symlink_to(base / top)


class Venv:
    """The fresh environment with the wheel installed."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.bin = root / "bin"
        self.python = self.bin / "python"
        self.cli = self.bin / "vramscope"
        self.site = pathlib.Path(subprocess.check_output(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
            text=True).strip())

    def env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VRAMSCOPE_", "PYTHON", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra)
        return env

    def run(self, *args: str, cwd=None, **extra: str) -> subprocess.CompletedProcess:
        # Not the checkout: `python -c` puts the working folder on sys.path.
        return subprocess.run([str(a) for a in args], env=self.env(**extra), cwd=cwd or self.root,
                              capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Venv:
    root = tmp_path_factory.mktemp("fresh") / "venv"
    # Without ensurepip (Debian/Ubuntu's python3 lacking python3-venv) the venv gets no pip of
    # its own: this interpreter's pip then installs into it (pip --python).
    own_pip = subprocess.run([sys.executable, "-m", "venv", str(root)]).returncode == 0
    if not own_pip:
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(root)],
                       check=True)
    v = Venv(root)
    _link_torch(v.site)
    # Plain pip, no index: it must install as it is, with nothing to build or download.
    pip = [v.python, "-m", "pip"] if own_pip else [sys.executable, "-m", "pip", "--python",
                                                    v.python]
    out = v.run(*pip, "install", "--no-index", "--only-binary=:all:",
                str(pathlib.Path(WHEEL).resolve()))
    assert out.returncode == 0, out.stdout + out.stderr
    return v


def test_wheel_is_small_and_carries_a_library_per_torch_minor():
    assert os.path.getsize(WHEEL) <= 15 * 1024 * 1024
    with zipfile.ZipFile(WHEEL) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        info = z.read("vramscope/_build_info.py").decode()
    assert any(re.fullmatch(r"vramscope/_agent\.cpython-.*\.so", n) for n in names)
    assert any(n.endswith(".data/scripts/vramscope") for n in names)
    # One torch-facing library per torch minor of tools/torch-versions.txt (or of
    # VRAMSCOPE_TORCH_VERSIONS, which the wheel was built for: the test command builds only the
    # releases its tests load), each listed.
    versions = os.environ.get("VRAMSCOPE_TORCH_VERSIONS", "").split() or [
        line for line in (ROOT / "tools/torch-versions.txt").read_text().splitlines()
        if line and not line.startswith("#")]
    for version in versions:
        major, minor = version.split(".")[:2]
        name = f"libvramscope_torch_{major}_{minor}.so"
        assert f"vramscope/_torch/{name}" in names, name
        assert re.search(rf'"{re.escape(version)}\+\w+": "{name}"', info), info
    # The sources of a compile on first use.
    assert "vramscope/_torchlib_src/agent/torchlib/torch_library.cpp" in names
    # torch is never a dependency: pip must not replace the user's torch.
    assert not re.search(r"^Requires-Dist: torch", meta, re.M)
    # torch's libraries stay out: the agent binds the torch the user imports.
    assert not any(n.startswith(("torch/", "nvidia/")) or "libc10" in n for n in names)


def test_the_venv_has_torch_and_no_build_tools(venv):
    out = venv.run(venv.python, "-c",
                   "import importlib.util as u; print([m for m in ('torch', 'nanobind', "
                   "'scikit_build_core', 'cmake', 'nlohmann_json') if u.find_spec(m)])")
    assert out.stdout.strip() == "['torch']", out.stderr


def test_version_and_help(venv):
    with zipfile.ZipFile(WHEEL) as z:
        version = re.search(r"^Version: (\S+)$", z.read(next(
            n for n in z.namelist() if n.endswith("METADATA"))).decode(), re.M).group(1)
    out = venv.run(venv.cli, "--version")
    assert out.returncode == 0 and version in out.stdout, out.stdout + out.stderr
    out = venv.run(venv.cli, "--help")
    assert out.returncode == 0, out.stderr
    for command in ("top", "watch", "record", "show", "export", "exporter", "run"):
        assert re.search(rf"^\s+{command}\b", out.stdout, re.M), out.stdout


def test_no_driver_is_one_line_and_exit_3(venv):
    out = venv.run(venv.cli, VRAMSCOPE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    assert out.returncode == 3
    assert out.stderr.startswith("vramscope: ") and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(NVML_DOUBLE is None or not NVML_DOUBLE.exists(),
                    reason="set VRAMSCOPE_BUILD_DIR to a dev build (the NVML test double)")
def test_snapshot_and_top_once_on_the_nvml_double(venv):
    env = {"VRAMSCOPE_NVML_LIBRARY": str(NVML_DOUBLE),
           "VRAMSCOPE_NVML_DOUBLE_SCRIPT": str(ROOT / "tests/data/nvml/two_gpus.json")}
    out = venv.run(venv.cli, "--json", **env)
    assert out.returncode == 0, out.stderr
    assert [d["name"] for d in json.loads(out.stdout)["devices"]] == ["NVIDIA H200"] * 2
    out = venv.run(venv.cli, "top", "--once", **env, COLUMNS="120", LINES="30", TERM="xterm")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^0 H200 .* 77.5G/140G", out.stdout, re.M), out.stdout
    assert re.search(r"^1 H200 .* 20.5G/140G", out.stdout, re.M), out.stdout


def test_import_and_the_agent_loads_for_this_torch(venv):
    out = venv.run(venv.python, "-c", (
        "import torch, vramscope\n"
        "from vramscope._core import session, torchcheck\n"
        "agent, problem = session.load_agent(torch)\n"
        "print(vramscope.__version__, problem)\n"
        "print(torchcheck.major_minor(agent.torch_version()) == "
        "torchcheck.major_minor(torch.__version__))\n"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].endswith(" None"), out.stdout
    assert lines[1] == "True", out.stdout
    assert "compiling" not in out.stderr


def test_run_on_a_cpu_script(venv, tmp_path):
    import torch

    script = tmp_path / "cpu_train.py"
    script.write_text("import torch\n"
                      "x = torch.ones(4, requires_grad=True)\n"
                      "(x * 2).sum().backward()\n"
                      "print('grad', x.grad.tolist())\n")
    out = venv.run(venv.cli, "run", script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "grad [2.0, 2.0, 2.0, 2.0]"
    if not torch.cuda.is_available():
        assert "no CUDA GPU" in out.stderr, out.stderr


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_events_mode_and_run_on_a_gpu_script(venv, tmp_path):
    out = venv.run(venv.python, "-c", (
        "import torch, vramscope\n"
        "x = torch.ones(1 << 20, device='cuda')\n"
        # The first read attaches the agent: mode() is asked after it.
        "big = vramscope.memory_allocated() >= 4 << 20\n"
        "print(vramscope.mode(), big)\n"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "events True", out.stdout + out.stderr
    script = tmp_path / "gpu_train.py"
    script.write_text("import torch\n"
                      "m = torch.nn.Linear(256, 256).cuda()\n"
                      "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for _ in range(5):\n"
                      "    m(torch.randn(64, 256, device='cuda')).sum().backward()\n"
                      "    opt.step(); opt.zero_grad()\n")
    out = venv.run(venv.cli, "run", script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"vramscope: 5 steps, 0 OOMs \| cuda:0 peak allocated .* \(events\)",
                     out.stderr), out.stderr


def _needed(path: pathlib.Path) -> list:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def _run_paths(path: pathlib.Path) -> list:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True)
    return [p for m in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library \w+: \[([^\]]*)\]", out.stdout)
            for p in m.split(":")]


def _resolved(path: pathlib.Path) -> dict:
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True)
    assert "not found" not in out.stdout, out.stdout
    found = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_every_needed_library_is_the_systems_torchs_or_the_wheels(venv):
    import torch

    torch_dir = pathlib.Path(torch.__file__).resolve().parent
    wheel_dir = venv.site.resolve()
    elves = [venv.cli, *venv.site.glob("vramscope/_agent*.so")]
    assert len(elves) == 2
    elves += venv.site.glob("vramscope/_torch/*.so")
    for elf in elves:
        resolved = _resolved(elf)
        for name in _needed(elf):
            if SYSTEM_LIBRARIES.match(name):
                continue
            where = pathlib.Path(resolved[name]).resolve()
            assert (where.is_relative_to(torch_dir) or where.is_relative_to(wheel_dir)
                    and where.parts[len(wheel_dir.parts)] == "vramscope.libs"), \
                f"{elf.name} needs {name} from {where}"
        for entry in _run_paths(elf):
            assert entry.startswith("$ORIGIN"), f"{elf.name} has the run path {entry}"
    # The CLI needs nothing of torch's: it runs on a machine without PyTorch; the extension
    # neither: it loads under any torch (and dlopens the library for it).
    assert not [n for n in _needed(venv.cli) if not SYSTEM_LIBRARIES.match(n)]
    assert not [n for n in _needed(elves[1]) if not SYSTEM_LIBRARIES.match(n)]
