"""Whether other worker processes serve this worker's task queue.

Each process sends what its activities published one batch interval later (the flush loop of
activities/stream_publishers.py), which keeps a step cheap: one signal per batch, not one per
activity. Alone on its queue, that loses no order: every activity of a session publishes through
the process's one buffer. With other workers on the queue, a run's next activity may run in
another process and send its events first: the answer reached the stream before the tool calls
that led to it, and before the run's `agent_start`. So while another process polls the queue, an
activity's events reach the stream before the activity reports (`SessionPublishers` asks
`shared`), and the next activity cannot be scheduled before they are in.

The server lists the pollers of a task queue with the time each last polled; a live worker
renews its long poll at least every minute. Asked every CHECK_SECONDS: a worker that joins is
seen by the others within that time (and sees them at its own start) on a one-partition queue
(the dev server's); on a cluster's partitioned queue, once a poll of it has landed on the
partition described.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

log = logging.getLogger(__name__)

CHECK_SECONDS = 5.0
# A poller not seen for this long has stopped. A live one polls again within a minute, but on a
# cluster a task queue has several partitions and the one described sees another worker only
# when that worker's poll lands there: counted for as long as the server lists it (its poller
# memory is minutes), so the answer does not flap; a worker gone keeps the awaited exits for
# those minutes, which costs a signal round trip per activity, nothing else.
FRESH_SECONDS = 300.0


def others_polling(
    pollers: Iterable[tuple[str, float]], own_identity: str, now: float, fresh: float
) -> bool:
    """Whether any poller (identity, last poll as epoch seconds) other than this process polled
    within `fresh` seconds."""
    return any(identity != own_identity and now - at <= fresh for identity, at in pollers)


class QueuePeers:
    """`shared`: another worker process polled the workflow task queue lately."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._queue = task_queue
        self.shared = False

    async def check(self) -> None:
        request = DescribeTaskQueueRequest(
            namespace=self._client.namespace,
            task_queue=TaskQueue(name=self._queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        response = await self._client.workflow_service.describe_task_queue(request)
        shared = others_polling(
            ((p.identity, p.last_access_time.ToSeconds()) for p in response.pollers),
            self._client.identity,
            time.time(),
            FRESH_SECONDS,
        )
        if shared != self.shared:
            log.info(
                "other workers poll %s: %s",
                self._queue,
                "events reach the stream before each activity reports"
                if shared
                else "none now; events go out with the next batch",
            )
        self.shared = shared

    async def watch(self) -> None:
        """Check now and every CHECK_SECONDS until cancelled; a failed check keeps the last
        answer (the server may be restarting)."""
        while True:
            try:
                await self.check()
            except Exception as err:
                log.debug("could not list the pollers of %s: %r", self._queue, err)
            await asyncio.sleep(CHECK_SECONDS)
