"""Webhook delivery (issue 11): POSTs a session's block replies, final replies and errors to its
callback URL, at least once, in order, signed.

Design: a per-session delivery queue in the session workflow, one activity per run window.

- The session workflow keeps a small queue of runs to deliver (`WebhookState.queue`, run ids
  and, once known, how each run ended) and works through it one run at a time, in a workflow
  coroutine of its own: a run's delivery starts when the run starts and the next run's only
  when it is done. One delivery at a time per session is what makes the order hold.
- Block replies exist only in the session's event stream (`model_call` publishes them; the
  workflow never sees them), so the activity reads them from there by offset with the stream's
  poll *query* (no history on either workflow), and the final reply from the transcript (the run
  end carries only `last_entry_id`). Nothing large crosses history: the activity's input is the
  run id, the URL, the secret's reference, a stream offset and a block cursor.
- The activity follows its run for at most `window_seconds` (10 min) and returns where it got
  to; the session schedules the next window. A run that ends is noticed with a query of the
  session (`webhook_run`), which answers with how it ended (also for runs that die without an
  `agent_end`, e.g. terminated ones): the activity then drains the stream and sends the final
  reply (or the error) and is done.
- Retries are Temporal's (`workflows/webhook_queue.py` `WEBHOOK_RETRY`: 1 s doubling to a
  1-minute cap, unlimited attempts, one day schedule-to-close): a POST that fails (connection
  refused, timeout, non-2xx) fails the attempt after a heartbeat that records how far it got,
  and the next attempt resumes there. A callback down for an hour costs about 65 attempts and
  loses nothing; the first attempt after it is back comes within a minute.
- At least once: an attempt that dies between a POST and its heartbeat sends that POST again;
  receivers drop repeats by the idempotency key (`X-Agentlane-Id`).

Cost in the session's history: 3 events per window activity (scheduled, started, completed,
whatever the number of attempts: Temporal records only the last attempt) plus the workflow task
that handles its completion (3 more): about 6 events per delivered run (per 10 minutes of a long
run), not per POST. The session carries only `WebhookState` across continue-as-new; a handover
cancels the window in flight and the next execution resumes from the last window's offset
(re-sending at most one window's POSTs, dropped by key).

The alternative, a delivery child workflow per session, would keep this out of the session's
history but cost a signal per run both ways and a second workflow to keep alive across session
close and reopen; and the session's status could not show its progress without a query of its
own.

Limit: the event stream keeps its last 1000 items when it continues as new; block replies of a
run whose delivery fell that far behind (a very long outage during a very busy run) are gone
from the stream: they are counted (`DeliverResult.skipped`, logged), and the final reply, read
from the transcript, still arrives.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.bounded_cache import BoundedCache
from activities.model_output.normalization import normalize_text
from activities.transcript_store import TranscriptStore
from activities.webhook_connect import post_pinned
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import events_workflow_id, session_workflow_id
from agentlane.webhook_secrets import SecretMissing, WebhookSecretStore
from agentlane.webhook_targets import (
    Resolver,
    TargetRefused,
    WebhookPolicy,
    system_resolver,
)
from agentlane.webhooks import (
    DELIVER_WEBHOOKS,
    HEADER_ID,
    HEADER_IDEMPOTENCY,
    HEADER_KIND,
    HEADER_SIGNATURE,
    BlockCursor,
    DeliverInput,
    DeliverProgress,
    DeliverResult,
    DeliveryKind,
    RunDeliveryInfo,
    RunEnd,
    WebhookBody,
    default_secret_ref,
    signature_header,
)

log = logging.getLogger(__name__)


def delivery_failed(message: str, kind: str, *, non_retryable: bool = False) -> ApplicationError:
    """A receiver that is down or refuses is expected (retried for a day): one line in the
    worker's log, and BENIGN keeps the SDK from logging each attempt again with a traceback."""
    log.warning("webhook delivery: %s", message)
    return ApplicationError(
        message,
        type=kind,
        non_retryable=non_retryable,
        category=ApplicationErrorCategory.BENIGN,
    )


_POLL = "__temporal_workflow_stream_poll"
WEBHOOK_RUN_QUERY = "webhook_run"
# Approval events are posted as they come (issue 21): an adapter shows approve / deny buttons.
APPROVAL_KINDS = {
    EventKind.APPROVAL_REQUESTED: DeliveryKind.APPROVAL_REQUESTED,
    EventKind.APPROVAL_DECIDED: DeliveryKind.APPROVAL_DECIDED,
}
POST_TIMEOUT_SECONDS = 10.0
POLL_INTERVAL_SECONDS = 0.25
# How often a delivery that has not seen its run's `agent_end` asks the session whether the run
# ended anyway (a run terminated by an operator publishes none).
END_CHECK_SECONDS = 2.0
WEBHOOK_FAILED = "WebhookDeliveryFailed"
# The callback's host is (or resolves to) an address the `[webhooks]` config does not allow:
# not retried (the run's delivery is given up, and `last_error` says why).
WEBHOOK_REFUSED = "WebhookTargetRefused"


class WebhookDelivery:
    def __init__(
        self,
        store: TranscriptStore,
        secrets: WebhookSecretStore,
        http: httpx.AsyncClient | None = None,
        policy: Callable[[], WebhookPolicy] = WebhookPolicy,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.store = store
        self.secrets = secrets
        self._http = http
        # Read at each POST: an operator's change to `[webhooks]` counts without a restart.
        self.policy = policy
        self.resolver = resolver
        # Progress of attempts in this process, by activity: a retry that lands here resumes
        # from the newest point even if the failed attempt's last heartbeat was throttled.
        # Progress of attempts that failed here, for their retry (bounded: a delivery given up
        # for good leaves its entry behind).
        self._local: BoundedCache[tuple[str, str], DeliverProgress] = BoundedCache(1024)

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(follow_redirects=False)
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def _secret(self, inp: DeliverInput) -> bytes:
        ref = inp.target.secret_ref
        store = self.store.store
        if ref == default_secret_ref(inp.session_key):
            return await self.secrets.aensure(store, ref)
        return await self.secrets.aget(store, ref)

    @activity.defn(name=DELIVER_WEBHOOKS)
    async def deliver_webhooks(self, inp: DeliverInput) -> DeliverResult:
        info = activity.info()
        local_key = (info.workflow_id or "", info.activity_id)
        delivery_id = f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
        saved = await self.store.store.delivery_progress(delivery_id)
        progress = self._resume_point(
            inp,
            info.heartbeat_details,
            self._local.get(local_key),
            DeliverProgress.model_validate_json(saved) if saved else None,
        )
        try:
            secret = await self._secret(inp)
        except SecretMissing as err:
            raise delivery_failed(str(err), WEBHOOK_FAILED) from None
        run = _RunDelivery(self, inp, progress, secret, activity.client(), delivery_id)
        try:
            result = await run.go()
        finally:
            self._local[local_key] = run.progress
        self._local.pop(local_key, None)
        return result

    @staticmethod
    def _resume_point(
        inp: DeliverInput,
        details: Any,
        local: DeliverProgress | None,
        saved: DeliverProgress | None = None,
    ) -> DeliverProgress:
        """The furthest of: the input, this process's memory, the last heartbeat, and what the
        store says an attempt on any host got to (a heartbeat is throttled; the store's record
        is written after every POST)."""
        best = DeliverProgress(offset=inp.from_offset, cursor=inp.cursor)
        candidates = [c for c in (local, saved) if c is not None]
        if details:
            try:
                candidates.append(DeliverProgress.model_validate(details[0]))
            except Exception:  # a heartbeat from an older shape: start from the input
                pass
        for c in candidates:
            if (c.final_sent, c.offset, c.delivered) > (
                best.final_sent,
                best.offset,
                best.delivered,
            ):
                best = c
        return best


class _RunDelivery:
    """One attempt at delivering one window of one run."""

    def __init__(
        self,
        owner: WebhookDelivery,
        inp: DeliverInput,
        progress: DeliverProgress,
        secret: bytes,
        client: Client,
        delivery_id: str = "",
    ) -> None:
        self.owner = owner
        self.delivery_id = delivery_id
        self.inp = inp
        self.progress = progress
        self.secret = secret
        self.client = client
        self.skipped = 0

    def _beat(self) -> None:
        activity.heartbeat(self.progress.model_dump(mode="json"))

    def _result(self, done: bool) -> DeliverResult:
        p = self.progress
        return DeliverResult(
            done=done,
            offset=p.offset,
            cursor=p.cursor,
            delivered=p.delivered,
            last_id=p.last_id,
            skipped=self.skipped,
        )

    async def go(self) -> DeliverResult:
        deadline = time.monotonic() + self.inp.window_seconds
        scan = self.progress.offset
        if self.progress.final_sent:
            return self._result(done=True)
        saw_end = False
        last_check = 0.0
        ended: RunEnd | None = None
        while True:
            scan, new_items, saw = await self._read(scan)
            saw_end = saw_end or saw
            if new_items:
                continue  # drain before looking at the run's state
            self._beat()
            now = time.monotonic()
            if ended is None and (saw_end or now - last_check >= END_CHECK_SECONDS):
                last_check = now
                state = await self._run_state()
                if not state.known:
                    log.warning("webhook: session no longer tracks %s; done", self.inp.run_id)
                    return self._result(done=True)
                if state.ended is not None:
                    ended = state.ended
                    # Everything the run published reached the stream before the session
                    # learned it ended: one more drain and the blocks are complete.
                    continue
            if ended is not None:
                await self._send_final(ended)
                return self._result(done=True)
            if now >= deadline:
                return self._result(done=False)
            await asyncio.sleep(POLL_INTERVAL_SECONDS)

    async def _read(self, offset: int) -> tuple[int, bool, bool]:
        """Poll the stream once from `offset`; deliver this run's block replies in it. Returns
        the next scan offset, whether anything was read, and whether `agent_end` was seen."""
        handle = self.client.get_workflow_handle(events_workflow_id(self.inp.session_key))
        converter = self.client.data_converter.payload_converter
        try:
            result = await handle.query(
                _POLL, PollInput(topics=[EVENTS_TOPIC], from_offset=offset), result_type=PollResult
            )
        except Exception as err:
            # The stream rolling over, or no worker for a moment: try again next round.
            log.info("webhook: could not read the events of %s: %s", self.inp.session_key, err)
            return offset, False, False
        saw_end = False
        if result.items and result.items[0].offset > offset:
            # Truncated away before it was read (a query clamps to the retained base).
            gap = result.items[0].offset - offset
            self.skipped += gap
            log.warning(
                "webhook: %s stream items after offset %s were truncated before delivery (%s)",
                gap,
                offset,
                self.inp.run_id,
            )
        for item in result.items:
            payload = Payload()
            payload.ParseFromString(base64.b64decode(item.data))
            event = converter.from_payload(payload, AgentEvent)
            offset = item.offset + 1
            if event.kind == EventKind.MESSAGE_DROPPED:
                # It belongs to no run: the delivery that reads it posts it (runs are delivered
                # one after the other, each from where the last one stopped, so exactly one).
                await self._dropped(event, offset)
                continue
            if event.run_id != self.inp.run_id:
                continue
            if event.kind == EventKind.BLOCK_REPLY:
                await self._block(event)
            elif event.kind in APPROVAL_KINDS:
                await self._approval(event, offset)
            elif event.kind == EventKind.AGENT_END:
                saw_end = True
            self.progress.offset = offset
        return max(offset, result.next_offset), bool(result.items), saw_end

    async def _block(self, event: AgentEvent) -> None:
        cursor = self.progress.cursor
        message_id = event.message_id or ""
        index = event.index or 0
        if cursor is not None and cursor.message_id == message_id and index < cursor.next_index:
            return  # a retried model attempt re-published it
        body = self._body(
            event.event_id, DeliveryKind.BLOCK_REPLY, text=event.text or "", ts=event.ts
        )
        body.index, body.message_id = index, message_id
        await self._post(body, cursor=BlockCursor(message_id=message_id, next_index=index + 1))

    async def _approval(self, event: AgentEvent, next_offset: int) -> None:
        """A tool call that waits for a person (or was decided): an adapter shows buttons."""
        body = self._body(event.event_id, APPROVAL_KINDS[event.kind], text=event.text or "")
        body.ts = event.ts or body.ts
        body.approval = dict(event.data)
        await self._post(body, offset=next_offset)

    async def _dropped(self, event: AgentEvent, next_offset: int) -> None:
        """A message the queue dropped, told to its sender (issue 19); its text is not sent
        again, it is in the transcript."""
        body = self._body(event.event_id, DeliveryKind.MESSAGE_DROPPED, text=event.text or "")
        body.ts = event.ts or body.ts
        message_id, seq, fate = (event.data.get(k) for k in ("message_id", "seq", "fate"))
        body.message_id = message_id if isinstance(message_id, str) else None
        body.message_seq = seq if isinstance(seq, int) else None
        body.status = fate if isinstance(fate, str) else None
        await self._post(body, offset=next_offset)

    async def _send_final(self, ended: RunEnd) -> None:
        run_id = self.inp.run_id
        if ended.status == "success":
            text = await self._reply(ended.last_entry_id)
            if text:
                body = self._body(f"{run_id}/final_reply", DeliveryKind.FINAL_REPLY, text=text)
                body.status = ended.status
                await self._post(body)
        else:
            body = self._body(
                f"{run_id}/error", DeliveryKind.ERROR, text=ended.error_message or ended.status
            )
            body.status, body.error_code = ended.status, ended.error_code
            await self._post(body)
        self.progress.final_sent = True
        self._beat()
        await self._save()

    async def _reply(self, last_entry_id: str | None) -> str:
        """The user-facing reply, as `finish_run` computes it (a silent reply sends nothing)."""
        if not last_entry_id:
            return ""
        entry = await self.owner.store.get(self.inp.session_key, last_entry_id)
        return (normalize_text(entry.text) or "") if entry is not None else ""

    def _body(
        self, body_id: str, kind: DeliveryKind, text: str = "", ts: float | None = None
    ) -> WebhookBody:
        t = self.inp.target
        return WebhookBody(
            id=body_id,
            kind=kind,
            session_key=self.inp.session_key,
            run_id=self.inp.run_id,
            ts=ts or time.time(),
            text=text,
            channel=t.channel,
            to=t.to,
            account=t.account,
            thread=t.thread,
        )

    async def _post(
        self, body: WebhookBody, *, cursor: BlockCursor | None = None, offset: int | None = None
    ) -> None:
        """POST one body; once answered 2xx, record it (with where the next block starts,
        `cursor`, or the stream offset past it, `offset`) in the heartbeat and the store
        together, so a retry on any host resumes after it."""
        data = body.model_dump_json(exclude_none=True).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "agentlane-webhook/1",
            HEADER_ID: body.id,
            HEADER_IDEMPOTENCY: body.id,
            HEADER_KIND: body.kind.value,
            HEADER_SIGNATURE: signature_header(self.secret, int(time.time()), data),
        }
        url = self.inp.target.url
        try:
            response = await post_pinned(
                self.owner.http(),
                url,
                data,
                headers,
                self.owner.policy(),
                post_timeout=POST_TIMEOUT_SECONDS,
                resolver=self.owner.resolver,
            )
        except TargetRefused as err:
            raise delivery_failed(
                f"POST {url} refused: {err}", WEBHOOK_REFUSED, non_retryable=True
            ) from None
        except (httpx.HTTPError, OSError) as err:
            self._beat()  # the retry resumes at this POST
            raise delivery_failed(
                f"POST {url} ({body.id}) failed: {type(err).__name__}: {err}", WEBHOOK_FAILED
            ) from None
        if not 200 <= response.status_code < 300:
            self._beat()
            # The status only: the receiver's body never reaches the session's status (it
            # would be a way to read an internal service's replies through the gateway).
            raise delivery_failed(
                f"POST {url} ({body.id}) answered HTTP {response.status_code}", WEBHOOK_FAILED
            )
        self.progress.delivered += 1
        self.progress.last_id = body.id
        if cursor is not None:
            self.progress.cursor = cursor
        if offset is not None:
            self.progress.offset = offset
        self._beat()
        await self._save()

    async def _save(self) -> None:
        if self.delivery_id:
            # A retry on another host resumes after this POST, whatever the heartbeat's throttle.
            await self.owner.store.store.save_delivery_progress(
                self.delivery_id, self.progress.model_dump_json()
            )

    async def _run_state(self) -> RunDeliveryInfo:
        handle = self.client.get_workflow_handle(session_workflow_id(self.inp.session_key))
        try:
            info: RunDeliveryInfo = await handle.query(
                WEBHOOK_RUN_QUERY, self.inp.run_id, result_type=RunDeliveryInfo
            )
        except Exception as err:
            log.info("webhook: could not ask %s about its run: %s", self.inp.session_key, err)
            return RunDeliveryInfo(known=True)
        return info
