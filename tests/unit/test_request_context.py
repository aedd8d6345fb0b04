"""The transcript as a model request sees it: partial text of a retried call left out, tool
pairing repaired, oversized results cut, all on a copy (SPEC §10.2, §12)."""

from __future__ import annotations

from activities.context.request_context import context_for_request
from tests.unit.transcript_factory import assistant, call, result, user


def test_an_orphan_result_never_reaches_the_provider() -> None:
    """The "unexpected tool_use_id" users reported: a result whose call is gone."""
    entries = [user("u1"), result("ghost"), assistant("a1", "hi")]
    context = context_for_request(entries, 200_000)
    assert [e.id for e in context.entries] == ["u1", "a1"]
    assert "orphan results dropped 1" in context.repaired


def test_a_missing_result_is_answered_in_the_request_only() -> None:
    entries = [user("u1"), assistant("a1", "", call("c1")), user("u2")]
    context = context_for_request(entries, 200_000)
    ids = [e.id for e in context.entries]
    assert ids[:3] == ["u1", "a1", "c1:result"] and ids[-1] == "u2"
    assert context.entries[2].is_error
    assert len(entries) == 3, "the stored list is untouched"


def test_the_partial_of_an_answered_call_is_left_out() -> None:
    partial = assistant("r:t0/partial", "half an answ", stop_reason="error")
    answered = [user("u1"), partial, assistant("r:t0", "the whole answer")]
    assert [e.id for e in context_for_request(answered, 200_000).entries] == ["u1", "r:t0"]
    unanswered = [user("u1"), partial]
    assert [e.id for e in context_for_request(unanswered, 200_000).entries] == [
        "u1",
        "r:t0/partial",
    ]


def test_an_oversized_result_is_cut_on_a_copy() -> None:
    huge = "line of output\n" * 20_000  # 300 000 characters
    entries = [user("u1"), assistant("a1", "", call("c1", "exec")), result("c1", huge, name="exec")]
    context = context_for_request(entries, 32_000)
    sent = context.entries[2].text
    assert len(sent) < 40_000 and "more characters truncated" in sent
    assert context.truncated_results == 1
    assert entries[2].text == huge


def test_a_clean_transcript_goes_out_as_it_is() -> None:
    entries = [user("u1"), assistant("a1", "", call("c1")), result("c1"), assistant("a2", "done")]
    context = context_for_request(entries, 200_000)
    assert context.entries == entries and not context.repaired and not context.truncated_results
