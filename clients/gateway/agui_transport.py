"""AG-UI's own transport (issue 19): `POST /v1/agui/{key}` with a `RunAgentInput`, answered by
that run's AG-UI events as Server-Sent Events, what `HttpAgent` of `@ag-ui/client` and the
frontends built on it speak.

- The thread is the session: `threadId` must be the session key of the path (a frontend sets
  `new HttpAgent({url, threadId: key})`); the token's prefixes apply as on every route.
- The new user message is the last of `messages`, which must be a user message (the client
  sends the whole conversation each time; what came before is already in the transcript). Its
  `id` is the message id, so a resent request is recognised as a duplicate and runs nothing.
  Only text is taken.
- `forwardedProps` may carry `mode` (steer, followup, collect, ... as on the messages route) and
  `model` (provider/model, counted when the message creates the session); other keys are left
  alone, as AG-UI asks of a server that does not know them.
- The answer: the events of the run that took the message (a queued message waits for its run;
  a steered one follows the run it joined), in the vocabulary of `clients/gateway/agui.py`,
  ending with that run's `RUN_FINISHED` or `RUN_ERROR`. A message the queue dropped, a session
  closed meanwhile, or a client too slow for the live feed ends with `RUN_ERROR` saying so.
- Dropping the connection (`HttpAgent.abortRun()`) does not stop the run (runs do not depend on
  connections); `POST /v1/sessions/{key}/abort` does, and the stream then ends with
  `RUN_FINISHED` whose outcome is `cancelled`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, RunErrorEvent, RunStartedEvent, TextInputContent, UserMessage
from sse_starlette import ServerSentEvent

from clients.api import StreamItem
from clients.gateway.agui import AguiTranslator
from clients.gateway.fanout import FeedFailed

FORWARDED_KEYS = ("mode", "model", "thinking", "reasoning")
# AG-UI's SSE parser splits events on "\n\n" only (not the "\r\n" sse-starlette writes by
# default).
SSE_SEPARATOR = "\n"
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


class AguiInputError(ValueError):
    """A `RunAgentInput` this gateway cannot run; the text says why."""


@dataclass(frozen=True)
class AguiMessage:
    text: str
    message_id: str
    mode: str | None = None
    model: str | None = None
    thinking: str | None = None
    reasoning: str | None = None


def message_of(key: str, run: RunAgentInput) -> AguiMessage:
    """The message a `RunAgentInput` sends to session `key`."""
    if run.thread_id != key:
        raise AguiInputError(
            f"threadId {run.thread_id!r} is not this session: the thread is the session, so "
            f"threadId must be {key!r} (the key in the path)"
        )
    if not run.messages:
        raise AguiInputError("messages is empty: the last message must be the user's new one")
    last = run.messages[-1]
    if not isinstance(last, UserMessage):
        raise AguiInputError(
            f"the last message is a {last.role} message; it must be the user's new message "
            "(tool results from the frontend are not taken)"
        )
    if isinstance(last.content, str):
        text = last.content
    else:
        parts = [p for p in last.content if not isinstance(p, TextInputContent)]
        if parts:
            raise AguiInputError(f"the user message has a {parts[0].type} part; only text is taken")
        text = "".join(p.text for p in last.content if isinstance(p, TextInputContent))
    props = run.forwarded_props if isinstance(run.forwarded_props, dict) else {}
    found: dict[str, str | None] = {}
    for name in FORWARDED_KEYS:
        value = props.get(name)
        if value is not None and not isinstance(value, str):
            raise AguiInputError(f"forwardedProps.{name} must be a string")
        found[name] = value
    return AguiMessage(
        text=text,
        message_id=last.id,
        mode=found["mode"],
        model=found["model"],
        thinking=found["thinking"],
        reasoning=found["reasoning"],
    )


def _sse(message: dict[str, Any], offset: int | None = None) -> ServerSentEvent:
    return ServerSentEvent(
        data=json.dumps(message),
        id=None if offset is None else str(offset),
        sep=SSE_SEPARATOR,
    )


async def newline_separated(
    events: AsyncIterator[ServerSentEvent],
) -> AsyncIterator[ServerSentEvent]:
    """`events` written with AG-UI's line separator (for the `?vocabulary=agui` stream too, so
    AG-UI's own SSE parser reads it)."""
    async for ev in events:
        yield ServerSentEvent(
            data=ev.data,
            event=ev.event,
            id=ev.id,
            retry=ev.retry,
            comment=ev.comment,
            sep=SSE_SEPARATOR,
        )


def _failed(key: str, run_id: str, message: str, code: str, started: bool) -> list[dict[str, Any]]:
    """A run that ends before any of its events could be sent: RUN_STARTED (when not sent yet)
    and RUN_ERROR, so the client's run closes as AG-UI wants."""
    out: list[dict[str, Any]] = []
    if not started:
        begun = RunStartedEvent(thread_id=key, run_id=run_id)
        out.append(begun.model_dump(mode="json", by_alias=True, exclude_none=True))
    error = RunErrorEvent(message=message, code=code)
    out.append(error.model_dump(mode="json", by_alias=True, exclude_none=True))
    return out


async def run_events(
    key: str,
    items: AsyncIterator[StreamItem],
    run_of_message: Callable[[], Awaitable[tuple[str | None, str]]],
    client_run_id: str,
) -> AsyncIterator[ServerSentEvent]:
    """The AG-UI events of the run that takes the message, from `items` (the session's stream,
    followed from before the message was sent) until that run's end.

    `run_of_message` answers (run id, note): the run that took the message, or None and why
    not (dropped by the queue, given up)."""
    started = False
    try:
        run_id, note = await run_of_message()
        if run_id is None:
            for message in _failed(key, client_run_id, note, "not_run", started):
                yield _sse(message)
            return
        translator = AguiTranslator()
        async for item in items:
            if item.event.run_id != run_id:
                continue
            for message in translator.translate(item.offset, item.event):
                started = True
                yield _sse(message, item.offset)
                if message.get("type") in TERMINAL:
                    return
        for message in _failed(
            key, run_id, "the session was closed before the run ended", "session_closed", started
        ):
            yield _sse(message)
    except FeedFailed:
        for message in _failed(
            key,
            client_run_id,
            "the gateway could not follow the run's events for a while; follow the rest with "
            f"GET /v1/sessions/{key}/events?vocabulary=agui",
            "interrupted",
            started,
        ):
            yield _sse(message)
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()
