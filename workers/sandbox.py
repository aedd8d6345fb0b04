"""How a worker runs workflow code: without the SDK's sandbox by default, or in it.

The SDK's sandbox re-imports (re-executes) a workflow's module for every new workflow instance so
that module-level state cannot leak between workflows, and proxies the modules imported inside it
so a non-deterministic call (`time.time()`, `random`, file I/O) is refused at run time. Both have
a price, and here both bought little:

- Re-importing was 27 % of the worker's Python samples under load (py-spy, 300 sessions), so the
  project's modules were passed through (`passthrough`): imported once per worker. A passed-
  through module's own calls are then no longer checked, so the sandbox stopped guarding the
  project's workflow code, which is all the workflow code a deployment runs (users add tools,
  which run in activities, not workflows).
- What it still cost was its per-task machinery: every workflow activation and every payload
  sequence in it entered the sandbox through a freshly compiled `exec` and an import hook, 16 %
  of the worker's CPU a step (bench_engine, `AGENTLANE_SANDBOX=passthrough` against `off`).

So workflows run unsandboxed (`off`, the SDK's `UnsandboxedWorkflowRunner`), and the guard lives in
the tests, where it costs nothing at run time: `tests/unit/test_workflow_determinism.py` reads every
module under `workflows/` for a clock, randomness, I/O or thread import and `datetime.now()`, and
`tests/test_replay.py` replays every recorded history under the SDK's strict sandbox, under the
pass-through one and without one.

`AGENTLANE_SANDBOX=passthrough` runs the sandbox with the project's modules passed through;
`strict` (or the older `AGENTLANE_SANDBOX_RELOAD=1`) the SDK's default, re-importing everything
per workflow with every runtime check: for developing workflow code, or to measure the difference.
"""

from __future__ import annotations

import os
from typing import Literal

from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

SandboxMode = Literal["off", "passthrough", "strict"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("off", "passthrough", "strict")

# Deterministic and stateless at module level: the contracts (pydantic models, ids, error
# kinds) and the workflow code with its pure policies.
PASSED_THROUGH = ("agentlane", "workflows")


class UnknownSandboxMode(ValueError):
    pass


def sandbox_mode_from_env() -> SandboxMode:
    """`AGENTLANE_SANDBOX` (off, passthrough, strict; default off); `AGENTLANE_SANDBOX_RELOAD=1`
    is the older spelling of strict."""
    if os.environ.get("AGENTLANE_SANDBOX_RELOAD") == "1":
        return "strict"
    value = os.environ.get("AGENTLANE_SANDBOX", "off").strip().lower() or "off"
    for mode in SANDBOX_MODES:
        if value == mode:
            return mode
    raise UnknownSandboxMode(
        f"AGENTLANE_SANDBOX is {value!r}; use one of {', '.join(SANDBOX_MODES)}"
    )


def workflow_runner(mode: SandboxMode | None = None) -> WorkflowRunner:
    """The runner every worker and replayer of this project uses; None: from the environment."""
    mode = sandbox_mode_from_env() if mode is None else mode
    if mode == "off":
        return UnsandboxedWorkflowRunner()
    if mode == "strict":
        return SandboxedWorkflowRunner()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    )
