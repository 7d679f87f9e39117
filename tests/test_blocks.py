"""Canonical grouping and KV reuse planning (pure functions, no model)."""

from __future__ import annotations

from localjudge.backends._blocks import canonical_chunks, plan_reuse


def test_prompt_in_aligned_blocks_then_suffix_tokens_one_by_one():
    assert canonical_chunks(0, 10, 13, 4) == [(0, 4), (4, 8), (8, 10), (10, 11), (11, 12),
                                              (12, 13)]
    assert canonical_chunks(8, 10, 10, 4) == [(8, 10)]
    assert canonical_chunks(11, 10, 13, 4) == [(11, 12), (12, 13)]


def test_reuse_only_whole_blocks_of_another_prompt():
    kv = list(range(10))  # prompt 0..9 cached (blocks of 4)
    # new prompt shares 0..6 then differs: keep whole blocks [0,4) only
    assert plan_reuse(kv, 10, [0, 1, 2, 3, 4, 5, 6, 99, 98], (), 4) == 4
    # shares everything but is longer: the old partial block [8,10) is not canonical for it
    assert plan_reuse(kv, 10, list(range(12)), (), 4) == 8


def test_same_prompt_reuses_blocks_and_matching_suffix():
    kv = [*range(10), 50, 51]  # prompt of 10 + suffix 50, 51
    assert plan_reuse(kv, 10, list(range(10)), (50, 52), 4) == 11
    assert plan_reuse(kv, 10, list(range(10)), (60,), 4) == 10


def test_fully_cached_sequence_recomputes_its_last_position():
    kv = list(range(10))
    assert plan_reuse(kv, 10, list(range(10)), (), 4) == 8  # last prompt block again
    kv2 = [*range(10), 50]
    assert plan_reuse(kv2, 10, list(range(10)), (50,), 4) == 10  # last suffix token again
