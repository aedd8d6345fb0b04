"""Queue settings shared by the client, the CLI and the session workflow (SPEC §17.1, §17.2, §17.4).

Names users type (modes, drop policies, dedupe modes, the `/queue` directive) are normalised
here, once; unknown names are errors that list what is valid, never a silent default.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentlane.queue_modes import QueueMode, parse_queue_mode

DEFAULT_DEBOUNCE_MS = 1000
DEFAULT_CAP = 20


class DropPolicy(StrEnum):
    """What a full queue does with one more message (SPEC §17.4)."""

    OLD = "old"
    NEW = "new"
    SUMMARIZE = "summarize"


class DedupeMode(StrEnum):
    """How redelivered or repeated messages are recognised (SPEC §17.4)."""

    MESSAGE_ID = "message-id"
    PROMPT = "prompt"
    NONE = "none"


class UnknownDropPolicy(ValueError):
    pass


class UnknownDedupeMode(ValueError):
    pass


class InvalidQueueDirective(ValueError):
    pass


# SPEC §17.1: the original's spellings of the drop policies.
_DROP_ALIASES = {
    "old": DropPolicy.OLD,
    "oldest": DropPolicy.OLD,
    "new": DropPolicy.NEW,
    "newest": DropPolicy.NEW,
    "summary": DropPolicy.SUMMARIZE,
    "summarize": DropPolicy.SUMMARIZE,
}

_DEDUPE_ALIASES = {
    "message-id": DedupeMode.MESSAGE_ID,
    "message_id": DedupeMode.MESSAGE_ID,
    "messageid": DedupeMode.MESSAGE_ID,
    "prompt": DedupeMode.PROMPT,
    "none": DedupeMode.NONE,
}


def parse_drop_policy(raw: str) -> DropPolicy:
    word = raw.strip().lower()
    if word in _DROP_ALIASES:
        return _DROP_ALIASES[word]
    valid = ", ".join(_DROP_ALIASES)
    raise UnknownDropPolicy(f"unknown drop policy {raw!r}; valid policies: {valid}")


def parse_dedupe_mode(raw: str) -> DedupeMode:
    word = raw.strip().lower()
    if word in _DEDUPE_ALIASES:
        return _DEDUPE_ALIASES[word]
    valid = ", ".join(m.value for m in DedupeMode)
    raise UnknownDedupeMode(f"unknown dedupe mode {raw!r}; valid modes: {valid}")


# Validators that let every model accept the same aliases a user may type in config or JSON.
def _mode_or_alias(value: object) -> object:
    return parse_queue_mode(value) if isinstance(value, str) else value


def _drop_or_alias(value: object) -> object:
    return parse_drop_policy(value) if isinstance(value, str) else value


def _dedupe_or_alias(value: object) -> object:
    return parse_dedupe_mode(value) if isinstance(value, str) else value


class QueueOptions(BaseModel):
    """Queue options set by one message (inline) or by `/queue` for the session; None = unset."""

    model_config = ConfigDict(extra="forbid")

    mode: QueueMode | None = None
    debounce_ms: int | None = Field(default=None, ge=0)
    cap: int | None = Field(default=None, ge=1)
    drop: DropPolicy | None = None
    dedupe: DedupeMode | None = None

    _mode = field_validator("mode", mode="before")(_mode_or_alias)
    _drop = field_validator("drop", mode="before")(_drop_or_alias)
    _dedupe = field_validator("dedupe", mode="before")(_dedupe_or_alias)


class QueueConfig(BaseModel):
    """The global queue config (the original's `messages.queue`), with its defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: QueueMode = QueueMode.COLLECT
    by_channel: dict[str, QueueMode] = Field(default_factory=dict)
    debounce_ms: int = Field(default=DEFAULT_DEBOUNCE_MS, ge=0)
    debounce_ms_by_channel: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    cap: int = Field(default=DEFAULT_CAP, ge=1)
    drop: DropPolicy = DropPolicy.SUMMARIZE
    dedupe: DedupeMode = DedupeMode.MESSAGE_ID

    _mode = field_validator("mode", mode="before")(_mode_or_alias)
    _drop = field_validator("drop", mode="before")(_drop_or_alias)
    _dedupe = field_validator("dedupe", mode="before")(_dedupe_or_alias)

    @field_validator("by_channel", mode="before")
    @classmethod
    def _channel_modes(cls, value: object) -> object:
        if isinstance(value, dict):
            return {key: _mode_or_alias(mode) for key, mode in value.items()}
        return value


class QueueSettings(BaseModel):
    """The values in force for one enqueue, after resolution (SPEC §17.2)."""

    mode: QueueMode
    debounce_ms: int
    cap: int
    drop: DropPolicy
    dedupe: DedupeMode


class OverflowState(BaseModel):
    """What the summarize drop policy remembers about dropped messages (SPEC §17.4)."""

    dropped: int = 0
    lines: list[str] = Field(default_factory=list)


class DedupeEntry(BaseModel):
    """A recently accepted message's dedupe key and when it was accepted (workflow seconds)."""

    key: str
    at: float


# --- the /queue directive --------------------------------------------------------------------

_RESET_WORDS = frozenset({"default", "reset", "clear"})
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_KEYED = re.compile(r"^([A-Za-z]+)[:=](.*)$")
_DIRECTIVE = re.compile(r"^/queue(?=$|\s|:)", re.IGNORECASE)


def _valid_words() -> str:
    modes = ", ".join(m.value for m in QueueMode)
    drops = "|".join(p.value for p in DropPolicy)
    dedupes = "|".join(m.value for m in DedupeMode)
    return (
        f"a mode ({modes}), mode:<mode>, debounce:<duration such as 500, 500ms, 2s, 1m>, "
        f"cap:<n >= 1>, drop:{drops}, dedupe:{dedupes}, or default/reset/clear alone"
    )


def _bad(word: str, why: str) -> InvalidQueueDirective:
    return InvalidQueueDirective(f"bad /queue option {word!r}: {why}; valid: {_valid_words()}")


def parse_duration_ms(raw: str) -> int:
    """A duration in ms; a bare number is milliseconds (the original's `defaultUnit: "ms"`)."""
    match = _DURATION.match(raw.strip().lower())
    if match is None:
        raise ValueError(f"invalid duration {raw!r}")
    return round(float(match.group(1)) * _UNIT_MS[match.group(2) or "ms"])


def _parse_cap(raw: str) -> int:
    # The original takes any finite number and floors it; below 1 is refused.
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"cap {raw!r} is not a number") from None
    if not math.isfinite(value) or math.floor(value) < 1:
        raise ValueError(f"cap {raw!r} must be a whole number >= 1")
    return math.floor(value)


def _apply_option(options: QueueOptions, word: str) -> None:
    """Set the one field that `word` (key:value, key=value or a bare mode) names."""
    keyed = _KEYED.match(word)
    try:
        if keyed is None:
            options.mode = parse_queue_mode(word)
            return
        key, value = keyed.group(1).lower(), keyed.group(2)
        if key == "mode":
            options.mode = parse_queue_mode(value)
        elif key == "debounce":
            options.debounce_ms = parse_duration_ms(value)
        elif key == "cap":
            options.cap = _parse_cap(value)
        elif key == "drop":
            options.drop = parse_drop_policy(value)
        elif key == "dedupe":
            options.dedupe = parse_dedupe_mode(value)
        else:
            raise ValueError(f"unknown option {key!r}")
    except ValueError as err:
        raise _bad(word, str(err)) from None


def parse_queue_directive(text: str) -> QueueOptions | Literal["reset"]:
    """Parse `/queue` words (the leading `/queue` is optional). SPEC §17.2.

    Nothing but `/queue` gives empty options (the caller shows the settings). Later words
    override earlier ones, as in the original. Unlike the original, which stops quietly at the
    first word it does not know and leaves it in the message, any unknown word or bad value
    is an error here: the directive is its own command.
    """
    rest = _DIRECTIVE.sub("", text.strip(), count=1).lstrip(":")
    words = rest.split()
    if any(word.lower() in _RESET_WORDS for word in words):
        if len(words) > 1:
            raise InvalidQueueDirective(
                f"'{' '.join(words)}': default/reset/clear takes no other options"
            )
        return "reset"
    options = QueueOptions()
    for word in words:
        _apply_option(options, word)
    return options


class QueueChange(BaseModel):
    """A `/queue` directive as sent to a session: new options merged into its override, or a
    reset that removes the override."""

    model_config = ConfigDict(extra="forbid")

    options: QueueOptions | None = None
    reset: bool = False
