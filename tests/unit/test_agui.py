"""The AG-UI vocabulary of a session's events: valid events, in a valid order, and no text twice
(retried model attempts, re-published and overlapping deltas, message resets)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from agentlane.events import AgentEvent, EventKind
from clients.gateway.agui import MESSAGE_RESET, AguiTranslator

KEY = "web:alice"
R1 = f"session:{KEY}:run:1"
R2 = f"session:{KEY}:run:2"
M0 = f"{R1}:t0"
M1 = f"{R1}:t1"
M2 = f"{R2}:t0"
EVENT = TypeAdapter(Event)


def ev(kind: EventKind, run_id: str = R1, event_id: str | None = None, **fields: Any) -> AgentEvent:
    """An event shaped like the ones the activities publish (ids included)."""
    mid = fields.get("message_id")
    if event_id is None:
        if kind in (EventKind.TEXT_DELTA, EventKind.REASONING_DELTA):
            suffix = "d" if kind == EventKind.TEXT_DELTA else "r"
            event_id = f"{mid}/a{fields.get('attempt', 1)}/{suffix}/{fields['index']}"
        elif kind == EventKind.MESSAGE_RESET:
            event_id = f"{mid}/message_reset/a{fields.get('attempt', 1)}"
        elif kind in (EventKind.MESSAGE_START, EventKind.MESSAGE_END):
            event_id = f"{mid}/{kind.value}"
        elif kind.value.startswith("tool_execution"):
            event_id = f"{fields['tool_call_id']}/{kind.value}"
        else:
            turn = fields.get("turn_index")
            event_id = f"{run_id}/{kind.value}" + ("" if turn is None else f"/{turn}")
    return AgentEvent(
        kind=kind, event_id=event_id, session_key=KEY, run_id=run_id, ts=1_700_000_000.5, **fields
    )


def delta(mid: str, index: int, text: str, attempt: int = 1) -> AgentEvent:
    run = R2 if mid == M2 else R1
    return ev(EventKind.TEXT_DELTA, run, message_id=mid, index=index, text=text, attempt=attempt)


def recorded() -> list[AgentEvent]:
    """A run with text and a tool call; a model call retried three times (a continuation, a
    reset that repeats the same text, a reset that diverges); warnings and friends; an error
    that fails the run; a session reset between runs; a second run that is aborted."""
    read = "call_read_1"
    return [
        ev(EventKind.AGENT_START, data={"model": "offline/planner", "tools": ["read"]}),
        ev(EventKind.TURN_START, turn_index=0),
        ev(EventKind.MESSAGE_START, message_id=M0, data={"model": "offline/planner"}),
        delta(M0, 0, "I will read "),
        delta(M0, 12, "notes.txt."),
        ev(EventKind.MESSAGE_END, message_id=M0, stop_reason="tool_use"),
        ev(
            EventKind.TOOL_EXECUTION_START,
            message_id=M0,
            tool_call_id=read,
            tool_name="read",
            data={"input": {"path": "notes.txt"}},
        ),
        # The tool activity was retried: it publishes its start again (same event id).
        ev(
            EventKind.TOOL_EXECUTION_START,
            message_id=M0,
            tool_call_id=read,
            tool_name="read",
            attempt=2,
            data={"input": {"path": "notes.txt"}},
        ),
        ev(
            EventKind.TOOL_EXECUTION_END,
            message_id=M0,
            tool_call_id=read,
            tool_name="read",
            success=True,
            summary="3 lines",
            text="alpha line\nbeta line\ngamma\n",
            duration_ms=2,
        ),
        ev(EventKind.TURN_END, turn_index=0, has_tool_calls=True),
        ev(EventKind.TURN_START, turn_index=1),
        ev(EventKind.MESSAGE_START, message_id=M1),
        ev(EventKind.REASONING_DELTA, message_id=M1, index=0, text="The file has "),
        ev(EventKind.REASONING_DELTA, message_id=M1, index=13, text="three lines."),
        delta(M1, 0, "Hello wor"),
        # Attempt 2 (the worker died): it read back "Hello wor" and continues after it; its
        # reasoning starts again from 0 with the same words.
        ev(EventKind.MESSAGE_START, message_id=M1, attempt=2),
        ev(EventKind.REASONING_DELTA, message_id=M1, index=0, text="The file has", attempt=2),
        ev(EventKind.REASONING_DELTA, message_id=M1, index=12, text=" three lines.", attempt=2),
        delta(M1, 9, "ld, all", attempt=2),
        # A delta that overlaps what was sent (re-published with more text).
        delta(M1, 5, " world, all fine", attempt=2),
        delta(M1, 5, " world, all fine", attempt=2),  # ... and again, verbatim
        # Attempt 3 could not read back: message_reset, then the same text from the start.
        ev(EventKind.MESSAGE_START, message_id=M1, attempt=3),
        ev(EventKind.MESSAGE_RESET, message_id=M1, attempt=3),
        delta(M1, 0, "Hello", attempt=3),
        delta(M1, 5, " world, all fine. Done.", attempt=3),
        # Attempt 4 diverges after a reset: the client must drop what it has.
        ev(EventKind.MESSAGE_RESET, message_id=M1, attempt=4),
        delta(M1, 0, "Goodbye.", attempt=4),
        ev(
            EventKind.BLOCK_REPLY,
            event_id=f"{M1}/block/0",
            message_id=M1,
            index=0,
            text="Goodbye.",
            attempt=4,
        ),
        ev(EventKind.MESSAGE_END, message_id=M1, attempt=4, stop_reason="end_turn"),
        ev(EventKind.WARNING, text="small context window", data={"code": "low", "n": 1}),
        ev(EventKind.TOOL_LOOP, text="read repeated 10 times", data={"level": "warning"}),
        ev(EventKind.COMPACTION_START, data={"trigger": "overflow", "attempt": 1}),
        ev(EventKind.COMPACTION_END, data={"outcome": "compacted", "tokens_after": 900}),
        ev(EventKind.ERROR, text="the model failed: overloaded", data={"code": "model_error"}),
        ev(
            EventKind.AGENT_END,
            termination_reason="error",
            data={"status": "error", "total_turns": 2, "duration_ms": 40},
        ),
        ev(
            EventKind.SESSION_RESET,
            run_id="",
            event_id="e-9/session_reset",
            text="session reset (user)",
            data={"entry_id": "e-9", "queued_kept": 0},
        ),
        ev(EventKind.AGENT_START, R2, data={"model": "offline/planner"}),
        ev(EventKind.TURN_START, R2, turn_index=0),
        ev(EventKind.MESSAGE_START, R2, message_id=M2),
        delta(M2, 0, "1, 2, 3"),
        ev(EventKind.MESSAGE_END, R2, message_id=M2, stop_reason="aborted"),
        ev(EventKind.TURN_END, R2, turn_index=0, has_tool_calls=False),
        ev(
            EventKind.AGENT_END,
            R2,
            termination_reason="abort_signal",
            data={"status": "aborted", "total_turns": 1},
        ),
    ]


def translate_all(events: list[AgentEvent]) -> list[dict[str, Any]]:
    translator = AguiTranslator()
    out: list[dict[str, Any]] = []
    for offset, event in enumerate(events):
        out.extend(translator.translate(offset, event))
    return out


def validate(dicts: list[dict[str, Any]]) -> None:
    """Each dict is an AG-UI event by the package's models: known type, every required field,
    no field the model does not declare, camelCase, and it serialises back to itself."""
    for d in dicts:
        model = EVENT.validate_python(d)
        assert type(model).__name__.upper().startswith(d["type"].replace("_", "")), d
        assert not model.model_extra, f"undeclared fields {model.model_extra} in {d}"
        assert model.model_dump(mode="json", by_alias=True, exclude_none=True) == d
        assert all("_" not in k for k in d), f"not camelCase: {d}"


def check_order(dicts: list[dict[str, Any]]) -> None:
    """The protocol's ordering rules (spec: lifecycle, streaming pattern, reasoning, steps)."""
    active: str | None = None
    finished = False
    errored = False
    open_items: dict[str, set[str]] = {"text": set(), "tool": set(), "rmsg": set(), "span": set()}
    steps: set[str] = set()
    families = {
        "TEXT_MESSAGE": ("text", "messageId"),
        "TOOL_CALL": ("tool", "toolCallId"),
        "REASONING_MESSAGE": ("rmsg", "messageId"),
    }
    for i, d in enumerate(dicts):
        t = d["type"]
        if t == "RUN_STARTED":
            assert active is None, f"{i}: nested RUN_STARTED"
            active, finished, errored = d["runId"], False, False
            continue
        if t == "RUN_ERROR":
            assert not errored or active is not None, f"{i}: RUN_ERROR after RUN_ERROR"
            active, errored = None, True
            for items in open_items.values():
                items.clear()
            steps.clear()
            continue
        assert active is not None, f"{i}: {t} outside a run (finished={finished})"
        if t == "RUN_FINISHED":
            assert d["runId"] == active
            assert not any(open_items.values()) and not steps, f"{i}: open at RUN_FINISHED"
            active, finished = None, True
            continue
        if t in ("STEP_STARTED", "STEP_FINISHED"):
            name = d["stepName"]
            assert (name in steps) == (t == "STEP_FINISHED"), f"{i}: step {name}"
            (steps.discard if t == "STEP_FINISHED" else steps.add)(name)
            continue
        if t in ("REASONING_START", "REASONING_END"):
            span = d["messageId"]
            assert (span in open_items["span"]) == (t == "REASONING_END"), f"{i}: span"
            getattr(open_items["span"], "discard" if t == "REASONING_END" else "add")(span)
            continue
        for prefix, (family, key) in families.items():
            if t.startswith(prefix + "_") and t != "TOOL_CALL_RESULT":
                item = d[key]
                if t.endswith("_START"):
                    assert item not in open_items[family], f"{i}: reopening open {item}"
                    open_items[family].add(item)
                else:
                    assert item in open_items[family], f"{i}: {t} for {item} not open"
                    if t.endswith("_END"):
                        open_items[family].discard(item)
    assert active is None, "the last run was not closed"


def visible_text(dicts: list[dict[str, Any]], honour_resets: bool) -> dict[str, str]:
    """What a client shows per message: a plain AG-UI client, or one that honours our CUSTOM
    message_reset."""
    texts: dict[str, str] = {}
    for d in dicts:
        if d["type"] == "TEXT_MESSAGE_START":
            texts.setdefault(d["messageId"], "")
        elif d["type"] == "TEXT_MESSAGE_CONTENT":
            texts[d["messageId"]] += d["delta"]
        elif d["type"] == "CUSTOM" and d["name"] == MESSAGE_RESET and honour_resets:
            texts.pop(d["value"]["messageId"], None)
    return texts


def test_recorded_run_translates_to_valid_agui_without_duplicate_text() -> None:
    out = translate_all(recorded())
    validate(out)
    check_order(out)
    types = [d["type"] for d in out]
    assert types[0] == "RUN_STARTED" and out[0]["threadId"] == KEY and out[0]["runId"] == R1
    assert types[1] == "STATE_SNAPSHOT" and out[1]["snapshot"]["model"] == "offline/planner"

    # Text: each message once, never a character twice.
    plain = visible_text(out, honour_resets=False)
    assert plain == {
        M0: "I will read notes.txt.",
        M1: "Hello world, all fine. Done.",
        f"{M1}~2": "Goodbye.",
        M2: "1, 2, 3",
    }
    assert visible_text(out, honour_resets=True) == {
        M0: "I will read notes.txt.",
        f"{M1}~2": "Goodbye.",
        M2: "1, 2, 3",
    }
    reset = next(d for d in out if d["type"] == "CUSTOM" and d["name"] == MESSAGE_RESET)
    assert reset["value"] == {
        "messageId": M1,
        "replacedBy": f"{M1}~2",
        "attempt": 4,
        "reasoning": False,
    }
    # The identical retry (attempt 3) sent only the new suffix.
    m1 = [d["delta"] for d in out if d.get("messageId") == M1 and "delta" in d]
    assert m1 == ["Hello wor", "ld, all", " fine", ". Done."]

    # Reasoning: a span, one message, the retried attempt's repeat not sent again.
    reasoning = [d for d in out if d["type"].startswith("REASONING")]
    assert [d["type"] for d in reasoning] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert "".join(d.get("delta", "") for d in reasoning) == "The file has three lines."

    # The tool call: once, though its start was published twice; then its result.
    tool = [d for d in out if d["type"].startswith("TOOL_CALL")]
    assert [d["type"] for d in tool] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert tool[0]["toolCallName"] == "read" and tool[0]["parentMessageId"] == M0
    assert tool[1]["delta"] == '{"path": "notes.txt"}'
    assert tool[3]["content"] == "alpha line\nbeta line\ngamma\n"
    assert tool[3]["metadata"] == {"summary": "3 lines", "success": True, "durationMs": 2}

    # Turns are steps; the rest is CUSTOM with our data.
    assert [d["stepName"] for d in out if d["type"] == "STEP_STARTED"] == [
        "turn 0",
        "turn 1",
        "turn 0",
    ]
    customs = {d["name"]: d["value"] for d in out if d["type"] == "CUSTOM"}
    assert customs["warning"] == {"code": "low", "n": 1, "text": "small context window"}
    assert customs["tool_loop"]["text"] == "read repeated 10 times"
    assert customs["compaction_end"]["tokens_after"] == 900
    assert customs["block_reply"] == {"messageId": f"{M1}~2", "index": 0, "text": "Goodbye."}
    assert customs["session_reset"]["entry_id"] == "e-9"
    phases = [
        op["value"]
        for d in out
        if d["type"] == "STATE_DELTA"
        for op in d["delta"]
        if op["path"] == "/phase"
    ]
    assert phases == ["compacting", "running", "idle", "idle"]  # the failed run, the aborted one

    # The failed run: RUN_ERROR from the error event; its agent_end adds nothing after it.
    err = out.index(next(d for d in out if d["type"] == "RUN_ERROR"))
    assert out[err]["message"] == "the model failed: overloaded"
    assert out[err]["code"] == "model_error"
    assert out[err + 1]["type"] == "RUN_STARTED"  # the session reset's own run
    reset_offset = next(i for i, e in enumerate(recorded()) if e.kind == EventKind.SESSION_RESET)
    assert out[err + 1]["runId"] == f"{KEY}:event:{reset_offset}"
    assert [d["type"] for d in out[err + 1 : err + 4]] == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    # The aborted run is finished as cancelled, not as success nor as an error.
    assert out[-1]["type"] == "RUN_FINISHED" and out[-1]["runId"] == R2
    assert out[-1]["outcome"] == {"type": "cancelled"}
    assert out[-1]["metadata"]["terminationReason"] == "abort_signal"
    assert all(d.get("timestamp") in (None, 1_700_000_000_500) for d in out)


def test_successful_run_closes_what_it_opened() -> None:
    """A run whose last message never got its message_end (a crash between the two) still
    closes the message, its reasoning and its step before RUN_FINISHED."""
    events = [
        ev(EventKind.AGENT_START),
        ev(EventKind.TURN_START, turn_index=0),
        ev(EventKind.REASONING_DELTA, message_id=M0, index=0, text="hm"),
        delta(M0, 0, "done"),
        ev(EventKind.AGENT_END, termination_reason="no_tool_calls", data={"status": "success"}),
    ]
    out = translate_all(events)
    validate(out)
    check_order(out)
    assert out[-1]["type"] == "RUN_FINISHED" and out[-1]["outcome"] == {"type": "success"}
    assert {"TEXT_MESSAGE_END", "REASONING_MESSAGE_END", "REASONING_END", "STEP_FINISHED"} <= {
        d["type"] for d in out
    }


def test_failed_run_without_error_event_is_run_error() -> None:
    events = [
        ev(EventKind.AGENT_START),
        ev(EventKind.AGENT_END, termination_reason="max_turns", data={"status": "error"}),
        ev(EventKind.ERROR, text="late"),  # a late failure of a closed, failed run: nothing
    ]
    out = translate_all(events)
    validate(out)
    check_order(out)
    assert [d["type"] for d in out] == ["RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA", "RUN_ERROR"]
    assert out[-1]["code"] == "max_turns"


def test_stream_read_from_the_middle_is_still_valid() -> None:
    """A subscriber that starts at an offset in the middle of a run: the run and the message
    are opened for it, and only the characters it is sent appear (no placeholder)."""
    events = recorded()
    start = next(i for i, e in enumerate(events) if e.index == 9)  # mid-message M1
    translator = AguiTranslator()
    out: list[dict[str, Any]] = []
    for offset, event in enumerate(events[start:], start):
        out.extend(translator.translate(offset, event))
    validate(out)
    check_order(out)
    assert out[0]["type"] == "RUN_STARTED" and out[0]["runId"] == R1
    assert "\0" not in "".join(d["delta"] for d in out if d["type"].endswith("_CONTENT"))
    assert visible_text(out, honour_resets=False)[M1] == "ld, all fine. Done."


def test_primed_translator_resumes_exactly_where_the_connection_stopped() -> None:
    events = recorded()
    whole = AguiTranslator()
    cut = 20
    for offset, event in enumerate(events[:cut]):
        whole.translate(offset, event)
    resumed = AguiTranslator()
    for offset, event in enumerate(events[:cut]):
        resumed.prime(offset, event)
    for offset, event in enumerate(events[cut:], cut):
        assert resumed.translate(offset, event) == whole.translate(offset, event)


@pytest.mark.parametrize("seed", range(25))
def test_random_retries_never_repeat_text(seed: int) -> None:
    """Attempts that repeat the same reply cut into different deltas, from where the previous
    one stopped or (after a reset) from the start, with re-published deltas in between: the
    client gets the reply exactly once."""
    rnd = random.Random(seed)
    reply = " ".join(rnd.choice(["alpha", "beta", "gamma", "δέλτα", "😀"]) for _ in range(40))
    events = [ev(EventKind.AGENT_START)]
    shown = 0
    for attempt in range(1, rnd.randint(2, 5) + 1):
        events.append(ev(EventKind.MESSAGE_START, message_id=M0, attempt=attempt))
        start = shown
        if attempt > 1 and rnd.random() < 0.5:
            events.append(ev(EventKind.MESSAGE_RESET, message_id=M0, attempt=attempt))
            start = 0
        stop = len(reply) if attempt == 5 else rnd.randint(start, len(reply))
        pos = start
        while pos < stop:
            end = min(stop, pos + rnd.randint(1, 12))
            events.append(delta(M0, pos, reply[pos:end], attempt))
            if rnd.random() < 0.3:  # re-published, or overlapping from further back
                back = rnd.randint(0, pos)
                events.append(delta(M0, back, reply[back:end], attempt))
            pos = end
        shown = max(shown, stop)
    tail = shown
    events.append(delta(M0, tail, reply[tail:], 9))
    events.append(ev(EventKind.MESSAGE_END, message_id=M0, attempt=9))
    events.append(ev(EventKind.AGENT_END, termination_reason="no_tool_calls"))
    out = translate_all(events)
    validate(out)
    check_order(out)
    assert visible_text(out, honour_resets=False) == {M0: reply}


def test_tool_output_and_a_reset_that_leaves_no_text() -> None:
    """exec output previews arrive once each (a retried exec repeats them); a reset whose new
    attempt shows no text (it only calls tools) withdraws the abandoned text."""
    call = "call_exec_1"
    tool = {"tool_call_id": call, "tool_name": "exec", "message_id": M0}
    events = [
        ev(EventKind.AGENT_START),
        delta(M0, 0, "Let me"),
        ev(EventKind.MESSAGE_RESET, message_id=M0, attempt=2),
        ev(EventKind.MESSAGE_END, message_id=M0, attempt=2, stop_reason="tool_use"),
        ev(EventKind.TOOL_EXECUTION_START, data={"input": {"command": "ls"}}, **tool),
        ev(EventKind.TOOL_EXECUTION_UPDATE, event_id=f"{call}/u/0", index=0, text="a\n", **tool),
        ev(EventKind.TOOL_EXECUTION_UPDATE, event_id=f"{call}/u/0", index=0, text="a\nb\n", **tool),
        ev(EventKind.TOOL_EXECUTION_UPDATE, event_id=f"{call}/u/4", index=4, text="c\n", **tool),
        ev(EventKind.TOOL_EXECUTION_END, success=False, summary="exit 1", **tool),
        ev(EventKind.AGENT_END, termination_reason="no_tool_calls", data={"status": "success"}),
    ]
    out = translate_all(events)
    validate(out)
    check_order(out)
    updates = [d["value"] for d in out if d["type"] == "CUSTOM" and d["name"] != MESSAGE_RESET]
    assert updates == [
        {"toolCallId": call, "index": 0, "text": "a\n"},
        {"toolCallId": call, "index": 2, "text": "b\n"},
        {"toolCallId": call, "index": 4, "text": "c\n"},
    ]
    reset = next(d["value"] for d in out if d["type"] == "CUSTOM" and d["name"] == MESSAGE_RESET)
    assert reset == {"messageId": M0, "replacedBy": None, "attempt": 2, "reasoning": False}
    assert visible_text(out, honour_resets=True) == {}
    result = next(d for d in out if d["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "exit 1" and result["metadata"]["success"] is False
