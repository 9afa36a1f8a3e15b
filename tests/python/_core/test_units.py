# tests/python/_core/test_units.py -- sizes read from text, and the one non-PyTorch bytes of a process
import pytest

from vramscope._core.units import non_pytorch_bytes, unit_bytes

MiB = 1 << 20


@pytest.mark.parametrize("unit, n_bytes", [
    ("B", 1), ("bytes", 1), ("KB", 1 << 10), ("KiB", 1 << 10), ("kib", 1 << 10), ("MB", MiB),
    ("MiB", MiB), ("GiB", 1 << 30), ("TB", 1 << 40), ("PiB", 1 << 50)])
def test_every_unit_is_binary(unit, n_bytes):
    assert unit_bytes(unit) == n_bytes


def test_an_unknown_unit_is_refused():
    with pytest.raises(KeyError):
        unit_bytes("XB")


def test_non_pytorch_bytes_is_what_the_driver_charges_beyond_reserved():
    assert non_pytorch_bytes(612 * MiB, 100 * MiB) == 512 * MiB
    assert non_pytorch_bytes(100 * MiB, 100 * MiB) == 0
    assert non_pytorch_bytes(None, 100 * MiB) is None  # NVML cannot tell
    # Driver below reserved: the two were read apart; no number rather than a wrong one.
    assert non_pytorch_bytes(99 * MiB, 100 * MiB) is None
