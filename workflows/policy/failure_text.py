"""What a user reads when failover gives up: specific and true (issue 9 "What the user sees").

The original's reply-layer texts (SPEC §8.4, in `model_fallback`) say *what* happened; these add
*where*: the model, the profiles tried, the HTTP status and when the earliest cooldown ends. No
key ever appears here: profiles are named by id. Pure: callers pass `now`.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentlane.branches import RESET_ADVICE, RESET_COMMAND, reset_command
from agentlane.errors import FailoverReason
from workflows.policy.model_fallback import (
    BILLING_REPLY,
    FallbackSummary,
    rate_limit_cooldown_reply,
    reply_failure_text,
)
from workflows.policy.transient_retry import (
    WAIT_SETTING,
    seconds_text,
    too_long_text,
    wait_bound_text,
)

R = FailoverReason
_TRANSIENT = frozenset({R.RATE_LIMIT, R.OVERLOADED})

# The original's texts name its chat commands; a user of this engine does these instead. The
# policy modules keep the original's words (its tests quote them); what reaches a user is
# translated here, so no message names a command that does not exist. "/reset" and "/new" both
# mean "start afresh", which is `agentlane reset <session>` here (the transcript is kept; the
# model no longer sees what came before): the same words as the CLI's help and the README.
_RESET = RESET_ADVICE
_OWN_COMMANDS = (
    ("Try /reset (or /new) to start a fresh session", f"{_RESET[0].upper()}{_RESET[1:]}"),
    ("use /new to start a fresh session", _RESET),
    ("use /new to start a new session", _RESET),
    (
        "Use /think minimal (or any level other than off)",
        "Set the session's `thinking` to minimal (or any level other than off)",
    ),
)


def in_this_engine(text: str, session_key: str | None = None) -> str:
    """`text` with the original's chat commands replaced by what does the same here; with
    `session_key`, the reset command names the session."""
    for theirs, ours in _OWN_COMMANDS:
        text = text.replace(theirs, ours)
    if session_key:
        text = text.replace(RESET_COMMAND, reset_command(session_key))
    return text


def _profiles(ids: Sequence[str | None]) -> str:
    named = [pid for pid in ids if pid]
    return ", ".join(named) if named else "its default credentials"


def cooling_down_text(
    *,
    model: str,
    reason: FailoverReason | None,
    profiles: Sequence[str | None],
    soonest: float | None,
    now: float,
    status: int | None = None,
    retry_after: float | None = None,
    wait_bound: float | None = None,
    waited: float | None = None,
) -> str:
    """Every profile of the model is unavailable and the run will not wait (or waited enough).
    With the provider's `retry_after` and the run's `wait_bound`, a wait the run would not do
    is said with the provider's figure."""
    detail = f"HTTP {status}, " if status else ""
    why = reason.value if reason else "unknown"
    where = f"({model}: {detail}{why}; profiles tried: {_profiles(profiles)})"
    if reason in _TRANSIENT or reason is None:
        text = f"{rate_limit_cooldown_reply(soonest, now)} {where}"
        spent = waited or 0.0
        if retry_after is not None and wait_bound is not None and retry_after + spent > wait_bound:
            text = f"{text} {too_long_text(retry_after, wait_bound, spent)}"
        return text
    if reason is R.BILLING:
        return f"{BILLING_REPLY} {where}"
    ready = ""
    if soonest is not None and soonest > now:
        left = soonest - now
        when = f"{max(1, round(left))} s" if left < 90 else f"~{round(left / 60)} min"
        ready = f" The first is usable again in {when}."
    return (
        f"Every auth profile of {model.split('/', 1)[0]} is unavailable ({why}).{ready} "
        f"{where} See `agentlane auth list`."
    )


def chain_exhausted_text(
    summary: FallbackSummary, *, now: float, reason: FailoverReason | None = None
) -> str:
    """Model fallback ran out of candidates (SPEC §8.3 summary, §8.4 final message)."""
    return f"{reply_failure_text(now=now, summary=summary, reason=reason)} {summary.message}"


# The first words of a provider's error in a one-line notice.
_NOTICE_ERROR_CHARS = 160


def fallback_notice(
    previous: str,
    to: str,
    *,
    status: int | None,
    reason: FailoverReason | None,
    error: str,
) -> str:
    """The warning when the run moves to the next model: which failure made it move, so a wrong
    URL or a 401 answered by another provider is not hidden behind one line."""
    facts = [f"HTTP {status}" if status else "", reason.value if reason else ""]
    head = ", ".join(f for f in facts if f)
    words = " ".join(error.split())
    if len(words) > _NOTICE_ERROR_CHARS:
        words = words[: _NOTICE_ERROR_CHARS - 1].rstrip() + "…"
    why = "; ".join(p for p in (head, words) if p)
    return f"{previous} is unavailable ({why or 'no reason given'}); falling back to {to}"


def idle_end_text(model: str, idle_seconds: int, produced_output: bool) -> str:
    """How a run that met the idle limit ends: a model that never answered, or one that began
    and then went silent (the user saw part of an answer)."""
    if produced_output:
        what = (
            f"The model ({model}) began to answer, then went silent: no output for "
            f"{idle_seconds} s (the LLM idle timeout)."
        )
    else:
        what = (
            f"The model ({model}) did not produce a response before the LLM idle timeout "
            f"({idle_seconds} s without output)."
        )
    return (
        f"{what} Please try again, or raise `idle_timeout_seconds` (`[agents.main]` in the "
        "config: sessions made from then on)."
    )


def escalation_text(
    said: str,
    model: str,
    answered: str,
    last_error: str,
    *,
    waited: float,
    wait_bound: float,
) -> str:
    """The original's "temporarily rate-limited/overloaded" end, with what it leaves out: the
    model, what it answered (`HTTP 429 from anthropic`), how long the run waited against its
    bound, and the provider's own words when they say more than `said`."""
    text = (
        f"{said} {model} kept refusing ({answered}); the run waited {seconds_text(waited)} of "
        f"{wait_bound_text(wait_bound)} on waiting ({WAIT_SETTING})."
    )
    return text if not last_error or last_error == said else f"{text} Last error: {last_error}"


def reply_cut_text(stop_reason: str | None, model: str) -> str | None:
    """What a user is told of a final reply the provider cut short (the run still succeeds:
    what came is the reply), or None for a reply that ended by itself."""
    if stop_reason == "max_tokens":
        return (
            f"The reply was cut short: {model} reached its output-token limit. Ask it to go on, "
            "or raise `max_output_tokens` for the model in the config."
        )
    if stop_reason == "refusal":
        return f"The reply was stopped by {model}'s provider (a content filter or a refusal)."
    return None
