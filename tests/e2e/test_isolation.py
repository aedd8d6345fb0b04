"""Sessions isolated at every edge, end to end: keys that used to share data or spell another
session's ids, run ids across close and reopen, private files."""

from __future__ import annotations

import asyncio
import stat
import uuid
from pathlib import Path

import pytest

from agentlane.ids import InvalidSessionKey
from agentlane.transcript import Role
from clients.api import AgentlaneClient
from store.sync import run_sync
from tests.conftest import settings_for
from tests.harness import Deployment


async def test_col_colon_x_and_col_underscore_x_are_two_sessions(
    client: AgentlaneClient, workspace: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    a, b = f"col{tag}:x", f"col{tag}_x"
    ra = await client.send_and_start(a, "say from a")
    rb = await client.send_and_start(b, "say from b")
    assert ra.run_id and rb.run_id
    await client.wait_for_run(ra.run_id)
    await client.wait_for_run(rb.run_id)
    users_a = [e.text for e in client.transcript(a) if e.role == Role.USER]
    users_b = [e.text for e in client.transcript(b) if e.role == Role.USER]
    assert users_a == ["say from a"] and users_b == ["say from b"]
    assert (await client.status(a)).workspace != (await client.status(b)).workspace


@pytest.mark.parametrize("key", ["kc:events", "kc:run:1"])
async def test_a_key_cannot_spell_another_sessions_ids(client: AgentlaneClient, key: str) -> None:
    with pytest.raises(InvalidSessionKey, match="reserved"):
        await client.send(key, "hi")


async def test_run_ids_are_never_reused_across_close_and_reopen(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    seen: list[str] = []
    for i in range(3):
        r = await client.send_and_start(
            session_key, f"run `true` then say round {i}", workspace=str(workspace)
        )
        assert r.run_id
        seen.append(r.run_id)
        await client.wait_for_run(r.run_id)
        await client.close(session_key)
        await asyncio.wait_for(
            client.client.get_workflow_handle(f"session:{session_key}").result(), 30
        )
    assert len(set(seen)) == 3, seen
    recorded = run_sync(settings_for(shared), lambda store: store.runs(session_key))
    assert [run_id for run_id, _ in recorded] == seen
    # The store holding it is its user's alone.
    for path in shared.data_dir.glob("agentlane.db*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_the_event_stream_carries_previews_not_whole_outputs(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    from agentlane.events import EventKind
    from tests.e2e.support import collect

    r = await client.send_and_start(
        session_key, "run `seq 1 60000` then say done", workspace=str(workspace)
    )
    assert r.run_id
    await client.wait_for_run(r.run_id)
    got = await collect(client, session_key, r.run_id)
    streamed = "".join(
        e.text or "" for e in got.events if e.kind == EventKind.TOOL_EXECUTION_UPDATE
    )
    assert 0 < len(streamed) <= 16_000
    result = [e for e in client.transcript(session_key) if e.role == Role.TOOL][0]
    assert "60000" in result.text and len(result.text) > 16_000


async def test_a_rejected_message_leaves_nothing_behind(
    client: AgentlaneClient, shared: Deployment, session_key: str
) -> None:
    from clients.api import SendRejected

    def payloads() -> int:
        status = run_sync(settings_for(shared), lambda store: store.status())
        return status.counts["payloads"]

    before = payloads()
    with pytest.raises(SendRejected, match="the limit is 100000"):
        await client.send(session_key, "y" * 1_000_000)
    assert payloads() == before
    assert not await client.session_exists(session_key)


async def test_a_default_workspace_is_its_owners_only(
    client: AgentlaneClient, shared: Deployment
) -> None:
    # It lives under the data dir, whose conversations are the user's alone (README).
    key = f"defws-{uuid.uuid4().hex[:6]}"
    r = await client.send_and_start(key, "write x.txt with hi then say done")
    assert r.run_id
    await client.wait_for_run(r.run_id)
    folder = Path((await client.status(key)).workspace)
    if not folder.is_absolute():
        folder = shared.data_dir / folder
    assert (folder / "x.txt").read_text() == "hi"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
