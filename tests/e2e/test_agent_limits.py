"""`[agents.main] idle_timeout_seconds` and `max_wait_seconds` are a new session's limits: the
errors that name them point there, so a user can act on them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.test_thinking_levels import OPENAI_KEY
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply
from tests.harness import Deployment


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(openai_keys=[OPENAI_KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("limits")
    (root / "config.toml").write_text(
        f"""
[[models]]
provider = "openai"
id = "slow-gpt"
api = "openai-chat"
base_url = "{fake.openai_base_url}"

[agents.main]
model = "openai/slow-gpt"
idle_timeout_seconds = 2
max_wait_seconds = 1
"""
    )
    dep = make_deployment(server, root, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def test_a_new_session_takes_its_agents_idle_limit(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    stalled = Reply(text="too slow to matter", fault=Fault.stall(30, after_deltas=0))
    fake.script(stalled, stalled)
    ws = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    ws.mkdir(parents=True)
    started = time.monotonic()
    receipt = await client.send_and_start(f"lim-{uuid.uuid4().hex[:8]}", "hi", workspace=str(ws))
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ERROR and result.error is not None
    assert "no output for 2 s" in result.error.message or "2 s" in result.error.message
    assert "`[agents.main]` in the config" in result.error.message, result.error.message
    assert time.monotonic() - started < 20
