# tests/python/_core/test_dist.py -- rank and world size from torchrun's environment
import pytest

from vramscope.distributed import rank_from_env, resolve_rank


@pytest.mark.parametrize("env, expected", [
    ({"RANK": "1", "WORLD_SIZE": "4"}, (1, 4)),
    ({"RANK": "0", "WORLD_SIZE": "1"}, (0, 1)),
    ({"RANK": "1"}, None),
    ({"WORLD_SIZE": "2"}, None),
    ({"RANK": "x", "WORLD_SIZE": "2"}, None),
    ({"RANK": "2", "WORLD_SIZE": "2"}, None),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, None),
    ({"RANK": "0", "WORLD_SIZE": "0"}, None),
])
def test_rank_from_env(env, expected):
    assert rank_from_env(env) == expected


def test_resolve_rank_uses_env_then_defaults(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    assert resolve_rank() == ((3, 8), False)
    assert resolve_rank(explicit=5) == ((5, 8), False)
    monkeypatch.delenv("RANK")
    assert resolve_rank() == ((0, 1), False)
