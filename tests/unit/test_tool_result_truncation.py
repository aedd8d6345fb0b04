"""Tool-result truncation and the live guard (SPEC §10.1, §10.2; T54, T55, T57 of §18.8)."""

from __future__ import annotations

import random

import pytest

from activities.context.token_estimate import guard_entry_chars
from activities.context.tool_result_truncation import (
    LIVE_GUARD_OVERFLOW_TEXT,
    MIDDLE_MARKER,
    TRUNCATED_META_KEY,
    apply_live_guard,
    apply_replacements,
    guard_context_cap,
    guard_single_result_cap,
    has_important_tail,
    max_tool_result_chars,
    plan_recovery_truncation,
    reducible_tool_result_chars,
    truncate_to_budget,
    truncate_tool_result_text,
    truncation_notice,
)
from agentlane.transcript import TranscriptEntry
from tests.unit.transcript_factory import assistant, call, result, user

# -- T54 ---------------------------------------------------------------------------------------


def test_t54_max_chars_follow_the_window() -> None:
    assert max_tool_result_chars(128_000) == 40_000
    assert max_tool_result_chars(2_000_000) <= 40_000
    assert max_tool_result_chars(32_000) < max_tool_result_chars(200_000)
    assert max_tool_result_chars(32_000) == 38_400  # floor(32 000 × 0.3) × 4


def test_tiny_window_still_allows_one_char() -> None:
    assert max_tool_result_chars(0) == 1
    assert max_tool_result_chars(3) == 1  # floor(0.9) × 4 = 0, clamped
    assert max_tool_result_chars(4) == 4


# -- T55 ---------------------------------------------------------------------------------------

T55_TEXT = (
    "Line 1\n" * 500
    + "data data data\n" * 500
    + "\nError: something failed\nStack trace: at foo.ts:42\n"
)


def test_t55_an_error_at_the_end_keeps_head_and_tail() -> None:
    out = truncate_tool_result_text(T55_TEXT, 5_000)
    assert "Line 1" in out
    assert "Error: something failed" in out
    assert "middle content omitted" in out
    assert len(out) <= 5_000
    assert out.endswith(" more characters truncated]")


def test_t55_plain_output_keeps_the_head_only() -> None:
    text = "normal line\n" * 1_000
    out = truncate_tool_result_text(text, 5_000)
    assert "truncated" in out
    assert MIDDLE_MARKER not in out
    assert out.startswith("normal line\n")
    assert len(out) <= 5_000


def test_t55_min_keep_wins_over_a_tiny_max() -> None:
    out = truncate_tool_result_text("x" * 50_000, 100)
    assert len(out) > 2_000
    assert out.startswith("x" * 2_000)


# -- truncate_tool_result_text -----------------------------------------------------------------


def test_text_that_fits_is_returned_as_is() -> None:
    assert truncate_tool_result_text("short", 10) == "short"
    assert truncate_tool_result_text("", 0) == ""


def test_notice_counts_the_removed_characters() -> None:
    text = "y" * 10_000
    out = truncate_tool_result_text(text, 4_000)
    kept = out[: out.index("\n\n[...")]
    assert out == kept + truncation_notice(len(text) - len(kept))
    assert truncation_notice(0) == "\n\n[... 1 more characters truncated]"


def test_head_cut_moves_to_a_newline_in_the_last_fifth() -> None:
    text = "a" * 3_900 + "\n" + "b" * 10_000
    out = truncate_tool_result_text(text, 4_000)
    assert out.startswith("a" * 3_900 + truncation_notice(len(text) - 3_900))


def test_head_cut_ignores_a_newline_too_early() -> None:
    text = "a" * 1_000 + "\n" + "b" * 10_000
    out = truncate_tool_result_text(text, 4_000)
    assert "b" * 100 in out
    assert len(out) <= 4_000


def test_tail_starts_after_a_newline_in_its_first_fifth() -> None:
    # The tail budget is 2 388 characters; the newline sits 376 characters into it.
    body = "x" * 20_000 + "\n" + "y" * 2_000 + "\nexit code 2"
    out = truncate_tool_result_text(body, 8_000)
    tail = out.split(MIDDLE_MARKER)[1]
    assert tail.startswith("y" * 2_000 + "\nexit code 2")


@pytest.mark.parametrize(
    ("tail", "important"),
    [
        ("Traceback (most recent call last)", True),
        ("process exited with exit code 1", True),
        ('{"items": []}\n  ', True),
        ("Total: 42 files", True),
        ("all done", True),
        ("errors", False),  # whole words only
        ("just more lines", False),
        ("ERROR: disk full", True),
    ],
)
def test_important_tail(tail: str, important: bool) -> None:
    assert has_important_tail("filler\n" * 1_000 + tail) is important


def test_important_words_early_in_a_long_text_do_not_count() -> None:
    text = "error at the start\n" + "z" * 3_000
    assert not has_important_tail(text)


def test_recovery_truncation_can_keep_nothing_but_the_notice() -> None:
    out = truncate_tool_result_text("w" * 1_000, 10, min_keep=0)
    assert out == truncation_notice(1_000)


def test_recovery_truncation_stays_within_max() -> None:
    rng = random.Random(7)
    for _ in range(200):
        length = rng.randint(1, 30_000)
        text = "".join(rng.choice("ab\n}") for _ in range(length))
        limit = rng.randint(60, 40_000)
        out = truncate_tool_result_text(text, limit, min_keep=0)
        if len(text) <= limit:
            assert out == text
        else:
            # Below the notice's own length only the notice is left.
            assert len(out) <= max(limit, len(truncation_notice(len(text))))


def test_unicode_is_cut_on_code_points() -> None:
    text = "é" * 10_000 + "\n" + "終" * 10_000
    out = truncate_tool_result_text(text, 5_000)
    assert len(out) <= 5_000
    out.encode("utf-8")  # never a split surrogate or half a character


# -- blocks ------------------------------------------------------------------------------------


# -- recovery plan -----------------------------------------------------------------------------


def transcript(*sizes: int) -> list[TranscriptEntry]:
    entries = [user("u", "go")]
    for n, size in enumerate(sizes):
        entries.append(assistant(f"a{n}", "", call(f"c{n}")))
        entries.append(result(f"c{n}", "r" * size))
    return entries


def test_oversized_results_are_cut_to_the_max_first() -> None:
    entries = transcript(100_000)
    plan = plan_recovery_truncation(entries, 128_000)
    assert [r.entry_id for r in plan.oversized] == ["c0:result"]
    assert len(plan.oversized[0].text) <= 40_000
    assert plan.oversized_reducible_chars == 100_000 - len(plan.oversized[0].text)
    assert plan.aggregate == ()


def test_aggregate_is_reduced_newest_first() -> None:
    # Three results of 20 000 against an aggregate budget of 40 000: 20 000 must go. The newest
    # goes down to its notice; the few characters the notice takes come from the next one.
    entries = transcript(20_000, 20_000, 20_000)
    plan = plan_recovery_truncation(entries, 128_000)
    assert plan.oversized == ()
    assert [r.entry_id for r in plan.aggregate] == ["c2:result", "c1:result"]
    assert plan.aggregate[0].text == truncation_notice(20_000)
    assert plan.aggregate[1].reduction < 100
    assert plan.aggregate_reducible_chars >= 20_000
    after = apply_replacements(entries, plan.replacements)
    assert after[2] is entries[2]
    assert sum(len(e.text) for e in after if e.role == "tool") <= 40_000
    assert plan.reducible_chars == plan.aggregate_reducible_chars
    assert reducible_tool_result_chars(entries, 128_000) == plan.reducible_chars


def test_aggregate_moves_to_older_results_when_the_newest_is_exhausted() -> None:
    entries = transcript(30_000, 30_000, 100)
    plan = plan_recovery_truncation(entries, 128_000)
    reduced = [r.entry_id for r in plan.aggregate]
    assert reduced == ["c2:result", "c1:result"]
    after = apply_replacements(entries, plan.replacements)
    total = sum(len(e.text) for e in after if e.role == "tool")
    assert total <= 40_000


def test_a_single_result_is_never_aggregate_reduced() -> None:
    plan = plan_recovery_truncation(transcript(39_000), 128_000)
    assert not plan.changed


def test_oversized_then_aggregate_make_one_replacement_per_entry() -> None:
    entries = transcript(100_000, 35_000)
    plan = plan_recovery_truncation(entries, 128_000)
    assert [r.entry_id for r in plan.oversized] == ["c0:result"]
    final = {r.entry_id: r for r in plan.replacements}
    assert final["c0:result"].original_chars == 100_000
    after = apply_replacements(entries, plan.replacements)
    assert sum(len(e.text) for e in after if e.role == "tool") <= 40_000


def test_apply_copies_and_records_the_original_length() -> None:
    entries = transcript(100_000)
    plan = plan_recovery_truncation(entries, 128_000)
    after = apply_replacements(entries, plan.replacements)
    assert len(entries[2].text) == 100_000  # the input is untouched
    assert after[2] is not entries[2]
    assert after[2].meta[TRUNCATED_META_KEY] == 100_000
    assert after[0] is entries[0]
    twice = apply_replacements(after, plan_recovery_truncation(after, 16_000).replacements)
    assert twice[2].meta[TRUNCATED_META_KEY] == 100_000  # the first original length is kept


def test_nothing_to_do_on_empty_or_text_only_transcripts() -> None:
    assert not plan_recovery_truncation([], 128_000).changed
    assert not plan_recovery_truncation([user("u", "x" * 1_000_000)], 128_000).changed
    assert reducible_tool_result_chars([], 200_000) == 0


def test_only_tool_results() -> None:
    entries = [result(f"c{i}", "q" * 30_000) for i in range(3)]
    plan = plan_recovery_truncation(entries, 200_000)
    after = apply_replacements(entries, plan.replacements)
    assert sum(len(e.text) for e in after) <= 40_000


# -- T57 live guard ----------------------------------------------------------------------------


def test_t57_total_above_the_high_water_mark_is_an_overflow() -> None:
    window = 10_000  # cap 36 000 estimated characters; one result may take 10 000
    entries = [user("u", "x" * 30_000)] + [
        e
        for n in range(2)
        for e in (assistant(f"a{n}", "", call(f"c{n}")), result(f"c{n}", "r" * 4_000))
    ]
    guarded = apply_live_guard(entries, window)
    assert guarded.truncated_ids == ()  # older results are not rewritten under pressure
    assert guarded.overflow
    assert (
        guarded.overflow_message
        == LIVE_GUARD_OVERFLOW_TEXT
        == ("Context overflow: estimated context size exceeds safe threshold during tool loop.")
    )
    assert guarded.entries == tuple(entries)


def test_t57_one_oversized_result_is_cut_on_a_copy() -> None:
    window = 10_000
    big = result("c1", "line\n" * 4_000, meta={"details": {"raw": "x" * 50}, "summary": "s"})
    entries = [user("u", "go"), assistant("a", "", call("c1")), big]
    guarded = apply_live_guard(entries, window)
    assert guarded.truncated_ids == ("c1:result",)
    assert not guarded.overflow
    clone = guarded.entries[2]
    assert clone is not big
    assert len(big.text) == 20_000 and "details" in big.meta  # the original is untouched
    assert "details" not in clone.meta
    assert clone.meta["summary"] == "s"
    assert len(clone.text) <= guard_single_result_cap(window) // 2
    assert clone.text.endswith(" more characters truncated]")
    assert guard_entry_chars(clone) <= guard_single_result_cap(window)
    assert guarded.entries[0] is entries[0]


def test_guard_caps() -> None:
    assert guard_single_result_cap(200_000) == 200_000
    assert guard_context_cap(200_000) == 720_000
    assert guard_single_result_cap(100) == 1_024
    assert guard_context_cap(100) == 1_024


def test_guard_drops_images_of_an_oversized_result() -> None:
    entry = result("c1", "short", meta={"images": [{}] * 5})
    guarded = apply_live_guard([entry], 16_000)
    assert guarded.truncated_ids == ("c1:result",)
    assert guarded.entries[0].text == "short"
    assert "images" not in guarded.entries[0].meta


def test_guard_leaves_a_fitting_context_alone() -> None:
    entries = [user("u", "hi"), result("c1", "ok")]
    guarded = apply_live_guard(entries, 200_000)
    assert guarded.entries == tuple(entries)
    assert all(a is b for a, b in zip(guarded.entries, entries, strict=True))
    assert not guarded.overflow and guarded.overflow_message is None


def test_guard_on_empty_context() -> None:
    guarded = apply_live_guard([], 200_000)
    assert guarded.entries == () and not guarded.overflow


def test_truncate_to_budget_cuts_at_a_late_newline() -> None:
    text = "k" * 800 + "\n" + "m" * 5_000
    out = truncate_to_budget(text, 1_000)
    assert out == "k" * 800 + truncation_notice(len(text) - 800)
    assert len(truncate_to_budget("n" * 5_000, 1_000)) <= 1_000
    assert truncate_to_budget("abc", 0) == "abc"[:0] + truncation_notice(3)
