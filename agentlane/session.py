"""Session workflow input/state (carried across continue-as-new) and its status query."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agentlane.approvals import ApprovalClosed, ApprovalConfig, PendingApproval
from agentlane.entry_source import EntrySource
from agentlane.loop_detection_config import LoopDetectionConfig
from agentlane.messages import MessageFate, QueueMode, Routing
from agentlane.profile_state import ProfilePin
from agentlane.queue_drops import DroppedMessage
from agentlane.queue_settings import (
    DedupeEntry,
    OverflowState,
    QueueConfig,
    QueueOptions,
    QueueSettings,
)
from agentlane.run import ExecutionResult, ModelRef, UserTurn
from agentlane.subagents import SubagentSettings
from agentlane.usage import Usage
from agentlane.webhooks import WebhookState, WebhookStatus


class QueuedMessage(BaseModel):
    seq: int
    mode: QueueMode
    turn: UserTurn
    enqueued_at: float
    message_id: str | None = None
    # Runs that took this message and ended abnormally (failed, terminated, timed out): it is
    # put back at the head of the queue until MAX_RUN_ATTEMPTS, then given up visibly.
    attempts: int = 0
    # Messages queued while a run was busy wait for the debounce after it; a message that
    # found the session idle, or an interrupt, runs at once.
    debounce: bool = False
    # The debounce in force when this message was accepted (SPEC §17.2 re-applies settings on
    # every enqueue); None means the session's default.
    debounce_ms: int | None = None
    # What sent it (InboundMessage.source): the run that takes it as its first message says so.
    source: EntrySource = EntrySource.CHAT
    # The follow-up half of a steer-backlog message: the transcript id of its steered half
    # (workflows/policy/queue.py `backlog_copy`).
    backlog_of: str | None = None


class SessionSettings(BaseModel):
    workspace: str
    create_workspace: bool = False
    agent_id: str = "main"
    model: ModelRef = ModelRef()
    thinking: str = "off"
    reasoning_mode: str = "off"
    # The global queue settings (SPEC §17.2 `messages.queue.*`), from the config file.
    queue: QueueConfig = Field(default_factory=QueueConfig)
    # Tool-loop detection (SPEC §14), on by default here; and an optional per-run turn limit.
    loop_detection: LoopDetectionConfig = Field(default_factory=LoopDetectionConfig)
    # `[tools.approval]` (issue 21): None when no tool needs approval.
    approvals: ApprovalConfig | None = None
    max_turns: int | None = Field(default=None, ge=1)
    # The model's context window as the config gave it when the session was made (SPEC §9);
    # None: unknown, not checked.
    context_window: int | None = None
    context_window_source: str = "model"
    # The longest a run waits for a cooling profile (rate limit, overload) instead of failing.
    max_wait_seconds: int = Field(default=600, ge=0)
    # An auth profile the user pinned the session to: its runs use it and never rotate away
    # from it (SPEC §7.4-7.5). None: the session picks and keeps one by itself.
    auth_profile: str | None = None
    run_budget_seconds: int = 48 * 3600
    # The host whose disk holds the workspace (AGENTLANE_WORKSPACES=host): named by the client
    # that checked a workspace it was given, else recorded by the first tool call. Its tools
    # run there only; a run waits up to `host_wait_seconds` for it when it is gone.
    workspace_host: str | None = None
    host_wait_seconds: int = Field(default=600, ge=1)
    # The LLM idle limit the session was given; None: the default for each run's source
    # (`workflows/policy/idle_limit.py`, SPEC §4.6.2).
    idle_timeout_seconds: int | None = None
    continue_as_new_after_events: int | None = None
    run_continue_as_new_after_events: int | None = None
    counters_upsert_seconds: float | None = None
    events_continue_as_new_after_events: int | None = None
    # `[subagents]` from the config file (SPEC §13.4); None: the defaults.
    subagents: SubagentSettings | None = None


class InFlight(BaseModel):
    """The messages a run holds: they leave the session's hands only when the run ends normally
    (SPEC §17.5: items are removed only once handled)."""

    run_id: str
    items: list[QueuedMessage] = Field(default_factory=list)
    # Turns steered into the run: if the run dies, they are queued again as follow-ups.
    steered: list[UserTurn] = Field(default_factory=list)


class BranchSource(BaseModel):
    """Where a branched session comes from (seed 001 §9.7): its parent and the parent's entry
    its history ends at."""

    model_config = ConfigDict(extra="forbid")
    parent_session: str
    branch_point: str


class HeldAbort(BaseModel):
    """An abort for a run about to be made."""

    reason: str
    # Who asked (the client's identity), carried into the run's abort signal.
    by: str | None = None
    # The newest message it covers: the run that takes messages up to it is aborted.
    upto_seq: int


class SessionState(BaseModel):
    """Everything the session needs after continue-as-new, and nothing large."""

    key: str
    settings: SessionSettings
    # The profile its runs used last (an `auto` pin, SPEC §7.4): preferred by the next run.
    profile_pin: ProfilePin | None = None
    queue: list[QueuedMessage] = Field(default_factory=list)
    message_seq: int = 0
    run_count: int = 0
    turns: int = 0
    usage: Usage = Usage()
    last_entry_id: str | None = None
    recent_message_ids: list[str] = Field(default_factory=list)
    events_started: bool = False
    last_result: ExecutionResult | None = None
    last_enqueued_at: float = 0.0
    continued: int = 0
    in_flight: InFlight | None = None
    # What became of recent messages, for `wait_started` (bounded: workflows/policy/fates.py;
    # newest last), and the highest message number whose fate was let go.
    fates: list[MessageFate] = Field(default_factory=list)
    fates_let_go: int = 0
    # Messages given up after MAX_RUN_ATTEMPTS abnormal run ends.
    failed_messages: int = 0
    # Queue policy state (SPEC §17.4/§17.5).
    queue_override: QueueOptions | None = None
    overflow: OverflowState = Field(default_factory=OverflowState)
    recent_ids: list[DedupeEntry] = Field(default_factory=list)
    one_by_one: bool = False
    # Resets so far in this chain: numbers the reset markers' ids (carried across
    # continue-as-new, so a marker id is never reused), and the latest marker.
    resets: int = 0
    last_reset_entry_id: str | None = None
    # Webhook delivery (issue 11): the callback and its queue of runs to deliver; None until a
    # message's routing names a callback URL.
    webhook: WebhookState | None = None
    # Messages the queue policy dropped, until their texts are in the transcript (issue 19),
    # and how many it dropped in this chain.
    drops: list[DroppedMessage] = Field(default_factory=list)
    dropped_messages: int = 0
    # Windows providers said they enforce, smaller than configured (model label → tokens).
    provider_windows: dict[str, int] = Field(default_factory=dict)
    # Tool calls waiting for a person's yes (issue 21), and the latest approvals closed (so a
    # second decision is told what became of the first; bounded, newest last).
    approvals: list[PendingApproval] = Field(default_factory=list)
    approvals_closed: list[ApprovalClosed] = Field(default_factory=list)
    # The message last answered `started` whose run is not made yet, and an abort that came
    # meanwhile: that run is aborted as soon as it starts (workflows/policy/abort_hold.py).
    announced_seq: int | None = None
    held_abort: HeldAbort | None = None


class SessionInput(BaseModel):
    state: SessionState
    # The code level of the workflow code that continued it as new (workflows/patches.py); None
    # (a client's start): asked with a marker.
    code: str | None = None
    # Set by a client that starts a session chain: settings recorded by an earlier incarnation
    # of the key are restored, except those the opening message named (`explicit`).
    fresh: bool = False
    explicit: list[str] = Field(default_factory=list)
    # Set when the session is a branch of another: its first step copies the parent's history.
    branch: BranchSource | None = None


class SessionPhase(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    STREAMING = "streaming"
    COMPACTING = "compacting"
    # Every profile is cooling down for a transient reason: the run waits on a durable timer.
    WAITING = "waiting"


class SessionStatus(BaseModel):
    key: str
    phase: SessionPhase
    agent_id: str = "main"
    current_run_id: str | None = None
    queue_length: int = 0
    queued_modes: list[QueueMode] = Field(default_factory=list)
    turns: int = 0
    runs: int = 0
    usage: Usage = Usage()
    # `usage.cost` for people (agentlane.pricing.cost_label): "$0.0123", or "unpriced".
    cost: str = ""
    workspace: str = ""
    workspace_host: str | None = None
    model: str = ""
    last_result: ExecutionResult | None = None
    routing: Routing | None = None
    failed_messages: int = 0
    dropped_messages: int = 0
    queue_override: QueueOptions | None = None
    queue_settings: QueueSettings | None = None
    # Of the run in progress.
    profile_id: str | None = None
    rotations: int = 0
    thinking: str | None = None
    # What its runs show of the model's reasoning (off, on, stream).
    reasoning_mode: str | None = None
    # The context window the session's model's provider said it enforces, when smaller than
    # the configured one (remembered from an overflow error; the context is kept within it).
    provider_window: int | None = None
    # While waiting: until when (epoch seconds) and why.
    waiting_until: float | None = None
    waiting_reason: str | None = None
    # The model answering when model fallback moved the run off the session's model.
    fallback_model: str | None = None
    # Resets of this session (this incarnation), and the latest reset marker's entry id.
    resets: int = 0
    last_reset_entry_id: str | None = None
    # Webhook delivery status, when the session has a callback.
    webhook: WebhookStatus | None = None
    # Tool calls waiting for a person's yes (`agentlane approvals`).
    approvals: list[PendingApproval] = Field(default_factory=list)


class RunPhase(StrEnum):
    STARTING = "starting"
    STREAMING = "streaming"
    TOOLS = "tools"
    COMPACTING = "compacting"
    WAITING = "waiting"
    FINISHING = "finishing"
    # The run's workflow has closed (a query of a closed workflow replays it to its end).
    ENDED = "ended"


class RunProgress(BaseModel):
    run_id: str
    phase: RunPhase
    turn_index: int
    tool_calls: int
    usage: Usage
    last_call_usage: Usage
    pending_steer: int
    # Failover (never a key): the auth profile in use, rotations so far, the thinking level used.
    profile_id: str | None = None
    rotations: int = 0
    thinking: str | None = None
    # While waiting: until when (epoch seconds) and why.
    waiting_until: float | None = None
    waiting_reason: str | None = None
    fallback_model: str | None = None
