"""Reset and branches end to end (issue 10, "a session is never bricked"): a real dev server and a
real worker. A reset while idle and while a run is busy (the run aborted, a queued message kept
and answered in the fresh context), a branch that goes on beside its parent, the errors that make
nothing, and what the model was sent each time: with the offline model (its tool call ids count
the assistant entries it was sent; its usage counts the characters) and with the fake provider
server (the recorded request bodies)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy

from agentlane import search_attributes as sa
from agentlane.events import EventKind
from agentlane.ids import session_workflow_id
from agentlane.messages import SendDisposition
from agentlane.run import ExecutionResult, ExecutionStatus
from agentlane.session import BranchSource, SessionInput
from agentlane.transcript import Role, TranscriptEntry
from clients.api import AgentlaneClient, BranchRejected, SessionNotFound
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import assert_transcript_valid, wait_idle
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply
from tests.harness import REPO, Deployment
from workflows.session import SessionWorkflow

MODEL = "anthropic/fake-claude"
KEY = "sk-ant-api03-" + uuid.uuid4().hex


async def run(client: AgentlaneClient, key: str, text: str, **kwargs: object) -> ExecutionResult:
    receipt = await client.send_and_start(key, text, **kwargs)  # type: ignore[arg-type]
    assert receipt.run_id, receipt
    return await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)


def calls_of(entries: list[TranscriptEntry], run_id: str) -> list[str]:
    return [c.id for e in entries if e.run_id == run_id for c in e.tool_calls]


def of_role(entries: list[TranscriptEntry], role: Role) -> list[TranscriptEntry]:
    return [e for e in entries if e.role == role]


async def reset_events(client: AgentlaneClient, key: str) -> list[dict[str, object]]:
    """The session_reset events in the stream (read to its current end)."""
    end = await client.events_offset(key)
    found: list[dict[str, object]] = []
    if not end:
        return found

    async def go() -> None:
        async for item in client.watch(key, 0):
            if item.event.kind == EventKind.SESSION_RESET:
                found.append(item.event.data)
            if item.offset >= end - 1:
                return

    await asyncio.wait_for(go(), 30)
    return found


def cli(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        env=dep.env(),
        capture_output=True,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


async def acli(dep: Deployment, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(cli, dep, *args)


# -- the offline model -----------------------------------------------------------------------


async def test_reset_while_idle_answers_the_next_message_from_a_fresh_context(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    ws = str(workspace)
    await run(client, session_key, "say something to remember", workspace=ws)
    before = await run(client, session_key, "read notes.txt")
    # Two assistant entries were sent with the second run's first call.
    assert calls_of(client.transcript(session_key), before.run_id)[0].startswith("call_2_0_")

    receipt = await client.reset(session_key, "start over", by="test")
    assert receipt.session_key == session_key and not receipt.run_aborted
    assert receipt.queued_kept == 0 and "next message starts afresh" in receipt.note
    entries = client.transcript(session_key)
    marker = entries[-1]
    assert marker.role == Role.RESET and marker.id == receipt.entry_id
    assert marker.parent_id == entries[-2].id
    assert marker.meta["by"] == "test" and marker.meta["reason"] == "start over"
    status = await client.status(session_key)
    assert status.resets == 1 and status.last_reset_entry_id == receipt.entry_id
    assert status.last_result is None, "the old context's figures are cleared"
    assert status.runs == 2, "the session's totals stay"
    events = await reset_events(client, session_key)
    assert [e["entry_id"] for e in events] == [receipt.entry_id]

    after = await run(client, session_key, "read notes.txt")
    assert after.status == ExecutionStatus.SUCCESS, after.error
    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    # Nothing before the reset was sent: no assistant entry came with the first call...
    assert calls_of(entries, after.run_id)[0].startswith("call_1_0_")
    first_user = next(e for e in entries if e.run_id == after.run_id and e.role == Role.USER)
    assert first_user.parent_id == receipt.entry_id
    # ...and the model was sent exactly what a new session with this message is sent.
    fresh = await run(client, f"{session_key}-fresh", "read notes.txt", workspace=ws)
    assert after.usage.last_call.input == fresh.usage.last_call.input
    assert after.usage.last_call.input < before.usage.last_call.input


async def test_reset_while_busy_aborts_the_run_and_keeps_the_queued_message(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    ws = str(workspace)
    await run(client, session_key, "say an earlier conversation", workspace=ws)
    busy = await client.send_and_start(session_key, "run `sleep 30`")
    assert busy.run_id
    queued = await client.send(session_key, "say after the reset", mode="followup")
    assert queued.disposition == SendDisposition.QUEUED

    receipt = await asyncio.wait_for(client.reset(session_key), 30)
    assert receipt.aborted_run_id == busy.run_id
    assert receipt.queued_kept == 1 and "1 queued message kept" in receipt.note
    aborted = await client.wait_for_run(busy.run_id)
    assert aborted.status == ExecutionStatus.ABORTED

    fate = await client.wait_started(session_key, queued.message_seq)
    assert fate.run_id
    answered = await client.wait_for_run(fate.run_id)
    assert answered.status == ExecutionStatus.SUCCESS and answered.reply == "after the reset"
    await wait_idle(client, session_key, runs=3)

    entries = client.transcript(session_key)
    assert_transcript_valid(entries)
    reset_at = next(i for i, e in enumerate(entries) if e.role == Role.RESET)
    assert all(e.run_id != busy.run_id for e in entries[reset_at:]), "the aborted run is before"
    assert [e.text for e in of_role(entries[reset_at:], Role.USER)] == ["say after the reset"]
    stopped = [e for e in entries if e.role == Role.TOOL and e.run_id == busy.run_id]
    assert stopped and stopped[0].is_error, "the aborted call is answered in the old branch"
    fresh = await run(client, f"{session_key}-fresh", "say after the reset", workspace=ws)
    assert answered.usage.last_call.input == fresh.usage.last_call.input


async def test_branch_goes_on_beside_its_parent(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    ws = str(workspace)
    first = await run(client, session_key, "say one", workspace=ws)
    await run(client, session_key, "say two")
    entries = client.transcript(session_key)
    point = first.last_entry_id
    assert point is not None

    receipt = await client.branch(session_key, point)
    child = receipt.session_key
    assert child == f"{session_key}-b1"
    assert receipt.parent_session == session_key and receipt.branch_point == point
    assert receipt.copied == 2  # "say one" and its answer
    copied = client.transcript(child)
    assert [e.id for e in copied[:2]] == [e.id for e in entries[:2]]
    assert copied[2].role == Role.BRANCH and copied[2].id == receipt.entry_id
    assert copied[2].meta == {"parent_session": session_key, "branch_point": point}
    status = await client.status(child)
    assert status.workspace == ws, "the branch keeps the parent's settings"
    # Its page in the UI says what it is a branch of, and who made it.
    described = await client.client.get_workflow_handle(f"session:{child}").describe()
    page = await described.static_details()
    assert page is not None and f"**branch of:** **{session_key}**" in page, page
    # Found by its model and agent before its first run (`sessions --model`, the UI).
    found = described.typed_search_attributes
    assert found.get(sa.MODEL_KEY) == status.model and found.get(sa.AGENT_KEY) == "main"
    assert f"`{point}`" in page and "**created by:**" in page

    in_child = await run(client, child, "read notes.txt")
    in_parent = await run(client, session_key, "read notes.txt")
    # Each model call was sent its own session's history: one earlier answer in the branch,
    # two in the parent.
    child_entries, parent_entries = client.transcript(child), client.transcript(session_key)
    assert calls_of(child_entries, in_child.run_id)[0].startswith("call_2_0_")
    assert calls_of(parent_entries, in_parent.run_id)[0].startswith("call_3_0_")
    assert_transcript_valid(child_entries)
    assert_transcript_valid(parent_entries)
    assert "say two" not in [e.text for e in child_entries]
    assert not any(e.run_id and e.run_id.startswith(f"session:{child}:") for e in parent_entries)

    second = await client.branch(session_key, point)
    assert second.session_key == f"{session_key}-b2", "the next free default key"

    async def listed() -> list[str]:
        while True:
            nodes = {n.key: n for n in await client.session_tree()}
            node = nodes.get(child)
            # Both branches listed (the second one too, so the first is not the last child).
            if (
                node is not None
                and node.parent_session == session_key
                and second.session_key in nodes
            ):
                assert node.branch_point == point
                from clients.session_text import tree_lines

                return tree_lines(list(nodes.values()))
            await asyncio.sleep(0.3)  # visibility is eventually consistent

    lines = await asyncio.wait_for(listed(), 30)
    parent_line = next(i for i, ln in enumerate(lines) if ln.startswith(f"{session_key} ("))
    assert lines[parent_line + 1].startswith("├── " + child)
    assert f"branched at {point}" in lines[parent_line + 1]


async def test_branch_from_before_a_reset_restores_the_old_branch(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    first = await run(client, session_key, "say old branch", workspace=str(workspace))
    await client.reset(session_key)
    await run(client, session_key, "say new branch")
    assert first.last_entry_id
    receipt = await client.branch(session_key, first.last_entry_id, f"{session_key}-old")
    texts = [e.text for e in client.transcript(receipt.session_key)]
    assert texts[:2] == ["say old branch", "old branch"] and "say new branch" not in texts
    again = await run(client, receipt.session_key, "read notes.txt")
    entries = client.transcript(receipt.session_key)
    assert calls_of(entries, again.run_id)[0].startswith("call_2_0_")

    # Closed and reopened by a message, the branch keeps its history and its place in the tree.
    await client.close(receipt.session_key)

    async def reopened_in_tree() -> None:
        while await client.session_exists(receipt.session_key):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        await run(client, receipt.session_key, "say reopened")
        while True:
            nodes = {n.key: n for n in await client.session_tree()}
            node = nodes[receipt.session_key]
            if node.status == "running":
                assert node.parent_session == session_key
                assert node.branch_point == first.last_entry_id
                return
            await asyncio.sleep(0.3)  # visibility is eventually consistent

    await asyncio.wait_for(reopened_in_tree(), 30)
    # The reopened execution carries its parent in its own memo (older ones may be gone).
    handle = client.client.get_workflow_handle(session_workflow_id(receipt.session_key))
    memo = await (await handle.describe()).memo()
    assert memo == {"parent_session": session_key, "branch_point": first.last_entry_id}
    assert "say old branch" in [e.text for e in client.transcript(receipt.session_key)]


async def test_what_cannot_be_reset_or_branched_says_so_and_makes_nothing(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    await run(client, session_key, "say hi", workspace=str(workspace))
    target = f"{session_key}-x"
    with pytest.raises(BranchRejected, match="has no entry 'nope'"):
        await client.branch(session_key, "nope", target)
    assert not await client.session_ever_existed(target) and not client.transcript(target)
    with pytest.raises(SessionNotFound, match="does not exist"):
        await client.branch(f"{session_key}-never", "nope", target)
    point = client.transcript(session_key)[0].id
    with pytest.raises(BranchRejected, match="already exists"):
        await client.branch(session_key, point, session_key)
    with pytest.raises(SessionNotFound):
        await client.reset(f"{session_key}-never")

    out = await acli(shared, "branch", session_key, "--from", "nope", "--to", target)
    assert out.returncode == 2 and "has no entry 'nope'" in out.stderr
    out = await acli(shared, "branch", f"{session_key}-never", "--from", point)
    assert out.returncode == 6 and "does not exist" in out.stderr
    out = await acli(shared, "reset", f"{session_key}-never")
    assert out.returncode == 6 and "does not exist" in out.stderr

    # The workflow refuses too (a client that skipped its checks, a race): the update says why,
    # and the workflow fails with the reason, having made nothing.
    raced = f"{session_key}-raced"
    start = WithStartWorkflowOperation(
        SessionWorkflow.run,
        SessionInput(
            state=client._new_session_state(raced, None, None, {}),
            fresh=True,
            branch=BranchSource(parent_session=session_key, branch_point="nope"),
        ),
        id=session_workflow_id(raced),
        task_queue=client.settings.workflow_task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await client.client.execute_update_with_start_workflow(
            SessionWorkflow.branch_ready, start_workflow_operation=start
        )
    assert "has no entry nope" in str(failed.value.cause)
    handle = client.client.get_workflow_handle(session_workflow_id(raced))
    with pytest.raises(WorkflowFailureError) as ended:
        await asyncio.wait_for(handle.result(), 30)
    assert "branch not made: session" in str(ended.value.cause)
    assert not client.transcript(raced)

    await client.close(session_key)

    async def closed() -> None:
        while await client.session_exists(session_key):  # noqa: ASYNC110 (polls the server)
            await asyncio.sleep(0.1)

    await asyncio.wait_for(closed(), 30)
    with pytest.raises(SessionNotFound, match="does not exist any more"):
        await client.reset(session_key)


async def test_cli_reset_branch_transcript_and_tree(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    await run(client, session_key, "say before", workspace=str(workspace))
    out = await acli(shared, "reset", session_key, "--reason", "cli test")
    assert out.returncode == 0, out.stderr
    assert f"session {session_key} reset at {session_key}." in out.stdout
    assert "the next message starts afresh" in out.stdout
    await run(client, session_key, "say after")

    shown = await acli(shared, "transcript", session_key)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "(2 earlier entries before the latest reset; --all shows them)"
    assert lines[1].startswith("── reset ── (") and "cli test" in lines[1]
    assert "say before" not in shown.stdout and "say after" in shown.stdout
    whole = await acli(shared, "transcript", session_key, "--all")
    assert "say before" in whole.stdout and "say after" in whole.stdout
    user_line = next(ln for ln in whole.stdout.splitlines() if ln.startswith("[user] "))
    entry_id = user_line.removeprefix("[user] ")

    out = await acli(shared, "branch", session_key, "--from", entry_id)
    assert out.returncode == 0, out.stderr
    assert f"into {session_key}-b1 (1 entries copied)" in out.stdout
    branch_view = await acli(shared, "transcript", f"{session_key}-b1")
    assert f"── branched from {session_key} at {entry_id} ──" in branch_view.stdout

    async def tree() -> str:
        while True:
            got = await acli(shared, "sessions", "tree")
            assert got.returncode == 0, got.stderr
            if f"{session_key}-b1 (" in got.stdout:
                return got.stdout
            await asyncio.sleep(0.5)

    text = await asyncio.wait_for(tree(), 60)
    mine = [ln for ln in text.splitlines() if session_key in ln]
    assert mine[0].startswith(f"{session_key} (running")
    assert "reset " in mine[1] and "by cli:" in mine[1]
    assert mine[2].startswith("└── " + f"{session_key}-b1 (running")


# -- the fake provider server: the request bodies --------------------------------------------


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY], openai_keys=[]) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("reset-branch")
    (root / "config.toml").write_text(
        f'[[models]]\nprovider = "anthropic"\nid = "fake-claude"\napi = "anthropic"\n'
        f'base_url = "{fake.anthropic_base_url}"\n'
    )
    dep = make_deployment(server, root, ANTHROPIC_API_KEY=KEY)
    dep.start_worker()
    yield dep
    dep.stop_workers()


def sent_texts(body: dict[str, object]) -> list[str]:
    """The texts of every message a request carried, in order."""
    out: list[str] = []
    messages = body["messages"]
    assert isinstance(messages, list)
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        out.extend(str(block.get("text", "")) for block in content if block.get("type") == "text")
    return out


async def test_the_provider_is_sent_only_the_current_branch(
    deployment: Deployment, fake: FakeProviderServer, tmp_path: Path
) -> None:
    client = await AgentlaneClient.connect(settings_for(deployment))
    key = f"p-{uuid.uuid4().hex[:8]}"
    fake.reset()

    async def ask(session: str, text: str, answer: str) -> ExecutionResult:
        fake.script(Reply(text=answer))
        result = await run(client, session, text, workspace=str(tmp_path), model=MODEL)
        assert result.status == ExecutionStatus.SUCCESS, result.error
        assert result.reply == answer
        return result

    first = await ask(key, "first question", "first answer")
    await ask(key, "second question", "second answer")
    assert sent_texts(fake.requests("anthropic")[-1].body) == [
        "first question",
        "first answer",
        "second question",
    ]
    await client.reset(key)
    await ask(key, "third question", "third answer")
    assert sent_texts(fake.requests("anthropic")[-1].body) == ["third question"]

    assert first.last_entry_id
    branch = await client.branch(key, first.last_entry_id)
    await ask(branch.session_key, "branch question", "branch answer")
    assert sent_texts(fake.requests("anthropic")[-1].body) == [
        "first question",
        "first answer",
        "branch question",
    ]
    await ask(key, "fourth question", "fourth answer")
    assert sent_texts(fake.requests("anthropic")[-1].body) == [
        "third question",
        "third answer",
        "fourth question",
    ]
    body = json.dumps(fake.requests("anthropic")[-1].body)
    assert "branch question" not in body and "second question" not in body
