"""What a session shows of a model's reasoning (SPEC §16 `reasoningLevel`): `off` hides it, `on`
delivers it as a block of its own when the reply is done, `stream` streams it as
`reasoning_delta` events. Set per agent (`[agents.<id>] reasoning`), per message (`send
--reasoning`, the gateway's `reasoning` field), kept by the session from then on."""

from __future__ import annotations

REASONING_MODES = ("off", "on", "stream")


def reasoning_mode_problem(word: str) -> str | None:
    """Why `word` is not a reasoning mode, or None when it is one."""
    if word in REASONING_MODES:
        return None
    return f"reasoning mode {word!r} is not one of {', '.join(REASONING_MODES)}"
