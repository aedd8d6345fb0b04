"""Why an activity was cancelled matters: only a requested cancellation (an abort or an
interrupt) ends the call for good. A cancellation because this attempt timed out on the server,
or because the worker is shutting down, is followed by a retry, which must not find a
"cancelled" result already written."""

from __future__ import annotations

from temporalio import activity


def cancelled_for_good() -> bool:
    details = activity.cancellation_details()
    return (
        details is not None
        and details.cancel_requested
        and not (details.timed_out or details.worker_shutdown or details.not_found)
    )
