# tests/python/_core/test_device.py -- every device spelling torch.cuda accepts maps to the right ordinal
import pytest
import torch

from vramscope._core.device import parse_device


def current_is_3():
    return 3


@pytest.mark.parametrize("device, expected", [
    (None, 3), (0, 0), (5, 5), ("cuda", 3), ("cuda:0", 0), ("cuda:12", 12), (" cuda:1 ", 1),
    (torch.device("cuda"), 3), (torch.device("cuda", 2), 2), (torch.device("cuda:1"), 1),
])
def test_accepted_spellings(device, expected):
    assert parse_device(device, current_is_3) == expected


@pytest.mark.parametrize("device, error, text", [
    ("cpu", ValueError, "expected a CUDA device, got 'cpu'"),
    (torch.device("cpu"), ValueError, "expected a CUDA device, got 'cpu'"),
    ("cuda:x", ValueError, "invalid device string 'cuda:x'"),
    ("cuda:", ValueError, "invalid device string"),
    ("1", ValueError, "expected a CUDA device"),
    (-1, ValueError, "no CUDA device -1"),
    (True, TypeError, "expected a CUDA device"),
    (1.0, TypeError, "got float"),
])
def test_rejected_spellings(device, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(")):
        parse_device(device, current_is_3)


def test_count_bounds_ordinals():
    assert parse_device(1, current_is_3, count=2) == 1
    with pytest.raises(ValueError, match=r"no CUDA device 2 \(2 visible\)"):
        parse_device(2, current_is_3, count=2)
    with pytest.raises(ValueError, match="no CUDA device 4"):
        parse_device("cuda:4", current_is_3, count=2)


def test_current_is_only_asked_when_needed():
    calls = []

    def current():
        calls.append(1)
        return 0

    parse_device(1, current)
    parse_device("cuda:1", current)
    assert calls == []
    parse_device(None, current)
    assert calls == [1]
