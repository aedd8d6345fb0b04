"""Transcript entries: append-only, one file per session, outside workflow history.

Entries form a chain through `parent_id` (the session tree of seed 001 §9.7). Every tool call in an
assistant entry is answered by exactly one `tool` entry with the same `tool_call_id`; the store
enforces it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from agentlane.tool_catalog import RUN_ONCE_TOOLS, canonical_tool_name
from agentlane.usage import Usage


class Unanswered(StrEnum):
    """Why a tool call has no real result; the workflow sends the code, the store writes the
    words (older histories carry the words themselves, which are used as they are)."""

    NOT_EXECUTED = "not_executed"
    SKIPPED_FOR_STEER = "skipped_for_steer"
    RUN_STOPPED = "run_stopped"


UNANSWERED_TEXT = {
    Unanswered.NOT_EXECUTED: "Tool call was not executed.",
    Unanswered.SKIPPED_FOR_STEER: "Skipped: the user sent a new message before this tool call ran.",
    Unanswered.RUN_STOPPED: "Not executed: the run was stopped before this tool call ran.",
}


# A call left without a result by a run that ended without saying why (terminated, or its
# worker lost with its end): a tool that is never run again may have run, or be half done.
MAY_HAVE_RUN_TEXT = (
    "The run ended while this tool call may have been running: it may have partly or fully "
    "completed. Check its effects before running it again."
)


def unanswered_text(reason: str, tool: str | None = None) -> str:
    """The words for `reason`; `tool` names the call, where the words depend on it."""
    run_once = tool is not None and canonical_tool_name(tool) in RUN_ONCE_TOOLS
    if reason == Unanswered.NOT_EXECUTED and run_once:
        return MAY_HAVE_RUN_TEXT
    try:
        return UNANSWERED_TEXT[Unanswered(reason)]
    except ValueError:
        return reason


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"
    # Context markers (issue 10): written by the engine, never sent as they are. The transcript
    # is only appended to, so what the next request sees is decided by these markers
    # (`activities/context/context_view.py`).
    # A summary of everything before `meta["first_kept_id"]`: requests start with it.
    COMPACTION = "compaction"
    # The session starts afresh: requests see nothing before it (the old branch stays here).
    RESET = "reset"
    # Tool results cut to fit (`meta["cuts"]`: entry id -> characters kept), applied to requests.
    TRUNCATION = "truncation"
    # This session was branched from another: `meta["parent_session"]`, `meta["branch_point"]`.
    BRANCH = "branch"
    # A message the queue policy dropped (issue 19): its full text and `meta` (seq, message_id,
    # sender, policy, cap, fate); never sent to the model.
    DROPPED = "dropped"


# Roles a model request carries; the markers above shape the request but are not in it as such.
CHAT_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM})


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Set when the model produced arguments that are not a JSON object; the tool answers with an
    # error instead of running.
    raw_arguments: str | None = None


class TranscriptEntry(BaseModel):
    id: str
    parent_id: str | None = None
    role: Role
    ts: float
    run_id: str | None = None
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    stop_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
