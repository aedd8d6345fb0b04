"""The built-in offline model: a deterministic provider for demos and tests.

It is not a language model. It follows the simple instructions described in `offline_planner`,
calling one tool per model call and finishing with a summary of what it did. A compaction's
summariser request (`purpose == "summary"`) gets the deterministic summary of `offline_summary`
instead, streamed the same way. It needs no key and no network, streams its text token by token
(with configurable delays, so crash and latency tests have something to interrupt), and goes
through exactly the same activity, events and transcript path as the real providers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from operator import attrgetter

from activities.providers.base import (
    Credentials,
    Finish,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallStart,
)
from activities.providers.offline_planner import (
    LAST_PROCESS,
    PlannedText,
    PlannedTool,
    Progress,
    make_plan,
    progress_since_last_user,
    summarize_text,
)
from activities.providers.offline_summary import summarize_prompt
from agentlane.transcript import Role, TranscriptEntry
from agentlane.usage import Usage

SLOW_TOKEN_SECONDS = 0.05
_TOKEN = re.compile(r"\S+\s*|\s+")

HELP = (
    "I am agentlane's built-in offline model: a deterministic stand-in for demos and tests, not "
    "a language model. I understand instructions like: read <file>; write <file> with <text>; "
    "edit <file> replacing <old> with <new>; run `<command>`; sleep <seconds>; summarize <file> "
    "into <file>; apply this patch: *** Begin Patch … *** End Patch; start `<command>` in the "
    'background, poll it, send "<text>" to it, kill it, list processes; count to <n>; say '
    "<text> (separate steps with 'then' or ';'). "
    "Configure a real provider to talk to a real model."
)


def _estimate_tokens(chars: int) -> int:
    return max(1, chars // 4)


def _call_id(last_user_id: str, assistant_turns: int, done: int) -> str:
    """Deterministic (a retried call makes the same id) and unique in the session's file: the
    counters restart when a request no longer holds the history before it (after a reset), so
    the id also carries a tag of the user message being answered."""
    tag = hashlib.sha256(last_user_id.encode()).hexdigest()[:6]
    return f"call_{assistant_turns + 1}_{done}_{tag}"


def _last_started(progress: Progress) -> str:
    """The id of the process this message started last ("Started proc-N ...")."""
    for entry in reversed(progress.tool_results):
        if m := re.match(r"Started (proc-\d+)", entry.text):
            return m.group(1)
    return "proc-unknown"


def _final_summary(results: list[TranscriptEntry]) -> str:
    if not results:
        return ""
    lines = []
    for entry in results:
        first = entry.text.strip().splitlines()[0] if entry.text.strip() else "(no output)"
        mark = "failed" if entry.is_error else "ok"
        lines.append(f"- {entry.tool_name}: {mark}: {first[:160]}")
    return "Done. Here is what I did:\n" + "\n".join(lines)


class OfflineProvider:
    name = "offline"

    def __init__(self, first_token_delay: float | None = None, token_delay: float | None = None):
        env_first = float(os.environ.get("AGENTLANE_OFFLINE_FIRST_TOKEN_MS", "0")) / 1000
        env_token = float(os.environ.get("AGENTLANE_OFFLINE_TOKEN_MS", "0")) / 1000
        self.first_token_delay = env_first if first_token_delay is None else first_token_delay
        self.token_delay = env_token if token_delay is None else token_delay

    async def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]:
        if request.purpose == "summary":
            async for event in self._summary(request):
                yield event
            return
        progress = progress_since_last_user(request.entries)
        plan = make_plan(progress.instruction)
        tool_steps = plan.tool_steps
        done = len(progress.tool_results)

        # Text steps between the previous tool call and the next one belong to this message.
        start = tool_steps[done - 1] + 1 if 0 < done <= len(tool_steps) else 0
        end = tool_steps[done] if done < len(tool_steps) else len(plan.steps)
        texts = [s for s in plan.steps[start:end] if isinstance(s, PlannedText)]
        next_tool: PlannedTool | None = None
        if done < len(tool_steps):
            step = plan.steps[tool_steps[done]]
            assert isinstance(step, PlannedTool)
            next_tool = step
            if tool_steps[done] in plan.derived_writes:
                read_step, target = plan.derived_writes[tool_steps[done]]
                source = progress.tool_results[tool_steps.index(read_step)]
                read = plan.steps[read_step]
                assert isinstance(read, PlannedTool)
                content = summarize_text(str(read.arguments["path"]), source.text)
                next_tool = PlannedTool("write", {"path": target, "content": content})
            if next_tool.arguments.get("id") == LAST_PROCESS:
                next_tool = PlannedTool(
                    next_tool.name, {**next_tool.arguments, "id": _last_started(progress)}
                )

        pieces = [t.text for t in texts]
        if next_tool is None:
            pieces.append(_final_summary(progress.tool_results) if progress.tool_results else "")
            if not plan.steps:
                pieces = [HELP]
        text = "\n\n".join(p for p in pieces if p)
        slow = any(t.slow for t in texts)

        if self.first_token_delay:
            await asyncio.sleep(self.first_token_delay)
        if request.thinking != "off":
            total = max(1, len(tool_steps))
            yield ReasoningDelta(f"Plan has {len(plan.steps)} steps; {done} of {total} tools done.")
        async for delta in _deltas(
            text, max(self.token_delay, SLOW_TOKEN_SECONDS if slow else 0.0)
        ):
            yield delta

        output_chars = len(text)
        stop_reason = "end_turn"
        if next_tool is not None:
            # Steps of one group (parallel sub-agents) are called together in this message.
            together = [next_tool]
            while next_tool.group is not None and done + len(together) < len(tool_steps):
                step = plan.steps[tool_steps[done + len(together)]]
                if not isinstance(step, PlannedTool) or step.group != next_tool.group:
                    break
                together.append(step)
            for index, tool in enumerate(together):
                call_id = _call_id(progress.last_user_id, progress.assistant_turns, done + index)
                args = json.dumps(tool.arguments)
                yield ToolCallStart(index=index, id=call_id, name=tool.name)
                yield ToolCallComplete(
                    index=index,
                    id=call_id,
                    name=tool.name,
                    arguments_json=args,
                    session_unique=True,
                )
                output_chars += len(args)
            stop_reason = "tool_use"
        yield Finish(stop_reason=stop_reason, usage=_usage(request, output_chars))

    async def _summary(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # The summariser's prompt is the request's one user message (the last, to be safe).
        users = [e for e in request.entries if e.role == Role.USER]
        text = summarize_prompt(users[-1].text if users else "")
        if self.first_token_delay:
            await asyncio.sleep(self.first_token_delay)
        async for delta in _deltas(text, self.token_delay):
            yield delta
        yield Finish(stop_reason="end_turn", usage=_usage(request, len(text)))


# With no delay, how many tokens go out between two yields to the event loop: a long reply at
# zero latency ("count to 100000", 200 000 tokens) otherwise holds the worker's loop for its
# whole length (no heartbeat went out: the call was timed out and made again, five times).
YIELD_EVERY_TOKENS = 256


async def _deltas(text: str, delay: float) -> AsyncIterator[TextDelta]:
    """The text token by token, `delay` seconds apart."""
    for i, token in enumerate(_TOKEN.findall(text)):
        if delay and i:
            await asyncio.sleep(delay)
        elif i and i % YIELD_EVERY_TOKENS == 0:
            await asyncio.sleep(0)
        yield TextDelta(token)


_TEXT = attrgetter("text")


def _usage(request: ModelRequest, output_chars: int) -> Usage:
    prompt_chars = len(request.system) + sum(map(len, map(_TEXT, request.entries)))
    return Usage(input=_estimate_tokens(prompt_chars), output=_estimate_tokens(output_chars))
