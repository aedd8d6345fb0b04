"""Records histories of representative runs for the replay test.

    .venv/bin/python -m tests.histories.record

Starts its own dev server and worker, runs each scenario, and writes every workflow execution it
produced (sessions, runs, event streams, across continue-as-new) as JSON under
tests/histories/<scenario>/. Re-record only on purpose: the point of the replay test is that
code changes must keep replaying the histories recorded by earlier code.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.contrib.workflow_streams import WorkflowStreamClient

from agentlane.event_stream import EventsInput
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id
from agentlane.messages import Routing
from clients.api import AgentlaneClient, NoWorker
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import wait_idle
from tests.harness import Deployment, devserver
from tests.store_support import clear_profile_state

if TYPE_CHECKING:
    from tests.fakes.provider_server import FakeProviderServer
    from tests.fakes.scripts import Reply

HERE = Path(__file__).resolve().parent


async def _until(client: AgentlaneClient, key: str, run_id: str, kind: EventKind) -> None:
    async for item in client.watch(key, 0):
        if item.event.run_id == run_id and item.event.kind == kind:
            return


async def tools(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start(
        "tools",
        "read notes.txt then summarize notes.txt into s.txt then "
        "edit s.txt replacing alpha with ALPHA then run `wc -l notes.txt` then "
        "read ../escape.txt then say done",
        workspace=str(ws),
    )
    await client.wait_for_run(r.run_id or "")


async def steer_and_queue(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start(
        "steer", "count slowly to 40 then run `sleep 1`", workspace=str(ws)
    )
    await asyncio.wait_for(_until(client, "steer", r.run_id or "", EventKind.TEXT_DELTA), 30)
    await client.send_and_start("steer", "say steered", mode="steer")
    await client.send_and_start("steer", "say queued one")
    await client.send_and_start("steer", "say queued two", mode="followup")
    await wait_idle(client, "steer", runs=3)


async def interrupt_and_abort(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start("interrupt", "count slowly to 200", workspace=str(ws))
    await asyncio.wait_for(_until(client, "interrupt", r.run_id or "", EventKind.TEXT_DELTA), 30)
    second = await client.send_and_start("interrupt", "run `sleep 20`", mode="interrupt")
    await asyncio.wait_for(
        _until(client, "interrupt", second.run_id or "", EventKind.TOOL_EXECUTION_START), 30
    )
    await client.abort("interrupt", "stop it")
    await client.wait_for_run(second.run_id or "")


async def continue_as_new(client: AgentlaneClient, ws: Path) -> None:
    overrides: dict[str, object] = {
        "run_continue_as_new_after_events": 25,
        "continue_as_new_after_events": 20,
        "events_continue_as_new_after_events": 40,
    }
    steps = " then ".join(f"write f{i}.txt with {i}" for i in range(6))
    r = await client.send_and_start("can", steps, workspace=str(ws), session_overrides=overrides)
    await client.wait_for_run(r.run_id or "")
    for i in range(2):
        await client.send_and_start("can", f"say again {i}")
        await wait_idle(client, "can", runs=2 + i)


async def workspace_error(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start("wserr", "say one", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")
    ws.rename(ws.with_name(ws.name + "-gone"))
    r = await client.send_and_start("wserr", "say two")
    await client.wait_for_run(r.run_id or "")


async def close_and_reopen(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start(
        "reopen", "write a.txt with 1 then say first", workspace=str(ws)
    )
    await client.wait_for_run(r.run_id or "")
    await client.close("reopen")
    await asyncio.wait_for(client.client.get_workflow_handle("session:reopen").result(), 30)
    r = await client.send_and_start("reopen", "read a.txt then say second", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")


async def control(client: AgentlaneClient, ws: Path) -> None:
    """Abort at a safe point of a zero-latency loop, abort of an idle session, an interrupt, and
    a run terminated by an operator whose message then runs again."""
    loop = " then ".join(f"write f{i}.txt with {i}" for i in range(60)) + " then say done"
    r = await client.send_and_start("ctl", loop, workspace=str(ws))
    await asyncio.sleep(0.3)
    await client.abort("ctl", "enough")
    await client.wait_for_run(r.run_id or "")
    await client.abort("ctl")  # nothing to abort
    r = await client.send_and_start("ctl", loop)
    await asyncio.sleep(0.2)
    i = await client.send_and_start("ctl", "say switched", mode="interrupt")
    await client.wait_for_run(i.run_id or "")
    r = await client.send_and_start("ctl", "run `sleep 20` then say finally")
    await asyncio.wait_for(
        _until(client, "ctl", r.run_id or "", EventKind.TOOL_EXECUTION_START), 30
    )
    await client.client.get_workflow_handle(r.run_id or "").terminate("operator")
    await wait_idle(client, "ctl", runs=5, timeout=60)


async def queue_policies(client: AgentlaneClient, ws: Path) -> None:
    """A burst under a small cap (summarize drops, overflow summary), a /queue change, a
    duplicate message id, messages from two channels collected one by one."""
    r = await client.send_and_start("qp", "count slowly to 30", workspace=str(ws))
    await client.configure_queue("qp", "collect debounce:0 cap:3 drop:summarize")
    for n in range(6):
        await client.send("qp", f"say burst {n}", message_id=f"b{n}")
    await client.send("qp", "say burst 0", message_id="b0")  # duplicate
    await client.wait_for_run(r.run_id or "")
    await wait_idle(client, "qp", runs=2, timeout=60)
    r = await client.send_and_start("qp", "count slowly to 20")
    await client.send("qp", "say from a", routing=Routing(channel="slack", to="channel:A"))
    await client.send("qp", "say from b", routing=Routing(channel="slack", to="channel:B"))
    await client.configure_queue("qp", "reset")
    await client.wait_for_run(r.run_id or "")
    await wait_idle(client, "qp", runs=5, timeout=60)


async def tool_loop(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start(
        "loop", " then ".join(["read notes.txt"] * 40) + " then say done", workspace=str(ws)
    )
    await client.wait_for_run(r.run_id or "")


async def reopen_restore(client: AgentlaneClient, ws: Path) -> None:
    r = await client.send_and_start("rr", "write a.txt with 1 then say first", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")
    await client.configure_queue("rr", "followup cap:5")
    await client.close("rr")
    await asyncio.wait_for(client.client.get_workflow_handle("session:rr").result(), 30)
    r = await client.send_and_start("rr", "read a.txt then say second")
    await client.wait_for_run(r.run_id or "")


CURRENT: dict[str, object] = {}


async def worker_change(client: AgentlaneClient, ws: Path) -> None:
    """An aborted run, then the worker replaced, then the next message (issue 13: state after
    replay equals state before)."""
    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    r = await client.send_and_start("wc", "count slowly to 300", workspace=str(ws))
    await asyncio.sleep(0.8)
    await client.abort("wc", "stop")
    await client.wait_for_run(r.run_id or "")
    dep.workers[0].kill9()
    dep.workers.clear()
    dep.start_worker()
    r = await client.send_and_start("wc", "say after the change")
    await client.wait_for_run(r.run_id or "")


async def failover(client: AgentlaneClient, ws: Path) -> None:
    """Through the fake provider: a 429 rotates to a second profile, a refused thinking level is
    lowered, and a run whose only profile is cooling waits for it."""
    import secrets

    from activities.auth_store import AuthStore
    from tests.fakes.provider_server import FakeProviderServer, Fault, Reply

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    key_a = "sk-ant-api03-" + secrets.token_hex(24)
    key_b = "sk-ant-api03-" + secrets.token_hex(24)
    with FakeProviderServer(anthropic_keys=[key_a, key_b], openai_keys=[]) as fake:
        (dep.data_dir / "config.toml").write_text(
            "[[models]]\nprovider = 'anthropic'\nid = 'fake-claude'\napi = 'anthropic'\n"
            f"base_url = '{fake.anthropic_base_url}'\n[models.capabilities]\ntools = true\n"
            "thinking_levels = ['off', 'low', 'medium', 'high']\n"
        )
        store = AuthStore.for_data_dir(dep.data_dir)
        store.set_key("anthropic:a", "anthropic", key_a)
        store.set_key("anthropic:b", "anthropic", key_b)
        fake.script(Reply.error(Fault.http(429)), Reply(text="rotated"))
        r = await client.send_and_start(
            "fo", "hello", workspace=str(ws), model="anthropic/fake-claude"
        )
        await client.wait_for_run(r.run_id or "")
        fake.script(Reply(text="lowered"))
        r = await client.send_and_start(
            "fo2",
            "think",
            workspace=str(ws),
            model="anthropic/fake-claude",
            session_overrides={"thinking": "xhigh"},
        )
        await client.wait_for_run(r.run_id or "")


@contextmanager
def fallback_providers() -> Iterator[tuple[FakeProviderServer, Deployment, str, str]]:
    """The fake provider server with two Anthropic profiles (`anthropic:a`, `anthropic:b`) and
    one OpenAI profile, and a config where `main` falls back from Claude to GPT and `solo` has no
    fallback (the failover scenarios). Yields the server, the deployment and the two Anthropic
    keys (scripts target one profile's key)."""
    import secrets

    from activities.auth_store import AuthStore
    from tests.fakes.provider_server import FakeProviderServer

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    key_a = "sk-ant-api03-" + secrets.token_hex(24)
    key_b = "sk-ant-api03-" + secrets.token_hex(24)
    key_o = "sk-proj-" + secrets.token_hex(24)
    with FakeProviderServer(anthropic_keys=[key_a, key_b], openai_keys=[key_o]) as fake:
        (dep.data_dir / "config.toml").write_text(
            "[[models]]\nprovider = 'anthropic'\nid = 'fake-claude'\napi = 'anthropic'\n"
            f"base_url = '{fake.anthropic_base_url}'\n"
            "[[models]]\nprovider = 'openai'\nid = 'fake-gpt'\napi = 'openai-chat'\n"
            f"base_url = '{fake.openai_base_url}'\n"
            "[agents.main]\nmodel = 'anthropic/fake-claude'\nfallbacks = ['openai/fake-gpt']\n"
            "[agents.solo]\nmodel = 'anthropic/fake-claude'\n"
        )
        store = AuthStore.for_data_dir(dep.data_dir)
        store.set_key("anthropic:a", "anthropic", key_a)
        store.set_key("anthropic:b", "anthropic", key_b)
        store.set_key("openai:o", "openai", key_o)
        yield fake, dep, key_a, key_b


async def failover_v2(client: AgentlaneClient, ws: Path) -> None:
    """The failover driver (issue 9): every profile of the primary rate-limited after a tool
    call, so the run falls back to the next model; an idle timeout retried once; an overload
    after shown text rotated; a run that waits for its only profile to cool down; a success
    marking the profile used and good."""
    from tests.fakes.provider_server import Fault, Reply
    from tests.fakes.scripts import ScriptedToolCall

    with fallback_providers() as (fake, dep, key_a, key_b):
        claude = "anthropic/fake-claude"
        fake.script(
            Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})]),
            Reply.error(Fault.http(429), key=key_a),
            Reply.error(Fault.http(429), key=key_b),
            Reply(text="GPT took over.", api="openai-chat"),
        )
        r = await client.send_and_start("fb", "read my notes", workspace=str(ws), model=claude)
        await client.wait_for_run(r.run_id or "")
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(
            Reply(text="late", fault=Fault.stall(5, after_deltas=0)),
            Reply(text="answered on the retry"),
        )
        solo: dict[str, object] = {
            "agent_id": "solo",
            "idle_timeout_seconds": 2,
            "auth_profile": "anthropic:a",
        }
        r = await client.send_and_start(
            "idle", "hello", workspace=str(ws), model=claude, session_overrides=solo
        )
        await client.wait_for_run(r.run_id or "")
        fake.reset()
        fake.script(
            Reply(text="shown and then", fault=Fault.stream_error("overloaded", after_deltas=2)),
            Reply(text="the other key answers"),
        )
        r = await client.send_and_start(
            "mid", "hello", workspace=str(ws), model=claude, session_overrides={"agent_id": "solo"}
        )
        await client.wait_for_run(r.run_id or "")
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(Reply.error(Fault.http(429, retry_after=1)), Reply(text="waited"))
        pinned = {"agent_id": "solo", "auth_profile": "anthropic:b"}
        r = await client.send_and_start(
            "wait", "hello", workspace=str(ws), model=claude, session_overrides=pinned
        )
        await client.wait_for_run(r.run_id or "")


async def context_recovery(client: AgentlaneClient, ws: Path) -> None:
    """Context recovery (issue 10): on a 32 000-token window the preemptive check compacts
    before the provider would refuse; a provider overflow compacts and the same call succeeds;
    a second refusal, with nothing left to summarise, cuts the oversized tool result."""
    import secrets

    from tests.fakes.provider_server import FakeProviderServer, Reply
    from tests.fakes.scripts import ScriptedToolCall

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    key = "sk-ant-api03-" + secrets.token_hex(24)
    with FakeProviderServer(anthropic_keys=[key]) as fake:
        (dep.data_dir / "config.toml").write_text(
            "[[models]]\nprovider = 'anthropic'\nid = 'fake-small'\napi = 'anthropic'\n"
            f"base_url = '{fake.anthropic_base_url}'\ncontext_window = 32000\n"
            "[[models]]\nprovider = 'anthropic'\nid = 'fake-claude'\napi = 'anthropic'\n"
            f"base_url = '{fake.anthropic_base_url}'\n"
        )
        from activities.auth_store import AuthStore

        AuthStore.for_data_dir(dep.data_dir).set_key("anthropic:k", "anthropic", key)
        (ws / "big.txt").write_text("\n".join(f"line {i}: " + "data " * 20 for i in range(110)))
        (ws / "huge.txt").write_text("\n".join(f"row {i} " + "x" * 90 for i in range(700)))

        def read(path: str) -> Reply:
            return Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": path})])

        fake.context_window(32_000)
        for turn in range(8):
            fake.script(read("big.txt"), Reply(text=f"read it, turn {turn}"))
            r = await client.send_and_start(
                "small",
                f"turn {turn}: read big.txt",
                workspace=str(ws),
                model="anthropic/fake-small",
            )
            await client.wait_for_run(r.run_id or "")
        fake.reset()
        filler = " ".join(f"word{i}" for i in range(250))
        for n in range(6):
            fake.script(Reply(text=f"noted {n}"))
            r = await client.send_and_start(
                "big", f"message {n}: {filler}", workspace=str(ws), model="anthropic/fake-claude"
            )
            await client.wait_for_run(r.run_id or "")
        overflow = Reply.overflow(prompt_tokens=70_000, limit_tokens=60_000)
        fake.script(read("huge.txt"), overflow, overflow, Reply(text="made it"))
        r = await client.send_and_start("big", "read huge.txt", model="anthropic/fake-claude")
        await client.wait_for_run(r.run_id or "")


async def reset_branch(client: AgentlaneClient, ws: Path) -> None:
    """Issue 10: a reset while idle, a reset while a run is busy with a message queued, a branch
    that runs, is closed and is reopened by a message (its tree place restored to its memo)."""
    r = await client.send_and_start("rb", "say one", workspace=str(ws))
    first = await client.wait_for_run(r.run_id or "")
    await client.reset("rb")
    busy = await client.send_and_start("rb", "run `sleep 20`")
    await asyncio.wait_for(
        _until(client, "rb", busy.run_id or "", EventKind.TOOL_EXECUTION_START), 30
    )
    await client.send("rb", "say kept", mode="followup")
    await client.reset("rb", "start over")
    await wait_idle(client, "rb", runs=3)
    await client.branch("rb", first.last_entry_id or "", "rb-b")
    r = await client.send_and_start("rb-b", "say in the branch")
    await client.wait_for_run(r.run_id or "")
    await client.close("rb-b")
    while await client.session_exists("rb-b"):  # noqa: ASYNC110 (polls the server)
        await asyncio.sleep(0.1)
    r = await client.send_and_start("rb-b", "say reopened")
    await client.wait_for_run(r.run_id or "")


async def webhooks(client: AgentlaneClient, ws: Path) -> None:
    """Issue 11: replies POSTed to a callback that fails its first deliveries and goes away for
    a moment; the session continues as new with a delivery pending, then closes after the last
    one is delivered."""
    from tests.e2e.test_webhooks import Receiver

    # The receiver listens on loopback, which webhooks may reach only when the config allows.
    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    (dep.data_dir / "config.toml").write_text("[webhooks]\nallow_private = true\n")
    receiver = Receiver(fail_first=3, down_after_failures=2.0)
    receiver.start()
    try:
        routing = Routing(channel="rec", to="r1", callback_url=receiver.url)
        overrides: dict[str, object] = {"continue_as_new_after_events": 30}
        r = await client.send_and_start(
            "hooks", "count to 400", workspace=str(ws), routing=routing, session_overrides=overrides
        )
        await client.wait_for_run(r.run_id or "")
        for text in ("say two", "say three"):
            await client.send("hooks", text)
            await wait_idle(client, "hooks", runs=3 if text == "say three" else 2)
        r = await client.send_and_start("hooks", "run `sleep 20` then say never")
        await asyncio.wait_for(
            _until(client, "hooks", r.run_id or "", EventKind.TOOL_EXECUTION_START), 30
        )
        await client.abort("hooks", "stop")
        await client.wait_for_run(r.run_id or "")
        await client.close("hooks")
        await asyncio.wait_for(client.client.get_workflow_handle("session:hooks").result(), 60)
        ends = {json.loads(r.body)["id"] for r in receiver.accepted()}
        expected = {f"session:hooks:run:{n}/final_reply" for n in (1, 2, 3)}
        assert expected | {"session:hooks:run:4/error"} <= ends, ends
    finally:
        receiver.stop()


async def queue_drops(client: AgentlaneClient, ws: Path) -> None:
    """Issue 19: messages the cap drops are recorded (transcript, event, webhook) before the next
    run; drop:new refuses a send and drops a signal visibly; the session continues as new with
    the drops' state, then closes."""
    from agentlane.messages import InboundMessage
    from tests.e2e.test_webhooks import Receiver
    from workflows.session import SessionWorkflow

    receiver = Receiver()
    receiver.start()
    try:
        routing = Routing(channel="rec", to="r1", callback_url=receiver.url)
        overrides: dict[str, object] = {"continue_as_new_after_events": 60}
        r = await client.send_and_start(
            "drops",
            "count slowly to 40",
            workspace=str(ws),
            routing=routing,
            session_overrides=overrides,
        )
        await client.configure_queue("drops", "followup cap:2 drop:summarize")
        for n in range(6):
            await client.send("drops", f"say burst {n}", message_id=f"d{n}")
        await client.wait_for_run(r.run_id or "")
        await wait_idle(client, "drops", runs=3, timeout=60)
        r = await client.send_and_start("drops", "count slowly to 30")
        await client.configure_queue("drops", "collect cap:1 drop:new")
        await client.send("drops", "say kept", message_id="k1")
        await client.client.get_workflow_handle("session:drops").signal(
            SessionWorkflow.enqueue, InboundMessage(text="say signalled", message_id="s1")
        )
        await client.wait_for_run(r.run_id or "")
        await wait_idle(client, "drops", runs=5, timeout=60)
        await client.close("drops")
        await asyncio.wait_for(client.client.get_workflow_handle("session:drops").result(), 60)
        told = [json.loads(r.body) for r in receiver.accepted()]
        assert {b["message_id"] for b in told if b["kind"] == "message_dropped"} == {
            "d0",
            "d1",
            "d2",
            "d3",
            "s1",
        }, told
    finally:
        receiver.stop()


async def search_attributes(client: AgentlaneClient, ws: Path) -> None:
    """Issue 12, the upserts of search attributes: a run that falls back to another model after
    a tool call (its model upserted), one that waits for its cooling profile (waiting, then
    running), one that ends with rate_limit (the session's last error), a success that clears
    it, and a session that continues as new between runs (the attributes go along)."""
    from tests.fakes.provider_server import Fault, Reply
    from tests.fakes.scripts import ScriptedToolCall

    with fallback_providers() as (fake, dep, key_a, key_b):
        claude = "anthropic/fake-claude"
        tg = Routing(channel="telegram")
        fake.script(
            Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": "notes.txt"})]),
            Reply.error(Fault.http(429), key=key_a),
            Reply.error(Fault.http(429), key=key_b),
            Reply(text="GPT took over.", api="openai-chat"),
        )
        r = await client.send_and_start(
            "fallback", "read my notes", workspace=str(ws), model=claude, routing=tg
        )
        await client.wait_for_run(r.run_id or "")
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(Reply.error(Fault.http(429, retry_after=1)), Reply(text="waited"))
        solo: dict[str, object] = {
            "agent_id": "solo",
            "auth_profile": "anthropic:b",
            "continue_as_new_after_events": 20,
        }
        r = await client.send_and_start(
            "wait", "hello", workspace=str(ws), model=claude, session_overrides=solo
        )
        await client.wait_for_run(r.run_id or "")
        fake.script(Reply(text="fine again"))
        r = await client.send_and_start("wait", "and now?")
        await client.wait_for_run(r.run_id or "")
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(Reply.error(Fault.http(429)))
        r = await client.send_and_start(
            "error",
            "hello",
            workspace=str(ws),
            model=claude,
            session_overrides={**solo, "max_wait_seconds": 0},
        )
        await client.wait_for_run(r.run_id or "")
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(Reply(text="fine"))
        r = await client.send_and_start("error", "and now?")
        await client.wait_for_run(r.run_id or "")


async def scheduled(client: AgentlaneClient, ws: Path) -> None:
    """Issue 12: one firing of a schedule (paused, then triggered): the firing workflow sends a
    cron message, the session runs it, the firing waits for the run's end."""
    await client.create_schedule(
        "every-2s", "scheduled", "sleep 1 then say tick", every="2s", workspace=str(ws), paused=True
    )
    await client.trigger_schedule("every-2s")
    while True:
        view = await client.describe_schedule("every-2s")
        if any(f.outcome is not None and f.outcome.status for f in view.recent):
            break
        await asyncio.sleep(0.2)
    await client.delete_schedule("every-2s")


async def host_routing(client: AgentlaneClient, ws: Path) -> None:
    """Issue 20: a session's first tool call pins its host (its default workspace is made
    there) and its next run's tools go to that host's queue; a run waits for a host that is
    gone and ends naming it; an abort ends another run's wait."""
    r = await client.send_and_start("pin", "write a.txt with one then read a.txt")
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("pin", "run `echo two` then read a.txt")
    await client.wait_for_run(r.run_id or "")
    gone: dict[str, object] = {"workspace_host": "gone", "host_wait_seconds": 12}
    ends = await client.send_and_start(
        "gone", "read notes.txt", workspace=str(ws), session_overrides=gone
    )
    waits = await client.send_and_start(
        "waits", "read notes.txt", workspace=str(ws), session_overrides={"workspace_host": "gone"}
    )
    for _ in range(200):
        if (await client.status("waits")).waiting_reason is not None:
            break
        await asyncio.sleep(0.3)
    await client.abort("waits", "stop waiting")
    await client.wait_for_run(waits.run_id or "")
    await client.wait_for_run(ends.run_id or "")


async def thinking_and_window(client: AgentlaneClient, ws: Path) -> None:
    """Issue 24: a session sent at thinking `high` whose provider refuses the level (lowered,
    with a warning); and a provider window of 6 000 under a configured 16 000 (the overflow
    compacts to fit it, the session remembers it, the next run compacts before sending)."""
    import secrets

    from activities.auth_store import AuthStore
    from tests.fakes.provider_server import FakeProviderServer, Fault, Reply

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    key = "sk-ant-api03-" + secrets.token_hex(24)
    with FakeProviderServer(anthropic_keys=[key]) as fake:
        (dep.data_dir / "config.toml").write_text(
            "[[models]]\nprovider = 'anthropic'\nid = 'claude-16k'\napi = 'anthropic'\n"
            f"base_url = '{fake.anthropic_base_url}'\ncontext_window = 16000\n"
            "[models.capabilities]\ntools = true\n"
            "thinking_levels = ['off', 'low', 'medium', 'high']\n"
        )
        AuthStore.for_data_dir(dep.data_dir).set_key("anthropic:k", "anthropic", key)
        model = "anthropic/claude-16k"
        fake.script(Reply.error(Fault.named("thinking_unsupported")), Reply(text="no thinking"))
        r = await client.send_and_start(
            "think", "think hard", workspace=str(ws), model=model, thinking="high"
        )
        await client.wait_for_run(r.run_id or "")
        fake.reset()

        def filler(n: int, words: int) -> str:
            return f"message {n}. " + " ".join(f"word{i}" for i in range(words))

        for n in range(5):
            r = await client.send_and_start(
                "window", filler(n, 320), workspace=str(ws), model=model
            )
            await client.wait_for_run(r.run_id or "")
        fake.context_window(6000)
        for text in ("the first number? " + filler(99, 1400), filler(100, 320)):
            r = await client.send_and_start("window", text, model=model)
            await client.wait_for_run(r.run_id or "")


async def transient_retry(client: AgentlaneClient, ws: Path) -> None:
    """Transient server errors (issue 24): a 500 made again after its Retry-After; 502s past a
    small wait budget falling back to the next model; the one retry of the whole chain after
    2.5 s; an overload made again twice, then its Retry-After waited before a rotation."""
    from tests.fakes.provider_server import Fault, Reply

    with fallback_providers() as (fake, dep, _key_a, _key_b):
        claude = "anthropic/fake-claude"
        solo: dict[str, object] = {"agent_id": "solo"}
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("t500", [Reply.error(Fault.http(500, retry_after=0.2)), Reply(text="ok")], solo),
            (
                "tfb",
                [
                    *[Reply.error(Fault.http(502, retry_after=0.4), api="anthropic")] * 3,
                    Reply(text="GPT took over.", api="openai-chat"),
                ],
                {"max_wait_seconds": 1},
            ),
            (
                "tchain",
                [
                    Reply.error(Fault.http(500, retry_after=1)),
                    Reply.error(Fault.http(500)),
                    Reply(text="third time"),
                ],
                {**solo, "max_wait_seconds": 4},
            ),
            (
                "tover",
                [*[Reply.error(Fault.http(529, retry_after=0.2))] * 3, Reply(text="rotated")],
                solo,
            ),
        ]
        await _scripted_runs(client, ws, fake, dep, claude, runs)


async def _scripted_runs(
    client: AgentlaneClient,
    ws: Path,
    fake: FakeProviderServer,
    dep: Deployment,
    model: str,
    runs: list[tuple[str, list[Reply], dict[str, object]]],
) -> None:
    """One run per (session key, scripted replies, session overrides), from a clean slate."""
    for key, replies, overrides in runs:
        clear_profile_state(dep.data_dir)
        fake.reset()
        fake.script(*replies)
        r = await client.send_and_start(
            key, "hello", workspace=str(ws), model=model, session_overrides=overrides
        )
        await client.wait_for_run(r.run_id or "")


async def transport_retry(client: AgentlaneClient, ws: Path) -> None:
    """Transport faults made again by the run (issue 24): a reset twice then an answer; a
    stream cut after two deltas then made again in full; resets past a small wait budget
    falling back to the next model; and, with no fallback, the run's end naming the fault."""
    from tests.fakes.scripts import Fault, Reply

    with fallback_providers() as (fake, dep, _key_a, _key_b):
        solo: dict[str, object] = {"agent_id": "solo"}
        reset = Reply.error(Fault.reset(), api="anthropic")
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("xreset", [reset, reset, Reply(text="ok")], solo),
            (
                "xcut",
                [Reply(text="cut and again", fault=Fault.drop(2)), Reply(text="cut and again")],
                solo,
            ),
            (
                "xfb",
                [reset, reset, Reply(text="GPT took over.", api="openai-chat")],
                {"max_wait_seconds": 1},
            ),
            ("xend", [reset, reset, reset], {**solo, "max_wait_seconds": 1}),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def tool_policy(client: AgentlaneClient, ws: Path) -> None:
    """Issue 21, the tool policy: a run from a non-owner sender whose model calls a denied tool
    and an owner-only one (both refused) and continues as new with its policy; then a message
    through a channel whose layer denies more, after the config changed under the worker."""
    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    (dep.data_dir / "config.toml").write_text(
        '[tools]\ndeny = ["exec"]\nowner_senders = ["alice"]\nowner_only = ["write"]\n'
    )
    overrides: dict[str, object] = {"run_continue_as_new_after_events": 20}
    r = await client.send_and_start(
        "policy",
        "run `echo hi` then write x.txt with y then read notes.txt then read notes.txt then "
        "read notes.txt then say done",
        workspace=str(ws),
        sender="mallory",
        session_overrides=overrides,
    )
    await client.wait_for_run(r.run_id or "")
    (dep.data_dir / "config.toml").write_text('[tools.by_channel.slack]\ndeny = ["read"]\n')
    r = await client.send_and_start(
        "policy", "read notes.txt then say done", routing=Routing(channel="slack", to="C1")
    )
    await client.wait_for_run(r.run_id or "")


async def subagents(client: AgentlaneClient, ws: Path) -> None:
    """A tree of depth 2 whose leaf is refused a third level, then two children at once."""
    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    (dep.data_dir / "config.toml").write_text(
        '[subagents]\nmax_spawn_depth = 2\n[subagents.tools]\nalso_allow = ["sessions_spawn"]\n'
    )
    r = await client.send_and_start(
        "subagents",
        "spawn a sub-agent to \"spawn a sub-agent to 'spawn a sub-agent to `say deep`' "
        'then say middle done" then spawn 2 sub-agents to `read notes.txt` then say top done',
        workspace=str(ws),
    )
    await client.wait_for_run(r.run_id or "")


async def files_and_processes(client: AgentlaneClient, ws: Path) -> None:
    """Issue 21: an image read, apply_patch (a local activity), a background process started and
    polled on its worker's own queue, then the worker replaced and the process reported lost
    (the routed call that no worker takes, and its fallback)."""
    from tests.fakes.images import tiny_png

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    (ws / "red.png").write_bytes(tiny_png())
    patch = "*** Begin Patch\n*** Add File: added.txt\n+added\n*** End Patch"
    r = await client.send_and_start(
        "procs",
        f"read red.png then apply this patch:\n{patch}\nthen start `echo up; sleep 60` in the "
        "background then poll it for 2 seconds",
        workspace=str(ws),
    )
    await client.wait_for_run(r.run_id or "")
    dep.workers[0].kill9()
    dep.workers.clear()
    dep.start_worker()
    r = await client.send_and_start("procs", "poll proc-1 then list processes")
    await client.wait_for_run(r.run_id or "")


async def approvals(client: AgentlaneClient, ws: Path) -> None:
    """Issue 21: calls that wait for a person's yes: one approved, one denied with a reason, one
    expired (denied), one expired with on_timeout = "abort", and an abort during the wait."""
    from tests.e2e.test_approvals import configure, pending_approval

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    configure(dep)
    r = await client.send_and_start("ap-ok", "run `echo ok` then say done", workspace=str(ws))
    approval = await pending_approval(client, "ap-ok")
    await client.decide_approval("ap-ok", approval.id, approve=True, by="recorder")
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("ap-no", "run `echo no` then say done", workspace=str(ws))
    approval = await pending_approval(client, "ap-no")
    await client.decide_approval("ap-no", approval.id, approve=False, reason="not now")
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("ap-stop", "run `echo x` then say never", workspace=str(ws))
    await pending_approval(client, "ap-stop")
    await client.abort("ap-stop", "stop")
    await client.wait_for_run(r.run_id or "")
    configure(dep, timeout=1)
    r = await client.send_and_start("ap-exp", "run `echo late` then say done", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")
    configure(dep, timeout=1, on_timeout="abort")
    r = await client.send_and_start("ap-abort", "run `echo late` then say no", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")


async def run_outcome(client: AgentlaneClient, ws: Path) -> None:
    """Runs whose workflow status is their outcome (issue 25), each with one patch marker: one
    that succeeds, one aborted after a tool call (who asked in its signal), one interrupted, one
    that fails (its workspace gone), and a session that answers after each."""
    r = await client.send_and_start("outcome", "read notes.txt then say read", workspace=str(ws))
    await client.wait_for_run(r.run_id or "")
    loop = " then ".join(f"write f{i}.txt with {i}" for i in range(60)) + " then say done"
    r = await client.send_and_start("outcome", loop)
    await asyncio.wait_for(
        _until(client, "outcome", r.run_id or "", EventKind.TOOL_EXECUTION_END), 30
    )
    await client.abort("outcome", "enough")
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("outcome", loop)
    await asyncio.sleep(0.2)
    i = await client.send_and_start("outcome", "say switched", mode="interrupt")
    await client.wait_for_run(i.run_id or "")
    moved = ws.with_name(ws.name + "-away")
    ws.rename(moved)
    r = await client.send_and_start("outcome", "say into the void")
    await client.wait_for_run(r.run_id or "")
    moved.rename(ws)
    await wait_idle(client, "outcome", runs=5, timeout=60)
    r = await client.send_and_start("outcome", "say still here")
    await client.wait_for_run(r.run_id or "")


async def abort_held(client: AgentlaneClient, ws: Path) -> None:
    """A run with tools, then an abort sent with its message before any worker ran them (held
    for that run, which starts and ends aborted)."""
    r = await client.send_and_start(
        "pf", "read notes.txt then write n.txt with done then say done", workspace=str(ws)
    )
    await client.wait_for_run(r.run_id or "")
    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    dep.stop_workers()
    try:
        await client.send(
            "held", "write h.txt with x then say done", workspace=str(ws), worker_wait=1
        )
    except NoWorker:
        pass
    try:
        await client.abort("held", "changed my mind")
    except NoWorker:
        pass
    dep.start_worker()
    fate = await client.wait_started("held", 1)
    await client.wait_for_run(fate.run_id or "")


async def subagent_lane_approvals_stops(client: AgentlaneClient, ws: Path) -> None:
    """Issue 21's gaps: sub-agents whose model calls go to the sub-agent lane's queue, one whose
    exec waits for approval in its top-level session (approved there), one whose approval
    expires; then a background process stopped by a reset, another by the session's close."""
    from tests.e2e.test_approvals import configure, pending_approval

    dep = CURRENT["deployment"]
    assert isinstance(dep, Deployment)
    configure(dep)
    r = await client.send_and_start(
        "sub-ap",
        'spawn a sub-agent to "run `echo sub` then say child done" then say parent done',
        workspace=str(ws),
    )
    approval = await pending_approval(client, "sub-ap")
    await client.decide_approval("sub-ap", approval.id, approve=True, by="recorder")
    await client.wait_for_run(r.run_id or "")
    configure(dep, timeout=1)
    r = await client.send_and_start(
        "sub-exp", "spawn a sub-agent to `run echo late` then say done", workspace=str(ws)
    )
    await client.wait_for_run(r.run_id or "")
    (dep.data_dir / "config.toml").write_text("")
    for key in ("stop-reset", "stop-close"):
        r = await client.send_and_start(
            key, "start `sleep 300` in the background then say started", workspace=str(ws)
        )
        await client.wait_for_run(r.run_id or "")
    await client.reset("stop-reset")
    await client.close("stop-close")
    await asyncio.wait_for(client.client.get_workflow_handle("session:stop-close").result(), 30)


async def five_step_runs(client: AgentlaneClient, ws: Path, key: str, runs: int) -> None:
    """Messages of 5-step runs one after the other, as in the soak (bench/bench_soak.py)."""
    for _ in range(runs):
        r = await client.send_and_start(
            key,
            "read notes.txt then write out.txt with hi then run `true` then read out.txt "
            "then say done",
            workspace=str(ws),
        )
        await client.wait_for_run(r.run_id or "")


async def bounded_fates(client: AgentlaneClient, ws: Path) -> None:
    """Issue 26: 120 messages without ids queued behind a busy run, taken by the next run: the
    session lets the oldest fates go (written under the session's newest code level), and
    `wait_started` for one of those answers `forgotten`."""
    from agentlane.ids import session_workflow_id
    from agentlane.messages import InboundMessage
    from agentlane.queue_settings import QueueOptions
    from workflows.session import SessionWorkflow

    first = await client.send_and_start("fates", "run `sleep 300`", workspace=str(ws))
    session = client.client.get_workflow_handle(session_workflow_id("fates"))
    wide = QueueOptions(cap=200, debounce_ms=0)
    for n in range(120):
        await session.execute_update(
            SessionWorkflow.send, InboundMessage(text=f"note {n}", queue=wide)
        )
    await client.abort("fates", "let the queue run")
    await client.wait_for_run(first.run_id or "")
    await wait_idle(client, "fates", runs=2)
    assert (await client.wait_started("fates", 2)).state.value == "forgotten"
    last = await client.send_and_start("fates", "say done")
    await client.wait_for_run(last.run_id or "")


async def code_levels(client: AgentlaneClient, ws: Path) -> None:
    """Issue 22: workflows the engine starts name their code level in their input and write no
    patch marker: a session's runs and stream, every continue-as-new (session, run, stream),
    sub-agents and their streams; a closed session's background-process stop."""
    await continue_as_new(client, ws)
    await subagents(client, ws)
    await client.close("can")


async def stops_told(client: AgentlaneClient, ws: Path) -> None:
    """Code levels of 2026-11-27 (evening): a run aborted while two sub-agents work tells each
    why before cancelling it (`run-abort-tells-sub-agents`); a run terminated by an operator is
    counted in its session from its transcript (`session-counts-abnormal-runs`); a call refused
    by the model call itself (an unknown tool) and a reply cut short (a warning)."""
    r = await client.send_and_start(
        "told", "spawn 2 sub-agents to `run sleep 30` then say never", workspace=str(ws)
    )
    await asyncio.wait_for(
        _until(client, "told", r.run_id or "", EventKind.TOOL_EXECUTION_START), 30
    )
    await asyncio.sleep(1.5)
    await client.abort("told", "enough")
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("told", "run `sleep 20` then say finally")
    await asyncio.wait_for(
        _until(client, "told", r.run_id or "", EventKind.TOOL_EXECUTION_START), 30
    )
    await client.client.get_workflow_handle(r.run_id or "").terminate("operator")
    await wait_idle(client, "told", runs=3, timeout=60)


async def events_at_rest(client: AgentlaneClient, ws: Path) -> None:
    """Issue 26: a session whose event stream hands over at its runs' ends (halfway to its
    bound)."""
    await five_step_runs(client, ws, "at-rest", 10)


async def events_rest_carry(client: AgentlaneClient, ws: Path) -> None:
    """Issue 26: the stream past half its 512 KB bound hands over at a run's end carrying only
    its newest 16 KB (`events-rest-carry`); enough runs for one such hand-over."""
    await five_step_runs(client, ws, "rest-carry", 16)


async def events_settled(client: AgentlaneClient, ws: Path) -> None:
    """A stream segment past half its bound at a run's end within its first second
    (`events-code-2026-11-27`): it waits, by a timer, until it has lived a second, then hands
    over; the next segment starts without the server's backoff. Started directly with a 64 KB
    bound, as `tests/e2e/test_event_stream_rollover.py` does."""
    key, temporal = "settled", client.client
    wid = events_workflow_id(key)
    await temporal.start_workflow(
        "SessionEventsWorkflow",
        EventsInput(session_key=key, continue_as_new_after_bytes=64 * 1024),
        id=wid,
        task_queue=client.settings.workflow_task_queue,
    )
    publisher = WorkflowStreamClient.create(temporal, wid, batch_interval=timedelta(hours=1))
    assert await publisher.get_offset() == 0  # its first task ran
    async with publisher:
        topic = publisher.topic(EVENTS_TOPIC, type=AgentEvent)
        for i in range(80):
            topic.publish(
                AgentEvent(
                    kind=EventKind.TEXT_DELTA,
                    event_id=f"e{i}",
                    session_key=key,
                    run_id="r",
                    text="x" * 400,
                )
            )
        topic.publish(
            AgentEvent(kind=EventKind.AGENT_END, event_id="end", session_key=key, run_id="r")
        )
        await publisher.flush()
    for _ in range(100):
        runs = [wf async for wf in temporal.list_workflows(f"WorkflowId = '{wid}'")]
        if len(runs) > 1:
            break
        await asyncio.sleep(0.1)
    await temporal.get_workflow_handle(wid).signal("close")


async def settled_waits(client: AgentlaneClient, ws: Path) -> None:
    """`wait_started` waits in the session until its message's fate settles (the session's
    `session-code-2026-11-26-wait` level): a message that starts a run at once; one queued behind
    a busy run with six callers waiting (four held by the session, two answered `pending` and
    asking again); the session continuing as new between the runs with the message queued."""
    first = await client.send_and_start(
        "waits",
        "run `sleep 2`",
        workspace=str(ws),
        session_overrides={"continue_as_new_after_events": 20},
    )
    queued = await client.send("waits", "say after", mode="followup")
    fates = await asyncio.gather(
        *(client.wait_started("waits", queued.message_seq) for _ in range(6))
    )
    assert {f.run_id for f in fates} == {"session:waits:run:2"}, fates
    await client.wait_for_run(first.run_id or "")
    await wait_idle(client, "waits", runs=2)


async def rejected_calls(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28: calls the model activity rejected count for loop detection: one
    unknown tool then an answer; a write whose arguments the output limit cut, made again until
    the run is stopped."""
    from tests.fakes.scripts import Reply, ScriptedToolCall

    cut = ScriptedToolCall(name="write", arguments='{"path": "t.txt", "content": "partial')
    unknown = ScriptedToolCall(name="frobnicate", arguments={"x": 1})
    with fallback_providers() as (fake, dep, _key_a, _key_b):
        solo: dict[str, object] = {"agent_id": "solo"}
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("rjone", [Reply(tool_calls=[unknown]), Reply(text="done")], solo),
            ("rjloop", [Reply(tool_calls=[cut], stop_reason="max_tokens")] * 40, solo),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def capped_fallback(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-b: with a fallback configured, a 503 whose Retry-After would take
    the model's retries past 30 s moves the run to the next model at once."""
    from tests.fakes.scripts import Fault, Reply

    with fallback_providers() as (fake, dep, _key_a, _key_b):
        busy = Reply.error(Fault.http(503, retry_after=31), api="anthropic")
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("cfb", [busy, Reply(text="GPT took over.", api="openai-chat")], {}),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def engine_queue(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-c: a run's finish on the engine's own queue; a run with a tool call
    and one aborted while its command runs."""
    r = await client.send_and_start(
        "engineq", "read notes.txt then run `echo hi` then say done", workspace=str(ws)
    )
    await client.wait_for_run(r.run_id or "")
    r = await client.send_and_start("engineq", "run `sleep 20` then say never")
    await _until(client, "engineq", r.run_id or "", EventKind.TOOL_EXECUTION_START)
    await client.abort("engineq", "recorded")
    await client.wait_for_run(r.run_id or "")


async def incomplete_streams(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-d: streams that end without a stop reason, made again twice, then
    the run's end; one that is cut once, then answers."""
    from tests.fakes.scripts import Fault, Reply

    with fallback_providers() as (fake, dep, _key_a, _key_b):
        solo: dict[str, object] = {"agent_id": "solo"}
        cut = Reply(text="the same whole answer", fault=Fault.truncate(after_deltas=2))
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("incend", [cut, cut, cut, cut], solo),
            ("incok", [cut, Reply(text="whole")], solo),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def told_cooldown(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-e: a 429 asking for 900 s marks its profile for that long; the run
    rotates to the other profile and answers."""
    from tests.fakes.scripts import Fault, Reply

    with fallback_providers() as (fake, dep, key_a, _key_b):
        solo: dict[str, object] = {"agent_id": "solo"}
        limited = Reply.error(Fault.http(429, retry_after=900), key=key_a)
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("told", [limited, Reply(text="the other key answers")], solo),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def stream_server_error(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-g: a server error said inside the stream (Anthropic's `api_error`
    event) after some text is made again like its 500; one that never stops ends the run on
    the wait budget as `server_error`."""
    from tests.fakes.scripts import Fault, Reply

    with fallback_providers() as (fake, dep, _key_a, _key_b):
        solo: dict[str, object] = {"agent_id": "solo", "max_wait_seconds": 5}
        said = Reply(text="half an answer", fault=Fault.stream_error("server", after_deltas=2))
        runs: list[tuple[str, list[Reply], dict[str, object]]] = [
            ("sserr", [said, Reply(text="whole")], solo),
            ("sserrend", [said] * 6, solo),
        ]
        await _scripted_runs(client, ws, fake, dep, "anthropic/fake-claude", runs)


async def cap_by_age(client: AgentlaneClient, ws: Path) -> None:
    """Session code level 2026-11-28: under a full queue the cap drops the oldest follow-ups and
    keeps the interrupts it accepted, which then run in the order they were sent."""
    r = await client.send_and_start("capage", "count slowly to 30", workspace=str(ws))
    await client.configure_queue("capage", "followup cap:2 drop:summarize debounce:0")
    await client.send("capage", "say f1", mode="followup")
    await client.send("capage", "say f2", mode="followup")
    await client.send("capage", "say i1", mode="interrupt")
    await client.send("capage", "say i2", mode="interrupt")
    await client.wait_for_run(r.run_id or "")
    await wait_idle(client, "capage", runs=3, timeout=60)


async def spawn_pins(client: AgentlaneClient, ws: Path) -> None:
    """Code level 2026-11-28-f: a new session (default workspace) whose first tool call is a
    spawn: the spawn's step makes the workspace and pins the parent, and the child works there."""
    r = await client.send_and_start(
        "spawnpin", 'spawn a sub-agent to "write a.txt with one" then read a.txt'
    )
    await client.wait_for_run(r.run_id or "")


SCENARIOS: dict[str, Callable[[AgentlaneClient, Path], Awaitable[None]]] = {
    "tools": tools,
    "steer_and_queue": steer_and_queue,
    "interrupt_and_abort": interrupt_and_abort,
    "continue_as_new": continue_as_new,
    "workspace_error": workspace_error,
    "close_and_reopen": close_and_reopen,
    "control": control,
    "queue_policies": queue_policies,
    "tool_loop": tool_loop,
    "reopen_restore": reopen_restore,
    "worker_change": worker_change,
    "failover": failover,
    "failover_v2": failover_v2,
    "transient_retry": transient_retry,
    "transport_retry": transport_retry,
    "context_recovery": context_recovery,
    "reset_branch": reset_branch,
    "webhooks": webhooks,
    "search_attributes": search_attributes,
    "scheduled": scheduled,
    "queue_drops": queue_drops,
    "host_routing": host_routing,
    "thinking_and_window": thinking_and_window,
    "tool_policy": tool_policy,
    "subagents": subagents,
    "files_and_processes": files_and_processes,
    "approvals": approvals,
    "run_outcome": run_outcome,
    "abort_held": abort_held,
    "subagent_lane_approvals_stops": subagent_lane_approvals_stops,
    "events_at_rest": events_at_rest,
    "events_rest_carry": events_rest_carry,
    "bounded_fates": bounded_fates,
    "code_levels": code_levels,
    "settled_waits": settled_waits,
    "events_settled": events_settled,
    "stops_told": stops_told,
    "rejected_calls": rejected_calls,
    "capped_fallback": capped_fallback,
    "engine_queue": engine_queue,
    "incomplete_streams": incomplete_streams,
    "told_cooldown": told_cooldown,
    "cap_by_age": cap_by_age,
    "spawn_pins": spawn_pins,
    "stream_server_error": stream_server_error,
}


async def export_all(client: AgentlaneClient, target: Path) -> int:
    count = 0
    async for wf in client.client.list_workflows(""):
        if wf.id.startswith("temporal-sys-"):
            continue  # the server's own (a schedule's scheduler): not our code to replay
        handle = client.client.get_workflow_handle(wf.id, run_id=wf.run_id)
        history = await handle.fetch_history()
        name = f"{wf.id.replace(':', '_')}__{wf.run_id}.json"
        (target / name).write_text(json.dumps(json.loads(history.to_json()), indent=None))
        count += 1
    return count


async def record(name: str, scenario: Callable[[AgentlaneClient, Path], Awaitable[None]]) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"record-{name}-"))
    server = devserver.DevServer(
        data_dir=root / "temporal", port=devserver.free_port(), ui_port=None
    )
    server.start()
    dep = make_deployment(server, root / "data")
    dep.data_dir.mkdir()
    CURRENT["deployment"] = dep
    try:
        dep.start_worker()
        client = await AgentlaneClient.connect(settings_for(dep))
        ws = dep.data_dir / "ws"
        ws.mkdir()
        (ws / "notes.txt").write_text("alpha line\nbeta line\ngamma\n")
        await asyncio.wait_for(scenario(client, ws), 120)
        await asyncio.sleep(1)
        target = HERE / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        print(f"{name}: {await export_all(client, target)} histories")
    finally:
        dep.stop_workers()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def main() -> None:
    only = os.environ.get("SCENARIO")
    for name, scenario in SCENARIOS.items():
        if only in (None, name):
            await record(name, scenario)


if __name__ == "__main__":
    asyncio.run(main())
    os._exit(0)
