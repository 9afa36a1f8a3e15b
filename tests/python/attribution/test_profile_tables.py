# tests/python/attribution/test_profile_tables.py -- per-op/per-module table logic with synthetic agent rows
from __future__ import annotations

import pytest

from vramscope.attribution.profile import (
    ModuleRow,
    format_module_table,
    format_op_table,
    merge_rows,
    repeated_modules,
)

MiB = 1 << 20


def rows():
    dev0 = [{"name": "aten::linear", "calls": 24, "alloc_count": 24, "allocated_bytes": 150 * MiB,
             "self_freed_bytes": 0, "live_bytes": 0, "live_at_peak_bytes": 150 * MiB},
            {"name": "aten::gelu", "calls": 12, "alloc_count": 12, "allocated_bytes": 48 * MiB,
             "self_freed_bytes": 0, "live_bytes": 4 * MiB, "live_at_peak_bytes": 48 * MiB},
            {"name": "(before)", "calls": 0, "alloc_count": 0, "allocated_bytes": 0,
             "self_freed_bytes": 0, "live_bytes": 500 * MiB, "live_at_peak_bytes": 500 * MiB}]
    dev1 = [{"name": "aten::linear", "calls": 24, "alloc_count": 24, "allocated_bytes": 10 * MiB,
             "self_freed_bytes": 2 * MiB, "live_bytes": 1 * MiB, "live_at_peak_bytes": 0}]
    return [dev0, dev1]


def test_merge_sums_bytes_not_calls():
    merged = {r.name: r for r in merge_rows(rows())}
    linear = merged["aten::linear"]
    assert (linear.calls, linear.allocated_bytes, linear.self_bytes) == (24, 160 * MiB, 158 * MiB)


def test_op_table_golden(golden):
    text = format_op_table(merge_rows(rows()), 698 * MiB, sort_by="peak", row_limit=2,
                           title="vramscope per-op memory (all devices)")
    golden("op_table.txt", text)


def test_sort_key_is_validated():
    with pytest.raises(ValueError, match="sort_by"):
        format_op_table([], 0, sort_by="size")


def test_modules_tree_and_checkpoint_candidates():
    mods = [ModuleRow("GPT", 1, 900 * MiB), ModuleRow("GPT.blocks.0", 2, 200 * MiB),
            ModuleRow("GPT.blocks.1", 2, 220 * MiB), ModuleRow("GPT.head", 1, 100 * MiB)]
    classes = {"GPT": "GPT", "GPT.blocks.0": "Block", "GPT.blocks.1": "Block",
               "GPT.head": "Linear"}
    assert repeated_modules(mods, classes) == [("Block", 2, 105 * MiB)]
    text = format_module_table(mods)
    assert "    0" in text and "100.0 MiB" in text
