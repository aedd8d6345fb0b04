"""The pure rules of approvals (workflows/policy/approvals.py) and their config (strict)."""

from __future__ import annotations

import pytest

from agentlane.approvals import (
    ApprovalClosed,
    ApprovalConfig,
    ApprovalOutcome,
    OnTimeout,
    PendingApproval,
)
from agentlane.config import ConfigError, build_config
from workflows.policy.approvals import (
    KEEP_CLOSED,
    args_preview,
    closed_after,
    decision_problem,
    denied_text,
    duration_words,
    expired_abort_message,
    expired_text,
    needs_approval,
    on_expiry,
)


def test_globs_name_the_tools_that_wait() -> None:
    config = ApprovalConfig(require=["exec", "write*", "proc?ss"])
    assert needs_approval("exec", config)
    assert needs_approval("EXEC", config)
    assert needs_approval("write", config) and needs_approval("write_file", config)
    assert needs_approval("process", config)
    assert not needs_approval("read", config)
    assert not needs_approval("executor", ApprovalConfig(require=["exec"]))
    assert needs_approval("anything", ApprovalConfig(require=["*"]))
    assert not needs_approval("exec", ApprovalConfig())


def test_defaults_are_the_originals() -> None:
    config = ApprovalConfig()
    assert config.timeout_seconds == 120
    assert config.on_timeout == OnTimeout.DENY


def test_expiry_outcome_is_expired_and_aborts_only_when_configured() -> None:
    deny = on_expiry(ApprovalConfig(require=["exec"]))
    assert deny.outcome == ApprovalOutcome.EXPIRED and not deny.aborts_run
    abort = on_expiry(ApprovalConfig(require=["exec"], on_timeout=OnTimeout.ABORT))
    assert abort.outcome == ApprovalOutcome.EXPIRED and abort.aborts_run


def test_texts_tell_expiry_from_denial() -> None:
    assert expired_text("exec", 120).startswith("Approval expired")
    assert "Denied" not in expired_text("exec", 120)
    assert "Denied" not in expired_abort_message("exec", 7200)
    assert "2 h" in expired_abort_message("exec", 7200)
    assert denied_text("exec", "too risky", "ops") == (
        "Denied by ops: the exec call was not run. Reason: too risky"
    )
    assert denied_text("exec", "") == "Denied by the user: the exec call was not run."


def test_durations_read_as_people_say_them() -> None:
    assert duration_words(120) == "120 s"
    assert duration_words(2.5) == "2.5 s"
    assert duration_words(5400) == "90 min"
    assert duration_words(7200) == "2 h"
    assert duration_words(3 * 3600 + 60) == "181 min"


def test_args_preview_is_one_short_line() -> None:
    assert args_preview("exec:  ls\n  -la") == "exec: ls -la"
    long = args_preview("x" * 1000)
    assert len(long) == 300 and long.endswith("…")


def _pending(id_: str) -> PendingApproval:
    return PendingApproval(
        id=id_, run_id="r", tool_call_id="c", tool="exec", requested_at=0, expires_at=120
    )


def test_decision_problems_say_what_is_wrong() -> None:
    pending = [_pending("a1")]
    closed = [
        ApprovalClosed(id="b2", outcome=ApprovalOutcome.APPROVED),
        ApprovalClosed(id="c3", outcome=ApprovalOutcome.EXPIRED),
        ApprovalClosed(id="d4", outcome=ApprovalOutcome.CANCELLED),
    ]
    assert decision_problem("k", "a1", pending, closed, set()) is None
    assert "already being decided" in (decision_problem("k", "a1", pending, closed, {"a1"}) or "")
    assert "already decided: approved" in (
        decision_problem("k", "b2", pending, closed, set()) or ""
    )
    assert "has expired" in (decision_problem("k", "c3", pending, closed, set()) or "")
    assert "no longer waits" in (decision_problem("k", "d4", pending, closed, set()) or "")
    unknown = decision_problem("k", "zz", pending, closed, set()) or ""
    assert "has no approval 'zz'" in unknown and "pending: a1" in unknown
    assert "agentlane approvals k" in unknown


def test_closed_list_is_bounded() -> None:
    many = [ApprovalClosed(id=str(i), outcome=ApprovalOutcome.DENIED) for i in range(80)]
    kept = closed_after([], many)
    assert len(kept) == KEEP_CLOSED and kept[-1].id == "79"


def test_config_is_strict() -> None:
    config = build_config(
        {"tools": {"approval": {"require": ["exec"], "timeout_seconds": 7200}}}, {}
    )
    assert config.approval.require == ["exec"]
    assert config.approval.timeout_seconds == 7200
    with pytest.raises(ConfigError, match="tools.approval"):
        build_config({"tools": {"approval": {"requires": ["exec"]}}}, {})
    with pytest.raises(ConfigError, match="on_timeout"):
        build_config({"tools": {"approval": {"on_timeout": "ignore"}}}, {})
    with pytest.raises(ConfigError, match="timeout_seconds"):
        build_config({"tools": {"approval": {"timeout_seconds": 0}}}, {})
    with pytest.raises(ConfigError, match="unknown key tools.aproval"):
        build_config({"tools": {"aproval": {}}}, {})


def test_watch_shows_the_command_that_decides() -> None:
    import io

    from agentlane.events import AgentEvent, EventKind
    from clients.render import TerminalRenderer

    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    asked = {"id": "ab12", "tool": "exec", "args_preview": "exec: ls"}
    for kind, data in (
        (EventKind.APPROVAL_REQUESTED, asked),
        (EventKind.APPROVAL_REQUESTED, asked),  # re-published: shown once
        (EventKind.APPROVAL_DECIDED, {"id": "ab12", "outcome": "expired"}),
    ):
        renderer.render(
            AgentEvent(
                kind=kind, event_id=f"r/{kind.value}", session_key="k", run_id="r", data=data
            )
        )
    assert out.getvalue().splitlines() == [
        "⏸ exec waits for approval ab12: exec: ls  (agentlane approve k ab12 [--deny])",
        "  approval ab12 expired",
    ]


def test_the_cli_line_names_the_sub_agent_whose_call_waits() -> None:
    from clients.approvals_cli import approval_line

    own = PendingApproval(
        id="ab12",
        run_id="session:k:run:1",
        tool_call_id="c1",
        tool="exec",
        args_preview="exec: ls",
        requested_at=100.0,
        expires_at=220.0,
    )
    assert approval_line(own, now=125.0) == "ab12  exec  expires in 95 s (then deny)  exec: ls"
    sub = own.model_copy(
        update={
            "run_id": "session:agent:main:subagent:u1:run:1",
            "session_key": "agent:main:subagent:u1",
            "root_run_id": "session:k:run:1",
        }
    )
    assert approval_line(sub, now=125.0) == (
        "ab12  exec (sub-agent agent:main:subagent:u1)  expires in 95 s (then deny)  exec: ls"
    )
