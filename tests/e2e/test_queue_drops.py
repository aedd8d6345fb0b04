"""Every accepted message leaves its text behind (issues 19 and 25), end to end: whatever the
queue policy drops, summarizes or collects is in a run's prompt or in the transcript (marked
`dropped` / `summarized`), its sender is told (a `message_dropped` event, a webhook), and no
receipt says `queued` for a message the session dropped."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentlane.events import AgentEvent, EventKind
from agentlane.ids import session_workflow_id
from agentlane.messages import InboundMessage, Routing, SendDisposition
from agentlane.run import ExecutionStatus
from agentlane.transcript import Role
from clients.api import AgentlaneClient, SendRejected
from tests.e2e.support import assert_transcript_valid, collect, wait_idle
from tests.e2e.test_messages_while_busy import wait_for_event
from tests.e2e.test_webhooks import Receiver, first_occurrences, receiver, wait_delivered
from tests.harness import REPO, Deployment
from workflows.session import SessionWorkflow

__all__ = ["receiver"]  # the fixture, shared with test_webhooks


def run_id(key: str, n: int) -> str:
    return f"session:{key}:run:{n}"


async def dropped_events(
    client: AgentlaneClient, key: str, until_run: str, from_offset: int = 0
) -> list[AgentEvent]:
    return (await followed_drops(client, key, until_run, from_offset))[0]


async def followed_drops(
    client: AgentlaneClient, key: str, until_run: str, from_offset: int
) -> tuple[list[AgentEvent], int]:
    """The `message_dropped` events a watcher from `from_offset` saw, and how many offsets it
    was told it skipped (a watcher that lags further than the stream carries across a
    hand-over sees its offsets jump)."""
    got = await collect(client, key, until_run, from_offset, timeout=300)
    unique = {e.event_id: e for e in got.events if e.kind == EventKind.MESSAGE_DROPPED}
    offsets = [from_offset, *got.offsets]
    skipped = sum(max(0, b - a - 1) for a, b in zip(offsets, offsets[1:], strict=False))
    return list(unique.values()), skipped


def transcript_all(dep: Deployment, key: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "clients.cli", "transcript", key, "--all"],
        cwd=REPO,
        env=dep.env(),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


async def test_a_burst_of_1000_messages_from_50_senders_keeps_every_text(
    client: AgentlaneClient, shared: Deployment, session_key: str, workspace: Path
) -> None:
    """Default queue settings (collect, cap 20, drop summarize): 980 of the 1 000 are dropped,
    and each one's text is in the transcript with its message id; the other 20 are in the next
    run's prompt. The session continues as new during the burst: nothing is lost across it."""
    key = session_key
    first = await client.send_and_start(
        key,
        "run `sleep 300`",
        workspace=str(workspace),
        # Hand over often: what a burst leaves in the state must cross continue-as-new.
        session_overrides={"continue_as_new_after_events": 400},
    )
    assert first.run_id
    await wait_for_event(client, key, first.run_id, EventKind.TOOL_EXECUTION_START)
    # A watcher follows the stream live from here, as an adapter does: the stream is bounded (it
    # keeps its newest events across a hand-over), so a reader starting from 0 afterwards would
    # find the burst's notices truncated (they are in the transcript, as checked below).
    start = await client.events_offset(key)
    notices = asyncio.create_task(followed_drops(client, key, run_id(key, 2), start))
    senders, per_sender = 50, 20
    texts = {
        f"b{s}-{i}": f"say burst {s}-{i} from sender {s}"
        for s in range(senders)
        for i in range(per_sender)
    }

    async def sender(s: int) -> list[SendDisposition]:
        out = []
        for i in range(per_sender):
            mid = f"b{s}-{i}"
            receipt = await client.send(key, texts[mid], message_id=mid, sender=f"user{s}")
            out.append(receipt.disposition)
        return out

    began = time.monotonic()
    dispositions = [d for ds in await asyncio.gather(*map(sender, range(senders))) for d in ds]
    burst_seconds = time.monotonic() - began
    # Summarize drops the oldest waiting message, never the newcomer: each was queued.
    assert dispositions == [SendDisposition.QUEUED] * len(texts)
    await client.abort(key, "burst sent")
    await wait_idle(client, key, runs=2, timeout=120)

    second = await client.wait_for_run(run_id(key, 2))
    assert second.status == ExecutionStatus.SUCCESS
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    prompt = next(e.text for e in entries if e.role == Role.USER and e.run_id == run_id(key, 2))
    dropped = {e.meta["message_id"]: e for e in entries if e.role == Role.DROPPED}

    # Every accepted text is accounted for by its message id: in the prompt or dropped, once.
    in_prompt = {mid for mid, text in texts.items() if f"\n{text}" in prompt}
    assert len(in_prompt) == 20
    assert set(dropped) == set(texts) - in_prompt
    for mid, entry in dropped.items():
        assert entry.text == texts[mid]
        assert entry.meta["fate"] == "summarized"
        assert (entry.meta["policy"], entry.meta["cap"]) == ("summarize", 20)
        assert entry.meta["sender"] == f"user{mid[1:].split('-')[0]}"
    # The summary: a line for each of the newest 20 dropped, and where the other 960 are.
    assert "[Queue overflow] Dropped 980 messages due to cap." in prompt
    assert prompt.count("\n- say burst ") == 20
    assert "… and 960 earlier dropped messages not listed here" in prompt

    # Each sender is told, by message id, before the next run starts.
    events, skipped = await notices
    told = {e.data["message_id"] for e in events}
    assert told <= set(dropped)
    # Every notice reached the watcher, unless it lagged past what a hand-over carries: then
    # its offsets jumped over exactly the notices it missed (their texts are in the
    # transcript, checked above), and never silently.
    assert len(set(dropped) - told) <= skipped, (len(dropped), len(told), skipped)
    print(f"watcher: {len(told)} of {len(dropped)} notices live, {skipped} offsets skipped")
    assert all(e.run_id == "" for e in events)
    status = await client.status(key)
    assert status.dropped_messages == 980
    # The session handed over (continue-as-new) with the burst's state, and lost nothing.
    query = f"WorkflowId = '{session_workflow_id(key)}' AND ExecutionStatus = 'ContinuedAsNew'"
    assert [w async for w in client.client.list_workflows(query)]
    figures = await _history_figures(client, key)
    print(f"session history: {figures}")
    # Recording drops costs a marker per batch, never the texts: history stays a few events per
    # message (each send is an update: accepted and completed), whatever the texts hold.
    assert figures["texts_in_markers"] == 0
    assert figures["drop_batches"] < len(dropped)
    assert figures["events"] < 5 * len(texts)

    shown = await asyncio.to_thread(transcript_all, shared, key)
    for mid, text in texts.items():
        if mid in dropped:
            assert f"summarized: message #{dropped[mid].meta['seq']} ({mid})" in shown
        assert text in shown
    print(f"burst of {len(texts)} from {senders} senders sent in {burst_seconds:.1f} s")


async def test_cap_1_summarize_keeps_say_two_and_tells_the_sender(
    hooked_client: AgentlaneClient, hooked: Deployment, session_key: str, receiver: Receiver
) -> None:
    """Issue 25: with a busy run, `queue followup cap:1 drop:summarize`, "say one" and "say
    two" both queued: "say one" is a summary line and in the transcript, "say two" reaches the
    model; the webhook names the dropped message (to a loopback receiver, so on the deployment
    that allows private targets)."""
    key = session_key
    client = hooked_client
    workspace = hooked.data_dir / "ws" / key
    workspace.mkdir(parents=True)
    routing = Routing(channel="test", to="chat:1", callback_url=receiver.url)
    first = await client.send_and_start(
        key, "count slowly to 60", workspace=str(workspace), routing=routing
    )
    assert first.run_id
    await client.configure_queue(key, "followup cap:1 drop:summarize")
    one = await client.send(key, "say one", message_id="one", routing=routing)
    two = await client.send(key, "say two", message_id="two", routing=routing)
    assert one.disposition == two.disposition == SendDisposition.QUEUED
    await wait_idle(client, key, runs=2)
    second = await client.wait_for_run(run_id(key, 2))
    assert second.reply == "two"
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    prompt = next(e.text for e in entries if e.role == Role.USER and e.run_id == run_id(key, 2))
    assert prompt == (
        "[Queue overflow] Dropped 1 message due to cap.\nSummary:\n- say one\n\n---\nsay two"
    )
    [dropped] = [e for e in entries if e.role == Role.DROPPED]
    assert (dropped.text, dropped.meta["message_id"], dropped.meta["fate"]) == (
        "say one",
        "one",
        "summarized",
    )
    assert (await client.status(key)).dropped_messages == 1

    await wait_delivered(client, key, runs=2, timeout=60)
    bodies = first_occurrences(receiver.accepted())
    told = [b for b in bodies if b["kind"] == "message_dropped"]
    assert len(told) == 1
    assert (told[0]["message_id"], told[0]["message_seq"], told[0]["status"]) == (
        "one",
        one.message_seq,
        "summarized",
    )
    assert "cap 1, drop policy summarize" in told[0]["text"]
    # Told before the reply of the run that carried the summary.
    told_at = bodies.index(told[0])
    reply_at = next(
        i
        for i, b in enumerate(bodies)
        if b["kind"] == "final_reply" and b["run_id"] == run_id(key, 2)
    )
    assert told_at < reply_at


async def test_messages_dropped_while_the_summary_run_runs_reach_the_next_summary(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """Review O F2: the run carrying an overflow summary cleared it when it ended, with the
    drops made while it ran: they were in no prompt. Now the next run's summary has them."""
    key = session_key
    first = await client.send_and_start(key, "count slowly to 40", workspace=str(workspace))
    assert first.run_id
    await client.configure_queue(key, "followup cap:1 drop:summarize debounce:0")
    await client.send(key, "say a1")
    second = await client.send(key, "count slowly to 40")  # a1 is dropped into the summary
    started = await asyncio.wait_for(client.wait_started(key, second.message_seq), 120)
    assert started.run_id == run_id(key, 2)
    await wait_for_event(client, key, run_id(key, 2), EventKind.TEXT_DELTA)
    await client.send(key, "say b1")
    await client.send(key, "say three")  # b1 is dropped while run 2 carries a1's summary
    await wait_idle(client, key, runs=3, timeout=120)
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    prompts = {e.run_id: e.text for e in entries if e.role == Role.USER}
    assert "Dropped 1 message due to cap.\nSummary:\n- say a1" in prompts[run_id(key, 2)]
    third = prompts[run_id(key, 3)]
    assert "Dropped 1 message due to cap.\nSummary:\n- say b1" in third, third
    assert third.endswith("say three")
    assert (await client.wait_for_run(run_id(key, 3))).reply == "three"


@pytest.mark.parametrize("policy", ["old", "new"])
async def test_drop_old_and_new_keep_or_refuse_never_lose(
    client: AgentlaneClient, session_key: str, workspace: Path, policy: str
) -> None:
    """`drop:old`: the older message is dropped, its text kept and marked; `drop:new`: the
    newcomer is refused before it is accepted (the sender keeps it), never answered `queued`."""
    key = session_key
    first = await client.send_and_start(key, "count slowly to 60", workspace=str(workspace))
    assert first.run_id
    await client.configure_queue(key, f"followup cap:1 drop:{policy}")
    one = await client.send(key, "say one", message_id="one")
    assert one.disposition == SendDisposition.QUEUED
    if policy == "new":
        with pytest.raises(SendRejected, match="queue is full"):
            await client.send(key, "say two", message_id="two")
        # A signal (how a message reaches a session no worker answers) is durable once sent:
        # the session accepts it and drops it visibly.
        handle = client.client.get_workflow_handle(session_workflow_id(key))
        await handle.signal(
            SessionWorkflow.enqueue, InboundMessage(text="say three", message_id="three")
        )
        await wait_idle(client, key, runs=2)
        assert (await client.wait_for_run(run_id(key, 2))).reply == "one"
        [dropped] = [e for e in client.transcript(key) if e.role == Role.DROPPED]
        assert (dropped.text, dropped.meta["message_id"], dropped.meta["policy"]) == (
            "say three",
            "three",
            "new",
        )
        return
    two = await client.send(key, "say two", message_id="two")
    assert two.disposition == SendDisposition.QUEUED
    await wait_idle(client, key, runs=2)
    assert (await client.wait_for_run(run_id(key, 2))).reply == "two"
    entries = client.transcript(key)
    [dropped] = [e for e in entries if e.role == Role.DROPPED]
    assert dropped.id.endswith(":dropped")
    assert (dropped.text, dropped.meta["fate"], dropped.meta["policy"]) == (
        "say one",
        "dropped",
        "old",
    )
    fate = await client.wait_started(key, one.message_seq)
    assert fate.state.value == "dropped" and "drop policy old" in fate.note
    prompts = [e.text for e in entries if e.role == Role.USER]
    assert "say one" not in "".join(prompts)


@pytest.mark.parametrize("policy", ["old", "new", "summarize"])
async def test_every_drop_policy_accounts_for_every_accepted_message(
    client: AgentlaneClient, session_key: str, workspace: Path, policy: str
) -> None:
    """200 messages from 50 concurrent senders, cap 5: each accepted one (`queued`) is in a
    run's prompt or in the transcript as dropped; each `dropped` receipt is in the transcript;
    each refused one (`drop:new` before accepting) is nowhere, and its sender knows."""
    key = session_key
    first = await client.send_and_start(key, "run `sleep 300`", workspace=str(workspace))
    assert first.run_id
    await wait_for_event(client, key, first.run_id, EventKind.TOOL_EXECUTION_START)
    await client.configure_queue(key, f"cap:5 drop:{policy}")
    texts = {f"p{s}-{i}": f"say {policy} {s}-{i}" for s in range(50) for i in range(4)}
    receipts: dict[str, SendDisposition] = {}
    refused: set[str] = set()

    async def sender(s: int) -> None:
        for i in range(4):
            mid = f"p{s}-{i}"
            try:
                receipts[mid] = (await client.send(key, texts[mid], message_id=mid)).disposition
            except SendRejected as err:
                assert policy == "new" and "queue is full" in str(err)
                refused.add(mid)

    await asyncio.gather(*map(sender, range(50)))
    await client.abort(key, "burst sent")
    await wait_idle(client, key, runs=2, timeout=120)
    entries = client.transcript(key)
    assert_transcript_valid(entries)
    prompts = "\n".join(e.text for e in entries if e.role == Role.USER)
    dropped = {e.meta["message_id"]: e for e in entries if e.role == Role.DROPPED}
    for mid, text in texts.items():
        where = (f"\n{text}" in prompts or prompts.startswith(text), mid in dropped)
        if mid in refused:
            assert where == (False, False), mid
        elif receipts[mid] == SendDisposition.DROPPED:
            assert where == (False, True), mid
        else:
            assert receipts[mid] == SendDisposition.QUEUED
            assert sum(where) == 1, (mid, where)
    assert all(e.text == texts[mid] for mid, e in dropped.items())
    assert len(refused) + len(dropped) == len(texts) - 5
    assert (await client.status(key)).dropped_messages == len(dropped)
    if policy != "new":
        assert not refused and set(receipts.values()) == {SendDisposition.QUEUED}


async def _history_figures(client: AgentlaneClient, key: str) -> dict[str, int]:
    """Events and drop-recording markers over every execution of the session workflow."""
    figures = {"executions": 0, "events": 0, "drop_batches": 0, "texts_in_markers": 0}
    query = f"WorkflowId = '{session_workflow_id(key)}'"
    async for wf in client.client.list_workflows(query):
        history = await client.client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        figures["executions"] += 1
        figures["events"] += len(history.events)
        figures["drop_batches"] += sum(
            1
            for e in history.events
            if e.HasField("marker_recorded_event_attributes")
            and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
            and b"record_dropped_messages"
            in e.marker_recorded_event_attributes.details["data"].payloads[0].data
        )
        figures["texts_in_markers"] += sum(
            1
            for e in history.events
            if e.HasField("marker_recorded_event_attributes")
            and any(
                b"say burst" in p.data
                for d in e.marker_recorded_event_attributes.details.values()
                for p in d.payloads
            )
        )
    return figures
