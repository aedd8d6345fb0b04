"""Hashes that identify a tool call and its outcome for loop detection (SPEC §14).

Shared by tool activities (which hash outcomes) and the run workflow (which hashes calls and
checks for loops), so it lives here rather than under `workflows/`: activities must not import
workflow code. Stdlib only, deterministic, safe inside the workflow sandbox.

Hashes are SHA-256 truncated to `HASH_HEX_CHARS` hex characters. They ride in workflow history
(every outcome) and in the loop state carried across continue-as-new (up to `history_size`
records), so their length is paid many times over (measured: 16 characters took a 10-step run
past 2 KB of history per step). 48 bits keep an accidental collision between two calls of the
same tool inside a 30-call window out of reach (about 1 in 10^12), which is all the detector
needs: the original compares hashes for equality only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "HASH_HEX_CHARS",
    "call_signature",
    "digest",
    "is_known_poll",
    "outcome_hash",
    "stable_json",
]

HASH_HEX_CHARS = 12

# A failed call hashes its message under this prefix so that an error can never equal the hash
# of a successful result that happens to serialise the same way.
_ERROR_PREFIX = "error:"


def stable_json(value: Any) -> str:
    """Compact JSON with keys sorted at every depth: equal values give equal strings whatever
    the insertion order of their mappings. Values JSON cannot spell fall back to `str`."""
    return json.dumps(
        _plain(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def digest(value: Any) -> str:
    """Truncated SHA-256 hex of `stable_json(value)`."""
    full = hashlib.sha256(stable_json(value).encode("utf-8")).hexdigest()
    return full[:HASH_HEX_CHARS]


def call_signature(tool_name: str, params: Mapping[str, Any]) -> str:
    """Digest of a call's params. A call is identified by the pair (tool name, signature): the
    name is kept beside the signature in every record rather than hashed into it, so records
    and warning keys stay readable (`read:3f2a…`). `tool_name` is part of the signature's
    contract and reserved for per-tool normalisation; the digest covers the params only."""
    del tool_name
    return digest(params)


def is_known_poll(tool_name: str, params: Mapping[str, Any]) -> bool:
    """Tools whose purpose is to be called again until something changes."""
    if tool_name == "command_status":
        return True
    return tool_name == "process" and params.get("action") in ("poll", "log")


def outcome_hash(
    tool_name: str,
    params: Mapping[str, Any],
    *,
    text: str,
    details: Any = None,
    is_error: bool = False,
    error_message: str | None = None,
) -> str:
    """Hash of what a call returned; equal hashes for one call mean it made no progress.

    `text` is the result's text content (joined text blocks); `details` its structured side.
    Poll and log calls of `process` hash only the fields that show progress, so a fresh
    timestamp or session id in the details cannot mask a stuck process.
    """
    if is_error:
        message = error_message if error_message is not None else text
        return _ERROR_PREFIX + digest(message)
    text = text.strip()
    fields = details if isinstance(details, Mapping) else {}
    if tool_name == "process":
        action = params.get("action")
        if action == "poll":
            return digest(_poll_progress(fields, text))
        if action == "log":
            return digest(_log_progress(fields, text))
    # Unlike the original, details that are not a mapping are hashed rather than dropped:
    # more of the outcome in the hash can only make "no progress" harder to claim.
    return digest({"details": {} if details is None else details, "text": text})


def _poll_progress(details: Mapping[str, Any], text: str) -> dict[str, Any]:
    return {
        "action": "poll",
        "status": details.get("status"),
        "exitCode": details.get("exitCode"),
        "exitSignal": details.get("exitSignal"),
        "aggregated": details.get("aggregated"),
        "text": text,
    }


def _log_progress(details: Mapping[str, Any], text: str) -> dict[str, Any]:
    return {
        "action": "log",
        "status": details.get("status"),
        "totalLines": details.get("totalLines"),
        "totalChars": details.get("totalChars"),
        "truncated": details.get("truncated"),
        "exitCode": details.get("exitCode"),
        "exitSignal": details.get("exitSignal"),
        "text": text,
    }


def _plain(value: Any) -> Any:
    # json.dumps cannot sort mixed-type keys and turns tuples into lists anyway; normalising
    # first makes the output depend on the value alone.
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return _plain(model_dump(mode="json"))
    return value
