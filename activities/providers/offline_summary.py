"""The offline model's summariser: a deterministic summary of a compaction prompt.

The engine compacts with whatever model the session uses, so the keyless offline model must
answer a summariser request (`ModelRequest.purpose == "summary"`) with something compaction can
keep. It reads the prompt `activities/context/safeguard_summary` builds (the conversation as
"[User]: …" / "[Assistant]: …" parts inside `<conversation>`, maybe a `<previous-summary>`, or
partial summaries inside `<partial-summaries>` for a merge) and writes the five required
headings in order:

* Decisions: the first line of each final assistant answer (an answer not followed by its own
  tool calls), the latest ones.
* Open TODOs: steps of the last instruction still to do, as the offline planner reads it.
* Constraints/Rules: user lines that say must / never / always.
* Pending user asks: the last user message, ≤ 300 characters.
* Exact identifiers: file paths, commands and URLs from tool calls and user messages.

A previous summary or partial summaries are folded in: under each heading the union of their
lines and the new ones, oldest dropped first past a per-heading bound (one line for the
pending ask: the latest). The whole stays within 2 000 characters. No prompt format is
imported: the prompt is text, and a text this module does not recognise still gets the five
headings.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from activities.providers.offline_planner import PlannedTool, make_plan

MAX_SUMMARY_CHARS: Final = 2_000
MAX_LINE_CHARS: Final = 160
MAX_PENDING_CHARS: Final = 300

DECISIONS: Final = "## Decisions"
TODOS: Final = "## Open TODOs"
RULES: Final = "## Constraints/Rules"
PENDING: Final = "## Pending user asks"
IDENTIFIERS: Final = "## Exact identifiers"
HEADINGS: Final = (DECISIONS, TODOS, RULES, PENDING, IDENTIFIERS)

# What a heading says when it has nothing; dropped when folding in real lines.
_EMPTY: Final = {
    DECISIONS: "None.",
    TODOS: "None.",
    RULES: "None recorded.",
    PENDING: "None.",
    IDENTIFIERS: "None captured.",
}
_PLACEHOLDERS: Final = frozenset(
    {"none.", "none", "none recorded.", "none captured.", "no prior history."}
)
# Lines kept per heading, latest first; rules and identifiers are what a resumed run most
# needs verbatim, so they keep more. The pending ask is the last user message only: an older
# one was either answered or repeated.
_BOUNDS: Final = {DECISIONS: 6, TODOS: 6, RULES: 8, PENDING: 1, IDENTIFIERS: 12}

# A part of the serialised conversation starts at the beginning or after a blank line.
_PART: Final = re.compile(
    r"(?:\A|(?<=\n\n))\[(User|Assistant|Assistant thinking|Assistant tool calls|System|"
    r"Tool result \([^)\n]*\))\]: "
)
_RULE_WORDS: Final = re.compile(r"\b(?:must|never|always)\b", re.IGNORECASE)
_CHUNK_LABEL: Final = re.compile(r"^\[Chunk [^\]\n]*\]$", re.MULTILINE)
_IMAGE_NOTE: Final = re.compile(r" \[image(?: x\d+)?\]$")
# Tool-call arguments as serialised: `key='value'` (a Python repr) or `"key": "value"` (raw).
_REPR_ARG: Final = re.compile(
    r"\b(path|file_path|command|cwd|url)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
)
_JSON_ARG: Final = re.compile(r"\"(path|file_path|command|cwd|url)\"\s*:\s*(\"(?:[^\"\\]|\\.)*\")")
_URL: Final = re.compile(r"https?://[^\s'\"<>`)\]]+")
_BACKTICKED: Final = re.compile(r"`([^`\n]{1,200})`")
# A path: a name with an extension (stem and extension of two characters or more, so "e.g."
# is not one), maybe under directories.
_PATH: Final = re.compile(
    r"(?<![\w/.~-])(?:~?\.{0,2}/)?(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{1,7}(?![\w/])"
)


@dataclass(frozen=True)
class _Part:
    label: str
    text: str


def _span(prompt: str, tag: str) -> tuple[int, int] | None:
    """Where the block `<tag>` … `</tag>` is, tags included."""
    start = prompt.find(f"<{tag}>\n")
    end = prompt.rfind(f"\n</{tag}>")
    if start < 0 or end < start:
        return None
    return start, end + len(tag) + 4


def _inside(prompt: str, span: tuple[int, int], tag: str) -> str:
    return prompt[span[0] + len(tag) + 3 : span[1] - len(tag) - 4]


def _parts(conversation: str) -> list[_Part]:
    marks = list(_PART.finditer(conversation))
    parts = []
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(conversation)
        parts.append(_Part(mark.group(1), conversation[mark.end() : end].strip()))
    return parts


def _cap(text: str, limit: int = MAX_LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _user_text(part: _Part) -> str:
    return _IMAGE_NOTE.sub("", part.text)


# -- the five headings from a conversation ---------------------------------------------------


def _decisions(parts: Sequence[_Part]) -> list[str]:
    lines = []
    for index, part in enumerate(parts):
        following = parts[index + 1].label if index + 1 < len(parts) else None
        if part.label == "Assistant" and following != "Assistant tool calls":
            first = _first_line(part.text)
            if first:
                lines.append(f"- {_cap(first)}")
    return lines


def _describe(step: PlannedTool) -> str:
    arguments = step.arguments
    target = arguments.get("path") or arguments.get("command") or ""
    return f"- {step.name} {target}".rstrip()


def _open_todos(parts: Sequence[_Part]) -> list[str]:
    users = [i for i, part in enumerate(parts) if part.label == "User"]
    if not users:
        return []
    after = parts[users[-1] + 1 :]
    if _decisions(after):
        return []  # the instruction was answered: nothing of it is left
    done = sum(1 for p in after if p.label.startswith("Tool result"))
    plan = make_plan(_user_text(parts[users[-1]]))
    tools = [step for step in plan.steps if isinstance(step, PlannedTool)]
    return [_cap(_describe(step)) for step in tools[done:]]


def _rules(parts: Sequence[_Part]) -> list[str]:
    lines = []
    for part in parts:
        if part.label != "User":
            continue
        for line in _user_text(part).splitlines():
            if _RULE_WORDS.search(line):
                lines.append(f"- {_cap(line.strip())}")
    return lines


def _pending(parts: Sequence[_Part]) -> list[str]:
    users = [part for part in parts if part.label == "User"]
    if not users:
        return []
    text = " ".join(_user_text(users[-1]).split())
    return [f"- {_cap(text, MAX_PENDING_CHARS - 2)}"] if text else []


def _literal(raw: str, quoted_json: bool) -> str:
    try:
        value = json.loads(raw) if quoted_json else ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw.strip("'\"")
    return str(value)


def _identifiers(parts: Sequence[_Part]) -> list[str]:
    found: list[str] = []
    for part in parts:
        if part.label == "Assistant tool calls":
            for regex, quoted_json in ((_REPR_ARG, False), (_JSON_ARG, True)):
                for match in regex.finditer(part.text):
                    key = "command" if match.group(1) in ("command", "cwd") else match.group(1)
                    key = "path" if key == "file_path" else key
                    found.append(f"- {key}: {_literal(match.group(2), quoted_json)}")
        elif part.label == "User":
            text = _user_text(part)
            found += [f"- url: {url}" for url in _URL.findall(text)]
            found += [f"- command: {command}" for command in _BACKTICKED.findall(text)]
            without_urls = _URL.sub(" ", _BACKTICKED.sub(" ", text))
            found += [f"- path: {path}" for path in _PATH.findall(without_urls)]
    return [_cap(line) for line in found if line.split(": ", 1)[1].strip()]


def _from_conversation(conversation: str) -> dict[str, list[str]]:
    parts = _parts(conversation)
    return {
        DECISIONS: _decisions(parts),
        TODOS: _open_todos(parts),
        RULES: _rules(parts),
        PENDING: _pending(parts),
        IDENTIFIERS: _identifiers(parts),
    }


# -- summaries already written ---------------------------------------------------------------


def _sections(summary: str) -> dict[str, list[str]]:
    """The lines under each required heading. A section ends at the next heading, and at the
    sections compaction appends after the body (preserved turns, file lists, rules blocks)."""
    found: dict[str, list[str]] = {heading: [] for heading in HEADINGS}
    current: str | None = None
    for raw in summary.splitlines():
        line = raw.strip()
        if line in found:
            current = line
            continue
        if line.startswith(("#", "<", "**")):
            current = None
            continue
        if current is None or not line or line.lower() in _PLACEHOLDERS:
            continue
        found[current].append(
            _cap(line, MAX_PENDING_CHARS if current == PENDING else MAX_LINE_CHARS)
        )
    return found


def _chunks(partials: str) -> list[str]:
    labels = list(_CHUNK_LABEL.finditer(partials))
    if not labels:
        return [partials]
    return [
        partials[label.end() : labels[i + 1].start() if i + 1 < len(labels) else len(partials)]
        for i, label in enumerate(labels)
    ]


def _union(older_first: Iterable[list[str]], bound: int) -> list[str]:
    """Every line once, at its latest place, the latest `bound` kept."""
    lines = [line for group in older_first for line in group]
    seen: set[str] = set()
    latest_first = []
    for line in reversed(lines):
        if line not in seen:
            seen.add(line)
            latest_first.append(line)
    return list(reversed(latest_first[:bound]))


# -- assembly --------------------------------------------------------------------------------


def _render(sections: dict[str, list[str]]) -> str:
    blocks = []
    for heading in HEADINGS:
        body = sections[heading] or [_EMPTY[heading]]
        blocks.append("\n".join([heading, *body]))
    return "\n\n".join(blocks)


def _fit(sections: dict[str, list[str]]) -> str:
    """Drop the oldest line of the longest section until the summary fits."""
    text = _render(sections)
    while len(text) > MAX_SUMMARY_CHARS:
        heading = max(HEADINGS, key=lambda h: len(sections[h]))
        if len(sections[heading]) <= 1:
            return text[:MAX_SUMMARY_CHARS]  # unreachable with the line caps; a last guard
        sections[heading] = sections[heading][1:]
        text = _render(sections)
    return text


def summarize_prompt(prompt: str) -> str:
    """The deterministic summary of one summariser prompt (a summary or a merge prompt)."""
    earlier: list[dict[str, list[str]]] = []
    # Summaries come after the conversation in the prompt; cutting them off first keeps a
    # summary that quotes a tag from being read as conversation.
    for tag in ("partial-summaries", "previous-summary"):
        span = _span(prompt, tag)
        if span is not None:
            inside = _inside(prompt, span, tag)
            chunks = _chunks(inside) if tag == "partial-summaries" else [inside]
            earlier += [_sections(chunk) for chunk in chunks]
            prompt = prompt[: span[0]]
    span = _span(prompt, "conversation")
    latest = _from_conversation(_inside(prompt, span, "conversation")) if span else {}
    sections = {
        heading: _union(
            [*(group[heading] for group in earlier), latest.get(heading, [])], _BOUNDS[heading]
        )
        for heading in HEADINGS
    }
    return _fit(sections)
