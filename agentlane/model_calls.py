"""Model-call activity contract: references and small records only, never the conversation."""

from __future__ import annotations

from pydantic import Field

from agentlane.events import Announcement
from agentlane.run import ModelRef, UserTurn
from agentlane.tool_calls import BASE_TOOLS
from agentlane.usage import Usage
from agentlane.wire import CompactModel, RunStepInput

CALL_MODEL = "call_model"


class ModelCallInput(RunStepInput):
    # Named on a run's first call (of each continue-as-new segment); empty on later calls, which
    # use the workspace that call recorded.
    workspace: str = ""
    # The default per-session workspace is created on first use; a workspace the user named must
    # already exist.
    create_workspace: bool = False
    # The host whose disk holds the workspace (workspaces per host), sent with `workspace`: a
    # model call on another host does not look for the folder there (the tools' host does).
    workspace_host: str | None = None
    model: ModelRef
    thinking: str = "off"
    tools: list[str] = Field(default_factory=lambda: list(BASE_TOOLS))
    # Appended to the transcript (idempotently) before the call: the run's prompt on its first
    # turn, steering messages later.
    append_user: list[UserTurn] = Field(default_factory=list)
    # Tool calls that never ran (skipped for a steering message, or the previous run aborted)
    # are answered with this explanation before the model sees the transcript.
    unanswered_reason: str = "not_executed"
    # Lifecycle events decided by the workflow, published ahead of this call's own events.
    announce: list[Announcement] = Field(default_factory=list)
    # Then, if set, `turn_end` of the previous turn (the value: whether it had tool calls) and
    # `turn_start` of this one: the boundary every step has, as flags.
    close_turn: bool | None = None
    open_turn: bool = False
    idle_timeout_seconds: int = 120
    reasoning_mode: str = "off"
    # The run retries this turn (e.g. with a lower thinking level) after a call that may have
    # announced it already: announce only what the stream does not hold yet.
    recheck_announce: bool = False
    # The auth profile to use (None: the provider's first usable one).
    profile_id: str | None = None
    # Use the profile even if the shared state shows it cooling down: the user pinned it, or
    # the run probes it on purpose (SPEC §7.5, §8.2). Otherwise such a call is not sent.
    allow_cooling: bool = False
    # The agent's cap on the window (`context_tokens`) when it is below the model's; None: the
    # model's own window from the catalogue.
    context_window_cap: int | None = None
    # The window the provider said it enforces (an earlier overflow error), when smaller: the
    # prompt must fit it (the configured window's budget still decides when to compact).
    provider_window: int | None = None


class ToolCallRef(CompactModel):
    id: str
    name: str
    summary: str
    # "rejected" calls (unknown tool, arguments not a JSON object) were already answered with an
    # error result by the model activity; the workflow does not schedule them.
    rejected: bool = False
    # For loop detection (SPEC §14): a short hash of the arguments, and whether the call polls.
    signature: str = ""
    known_poll: bool = False


class ModelCallResult(CompactModel):
    # Empty: the id the call was asked to write (`ModelCallInput.assistant_entry_id`), which the
    # workflow knows; results from earlier versions spell it out.
    entry_id: str = ""
    stop_reason: str
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    usage: Usage = Usage()
    text_chars: int = 0
    reply_preview: str = ""
    attempt: int = 1
