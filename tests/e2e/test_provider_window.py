"""The provider's own figures win (SPEC §5.6): a server whose window is smaller than the config
says refuses a prompt with its real window in the error; the run compacts to fit that window
and makes the call again, the session remembers the window (and shows it in `status`), and the
next runs fit it from the start."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import collect
from tests.e2e.test_real_providers import Finished
from tests.fakes.provider_server import FakeProviderServer
from tests.harness import Deployment

KEY = "sk-ant-api03-" + secrets.token_hex(24)
OPENAI_KEY = "sk-proj-" + secrets.token_hex(24)
CLAUDE = "anthropic/claude-16k"
GPT = "openai/gpt-16k"


def config_toml(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "claude-16k"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
context_window = 16000

[[models]]
provider = "openai"
id = "gpt-16k"
api = "openai-chat"
base_url = "{fake.openai_base_url}"
context_window = 16000
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY], openai_keys=[OPENAI_KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("window")
    (root / "config.toml").write_text(config_toml(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=OPENAI_KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _fresh(fake: FakeProviderServer) -> Iterator[None]:
    fake.reset()
    yield
    fake.context_window(None)


@pytest.fixture
def ws(deployment: Deployment) -> Path:
    path = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


async def send(
    deployment: Deployment,
    ws: Path,
    key: str,
    text: str,
    model: str,
    overrides: dict[str, object] | None = None,
) -> Finished:
    client = await AgentlaneClient.connect(settings_for(deployment))
    receipt = await client.send_and_start(
        key, text, workspace=str(ws), model=model, session_overrides=overrides
    )
    assert receipt.run_id
    got = await collect(client, key, receipt.run_id, timeout=90)
    return Finished(client, key, got, await client.wait_for_run(receipt.run_id))


async def session_runs(client: AgentlaneClient, key: str) -> int:
    """How many executions the session's chain has had (each continue-as-new adds one)."""
    query = f'WorkflowId = "session:{key}"'
    return len([wf async for wf in client.client.list_workflows(query)])


def filler(n: int, words: int) -> str:
    return f"message {n}: remember the number {n * 7}. " + " ".join(
        f"word{i}" for i in range(words)
    )


@pytest.mark.parametrize("model", [CLAUDE, GPT])
async def test_the_provider_window_wins_and_is_remembered(
    deployment: Deployment, fake: FakeProviderServer, ws: Path, model: str
) -> None:
    key = f"win-{uuid.uuid4().hex[:8]}"
    api = "anthropic" if model == CLAUDE else "openai-chat"
    # The history is built while the server still takes 16 000 tokens... (and the session
    # continues as new often, so what it remembers has to cross continue-as-new)
    for n in range(5):
        done = await send(
            deployment, ws, key, filler(n, 320), model, {"continue_as_new_after_events": 20}
        )
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    # ... then the server turns out to enforce 6 000: the prompt it refuses (with its figures)
    # is compacted to fit 6 000 and the call is made again.
    fake.reset()
    fake.context_window(6000)
    # A long message: with it, the context after any compaction (~4 300 tokens) still needs
    # more than the prompt budget of a 6 000 window, but it fits the window.
    done = await send(deployment, ws, key, "what was the first number? " + filler(99, 1300), model)
    assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
    log = fake.log()
    refused = [e for e in log if e["outcome"] == "overflow"]
    assert len(refused) == 1, [(e["prompt_tokens"], e["outcome"]) for e in log]
    answered = [e for e in log if e["outcome"] != "overflow" and e.get("purpose") != "summary"]
    assert answered and int(answered[-1]["prompt_tokens"]) <= 6000
    warnings = [e for e in done.got.events if e.kind == EventKind.WARNING]
    learned = [w for w in warnings if (w.data or {}).get("code") == "provider_window"]
    assert len(learned) == 1 and "6000" in (learned[0].text or ""), [w.text for w in warnings]
    status = await done.client.status(key)
    assert status.provider_window == 6000
    learned_in = await session_runs(done.client, key)
    # The next runs fit the real window from the start: nothing more is refused.
    fake.reset()
    fake.context_window(6000)
    for n in range(3):
        again = await send(deployment, ws, key, filler(10 + n, 320), model)
        assert again.result.status == ExecutionStatus.SUCCESS, again.result.error
    log = fake.log()
    assert not [e for e in log if e["outcome"] == "overflow"], log
    assert {e["api"] for e in log} == {api}
    # Compacted before sending (the preemptive check), to fit the remembered window.
    ends = [e for e in again.got.events if e.kind == EventKind.COMPACTION_END]
    assert any(e.data["trigger"] == "precheck" for e in ends), [e.data for e in ends]
    assert (await again.client.status(key)).provider_window == 6000
    # ... by a session that has continued as new since it learned the window.
    assert await session_runs(again.client, key) > learned_in


async def test_a_turn_too_big_for_the_real_window_is_lost_with_the_real_figures(
    deployment: Deployment, fake: FakeProviderServer, ws: Path
) -> None:
    """Only when even the smallest context (the turn in progress and the system prompt) cannot
    fit the provider's window is the run lost, and the error gives the provider's figures, not
    the configured window or a budget."""
    key = f"lost-{uuid.uuid4().hex[:8]}"
    fake.context_window(6000)
    # Under the configured prompt budget (16 000 - reserve), over the real 6 000 (with the
    # default six tools: estimated ~7 700 of 8 000, counted ~6 400 by the server).
    done = await send(deployment, ws, key, "too big: " + filler(99, 2500), CLAUDE)
    assert done.result.status == ExecutionStatus.ERROR
    assert done.result.error is not None
    message = done.result.error.message
    refused = [e for e in fake.log() if e["outcome"] == "overflow"]
    assert len(refused) == 1
    counted = int(refused[0]["prompt_tokens"])
    assert f"anthropic counted {counted} tokens against its context window of 6000" in message
    # The next message cannot fit either (the turn that did not fit is still the latest):
    # checked before sending against the remembered window, which the error names.
    fake.reset()
    fake.context_window(6000)
    stuck = await send(deployment, ws, key, "and now?", CLAUDE)
    assert stuck.result.error is not None
    assert "anthropic enforces a context window of 6000 tokens" in stuck.result.error.message
    assert fake.log() == [], "nothing oversized was sent"
    # After the reset the message names, the session goes on, and remembers the window.
    await done.client.reset(key)
    after = await send(deployment, ws, key, "a short one", CLAUDE)
    assert after.result.status == ExecutionStatus.SUCCESS, after.result.error
    assert (await after.client.status(key)).provider_window == 6000


async def test_one_compaction_makes_room_for_the_check_before_the_call(
    deployment: Deployment, ws: Path
) -> None:
    """Review Q F-e: on a 16 000-token window, each compaction was followed at once by a
    second one: it sized its result against the bare budget, the check before the call pads
    its estimate by a safety margin. Sized against what that check allows, one is enough."""
    key = f"once-{uuid.uuid4().hex[:8]}"
    compacting_runs = 0
    for n in range(30):
        done = await send(deployment, ws, key, filler(n, 250), CLAUDE)
        assert done.result.status == ExecutionStatus.SUCCESS, done.result.error
        ends = [e for e in done.got.events if e.kind == EventKind.COMPACTION_END]
        # By number: a retried attempt's repeat of the same compaction is not a second one.
        made = {e.data["compaction"] for e in ends}
        assert len(made) <= 1, (n, [(e.event_id, e.run_id, e.data) for e in ends])
        compacting_runs += len(made)
    assert compacting_runs >= 2, "the history should have needed compacting"
