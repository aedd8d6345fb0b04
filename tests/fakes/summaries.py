"""Summariser requests to the fake provider: how they are told apart, and the automatic answer.

The engine compacts a transcript by sending the summariser's system prompt and one user message
(the serialised conversation, or partial summaries to merge). The fake recognises that system
prompt by its first sentence, so a test can script summaries apart from chat replies
(`Reply(purpose="summary")`); one no script targets is answered with a short deterministic
summary that has the five headings compaction requires, built from the prompt. Nothing is
imported from the engine: the fake stands for a provider, which knows only what it is sent.
"""

from __future__ import annotations

import re
from typing import Any, Final

# The first sentence of activities/context/safeguard_summary.SUMMARIZER_SYSTEM_PROMPT (a test
# checks the two agree).
SUMMARIZER_PROMPT_PREFIX: Final = (
    "You summarise a conversation between a user and an AI agent so that the agent can carry on "
    "from the summary alone."
)
AUTO_SUMMARY_MARK: Final = "Automatic summary by the fake provider"
# Bounded by its parts (two decision lines, a 300-character ask, six names); the cut is a guard.
MAX_AUTO_SUMMARY_CHARS: Final = 1_400
_BLOCKS: Final = ("conversation", "previous-summary", "partial-summaries")
_PART: Final = re.compile(
    r"(?:\A|(?<=\n\n))\[(User|Assistant)\]: (.*?)(?=\n\n\[|\n</conversation>|\Z)", re.S
)
_PATH: Final = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{1,7}(?![\w/])")


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def system_text(body: dict[str, Any]) -> str:
    """The system prompt of any of the three wire formats."""
    parts = [_text(body.get("system")), _text(body.get("instructions"))]
    for message in [*(body.get("messages") or []), *_items(body.get("input"))]:
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            parts.append(_text(message.get("content")))
    return "\n\n".join(part for part in parts if part)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def is_summary_request(body: dict[str, Any]) -> bool:
    return system_text(body).lstrip().startswith(SUMMARIZER_PROMPT_PREFIX)


def last_user_text(body: dict[str, Any]) -> str:
    """The last user message: Anthropic and Chat `messages`, Responses `input` (or a string)."""
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        return raw_input
    messages = [*(body.get("messages") or []), *_items(raw_input)]
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return _text(users[-1].get("content")) if users else ""


def _cap(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def auto_summary(prompt: str) -> str:
    """A short summary with the five required headings: what the prompt holds, the last
    assistant answer and user ask, and file names seen. Deterministic for a given prompt."""
    merge = "<partial-summaries>" in prompt
    parts = _PART.findall(prompt)
    users = [text for role, text in parts if role == "User"]
    answers = [text for role, text in parts if role == "Assistant"]
    if merge:
        what = f"merged {prompt.count('[Chunk ')} partial summaries"
    else:
        what = f"{len(parts)} messages"
        if "<previous-summary>" in prompt:
            what += " and a previous summary"
    decisions = [f"- {AUTO_SUMMARY_MARK}: {what} ({len(prompt)} characters)."]
    if answers:
        decisions.append(f"- Last answer: {_cap(answers[-1], 200)}")
    pending = f"- {_cap(users[-1], 300)}" if users else "None."
    # Names from what is summarised, not from the instructions after it.
    end = max(prompt.rfind(f"</{tag}>") for tag in _BLOCKS)
    paths = list(dict.fromkeys(_PATH.findall(prompt[:end] if end > 0 else prompt)))[:6]
    identifiers = "\n".join(f"- {_cap(p, 80)}" for p in paths) or "None captured."
    return "\n\n".join(
        [
            "## Decisions\n" + "\n".join(decisions),
            "## Open TODOs\nNone.",
            "## Constraints/Rules\nNone.",
            f"## Pending user asks\n{pending}",
            f"## Exact identifiers\n{identifiers}",
        ]
    )[:MAX_AUTO_SUMMARY_CHARS]
