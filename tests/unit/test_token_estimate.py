"""Token estimates and their calibration by reported usage (SPEC §11.2, §10.2)."""

from __future__ import annotations

from activities.context.token_estimate import (
    calibrated_context_tokens,
    entry_chars,
    estimate_entry_tokens,
    estimate_text_tokens,
    estimate_tokens,
    guard_context_chars,
    guard_entry_chars,
    image_count,
    reported_context_tokens,
)
from agentlane.transcript import ToolCall
from agentlane.usage import Usage
from tests.unit.transcript_factory import assistant, call, result, system, user


def test_text_is_four_characters_a_token_rounded_up() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens("abc") == 1
    assert estimate_text_tokens("abcd") == 1
    assert estimate_text_tokens("abcde") == 2
    assert estimate_entry_tokens(user("u", "x" * 4_001)) == 1_001


def test_assistant_counts_text_reasoning_and_tool_calls() -> None:
    entry = assistant("a", "four", call("c1", "read", path="a.txt"), reasoning="thinking")
    # "read" + {"path":"a.txt"} (compact JSON, as the model wrote it)
    assert entry_chars(entry) == 4 + 8 + 4 + len('{"path":"a.txt"}')
    assert estimate_entry_tokens(entry) == -(-entry_chars(entry) // 4)


def test_unparsed_tool_arguments_count_as_written() -> None:
    bad = ToolCall(id="c1", name="exec", raw_arguments="[1, 2, 3]")
    assert entry_chars(assistant("a", "", bad)) == len("exec") + len("[1, 2, 3]")


def test_unicode_counts_code_points_not_bytes() -> None:
    text = "日本語のテキスト" * 10  # 80 code points, 240 UTF-8 bytes
    assert estimate_entry_tokens(user("u", text)) == 20


def test_images_cost_1200_tokens_each_in_the_compaction_estimate() -> None:
    entry = result("c1", "abc", meta={"images": [{"mime": "image/png"}, {"mime": "image/png"}]})
    assert image_count(entry) == 2
    assert estimate_entry_tokens(entry) == 1 + 2 * 1_200


def test_malformed_images_meta_counts_nothing() -> None:
    assert image_count(user("u", meta={"images": "not a list"})) == 0


def test_guard_counts_tool_results_double_and_images_8000_chars() -> None:
    assert guard_entry_chars(user("u", "x" * 100)) == 100
    assert guard_entry_chars(result("c1", "x" * 100)) == 200
    with_image = result("c1", "x" * 100, meta={"images": [{}]})
    assert guard_entry_chars(with_image) == 2 * (100 + 8_000)
    assert guard_context_chars([user("u", "x" * 10), result("c1", "y" * 10)]) == 30


def test_empty_transcript_estimates_zero() -> None:
    assert estimate_tokens([]) == 0
    assert calibrated_context_tokens([]).tokens == 0
    assert calibrated_context_tokens([]).anchor_index is None


def test_huge_single_entry() -> None:
    assert estimate_tokens([result("c1", "z" * 2_000_000)]) == 500_000


def test_reported_usage_is_the_truth_for_what_it_covered() -> None:
    entries = [
        user("u1", "x" * 40_000),  # estimated 10 000, but the provider knows better
        assistant("a1", "y" * 400, usage=Usage(input=3_000, cache_read=500, output=100)),
        user("u2", "z" * 400),
    ]
    measured = calibrated_context_tokens(entries)
    assert measured.anchor_index == 1
    assert measured.reported == 3_600
    assert measured.estimated == 100
    assert measured.tokens == 3_700


def test_without_usage_everything_is_estimated() -> None:
    entries = [user("u1", "x" * 400), assistant("a1", "y" * 400), system("s", "z" * 4)]
    measured = calibrated_context_tokens(entries)
    assert measured.anchor_index is None
    assert measured.tokens == measured.estimated == 201


def test_failed_calls_do_not_anchor() -> None:
    for reason in ("error", "aborted", "idle_timeout"):
        broken = assistant("a", "partial", stop_reason=reason, usage=Usage(input=9_999))
        assert reported_context_tokens(broken) is None
    zero = assistant("a", "ok", usage=Usage())
    assert reported_context_tokens(zero) is None
    entries = [
        user("u1", "x" * 40),
        assistant("a1", "ok", usage=Usage(input=50, output=5)),
        user("u2", "y" * 40),
        assistant("a2", "partial", stop_reason="aborted", usage=Usage(input=9_999)),
    ]
    measured = calibrated_context_tokens(entries)
    assert measured.anchor_index == 1
    assert measured.tokens == 55 + 10 + 2


def test_usage_before_a_rewrite_is_ignored() -> None:
    entries = [
        user("u1", "x" * 40),
        assistant("a1", "ok", usage=Usage(input=90_000)),
        result("c1", "y" * 40),
    ]
    assert calibrated_context_tokens(entries).tokens == 90_000 + 10
    rewritten = calibrated_context_tokens(entries, usage_valid_from=2)
    assert rewritten.anchor_index is None
    assert rewritten.tokens == estimate_tokens(entries)


def test_only_tool_results() -> None:
    entries = [result("c1", "a" * 8), result("c2", "b" * 8)]
    assert estimate_tokens(entries) == 4
    assert guard_context_chars(entries) == 32
