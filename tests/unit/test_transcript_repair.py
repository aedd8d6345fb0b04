"""Transcript repair and the tolerant loader (SPEC §12.1, §12.2, T72 of §18.12, §19
"Transcript corruption")."""

from __future__ import annotations

import random

import pytest

from activities.context.transcript_repair import (
    NO_SYNTHESIS_STOP_REASONS,
    SYNTHETIC_RESULT_TEXT,
    ErroredTurnResults,
    is_valid_tool_name,
    repair_tool_call_inputs,
    repair_tool_result_pairing,
    repair_transcript,
)
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from tests.unit.transcript_factory import assistant, call, result, user


def ids(entries: list[TranscriptEntry]) -> list[str]:
    return [e.id for e in entries]


# -- §12.1 pairing -----------------------------------------------------------------------------


def test_t72_missing_result_synthesized_and_results_moved_before_the_user() -> None:
    entries = [
        assistant("a", "", call("call_1", "read"), call("call_2", "exec")),
        user("u", "what happened?"),
        result("call_2", "done", name="exec"),
    ]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["a", "call_1:result", "call_2:result", "u"]
    synthetic = repaired.entries[1]
    assert synthetic.role == Role.TOOL and synthetic.is_error
    assert synthetic.text == SYNTHETIC_RESULT_TEXT
    assert synthetic.tool_name == "read"
    assert repaired.added == ("call_1",)
    assert repaired.moved
    assert repaired.changed


def test_synthetic_text_keeps_the_spec_meaning() -> None:
    assert SYNTHETIC_RESULT_TEXT == (
        "[agentlane] missing tool result in session history; inserted synthetic error result "
        "for transcript repair."
    )


def test_a_valid_transcript_is_returned_as_is() -> None:
    entries = [
        user("u1"),
        assistant("a1", "", call("c1"), call("c2")),
        result("c1"),
        result("c2"),
        user("u2"),
        assistant("a2", "done"),
    ]
    repaired = repair_tool_result_pairing(entries)
    assert repaired.entries is entries
    assert not repaired.changed


def test_results_come_back_in_call_order() -> None:
    entries = [assistant("a", "", call("c1"), call("c2")), result("c2"), result("c1")]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["a", "c1:result", "c2:result"]
    assert repaired.moved and repaired.added == ()


def test_orphans_are_dropped() -> None:
    entries = [
        user("u"),
        result("ghost"),  # before any call
        assistant("a", "", call("c1")),
        result("c1"),
        result("other"),  # inside the span, but not this turn's id
        assistant("b", "plain"),
        result("c1", entry_id="late"),  # after the next assistant: outside the span
    ]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["u", "a", "c1:result", "b"]
    assert repaired.dropped_orphans == 3


def test_duplicates_are_dropped_anywhere() -> None:
    entries = [
        assistant("a", "", call("c1")),
        result("c1", "first"),
        result("c1", "second", entry_id="dup1"),
        user("u"),
        result("c1", "third", entry_id="dup2"),
    ]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["a", "c1:result", "u"]
    assert repaired.entries[1].text == "first"
    assert repaired.dropped_duplicates == 2


def test_a_reused_call_id_is_never_answered_twice() -> None:
    entries = [
        assistant("a1", "", call("c1")),
        result("c1"),
        assistant("a2", "", call("c1")),
        result("c1", entry_id="again"),
    ]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["a1", "c1:result", "a2"]
    assert repaired.dropped_duplicates == 1
    assert repaired.added == ()


@pytest.mark.parametrize("blank", [None, "", "   "])
def test_blank_tool_name_is_restored_from_the_call(blank: str | None) -> None:
    entries = [assistant("a", "", call("c1", "exec")), result("c1", name=blank)]
    repaired = repair_tool_result_pairing(entries)
    assert repaired.entries[1].tool_name == "exec"
    assert repaired.names_restored == 1
    assert entries[1].tool_name == blank  # the input entry is untouched


def test_padded_tool_name_is_trimmed() -> None:
    entries = [assistant("a", "", call("c1", "exec")), result("c1", name=" exec ")]
    assert repair_tool_result_pairing(entries).entries[1].tool_name == "exec"


@pytest.mark.parametrize("reason", sorted(NO_SYNTHESIS_STOP_REASONS))
def test_unfinished_turns_get_no_synthetic_results(reason: str) -> None:
    entries = [
        assistant("a", "partial", call("c1"), call("c2"), stop_reason=reason),
        user("u"),
        result("c2"),
    ]
    kept = repair_tool_result_pairing(entries)
    assert ids(kept.entries) == ["a", "c2:result", "u"]
    assert kept.added == ()
    dropped = repair_tool_result_pairing(entries, errored_turn_results=ErroredTurnResults.DROP)
    assert ids(dropped.entries) == ["a", "u"]
    assert dropped.dropped_errored_results == 1


def test_assistant_without_calls_and_other_roles_pass_through() -> None:
    entries = [user("u"), assistant("a", "hi"), TranscriptEntry(id="s", role=Role.SYSTEM, ts=1)]
    assert repair_tool_result_pairing(entries).entries is entries


def test_empty_and_only_tool_results() -> None:
    assert repair_tool_result_pairing([]).entries == []
    only = repair_tool_result_pairing([result("c1"), result("c2")])
    assert only.entries == [] and only.dropped_orphans == 2


def test_last_turn_with_no_results_at_all() -> None:
    entries = [user("u"), assistant("a", "", call("c1"), call("c2"))]
    repaired = repair_tool_result_pairing(entries)
    assert ids(repaired.entries) == ["u", "a", "c1:result", "c2:result"]
    assert not repaired.moved


def test_tuple_input_is_accepted() -> None:
    entries = (user("u"), assistant("a", "hi"))
    assert repair_tool_result_pairing(entries).entries == list(entries)


def test_repair_is_idempotent_on_a_fixed_example() -> None:
    entries = [
        assistant("a", "", call("c1"), call("c2")),
        user("u"),
        result("c2", name=""),
        result("zz"),
    ]
    once = repair_tool_result_pairing(entries)
    twice = repair_tool_result_pairing(once.entries)
    assert twice.entries is once.entries
    assert not twice.changed


# -- §12.2 tool-call inputs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("read", True),
        ("mcp:server.tool-x_1", True),
        ("", False),
        ("a" * 64, True),
        ("a" * 65, False),
        ("bad name", False),
        ("naïve", False),
        ("tool/path", False),
    ],
)
def test_tool_names(name: str, valid: bool) -> None:
    assert is_valid_tool_name(name) is valid


def test_allowed_set_is_compared_without_case() -> None:
    allowed = frozenset({"read", "exec"})
    assert is_valid_tool_name("read", allowed)
    assert not is_valid_tool_name("write", allowed)
    repaired = repair_tool_call_inputs(
        [assistant("a", "", call("c1", "READ"), call("c2", "write"))],
        allowed_tool_names=[" Read ", "exec", ""],
    )
    assert [c.name for c in repaired.entries[0].tool_calls] == ["READ"]
    assert repaired.dropped_tool_calls == 1


def test_invalid_calls_are_dropped_and_names_trimmed() -> None:
    entries = [
        assistant(
            "a",
            "text stays",
            call("c1", "  read "),
            call("", "read"),
            call("  ", "read"),
            call("c4", "bad name"),
        )
    ]
    repaired = repair_tool_call_inputs(entries)
    assert [(c.id, c.name) for c in repaired.entries[0].tool_calls] == [("c1", "read")]
    assert repaired.dropped_tool_calls == 3
    assert repaired.trimmed_names == 1
    assert entries[0].tool_calls[0].name == "  read "  # input untouched


def test_an_assistant_left_empty_is_dropped() -> None:
    entries = [user("u"), assistant("a", "  ", call("c1", "")), user("v")]
    repaired = repair_tool_call_inputs(entries)
    assert ids(repaired.entries) == ["u", "v"]
    assert repaired.dropped_assistant_entries == 1


def test_an_assistant_with_reasoning_left_is_kept() -> None:
    entry = assistant("a", "", call("c1", ""), reasoning="thought")
    repaired = repair_tool_call_inputs([entry])
    assert ids(repaired.entries) == ["a"] and repaired.entries[0].tool_calls == []


def test_duplicate_call_ids_are_dropped() -> None:
    entries = [
        assistant("a1", "", call("c1"), call("c1", "exec")),
        result("c1"),
        assistant("a2", "again", call("c1")),
    ]
    repaired = repair_tool_call_inputs(entries)
    assert [c.name for c in repaired.entries[0].tool_calls] == ["read"]
    assert repaired.entries[2].tool_calls == []
    assert repaired.dropped_tool_calls == 2


def test_signed_thinking_turn_needing_repair_is_dropped_whole() -> None:
    signed = assistant(
        "a", "", call("c1"), call("c2", "bad name"), meta={"anthropic_thinking": [{"x": 1}]}
    )
    fine = assistant("b", "", call("c3"), meta={"anthropic_thinking": [{"x": 1}]})
    repaired = repair_tool_call_inputs([signed, fine])
    assert ids(repaired.entries) == ["b"]
    assert repaired.entries[0] is fine
    assert repaired.dropped_signed_turns == 1
    assert repaired.dropped_tool_calls == 2


def test_nothing_to_repair_returns_the_input() -> None:
    entries = [assistant("a", "", call("c1")), result("c1")]
    repaired = repair_tool_call_inputs(entries)
    assert repaired.entries is entries and not repaired.changed


def test_full_repair_drops_the_results_of_dropped_calls() -> None:
    entries = [
        user("u"),
        assistant("a", "", call("c1", "read"), call("c2", "bad name")),
        result("c2", name="bad name"),
    ]
    repaired = repair_transcript(entries)
    assert ids(repaired.entries) == ["u", "a", "c1:result"]
    assert repaired.entries[2].text == SYNTHETIC_RESULT_TEXT
    assert repaired.inputs.dropped_tool_calls == 1
    assert repaired.pairing.dropped_orphans == 1
    assert repaired.changed
    clean = repair_transcript(repaired.entries)
    assert clean.entries is repaired.entries and not clean.changed


def test_unicode_content_survives_repair() -> None:
    entries = [assistant("a", "日本語 ✓", call("c1", "read", path="ファイル.txt")), user("u", "🙂")]
    repaired = repair_transcript(entries)
    assert repaired.entries[0].text == "日本語 ✓"
    assert repaired.entries[0].tool_calls[0].arguments == {"path": "ファイル.txt"}


# -- relink ------------------------------------------------------------------------------------


# -- property-style: random damaged transcripts ------------------------------------------------

NAMES = ["read", "exec", "write", "", " edit ", "bad name"]


def random_transcript(rng: random.Random) -> list[TranscriptEntry]:
    entries: list[TranscriptEntry] = []
    call_ids: list[str] = []
    for n in range(rng.randint(0, 25)):
        kind = rng.random()
        if kind < 0.25:
            entries.append(user(f"u{n}", rng.choice(["hi", "", "go on"])))
        elif kind < 0.55:
            calls: list[ToolCall] = []
            for _ in range(rng.randint(0, 3)):
                cid = (
                    rng.choice(call_ids)
                    if call_ids and rng.random() < 0.1
                    else f"c{n}_{len(calls)}"
                )
                if rng.random() < 0.05:
                    cid = ""
                calls.append(ToolCall(id=cid, name=rng.choice(NAMES)))
                call_ids.append(cid)
            reason = rng.choice([None, None, None, "error", "aborted", "idle_timeout"])
            entries.append(assistant(f"a{n}", rng.choice(["", "text"]), *calls, stop_reason=reason))
        else:
            target = rng.choice(call_ids) if call_ids and rng.random() < 0.85 else f"x{n}"
            entries.append(result(target, name=rng.choice(["read", "", None]), entry_id=f"r{n}"))
    if rng.random() < 0.2:
        rng.shuffle(entries)
    return entries


def check_invariants(entries: list[TranscriptEntry]) -> None:
    answered: set[str] = set()
    i = 0
    while i < len(entries):
        entry = entries[i]
        assert entry.role != Role.TOOL, f"orphan result {entry.id}"
        if entry.role == Role.ASSISTANT and entry.tool_calls:
            j = i + 1
            got = []
            while j < len(entries) and entries[j].role == Role.TOOL:
                got.append(entries[j])
                j += 1
            expected = [c.id for c in entry.tool_calls]
            if entry.stop_reason in NO_SYNTHESIS_STOP_REASONS:
                # Only real results, never synthetic ones, still in call order.
                positions = [expected.index(r.tool_call_id or "") for r in got]
                assert positions == sorted(positions)
                assert all(r.text != SYNTHETIC_RESULT_TEXT for r in got)
            else:
                assert [r.tool_call_id for r in got] == expected
            for r in got:
                assert r.tool_call_id not in answered
                assert r.tool_name and r.tool_name == r.tool_name.strip()
                answered.add(r.tool_call_id or "")
            i = j
            continue
        i += 1
    call_ids = [c.id for e in entries for c in e.tool_calls]
    assert len(call_ids) == len(set(call_ids))
    assert all(c.id.strip() and is_valid_tool_name(c.name) for e in entries for c in e.tool_calls)


def test_random_transcripts_repair_to_valid_idempotent_output() -> None:
    rng = random.Random(20240610)
    for _ in range(500):
        entries = random_transcript(rng)
        repaired = repair_transcript(entries)
        check_invariants(repaired.entries)
        again = repair_transcript(repaired.entries)
        assert again.entries is repaired.entries, "repair is not idempotent"
        assert not again.changed
        if not repaired.changed:
            assert repaired.entries is entries


# -- tolerant loader ---------------------------------------------------------------------------


def line(entry: TranscriptEntry) -> bytes:
    return entry.model_dump_json(exclude_defaults=True).encode() + b"\n"
