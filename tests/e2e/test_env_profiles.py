"""A profile named in the config with its key in `AGENTLANE_KEY_<PROFILE>` alone (a container
given its keys in the environment, nothing stored): runs use it, `auth list` shows it, and no
tool output shows the key."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply, ScriptedToolCall
from tests.harness import REPO, Deployment

KEY = "sk-container-" + secrets.token_hex(20)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[], openai_keys=[KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("envprofiles")
    (root / "config.toml").write_text(
        f"""
default_model = "gpt/fake"

[[models]]
provider = "gpt"
id = "fake"
api = "openai-chat"
base_url = "{fake.openai_base_url}"

[auth.profiles."gpt:container"]
provider = "gpt"
"""
    )
    dep = make_deployment(server, root, AGENTLANE_KEY_GPT_CONTAINER=KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def test_a_configured_profile_with_its_key_in_the_environment_serves_runs(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="exec", arguments={"command": "env"})]),
        Reply(text="served"),
    )
    client = await AgentlaneClient.connect(settings_for(deployment))
    ws = deployment.data_dir / "ws"
    ws.mkdir(exist_ok=True)
    receipt = await client.send_and_start(f"env-{uuid.uuid4().hex[:6]}", "hi", workspace=str(ws))
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply == "served"
    sent = fake.requests("openai-chat")[0]
    assert sent.headers.get("authorization") == f"Bearer {KEY}"
    # The command's environment listing, as watchers and history see it, hides the key (the
    # transcript keeps the whole result, for the model: README "Watching runs").
    events = [i.event async for i in client.read_events(receipt.session_key, 0)]
    [shown] = [e for e in events if e.kind == EventKind.TOOL_EXECUTION_END]
    assert shown.text and "AGENTLANE_KEY_GPT_CONTAINER=" in shown.text and KEY not in shown.text

    listed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "clients.cli", "auth", "list"],
        cwd=REPO,
        env=deployment.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "gpt:container" in listed.stdout and KEY not in listed.stdout
    assert "AGENTLANE_KEY_GPT_CONTAINER (this shell's; a worker reads its own" in listed.stdout
