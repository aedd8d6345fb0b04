"""Workflow ids, storage names and session-key rules, in one place so every role derives them
the same way.

The identity scheme (README "Session keys and ids"):
- A key is 1-128 characters from letters, digits and `._@:-`, starting with a letter or digit,
  without `..`. Its `:`-separated segments may not be one of `RESERVED_SEGMENTS`: those spell
  the ids derived from a key (`session:<key>:events`, `session:<key>:run:<n>`), so no key can
  spell another session's workflow ids, and no two keys share one.
- Folders (workspaces; transcripts of the older file layout) are named by `storage_name`: the
  key itself when it has only letters, digits and `.-@`, else the key with every other
  character percent-encoded (`col:x` -> `col%3Ax`, `col_x` -> `col%5Fx`). `%` never appears in
  a key, so the mapping is injective. Transcripts now live in the store, keyed by the key
  itself; `agentlane db import` reads the old folders (`store/file_import.py`).
"""

from __future__ import annotations

import re

SESSION_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
# Segments that derived workflow ids use (and a few kept for children to come).
RESERVED_SEGMENTS = frozenset({"events", "run", "sub", "child", "agent"})
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9.@-]+$")


class InvalidSessionKey(ValueError):
    pass


def check_session_key(key: str) -> str:
    """Return the key if it is usable in workflow ids and file names, else raise."""
    if not SESSION_KEY_PATTERN.fullmatch(key) or ".." in key:
        rule = (
            "two dots in a row are not allowed (a key names folders)"
            if SESSION_KEY_PATTERN.fullmatch(key)
            else "use 1-128 characters from letters, digits and ._@:- starting with a letter or "
            "digit"
        )
        raise InvalidSessionKey(f"invalid session key {key!r}: {rule}")
    reserved = sorted(set(key.split(":")[1:]) & RESERVED_SEGMENTS)
    if reserved:
        raise InvalidSessionKey(
            f"invalid session key {key!r}: the segment {reserved[0]!r} after a ':' is reserved "
            f"for the ids derived from a key ({', '.join(sorted(RESERVED_SEGMENTS))})"
        )
    return key


def storage_name(key: str) -> str:
    """The folder name of a key's data: injective, and the key itself for plain keys."""
    if _PLAIN_NAME.fullmatch(key):
        return key
    return "".join(ch if _PLAIN_NAME.fullmatch(ch) else f"%{ord(ch):02X}" for ch in key)


def key_of_storage_name(name: str) -> str:
    """The key a folder name stands for (`storage_name`'s inverse; a name it would not make,
    such as a bare `%`, is returned as it is)."""
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), name)


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
    """The earlier folder name (`:` -> `_`): not injective; read only to find old data."""
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
