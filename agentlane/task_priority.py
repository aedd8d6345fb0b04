"""Which workflow tasks a busy deployment serves first (Temporal's task priority).

When more work is queued than the workers take at once, the server hands out the queue's
lowest `priority_key` first. A message waits for its session's workflow task to be accepted, and a
watcher for the event stream's; a run's steps only take longer. So a session's tasks go first,
then its event stream's, then its runs' (the default, 3), and a burst of new sessions is
accepted while earlier runs wait their turn instead of the other way round. Child workflows and
activities inherit their workflow's priority unless they set their own, so the session gives its
children theirs explicitly.
"""

from __future__ import annotations

from temporalio.common import Priority

SESSION_PRIORITY = Priority(priority_key=1)
EVENTS_PRIORITY = Priority(priority_key=2)
RUN_PRIORITY = Priority(priority_key=3)
