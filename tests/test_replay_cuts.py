"""Every recorded history, cut at each workflow task boundary, replays with the current code.

A query on a workflow the worker does not cache (evicted, or a legacy query) is answered by
replaying the history as it stands, which may end at any workflow task. A workflow whose
commands depend on where the history ends (a `workflow.patched` asked after a local activity in
the same task; runs now ask their one marker first, workflows/patches.py) fails such a replay
with a nondeterminism error while the whole history replays fine; this test replays every
prefix that ends at a WorkflowTaskStarted event.

Prefixes with the same shape are replayed once: the same workflow type and, event by event, the
same type and names (activity, marker and patch, child workflow, signal, update). A replay checks
the commands the code makes against exactly those; what differs between such prefixes is payload
content, which replay does not compare. Many recorded runs share their shape (a scenario's ten
runs of one message), so this replays about 40 % of the prefixes in about 40 % of the time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory

from tests.test_replay import HISTORIES, make_replayer
from workers.sandbox import workflow_runner

TASK_STARTED = "EVENT_TYPE_WORKFLOW_TASK_STARTED"


def cuts(path: Path) -> list[int]:
    events = json.loads(path.read_text())["events"]
    return [i + 1 for i, e in enumerate(events) if e["eventType"] == TASK_STARTED]


def shape(event: dict[str, Any]) -> tuple[str, ...]:
    """What a replay checks of an event: its type and the names its command was made with."""
    kind: str = event["eventType"]
    attributes = next(
        (v for k, v in event.items() if k.endswith("EventAttributes") and isinstance(v, dict)),
        {},
    )
    names = [kind]
    for field in ("activityType", "workflowType"):
        if field in attributes and kind != "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED":
            names.append(attributes[field]["name"])
    if "markerName" in attributes:
        names.append(attributes["markerName"])
        patch = attributes.get("details", {}).get("patch-data")
        if patch:
            names.append(patch["payloads"][0]["data"])
    if "signalName" in attributes:
        names.append(attributes["signalName"])
    if "acceptedRequest" in attributes:
        names.append(attributes["acceptedRequest"].get("input", {}).get("name", ""))
    return tuple(names)


async def test_every_history_replays_cut_at_each_workflow_task(tmp_path: Path) -> None:
    # The worker's own runner (no sandbox): an instance per prefix imports nothing again.
    replayer = make_replayer(tmp_path, runner=workflow_runner("off"))
    names: list[str] = []

    seen: set[tuple[str, tuple[tuple[str, ...], ...]]] = set()
    cut_count = 0

    async def prefixes() -> AsyncIterator[WorkflowHistory]:
        nonlocal cut_count
        for path in HISTORIES:
            events = json.loads(path.read_text())["events"]
            workflow_type = events[0]["workflowExecutionStartedEventAttributes"]["workflowType"]
            shapes = tuple(shape(e) for e in events)
            # Parsed once: each prefix is a slice of the same events.
            parsed = WorkflowHistory.from_json(path.stem.split("__")[0], {"events": events})
            for end in cuts(path):
                cut_count += 1
                key = (workflow_type["name"], shapes[:end])
                if key in seen:
                    continue
                seen.add(key)
                names.append(f"{path.parent.name}/{path.name} up to event {end}")
                yield WorkflowHistory(parsed.workflow_id, parsed.events[:end])

    failures: list[str] = []
    replayed = 0
    async with replayer.workflow_replay_iterator(prefixes()) as results:
        async for result in results:
            if result.replay_failure is not None:
                failures.append(f"{names[replayed]}: {result.replay_failure}")
            replayed += 1
    assert replayed == len(seen) > len(HISTORIES)
    assert cut_count == sum(len(cuts(p)) for p in HISTORIES)
    assert failures == []
