"""Where a session's tool calls run when workspaces are per host (issue 20, "Workspaces stay
with their host"; README "Several hosts").

A workspace is a folder on one host's disk. With AGENTLANE_WORKSPACES=host the first tool call of
a session runs on any worker, which reports its host; from then on the session is pinned to that
host and its tool calls go to the host's own task queue, which only that host's workers poll.
Model calls, compactions and everything else run on any worker. With shared workspaces workers
report no host and nothing is pinned.

A host that is gone is noticed by Temporal's schedule-to-start timeout on the host queue (no
worker took the call in time; such a timeout is never retried by Temporal). The run then waits:
it schedules the call again, each attempt bounded by what is left of the wait, until the host's
worker takes it, an abort ends the wait, or the run has waited `host_wait_seconds` in all, when
it ends with a message naming the host. A tool never runs on another host: it would not find
the files.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DETECT_SECONDS",
    "RECHECK_SECONDS",
    "HostWait",
    "after_absence",
    "attempt_timeout",
    "pin_after",
    "unavailable_reason",
]

# How long a call waits in a host's queue before the host counts as unavailable: longer than a
# busy host's queue usually is, short enough that a user soon sees why nothing happens.
DETECT_SECONDS = 10.0
# While waiting, each attempt waits this long (a host that comes back takes the call at once;
# this only bounds the history a long wait writes: about 4 events per attempt).
RECHECK_SECONDS = 60.0
MIN_ATTEMPT_SECONDS = 1.0


class HostWait(BaseModel):
    """What to do after a call found no worker of its host in time."""

    model_config = ConfigDict(frozen=True)

    host: str
    # Seconds the run has waited for hosts so far, this timeout included.
    waited: float
    # True: schedule the call again and wait; False: end the run with `message`.
    wait: bool
    message: str


def pin_after(pin: str | None, reported: str | None) -> str | None:
    """The session's host after a tool call: a pin never moves (the files are there); an unpinned
    session takes the host that ran its call. A worker with shared workspaces reports None."""
    return pin if pin is not None else reported


def attempt_timeout(waited: float, bound: float) -> float:
    """The schedule-to-start timeout of the next attempt on a host queue: the detection window
    first, then longer rechecks once the run waits, never past the bound."""
    window = DETECT_SECONDS if waited <= 0 else RECHECK_SECONDS
    left = bound - waited
    return max(MIN_ATTEMPT_SECONDS, min(window, left))


def unavailable_reason(host: str) -> str:
    """The status's waiting reason (and AgentPhase=waiting's why)."""
    return f"host {host} unavailable"


def after_absence(host: str, waited: float, timed_out: float, bound: float) -> HostWait:
    """A call waited `timed_out` seconds in the queue of `host` and no worker took it."""
    total = waited + timed_out
    if total >= bound:
        return HostWait(
            host=host,
            waited=total,
            wait=False,
            message=(
                f"Host {host} is unavailable: no worker of host {host}, where this session's "
                f"workspace is, took the tool call within {round(total)} s: its worker is down "
                f"(start one there: `agentlane worker --host-id {host}`) or all its tool slots "
                "stayed busy (`AGENTLANE_MAX_TOOL_CALLS`; the session's `host_wait_seconds` "
                "bounds the wait). Send the message again once it takes calls."
            ),
        )
    return HostWait(
        host=host,
        waited=total,
        wait=True,
        message=(
            f"{unavailable_reason(host)}: no worker of host {host}, where the session's "
            f"workspace is, took the tool call (it is down, or all its tool slots are busy: "
            f"`AGENTLANE_MAX_TOOL_CALLS`); it waits (up to {round(bound - total)} s more)"
        ),
    )
