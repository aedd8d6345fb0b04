"""Approvals that wait durably (issue 21), against a real dev server and worker processes: a call
`[tools.approval]` names waits for a person's yes without holding a worker slot; approved,
denied (the model is told, the run goes on), expired (reported as expired, deny or abort as
configured), decided after the worker was killed, ended at once by an abort; unknown and
repeated decisions are clear errors; the gateway's routes; the webhook tells an adapter."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentlane import search_attributes as sa
from agentlane.approvals import ApprovalOutcome, PendingApproval
from agentlane.events import AgentEvent, EventKind
from agentlane.run import ExecutionStatus, TerminationReason
from agentlane.session import SessionPhase
from agentlane.transcript import Role
from clients.api import AgentlaneClient, ApprovalRejected
from tests.conftest import make_deployment, settings_for
from tests.e2e.gateway_support import GatewayServer
from tests.e2e.support import assert_transcript_valid
from tests.harness import Deployment


@pytest.fixture(scope="module")
def approving(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Its own worker: these tests change the config file and kill the worker."""
    root = tmp_path_factory.mktemp("approvals")
    dep = make_deployment(server, root)
    configure(dep)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest_asyncio.fixture(scope="module")
async def aclient(approving: Deployment) -> AsyncIterator[AgentlaneClient]:
    yield await AgentlaneClient.connect(settings_for(approving))


_stamp = [time.time_ns()]


def configure(dep: Deployment, timeout: float = 600, on_timeout: str = "deny") -> None:
    """`[tools.approval]` for the sessions made from now on (settings are taken at creation)."""
    path = dep.data_dir / "config.toml"
    path.write_text(
        "[tools.approval]\n"
        'require = ["exec"]\n'
        f"timeout_seconds = {timeout}\n"
        f'on_timeout = "{on_timeout}"\n'
        # The webhook test's receiver listens on loopback.
        "[webhooks]\nallow_private = true\n"
    )
    # A fresh mtime each time, so the client's config watcher reads it again.
    _stamp[0] += 10_000_000
    os.utime(path, ns=(_stamp[0], _stamp[0]))


@pytest.fixture
def ws(approving: Deployment) -> Path:
    path = approving.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    return path


def key() -> str:
    return f"ap-{uuid.uuid4().hex[:10]}"


async def pending_approval(client: AgentlaneClient, k: str, timeout: float = 60) -> PendingApproval:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = await client.approvals(k)
        if pending:
            return pending[0]
        await asyncio.sleep(0.2)
    raise AssertionError(f"no approval appeared in {k}")


async def until(check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError("timed out")


async def events_of(client: AgentlaneClient, k: str, run_id: str) -> list[AgentEvent]:
    return [item.event async for item in client.watch(k, 0, until_run=run_id)]


def tool_results(client: AgentlaneClient, k: str) -> list[str]:
    return [e.text or "" for e in client.transcript(k) if e.role == Role.TOOL]


async def test_approved_call_runs_after_a_wait_that_holds_no_worker_slot(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo yes > approved.txt` then say done", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    assert approval.tool == "exec"
    assert "echo yes" in approval.args_preview
    assert approval.expires_at - approval.requested_at == pytest.approx(600)
    status = await aclient.status(k)
    assert status.phase == SessionPhase.WAITING
    assert status.waiting_reason == "approval"
    assert [a.id for a in status.approvals] == [approval.id]
    assert not (ws / "approved.txt").exists()
    # The cost of waiting: no activity pending (no worker slot held), a bounded history.
    run = aclient.client.get_workflow_handle(receipt.run_id)
    waiting_events = len([e async for e in run.fetch_history_events()])
    await asyncio.sleep(3)
    described = await run.describe()
    assert len(described.raw_description.pending_activities) == 0
    assert described.typed_search_attributes.get(sa.PHASE_KEY) == "waiting"
    assert len([e async for e in run.fetch_history_events()]) == waiting_events
    # `sessions` says what `status` says: the session waits (its run does).
    rows = [r for r in await aclient.list_sessions() if r["key"] == k]
    assert [r["phase"] for r in rows] == ["waiting"]
    print(f"\napproval wait: {waiting_events} history events in the run, 0 activities pending")

    done = await aclient.decide_approval(k, approval.id, approve=True, by="tests")
    assert done.outcome == ApprovalOutcome.APPROVED and not done.note
    result = await aclient.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert (result.reply or "").startswith("done")
    assert (ws / "approved.txt").read_text().strip() == "yes"
    kinds = [e.kind for e in await events_of(aclient, k, receipt.run_id)]
    assert kinds.index(EventKind.APPROVAL_REQUESTED) < kinds.index(EventKind.APPROVAL_DECIDED)
    assert kinds.index(EventKind.APPROVAL_DECIDED) < kinds.index(EventKind.TOOL_EXECUTION_END)
    # A second decision, and an unknown id, are clear errors.
    with pytest.raises(ApprovalRejected, match="already decided: approved"):
        await aclient.decide_approval(k, approval.id, approve=False)
    with pytest.raises(ApprovalRejected, match="has no approval 'nope'"):
        await aclient.decide_approval(k, "nope", approve=True)
    assert await aclient.approvals(k) == []


async def test_denied_call_tells_the_model_and_the_run_goes_on(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo no > denied.txt` then say carried on", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    done = await aclient.decide_approval(
        k, approval.id, approve=False, reason="not on prod", by="ops"
    )
    assert done.outcome == ApprovalOutcome.DENIED
    result = await aclient.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert (result.reply or "").startswith("carried on")
    assert not (ws / "denied.txt").exists()
    (answer,) = tool_results(aclient, k)
    assert answer.startswith("Denied by ops") and "not on prod" in answer
    assert_transcript_valid(aclient.transcript(k))
    events = await events_of(aclient, k, receipt.run_id)
    decided = [e for e in events if e.kind == EventKind.APPROVAL_DECIDED]
    assert [e.data["outcome"] for e in decided] == ["denied"]
    # The denied call's card opens (with its command) before it closes, and both come before
    # the run's next turn: not a start published at the run's end, after its answer.
    kinds = [(e.kind, e.turn_index) for e in events]
    start = kinds.index((EventKind.TOOL_EXECUTION_START, 0))
    assert (
        start
        < kinds.index((EventKind.TOOL_EXECUTION_END, 0))
        < kinds.index((EventKind.TURN_START, 1))
    ), kinds
    assert "echo no" in str(events[start].data.get("input")), events[start].data


async def test_expiry_is_reported_as_expired_and_denies_the_call(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving, timeout=2)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo late > expired.txt` then say moved on", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    result = await aclient.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert (result.reply or "").startswith("moved on")
    assert not (ws / "expired.txt").exists()
    (answer,) = tool_results(aclient, k)
    assert answer.startswith("Approval expired") and "2 s" in answer
    assert "Denied" not in answer
    with pytest.raises(ApprovalRejected, match="has expired"):
        await aclient.decide_approval(k, approval.id, approve=True)


async def test_expiry_can_abort_the_run(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving, timeout=2, on_timeout="abort")
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo late > aborted.txt` then say never", workspace=str(ws)
    )
    assert receipt.run_id
    result = await aclient.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.ABORTED
    assert result.termination_reason == TerminationReason.ABORT_SIGNAL
    assert result.error is not None and "Approval expired" in result.error.message
    assert "Denied" not in result.error.message
    assert not (ws / "aborted.txt").exists()
    (answer,) = tool_results(aclient, k)
    assert answer.startswith("Approval expired")
    assert_transcript_valid(aclient.transcript(k))


async def aborted_while_waiting(
    approving: Deployment, aclient: AgentlaneClient, ws: Path, text: str, never: str
) -> tuple[str, PendingApproval]:
    """Send `text`; abort once its call waits: the run ends aborted at once, the file `never`
    was not written, and the approval is gone (a late decision is refused saying why)."""
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(k, text, workspace=str(ws))
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    asked = time.monotonic()
    await aclient.abort(k, "changed my mind")
    result = await aclient.wait_for_run(receipt.run_id)
    took = time.monotonic() - asked
    assert result.status == ExecutionStatus.ABORTED
    assert took < 10, f"abort took {took:.1f} s to end the wait"
    assert not (ws / never).exists()
    assert await aclient.approvals(k) == []
    with pytest.raises(ApprovalRejected, match="no longer waits"):
        await aclient.decide_approval(k, approval.id, approve=True)
    return k, approval


async def test_abort_ends_the_wait_at_once(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    text = "run `echo x > never.txt` then say never"
    k, _ = await aborted_while_waiting(approving, aclient, ws, text, "never.txt")
    assert_transcript_valid(aclient.transcript(k))


async def test_decided_after_the_worker_was_killed_during_the_wait(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo survived > restart.txt` then say back", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    for worker in list(approving.workers):
        worker.kill9()
    approving.workers.clear()
    approving.start_worker()
    assert [a.id for a in await aclient.approvals(k)] == [approval.id]
    done = await aclient.decide_approval(k, approval.id, approve=True)
    assert done.outcome == ApprovalOutcome.APPROVED
    result = await aclient.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert (result.reply or "").startswith("back")
    assert (ws / "restart.txt").read_text().strip() == "survived"


@pytest.fixture(scope="module")
def gateway(approving: Deployment) -> Iterator[GatewayServer]:
    with GatewayServer(settings_for(approving)) as gw:
        yield gw


async def test_gateway_lists_and_decides_approvals(
    approving: Deployment, aclient: AgentlaneClient, ws: Path, gateway: GatewayServer
) -> None:
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo gw > gateway.txt` then say via gateway", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    token = gateway.token(name="approver")
    async with gateway.http(token) as http:
        listed = await http.get(f"/v1/sessions/{k}/approvals")
        assert listed.status_code == 200, listed.text
        assert [a["id"] for a in listed.json()] == [approval.id]
        assert listed.json()[0]["tool"] == "exec"
        bad = await http.post(f"/v1/sessions/{k}/approvals/{approval.id}", json={"decision": "ok"})
        assert bad.status_code == 422
        unknown = await http.post(f"/v1/sessions/{k}/approvals/nope", json={"decision": "approve"})
        assert unknown.status_code == 409, unknown.text
        assert "has no approval" in unknown.json()["detail"]
        ok = await http.post(
            f"/v1/sessions/{k}/approvals/{approval.id}", json={"decision": "approve"}
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["outcome"] == "approved"
        again = await http.post(
            f"/v1/sessions/{k}/approvals/{approval.id}", json={"decision": "deny"}
        )
        assert again.status_code == 409
        assert "already decided" in again.json()["detail"]
    result = await aclient.wait_for_run(receipt.run_id)
    assert (result.reply or "").startswith("via gateway")
    assert (ws / "gateway.txt").exists()


async def test_webhook_tells_the_adapter_what_waits_and_what_was_decided(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    import json

    from agentlane.messages import Routing
    from tests.e2e.test_webhooks import Receiver

    configure(approving)
    receiver = Receiver()
    receiver.start()
    try:
        k = key()
        routing = Routing(channel="rec", to="r1", callback_url=receiver.url)
        receipt = await aclient.send_and_start(
            k, "run `echo hook` then say hooked", workspace=str(ws), routing=routing
        )
        assert receipt.run_id
        approval = await pending_approval(aclient, k)

        def bodies(kind: str) -> list[dict[str, object]]:
            got = [json.loads(r.body) for r in receiver.accepted()]
            return [b for b in got if b["kind"] == kind]

        await until(lambda: bool(bodies("approval_requested")))
        (requested,) = bodies("approval_requested")
        assert isinstance(requested["approval"], dict)
        assert requested["approval"]["id"] == approval.id
        assert requested["approval"]["tool"] == "exec"
        assert requested["to"] == "r1"
        await aclient.decide_approval(k, approval.id, approve=False, reason="no hooks")
        await aclient.wait_for_run(receipt.run_id)
        await until(lambda: bool(bodies("final_reply")))
        (decided,) = bodies("approval_decided")
        assert isinstance(decided["approval"], dict)
        assert decided["approval"]["outcome"] == "denied"
        assert decided["approval"]["reason"] == "no hooks"
    finally:
        receiver.stop()


async def test_cli_lists_one_approval_a_line_and_decides_it(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    from tests.e2e.test_cli import acli

    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k, "run `echo cli > cli.txt` then say from cli", workspace=str(ws)
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    listed = await acli(approving, "approvals", k)
    assert listed.returncode == 0, listed.stderr
    (line,) = listed.stdout.splitlines()
    assert line.startswith(f"{approval.id}  exec  expires in ")
    assert "echo cli" in line
    unknown = await acli(approving, "approve", k, "nope")
    assert unknown.returncode == 2
    assert "has no approval 'nope'" in unknown.stderr
    denied = await acli(approving, "approve", k, approval.id, "--deny", "--reason", "no cli")
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout.strip() == f"approval {approval.id} (exec): denied"
    result = await aclient.wait_for_run(receipt.run_id)
    assert (result.reply or "").startswith("from cli")
    assert not (ws / "cli.txt").exists()
    again = await acli(approving, "approve", k, approval.id)
    assert again.returncode == 2 and "already decided: denied" in again.stderr


def test_web_chat_buttons_approve_and_deny(
    approving: Deployment, gateway: GatewayServer, tmp_path: Path
) -> None:
    """The web chat page in headless Chromium: an approval card with Approve / Deny buttons
    appears when a call waits; clicking decides it."""
    from tests.e2e.test_web_chat import CHROMIUM, CHROMIUM_ARGS, _missing

    if _missing() is not None:
        pytest.skip(_missing() or "")
    from playwright.sync_api import expect, sync_playwright

    from agentlane.ids import storage_name

    configure(approving)
    k = f"web-{uuid.uuid4().hex[:8]}"
    (settings_for(approving).workspaces_dir / storage_name(k)).mkdir(parents=True)
    token = gateway.token(name="web-approver")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            errors: list[object] = []
            page.on("pageerror", lambda err: errors.append(err))
            page.goto(gateway.url + "/")
            page.fill("#token", token)
            page.click("#token-form button")
            page.fill("#session-key", k)
            page.click("#session-form button")
            expect(page.locator("#log")).to_contain_text(f"{k} is a new session")
            page.fill("#text", "run `echo web > web.txt` then say approved from the page")
            page.click("#send")
            card = page.locator(".approval").first
            expect(card.locator(".ask")).to_contain_text("exec waits for approval", timeout=30_000)
            card.locator(".approve").click()
            expect(card).to_have_attribute("data-outcome", "approved", timeout=30_000)
            expect(page.locator("#log")).to_contain_text("ended: no_tool_calls", timeout=30_000)

            page.select_option("#mode", "followup")
            page.fill("#text", "run `echo no > web-no.txt` then say denied from the page")
            page.click("#send")
            second = page.locator(".approval").nth(1)
            expect(second.locator(".deny")).to_be_enabled(timeout=30_000)
            second.locator(".deny").click()
            expect(second).to_have_attribute("data-outcome", "denied", timeout=30_000)
            expect(page.locator(".tool .result.failed").last).to_contain_text("denied")
            expect(page.locator("#log")).to_contain_text("denied from the page", timeout=30_000)

            # A sub-agent's call waits in this (its top-level) session, named as the sub-agent's.
            page.fill(
                "#text",
                'spawn a sub-agent to "run `echo sub > web-sub.txt`" then say sub approved here',
            )
            page.click("#send")
            third = page.locator(".approval").nth(2)
            expect(third.locator(".ask")).to_contain_text(
                "exec (sub-agent agent:main:subagent:", timeout=30_000
            )
            third.locator(".approve").click()
            expect(third).to_have_attribute("data-outcome", "approved", timeout=30_000)
            expect(page.locator("#log")).to_contain_text("sub approved here", timeout=30_000)
            page.screenshot(path=str(tmp_path / "web-approval.png"))
            assert not errors, errors
        finally:
            browser.close()
    ws = settings_for(approving).workspaces_dir / storage_name(k)
    assert (ws / "web.txt").exists()
    assert not (ws / "web-no.txt").exists()
    assert (ws / "web-sub.txt").read_text().strip() == "sub"


async def test_a_sub_agents_call_is_listed_and_decided_in_its_top_level_session(
    approving: Deployment, aclient: AgentlaneClient, ws: Path, gateway: GatewayServer
) -> None:
    configure(approving)
    k = key()
    receipt = await aclient.send_and_start(
        k,
        'spawn a sub-agent to "run `echo sub > sub.txt` then say child done" then say parent done',
        workspace=str(ws),
    )
    assert receipt.run_id
    # The sub-agent has no session of its own: its approval waits in the parent's list.
    approval = await pending_approval(aclient, k)
    assert approval.tool == "exec"
    assert approval.session_key.startswith("agent:main:subagent:")
    assert approval.run_id == f"session:{approval.session_key}:run:1"
    assert approval.root_run_id == receipt.run_id
    assert not (ws / "sub.txt").exists()
    # Asked by the sub-agent's own key, the answer comes from its top-level session.
    assert await aclient.top_session_of(approval.session_key) == k
    assert [a.id for a in await aclient.approvals(approval.session_key)] == [approval.id]
    status = await aclient.status(k)
    assert status.phase == SessionPhase.WAITING and status.waiting_reason == "approval"
    assert status.waiting_until == approval.expires_at
    async with gateway.http(gateway.token(name="approver")) as http:
        listed = await http.get(f"/v1/sessions/{k}/approvals")
        assert [a["session_key"] for a in listed.json()] == [approval.session_key]
        ok = await http.post(
            f"/v1/sessions/{k}/approvals/{approval.id}",
            json={"decision": "approve"},
        )
        assert ok.status_code == 200, ok.text
        assert ok.json()["outcome"] == "approved"
    result = await asyncio.wait_for(aclient.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert (result.reply or "").startswith("parent done")
    assert (ws / "sub.txt").read_text().strip() == "sub"
    assert await aclient.approvals(k) == []
    # Watchers of the parent session see the sub-agent's approval come and go.
    events = [e for e in await events_of(aclient, k, receipt.run_id) if e.run_id == approval.run_id]
    assert [e.kind for e in events] == [EventKind.APPROVAL_REQUESTED, EventKind.APPROVAL_DECIDED]
    assert all(e.session_key == k for e in events)


async def test_a_sub_agents_approval_expires_like_any_other(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    configure(approving, timeout=2)
    k = key()
    receipt = await aclient.send_and_start(
        k,
        'spawn a sub-agent to "run `echo late > sub-late.txt` then say child moved on" '
        "then say parent done",
        workspace=str(ws),
    )
    assert receipt.run_id
    approval = await pending_approval(aclient, k)
    result = await asyncio.wait_for(aclient.wait_for_run(receipt.run_id), 60)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert not (ws / "sub-late.txt").exists()
    child_results = [
        e.text or "" for e in aclient.transcript(approval.session_key) if e.role == Role.TOOL
    ]
    assert child_results[0].startswith("Approval expired") and "2 s" in child_results[0]
    assert await aclient.approvals(k) == []
    with pytest.raises(ApprovalRejected, match="has expired"):
        await aclient.decide_approval(k, approval.id, approve=True)
    # Decided by the sub-agent's key: the same answer, from its top-level session.
    with pytest.raises(ApprovalRejected, match="has expired"):
        await aclient.decide_approval(approval.session_key, approval.id, approve=True)


async def test_aborting_the_parent_ends_its_sub_agents_wait(
    approving: Deployment, aclient: AgentlaneClient, ws: Path
) -> None:
    text = 'spawn a sub-agent to "run `echo x > sub-never.txt`" then say never'
    k, approval = await aborted_while_waiting(approving, aclient, ws, text, "sub-never.txt")
    assert approval.session_key
    assert_transcript_valid(aclient.transcript(approval.session_key))
    # Where people watch, the top-level session's stream, the card that opened there closes
    # (cancelled), as a top-level approval's does.
    seen: list[tuple[EventKind, str]] = []

    async def until_closed() -> None:
        async for item in aclient.watch(k, 0):
            if item.event.data.get("id") == approval.id:
                seen.append((item.event.kind, str(item.event.data.get("outcome"))))
                if item.event.kind == EventKind.APPROVAL_DECIDED:
                    return

    await asyncio.wait_for(until_closed(), 30)
    assert seen[-1] == (EventKind.APPROVAL_DECIDED, "cancelled"), seen
