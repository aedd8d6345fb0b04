"""The context's size measured incrementally by a real worker (activities/context/context_cache):
a session's first model call measures the whole context, every later one on the same worker
only what was added since, across runs of the session; the runs end as before."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.harness import Deployment

MEASURED = re.compile(
    r"context of (\S+): \d+ entries, \d+ chars; measured incrementally (\d+), whole \d+; "
    r"(\d+) stored entries processed"
)


@pytest.fixture(scope="module")
def debug_worker(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    dep = make_deployment(server, tmp_path_factory.mktemp("measure"), AGENTLANE_LOG_LEVEL="DEBUG")
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def test_later_calls_measure_only_what_was_added(debug_worker: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(debug_worker))
    ws = debug_worker.data_dir / "ws"
    ws.mkdir()
    key = "measure-1"
    steps = "write f0.txt with x then write f1.txt with x then write f2.txt with x"
    for text in (steps, "say done"):
        receipt = await client.send_and_start(key, text, workspace=str(ws))
        assert receipt.run_id
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
        assert result.status == ExecutionStatus.SUCCESS, result.error
    assert sorted(p.name for p in Path(ws).iterdir()) == ["f0.txt", "f1.txt", "f2.txt"]
    log = "\n".join(w.log.read_text() for w in debug_worker.workers)
    calls = [(m[1], int(m[2])) for m in MEASURED.finditer(log)]
    processed = [int(m[3]) for m in MEASURED.finditer(log)]
    # 4 calls in the first run (3 tool calls, then the answer), 1 in the second.
    assert len(calls) == 5, calls
    # The counter is the worker's: the first call measured the whole context, each later one
    # (the second run's included) only the entries added since.
    assert [n for _, n in calls] == [0, 1, 2, 3, 4], calls
    # Each later call processed only what was appended since the one before: the previous
    # call's reply and its tool's result (or the next run's message).
    assert processed[0] >= 1 and all(n <= 3 for n in processed[1:]), processed
