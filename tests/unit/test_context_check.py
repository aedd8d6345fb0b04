"""The preemptive check as the model-call activity measures it (activities/context/context_check),
and how deep a compaction cuts (compaction_plan.keep_recent_budget)."""

from __future__ import annotations

import random

import pytest

from activities.context import context_check
from activities.context.compaction_plan import keep_recent_budget
from activities.context.context_check import check_context
from activities.context.request_context import context_for_request
from activities.context.token_estimate import calibrated_context_tokens
from activities.context.tool_result_truncation import reducible_tool_result_chars
from agentlane.context_ops import CompactionOutcome, CompactionResult
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from agentlane.usage import Usage
from workflows.policy.preemptive_check import PrecheckRoute, precheck

WINDOW = 32_000
RESERVE = 20_000  # the original's floor; the prompt budget of a 32 000 window is 12 000


def entries_of(
    chars: int, *, tool_chars: int = 0, usage: Usage | None = None
) -> list[TranscriptEntry]:
    out = [TranscriptEntry(id="u1", role=Role.USER, ts=0, text="x" * chars)]
    if tool_chars:
        out += [
            TranscriptEntry(
                id="a1",
                role=Role.ASSISTANT,
                ts=0,
                tool_calls=[ToolCall(id="t1", name="read", arguments={"path": "f"})],
                usage=usage,
            ),
            TranscriptEntry(
                id="t1:result",
                role=Role.TOOL,
                ts=0,
                tool_call_id="t1",
                tool_name="read",
                text="y" * tool_chars,
            ),
        ]
    return out


def read_results(count: int, chars: int) -> list[TranscriptEntry]:
    """`count` read calls, each answered with `chars` characters."""
    out: list[TranscriptEntry] = []
    for n in range(count):
        out += [
            TranscriptEntry(
                id=f"a{n}",
                role=Role.ASSISTANT,
                ts=0,
                tool_calls=[ToolCall(id=f"t{n}", name="read", arguments={"path": "f"})],
            ),
            TranscriptEntry(
                id=f"t{n}:result",
                role=Role.TOOL,
                ts=0,
                tool_call_id=f"t{n}",
                tool_name="read",
                text="y" * chars,
            ),
        ]
    return out


def check(entries: list[TranscriptEntry], overhead: int = 500):
    return check_context(
        context_for_request(entries, WINDOW),
        overhead_tokens=overhead,
        context_window=WINDOW,
        reserve_tokens=RESERVE,
    )


def test_a_small_context_fits() -> None:
    assert check(entries_of(4_000)).fits


def test_a_request_that_fits_plans_no_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    def planned(*_: object) -> int:
        raise AssertionError("the recovery truncation was planned for a request that fits")

    monkeypatch.setattr(context_check, "reducible_tool_result_chars", planned)
    assert check(entries_of(4_000, tool_chars=2_000)).fits


def test_a_context_over_the_guard_s_cap_still_plans_the_truncation() -> None:
    # Five 90 000-character results on a 200 000-token window: the precheck's estimate fits
    # (~135 000 tokens of a 180 000 budget) but the live guard, counting results double, is
    # over its cap (900 000 of 720 000 characters): the route needs what truncation frees.
    entries = entries_of(400) + read_results(5, 90_000)
    context = context_for_request(entries, 200_000)
    checked = context_check.check_context(
        context, overhead_tokens=500, context_window=200_000, reserve_tokens=RESERVE
    )
    assert context.overflow and checked.result.overflow_tokens == 0
    assert checked.result.reducible_chars > 0
    assert checked.route is PrecheckRoute.COMPACT_THEN_TRUNCATE


@pytest.mark.parametrize("seed", range(20))
def test_the_route_is_the_one_the_whole_plan_gives(seed: int) -> None:
    """Measured only when needed, the truncation plan still decides every route it did."""
    rng = random.Random(seed)
    routes = set()
    for _ in range(40):
        usage = Usage(input=rng.randint(0, 12_000), output=10) if rng.random() < 0.3 else None
        entries = entries_of(
            rng.randint(0, 60_000), tool_chars=rng.choice([0, 2_000, 30_000, 90_000]), usage=usage
        )
        window = rng.choice([8_000, WINDOW, 200_000])
        context = context_for_request(entries, window)
        lazy = context_check.check_context(
            context, overhead_tokens=500, context_window=window, reserve_tokens=RESERVE
        )
        assert context.view is not None
        counted = calibrated_context_tokens(
            context.entries, usage_valid_from=context_check.usage_valid_from(context)
        )
        eager = precheck(
            history_tokens=counted.estimated,
            system_prompt_tokens=0 if counted.reported else 500,
            prompt_tokens=0,
            context_window=window,
            reserve_tokens=RESERVE,
            reducible_chars=reducible_tool_result_chars(context.entries, window),
            reported_tokens=counted.reported,
        )
        whole = context_check.ContextCheck(eager, context.overflow, lazy.prompt_tokens)
        assert lazy.route is whole.route
        if lazy.route is not PrecheckRoute.FITS:
            assert lazy.result == eager
        routes.add(lazy.route)
    assert PrecheckRoute.FITS in routes and len(routes) > 1


def test_a_long_conversation_without_tool_results_must_compact() -> None:
    checked = check(entries_of(48_000))  # 12 000 tokens, × 1.2 over the 12 000 budget
    assert checked.route is PrecheckRoute.COMPACT_ONLY
    assert checked.result.prompt_budget_tokens == 12_000


def test_many_medium_tool_results_compact_then_truncate() -> None:
    entries = entries_of(400) + read_results(4, 12_000)
    checked = check(entries)
    assert checked.route is PrecheckRoute.COMPACT_THEN_TRUNCATE
    assert checked.result.reducible_chars > 0


def test_reported_usage_is_counted_exactly_not_padded() -> None:
    # The provider said the context before the tool result held 9 000 tokens; the estimate of
    # the same entries would be far lower. The report wins, and carries no safety margin.
    usage = Usage(input=9_000, output=100)
    checked = check(entries_of(400, tool_chars=4_000, usage=usage))
    assert checked.result.estimated_prompt_tokens == 9_100 + 1_200
    assert checked.fits


def test_keep_recent_shrinks_with_each_attempt_and_with_an_underestimate() -> None:
    first = keep_recent_budget(12_000, 1)
    assert first == 3_600
    assert keep_recent_budget(12_000, 2) == 1_800
    assert keep_recent_budget(12_000, 3) == 900
    assert keep_recent_budget(12_000, 1, underestimate=2.0) == 1_800
    assert keep_recent_budget(200_000, 1) == 20_000  # pi's figure on a large window
    assert keep_recent_budget(12_000, 1, configured=5_000) == 5_000
    # Refused as too long with no figures while it fits: at most half the conversation stays.
    assert keep_recent_budget(200_000, 1, unmeasured_overflow_body=3_300) == 1_650
    assert keep_recent_budget(200_000, 2, unmeasured_overflow_body=3_300) == 825


def test_compaction_result_line_names_what_happened() -> None:
    done = CompactionResult(
        outcome=CompactionOutcome.COMPACTED,
        tokens_before=30_000,
        tokens_after=6_000,
        summarized=40,
        summariser="offline/planner",
        duration_ms=120,
    )
    assert done.line() == "compacted 40 entries: ~30000 -> ~6000 tokens (offline/planner, 120 ms)"
    failed = CompactionResult(outcome=CompactionOutcome.SUMMARY_FAILED, message="timed out")
    assert failed.line() == "not compacted (summary_failed): timed out"
    assert not failed.compacted
