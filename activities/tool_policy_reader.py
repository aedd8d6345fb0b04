"""Reads the tool policy a run starts with (SPEC §13.3) from the worker's live config: a local
activity at the run's start, so a change to `config.toml` applies from the next run on and the
run itself keeps the policy it started with (in its history: names and patterns, no secret)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from activities.config_failure import config_failure
from agentlane.config import ConfigError, ConfigWatcher, UnknownAgentError
from agentlane.tool_policy_config import (
    READ_TOOL_POLICY,
    ToolPolicyInput,
    ToolPolicyRequest,
    policy_input,
)


class ToolPolicyReader:
    def __init__(self, config: ConfigWatcher) -> None:
        self.config = config

    @activity.defn(name=READ_TOOL_POLICY)
    async def read_tool_policy(self, req: ToolPolicyRequest) -> ToolPolicyInput:
        return await asyncio.to_thread(self._read, req)

    def _read(self, req: ToolPolicyRequest) -> ToolPolicyInput:
        try:
            config = self.config.current(strict=True)
            try:
                agent = config.agent(req.agent_id).tool_rules()
            except UnknownAgentError:
                agent = None  # an agent the config does not name has no layer of its own
        except ConfigError as err:
            # Nothing runs on a policy it could not read.
            raise config_failure(err) from err
        return policy_input(config.tools, agent, req.agent_id, req.routing, req.sender)
