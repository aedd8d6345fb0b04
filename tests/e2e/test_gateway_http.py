"""The HTTP gateway's routes against a real dev server and worker: messages in (send, steer,
interrupt, abort, duplicates), every validation error as a problem document with nothing
reaching a workflow, tokens (401, 403, read-only, prefixes, rate limit), transcript pages."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentlane.ids import storage_name
from agentlane.messages import MAX_MESSAGE_CHARS
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from clients.gateway.app import create_app
from clients.gateway.sse import TOKEN_RECHECK_SECONDS
from tests.conftest import settings_for
from tests.e2e.gateway_support import GatewayServer, read_sse
from tests.e2e.support import update_identities
from tests.harness import Deployment


@pytest.fixture(scope="module")
def gateway(shared: Deployment) -> Iterator[GatewayServer]:
    with GatewayServer(settings_for(shared)) as gw:
        yield gw


@pytest.fixture(scope="module")
def token(gateway: GatewayServer) -> str:
    return gateway.token(name="tests")


def key() -> str:
    return f"gw-{uuid.uuid4().hex[:10]}"


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert {"type", "title", "detail"} <= set(body)
    return body


async def wait_text_delta(http: httpx.AsyncClient, k: str, run_id: str) -> None:
    """Until the run streams text (read through the gateway's own SSE)."""
    from tests.e2e.gateway_support import read_sse

    await read_sse(
        http,
        f"/v1/sessions/{k}/events?from=0",
        lambda ev: ev.event == "text_delta" and ev.json()["run_id"] == run_id,
    )


async def test_health_and_openapi_need_no_token(gateway: GatewayServer) -> None:
    async with gateway.http() as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        spec = (await http.get("/openapi.json")).json()
    paths = spec["paths"]
    for path in (
        "/v1/sessions/{key}/messages",
        "/v1/sessions/{key}",
        "/v1/sessions/{key}/abort",
        "/v1/sessions/{key}/close",
        "/v1/sessions/{key}/reset",
        "/v1/sessions/{key}/transcript",
        "/v1/sessions/{key}/events",
        "/v1/sessions",
        "/v1/models",
    ):
        assert path in paths
        for op in paths[path].values():
            assert op["summary"]
    body = spec["components"]["schemas"]["MessageBody"]["properties"]
    # The body is InboundMessage's fields (agentlane/messages.py) plus the model.
    assert {"text", "mode", "message_id", "routing", "sender", "workspace", "model"} <= set(body)
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


async def test_send_status_duplicate_steer_interrupt_abort(
    gateway: GatewayServer, token: str, client: AgentlaneClient
) -> None:
    k = key()
    async with gateway.http(token) as http:
        message = {
            "text": "count slowly to 60 then run `sleep 1` then say not steered",
            "message_id": "m-1",
            "routing": {"channel": "slack", "to": "C42", "thread": "17.1", "account": "T1"},
            "sender": "U1",
            "reasoning": "stream",
        }
        r = await http.post(f"/v1/sessions/{k}/messages", json=message)
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["disposition"] == "started" and first["session_key"] == k
        # A redelivery (same message id, same routing): one message, the second a duplicate.
        again = await http.post(f"/v1/sessions/{k}/messages", json=message)
        assert again.json()["disposition"] == "duplicate"
        assert again.json()["duplicate_of"] == first["message_seq"]
        run_id = f"session:{k}:run:1"
        await wait_text_delta(http, k, run_id)
        status = (await http.get(f"/v1/sessions/{k}")).json()
        assert status["current_run_id"] == run_id
        assert status["reasoning_mode"] == "stream"
        steer = await http.post(
            f"/v1/sessions/{k}/messages", json={"text": "say steered ok", "mode": "steer"}
        )
        assert steer.json()["disposition"] == "steered", steer.text
        result = await client.wait_for_run(run_id)
        assert result.status == ExecutionStatus.SUCCESS and result.reply == "steered ok"

        long = await http.post(f"/v1/sessions/{k}/messages", json={"text": "count slowly to 400"})
        assert long.json()["disposition"] == "started"
        await wait_text_delta(http, k, f"session:{k}:run:2")
        interrupt = await http.post(
            f"/v1/sessions/{k}/messages", json={"text": "count slowly to 300", "mode": "interrupt"}
        )
        assert interrupt.json()["disposition"] == "interrupted", interrupt.text
        second = await client.wait_for_run(f"session:{k}:run:2")
        assert second.status == ExecutionStatus.ABORTED
        # Who interrupted and who aborted: the token, by name (issue 25).
        assert second.error is not None and second.error.by == "gateway token tests"
        await wait_text_delta(http, k, f"session:{k}:run:3")
        abort = await http.post(f"/v1/sessions/{k}/abort", json={"reason": "adapter stop"})
        assert abort.status_code == 200 and abort.json()["run_id"] == f"session:{k}:run:3"
        third = await client.wait_for_run(f"session:{k}:run:3")
        assert third.status == ExecutionStatus.ABORTED
        assert third.error is not None and third.error.by == "gateway token tests"
        # The session's history says which token sent each message and asked for the abort.
        identities = await update_identities(client, f"session:{k}")
        assert identities == {"gateway token tests"}, identities
        idle = await http.post(f"/v1/sessions/{k}/abort")
        assert idle.json()["run_id"] is None
        users = [e for e in client.transcript(k) if e.role.value == "user"]
        assert [u.text for u in users][:2] == [
            "count slowly to 60 then run `sleep 1` then say not steered",
            "say steered ok",
        ]
        closed = await http.post(f"/v1/sessions/{k}/close")
        assert closed.status_code == 202
        await asyncio.wait_for(client.client.get_workflow_handle(f"session:{k}").result(), 30)
        problem(await http.get(f"/v1/sessions/{k}"), 404)


async def test_every_validation_error_is_a_problem_and_reaches_no_workflow(
    gateway: GatewayServer, token: str, client: AgentlaneClient
) -> None:
    k = key()
    url = f"/v1/sessions/{k}/messages"
    async with gateway.http(token) as http:
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({"text": "hi", "mode": "sideways"}, 422, "sideways"),
            ({"text": "   "}, 422, "message text is empty"),
            ({"text": "x" * (MAX_MESSAGE_CHARS + 1)}, 422, f"the limit is {MAX_MESSAGE_CHARS}"),
            ({"text": "hi", "colour": "red"}, 422, "colour: Extra inputs are not permitted"),
            (
                {"text": "hi", "routing": {"chanel": "slack"}},
                422,
                "routing.chanel: Extra inputs are not permitted",
            ),
            ({"mode": "steer"}, 422, "text: Field required"),
            ({"text": 5}, 422, "text: Input should be a valid string"),
            ({"text": "hi", "model": "nope/none"}, 422, "nope/none"),
            ({"text": "hi", "workspace": "../../etc"}, 422, "outside the gateway's workspaces"),
            ({"text": "hi", "queue": {"cap": -1}}, 422, "queue.cap"),
            ({"text": "hi", "reasoning": "loud"}, 422, "not one of off, on, stream"),
        ]
        data_dir = str(gateway.settings.data_dir.resolve())
        for body, status, words in cases:
            got = problem(await http.post(url, json=body), status)
            assert words in got["detail"], (body, got)
            # The server's own folders never show.
            assert data_dir not in got["detail"] and "/tmp" not in got["detail"], got
        bad_json = await http.post(
            url, content=b"{not json", headers={"content-type": "application/json"}
        )
        assert "the body is not valid JSON (at character 1" in problem(bad_json, 422)["detail"]
        not_utf8 = await http.post(
            url, content=b'{"text": "\xff\xfe"}', headers={"content-type": "application/json"}
        )
        assert "encoded as UTF-8" in problem(not_utf8, 400)["detail"]
        # The longest message allowed, in characters that escape longest, fits the body limit.
        widest = json.dumps({"text": "\U0001f600" * MAX_MESSAGE_CHARS}).encode()
        assert len(widest) <= gateway.settings.gateway_max_body_bytes
        too_big = await http.post(url, content=b"x" * (gateway.settings.gateway_max_body_bytes + 1))
        assert "larger than" in problem(too_big, 413)["detail"]
        for bad in ("bad%20key", "a..b", "x:events", "-lead", "k" * 129):
            got = problem(await http.post(f"/v1/sessions/{bad}/messages", json={"text": "hi"}), 400)
            assert "invalid session key" in got["detail"]
        # A key with a slash never reaches a route at all.
        assert (
            await http.post("/v1/sessions/a%2F..%2Fb/messages", json={"text": "x"})
        ).status_code == 404
        problem(await http.get(f"/v1/sessions/{k}/transcript?limit=0"), 422)
        problem(await http.get(f"/v1/sessions/{k}/events", headers={"Last-Event-ID": "x"}), 400)
        # Nothing reached a workflow: the session was never started.
        problem(await http.get(f"/v1/sessions/{k}"), 404)
        problem(await http.get(f"/v1/sessions/{k}/transcript"), 404)
        problem(await http.get(f"/v1/sessions/{k}/events?from=0"), 404)
        problem(await http.post(f"/v1/sessions/{k}/abort"), 404)
        problem(await http.get(f"/v1/sessions/{k}/subagents"), 404)
    # Another token: the cases above use up the first one's burst.
    async with gateway.http(gateway.token(name="issue-19")) as http:
        more: list[tuple[dict[str, Any], int, str]] = [
            # Issue 19: a NUL anywhere, fields over the search attribute limit, a callback
            # inside the network: 4xx with the reason, before any path or workflow call.
            ({"text": "hi", "workspace": "a\x00b"}, 422, "workspace contains a NUL byte"),
            ({"text": "h\x00i"}, 422, "text contains a NUL byte"),
            ({"text": "hi", "routing": {"to": "\x00"}}, 422, "routing.to contains a NUL"),
            ({"text": "hi", "sender": "x\x00"}, 422, "sender contains a NUL byte"),
            (
                {"text": "hi", "routing": {"channel": "c" * 100_000}},
                422,
                "routing.channel is 100000 bytes; the limit is 2048",
            ),
            ({"text": "hi", "message_id": "m" * 5000}, 422, "message_id is 5000 bytes"),
            ({"text": "hi", "workspace": "no-such-folder"}, 422, "does not exist"),
            (
                {"text": "hi", "routing": {"callback_url": "http://169.254.169.254/latest/"}},
                422,
                "allow_private",
            ),
            (
                {"text": "hi", "routing": {"callback_url": "http://[::ffff:10.0.0.1]/"}},
                422,
                "a private address",
            ),
        ]
        for body, status, words in more:
            got = problem(await http.post(url, json=body), status)
            assert words in got["detail"], (body, got)
            assert data_dir not in got["detail"] and "/tmp" not in got["detail"], got
        problem(await http.post(f"/v1/sessions/{k}/abort", json={"reason": "a\x00"}), 422)
    assert not await client.session_ever_existed(k)


async def test_tokens_scopes_and_read_only(gateway: GatewayServer, token: str) -> None:
    mine = f"slack:T{uuid.uuid4().hex[:6]}:"
    k_in, k_out = f"{mine}C1", f"other-{uuid.uuid4().hex[:6]}"
    scoped = gateway.token(name="slack", prefixes=[mine])
    reader = gateway.token(name="reader", read_only=True)
    async with gateway.http() as anon:
        r = await anon.get("/v1/sessions")
        assert problem(r, 401) and r.headers["www-authenticate"].startswith("Bearer")
        bad = await anon.get("/v1/sessions", headers={"Authorization": "Bearer agl_00000000_nope"})
        problem(bad, 401)
        assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    async with gateway.http(scoped) as http:
        assert (
            await http.post(f"/v1/sessions/{k_in}/messages", json={"text": "say hi"})
        ).status_code == 200
        got = problem(
            await http.post(f"/v1/sessions/{k_out}/messages", json={"text": "say hi"}), 403
        )
        assert mine in got["detail"]
        problem(await http.get(f"/v1/sessions/{k_out}"), 403)
        problem(await http.get(f"/v1/sessions/{k_out}/events"), 403)
        # Nor another session's files: not its workspace folder, nor the folder of them all.
        root = gateway.settings.workspaces_dir
        (root / storage_name(k_out)).mkdir(parents=True, exist_ok=True)
        (root / storage_name(f"{mine}C2") / "src").mkdir(parents=True, exist_ok=True)
        for named in (storage_name(k_out), f"{storage_name(k_out)}/", "."):
            got = problem(
                await http.post(
                    f"/v1/sessions/{mine}C9/messages", json={"text": "hi", "workspace": named}
                ),
                403 if named != "." else 422,
            )
            assert (k_out if named != "." else "workspaces folder itself") in got["detail"], got
        ok = await http.post(
            f"/v1/sessions/{mine}C9/messages",
            json={"text": "say hi", "workspace": f"{storage_name(mine + 'C2')}/src"},
        )
        assert ok.status_code == 200, ok.text
    async with gateway.http(token) as http:
        assert (
            await http.post(f"/v1/sessions/{k_out}/messages", json={"text": "say hi"})
        ).status_code == 200
        everything = {s["key"] for s in (await http.get("/v1/sessions")).json()["sessions"]}
        assert {k_in, k_out} <= everything
    async with gateway.http(scoped) as http:
        listed = {s["key"] for s in (await http.get("/v1/sessions")).json()["sessions"]}
        assert listed == {k_in, f"{mine}C9"}
    async with gateway.http(reader) as http:
        assert (await http.get(f"/v1/sessions/{k_in}")).status_code == 200
        assert (await http.get("/v1/models")).json()["default_model"]
        for path in ("messages", "abort", "close", "reset"):
            got = problem(await http.post(f"/v1/sessions/{k_in}/{path}", json={"text": "x"}), 403)
            assert "read-only" in got["detail"]
    record = next(t for t in gateway.tokens.list() if t.name == "slack")
    assert gateway.tokens.revoke(record.id)
    async with gateway.http(scoped) as http:
        problem(await http.get(f"/v1/sessions/{k_in}"), 401)
    db = gateway.tokens.settings.data_dir / "agentlane.db"
    stored = b"".join(p.read_bytes() for p in db.parent.glob("agentlane.db*"))
    assert scoped.encode() not in stored and reader.encode() not in stored
    assert db.stat().st_mode & 0o777 == 0o600


async def test_a_revoked_tokens_open_stream_ends(
    gateway: GatewayServer, token: str, client: AgentlaneClient
) -> None:
    # A token is checked when a request comes; an event stream may stay open for days. Revoked,
    # its open stream sends nothing of what comes after (a run sent with another token): it
    # ends, saying why.
    k = key()
    first = await client.send_and_start(k, "say hi")
    assert first.run_id
    await client.wait_for_run(first.run_id)
    second = f"session:{k}:run:2"
    watcher = gateway.token(name="watcher")
    async with gateway.http(watcher) as http:
        reading = asyncio.create_task(
            read_sse(
                http,
                f"/v1/sessions/{k}/events?from=0",
                lambda ev: (
                    ev.event == "revoked"
                    or (ev.event == "agent_end" and ev.json().get("run_id") == second)
                ),
            )
        )
        await asyncio.sleep(1.0)  # the first run's events are read
        record = next(t for t in gateway.tokens.list() if t.name == "watcher")
        assert gateway.tokens.revoke(record.id)
        await asyncio.sleep(TOKEN_RECHECK_SECONDS + 0.5)
        async with gateway.http(token) as sender:
            sent = await sender.post(
                f"/v1/sessions/{k}/messages", json={"text": "say secret after revoke"}
            )
            assert sent.is_success
        got = await asyncio.wait_for(reading, 60)
    kinds = [ev.event for ev in got.events]
    assert kinds[-1] == "revoked", kinds
    assert second not in "".join(ev.data for ev in got.events), "run 2 reached a revoked token"

    # A quiet session's stream ends too, within the recheck interval: no event needs to come.
    quiet = gateway.token(name="quiet")
    async with gateway.http(quiet) as http:
        reading = asyncio.create_task(
            read_sse(http, f"/v1/sessions/{k}/events?from=0", lambda ev: ev.event == "revoked")
        )
        await asyncio.sleep(1.0)
        record = next(t for t in gateway.tokens.list() if t.name == "quiet")
        assert gateway.tokens.revoke(record.id)
        got = await asyncio.wait_for(reading, TOKEN_RECHECK_SECONDS + 5)
    assert got.events[-1].event == "revoked"


async def test_rate_limit_answers_429_with_retry_after(shared: Deployment) -> None:
    settings = settings_for(shared).model_copy(
        update={"gateway_rate_per_second": 0.5, "gateway_rate_burst": 3}
    )
    app = create_app(settings)
    from clients.gateway.auth import TokenStore

    tok = TokenStore(settings.data_dir).create(name="limited")[1]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://gw", headers={"Authorization": f"Bearer {tok}"}
    ) as http:
        codes = [(await http.get("/v1/models")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = await http.get("/v1/models")
        assert int(limited.headers["retry-after"]) >= 1
        assert "rate limit" in problem(limited, 429)["detail"]
        assert (await http.get("/healthz")).status_code == 200  # no token, no limit


async def test_transcript_pages_and_reset(gateway: GatewayServer, client: AgentlaneClient) -> None:
    k = key()
    # A token of its own: the file's shared one may have spent its burst (30) on the tests before.
    async with gateway.http(gateway.token(name="transcript-pages")) as http:
        for i in range(3):
            r = await http.post(
                f"/v1/sessions/{k}/messages", json={"text": f"write f{i}.txt with {i} then say ok"}
            )
            assert r.status_code == 200
            fate = await client.wait_started(k, r.json()["message_seq"])
            await client.wait_for_run(fate.run_id or "")
        whole = [e.model_dump(mode="json", exclude_defaults=True) for e in client.transcript(k)]
        pages: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            answer = await http.get(f"/v1/sessions/{k}/transcript?offset={offset}&limit=4")
            assert answer.status_code == 200, answer.text
            page = answer.json()
            assert page["total"] == len(whole) and len(page["entries"]) <= 4
            pages.extend(page["entries"])
            offset = page["next_offset"]
        assert pages == whole and len(whole) > 8
        reset = await http.post(f"/v1/sessions/{k}/reset", json={"reason": "new topic"})
        assert reset.status_code == 200, reset.text
        marker = reset.json()["entry_id"]
        answer = await http.get(f"/v1/sessions/{k}/transcript")
        assert answer.status_code == 200, answer.text
        current = answer.json()
        assert current["entries"][0]["id"] == marker and current["hidden"] == len(whole)
        answer = await http.get(f"/v1/sessions/{k}/transcript?all=true&limit=1000")
        assert answer.status_code == 200, answer.text
        every = answer.json()
        assert every["total"] == len(whole) + 1 and every["hidden"] == 0


async def test_an_agui_run_is_sent_as_its_token(
    gateway: GatewayServer, client: AgentlaneClient
) -> None:
    """AG-UI's HTTP transport sends the message as the token (issue 25), as the REST door does:
    read here over plain HTTP, without the AG-UI client."""
    k = key()
    run_input = {
        "threadId": k,
        "runId": "r-1",
        "messages": [{"id": f"{k}-m1", "role": "user", "content": "say hello there"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    async with (
        gateway.http(gateway.token(name="agui-app")) as http,
        http.stream("POST", f"/v1/agui/{k}", json=run_input) as response,
    ):
        assert response.status_code == 200
        body = "".join([chunk async for chunk in response.aiter_text()])
    assert "RUN_FINISHED" in body, body[-500:]
    assert await update_identities(client, f"session:{k}") == {"gateway token agui-app"}


async def test_a_broken_config_file_is_a_problem_document(
    shared: Deployment, tmp_path: Any
) -> None:
    # A gateway whose configuration cannot be read answers in problem documents (a 503 naming
    # the file), not a plain-text 500 with a traceback in its log.
    (tmp_path / "config.toml").write_text("this is = not toml [\n")
    settings = settings_for(shared).model_copy(update={"data_dir": tmp_path})
    with GatewayServer(settings) as gw:
        async with gw.http(gw.token(name="cfg")) as http:
            sent = await http.post(f"/v1/sessions/{key()}/messages", json={"text": "say hi"})
            body = problem(sent, 503)
            assert body["type"].endswith("configuration-invalid")
            assert str(tmp_path / "config.toml") in body["detail"]
