"""The HTTP gateway: chat adapters send messages and follow a session's events over HTTP.

One process, one `AgentlaneClient`; every route does what the Python client does, with the same
checks before anything reaches a workflow, and answers errors as RFC 9457 problem documents
(`application/problem+json`: type, title, status, detail). Run it with `agentlane gateway`; the
API reference is the app's own OpenAPI document at `/openapi.json` (and `/docs`).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from ag_ui.core import RunAgentInput
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.service import RPCError, RPCStatusCode

from activities.bounded_cache import BoundedCache
from agentlane.approvals import ApprovalReceipt, PendingApproval
from agentlane.branches import ResetReceipt, TreeNode
from agentlane.config import ConfigError, ConfigWatcher, ModelPrices
from agentlane.encryption_required import EncryptionRequired
from agentlane.ids import InvalidSessionKey, check_session_key, key_of_storage_name
from agentlane.messages import (
    AbortReceipt,
    FateState,
    InboundMessage,
    Routing,
    SendDisposition,
    SendReceipt,
    check_fields,
)
from agentlane.session import SessionStatus
from agentlane.settings import Settings
from agentlane.subagents import SUBAGENT_SEGMENT
from clients.api import (
    WORKER_WAIT_SECONDS,
    AgentlaneClient,
    ApprovalRejected,
    NoWorker,
    SendRejected,
    SessionNotFound,
)
from clients.gateway.agui_transport import (
    SSE_SEPARATOR,
    AguiInputError,
    message_of,
    newline_separated,
    run_events,
)
from clients.gateway.auth import RateLimiter, StoreUnavailable, TokenRecord, TokenStore
from clients.gateway.fanout import Fanout
from clients.gateway.sse import revoked_event, session_events, while_token_lives
from clients.gateway.tracing import traced_request
from clients.identities import ClientsByIdentity
from clients.session_text import subagents_of

log = logging.getLogger(__name__)

T = TypeVar("T")

PROBLEM_TYPE = "https://agentlane.invalid/problems/"
STATIC_DIR = Path(__file__).resolve().parent / "static"
# The parameters of `AgentlaneClient.send` a message body may set (its text is positional).
_SEND_PARAMS = frozenset(inspect.signature(AgentlaneClient.send).parameters) - {
    "self",
    "session_key",
    "text",
    "session_overrides",
    "worker_wait",
    # A chat adapter's messages are chat; only the worker's scheduled firings send `cron`.
    "source",
}


class Problem(Exception):
    """An error answered as an RFC 9457 problem document."""

    def __init__(
        self,
        status: int,
        slug: str,
        title: str,
        detail: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    def response(self) -> JSONResponse:
        body = {
            "type": PROBLEM_TYPE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            **self.extra,
        }
        return JSONResponse(
            body,
            status_code=self.status,
            headers=self.headers,
            media_type="application/problem+json",
        )


class ProblemDocument(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str


class MessageBody(InboundMessage):
    """A user message: the fields of `InboundMessage` (agentlane/messages.py), and the model a
    new session should use. Unknown fields are refused."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "text": "summarize the thread",
                    "mode": "collect",
                    "message_id": "1700000000.000100",
                    "routing": {"channel": "slack", "to": "C42", "thread": "1700000000.000100"},
                    "sender": "U123",
                }
            ]
        },
    )
    model: str | None = Field(
        default=None,
        description="provider/model: the session's model from this message on (a run in "
        "progress keeps its own)",
    )
    # Who sent it is the token (the gateway's client identity), never the body's say.
    by: SkipJsonSchema[None] = None
    # Resolved by the client from `model`, never given in the body.
    switch_model: SkipJsonSchema[None] = None


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise ValueError("contains a NUL byte (\\0); remove it")
    return value


class AbortBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="user abort", max_length=1000)

    _reason = field_validator("reason")(_no_nul)


class ApprovalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=1000, description="told to the model on a denial")
    by: str | None = Field(
        default=None, max_length=200, description="who decided; default gateway:<token name>"
    )

    _text = field_validator("reason", "by")(_no_nul)


class ResetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="user reset", max_length=1000)
    by: str | None = Field(
        default=None, max_length=200, description="who asked; default gateway:<token name>"
    )

    _text = field_validator("reason", "by")(_no_nul)


class CloseReceipt(BaseModel):
    session_key: str
    note: str


class SessionRow(BaseModel):
    key: str
    workflow_id: str
    started: str
    status: str


class SessionList(BaseModel):
    sessions: list[SessionRow]


class SubagentList(BaseModel):
    session_key: str
    # Parents before their children; `spawned_by` names the run that spawned each.
    subagents: list[TreeNode]


class TranscriptPage(BaseModel):
    session_key: str
    # Entries in the file (all=true) or in the current branch.
    total: int
    offset: int
    limit: int
    # The offset of the next page, or null on the last one.
    next_offset: int | None
    # Entries before the latest reset, left out of the current branch (0 with all=true).
    hidden: int
    entries: list[dict[str, Any]]


class ModelRow(BaseModel):
    ref: str
    provider: str
    id: str
    api: str
    context_window: int
    max_output_tokens: int
    thinking_levels: list[str]
    images: bool
    default: bool
    # US dollars per million tokens; None: unpriced (its calls are counted, not priced at 0).
    prices: ModelPrices | None = None


class ModelList(BaseModel):
    default_model: str
    models: list[ModelRow]


class Health(BaseModel):
    status: str


class Gateway:
    """What every request shares: settings, the one client, tokens and rate limits."""

    def __init__(self, settings: Settings, client: AgentlaneClient | None = None) -> None:
        self.settings = settings
        self.tokens = TokenStore(settings)
        self.limiter = RateLimiter(settings.gateway_rate_per_second, settings.gateway_rate_burst)
        self._client = client
        self._lock = asyncio.Lock()
        self._config = ConfigWatcher(settings.data_dir)
        # Sub-agent session -> the top-level session it was spawned under (never changes).
        self.roots = BoundedCache[str, str](ROOTS_CACHED)
        self._fanout: Fanout | None = None
        # A client per token name, so what a token does carries its name in history.
        self._as_token: ClientsByIdentity | None = None
        # With tracing on (`serve`), the client carries the trace context into the session.
        self.plugins: list[Any] = []

    async def fanout(self) -> Fanout | None:
        """The shared session feeds (None when `gateway_fanout` is off)."""
        if not self.settings.gateway_fanout:
            return None
        if self._fanout is None:
            client = await self.client()
            self._fanout = Fanout(
                # Every offset: the SSE layer passes a repeated event on once, and a jump in
                # offsets is a gap to it (clients/gateway/sse.py).
                watch=partial(client.watch, repeats=True),
                read=client.read_events,
                end_offset=lambda key: _live_end(client, key),
                queue_limit=self.settings.gateway_fanout_queue,
            )
        return self._fanout

    async def aclose(self) -> None:
        if self._fanout is not None:
            await self._fanout.close()

    async def client(self) -> AgentlaneClient:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                try:
                    self._client = await AgentlaneClient.connect(
                        self.settings, plugins=self.plugins
                    )
                except Exception as err:
                    raise _unreachable(self.settings.temporal_address, err) from err
            return self._client

    async def client_as(self, token: TokenRecord) -> AgentlaneClient:
        """The client whose identity is `gateway token <name>`: a message, an abort or a
        reset it sends shows in history as that token's (the SDK keeps one identity per
        connection, so one connection per token name, made on its first use)."""
        if self._as_token is None:
            self._as_token = ClientsByIdentity(await self.client())
        try:
            return await self._as_token(f"gateway token {token.name or token.id}")
        except Exception as err:
            raise _unreachable(self._as_token.base.settings.temporal_address, err) from err


def _unreachable(address: str, err: Exception) -> Problem:
    return Problem(
        503,
        "temporal-unreachable",
        "Temporal unreachable",
        f"cannot reach the Temporal server at {address}: {err}",
    )


bearer = HTTPBearer(
    auto_error=False,
    description="A token from `agentlane gateway token create` (shown once).",
)


# Sub-agent sessions whose top-level session the gateway remembers.
ROOTS_CACHED = 10_000


def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


def _unauthorized(detail: str, error: str | None = None) -> Problem:
    challenge = 'Bearer realm="agentlane"' + (f', error="{error}"' if error else "")
    return Problem(401, "unauthorized", "Unauthorized", detail, {"WWW-Authenticate": challenge})


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> TokenRecord:
    """The caller's token; 401 without a valid one, 429 over its rate, 403 read-only on POST."""
    gw = _gateway(request)
    if credentials is None:
        raise _unauthorized("send `Authorization: Bearer <token>`")
    try:
        record = await gw.tokens.averify(credentials.credentials)
    except StoreUnavailable as err:
        raise Problem(
            503,
            "store-unavailable",
            "Store unavailable",
            f"the gateway cannot check the token now ({err}); send again in a moment",
            {"Retry-After": "2"},
        ) from None
    if record is None:
        raise _unauthorized("the token is unknown or was revoked", "invalid_token")
    wait = gw.limiter.take(record.id)
    if wait > 0:
        after = RateLimiter.retry_after(wait)
        raise Problem(
            429,
            "rate-limited",
            "Too Many Requests",
            f"token {record.id} is over its rate limit "
            f"({gw.settings.gateway_rate_per_second:g}/s, burst "
            f"{gw.settings.gateway_rate_burst}); retry after {after} s",
            {"Retry-After": after},
        )
    if record.read_only and request.method not in ("GET", "HEAD"):
        raise Problem(
            403,
            "read-only",
            "Forbidden",
            f"token {record.id} is read-only: it cannot {request.method}",
        )
    return record


Principal = Annotated[TokenRecord, Depends(authenticate)]


async def session_key(key: str, token: Principal, request: Request) -> str:
    """The path's session key, checked like every key (agentlane/ids.py) and against the
    token's prefixes. A sub-agent's session (`agent:<id>:subagent:...`) is within a token's
    scope when the session it was spawned under is: an adapter follows its own sub-agents."""
    try:
        check_session_key(key)
    except InvalidSessionKey as err:
        raise Problem(400, "invalid-session-key", "Invalid session key", str(err)) from err
    if not token.allows_key(key) and not await _root_allowed(_gateway(request), key, token):
        raise Problem(
            403,
            "outside-scope",
            "Forbidden",
            f"token {token.id} may only use sessions whose key starts with "
            + " or ".join(repr(p) for p in token.prefixes),
        )
    return key


SessionKey = Annotated[str, Depends(session_key)]


async def _root_allowed(gw: Gateway, key: str, token: TokenRecord) -> bool:
    if SUBAGENT_SEGMENT not in key:
        return False
    root = gw.roots.get(key)
    if root is None:
        root = await _call(gw, lambda c: c.subagent_root(key))
        if root is None:
            return False
        gw.roots[key] = root
    return token.allows_key(root)


async def _call(
    gw: Gateway,
    action: Callable[[AgentlaneClient], Awaitable[T]],
    token: TokenRecord | None = None,
) -> T:
    """Run a client call (as `token`, for a call that acts on a session); its errors become
    problem documents."""
    client = await gw.client() if token is None else await gw.client_as(token)
    try:
        return await action(client)
    except SessionNotFound as err:
        raise Problem(404, "session-not-found", "Session not found", str(err)) from err
    except SendRejected as err:
        raise Problem(422, "rejected", "Rejected", str(err)) from err
    except ApprovalRejected as err:
        raise Problem(409, "approval-not-pending", "Approval not pending", str(err)) from err
    except InvalidSessionKey as err:
        raise Problem(400, "invalid-session-key", "Invalid session key", str(err)) from err
    except NoWorker as err:
        raise Problem(503, "no-worker", "No worker", str(err), {"Retry-After": "5"}) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Problem(404, "session-not-found", "Session not found", err.message) from err
        raise Problem(
            503,
            "temporal-unreachable",
            "Temporal unreachable",
            f"the Temporal server did not answer: {err.message}",
        ) from err


class BodyLimit:
    """Refuse request bodies over `limit` bytes (413) before any route reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = Problem(
            413,
            "body-too-large",
            "Content Too Large",
            f"the request body is larger than {self.limit} bytes",
        )
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await too_large.response()(scope, receive, send)
                return
        # A body without a length (chunked) is counted as it arrives.
        chunks: list[Message] = []
        size = 0
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            while True:
                message = await receive()
                chunks.append(message)
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if size > self.limit:
                    await too_large.response()(scope, receive, send)
                    return
                if not message.get("more_body", False):
                    break

        async def replay() -> Message:
            if chunks:
                return chunks.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def _problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {
        code: {"model": ProblemDocument, "content": {"application/problem+json": {}}}
        for code in codes
    }


def _validation_detail(err: RequestValidationError) -> str:
    parts = []
    for item in err.errors():
        if item.get("type") == "json_invalid":
            # FastAPI says "14: JSON decode error": where, and what the parser found.
            at = next((p for p in item.get("loc", ()) if isinstance(p, int)), None)
            why = str((item.get("ctx") or {}).get("error", "")).strip()
            parts.append(
                "the body is not valid JSON"
                + (f" (at character {at}" + (f": {why})" if why else ")") if at is not None else "")
            )
            continue
        loc = [str(p) for p in item.get("loc", ()) if p != "body"]
        where = ".".join(loc)
        msg = str(item.get("msg", "invalid"))
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts) or "invalid request"


# What Starlette says of a body it could not read (bytes that are not UTF-8, among others).
_UNREADABLE_BODY = "There was an error parsing the body"


def _workspace_inside(settings: Settings, workspace: str, token: TokenRecord) -> str:
    """A workspace named by an adapter must lie in the data folder's workspaces: an HTTP caller
    cannot point an agent at any folder of the machine. Not the folder of them all (it holds
    every session's default workspace), and for a token limited to key prefixes only a folder
    of a session it may use (`workspaces/<key's folder name>`, or one inside it): a tenant's
    agent cannot read another tenant's files. Errors name the folder as the caller did, never
    the server's own paths."""

    def rejected(why: str) -> Problem:
        return Problem(422, "rejected", "Rejected", f"workspace {workspace!r} {why}")

    root = settings.workspaces_dir.resolve()
    try:
        path = (root / workspace).resolve()
    except (OSError, RuntimeError, ValueError) as err:
        raise rejected(f"cannot be used: {type(err).__name__}") from err
    if path == root:
        raise rejected(
            "is the gateway's workspaces folder itself, which holds every session's workspace; "
            "name a folder inside it"
        )
    if root not in path.parents:
        raise rejected(
            "is outside the gateway's workspaces folder; name a folder inside it (relative "
            "paths are taken from it)"
        )
    owner = key_of_storage_name(path.relative_to(root).parts[0])
    if not token.allows_key(owner):
        raise Problem(
            403,
            "forbidden",
            "Forbidden",
            f"workspace {workspace!r} is the folder of session {owner!r}, which this token may "
            f"not use (it may use keys starting with {', '.join(token.prefixes)}); name a "
            "folder of one of its own sessions",
        )
    if path.exists() and not path.is_dir():
        raise rejected("is not a folder")
    if not path.exists():
        raise rejected("does not exist in the gateway's workspaces folder; create it first")
    return str(path)


def create_app(settings: Settings | None = None, client: AgentlaneClient | None = None) -> FastAPI:
    """The gateway's ASGI app; `client` is connected on first use when not given."""
    settings = settings or Settings.from_env()
    gw = Gateway(settings, client)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await gw.aclose()
        await gw.tokens.aflush_used()

    app = FastAPI(
        title="agentlane gateway",
        version="1",
        summary="Chat adapters in, resumable session events out.",
        description=(
            "Send messages to agentlane sessions (each a durable Temporal workflow) and follow "
            "their events as Server-Sent Events that resume exactly from `Last-Event-ID`. "
            "Every `/v1/` route needs `Authorization: Bearer <token>` (`agentlane gateway "
            "token create`). Errors are RFC 9457 problem documents."
        ),
        lifespan=lifespan,
    )
    app.state.gateway = gw

    @app.exception_handler(Problem)
    async def on_problem(_: Request, exc: Problem) -> JSONResponse:
        return exc.response()

    @app.exception_handler(ConfigError)
    async def on_config(_: Request, exc: ConfigError) -> JSONResponse:
        # The gateway's own configuration file cannot be read: no request can be checked.
        log.error("configuration unreadable: %s", exc)
        return Problem(
            503, "configuration-invalid", "Configuration invalid", str(exc), {"Retry-After": "5"}
        ).response()

    @app.exception_handler(KeyError)
    async def on_key_error(_: Request, exc: KeyError) -> JSONResponse:
        if "binary/encrypted" not in str(exc):
            raise exc
        log.error("encrypted payloads and no key: set AGENTLANE_ENCRYPTION_KEYS_FILE")
        return Problem(
            503,
            "cannot-decrypt",
            "Cannot decrypt",
            "this deployment's payloads are encrypted and the gateway has no key to read them "
            "(AGENTLANE_ENCRYPTION_KEYS_FILE, as for the workers); what was sent may have been "
            "accepted",
        ).response()

    @app.exception_handler(EncryptionRequired)
    async def on_keyless(_: Request, exc: EncryptionRequired) -> JSONResponse:
        log.error("this deployment encrypts and the gateway has no key: nothing was sent")
        return Problem(503, "cannot-encrypt", "Cannot encrypt", str(exc)).response()

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return Problem(
            422,
            "invalid-request",
            "Invalid request",
            _validation_detail(exc),
            errors=[
                {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
            ],
        ).response()

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _UNREADABLE_BODY:
            return Problem(
                400,
                "invalid-request",
                "Invalid request",
                "the body could not be read: send JSON encoded as UTF-8 (Content-Type: "
                "application/json)",
            ).response()
        return Problem(
            exc.status_code,
            "http",
            str(exc.detail),
            str(exc.detail),
            dict(exc.headers or {}),
        ).response()

    errors = _problem_responses(400, 401, 403, 404, 413, 422, 429, 503)

    @app.get("/healthz", summary="Liveness (no token needed)", tags=["gateway"])
    async def healthz() -> Health:
        return Health(status="ok")

    @app.post(
        "/v1/sessions/{key}/messages",
        summary="Send a message (creates the session if new)",
        description=(
            "Returns once the session holds the message durably, with the same `SendReceipt` "
            "the Python client gets (`started`, `queued`, `steered`, `interrupted`, "
            "`duplicate`). `mode` is one of steer, followup, collect, queue, steer-backlog, "
            "interrupt. A redelivery with the same `message_id` is a `duplicate` and runs "
            "nothing. `routing` says where the message came from and where replies go. "
            "`workspace` and `model` count only when the message creates the session; a "
            "workspace must lie in the data folder's `workspaces/`. 503 with no worker: the "
            "message is kept and runs when a worker starts (resending it is safe)."
        ),
        tags=["sessions"],
        responses=errors,
    )
    async def send_message(
        key: SessionKey, body: MessageBody, request: Request, token: Principal
    ) -> SendReceipt:
        # The message's trace starts here, under the adapter's own `traceparent` if it sent one.
        with traced_request(request, "POST /v1/sessions/{key}/messages", key):
            return await _send_message(key, body, token)

    async def _send_message(key: str, body: MessageBody, token: TokenRecord) -> SendReceipt:
        try:
            check_fields(body)  # NUL bytes and oversized fields, before any path or workflow
        except ValueError as err:
            raise Problem(422, "rejected", "Rejected", str(err)) from err
        given = body.model_dump(exclude_unset=True, exclude={"text"})
        unsupported = sorted(
            name
            for name in given
            if name not in _SEND_PARAMS
            and getattr(body, name) != MessageBody.model_fields[name].default
        )
        if unsupported:
            raise Problem(
                422,
                "rejected",
                "Rejected",
                f"{', '.join(unsupported)}: not accepted through the gateway yet",
            )
        kwargs: dict[str, Any] = {
            name: getattr(body, name) for name in given if name in _SEND_PARAMS
        }
        if body.workspace is not None:
            kwargs["workspace"] = _workspace_inside(gw.settings, body.workspace, token)
        return await _call(gw, lambda c: c.send(key, body.text, **kwargs), token)

    @app.get(
        "/v1/sessions/{key}",
        summary="Session status",
        description="Phase (idle, running, streaming, compacting, waiting), the run in "
        "progress, queue, usage and settings. 404 if the session does not run.",
        tags=["sessions"],
        responses=errors,
    )
    async def get_status(key: SessionKey) -> SessionStatus:
        return await _call(gw, lambda c: c.status(key))

    @app.post(
        "/v1/sessions/{key}/abort",
        summary="Abort the run in flight",
        description="The receipt names the run it stops, or says there was none.",
        tags=["sessions"],
        responses=errors,
    )
    async def abort(
        key: SessionKey, token: Principal, body: AbortBody | None = None
    ) -> AbortReceipt:
        reason = (body or AbortBody()).reason
        return await _call(gw, lambda c: c.abort(key, reason), token)

    @app.get(
        "/v1/sessions/{key}/approvals",
        summary="Tool calls waiting for a person's yes",
        description="Oldest first: id, tool, args preview, when it expires and what expiry "
        "does (`[tools.approval]`).",
        tags=["sessions"],
        responses=errors,
    )
    async def list_approvals(key: SessionKey) -> list[PendingApproval]:
        return await _call(gw, lambda c: c.approvals(key))

    @app.post(
        "/v1/sessions/{key}/approvals/{approval_id}",
        summary="Approve or deny a waiting tool call",
        description="The receipt says what became of it (approved, denied, or expired first). "
        "409 for an unknown, already decided or expired approval.",
        tags=["sessions"],
        responses=_problem_responses(400, 401, 403, 404, 409, 413, 422, 429, 503),
    )
    async def decide_approval(
        key: SessionKey, approval_id: str, body: ApprovalBody, token: Principal
    ) -> ApprovalReceipt:
        by = body.by or f"gateway:{token.name or token.id}"
        approve = body.decision == "approve"
        return await _call(
            gw, lambda c: c.decide_approval(key, approval_id, approve, body.reason, by=by), token
        )

    @app.post(
        "/v1/sessions/{key}/close",
        summary="Close the session once its queue is empty",
        description="Its event stream ends with it (SSE followers get a `closed` event). A "
        "later message to the same key starts it again, with its transcript.",
        tags=["sessions"],
        status_code=202,
        responses=errors,
    )
    async def close(key: SessionKey) -> CloseReceipt:
        await _call(gw, lambda c: c.close(key))
        return CloseReceipt(session_key=key, note="the session closes once its queue is empty")

    @app.post(
        "/v1/sessions/{key}/reset",
        summary="Start the session afresh",
        description="Nothing before the reset is sent to the model again (the old branch "
        "stays in the transcript). A busy run is aborted first; queued messages are kept.",
        tags=["sessions"],
        responses=errors,
    )
    async def reset(
        key: SessionKey, token: Principal, body: ResetBody | None = None
    ) -> ResetReceipt:
        req = body or ResetBody()
        by = req.by or f"gateway:{token.name or token.id}"
        return await _call(gw, lambda c: c.reset(key, req.reason, by=by), token)

    @app.get(
        "/v1/sessions/{key}/transcript",
        summary="The session's transcript, a page at a time",
        description="The current branch (since the latest reset, its marker included) unless "
        "`all=true` (the whole file). Entries in order; `next_offset` is the next page's.",
        tags=["sessions"],
        responses=errors,
    )
    async def transcript(
        key: SessionKey,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        all: Annotated[
            bool, Query(description="the whole file, not just the current branch")
        ] = False,
    ) -> TranscriptPage:
        from activities.branch_history import current_branch

        client = await gw.client()
        entries = await client.read_transcript(key)
        if not entries and not await _call(gw, lambda c: c.session_ever_existed(key)):
            raise Problem(
                404, "session-not-found", "Session not found", f"session {key} does not exist"
            )
        hidden = 0
        if not all:
            hidden, entries = current_branch(entries)
        page = entries[offset : offset + limit]
        end = offset + len(page)
        return TranscriptPage(
            session_key=key,
            total=len(entries),
            offset=offset,
            limit=limit,
            next_offset=end if end < len(entries) else None,
            hidden=hidden,
            entries=[e.model_dump(mode="json", exclude_defaults=True) for e in page],
        )

    @app.get(
        "/v1/sessions/{key}/events",
        summary="Follow the session's events (Server-Sent Events)",
        description=(
            "`text/event-stream`. Each event's `id:` is its offset in the session's stream; "
            "reconnect with `Last-Event-ID` (or `?from=<last id + 1>`) to resume exactly. "
            "`?from=0` starts at the session's first event; with neither, at the live end. "
            "Vocabulary `agentlane` (default): `event:` is the kind, `data:` the AgentEvent "
            "JSON. `agui`: AG-UI events. An event `gap` says events were missed because the "
            "stream no longer holds them (re-read the transcript); `closed` that the session "
            "was closed; `interrupted` that the gateway could not follow the stream for a while "
            "(reconnect with Last-Event-ID). A client that falls behind (a slow reader, a "
            "burst of events) is not cut off: it reads what it missed by query. An offset "
            "past the stream's "
            "end is refused (400 `offset-past-end`, with `next_offset`). Comment lines keep an "
            "idle stream open. All followers of a session share one subscription in the gateway."
        ),
        tags=["sessions"],
        responses={
            **errors,
            200: {"content": {"text/event-stream": {}}, "description": "the event stream"},
            501: {"model": ProblemDocument, "description": "vocabulary not available"},
        },
    )
    async def events(
        key: SessionKey,
        token: Principal,
        from_offset: Annotated[int | None, Query(alias="from", ge=0)] = None,
        vocabulary: Literal["agentlane", "agui"] = "agentlane",
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> EventSourceResponse:
        translator = _agui_translator() if vocabulary == "agui" else None
        start = from_offset
        if last_event_id is not None and last_event_id.strip():
            if not last_event_id.strip().isdigit():
                raise Problem(
                    400,
                    "invalid-last-event-id",
                    "Invalid Last-Event-ID",
                    f"Last-Event-ID must be an event id (an offset) from this stream, not "
                    f"{last_event_id!r}",
                )
            start = int(last_event_id) + 1
        if not await _call(gw, lambda c: c.session_ever_existed(key)):
            raise Problem(
                404, "session-not-found", "Session not found", f"session {key} does not exist"
            )
        if start is None:
            start = await _call(gw, lambda c: _live_end(c, key))
        elif start > 0:
            try:
                end: int | None = await _live_end(await gw.client(), key)
            except (NoWorker, RPCError):
                # Cannot tell now (a server restarting): follow as before; the reader waits.
                end = None
            if end is not None and start > end:
                # Not an offset this stream gave out: refused, never read as a restart.
                raise Problem(
                    400,
                    "offset-past-end",
                    "Offset past the stream's end",
                    f"event offset {start} is past the end of session {key}'s event stream, "
                    f"whose next event will have id {end}; follow the live end with "
                    f"?from={end} (or without Last-Event-ID), or from the start with ?from=0",
                    next_offset=end,
                )
        client = await gw.client()
        translate = None
        if translator is not None:
            await _primed(translator, client, key, start)
            translate = translator.translate
        fanout = await gw.fanout()
        items = (
            fanout.follow(key, start)
            if fanout is not None
            else client.watch(key, start, repeats=True)
        )
        stream = while_token_lives(
            session_events(key, items, start, translate),
            lambda: gw.tokens.alive(token),
            lambda: revoked_event(token.id),
        )
        return EventSourceResponse(
            newline_separated(stream) if translator is not None else stream,
            ping=gw.settings.gateway_keepalive.total_seconds(),
            sep=SSE_SEPARATOR if translator is not None else None,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.post(
        "/v1/agui/{key}",
        summary="Run the session as an AG-UI agent (AG-UI's HTTP transport)",
        description=(
            "For `HttpAgent` of `@ag-ui/client` and the frontends built on it: a "
            "`RunAgentInput` whose `threadId` is the session key, whose last message is the "
            "user's new one (its `id` is the message id: a resend is a duplicate, 409), and "
            "whose `forwardedProps` may set `mode` and `model`. Answered with the AG-UI events "
            "of the run that takes the message, as `text/event-stream`, until its "
            "`RUN_FINISHED` or `RUN_ERROR`. Dropping the connection does not stop the run; "
            "`POST /v1/sessions/{key}/abort` does (the stream ends `RUN_FINISHED`, outcome "
            "`cancelled`)."
        ),
        tags=["sessions"],
        responses={
            **errors,
            200: {"content": {"text/event-stream": {}}, "description": "the run's AG-UI events"},
            409: {"model": ProblemDocument, "description": "the message was sent already"},
        },
    )
    async def agui_run(
        key: SessionKey, body: RunAgentInput, request: Request, token: Principal
    ) -> Any:
        with traced_request(request, "POST /v1/agui/{key}", key):
            return await _agui_run(key, body, token)

    async def _agui_run(key: str, body: RunAgentInput, token: TokenRecord) -> EventSourceResponse:
        try:
            message = message_of(key, body)
        except AguiInputError as err:
            raise Problem(422, "rejected", "Rejected", str(err)) from err
        kwargs: dict[str, Any] = {
            "mode": message.mode,
            "message_id": message.message_id,
            "routing": Routing(channel="agui"),
            # The session's thinking level and reasoning mode, as the message body's fields.
            "thinking": message.thinking,
            "reasoning": message.reasoning,
        }
        if message.model is not None:
            kwargs["model"] = message.model
        # Follow the stream from before the send: none of the run's events can be missed.
        start = await _call(gw, lambda c: _live_end(c, key))
        receipt = await _call(gw, lambda c: c.send(key, message.text, **kwargs), token)
        if receipt.disposition == SendDisposition.DUPLICATE:
            original = receipt.original
            raise Problem(
                409,
                "duplicate",
                "Message already sent",
                f"message {message.message_id!r} was sent to session {key} already"
                + (f" (run {original.run_id})" if original and original.run_id else "")
                + f"; follow its events with GET /v1/sessions/{key}/events?vocabulary=agui",
            )
        # Asking the session which run took the message is the token's doing too.
        client = await gw.client_as(token)

        async def run_of_message() -> tuple[str | None, str]:
            joined = (SendDisposition.STARTED, SendDisposition.STEERED)
            if receipt.run_id and receipt.disposition in joined:
                return receipt.run_id, ""
            fate = await client.wait_started(key, receipt.message_seq)
            if fate.run_id and fate.state in (FateState.STARTED, FateState.STEERED):
                return fate.run_id, ""
            return None, fate.note or f"the message was not run ({fate.state.value})"

        fanout = await gw.fanout()
        items = (
            fanout.follow(key, start)
            if fanout is not None
            else client.watch(key, start, repeats=True)
        )
        return EventSourceResponse(
            while_token_lives(
                run_events(key, items, run_of_message, body.run_id),
                lambda: gw.tokens.alive(token),
            ),
            ping=gw.settings.gateway_keepalive.total_seconds(),
            sep=SSE_SEPARATOR,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.get(
        "/v1/sessions/{key}/subagents",
        summary="The session's sub-agents",
        description="The sub-agent sessions its runs spawned (`sessions_spawn`), and theirs: "
        "each with the run that spawned it, its status and start. A sub-agent's transcript is "
        "at `/v1/sessions/{its key}/transcript`.",
        tags=["sessions"],
        responses=errors,
    )
    async def subagents(key: SessionKey) -> SubagentList:
        async def tree(c: AgentlaneClient) -> list[TreeNode]:
            # An unknown session is 404, as on every other route of a session.
            if not await c.session_ever_existed(key):
                raise SessionNotFound(f"session {key} does not exist")
            return await c.session_tree()

        nodes = await _call(gw, tree)
        return SubagentList(session_key=key, subagents=subagents_of(nodes, key))

    @app.get(
        "/v1/sessions",
        summary="Running sessions (those the token may see)",
        tags=["sessions"],
        responses=errors,
    )
    async def list_sessions(token: Principal) -> SessionList:
        rows = await _call(gw, lambda c: c.list_sessions())
        return SessionList(
            sessions=[SessionRow.model_validate(r) for r in rows if token.allows_key(str(r["key"]))]
        )

    @app.get(
        "/v1/models",
        summary="The model registry (built-in catalogue and configuration)",
        tags=["models"],
        responses=errors,
    )
    async def models(_: Principal) -> ModelList:
        try:
            config = gw._config.current()
        except ConfigError as err:
            raise Problem(500, "config", "Configuration error", str(err)) from err
        return ModelList(
            default_model=config.default_model,
            models=[
                ModelRow(
                    ref=ref,
                    provider=entry.provider,
                    id=entry.id,
                    api=entry.api.value,
                    context_window=entry.context_window,
                    max_output_tokens=entry.max_output_tokens,
                    thinking_levels=list(entry.capabilities.thinking_levels),
                    images=entry.capabilities.images,
                    default=ref == config.default_model,
                    prices=entry.prices,
                )
                for ref, entry in sorted(config.models.items())
            ],
        )

    @app.api_route(
        "/v1/{rest:path}",
        methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        include_in_schema=False,
    )
    async def no_such_route(rest: str) -> None:
        # Before the page's static mount, which would answer 405 to a POST anywhere.
        raise Problem(404, "not-found", "Not Found", f"no such route: /v1/{rest}")

    if STATIC_DIR.is_dir():
        from fastapi.staticfiles import StaticFiles

        # The web chat page loads without a token; its API calls need one.
        app.mount("/", StaticFiles(directory=STATIC_DIR, html=True), name="static")

    app.add_middleware(BodyLimit, limit=settings.gateway_max_body_bytes)
    return app


async def _live_end(client: AgentlaneClient, key: str) -> int:
    """The stream's current end offset; 0 when the session has not started its stream yet."""
    try:
        return await asyncio.wait_for(client.events_offset(key), WORKER_WAIT_SECONDS + 1)
    except TimeoutError:
        raise NoWorker(
            f"session {key} exists, but no worker answered within {WORKER_WAIT_SECONDS:.0f} s "
            "to say where its event stream ends; start one with `agentlane worker`"
        ) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return 0
        raise


# A resumed AG-UI stream is primed with up to this many events before its resume point, so a
# run the client already has is not started again (strict AG-UI clients refuse that).
AGUI_PRIME_EVENTS = 2_000
AGUI_PRIME_SECONDS = 10.0


async def _primed(translator: Any, client: AgentlaneClient, key: str, start: int) -> None:
    """Feed the translator what the client already received (offsets before `start`)."""
    if start <= 0:
        return
    try:
        async with asyncio.timeout(AGUI_PRIME_SECONDS):
            # Read by query: no long-poll updates in the stream's history.
            async for item in client.read_events(key, max(0, start - AGUI_PRIME_EVENTS), start):
                translator.prime(item.offset, item.event)
    except TimeoutError:
        log.warning("could not prime the AG-UI stream of %s before offset %d", key, start)


def _agui_translator() -> Any:
    """A fresh AG-UI translator for one stream (clients/gateway/agui.py), or 501."""
    try:
        module = importlib.import_module("clients.gateway.agui")
        translator = module.AguiTranslator()
    except (ModuleNotFoundError, AttributeError) as err:
        raise Problem(
            501,
            "vocabulary-unavailable",
            "Not Implemented",
            f"the agui vocabulary is not available in this gateway ({err})",
        ) from err
    return translator


def serve(
    settings: Settings | None = None, host: str | None = None, port: int | None = None
) -> None:
    """Run the gateway with uvicorn until interrupted."""
    import uvicorn

    from workers.telemetry import setup as setup_telemetry

    settings = settings or Settings.from_env()
    telemetry = setup_telemetry(None, service_name="agentlane-gateway")
    app = create_app(settings)
    app.state.gateway.plugins = telemetry.plugins
    try:
        uvicorn.run(
            app,
            host=host or settings.gateway_host,
            port=port or settings.gateway_port,
            log_level="info",
            # Uvicorn's access log has paths and status codes only: never the Authorization
            # header.
            access_log=True,
        )
    finally:
        telemetry.shutdown()  # the last spans, as a worker does
