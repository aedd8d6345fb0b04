"""Tool-call / tool-result pairing, checked as the real APIs check it, with their words.

A transcript whose results do not pair with their calls (an orphan result after an interrupted
tool call, a call left without a result) is what users met as "unexpected tool_use_id": the
real APIs answer 400. The fake answers the same, so a test of transcript repair can fail.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.scripts import Api


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def anthropic_error(body: dict[str, Any]) -> str | None:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            results = [b for b in _blocks(message) if b.get("type") == "tool_result"]
            previous = messages[index - 1] if index else {}
            calls = {
                b.get("id")
                for b in _blocks(previous)
                if previous.get("role") == "assistant" and b.get("type") == "tool_use"
            }
            for block_index, block in enumerate(results):
                if block.get("tool_use_id") not in calls:
                    return (
                        f"messages.{index}.content.{block_index}: unexpected `tool_use_id` found "
                        f"in `tool_result` blocks: {block.get('tool_use_id')}. Each "
                        "`tool_result` block must have a corresponding `tool_use` block in the "
                        "previous message."
                    )
        if message.get("role") == "assistant":
            calls = [b.get("id") for b in _blocks(message) if b.get("type") == "tool_use"]
            following = messages[index + 1] if index + 1 < len(messages) else None
            if not calls or following is None:
                continue  # the last assistant message may be a prefill
            answered = {
                b.get("tool_use_id")
                for b in _blocks(following)
                if following.get("role") == "user" and b.get("type") == "tool_result"
            }
            missing = [c for c in calls if c not in answered]
            if missing:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(str(m) for m in missing)}. Each `tool_use` "
                    "block must have a corresponding `tool_result` block in the next message."
                )
    return None


def chat_error(body: dict[str, Any]) -> str | None:
    open_calls: list[str] = []
    last_calls: set[str] = set()
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in last_calls:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            if call_id in open_calls:
                open_calls.remove(call_id)
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
        calls = [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        last_calls = {str(c) for c in calls} if role == "assistant" else set()
        open_calls = [str(c) for c in calls] if role == "assistant" else []
    return None


def responses_error(body: dict[str, Any]) -> str | None:
    items = body.get("input")
    if not isinstance(items, list):
        return None
    calls: set[str] = set()
    outputs: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.add(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
            outputs.add(call_id)
    missing = sorted(calls - outputs)
    if missing:
        return f"No tool output found for function call {missing[0]}."
    return None


def pairing_error(api: Api, body: dict[str, Any]) -> str | None:
    """The API's 400 message for calls and results that do not pair, or None."""
    if api == "anthropic":
        return anthropic_error(body)
    if api == "openai-chat":
        return chat_error(body)
    return responses_error(body)
