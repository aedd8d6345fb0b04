"""The workflow sandbox, paid once per process instead of once per workflow.

By default the SDK's sandbox re-imports (re-executes) a workflow's module for every new workflow
instance so that module-level state cannot leak between workflows. Under load that was 27 % of
the worker's Python samples (py-spy, 300 sessions), 16 % compiling and executing module source:
every run workflow re-ran `workflows/agent_run.py` and its class decorators (the helpers and
`agentlane` were already passed through by `imports_passed_through`; passing only them saved
nothing measurable). The project's modules hold no module-level state a workflow changes
(constants, frozen sets, retry policies, pure functions and the workflow classes), so they are
passed through: imported once by the worker, shared by every instance.

The price, measured: the sandbox's runtime checks see a module's calls through the restricted
modules it imported inside the sandbox, so a passed-through module's own call to `time.time()`
or `random` is no longer refused. That loss is the workflow definition modules' own code (the
helpers were already passed through by `imports_passed_through`). The guard moves to the tests:
`tests/unit/test_workflow_determinism.py` reads every module under `workflows/` for a clock,
randomness, I/O or thread import and `datetime.now()`, and `tests/test_replay.py` replays every
recorded history under the strict, reloading sandbox as well as under this one. Third-party
modules other than the SDK's own passthroughs are still re-imported per workflow.

`AGENTLANE_SANDBOX_RELOAD=1` brings back the SDK's default: to measure the difference
(`bench/bench_engine.py` prints both) or to develop workflow code under the strict checks.
`AGENTLANE_SANDBOX=off` runs workflows without the sandbox (the SDK's unsandboxed runner), to
measure what the sandbox still costs each workflow task.
"""

from __future__ import annotations

import os

from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

# Deterministic and stateless at module level: the contracts (pydantic models, ids, error
# kinds) and the workflow code with its pure policies.
PASSED_THROUGH = ("agentlane", "workflows")


def workflow_runner(reload: bool | None = None) -> WorkflowRunner:
    """The runner every worker and replayer of this project uses; `reload` = the SDK default."""
    if reload is None and os.environ.get("AGENTLANE_SANDBOX") == "off":
        return UnsandboxedWorkflowRunner()
    if reload is None:
        reload = os.environ.get("AGENTLANE_SANDBOX_RELOAD") == "1"
    if reload:
        return SandboxedWorkflowRunner()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )
