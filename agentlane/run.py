"""The one entry point (seed 004): every way in builds an ExecutionRequest and gets an
ExecutionResult. Exactly one start and one end-or-error event per run; no exception escapes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from agentlane.approvals import ApprovalConfig
from agentlane.context_state import RunContextState
from agentlane.entry_source import EntrySource as EntrySource
from agentlane.errors import ExecutionErrorKind, ModelFailure
from agentlane.events import Announcement
from agentlane.failover_state import RunFailover
from agentlane.loop_detection_config import LoopDetectionConfig
from agentlane.messages import Routing
from agentlane.profile_state import ProfilePin
from agentlane.subagents import SubagentSettings
from agentlane.tool_catalog import DEFAULT_TOOLS
from agentlane.tool_policy_config import ToolPolicyInput
from agentlane.usage import RunUsage

RUN_BUDGET_SECONDS = 48 * 3600
MODEL_IDLE_TIMEOUT_SECONDS = 120


class TerminationReason(StrEnum):
    """Seed 001 §9.4; gateway_disconnected never ends a run here (runs outlive clients)."""

    NO_TOOL_CALLS = "no_tool_calls"
    TIMEOUT_48H = "timeout_48h"
    IDLE_TIMEOUT_120S = "idle_timeout_120s"
    ABORT_SIGNAL = "abort_signal"
    ERROR = "error"


class ExecutionStatus(StrEnum):
    SUCCESS = "success"
    ABORTED = "aborted"
    ERROR = "error"


class ModelRef(BaseModel):
    provider: str = "offline"
    model: str = "planner"

    def label(self) -> str:
        return f"{self.provider}/{self.model}"


class UserTurn(BaseModel):
    """A user message as the run receives it: already accepted and numbered by the session."""

    entry_id: str
    text: str
    routing: Routing = Routing()
    sender: str | None = None
    # The W3C traceparent of the span that accepted the message (tracing on), which the run's
    # trace links to; never anything else.
    traceparent: str | None = None


class StartAborted(BaseModel):
    reason: str
    by: str | None = None


class ExecutionRequest(BaseModel):
    session_key: str
    run_id: str
    run_number: int
    agent_id: str = "main"
    source: EntrySource = EntrySource.CHAT
    prompt: list[UserTurn]
    workspace: str
    create_workspace: bool = False
    model: ModelRef = ModelRef()
    thinking: str = "off"
    reasoning_mode: str = "off"
    budget_seconds: int = RUN_BUDGET_SECONDS
    idle_timeout_seconds: int = MODEL_IDLE_TIMEOUT_SECONDS
    tools: list[str] = Field(default_factory=lambda: list(DEFAULT_TOOLS))
    # Sub-agents (SPEC §13.4): the `[subagents]` settings (None: the defaults), this run's depth
    # (None: from the session key) and the run that spawned it.
    subagents: SubagentSettings | None = None
    spawn_depth: int | None = None
    spawned_by: str | None = None
    parent_entry_id: str | None = None
    # A sub-agent's: what a call to a tool its parent could not use is answered (its tools are
    # within its parent's, so no sender or channel gets through a child what it may not do).
    tool_refusals: dict[str, str] = Field(default_factory=dict)
    # A sub-agent's top-level session and run: its approvals are listed and decided there (it
    # has no session workflow of its own). None for a session's own runs.
    root_session_key: str | None = None
    root_run_id: str | None = None
    loop_detection: LoopDetectionConfig = LoopDetectionConfig()
    # `[tools.approval]` (issue 21); None when no tool needs approval (left out of history).
    approvals: ApprovalConfig | None = None
    # Optional cap on model calls per run (off by default).
    max_turns: int | None = None
    context_window: int | None = None
    context_window_source: str = "model"
    # Windows providers said they enforce (SPEC §5.6) where smaller than the configured ones,
    # by model label ("anthropic/claude-x"): the session's memory of them.
    provider_windows: dict[str, int] = Field(default_factory=dict)
    # The longest a run waits for a rate-limited or overloaded profile to cool down (never a
    # provider's 36-hour Retry-After); past it the run ends saying when one will be ready.
    max_wait_seconds: int = 600
    # The session's auth-profile pin (SPEC §7.4): `user` locks the run to it, `auto` is the
    # profile the session used last (preferred, so a session keeps its profile's prompt cache).
    profile_pin: ProfilePin | None = None
    # The host whose disk holds the workspace (workspaces per host), if the session knows it:
    # tool calls run only there. None: the run's first tool call decides.
    workspace_host: str | None = None
    # How long a run waits for that host to come back before it ends saying so.
    host_wait_seconds: int = 600
    # An abort held for this run (it came after its message was answered `started`, before
    # the run was made): the run starts and ends aborted, its prompt in the transcript,
    # nothing sent to a model (the abort signal that follows the start lost the race to a
    # quick first answer).
    abort_at_start: StartAborted | None = None
    # Test hook: continue-as-new after this many history events instead of waiting for the
    # server's suggestion (the suggestion needs thousands of events).
    continue_as_new_after_events: int | None = None
    # Test hook: how often a working run may upsert its counters (search attributes); None:
    # once a minute.
    counters_upsert_seconds: float | None = None


class ExecutionError(BaseModel):
    kind: ExecutionErrorKind
    message: str
    detail: str = ""
    # Set when a model provider failed: the classified reason, status, provider, model, profile.
    failure: ModelFailure | None = None
    # Who asked, for an abort or interrupt ("agentlane-cli ann@box", "gateway token ops").
    by: str | None = None


class ExecutionResult(BaseModel):
    session_key: str
    run_id: str
    status: ExecutionStatus
    termination_reason: TerminationReason
    reply: str = ""
    turns: int = 0
    tool_calls: int = 0
    usage: RunUsage = RunUsage()
    started_at: datetime
    ended_at: datetime
    error: ExecutionError | None = None
    last_entry_id: str | None = None
    # Steering messages that reached the run after its last model call: the session queues them
    # again so none is lost.
    unconsumed: list[UserTurn] = Field(default_factory=list)
    # The model that answered when model fallback moved the run off the requested one.
    fallback_model: str | None = None
    # The auth profile the run ended on, for the session to prefer next time (never a key).
    profile_pin: ProfilePin | None = None
    # What started the run (a chat message, a schedule's firing...), for whoever reads the result.
    source: EntrySource = EntrySource.CHAT
    # The host the run's tools ran on (workspaces per host): the session keeps it.
    workspace_host: str | None = None
    # The provider windows known at the run's end (the request's, and any learned by it).
    provider_windows: dict[str, int] = Field(default_factory=dict)

    @property
    def duration_ms(self) -> int:
        return int((self.ended_at - self.started_at).total_seconds() * 1000)


class RunCarry(BaseModel):
    """What a run carries across continue-as-new: counters and references, never messages'
    history."""

    started_at: datetime
    deadline: datetime
    turn_index: int = 0
    tool_calls: int = 0
    usage: RunUsage = RunUsage()
    pending_user: list[UserTurn] = Field(default_factory=list)
    steer: list[UserTurn] = Field(default_factory=list)
    seen_steer: list[str] = Field(default_factory=list)
    last_entry_id: str | None = None
    reply_preview: str = ""
    unanswered_reason: str = "not_executed"
    segments: int = 1
    # Lifecycle events decided but not yet published when the run continued as new.
    announce: list[Announcement] = Field(default_factory=list)
    # Tool-loop detection's state (`workflows/policy/loop_detection.LoopState`, dumped: the
    # contract cannot import workflow code) and the calls it blocked so far.
    loops: dict[str, Any] = Field(default_factory=dict)
    blocked_calls: int = 0
    # Thinking-level fallback (SPEC §6): the level in use when lowered, and the levels tried.
    thinking: str | None = None
    attempted_thinking: list[str] = Field(default_factory=list)
    recheck_announce: bool = False
    # Auth-profile rotation (SPEC §7.6): the profile in use, the run's candidates (the shared
    # cooldown state is read from the store when needed) and the failover counters of §4.2.
    profile_id: str | None = None
    profile_candidates: list[str] | None = None
    failover_iterations: int = 0
    rate_limit_rotations: int = 0
    overload_rotations: int = 0
    # Model fallback (SPEC §8): the model in use when not the requested one, and the rest of the
    # failover state (None in runs recorded before model fallback).
    model: ModelRef | None = None
    failover: RunFailover | None = None
    # Warnings announced so far: each gets its own number, so its own event id.
    warnings: int = 0
    # Context recovery (issue 10): compactions and truncations of this run (None: none yet).
    context: RunContextState | None = None
    # The traceparent of the run's first span (tracing on): later segments continue its trace.
    trace: str | None = None
    # The host the run's tools go to (workspaces per host), once known, and the seconds this
    # run has waited for it so far (the wait is bounded per run by `host_wait_seconds`).
    workspace_host: str | None = None
    host_waited_seconds: float = 0.0
    # Provider windows this run learned from overflow errors (model label → tokens).
    provider_windows: dict[str, int] = Field(default_factory=dict)
    # The tool policy the run started with (SPEC §13.3; None: recorded before the policy), and
    # the senders of steering messages it took (owner-only tools follow every sender).
    tool_policy: ToolPolicyInput | None = None
    steer_senders: list[str] = Field(default_factory=list)


class RunInput(BaseModel):
    request: ExecutionRequest
    carry: RunCarry | None = None
    # The code level of the workflow code that started it (workflows/patches.py); None: asked
    # with a marker (started by older code).
    code: str | None = None
