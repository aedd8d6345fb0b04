"""Every recorded history, cut at each workflow task boundary, replays with the current code.

A query on a workflow the worker does not cache (evicted, or a legacy query) is answered by
replaying the history as it stands, which may end at any workflow task. A workflow whose
commands depend on where the history ends (a `workflow.patched` asked after a local activity in
the same task; runs now ask their one marker first, workflows/patches.py) fails such a replay
with a nondeterminism error while the whole history replays fine; this test replays every
prefix that ends at a WorkflowTaskStarted event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import WorkflowHistory

from tests.test_replay import HISTORIES, make_replayer

TASK_STARTED = "EVENT_TYPE_WORKFLOW_TASK_STARTED"


def cuts(path: Path) -> list[int]:
    events = json.loads(path.read_text())["events"]
    return [i + 1 for i, e in enumerate(events) if e["eventType"] == TASK_STARTED]


async def test_every_history_replays_cut_at_each_workflow_task(tmp_path: Path) -> None:
    replayer = make_replayer(tmp_path)
    names: list[str] = []

    async def prefixes() -> AsyncIterator[WorkflowHistory]:
        for path in HISTORIES:
            events = json.loads(path.read_text())["events"]
            for end in cuts(path):
                names.append(f"{path.parent.name}/{path.name} up to event {end}")
                yield WorkflowHistory.from_json(path.stem.split("__")[0], {"events": events[:end]})

    failures: list[str] = []
    replayed = 0
    async with replayer.workflow_replay_iterator(prefixes()) as results:
        async for result in results:
            if result.replay_failure is not None:
                failures.append(f"{names[replayed]}: {result.replay_failure}")
            replayed += 1
    assert replayed == sum(len(cuts(p)) for p in HISTORIES) > len(HISTORIES)
    assert failures == []
