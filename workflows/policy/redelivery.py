"""What a session does with the messages of a run that ended abnormally (failed, timed out,
terminated): SPEC §17.5 removes items only once their run succeeded and retries a failed drain;
here the retry is bounded, so a message that keeps killing its runs is given up visibly instead
of looping forever.

Pure functions over the session's queue items, no I/O, no Temporal import.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentlane.session import QueuedMessage

# Runs that may end abnormally while holding a message before it is given up.
MAX_RUN_ATTEMPTS = 3


@dataclass(frozen=True)
class Redelivery:
    retry: list[QueuedMessage]  # back to the head of the queue, in their order
    given_up: list[QueuedMessage]


def after_abnormal_end(
    held: list[QueuedMessage], max_attempts: int = MAX_RUN_ATTEMPTS
) -> Redelivery:
    """Count the attempt on every held message; those under the limit go back (and wait for the
    debounce, so a failing run is not retried in a tight loop), the others are given up."""
    retry: list[QueuedMessage] = []
    given_up: list[QueuedMessage] = []
    for item in held:
        counted = item.model_copy(update={"attempts": item.attempts + 1, "debounce": True})
        (given_up if counted.attempts >= max_attempts else retry).append(counted)
    return Redelivery(retry=retry, given_up=given_up)
