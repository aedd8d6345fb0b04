"""Workspaces stay with their host (issue 20): the pin, the wait for a host that is gone and
its bound, and the settings that name a host."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.exceptions import ApplicationError

from activities.tool_calls import ToolActivities
from activities.tools.results import ToolResult
from agentlane.data_converter import CompactPydanticPayloadConverter
from agentlane.errors import WORKSPACE_MISSING
from agentlane.settings import Settings, check_host_id, default_host_id, host_task_queue
from agentlane.tool_calls import ToolCallInput, ToolCallOutcome
from workflows.policy import host_routing as p


def test_the_first_host_pins_and_a_pin_never_moves() -> None:
    assert p.pin_after(None, "a") == "a"
    assert p.pin_after("a", "b") == "a"
    assert p.pin_after("a", None) == "a"
    # Shared workspaces: workers report no host, nothing is pinned.
    assert p.pin_after(None, None) is None


def test_attempts_detect_quickly_then_recheck_within_the_bound() -> None:
    assert p.attempt_timeout(0, 600) == p.DETECT_SECONDS
    assert p.attempt_timeout(10, 600) == p.RECHECK_SECONDS
    # Never past the bound, never below a second.
    assert p.attempt_timeout(0, 4) == 4
    assert p.attempt_timeout(580, 600) == 20
    assert p.attempt_timeout(599.5, 600) == p.MIN_ATTEMPT_SECONDS


def test_a_missing_host_is_waited_for_until_the_bound_then_named() -> None:
    first = p.after_absence("a", waited=0, timed_out=10, bound=600)
    assert first.wait and first.waited == 10
    assert first.message.startswith("host a unavailable")
    assert p.unavailable_reason("a") == "host a unavailable"
    later = p.after_absence("a", waited=first.waited, timed_out=60, bound=600)
    assert later.wait and later.waited == 70
    # Waiting through every attempt reaches the bound exactly: the run ends naming the host.
    waited, verdict = 0.0, first
    for _ in range(100):
        verdict = p.after_absence("a", waited, p.attempt_timeout(waited, 600), 600)
        waited = verdict.waited
        if not verdict.wait:
            break
    assert not verdict.wait and verdict.waited == 600
    assert "Host a is unavailable" in verdict.message
    assert "--host-id a" in verdict.message


def test_host_queue_and_ids() -> None:
    assert host_task_queue("agentlane", "a") == "agentlane@host:a"
    assert check_host_id("host-1.example_2") == "host-1.example_2"
    for bad in ("", "a b", "a/b", "-a", "x" * 101, "a@b"):
        with pytest.raises(ValueError):
            check_host_id(bad)
    assert check_host_id(default_host_id())


def test_settings_read_the_host_and_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_DATA_DIR", "/tmp/agentlane-test-hosts")
    monkeypatch.delenv("AGENTLANE_HOST_ID", raising=False)
    monkeypatch.delenv("AGENTLANE_WORKSPACES", raising=False)
    default = Settings.from_env()
    assert default.workspaces == "host"
    assert default.host_id == default_host_id()
    monkeypatch.setenv("AGENTLANE_HOST_ID", "a")
    monkeypatch.setenv("AGENTLANE_WORKSPACES", "shared")
    monkeypatch.setenv("AGENTLANE_TASK_QUEUE", "tq")
    named = Settings.from_env()
    assert (named.host_id, named.workspaces, named.host_task_queue) == ("a", "shared", "tq@host:a")
    assert named.host_wait_seconds == 600
    monkeypatch.setenv("AGENTLANE_HOST_WAIT_S", "30")
    assert Settings.from_env().host_wait_seconds == 30
    monkeypatch.setenv("AGENTLANE_WORKSPACES", "nfs")
    with pytest.raises(ValueError, match="use host or shared"):
        Settings.from_env()
    monkeypatch.setenv("AGENTLANE_WORKSPACES", "host")
    monkeypatch.setenv("AGENTLANE_HOST_ID", "a b")
    with pytest.raises(ValueError, match="not valid"):
        Settings.from_env()


def test_routing_fields_cost_no_history_when_unused() -> None:
    """Shared workspaces (and steps before a pin) send and get back what they did before."""
    inp = ToolCallInput(
        session_key="s",
        run_id="session:s:run:1",
        turn_index=0,
        assistant_entry_id="session:s:run:1:t0",
        workspace="/w",
        tool_call_id="c",
        tool_name="read",
    )
    converter = CompactPydanticPayloadConverter()
    wire = converter.to_payloads([inp, ToolCallOutcome()])
    assert b"host" not in wire[0].data and b"create_workspace" not in wire[0].data
    assert b"host" not in wire[1].data
    pinned = inp.model_copy(update={"host": "a", "create_workspace": True})
    back = converter.from_payloads(converter.to_payloads([pinned]), [ToolCallInput])[0]
    assert (back.host, back.create_workspace) == ("a", True)


def _tools(host: str | None) -> ToolActivities:
    # Neither the store nor the event stream is reached by what these tests call.
    return ToolActivities(store=cast(Any, None), publishers=cast(Any, None), host=host)


def _call(workspace: Path, **fields: object) -> ToolCallInput:
    return ToolCallInput(
        session_key="s",
        run_id="session:s:run:1",
        turn_index=0,
        assistant_entry_id="session:s:run:1:t0",
        workspace=str(workspace),
        tool_call_id="c",
        tool_name="write",
        **fields,  # type: ignore[arg-type]
    )


async def test_a_worker_of_another_host_touches_nothing(tmp_path: Path) -> None:
    outcome = await _tools("b")._run(_call(tmp_path / "ws", host="a"), _never)
    assert outcome.wrong_host and outcome.host == "b"
    assert not (tmp_path / "ws").exists()


async def _never(*_: object) -> ToolResult:
    raise AssertionError("the tool ran on the wrong host")


def test_the_host_makes_the_default_workspace_and_refuses_a_missing_one(tmp_path: Path) -> None:
    made = tmp_path / "default"
    _tools("a")._check_host(_call(made, create_workspace=True))
    assert made.is_dir()
    with pytest.raises(ApplicationError, match="does not exist on host a") as err:
        _tools("a")._check_host(_call(tmp_path / "named"))
    assert err.value.type == WORKSPACE_MISSING and err.value.non_retryable
    # Shared workspaces: as before, a missing folder is the tool's own error to report.
    _tools(None)._check_host(_call(tmp_path / "named"))
