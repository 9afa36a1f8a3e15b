# tests/wheel/test_wheel_elf.py -- no ELF file needs a glibc above the tag, or a foreign library
#
# Reads the wheels named by VRAMSCOPE_WHEELS (os.pathsep-separated) or VRAMSCOPE_WHEEL without
# installing them: each ELF member is parsed with pyelftools. Two rules, from the wheel's
# manylinux tag and auditwheel's own policy table (the versions each tag allows):
#   - every versioned symbol it needs from glibc, libstdc++ or libgcc_s is one the tag allows;
#   - every library it needs is glibc's; the agent's files may also need the GCC runtime and
#     torch's own libraries (the torch the user imports), the CLI nothing but glibc, and the
#     Python extension nothing of torch's (it must load under any torch).
from __future__ import annotations

import io
import json
import os
import re
import zipfile
from importlib import resources

import pytest

elftools = pytest.importorskip("elftools", reason="needs pyelftools (PyPI)")
from elftools.elf.dynamic import DynamicSection  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402
from elftools.elf.gnuversions import GNUVerNeedSection  # noqa: E402

WHEELS = [w for w in os.environ.get("VRAMSCOPE_WHEELS", os.environ.get("VRAMSCOPE_WHEEL", ""))
          .split(os.pathsep) if w]
pytestmark = pytest.mark.skipif(not WHEELS, reason="set VRAMSCOPE_WHEELS (or VRAMSCOPE_WHEEL) "
                                                   "to built wheels")

#: glibc's libraries: what any file of the wheel may need.
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
         "ld-linux-x86-64.so.2"}
#: The GCC runtime: the agent's files share libstdc++ with torch.
GCC_RUNTIME = {"libstdc++.so.6", "libgcc_s.so.1"}
#: torch's own libraries, which the torch-facing part of the agent binds.
TORCH = re.compile(r"^lib(c10|c10_cuda|torch|torch_cpu|torch_cuda)\.so$")


def _policy(tag: str) -> dict:
    """auditwheel's symbol versions for ``tag`` (e.g. manylinux_2_34), per prefix."""
    text = resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text()
    for policy in json.loads(text):
        if policy["name"] == tag:
            return {prefix: set(versions)
                    for prefix, versions in policy["symbol_versions"]["x86_64"].items()}
    raise AssertionError(f"auditwheel has no policy {tag}")


def _elves(wheel: str) -> list:
    """(member name, ELFFile) of every ELF member of ``wheel``."""
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            data = z.read(name)
            if data[:4] == b"\x7fELF":
                out.append((name, ELFFile(io.BytesIO(data))))
    return out


def _needed(elf) -> list:
    return [tag.needed for section in elf.iter_sections() if isinstance(section, DynamicSection)
            for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


def _versions(elf) -> list:
    """(library, version name) of every symbol version ``elf`` needs."""
    return [(verneed.name, aux.name) for section in elf.iter_sections()
            if isinstance(section, GNUVerNeedSection)
            for verneed, auxes in section.iter_versions() for aux in auxes]


def _tag(wheel: str) -> str:
    m = re.search(r"-(manylinux_\d+_\d+)_x86_64\.whl$", os.path.basename(wheel))
    assert m, f"{wheel} has no manylinux tag"
    return m.group(1)


@pytest.mark.parametrize("wheel", WHEELS, ids=os.path.basename)
def test_no_symbol_version_above_the_tag(wheel):
    allowed = _policy(_tag(wheel))
    elves = _elves(wheel)
    assert elves, f"{wheel} has no ELF file"
    for name, elf in elves:
        for library, version in _versions(elf):
            prefix, _, number = version.partition("_")
            if prefix in allowed and number and number[0].isdigit():
                assert number in allowed[prefix], f"{name} needs {version} of {library}"


@pytest.mark.parametrize("wheel", WHEELS, ids=os.path.basename)
def test_no_library_beyond_glibc_the_gcc_runtime_and_torch(wheel):
    kinds = set()
    for name, elf in _elves(wheel):
        needed = _needed(elf)
        if name.endswith("/scripts/vramscope"):
            kinds.add("cli")
            assert set(needed) <= GLIBC, f"the CLI needs {set(needed) - GLIBC}"
        elif re.fullmatch(r"vramscope/_agent\..*\.so", name):
            kinds.add("extension")
            foreign = set(needed) - GLIBC - GCC_RUNTIME
            assert not foreign, f"{name} (the Python extension) needs {foreign}"
        else:
            assert name.startswith("vramscope/"), name
            kinds.add("torch-facing")
            foreign = {n for n in needed if n not in GLIBC | GCC_RUNTIME and not TORCH.match(n)}
            assert not foreign, f"{name} needs {foreign}"
    assert {"cli", "extension"} <= kinds, kinds


@pytest.mark.parametrize("wheel", WHEELS, ids=os.path.basename)
def test_each_torch_facing_library_exports_its_entry_alone(wheel):
    """Anything else it exported (std templates instantiated for torch's types) could interpose
    on torch's own copies, or theirs on it."""
    libraries = [(n, e) for n, e in _elves(wheel) if n.startswith("vramscope/_torch/")]
    assert libraries, "no torch-facing library"
    for name, elf in libraries:
        dynsym = elf.get_section_by_name(".dynsym")
        exported = {sym.name for sym in dynsym.iter_symbols()
                    if sym["st_shndx"] != "SHN_UNDEF" and sym.name
                    and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")}
        assert exported == {"vramscope_torch_api"}, f"{name} exports {exported}"
