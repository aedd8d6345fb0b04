"""An image read by a tool reaches a vision model as an image block of its provider's API, and a
model that does not see images as a clear text; apply_patch under its alias `apply-patch`.
Real SDKs in a real worker, talking to the fake provider server."""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.fakes.images import tiny_png
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import Deployment

ANTHROPIC_KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude-vision"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
[models.capabilities]
tools = true
images = true

[[models]]
provider = "openai"
id = "fake-gpt-vision"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
[models.capabilities]
tools = true
images = true

[[models]]
provider = "anthropic"
id = "fake-claude-blind"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
[models.capabilities]
tools = true
images = false
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[ANTHROPIC_KEY], openai_keys=[OPENAI_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("tool-images")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=ANTHROPIC_KEY, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "red.png").write_bytes(tiny_png(3, 2))
    return path


async def read_image_with(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str
) -> dict[str, Any]:
    """A run where the model reads red.png then answers; the body of its second request."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "red.png"})]),
        Reply(text="A small red picture."),
    )
    key = f"img-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "what is in red.png?", workspace=str(ws), model=model
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert_transcript_valid(client.transcript(key))
    history = await client.client.get_workflow_handle(receipt.run_id).fetch_history()
    assert base64.b64encode(tiny_png(3, 2)).decode() not in history.to_json()
    body = fake.requests()[-1].body
    assert isinstance(body, dict)
    return body


async def test_a_vision_model_gets_the_image_as_an_anthropic_image_block(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    body = await read_image_with(deployment, fake, ws, "anthropic/fake-claude-vision")
    result = body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    text, image = result["content"]
    assert text["text"].startswith("Image file red.png (PNG, 3x2, ")
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == tiny_png(3, 2)


async def test_a_vision_model_gets_the_image_as_an_openai_image_part(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    body = await read_image_with(deployment, fake, ws, "openai/fake-gpt-vision")
    tool, follow = body["messages"][-2:]
    assert tool["role"] == "tool" and tool["content"].startswith("Image file red.png")
    assert follow["role"] == "user"
    url = follow["content"][1]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(tiny_png(3, 2)).decode()


async def test_a_model_without_vision_is_told_the_image_is_not_shown(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    body = await read_image_with(deployment, fake, ws, "anthropic/fake-claude-blind")
    result = body["messages"][-1]["content"][0]
    assert isinstance(result["content"], str)
    assert "is not shown: this model does not take images" in result["content"]
    sent = json.dumps(body)
    assert base64.b64encode(tiny_png(3, 2)).decode() not in sent
    assert '"type": "image"' not in sent


async def test_apply_patch_under_its_alias(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    (ws / "a.txt").write_text("one\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n-one\n+two\n*** End Patch"
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="apply-patch", arguments={"input": patch})]),
        Reply(text="Patched."),
    )
    key = f"alias-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "patch it", workspace=str(ws), model="anthropic/fake-claude-vision"
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert (ws / "a.txt").read_text() == "two\n"
    tool = next(e for e in client.transcript(key) if e.role == Role.TOOL)
    assert tool.text == "Applied the patch:\nM a.txt" and not tool.is_error
    first = fake.requests()[0].body
    assert "apply_patch" in [t["name"] for t in first["tools"]]


@pytest.mark.parametrize("model", ["anthropic/fake-claude-vision", "openai/fake-gpt-vision"])
async def test_an_image_the_provider_refuses_is_left_out_and_the_session_goes_on(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str
) -> None:
    """A provider's 400 naming an image (a corrupt file, a size it does not take): the call is
    made again without it, with a note the model reads, and so is every later request. It used
    to fail every later message of the session until a reset."""
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "red.png"})]),
        Reply.error(Fault.http(400, message="messages.2.content.0.image: Could not process image")),
        Reply(text="I could not see it."),
        Reply(text="Still here."),
    )
    key = f"imgx-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        key, "what is in red.png?", workspace=str(ws), model=model
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "I could not see it."
    sent = [r.body for r in fake.requests()]
    assert len(sent) == 3
    retried = json.dumps(sent[2])
    assert base64.b64encode(tiny_png(3, 2)).decode() not in retried
    assert "the model's provider refused it" in retried and "Could not process image" in retried
    again = await client.send_and_start(key, "and now?")
    assert again.run_id
    assert (await client.wait_for_run(again.run_id)).reply == "Still here."
    assert base64.b64encode(tiny_png(3, 2)).decode() not in json.dumps(fake.requests()[-1].body)
