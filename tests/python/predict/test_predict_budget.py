# tests/python/predict/test_predict_budget.py -- fit's budget (card, cap, size) and the DDP minimum
from __future__ import annotations

import os

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from vramscope.predict.budget import DeviceMemory, agree_min, resolve_budget

GiB = 1 << 30
#: 80 GiB card, 60 GiB free, this process holds 4 GiB.
CARD = DeviceMemory(total_bytes=80 * GiB, free_bytes=60 * GiB, reserved_bytes=4 * GiB)
#: The same card under a cap of a quarter of it.
CAPPED = CARD._replace(fraction=0.25)


def test_the_card_is_what_this_process_holds_and_what_is_free():
    assert resolve_budget(None, CARD).bytes == 64 * GiB
    assert resolve_budget("card", CARD).bytes == 64 * GiB
    assert "card" in resolve_budget(None, CARD).source


def test_a_cap_limits_the_card():
    assert resolve_budget(None, CAPPED).bytes == 20 * GiB
    assert resolve_budget("cap", CAPPED) == resolve_budget(None, CAPPED)
    assert "cap 0.25" in resolve_budget("cap", CAPPED).source
    with pytest.raises(ValueError, match="no memory-fraction cap"):
        resolve_budget("cap", CARD)


def test_a_size_or_a_fraction_never_more_than_the_card():
    assert resolve_budget("12 GiB", CARD).bytes == 12 * GiB
    assert resolve_budget(12 * GiB, CARD).bytes == 12 * GiB
    assert resolve_budget("100 GiB", CARD).bytes == 64 * GiB
    assert "64.0 GiB available" in resolve_budget("100 GiB", CARD).source
    assert resolve_budget(0.5, CARD).bytes == 40 * GiB
    assert resolve_budget(0.5, CAPPED).bytes == 20 * GiB


@pytest.mark.parametrize("spec, message", [("lots", "budget must be"), (1.5, "fraction"),
                                           (0, "positive")])
def test_bad_budgets_say_what_is_accepted(spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_budget(spec, CARD)


def _rank(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        answer = agree_min(40 if rank == 0 else 24)
        with open(os.path.join(out_dir, f"rank{rank}"), "w", encoding="utf-8") as f:
            f.write(str(answer))
    finally:
        dist.destroy_process_group()


def test_every_rank_uses_the_smallest_answer_through_a_gloo_group(tmp_path):
    mp.spawn(_rank, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    assert [(tmp_path / f"rank{r}").read_text() for r in (0, 1)] == ["24", "24"]


def test_without_a_process_group_the_answer_is_its_own():
    assert agree_min(17) == 17


def test_restore_copies_state_to_the_host_and_back():
    import torch

    from vramscope.predict.fit import _host_copy

    net = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=1.0, momentum=0.9)
    saved = [_host_copy(net.state_dict()), _host_copy(opt.state_dict())]
    net(torch.ones(1, 3)).sum().backward()
    opt.step()  # a probe step: weights move, momentum appears
    assert opt.state
    net.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])
    assert torch.equal(net.weight, saved[0]["weight"]) and not opt.state
