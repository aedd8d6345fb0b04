"""Workflow ids and session-key rules, in one place so every role derives them the same way."""

from __future__ import annotations

import re

SESSION_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")


class InvalidSessionKey(ValueError):
    pass


def check_session_key(key: str) -> str:
    """Return the key if it is usable in workflow ids and file names, else raise."""
    if not SESSION_KEY_PATTERN.fullmatch(key) or ".." in key:
        raise InvalidSessionKey(
            f"invalid session key {key!r}: use 1-128 characters from letters, digits and ._@:- "
            "starting with a letter or digit"
        )
    return key


def session_workflow_id(key: str) -> str:
    return f"session:{key}"


def events_workflow_id(key: str) -> str:
    return f"session:{key}:events"


def run_workflow_id(key: str, run_number: int) -> str:
    return f"session:{key}:run:{run_number}"


def session_key_from_workflow_id(workflow_id: str) -> str:
    if not workflow_id.startswith("session:"):
        raise ValueError(f"not a session workflow id: {workflow_id}")
    return workflow_id.removeprefix("session:").split(":run:")[0].removesuffix(":events")


def file_safe(key: str) -> str:
    """Session keys may contain ':' which some filesystems dislike; map it once."""
    return key.replace(":", "_")


def chain_token_of(first_run_id: str) -> str:
    """A short id unique to one workflow chain (stable across continue-as-new), for transcript
    entry ids. From the run id's random tail: its head is a timestamp in UUIDv7 run ids, shared
    by chains started within the same minute."""
    return first_run_id.replace("-", "")[-10:]


def assistant_entry_id(run_id: str, chain: str, turn_index: int) -> str:
    """The transcript id of a run's model call at `turn_index`. Run ids repeat when a closed
    session is reopened; the chain token (`chain_token_of`) does not, so ids stay unique."""
    return f"{run_id}.{chain}:t{turn_index}"


def chain_of_entry_id(entry_id: str, run_id: str, turn_index: int) -> str | None:
    """The chain token `entry_id` was built from, or None if it was not built that way."""
    head, tail = f"{run_id}.", f":t{turn_index}"
    if entry_id.startswith(head) and entry_id.endswith(tail):
        chain = entry_id[len(head) : len(entry_id) - len(tail)]
        if chain and assistant_entry_id(run_id, chain, turn_index) == entry_id:
            return chain
    return None
