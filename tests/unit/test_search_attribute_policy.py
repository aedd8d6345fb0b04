"""Search attributes (issue 12): only what changed is upserted, counters at most once a minute,
an unpriced cost stays unset, error labels; and the `agentlane sessions` query builder."""

from __future__ import annotations

import pytest

from agentlane import search_attributes as sa
from agentlane.errors import ExecutionErrorKind, ModelFailure
from agentlane.run import ExecutionError, ExecutionStatus
from agentlane.session import RunPhase
from agentlane.session_query import BadFilter, SessionFilter, quote
from agentlane.usage import Cost, Usage
from workflows.policy import search_attributes as p


def test_only_changed_keys_and_counters_only_when_due() -> None:
    last = {sa.PHASE.name: "running", sa.MODEL.name: "a/b", sa.TURNS.name: 1}
    current = {
        sa.PHASE.name: "running",
        sa.MODEL.name: "c/d",
        **p.counters(3, Usage(input=10, output=5)),
    }
    assert p.changes(last, current, with_counters=False) == {sa.MODEL.name: "c/d"}
    assert p.changes(last, current, with_counters=True) == {
        sa.MODEL.name: "c/d",
        sa.TURNS.name: 3,
        sa.TOKENS.name: 15,
    }
    # Nothing changed: nothing to upsert (no history event in an ordinary step).
    assert p.changes(current, current, with_counters=True) == {}


def test_unset_only_what_was_set() -> None:
    assert p.changes({}, {sa.LAST_ERROR.name: None}, with_counters=False) == {}
    assert p.changes(
        {sa.LAST_ERROR.name: "rate_limit"}, {sa.LAST_ERROR.name: None}, with_counters=False
    ) == {sa.LAST_ERROR.name: None}


def test_an_unpriced_cost_is_unset_never_zero() -> None:
    assert p.counters(1, Usage(input=3))[sa.COST.name] is None
    priced = Usage(input=3, cost=Cost(usd=0.0123456789, priced_calls=1))
    assert p.counters(1, priced)[sa.COST.name] == 0.012346
    free = Usage(input=3, cost=Cost(usd=0.0, priced_calls=1))
    assert p.counters(1, free)[sa.COST.name] == 0.0


def test_long_keywords_are_cut_and_empty_ones_unset() -> None:
    out = p.changes({}, {sa.CHANNEL.name: "x" * 5000, sa.AGENT.name: ""}, with_counters=False)
    assert out == {sa.CHANNEL.name: "x" * p.MAX_KEYWORD}


def test_counters_once_a_minute_of_workflow_time() -> None:
    assert not p.counters_due(100.0, 159.9)
    assert p.counters_due(100.0, 160.0)


def test_run_phases() -> None:
    assert p.run_phase(RunPhase.WAITING) == "waiting"
    assert p.run_phase(RunPhase.COMPACTING) == "compacting"
    for phase in (RunPhase.STARTING, RunPhase.STREAMING, RunPhase.TOOLS, RunPhase.FINISHING):
        assert p.run_phase(phase) == "running"


def test_error_labels() -> None:
    failure = ModelFailure(reason="rate_limit", message="429", provider="x", model="y")
    limited = ExecutionError(kind=ExecutionErrorKind.QUOTA_EXCEEDED, message="m", failure=failure)
    assert p.error_label(limited) == "rate_limit"
    tool = ExecutionError(kind=ExecutionErrorKind.TOOL_ERROR, message="m")
    assert p.error_label(tool) == "tool_error"
    assert p.error_label(None) is None
    assert p.run_end_error(ExecutionStatus.SUCCESS, tool) is None
    assert p.run_end_error(ExecutionStatus.ERROR, limited) == "rate_limit"
    aborted = ExecutionError(kind=ExecutionErrorKind.ABORTED, message="m")
    assert p.run_end_error(ExecutionStatus.ABORTED, aborted) == "aborted"
    # A refused connection is no timeout, whatever its failover reason (issue 25).
    down = ModelFailure(reason="timeout", message="refused", provider="x", model="y")
    refused = ExecutionError(kind=ExecutionErrorKind.CONNECTION_REFUSED, message="m", failure=down)
    assert p.run_end_error(ExecutionStatus.ERROR, refused) == "connection_refused"


def test_quote_escapes_and_rejects_control_characters() -> None:
    assert quote("openai/gpt-4o") == "'openai/gpt-4o'"
    assert quote("it's") == "'it\\'s'"
    assert quote("a\\'b") == "'a\\\\\\'b'"
    with pytest.raises(BadFilter):
        quote("a\nb")
    with pytest.raises(BadFilter):
        quote("")


def test_session_queries() -> None:
    plain = SessionFilter()
    assert plain.runs_query() is None
    assert plain.sessions_query() == (
        "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running'"
    )
    f = SessionFilter(model="anthropic/x", error="rate_limit")
    assert f.sessions_query() == (
        "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running' "
        "AND AgentModel = 'anthropic/x' AND AgentLastError = 'rate_limit'"
    )
    assert SessionFilter(phase="idle").sessions_query() == (
        "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running' AND AgentPhase = 'idle'"
    )
    closed = SessionFilter(include_closed=True, agent="main")
    assert closed.sessions_query() == (
        "WorkflowType = 'SessionWorkflow' AND ExecutionStatus != 'ContinuedAsNew' "
        "AND AgentId = 'main'"
    )


def test_waiting_asks_the_runs_then_their_sessions() -> None:
    f = SessionFilter(phase="waiting", model="m/x")
    assert f.runs_query() == (
        "WorkflowType = 'AgentRunWorkflow' AND ExecutionStatus = 'Running' "
        "AND AgentPhase = 'waiting'"
    )
    assert f.sessions_query(["b", "a", "b"]) == (
        "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running' "
        "AND AgentModel = 'm/x' AND AgentSessionKey IN ('a', 'b')"
    )
    assert f.sessions_query([]) is None
    assert SessionFilter(profile="anthropic:work").runs_query() == (
        "WorkflowType = 'AgentRunWorkflow' AND ExecutionStatus = 'Running' "
        "AND AgentAuthProfile = 'anthropic:work'"
    )


def test_unknown_phase_is_refused_clearly() -> None:
    with pytest.raises(BadFilter, match="unknown phase 'stuck'.*idle, running, waiting"):
        SessionFilter(phase="stuck")
    with pytest.raises(BadFilter):
        SessionFilter(phase="idle", include_closed=True)


def test_listing_lines_say_unpriced_rather_than_zero() -> None:
    from clients.session_listing import line

    row: dict[str, object] = {
        "key": "alice",
        "status": "RUNNING",
        "phase": "idle",
        "model": "m/x",
        "turns": 3,
        "tokens": 120,
        "cost_usd": None,
        "last_error": None,
        "started": "t",
    }
    assert line(row) == "alice\tRUNNING\tidle\tm/x\t3\t120\tunpriced\t-\tt"
    assert "\t$0.0123\t" in line({**row, "cost_usd": 0.0123})
