"""A message's source reaches its run, and a cron run's LLM idle limit (SPEC §4.6.2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import ValidationError

from activities.liveness import IdleTimeout, with_idle_limit
from agentlane.messages import InboundMessage
from agentlane.run import EntrySource, ExecutionResult
from agentlane.session import SessionSettings
from workflows.policy.idle_limit import NO_IDLE_LIMIT, idle_limit_seconds


def test_messages_are_chat_unless_they_say_otherwise() -> None:
    assert InboundMessage(text="hi").source == EntrySource.CHAT
    assert InboundMessage.model_validate({"text": "hi", "source": "cron"}).source == "cron"


def test_an_unknown_source_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="'chat', 'cli', 'cron' or 'subagent'"):
        InboundMessage.model_validate({"text": "hi", "source": "pager"})


def test_results_recorded_before_sources_read_as_chat() -> None:
    old = {
        "session_key": "k",
        "run_id": "r",
        "status": "success",
        "termination_reason": "no_tool_calls",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:00:01Z",
    }
    assert ExecutionResult.model_validate(old).source == EntrySource.CHAT


def test_idle_limit_by_source() -> None:
    assert SessionSettings(workspace="/w").idle_timeout_seconds is None
    assert idle_limit_seconds(EntrySource.CHAT, None) == 120
    assert idle_limit_seconds(EntrySource.CRON, None) == NO_IDLE_LIMIT
    # What the session was configured with wins, for cron runs too.
    assert idle_limit_seconds(EntrySource.CRON, 300) == 300
    assert idle_limit_seconds(EntrySource.CHAT, 0) == NO_IDLE_LIMIT


async def _silent_then(value: int, silence: float) -> AsyncIterator[int]:
    await asyncio.sleep(silence)
    yield value


async def test_no_idle_limit_lets_a_silent_model_wait() -> None:
    got = [e async for e in with_idle_limit(_silent_then(7, 0.3), NO_IDLE_LIMIT)]
    assert got == [7]


async def test_an_idle_limit_still_fires() -> None:
    with pytest.raises(IdleTimeout, match="LLM idle timeout"):
        _ = [e async for e in with_idle_limit(_silent_then(7, 0.5), 0.1)]
