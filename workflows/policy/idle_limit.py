"""The LLM idle limit a run gets (SPEC §4.6.2): the session's configured value when it has one
(0 disables it), else none at all for a cron-triggered run, else 120 s.

A scheduled run is unattended: nobody waits on a silent model the way a chat user does, so the
original lets it wait as long as the run's budget allows. The run budget (48 h) still bounds it,
and the model call's heartbeat timeout still notices a dead worker within seconds.

The original's middle steps (a per-run timeout override, an explicit `agents.defaults
.timeoutSeconds`) have no counterpart here: runs take their budget from the session settings.
"""

from __future__ import annotations

from agentlane.entry_source import EntrySource
from agentlane.run import MODEL_IDLE_TIMEOUT_SECONDS

__all__ = ["NO_IDLE_LIMIT", "idle_limit_seconds"]

# What the model-call activity reads as "no idle limit" (`activities/liveness.with_idle_limit`).
NO_IDLE_LIMIT = 0


def idle_limit_seconds(source: EntrySource, configured: int | None) -> int:
    if configured is not None:
        return max(configured, NO_IDLE_LIMIT)
    if source == EntrySource.CRON:
        return NO_IDLE_LIMIT
    return MODEL_IDLE_TIMEOUT_SECONDS
