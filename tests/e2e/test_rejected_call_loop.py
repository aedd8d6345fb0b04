"""A model that keeps making a call the engine rejects (arguments cut off by its output limit, a
tool that does not exist or the policy removed) is stopped by loop detection like one repeating a
call that runs: it used to loop, paying for every model call, for the run's 48 hours."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from tests.e2e.test_thinking_levels import MODELS, deployment, fake, run_one, ws
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply, ScriptedToolCall
from tests.harness import Deployment

__all__ = ["deployment", "fake", "ws"]  # the fixtures this module uses

CUT = ScriptedToolCall(name="write", arguments='{"path": "t.txt", "content": "partial cont')
UNKNOWN = ScriptedToolCall(name="frobnicate", arguments={"x": 1})


@pytest.mark.parametrize("call", [CUT, UNKNOWN], ids=["cut-arguments", "unknown-tool"])
async def test_a_rejected_call_made_again_and_again_stops_the_run(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, call: ScriptedToolCall
) -> None:
    replies = [
        Reply(text="Writing now.", tool_calls=[call], stop_reason="max_tokens", api="anthropic")
        for _ in range(60)
    ]
    _, _, got, result = await run_one(deployment, fake, ws, MODELS["anthropic"], *replies)
    assert result.status == ExecutionStatus.ERROR, result
    assert result.error is not None
    assert "kept repeating tool calls that loop detection blocked" in result.error.message
    made = len(fake.requests("anthropic"))
    assert made < 45, made
    loops = [e for e in got.events if e.kind == EventKind.TOOL_LOOP]
    assert loops and any(e.data.get("blocked") for e in loops)
    if call is CUT:
        # The model is told why its arguments broke, in the result it reads.
        told = str(fake.requests("anthropic")[1].body)
        assert "reached the output-token limit inside these arguments" in told
