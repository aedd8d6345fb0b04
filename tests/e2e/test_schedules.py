"""Scheduled runs on Temporal Schedules, against a real dev server and worker: a schedule that
fires every 2 s starts runs with source cron, skips a firing while its run is still going (never
two at once), stops while paused, fires on trigger, resumes when unpaused, and is gone once
deleted; and the same through the CLI."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentlane.run import EntrySource, ExecutionStatus
from clients.api import AgentlaneClient
from clients.schedules import ScheduleNotFound, ScheduleRejected, ScheduleView
from tests.e2e.support import update_identities
from tests.e2e.test_cli import acli
from tests.harness import Deployment


class Watch:
    """Polls `describe` and remembers the most firings ever running at once."""

    def __init__(self, client: AgentlaneClient, schedule_id: str) -> None:
        self.client, self.id = client, schedule_id
        self.most_running = 0

    async def until(
        self, ok: Callable[[ScheduleView], bool], timeout: float = 20, outcomes: bool = False
    ) -> ScheduleView:
        deadline = time.monotonic() + timeout
        while True:
            view = await self.client.describe_schedule(self.id, outcomes=outcomes)
            self.most_running = max(self.most_running, len(view.running))
            if ok(view):
                return view
            assert time.monotonic() < deadline, f"timed out; last: {view}"
            await asyncio.sleep(0.25)


async def test_a_schedule_fires_cron_runs_skips_overlaps_pauses_and_resumes(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    sid = f"sched-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    # Each run lasts about 3 s, longer than the 2 s interval: some firings must be skipped.
    view = await client.create_schedule(
        sid, session_key, "sleep 3 then say tick", every="2s", workspace=str(workspace)
    )
    assert (view.timing, view.overlap, view.catchup_window) == ("every 2s", "skip", "10m")
    assert not view.paused and view.next_firings
    watch = Watch(client, sid)
    try:
        done = await watch.until(
            lambda v: any(f.outcome and f.outcome.status for f in v.recent), outcomes=True
        )
        firing = next(f for f in done.recent if f.outcome and f.outcome.status)
        first = firing.outcome
        assert first is not None and first.run_id is not None
        assert (first.status, first.source) == ("success", "cron")
        assert first.reply.startswith("tick")
        result = await client.wait_for_run(first.run_id)
        assert result.source == EntrySource.CRON
        assert result.status == ExecutionStatus.SUCCESS
        status = await client.status(session_key)
        assert status.last_result is not None and status.last_result.source == EntrySource.CRON
        # The firing sent its message as `schedule <id>` (the session's history says so).
        identities = await update_identities(client, f"session:{session_key}")
        assert f"schedule {sid}" in identities, identities
        figures = {
            "first run done after s": round(time.monotonic() - started, 1),
            "firing to run start ms": round(
                (result.started_at - firing.scheduled_at).total_seconds() * 1000
            ),
        }

        await watch.until(lambda v: v.skipped_overlap >= 1)

        await client.pause_schedule(sid, "quiet hours")
        paused = await watch.until(lambda v: v.paused and not v.running)
        assert paused.note == "quiet hours"
        await asyncio.sleep(4.5)  # two intervals and more
        still = await watch.until(lambda v: True)
        assert still.firings == paused.firings, "a paused schedule fired"
        # The times it had when paused are past now: none is shown as coming.
        now = datetime.now(UTC)
        assert all(t > now - timedelta(seconds=1) for t in still.next_firings)

        await client.trigger_schedule(sid)
        triggered = await watch.until(lambda v: v.firings == paused.firings + 1, timeout=10)
        figures["firings"] = triggered.firings
        await watch.until(lambda v: not v.running)

        await client.unpause_schedule(sid)
        resumed = await watch.until(lambda v: v.firings >= triggered.firings + 1, timeout=10)
        assert not resumed.paused
        assert watch.most_running <= 1, "two firings of one schedule ran at once"
        figures["skipped"] = resumed.skipped_overlap
        print(f"schedule figures: {figures}, total {time.monotonic() - started:.1f} s")
    finally:
        await client.delete_schedule(sid)
    with pytest.raises(ScheduleNotFound, match=f"schedule {sid} does not exist"):
        await client.describe_schedule(sid)
    runs = [e for e in client.transcript(session_key) if e.role.value == "user"]
    assert runs and all(e.run_id for e in runs)


async def test_the_client_refuses_bad_schedules_clearly(
    client: AgentlaneClient, session_key: str
) -> None:
    with pytest.raises(ScheduleRejected, match="invalid cron"):
        await client.create_schedule("bad-cron", session_key, "hi", cron="61 * * * *")
    with pytest.raises(ScheduleRejected, match="invalid session key"):
        await client.create_schedule("bad-key", "no spaces", "hi", every="1h")
    with pytest.raises(ScheduleRejected, match="message text is empty"):
        await client.create_schedule("bad-text", session_key, "  ", every="1h")
    with pytest.raises(ScheduleNotFound):
        await client.pause_schedule(f"none-{uuid.uuid4().hex[:6]}")
    # 30 February never comes: refused, and nothing is left behind.
    with pytest.raises(ScheduleRejected, match="would never fire"):
        await client.create_schedule("never", session_key, "hi", cron="0 0 30 2 *")
    with pytest.raises(ScheduleNotFound):
        await client.describe_schedule("never")


async def test_schedules_from_the_cli(shared: Deployment) -> None:
    sid = f"cli-{uuid.uuid4().hex[:8]}"
    key = f"cli-sched-{uuid.uuid4().hex[:6]}"
    create = ("schedule", "create", sid, "--session", key, "--message")
    bad = await acli(shared, *create, "hi", "--cron", "* * *")
    assert bad.returncode == 2 and "invalid cron '* * *': it has 3 fields" in bad.stderr
    bad = await acli(shared, *create, "hi", "--every", "soon")
    assert bad.returncode == 2 and "invalid interval 'soon'" in bad.stderr
    made = await acli(
        shared, *create, "say from cron", "--cron", "0 9 * * 1-5", "--paused", "--note", "weekdays"
    )
    assert made.returncode == 0, made.stderr
    assert f"schedule {sid} created" in made.stdout and "[paused]" in made.stdout
    again = await acli(shared, *create, "x", "--every", "1h")
    assert again.returncode == 2 and "already exists" in again.stderr
    described = await acli(shared, "schedule", "describe", sid)
    assert described.returncode == 0, described.stderr
    assert "cron 0 9 * * 1-5" in described.stdout and "weekdays" in described.stdout
    assert "overlap    skip   catch-up window 10m" in described.stdout
    deadline = time.monotonic() + 15  # the server's list is eventually consistent
    while True:
        listed = await acli(shared, "schedule", "list")
        if sid in listed.stdout or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert sid in listed.stdout and "paused" in listed.stdout
    gone = await acli(shared, "schedule", "delete", sid)
    assert gone.returncode == 0, gone.stderr
    missing = await acli(shared, "schedule", "describe", sid)
    assert missing.returncode == 6 and "does not exist" in missing.stderr


async def test_unpausing_puts_the_creators_note_back(
    client: AgentlaneClient, session_key: str
) -> None:
    """Review T L4: Temporal's unpause replaced the creator's note with "unpaused"."""
    sid = f"note-{uuid.uuid4().hex[:8]}"
    await client.create_schedule(sid, session_key, "say hi", every="1h", paused=True, note="a note")
    try:
        await client.unpause_schedule(sid)
        view = await client.describe_schedule(sid)
        assert not view.paused and view.note == "a note", view
        await client.pause_schedule(sid, "quiet hours")
        assert (await client.describe_schedule(sid)).note == "quiet hours"
        await client.unpause_schedule(sid, "back")
        assert (await client.describe_schedule(sid)).note == "back"
    finally:
        await client.delete_schedule(sid)
