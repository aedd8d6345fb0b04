"""The offline model: clause splitting, plans for every instruction form, and the provider's
stream over a hand-built transcript (one tool call per model call, deterministic ids, a final
summary, HELP for what it does not understand)."""

from __future__ import annotations

import json

import pytest

from activities.providers.base import (
    Finish,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallStart,
)
from activities.providers.offline import HELP, OfflineProvider
from activities.providers.offline_planner import (
    PlannedText,
    PlannedTool,
    make_plan,
    progress_since_last_user,
    split_clauses,
    summarize_text,
)
from agentlane.transcript import Role, ToolCall, TranscriptEntry

# --- split_clauses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        ("read a.txt then read b.txt", ["read a.txt", "read b.txt"]),
        ("read a.txt; read b.txt", ["read a.txt", "read b.txt"]),
        ("read a.txt\nread b.txt", ["read a.txt", "read b.txt"]),
        ("Read a.txt\nTHEN say done.", ["Read a.txt", "say done"]),
        ("say a;;; say b", ["say a", "say b"]),
        ("then say hi then", ["say hi"]),
        ("say authentic thenceforth", ["say authentic thenceforth"]),
        ('write b.txt with "x; then y"', ['write b.txt with "x; then y"']),
        ("say 'a then b'; say c", ["say 'a then b'", "say c"]),
        ("run `echo a; echo b` then say ok", ["run `echo a; echo b`", "say ok"]),
        ("say it's fine; say don't", ["say it's fine", "say don't"]),
        ("say hello. then say bye.", ["say hello", "say bye"]),
        ("", []),
        ("  ;\n then ", []),
    ],
)
def test_split_clauses(text: str, clauses: list[str]) -> None:
    assert split_clauses(text) == clauses


# --- make_plan -----------------------------------------------------------------------------------


def tool(name: str, **arguments: object) -> PlannedTool:
    return PlannedTool(name, dict(arguments))


@pytest.mark.parametrize(
    ("instruction", "step"),
    [
        ("read notes.md", tool("read", path="notes.md")),
        ("open the file notes.md", tool("read", path="notes.md")),
        ("show `notes.md`", tool("read", path="notes.md")),
        ("write out.txt with hello world", tool("write", path="out.txt", content="hello world")),
        ('write out.txt with "quoted"', tool("write", path="out.txt", content="quoted")),
        ("create out.txt containing hi", tool("write", path="out.txt", content="hi")),
        ('write "hello then bye" to f.txt', tool("write", path="f.txt", content="hello then bye")),
        ("create 'x' into f.txt", tool("write", path="f.txt", content="x")),
        (
            'edit f.txt replacing "draft" with "final"',
            tool("edit", path="f.txt", old_string="draft", new_string="final"),
        ),
        (
            "edit f.txt replace old text with new text",
            tool("edit", path="f.txt", old_string="old text", new_string="new text"),
        ),
        (
            'edit f.txt replacing "x with y" with "z"',
            tool("edit", path="f.txt", old_string="x with y", new_string="z"),
        ),
        ("run `ls -la`", tool("exec", command="ls -la")),
        ("exec echo hi", tool("exec", command="echo hi")),
        ("execute `make test`", tool("exec", command="make test")),
        ("sleep 2", tool("exec", command="sleep 2")),
        ("Sleep 0.5 seconds", tool("exec", command="sleep 0.5")),
        ("count to 5", PlannedText("1 2 3 4 5")),
        ("count slowly to 3", PlannedText("1 2 3", slow=True)),
        ("count to 3 slowly", PlannedText("1 2 3", slow=True)),
        ("say hello there", PlannedText("hello there")),
        ('say "a; b"', PlannedText("a; b")),
    ],
)
def test_plan_for_each_instruction_form(instruction: str, step: PlannedTool | PlannedText) -> None:
    plan = make_plan(instruction)
    assert plan.steps == [step]
    assert plan.derived_writes == {}


def test_summarize_plans_a_read_then_a_derived_write() -> None:
    plan = make_plan("say start; summarise a.md into b.md")
    assert plan.steps == [
        PlannedText("start"),
        tool("read", path="a.md"),
        tool("write", path="b.md", content=""),
    ]
    assert plan.derived_writes == {2: (1, "b.md")}


def test_plan_keeps_clause_order_and_drops_unknown_clauses() -> None:
    plan = make_plan("read a.txt then dance wildly then say done")
    assert plan.steps == [tool("read", path="a.txt"), PlannedText("done")]


def test_count_is_capped() -> None:
    (step,) = make_plan("count to 999999").steps
    assert isinstance(step, PlannedText)
    assert step.text.split()[-1] == "100000"


def test_unknown_instruction_has_no_steps() -> None:
    assert make_plan("what is the meaning of life?").steps == []
    assert make_plan("").steps == []


def test_summarize_text() -> None:
    text = "Title here\n\nsecond line words\n… [3 more lines; use offset=2]"
    assert summarize_text("a.md", text) == (
        "Summary of a.md: 2 non-empty lines, 5 words. First line: Title here\n"
    )
    assert summarize_text("e.md", "") == (
        "Summary of e.md: 0 non-empty lines, 0 words. First line: (empty)\n"
    )


def test_progress_since_last_user() -> None:
    entries = [
        entry("u1", Role.USER, "read a"),
        entry("a1", Role.ASSISTANT),
        entry("r1", Role.TOOL, "x", call_id="c1"),
        entry("u2", Role.USER, "say hi"),
        entry("a2", Role.ASSISTANT),
    ]
    progress = progress_since_last_user(entries)
    assert progress.instruction == "say hi"
    assert progress.tool_results == []
    assert progress.assistant_turns == 2
    assert progress_since_last_user([]).instruction == ""


# --- OfflineProvider.stream ----------------------------------------------------------------------


def entry(
    eid: str,
    role: Role,
    text: str = "",
    *,
    call_id: str | None = None,
    calls: list[ToolCall] | None = None,
    is_error: bool = False,
    tool_name: str | None = None,
) -> TranscriptEntry:
    return TranscriptEntry(
        id=eid,
        role=role,
        ts=0.0,
        text=text,
        tool_call_id=call_id,
        tool_calls=calls or [],
        is_error=is_error,
        tool_name=tool_name,
    )


def request(entries: list[TranscriptEntry], thinking: str = "off") -> ModelRequest:
    return ModelRequest(
        model="planner", system="system prompt", entries=entries, tools=[], thinking=thinking
    )


async def call(entries: list[TranscriptEntry], thinking: str = "off") -> list[StreamEvent]:
    provider = OfflineProvider(first_token_delay=0, token_delay=0)
    return [e async for e in provider.stream(request(entries, thinking), None)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def tool_calls(events: list[StreamEvent]) -> list[ToolCallComplete]:
    return [e for e in events if isinstance(e, ToolCallComplete)]


async def run_to_end(
    instruction: str, results: dict[str, str] | None = None
) -> tuple[list[TranscriptEntry], list[list[StreamEvent]]]:
    """Drive the model like the run workflow does, answering each tool call from `results`."""
    entries = [entry("u1", Role.USER, instruction)]
    calls: list[list[StreamEvent]] = []
    for n in range(20):
        events = await call(entries)
        calls.append(events)
        made = tool_calls(events)
        entries.append(
            entry(
                f"a{n}",
                Role.ASSISTANT,
                text_of(events),
                calls=[
                    ToolCall(id=c.id, name=c.name, arguments=json.loads(c.arguments_json))
                    for c in made
                ],
            )
        )
        if not made:
            return entries, calls
        for c in made:
            answer = (results or {}).get(c.name, f"{c.name} result")
            entries.append(
                entry(f"{c.id}:result", Role.TOOL, answer, call_id=c.id, tool_name=c.name)
            )
    raise AssertionError("the offline model never finished")


async def test_one_tool_call_per_model_call_then_a_summary() -> None:
    entries, calls = await run_to_end(
        "say starting; read a.txt; say halfway; run `echo hi`; say finished"
    )
    assert len(calls) == 3
    assert [len(tool_calls(events)) for events in calls] == [1, 1, 0]
    first, second, last = calls
    assert text_of(first) == "starting"
    (read,) = tool_calls(first)
    assert (read.name, json.loads(read.arguments_json)) == ("read", {"path": "a.txt"})
    assert text_of(second) == "halfway"
    (ex,) = tool_calls(second)
    assert (ex.name, json.loads(ex.arguments_json)) == ("exec", {"command": "echo hi"})
    assert text_of(last) == (
        "finished\n\nDone. Here is what I did:\n- read: ok: read result\n- exec: ok: exec result"
    )
    assert isinstance(first[-1], Finish) and first[-1].stop_reason == "tool_use"
    assert isinstance(last[-1], Finish) and last[-1].stop_reason == "end_turn"


async def test_tool_call_start_precedes_complete_with_the_same_id() -> None:
    events = await call([entry("u1", Role.USER, "read a.txt")])
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    completes = tool_calls(events)
    assert len(starts) == len(completes) == 1
    assert (starts[0].id, starts[0].name) == (completes[0].id, completes[0].name)
    assert events.index(starts[0]) < events.index(completes[0])


async def test_tool_call_ids_are_deterministic_and_unique() -> None:
    a_entries, a_calls = await run_to_end("read a.txt; read b.txt; read c.txt")
    b_entries, b_calls = await run_to_end("read a.txt; read b.txt; read c.txt")
    ids = [c.id for events in a_calls for c in tool_calls(events)]
    assert ids == [c.id for events in b_calls for c in tool_calls(events)]
    assert len(set(ids)) == 3
    # Asking again over the same transcript (a retried attempt) gives the same call.
    prefix = a_entries[:3]  # user, assistant, tool result
    again = [tool_calls(await call(prefix))[0] for _ in range(2)]
    assert again[0] == again[1]
    assert again[0].id == ids[1]
    # Ids stay unique across user turns in one transcript.
    more = [*a_entries, entry("u2", Role.USER, "read d.txt")]
    assert tool_calls(await call(more))[0].id not in ids


async def test_failed_tool_is_reported_as_failed() -> None:
    entries = [
        entry("u1", Role.USER, "read missing.txt"),
        entry("a1", Role.ASSISTANT, calls=[ToolCall(id="c1", name="read")]),
        entry(
            "r1",
            Role.TOOL,
            "File not found: missing.txt\nmore",
            call_id="c1",
            tool_name="read",
            is_error=True,
        ),
    ]
    events = await call(entries)
    assert tool_calls(events) == []
    assert text_of(events) == (
        "Done. Here is what I did:\n- read: failed: File not found: missing.txt"
    )


async def test_summarize_writes_a_summary_of_what_was_read() -> None:
    entries, calls = await run_to_end(
        "summarize notes.md into summary.md", {"read": "Meeting notes\nalpha beta\n"}
    )
    (read,) = tool_calls(calls[0])
    assert json.loads(read.arguments_json) == {"path": "notes.md"}
    (write,) = tool_calls(calls[1])
    assert write.name == "write"
    assert json.loads(write.arguments_json) == {
        "path": "summary.md",
        "content": "Summary of notes.md: 2 non-empty lines, 4 words. First line: Meeting notes\n",
    }
    assert len(calls) == 3
    assert text_of(calls[2]).startswith("Done. Here is what I did:")


async def test_help_for_an_instruction_it_does_not_understand() -> None:
    events = await call([entry("u1", Role.USER, "please book me a flight to Oslo")])
    assert text_of(events) == HELP
    assert tool_calls(events) == []
    assert isinstance(events[-1], Finish)
    assert events[-1].stop_reason == "end_turn"


async def test_text_is_streamed_in_several_tokens() -> None:
    events = await call([entry("u1", Role.USER, "count to 20")])
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 20
    assert "".join(d.text for d in deltas) == " ".join(str(i) for i in range(1, 21))
    assert all(d.text for d in deltas)


async def test_finish_carries_usage() -> None:
    events = await call([entry("u1", Role.USER, "say " + "word " * 40)])
    finish = events[-1]
    assert isinstance(finish, Finish)
    assert [e for e in events if isinstance(e, Finish)] == [finish]
    text = text_of(events)
    prompt_chars = len("system prompt") + len("say " + "word " * 40)
    assert finish.usage.input == prompt_chars // 4
    assert finish.usage.output == len(text) // 4
    assert finish.usage.output > 0


async def test_thinking_adds_reasoning_before_text() -> None:
    events = await call([entry("u1", Role.USER, "read a.txt; read b.txt")], thinking="low")
    assert isinstance(events[0], ReasoningDelta)
    assert events[0].text == "Plan has 2 steps; 0 of 2 tools done."
    off = await call([entry("u1", Role.USER, "read a.txt")])
    assert not any(isinstance(e, ReasoningDelta) for e in off)


async def test_only_the_latest_user_message_counts() -> None:
    entries = [
        entry("u1", Role.USER, "read a.txt"),
        entry("a1", Role.ASSISTANT, calls=[ToolCall(id="c1", name="read")]),
        entry("r1", Role.TOOL, "a", call_id="c1", tool_name="read"),
        entry("a2", Role.ASSISTANT, "Done."),
        entry("u2", Role.USER, "say bye"),
    ]
    events = await call(entries)
    assert text_of(events) == "bye"
    assert tool_calls(events) == []
