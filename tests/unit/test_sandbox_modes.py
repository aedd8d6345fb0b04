"""How a worker runs workflow code (workers/sandbox.py): no sandbox by default, the sandbox with
the project's modules passed through, or the SDK's strict sandbox; anything else is refused by
name before the worker starts."""

from __future__ import annotations

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from workers.sandbox import UnknownSandboxMode, sandbox_mode_from_env, workflow_runner


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTLANE_SANDBOX", raising=False)
    monkeypatch.delenv("AGENTLANE_SANDBOX_RELOAD", raising=False)


def test_default_runs_workflows_unsandboxed() -> None:
    assert sandbox_mode_from_env() == "off"
    assert isinstance(workflow_runner(), UnsandboxedWorkflowRunner)


@pytest.mark.parametrize(
    ("value", "mode"), [("passthrough", "passthrough"), (" Strict ", "strict")]
)
def test_modes_by_name(monkeypatch: pytest.MonkeyPatch, value: str, mode: str) -> None:
    monkeypatch.setenv("AGENTLANE_SANDBOX", value)
    assert sandbox_mode_from_env() == mode
    assert isinstance(workflow_runner(), SandboxedWorkflowRunner)


def test_passthrough_shares_the_project_modules_strict_does_not() -> None:
    passthrough = workflow_runner("passthrough")
    strict = workflow_runner("strict")
    assert isinstance(passthrough, SandboxedWorkflowRunner)
    assert isinstance(strict, SandboxedWorkflowRunner)
    assert {"agentlane", "workflows"} <= passthrough.restrictions.passthrough_modules
    assert "workflows" not in strict.restrictions.passthrough_modules


def test_older_reload_switch_means_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_SANDBOX_RELOAD", "1")
    assert sandbox_mode_from_env() == "strict"


def test_unknown_mode_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLANE_SANDBOX", "sometimes")
    with pytest.raises(UnknownSandboxMode, match="'sometimes'.*off, passthrough, strict"):
        sandbox_mode_from_env()
