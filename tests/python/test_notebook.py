# tests/python/test_notebook.py -- %load_ext vramscope, %vramscope, %%vramscope in a real kernel
#
# The kernel (ipykernel, run by nbclient) gets tests/python/_vram_double.py as its agent, so the
# cell's peak and leak are known numbers without a GPU. Skipped when nbclient/ipykernel are not
# installed (tools/requirements-dev.txt installs them).
from __future__ import annotations

import os
import pathlib

import pytest

import vramscope
from vramscope import _ipython

HERE = pathlib.Path(__file__).resolve().parent


def test_hints_name_what_a_notebook_keeps_alive():
    torch = pytest.importorskip("torch")

    def fails():
        big = torch.zeros(1024)  # noqa: F841 -- held by the traceback's frame
        raise RuntimeError("boom")

    try:
        fails()
    except RuntimeError as e:
        tb = e.__traceback__.tb_next  # from fails(): this frame's locals are not its
    everything = lambda v: isinstance(v, torch.Tensor)  # noqa: E731 -- CPU tensors stand in
    out = {3: torch.zeros(256), 4: "text"}
    hints = _ipython.held_hints({"Out": out, "_": out[3]}, tb, everything)
    assert hints[0].startswith("the last exception's traceback keeps 4.0 KiB of GPU tensors")
    assert "sys.last_traceback = sys.last_value = sys.last_exc = None" in hints[0]
    assert hints[1].startswith("Out[3] holds 1.0 KiB of GPU tensors; `%reset -f out`")
    assert len(hints) == 2  # `_` is Out[3]: named once
    assert _ipython.held_hints({"Out": out}, tb, lambda v: False) == []


def test_the_view_adds_up_and_renders():
    view = _ipython.MemoryView([_ipython.DeviceView(
        0, allocated_bytes=3 << 30, reserved_bytes=4 << 30, peak_allocated_bytes=5 << 30,
        driver_bytes=(4 << 30) + (512 << 20), total_bytes=140 << 30, free_bytes=100 << 30)],
        mode="events", hints=["Out[1] holds 1.0 GiB of GPU tensors"])
    text = repr(view)
    for expected in ("allocated (tensors)", "3.0 GiB", "+ cached free", "1.0 GiB",
                     "+ non-PyTorch", "512.0 MiB", "= this process (driver)", "4.5 GiB",
                     "other processes", "35.5 GiB", "100.0 GiB / 140.0 GiB",
                     "hint: Out[1] holds"):
        assert expected in text
    assert "<table><caption>cuda:0</caption>" in view._repr_html_()
    assert "&#9888; Out[1] holds 1.0 GiB" in view._repr_html_()
    unknown = _ipython.DeviceView(0, 1, 2, 3)
    assert "= this process (driver)" in repr(_ipython.MemoryView([unknown])) and \
        unknown.non_pytorch_bytes is None


def test_without_a_gpu_the_view_says_why_once():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from vramscope import _ipython

    class Shell:
        cells: list[str] = []

        def run_cell(self, cell):
            self.cells.append(cell)

    reason = "no CUDA GPU is visible to PyTorch (torch.cuda.is_available() is False)"
    assert repr(_ipython.snapshot()) == f"vramscope: {reason}"
    shell = Shell()
    view = _ipython._cell_magic(shell, "", "x = 1")
    assert shell.cells == ["x = 1"]
    assert repr(view) == f"vramscope: {reason} (the cell ran unmeasured)"


def test_magics_in_a_real_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "import sys\nimport torch\nimport _vram_double\n"
        "agent = _vram_double.FakeAgent()\ninstalled = _vram_double.installed(agent)\n"
        "installed.__enter__()\n"
        "import vramscope._ipython\n"
        "# CPU tensors stand in for GPU ones in the hints (no GPU here)\n"
        "vramscope._ipython._is_device_tensor = lambda v: isinstance(v, torch.Tensor)",
        "%load_ext vramscope",
        "%vramscope",
        "%%vramscope\nagent.alloc(300 << 20)\nagent.free(100 << 20)",
        "def step():\n    kept = torch.zeros(1 << 18)\n    agent.alloc(64 << 20)\n"
        "    raise RuntimeError('boom')",
        "%%vramscope\nstep()",
        "vramscope.show()",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    package_root = str(pathlib.Path(vramscope.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), package_root, os.environ.get("PYTHONPATH")) if p)
    try:
        client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                         allow_errors=True,
                                         resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        os.environ.pop("PYTHONPATH")

    def text(i):
        parts = []
        for out in nb.cells[i].outputs:
            data = out.get("data", {})
            parts.append(data.get("text/plain", "") + data.get("text/html", "")
                         + out.get("text", "") + " ".join(out.get("traceback", [])))
        return "\n".join(parts)

    assert "error" not in [o.output_type for o in nb.cells[0].outputs], text(0)
    line = nb.cells[2].outputs[0]["data"]
    assert "<table><caption>cuda:0</caption>" in line["text/html"]
    assert "allocated (tensors)" in line["text/plain"]
    assert "cell peak 300.0 MiB allocated, 300.0 MiB reserved; left allocated +200.0 MiB" in \
        text(3)
    failed = text(5)
    assert "RuntimeError" in failed and "boom" in failed
    assert "left allocated +64.0 MiB" in failed
    assert "hint: the last exception's traceback keeps 1.0 MiB of GPU tensors" in failed
    assert "the last exception's traceback keeps 1.0 MiB" in text(6)
