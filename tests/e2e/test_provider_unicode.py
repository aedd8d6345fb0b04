"""A reply whose JSON escapes a character as a surrogate pair split over two stream chunks, or
holds a lone half, is stored and shown as valid Unicode (the pair joined, a lone half as U+FFFD)
and the run goes on: it used to fail every store write, and each retry called the provider again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentlane.run import ExecutionStatus
from tests.e2e.test_thinking_levels import MODELS, deployment, fake, run_one, ws
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply, ScriptedToolCall
from tests.harness import Deployment

__all__ = ["deployment", "fake", "ws"]  # the fixtures this module uses

SPLIT = "smile \ud83d\ude00 and a lone \ud800 half"  # two code points each: split by chunk_size=1


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "openai-responses"])
async def test_surrogates_in_a_reply_are_mended_and_the_run_goes_on(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, api: str
) -> None:
    call = ScriptedToolCall(
        name="write", arguments={"path": "s.txt", "content": "a\ud800b \ud83d\ude00"}, chunk_size=3
    )
    client, key, got, result = await run_one(
        deployment,
        fake,
        ws,
        MODELS[api],
        Reply(text="writing", tool_calls=[call], api=api),
        Reply(text=SPLIT, chunk_size=1, api=api),
    )
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "smile 😀 and a lone \ufffd half"
    assert (ws / "s.txt").read_text() == "a\ufffdb 😀"
    # One request per model call: nothing was made again.
    assert len(fake.requests(api)) == 2
    shown = "".join(e.text or "" for e in got.events if e.kind.value == "text_delta")
    assert "😀" in shown and "\ud83d" not in shown
    entries = await asyncio.to_thread(client.transcript, key)
    assert any(e.text == result.reply for e in entries)
