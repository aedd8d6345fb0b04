"""The offline model's deterministic summariser, over the prompts compaction really sends
(`safeguard_summary.build_summary_prompt` / `build_merge_prompt`)."""

from __future__ import annotations

import pytest

from activities.context.safeguard_summary import (
    REQUIRED_HEADINGS,
    SUMMARIZER_SYSTEM_PROMPT,
    build_merge_prompt,
    build_summary_instructions,
    build_summary_prompt,
    has_required_headings,
)
from activities.providers.base import Finish, ModelRequest, StreamEvent, TextDelta
from activities.providers.offline import OfflineProvider
from activities.providers.offline_summary import MAX_SUMMARY_CHARS, summarize_prompt
from agentlane.transcript import Role, ToolCall, TranscriptEntry

INSTRUCTIONS = build_summary_instructions()


def entry(role: Role, text: str = "", n: int = 0, **fields: object) -> TranscriptEntry:
    return TranscriptEntry.model_validate(
        {"id": f"e{n}", "role": role, "ts": float(n), "text": text, **fields}
    )


def user(text: str, n: int = 0) -> TranscriptEntry:
    return entry(Role.USER, text, n)


def assistant(text: str, n: int = 0, calls: list[ToolCall] | None = None) -> TranscriptEntry:
    return entry(Role.ASSISTANT, text, n, tool_calls=calls or [])


def result(text: str, call_id: str, name: str, n: int = 0) -> TranscriptEntry:
    return entry(Role.TOOL, text, n, tool_call_id=call_id, tool_name=name)


def section(summary: str, heading: str) -> list[str]:
    lines = summary.splitlines()
    start = lines.index(heading) + 1
    body = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        if line:
            body.append(line)
    return body


CONVERSATION = [
    user("read notes.txt then write out/summary.md with done", 1),
    assistant("", 2, [ToolCall(id="c1", name="read", arguments={"path": "notes.txt"})]),
    result("hello", "c1", "read", 3),
    assistant("", 4, [ToolCall(id="c2", name="write", arguments={"path": "out/summary.md"})]),
    result("ok", "c2", "write", 5),
    assistant("Done. Wrote out/summary.md.\nMore detail here.", 6),
    user("You must never touch config.toml.\nAlways run `make test` before committing.", 7),
    assistant("Understood, I will keep to that.", 8),
    user("run `ls -la` then read src/app.py then say finished", 9),
    assistant(
        "Listing first.", 10, [ToolCall(id="c3", name="exec", arguments={"command": "ls -la"})]
    ),
    result("a b c", "c3", "exec", 11),
]


def test_five_headings_in_order_from_a_real_prompt() -> None:
    summary = summarize_prompt(build_summary_prompt(CONVERSATION, INSTRUCTIONS))
    assert has_required_headings(summary)
    assert [line for line in summary.splitlines() if line.startswith("## ")] == list(
        REQUIRED_HEADINGS
    )
    assert section(summary, "## Decisions") == [
        "- Done. Wrote out/summary.md.",
        "- Understood, I will keep to that.",
    ]
    # ls ran (one tool result after the last instruction); the read is still to do.
    assert section(summary, "## Open TODOs") == ["- read src/app.py"]
    assert section(summary, "## Constraints/Rules") == [
        "- You must never touch config.toml.",
        "- Always run `make test` before committing.",
    ]
    assert section(summary, "## Pending user asks") == [
        "- run `ls -la` then read src/app.py then say finished"
    ]
    identifiers = section(summary, "## Exact identifiers")
    for expected in (
        "- path: notes.txt",
        "- path: out/summary.md",
        "- path: config.toml",
        "- command: make test",
        "- command: ls -la",
        "- path: src/app.py",
    ):
        assert expected in identifiers
    assert summary == summarize_prompt(build_summary_prompt(CONVERSATION, INSTRUCTIONS))


def test_nothing_to_say_still_has_the_headings() -> None:
    summary = summarize_prompt(build_summary_prompt([], INSTRUCTIONS))
    assert has_required_headings(summary)
    assert section(summary, "## Decisions") == ["None."]
    assert section(summary, "## Open TODOs") == ["None."]
    assert section(summary, "## Constraints/Rules") == ["None recorded."]
    assert section(summary, "## Pending user asks") == ["None."]
    assert section(summary, "## Exact identifiers") == ["None captured."]
    assert has_required_headings(summarize_prompt("not a summariser prompt at all"))


def test_an_answered_instruction_leaves_no_todo() -> None:
    entries = [*CONVERSATION[:6]]
    summary = summarize_prompt(build_summary_prompt(entries, INSTRUCTIONS))
    assert section(summary, "## Open TODOs") == ["None."]


def test_pending_ask_is_the_last_user_message_capped() -> None:
    long_ask = "please " + "x" * 600
    summary = summarize_prompt(build_summary_prompt([user(long_ask)], INSTRUCTIONS))
    (line,) = section(summary, "## Pending user asks")
    assert len(line) <= 300 and line.endswith("...")
    assert line.startswith("- please xxx")


def test_previous_summary_is_folded_in() -> None:
    previous = summarize_prompt(build_summary_prompt(CONVERSATION[:8], INSTRUCTIONS))
    later = [user("say hello world", 20), assistant("hello world", 21)]
    summary = summarize_prompt(build_summary_prompt(later, INSTRUCTIONS, previous))
    assert has_required_headings(summary)
    assert section(summary, "## Decisions") == [
        "- Done. Wrote out/summary.md.",
        "- Understood, I will keep to that.",
        "- hello world",
    ]
    # Rules written before the previous compaction survive this one.
    assert "- You must never touch config.toml." in section(summary, "## Constraints/Rules")
    assert section(summary, "## Pending user asks") == ["- say hello world"]
    assert "- path: notes.txt" in section(summary, "## Exact identifiers")


def test_merge_prompt_keeps_the_union_of_partial_summaries() -> None:
    first = summarize_prompt(build_summary_prompt(CONVERSATION[:6], INSTRUCTIONS))
    second = summarize_prompt(build_summary_prompt(CONVERSATION[6:], INSTRUCTIONS))
    merged = summarize_prompt(build_merge_prompt([first, second], INSTRUCTIONS))
    assert has_required_headings(merged)
    assert section(merged, "## Decisions") == [
        "- Done. Wrote out/summary.md.",
        "- Understood, I will keep to that.",
    ]
    assert section(merged, "## Open TODOs") == ["- read src/app.py"]
    assert section(merged, "## Pending user asks") == [
        "- run `ls -la` then read src/app.py then say finished"
    ]
    assert "- path: notes.txt" in section(merged, "## Exact identifiers")
    assert "- command: ls -la" in section(merged, "## Exact identifiers")
    # No heading line is taken for content, and placeholders give way to real lines.
    assert "None." not in section(merged, "## Decisions")


@pytest.mark.parametrize("lines", [5, 60])
def test_summary_stays_within_its_budget(lines: int) -> None:
    entries: list[TranscriptEntry] = []
    for i in range(lines):
        entries += [
            user(f"You must keep rule {i} " + "r" * 200 + f" and edit file_{i}.py", 2 * i),
            assistant(f"Answer {i} " + "a" * 300, 2 * i + 1),
        ]
    summary = summarize_prompt(build_summary_prompt(entries, INSTRUCTIONS))
    assert len(summary) <= MAX_SUMMARY_CHARS
    assert has_required_headings(summary)
    # The latest survive the cut.
    assert section(summary, "## Decisions")[-1].startswith(f"- Answer {lines - 1} ")
    merged = summarize_prompt(build_merge_prompt([summary, summary, summary], INSTRUCTIONS))
    assert len(merged) <= MAX_SUMMARY_CHARS and has_required_headings(merged)


def test_identifiers_from_raw_arguments_and_urls() -> None:
    entries = [
        user("fetch https://example.com/a?b=1 and look at e.g. the docs", 1),
        assistant(
            "",
            2,
            [ToolCall(id="c", name="exec", raw_arguments='{"command": "echo \\"hi\\""}')],
        ),
    ]
    identifiers = section(
        summarize_prompt(build_summary_prompt(entries, INSTRUCTIONS)), "## Exact identifiers"
    )
    assert identifiers == ["- url: https://example.com/a?b=1", '- command: echo "hi"']


async def _stream(request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in OfflineProvider(0, 0).stream(request, None)]


async def test_offline_provider_streams_the_summary_for_a_summary_request() -> None:
    prompt = build_summary_prompt(CONVERSATION, INSTRUCTIONS)
    request = ModelRequest(
        model="planner",
        system=SUMMARIZER_SYSTEM_PROMPT,
        entries=[user(prompt)],
        tools=[],
        purpose="summary",
    )
    events = await _stream(request)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 10, "token by token, like any text"
    text = "".join(d.text for d in deltas)
    assert text == summarize_prompt(prompt)
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.stop_reason == "end_turn"
    assert finish.usage.input == (len(SUMMARIZER_SYSTEM_PROMPT) + len(prompt)) // 4
    assert finish.usage.output == len(text) // 4
    # The same prompt as a chat request is planned, not summarised.
    chat = await _stream(
        ModelRequest(model="planner", system="", entries=[user("say hi")], tools=[])
    )
    assert "".join(e.text for e in chat if isinstance(e, TextDelta)) == "hi"
