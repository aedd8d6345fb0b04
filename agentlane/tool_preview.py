"""The preview a tool call's recorded result carries into history: what the call was given and
what it answered, small enough for every step, secrets redacted (issue 25).

Shape: the arguments as `name=value` pairs on the first line, the output after it. Together at most
`PREVIEW_BYTES` (UTF-8): a part too long keeps its head and its tail around a marker that says
how much was left out. The arguments get at most `ARGS_BYTES` when the output needs the room
(a `write` of a large file shows the start and end of its content, not all of it); the output
gets the rest. Redaction happens before cutting, so a cut never leaves half a secret.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agentlane.redaction import redact

PREVIEW_BYTES = 1024
ARGS_BYTES = 384
WIDE = 2
# What stands for the part of a text that was left out (its figure in bytes): on lines of its
# own in the output, inline in the arguments (whose line ends where the output starts).
OUTPUT_GAP = "\n… [{n} bytes] …\n"
ARGS_GAP = " … [{n} bytes] … "


def head_and_tail(text: str, limit: int, gap: str = OUTPUT_GAP) -> str:
    """`text` within `limit` UTF-8 bytes: all of it, or its head and tail around a marker."""
    data = text.encode()
    if len(data) <= limit:
        return text
    # The marker's own size depends on the figure it shows; the largest figure bounds it.
    room = max(limit - len(gap.format(n=len(data)).encode()), 0)
    head, tail = data[: (room + 1) // 2], data[len(data) - room // 2 :] if room // 2 else b""
    left_out = len(data) - len(head) - len(tail)
    # A cut inside a multi-byte character drops that character's remains.
    return head.decode(errors="ignore") + gap.format(n=left_out) + tail.decode(errors="ignore")


def _value(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'=" for c in value):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def compact_args(arguments: dict[str, Any] | str) -> str:
    """`name=value` pairs, a value that is not one plain word as JSON (`command="ls -la"`): what
    JSON says, without the quotes that cost twice once the preview is itself a JSON string."""
    if isinstance(arguments, str):
        return arguments
    return " ".join(f"{name}={_value(value)}" for name, value in arguments.items())


def _ends(text: str, limit: int) -> str:
    """The head and tail of `text`, each `WIDE` times what a preview can show of it."""
    keep = WIDE * limit
    return text if len(text) <= 2 * keep else f"{text[:keep]}\n{text[-keep:]}"


def tool_preview(
    arguments: dict[str, Any] | str,
    output: str,
    secrets: Iterable[str | None] = (),
    limit: int = PREVIEW_BYTES,
) -> str:
    """The arguments (an object, or the raw text the model sent when it was not one) and the
    output, redacted, within `limit` bytes together."""
    known = list(secrets)
    # Only the ends of a long text can be shown: redacting all of a 50 KB output would cost tens
    # of milliseconds. The ends kept are wide enough that a secret cut at their edge is never
    # within what is shown.
    # One line: raw arguments (text that was not an object) may hold line breaks.
    args = redact(_ends(compact_args(arguments), limit), known).replace("\n", " ")
    out = redact(_ends(output, limit), known)
    budget = limit - 1  # the newline between them
    args_size, out_size = len(args.encode()), len(out.encode())
    if args_size + out_size <= budget:
        return f"{args}\n{out}"
    # The output keeps what the arguments do not need, and the arguments what it does not.
    args_room = max(min(args_size, ARGS_BYTES), budget - out_size)
    args = head_and_tail(args, args_room, ARGS_GAP)
    return f"{args}\n{head_and_tail(out, budget - len(args.encode()))}"
