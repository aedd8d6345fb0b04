"""The client makes its status and progress queries by name (so `agentlane status` imports no
workflow code, issue 22): the names are the workflows' own."""

from __future__ import annotations

from temporalio import workflow

from clients.api import RUN_PROGRESS_QUERY, SESSION_STATUS_QUERY
from workflows.agent_run import AgentRunWorkflow
from workflows.session import SessionWorkflow


def _query_name(fn: object) -> str:
    definition = workflow._QueryDefinition.from_fn(fn)  # type: ignore[arg-type]
    assert definition is not None, f"{fn} is not a query"
    return definition.name or ""


def test_the_named_queries_are_the_workflows_own() -> None:
    assert _query_name(SessionWorkflow.status) == SESSION_STATUS_QUERY
    assert _query_name(AgentRunWorkflow.progress) == RUN_PROGRESS_QUERY
