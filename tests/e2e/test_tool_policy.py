"""The tool policy pipeline end to end (SPEC §13.3, issue 21): each layer, configured in the
deployment's `config.toml`, removes a tool from what the real Anthropic SDK sends the (fake)
provider, and `agentlane tools` names that layer; a call to a removed tool anyway is refused with
a tool result that says why, and the run goes on. The config is rewritten between tests: a
change applies from the next run on, with no worker restart."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from agentlane.events import EventKind
from agentlane.ids import run_workflow_id
from agentlane.messages import Routing, SendDisposition
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Fault, Reply, ScriptedToolCall
from tests.harness import REPO, Deployment

KEY = "sk-ant-api03-" + secrets.token_hex(24)
CLAUDE = "anthropic/fake-claude"


def models(fake: FakeProviderServer) -> str:
    return f"""
[[models]]
provider = "anthropic"
id = "fake-claude"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("tool-policy")
    (root / "config.toml").write_text(models(fake))
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture(autouse=True)
def _fresh(fake: FakeProviderServer) -> None:
    fake.reset()


def configure(deployment: Deployment, fake: FakeProviderServer, policy: str) -> None:
    (deployment.data_dir / "config.toml").write_text(models(fake) + policy)


async def run_once(
    deployment: Deployment,
    key: str,
    text: str = "hello",
    routing: Routing | None = None,
    sender: str | None = None,
) -> AgentlaneClient:
    client = await AgentlaneClient.connect(settings_for(deployment))
    ws = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    ws.mkdir(parents=True)
    receipt = await client.send_and_start(
        key, text, workspace=str(ws), model=CLAUDE, routing=routing, sender=sender
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    return client


def sent_tools(fake: FakeProviderServer) -> list[str]:
    chat = [r for r in fake.requests("anthropic") if r.purpose == "chat"]
    assert chat, "no model call reached the provider"
    return [t["name"] for t in chat[-1].body.get("tools", [])]


AGENT = '\n[agents.main]\nmodel = "anthropic/fake-claude"\n'
SLACK = Routing(channel="slack", to="C1")

# (layer, config, routing, sender, the tool it removes, the layer's name in `agentlane tools`)
LAYERS = [
    (
        "profile",
        '[tools]\nprofile = "minimal"\nalso_allow = ["read", "edit", "exec"]\n',
        None,
        None,
        "write",
        "profile minimal (tools.profile)",
    ),
    (
        "provider profile",
        '[tools.by_provider."anthropic"]\nprofile = "minimal"\nalso_allow = ["read", "write", '
        '"exec"]\n',
        None,
        None,
        "edit",
        'provider profile minimal (tools.by_provider."anthropic".profile)',
    ),
    ("global", '[tools]\ndeny = ["exec"]\n', None, None, "exec", "global (tools)"),
    (
        "global by provider",
        '[tools.by_provider."anthropic/fake-claude"]\ndeny = ["write"]\n',
        None,
        None,
        "write",
        'global by provider (tools.by_provider."anthropic/fake-claude")',
    ),
    (
        "agent",
        AGENT + '[agents.main.tools]\ndeny = ["edit"]\n',
        None,
        None,
        "edit",
        "agent (agents.main.tools)",
    ),
    (
        "agent by provider",
        AGENT + '[agents.main.tools.by_provider."anthropic"]\ndeny = ["read"]\n',
        None,
        None,
        "read",
        'agent by provider (agents.main.tools.by_provider."anthropic")',
    ),
    (
        "channel",
        '[tools.by_channel.slack]\ndeny = ["bash"]\n',
        SLACK,
        None,
        "exec",
        "channel (tools.by_channel.slack)",
    ),
    (
        "group",
        '[tools.by_channel.slack.groups."C1"]\ndeny = ["group:fs"]\n',
        SLACK,
        None,
        "write",
        'group (tools.by_channel.slack.groups."C1")',
    ),
    (
        "owner-only",
        '[tools]\nowner_senders = ["alice"]\nowner_only = ["exec"]\n',
        None,
        "mallory",
        "exec",
        "owner-only (tools.owner_senders)",
    ),
]


@pytest.mark.parametrize(
    ("layer", "policy", "routing", "sender", "tool", "named"), LAYERS, ids=[x[0] for x in LAYERS]
)
async def test_each_layer_removes_a_tool_from_the_model_call(
    deployment: Deployment,
    fake: FakeProviderServer,
    layer: str,
    policy: str,
    routing: Routing | None,
    sender: str | None,
    tool: str,
    named: str,
) -> None:
    configure(deployment, fake, policy)
    key = f"policy-{uuid.uuid4().hex[:8]}"
    client = await run_once(deployment, key, routing=routing, sender=sender)
    offered = sent_tools(fake)
    assert tool not in offered and offered, (layer, offered)
    report = await client.session_tools(key, routing=routing, sender=sender)
    assert report.session_exists and report.offered == offered
    assert report.removed[tool] == named
    # The same session with a message the scoped layers do not select is offered the tool
    # again: only the channel, group and owner layers depend on the message.
    if routing is not None or sender is not None:
        await run_once(deployment, key, text="again")
        assert tool in sent_tools(fake)


async def test_a_scheduled_message_is_the_operators_for_owner_only_tools(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    """A schedule's firing sends no sender (README: cron counts as the operator's): owner-only
    tools stay offered, as for the same text from the CLI."""
    configure(deployment, fake, '[tools]\nowner_senders = ["alice"]\nowner_only = ["exec"]\n')
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"policy-cron-{uuid.uuid4().hex[:8]}"
    ws = deployment.data_dir / "ws" / key
    ws.mkdir(parents=True)
    sid = f"cron-{uuid.uuid4().hex[:8]}"
    await client.create_schedule(
        sid, key, "hello", every="1h", paused=True, workspace=str(ws), model=CLAUDE
    )
    try:
        await client.trigger_schedule(sid)
        for _ in range(200):
            if [r for r in fake.requests("anthropic") if r.purpose == "chat"]:
                break
            await asyncio.sleep(0.1)
        assert "exec" in sent_tools(fake)
        for _ in range(200):  # the run ends before the next test resets the fake
            status = await client.status(key)
            if status.runs and status.phase == "idle":
                break
            await asyncio.sleep(0.1)
    finally:
        await client.delete_schedule(sid)


async def test_a_call_to_a_removed_tool_is_refused_and_the_run_goes_on(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    configure(
        deployment,
        fake,
        '[tools]\ndeny = ["exec"]\nowner_senders = ["alice"]\nowner_only = ["write"]\n',
    )
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="exec", arguments={"command": "touch pwned"})]),
        Reply(tool_calls=[ScriptedToolCall(name="write", arguments={"path": "x", "content": "y"})]),
        Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "x"})]),
        Reply(text="done"),
    )
    key = f"refused-{uuid.uuid4().hex[:8]}"
    client = await run_once(deployment, key, sender="mallory")
    results = [e for e in client.transcript(key) if e.role == Role.TOOL]
    assert [r.is_error for r in results] == [True, True, True]
    assert "the tool policy removed it (global (tools))" in results[0].text
    assert results[1].text == "Error: Tool restricted to owner senders."
    assert "x" in results[2].text  # read ran: the file was never written
    assert not any(p.name == "pwned" for p in (deployment.data_dir / "ws").rglob("*"))
    assert_transcript_valid(client.transcript(key))
    # Neither tool was ever offered to the model.
    for request in fake.requests("anthropic"):
        names = [t["name"] for t in request.body.get("tools", [])]
        assert "exec" not in names and "write" not in names
    # A client watching sees each refused call open and fail, before the next model call.
    events = [item.event async for item in client.read_events(key, 0)]
    cards = [
        (e.kind, e.tool_name, e.success)
        for e in events
        if e.kind in (EventKind.TOOL_EXECUTION_START, EventKind.TOOL_EXECUTION_END)
    ]
    start, end = EventKind.TOOL_EXECUTION_START, EventKind.TOOL_EXECUTION_END
    assert cards == [
        (start, "exec", None),
        (end, "exec", False),
        (start, "write", None),
        (end, "write", False),
        (start, "read", None),
        (end, "read", False),  # x was never written
    ]
    # The run made three calls, though two were refused.
    result = await client.wait_for_run(run_workflow_id(key, 1))
    assert result.tool_calls == 3
    refused = next(e for e in events if e.kind == end and e.tool_name == "exec")
    assert refused.text and "the tool policy removed it" in refused.text
    started = next(e for e in events if e.kind == start and e.tool_name == "exec")
    assert started.data["input"] == {"command": "touch pwned"}


async def test_an_allow_entry_naming_no_tool_is_a_warning_event(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    configure(deployment, fake, '[tools]\nallow = ["raed", "write"]\n')
    key = f"typo-{uuid.uuid4().hex[:8]}"
    client = await run_once(deployment, key)
    assert sent_tools(fake) == ["write", "apply_patch"]  # apply_patch follows write
    warnings = []
    async for item in client.watch(key, 0):
        if item.event.kind == EventKind.WARNING:
            warnings.append(item.event)
        if item.event.kind == EventKind.AGENT_END:
            break
    assert [w.data["names"] for w in warnings] == [["raed"]]
    assert "'raed'" in (warnings[0].text or "")


def test_the_cli_prints_what_is_offered_and_what_removed_the_rest(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    configure(
        deployment, fake, '[tools]\nprofile = "coding"\ndeny = ["exec"]\nallow = ["raed", "*"]\n'
    )
    env = deployment.env()
    out = subprocess.run(
        [sys.executable, "-m", "clients.cli", "tools", f"none-{uuid.uuid4().hex[:6]}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "offered: read, write, edit, apply_patch, process" in out.stdout
    assert "exec  by global (tools)" in out.stdout
    assert "no such session yet" in out.stdout
    assert "'raed' names no known tool" in out.stderr
    # A config the policy cannot use is refused naming the file and key.
    configure(deployment, fake, '[tools]\nprofile = "mini"\n')
    bad = subprocess.run(
        [sys.executable, "-m", "clients.cli", "tools", "any"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0 and "tools.profile" in bad.stderr and "config.toml" in bad.stderr
    configure(deployment, fake, "")


async def test_a_policy_the_worker_cannot_read_ends_the_run_saying_why(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    # The client refuses a message while the config is invalid, so the config breaks while a
    # queued message waits for the run before it.
    configure(deployment, fake, "")
    fake.script(Reply(text="first", ttft=4.0))
    key = f"bad-{uuid.uuid4().hex[:6]}"
    try:
        client = await AgentlaneClient.connect(settings_for(deployment))
        first = await client.send_and_start(
            key, "hello", workspace=str(deployment.data_dir), model=CLAUDE
        )
        queued = await client.send(key, "and then", mode="followup")
        # The first run's model call is under way (it reads the config too) before it breaks.
        for _ in range(200):
            if fake.requests("anthropic"):
                break
            await asyncio.sleep(0.05)
        configure(deployment, fake, '[tools]\ndeny = "exec"\n')
        await client.wait_for_run(first.run_id or "")
        fate = await client.wait_started(key, queued.message_seq)
        result = await client.wait_for_run(fate.run_id or "")
        assert result.status == ExecutionStatus.ERROR and result.error is not None
        assert "tools.deny" in result.error.message and "config.toml" in result.error.message
        assert len([r for r in fake.requests("anthropic") if r.purpose == "chat"]) == 1
    finally:
        configure(deployment, fake, "")


async def test_a_non_owner_steering_a_run_takes_owner_only_tools_from_its_next_call(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    configure(deployment, fake, '[tools]\nowner_senders = ["alice"]\nowner_only = ["write"]\n')
    fake.script(
        Reply(
            tool_calls=[ScriptedToolCall(name="read", arguments={"path": "nothing.txt"})],
            ttft=4.0,
        ),
        Reply(text="done"),
    )
    key = f"steered-{uuid.uuid4().hex[:8]}"
    client = await AgentlaneClient.connect(settings_for(deployment))
    ws = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    ws.mkdir(parents=True)
    started = await client.send_and_start(
        key, "hello", workspace=str(ws), model=CLAUDE, sender="alice"
    )
    steer = await client.send(key, "and this", mode="steer", sender="mallory")
    assert steer.disposition == SendDisposition.STEERED
    result = await client.wait_for_run(started.run_id or "")
    assert result.status == ExecutionStatus.SUCCESS, result.error
    chat = [r for r in fake.requests("anthropic") if r.purpose == "chat"]
    first, last = ([t["name"] for t in r.body.get("tools", [])] for r in (chat[0], chat[-1]))
    assert "write" in first and "write" not in last and "read" in last


async def test_a_sub_agent_has_no_tool_its_requester_was_denied(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    # A sender on a channel without exec, who is no owner, asks for a sub-agent: the child's
    # exec and write are refused as its parent's were (it was spawned without the message's
    # channel and sender, so only the inherited set can hold it back).
    configure(
        deployment,
        fake,
        '[tools]\nowner_senders = ["alice"]\nowner_only = ["write"]\n'
        '[tools.by_channel.slack]\ndeny = ["exec"]\n',
    )
    fake.script(
        Reply(tool_calls=[ScriptedToolCall(name="sessions_spawn", arguments={"task": "go"})]),
        Reply(tool_calls=[ScriptedToolCall(name="exec", arguments={"command": "touch sub_exec"})]),
        Reply(tool_calls=[ScriptedToolCall(name="write", arguments={"path": "w", "content": "x"})]),
        Reply(tool_calls=[ScriptedToolCall(name="apply_patch", arguments={"input": PATCH})]),
        Reply(text="child done"),
        Reply(text="parent done"),
    )
    key = f"sub-policy-{uuid.uuid4().hex[:8]}"
    client = await run_once(deployment, key, routing=SLACK, sender="mallory")
    files = {p.name for p in (deployment.data_dir / "ws").rglob("*")}
    assert not files & {"sub_exec", "w", "via_patch.txt"}, files
    [spawned] = [e for e in client.transcript(key) if e.tool_name == "sessions_spawn"]
    child = [e for e in client.transcript(str(spawned.meta["child_session_key"])) if e.tool_name]
    results = [e.text for e in child if e.role == Role.TOOL]
    assert "the tool policy removed it (channel (tools.by_channel.slack))" in results[0]
    assert results[1:] == ["Error: Tool restricted to owner senders."] * 2
    # Its requests never offered them.
    child_requests = fake.requests("anthropic")[1:5]
    for request in child_requests:
        names = {t["name"] for t in request.body.get("tools", [])}
        assert not names & {"exec", "write", "apply_patch"}, names


PATCH = "*** Begin Patch\n*** Add File: via_patch.txt\n+x\n*** End Patch"


async def test_an_agents_tool_table_gives_its_sessions_no_fallback_to_the_offline_model(
    deployment: Deployment, fake: FakeProviderServer
) -> None:
    # `[agents.main.tools]` alone (the README's snippet) names no model: a failing provider
    # ends the run in error, never with the offline stand-in's "success".
    configure(deployment, fake, '[agents.main.tools]\ndeny = ["edit"]\n')
    fake.script(Reply.error(Fault.http(401)), Reply.error(Fault.http(401)))
    client = await AgentlaneClient.connect(settings_for(deployment))
    ws = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    ws.mkdir(parents=True)
    receipt = await client.send_and_start(
        f"nofb-{uuid.uuid4().hex[:8]}", "hello", workspace=str(ws), model=CLAUDE
    )
    assert receipt.run_id
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ERROR, result.reply
    assert result.fallback_model is None
