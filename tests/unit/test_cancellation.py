"""Only a requested cancellation ends an activity's call for good; a timed-out attempt or a
worker shutdown is followed by a retry."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.testing import ActivityEnvironment

from activities.cancellation import cancelled_for_good


async def _verdict_after(details: ActivityCancellationDetails) -> bool:
    env = ActivityEnvironment()

    async def body() -> bool:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return cancelled_for_good()
        return False

    task = asyncio.create_task(env.run(body))
    await asyncio.sleep(0.05)
    env.cancel(details)
    return await asyncio.wait_for(task, 5)


@pytest.mark.parametrize(
    ("details", "final"),
    [
        (ActivityCancellationDetails(cancel_requested=True), True),
        (ActivityCancellationDetails(timed_out=True), False),
        (ActivityCancellationDetails(worker_shutdown=True), False),
        (ActivityCancellationDetails(not_found=True), False),
        (ActivityCancellationDetails(cancel_requested=True, timed_out=True), False),
    ],
)
async def test_only_a_requested_cancellation_is_final(
    details: ActivityCancellationDetails, final: bool
) -> None:
    assert await _verdict_after(details) is final
