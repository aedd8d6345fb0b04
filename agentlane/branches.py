"""Reset and branches (issue 10, "a session is never bricked"): the contracts shared by the client,
the session workflow and the activities that write the markers.

* A **reset** appends a `reset` marker to the session's transcript: later requests see nothing
  before it (`activities/context/context_view.py`); the old branch stays in the file.
* A **branch** is a new session whose transcript starts with a copy of another session's branch
  up to one entry (seed 001 §9.7: parent session, branch point), then a `branch` marker.

The words users read about reset are here too, so the CLI, the client, the README and the failure
texts (`workflows/policy/failure_text.py`) say the same thing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agentlane.queue_settings import QueueOptions
from agentlane.reset_help import RESET_HELP as RESET_HELP
from agentlane.session import BranchSource, SessionSettings

__all__ = ["BranchSource"]

RESET_SESSION = "reset_session"
COPY_BRANCH = "copy_branch"

# How a failure text or a help line names the recovery; `<session>` is the key when known.
RESET_COMMAND = "agentlane reset <session>"
RESET_ADVICE = f"reset the session (`{RESET_COMMAND}`)"

# Memo keys of a branched session's workflow: listing the tree needs no queries.
MEMO_PARENT = "parent_session"
MEMO_BRANCH_POINT = "branch_point"


def reset_command(session_key: str | None = None) -> str:
    return RESET_COMMAND.replace("<session>", session_key) if session_key else RESET_COMMAND


def branch_key(parent: str, n: int) -> str:
    """The default key of a parent's n-th branch, `<parent>-b<n>`, cut to the key length limit."""
    suffix = f"-b{n}"
    return parent[: 128 - len(suffix)] + suffix


def reset_note(aborted_run_id: str | None, queued: int) -> str:
    """What a reset receipt says it did, in the words the CLI prints."""
    parts = [f"aborted {aborted_run_id}"] if aborted_run_id else []
    if queued:
        parts.append(
            f"{queued} queued message{'s' if queued != 1 else ''} kept: answered next, "
            "in the fresh context"
        )
    else:
        parts.append("the next message starts afresh")
    return "; ".join(parts)


def reset_entry_id(session_key: str, chain: str, number: int) -> str:
    """The reset marker's id: derived, so a retried activity writes it once. The chain token
    (`agentlane.ids.chain_token_of`) keeps ids unique when a closed session is reopened and its
    counter starts again."""
    return f"{session_key}.{chain}:reset{number}"


def branch_entry_id(session_key: str, chain: str) -> str:
    return f"{session_key}.{chain}:branch"


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = "user reset"
    # Who asked (a CLI user, an adapter's name): recorded in the marker's meta.
    by: str = "client"


class ResetReceipt(BaseModel):
    """What a reset did."""

    session_key: str
    # The reset marker: nothing before it is sent to the model any more.
    entry_id: str
    # The run the reset aborted (it had ended when the receipt was written), if one was busy.
    aborted_run_id: str | None = None
    # Messages that were waiting: kept, and answered next, in the fresh context.
    queued_kept: int = 0
    note: str = ""

    @property
    def run_aborted(self) -> bool:
        return self.aborted_run_id is not None


class ResetInput(BaseModel):
    session_key: str
    entry_id: str
    reason: str
    by: str
    aborted_run_id: str | None = None
    queued_kept: int = 0


class ResetWritten(BaseModel):
    entry_id: str
    # The entry the reset follows (the old branch's last), None for an empty transcript.
    parent_id: str | None = None
    ts: float = 0.0
    # Tool calls of the old branch that had no result: answered "not executed" before the marker,
    # so the old branch stays valid and nothing answers them after the reset.
    closed_tool_calls: int = 0


class BranchCopyInput(BaseModel):
    session_key: str
    source: BranchSource
    # The branch marker's id (derived, so a retried copy writes nothing twice).
    entry_id: str


class BranchCopied(BaseModel):
    entry_id: str
    # Entries copied from the parent (the marker not counted).
    copied: int = 0
    # The parent's recorded settings (model, workspace, thinking...), which the branch keeps.
    settings: SessionSettings | None = None
    queue_override: QueueOptions | None = None


class BranchReceipt(BaseModel):
    session_key: str
    parent_session: str
    branch_point: str
    # The branch marker in the new session's transcript; the next message follows it.
    entry_id: str
    copied: int = 0
    note: str = ""


class ResetMark(BaseModel):
    """A reset as the session tree shows it."""

    entry_id: str
    ts: float
    # The last entry of the branch the reset left (its branch point), None if it was empty.
    after: str | None = None
    by: str | None = None


class TreeNode(BaseModel):
    """One session in `agentlane sessions tree`."""

    key: str
    # running or closed (the newest execution of the key's chain).
    status: str = ""
    # When that execution started (epoch seconds).
    started: float = 0.0
    parent_session: str | None = None
    branch_point: str | None = None
    resets: list[ResetMark] = Field(default_factory=list)
    # A sub-agent's session (SPEC §13.4): the run that spawned it (its parent workflow).
    spawned_by: str | None = None
