"""Compaction planning: cut point, chunks, history share, baseline (SPEC §11.1–§11.3; T74 of
§18.12; §19 "Compaction and context overflow")."""

from __future__ import annotations

import random

import pytest

from activities.context.compaction_plan import (
    BASE_CHUNK_RATIO,
    MIN_CHUNK_RATIO,
    adaptive_chunk_ratio,
    check_baseline,
    chunk_for_summary,
    compaction_reserve_tokens,
    find_cut_point,
    is_oversized_for_summary,
    max_summary_chunk_tokens,
    plan_without_oversized,
    split_for_compaction,
    tool_groups,
)
from activities.context.token_estimate import estimate_entry_tokens, estimate_tokens
from agentlane.transcript import Role, TranscriptEntry
from tests.unit.transcript_factory import assistant, call, result, user


def ids(entries: list[TranscriptEntry] | tuple[TranscriptEntry, ...]) -> list[str]:
    return [e.id for e in entries]


def sized(text_tokens: int) -> str:
    return "x" * (text_tokens * 4)


# -- settings ----------------------------------------------------------------------------------


def test_reserve_floor_and_summary_budget() -> None:
    assert compaction_reserve_tokens() == 20_000
    assert compaction_reserve_tokens(30_000) == 30_000
    assert compaction_reserve_tokens(1_000) == 20_000


# -- cut point ---------------------------------------------------------------------------------


def conversation() -> list[TranscriptEntry]:
    return [
        user("u1", sized(1_000)),
        assistant("a1", sized(1_000)),
        user("u2", sized(1_000)),
        assistant("a2", "", call("c1")),
        result("c1", sized(1_000)),
        assistant("a3", sized(1_000)),
        user("u3", sized(1_000)),
        assistant("a4", sized(1_000)),
    ]


def test_cut_at_a_user_message_keeps_whole_turns() -> None:
    split = split_for_compaction(conversation(), keep_recent_tokens=2_000)
    assert split.cut.first_kept_index == 6
    assert not split.cut.is_split_turn
    assert ids(split.kept) == ["u3", "a4"]
    assert ids(split.to_summarize) == ["u1", "a1", "u2", "a2", "c1:result", "a3"]
    assert split.turn_prefix == ()
    assert split.cut.kept_tokens == 2_000


def test_a_tool_result_is_never_the_cut_the_cut_moves_later() -> None:
    # The sum reaches 4 000 at c1:result (index 4); the next valid cut point is a3.
    split = split_for_compaction(conversation(), keep_recent_tokens=4_000)
    assert split.cut.first_kept_index == 5
    assert ids(split.kept) == ["a3", "u3", "a4"]


def test_cutting_inside_a_turn_splits_it() -> None:
    split = split_for_compaction(conversation(), keep_recent_tokens=3_000)
    assert split.cut.first_kept_index == 5  # a3, inside the turn u2 started
    assert split.cut.is_split_turn
    assert split.cut.turn_start_index == 2
    assert ids(split.to_summarize) == ["u1", "a1"]
    assert ids(split.turn_prefix) == ["u2", "a2", "c1:result"]
    assert ids(split.kept) == ["a3", "u3", "a4"]


def test_everything_fits_nothing_to_compact() -> None:
    split = split_for_compaction(conversation(), keep_recent_tokens=1_000_000)
    assert split.nothing_to_compact
    assert ids(split.kept) == ids(conversation())


def test_a_tool_batch_at_the_end_cuts_at_its_call() -> None:
    entries = [
        user("u1", sized(5_000)),
        user("u2", "run it"),
        assistant("a", "", call("c1"), call("c2")),
        result("c1", sized(15_000)),
        result("c2", sized(15_000)),
    ]
    cut = find_cut_point(entries, keep_recent_tokens=20_000)
    # Reached at c1:result with no valid cut point after it: cut at the call, keep its results.
    assert cut.first_kept_index == 2
    assert cut.turn_start_index == 1
    assert cut.kept_tokens == estimate_tokens(entries[2:])


def test_cut_point_edge_cases() -> None:
    empty = split_for_compaction([])
    assert empty.nothing_to_compact and empty.kept == ()
    only_results = [result("c1", sized(50_000)), result("c2", sized(50_000))]
    cut = find_cut_point(only_results, 1_000)
    assert cut.first_kept_index == 0 and not cut.is_split_turn
    huge = [user("u1", "hi"), user("u2", sized(500_000))]
    assert find_cut_point(huge, 20_000).first_kept_index == 1
    no_user_before = [assistant("a1", sized(30_000)), assistant("a2", sized(30_000))]
    cut = find_cut_point(no_user_before, 20_000)
    assert cut.first_kept_index == 1 and cut.turn_start_index is None


def test_unicode_entries_are_measured_in_code_points() -> None:
    entries = [user("u1", "語" * 80_000), user("u2", "語" * 80_000)]
    assert find_cut_point(entries, 20_000).first_kept_index == 1


# -- T74 splitting -----------------------------------------------------------------------------


def test_t74_a_call_and_its_results_never_land_in_different_chunks() -> None:
    rng = random.Random(74)
    for _ in range(200):
        entries: list[TranscriptEntry] = []
        for n in range(rng.randint(1, 12)):
            if rng.random() < 0.4:
                entries.append(user(f"u{n}", sized(rng.randint(1, 3_000))))
            else:
                calls = [call(f"c{n}_{k}") for k in range(rng.randint(1, 3))]
                entries.append(assistant(f"a{n}", sized(rng.randint(0, 500)), *calls))
                entries += [result(c.id, sized(rng.randint(1, 3_000))) for c in calls]
        for chunks in (chunk_for_summary(entries, rng.randint(100, 8_000)),):
            assert [e for chunk in chunks for e in chunk] == entries
            for chunk in chunks:
                called = {c.id for e in chunk for c in e.tool_calls}
                answered = {e.tool_call_id for e in chunk if e.role == Role.TOOL}
                assert answered <= called
                assert called <= answered


# -- chunking ----------------------------------------------------------------------------------


def test_chunks_stay_within_the_limit_after_the_margin() -> None:
    entries = [user(f"u{n}", sized(1_000)) for n in range(10)]
    chunks = chunk_for_summary(entries, max_chunk_tokens=3_600)  # 3 000 after the 1.2 margin
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    for chunk in chunks:
        assert estimate_tokens(chunk) * 1.2 <= 3_600


def test_an_oversized_entry_is_alone_in_its_chunk() -> None:
    entries = [user("u1", sized(100)), user("big", sized(50_000)), user("u2", sized(100))]
    chunks = chunk_for_summary(entries, 6_000)
    assert [ids(c) for c in chunks] == [["u1"], ["big"], ["u2"]]


def test_a_tool_batch_larger_than_a_chunk_is_kept_whole() -> None:
    entries = [
        user("u", sized(10)),
        assistant("a", "", call("c1"), call("c2")),
        result("c1", sized(5_000)),
        result("c2", sized(5_000)),
        user("v", sized(10)),
    ]
    chunks = chunk_for_summary(entries, 2_000)
    assert [ids(c) for c in chunks] == [["u"], ["a", "c1:result", "c2:result"], ["v"]]


def test_chunking_nothing() -> None:
    assert chunk_for_summary([], 1_000) == []


def test_tool_groups_wait_for_every_result_even_across_a_user_message() -> None:
    entries = [
        assistant("a", "", call("c1"), call("c2")),
        result("c1"),
        user("u", "displaced"),
        result("c2"),
        user("v"),
    ]
    assert list(tool_groups(entries)) == [(0, 4), (4, 5)]


def test_max_chunk_tokens_follow_the_adaptive_ratio() -> None:
    small = [user(f"u{n}", sized(100)) for n in range(10)]
    assert adaptive_chunk_ratio(small, 200_000) == BASE_CHUNK_RATIO
    assert max_summary_chunk_tokens(small, 200_000) == 80_000 - 4_096
    big = [user(f"u{n}", sized(50_000)) for n in range(4)]
    ratio = adaptive_chunk_ratio(big, 200_000)  # average share 0.3 → 0.4 − min(0.6, 0.25)
    assert ratio == pytest.approx(MIN_CHUNK_RATIO)
    middle = [user(f"u{n}", sized(20_000)) for n in range(4)]  # 0.12 → 0.4 − 0.24
    assert adaptive_chunk_ratio(middle, 200_000) == pytest.approx(0.16)
    assert max_summary_chunk_tokens(big, 200_000) == 30_000 - 4_096
    assert max_summary_chunk_tokens(small, 8_000) == 1  # the overhead eats a tiny window
    assert max_summary_chunk_tokens([], 16_000) <= 8_000


def test_oversized_entries_are_left_out_with_a_note() -> None:
    entries = [
        user("u1", sized(100)),
        assistant("a", "", call("c1")),
        user("displaced", sized(10)),
        result("c1", sized(60_000)),
        user("u2", sized(100)),
    ]
    assert is_oversized_for_summary(entries[3], 100_000)
    plan = plan_without_oversized(entries, 100_000)
    assert ids(plan.small) == ["u1", "displaced", "u2"]
    assert plan.notes == ("[Large tool (~60K tokens) omitted from summary]",)
    nothing = plan_without_oversized(entries[:1], 100_000)
    assert nothing.notes == () and ids(nothing.small) == ["u1"]


# -- baseline ----------------------------------------------------------------------------------


def test_baseline_that_fits() -> None:
    check = check_baseline(
        context_window=200_000,
        system_prompt_tokens=5_000,
        summary_tokens=16_000,
        kept_tokens=20_000,
    )
    assert check.fits and check.overflow_tokens == 0 and check.message is None
    assert check.baseline_tokens == 41_000


def test_baseline_over_the_window_says_compaction_cannot_help() -> None:
    kept = find_cut_point([user("u", sized(30_000))], 20_000).kept_tokens
    check = check_baseline(
        context_window=32_000,
        system_prompt_tokens=4_000,
        summary_tokens=16_000,
        kept_tokens=kept,
    )
    assert not check.fits
    assert check.overflow_tokens == 4_000 + 16_000 + 30_000 - 32_000
    assert check.message is not None
    assert "/reset" in check.message and "32000" in check.message


def test_baseline_counts_the_answer_reserve_and_clamps_negatives() -> None:
    check = check_baseline(
        context_window=10_000,
        system_prompt_tokens=-3,
        summary_tokens=4_000,
        kept_tokens=4_000,
        reserve_tokens=2_001,
    )
    assert check.system_prompt_tokens == 0
    assert not check.fits and check.overflow_tokens == 1


def test_estimates_used_for_the_cut_match_the_token_module() -> None:
    entry = assistant("a", "abc", call("c1", "read", path="x"))
    assert find_cut_point([entry], 0).kept_tokens == estimate_entry_tokens(entry)
