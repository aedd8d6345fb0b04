"""A message that names a model moves its session to that model from then on: a session made
on a model that cannot serve it (no key, a window too small) is not stuck with it."""

from __future__ import annotations

from pathlib import Path

from agentlane.run import ExecutionStatus
from tests.e2e.test_thinking_levels import MODELS, deployment, fake, run_one, ws
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply
from tests.harness import Deployment

__all__ = ["deployment", "fake", "ws"]  # the fixtures this module uses


async def test_a_message_naming_another_model_moves_the_session_to_it(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    client, key, _, first = await run_one(
        deployment, fake, ws, MODELS["anthropic"], Reply(text="from claude", api="anthropic")
    )
    assert first.status == ExecutionStatus.SUCCESS, first.error
    fake.reset()
    fake.script(Reply(text="from gpt", api="openai-chat"))
    receipt = await client.send_and_start(key, "and now you", model=MODELS["openai-chat"])
    assert receipt.run_id
    second = await client.wait_for_run(receipt.run_id)
    assert second.status == ExecutionStatus.SUCCESS, second.error
    assert second.reply == "from gpt"
    assert len(fake.requests("openai-chat")) == 1 and not fake.requests("anthropic")
    assert (await client.status(key)).model == MODELS["openai-chat"]
    # The next message keeps it.
    fake.reset()
    fake.script(Reply(text="still gpt", api="openai-chat"))
    third = await client.send_and_start(key, "again")
    assert third.run_id
    assert (await client.wait_for_run(third.run_id)).reply == "still gpt"
