"""Auth-profile routing behind activities: lists a provider's profiles (ids and types from the
auth store, the config's order and failover settings; keys stay here, DESIGN decision 2) with
the shared usage state, updates one profile's usage race-free, and lets a model call check its
profile just before sending.

The shared state is `data/auth-state.json` (0600), changed under an exclusive file lock with
compare-and-set: a run sends the usage it saw and the usage it computed (the cooldown math is
the workflow's, `workflows/policy/auth_profiles.py`); when another run changed that profile in
between, nothing is written and the run recomputes from what is there. A success's "used" mark
commutes with everything and is merged without compare-and-set. So 200 sessions failing at once
lose no update, and every session sees a cooldown as soon as it is written.

Why not an entity workflow: it sustains only a few updates per second, and every failure of
every session would go through it. Measured cost (bench/bench_fault_storm.py, 200 sessions, 3
profiles, 30 % 429s): nothing per step; one read at a run's start and one write at its end; per
429 one read and one write (2-3 writes per 429 counting successes, 2-4 compare-and-set refusals
under that contention); the model activity's check is one `stat` per call. On several machines
the file must be on shared storage (the same place as the transcripts)."""

from __future__ import annotations

import asyncio
import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager

from temporalio import activity

from activities.auth_store import AuthStore
from agentlane.config import AgentlaneConfig, ConfigError, ConfigWatcher
from agentlane.private_files import private_open, write_private
from agentlane.profile_listing import (
    LIST_PROFILES,
    UPDATE_PROFILE_USAGE,
    FailoverConfig,
    ListedProfiles,
    ListProfilesInput,
    ModelOption,
    UsageUpdate,
    UsageUpdateResult,
)
from agentlane.profile_state import ProfileCredential, ProfileState, ProfileUsage
from agentlane.settings import Settings

STATE_FILE = "auth-state.json"


# A window must reach this far past the activity's own clock to stop a call: worker clocks
# differ a little from workflow time, and a window about to end is better tried than skipped.
COOLING_MARGIN_SECONDS = 0.5


class SharedCooldowns:
    """The shared state as a model call sees it just before sending. A run picks its profile
    when it schedules the call; the call may then wait for a free slot while another session's
    429 cools that very profile. Read at most once per file change (a stat per call)."""

    def __init__(self, settings: Settings) -> None:
        self.path = settings.data_dir / STATE_FILE
        self._stamp: int | None = None
        self._state = ProfileState()

    def _current(self) -> ProfileState:
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return ProfileState()
        if stamp != self._stamp:
            try:
                self._state = ProfileState.model_validate_json(self.path.read_bytes() or b"{}")
            except ValueError:
                return self._state  # caught mid-write by another process: the last good read
            self._stamp = stamp
        return self._state

    def cooling(self, profile_id: str, model_id: str, now: float) -> ProfileUsage | None:
        """The profile's usage when it is cooling down for `model_id` well past `now`."""
        usage = self._current().usage.get(profile_id)
        if usage is None or not usage.blocks(now + COOLING_MARGIN_SECONDS, model_id):
            return None
        return usage


class ProfileListing:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.config = ConfigWatcher(settings.data_dir)
        self.path = settings.data_dir / STATE_FILE

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with private_open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> ProfileState:
        try:
            return ProfileState.model_validate(json.loads(self.path.read_text() or "{}"))
        except FileNotFoundError:
            return ProfileState()

    def _update(self, inp: UsageUpdate) -> UsageUpdateResult:
        with self._locked():
            state = self._read()
            current = state.usage.get(inp.profile_id)
            new = inp.new
            if inp.touch:
                base = current or ProfileUsage()
                last = max(base.last_used or 0.0, new.last_used or 0.0) or None
                new = base.model_copy(update={"last_used": last})
            elif current != inp.expected:
                return UsageUpdateResult(applied=False, current=current)
            usage = {**state.usage, inp.profile_id: new}
            update: dict[str, object] = {"usage": usage}
            if inp.good_for:
                update["last_good"] = {**state.last_good, inp.good_for: inp.profile_id}
            new_state = state.model_copy(update=update)
            write_private(self.path, new_state.model_dump_json().encode())
            return UsageUpdateResult(applied=True, current=new)

    @activity.defn(name=UPDATE_PROFILE_USAGE)
    async def update_profile_usage(self, inp: UsageUpdate) -> UsageUpdateResult:
        return await asyncio.to_thread(self._update, inp)

    def _list(self, inp: ListProfilesInput) -> ListedProfiles:
        provider = inp.provider
        config = self.config.current()
        order = list(config.auth_order.get(provider, []))
        store = AuthStore.for_data_dir(self.settings.data_dir)
        stored = store.profiles()
        ids = store.profile_ids(provider, order)
        shared = self._read()
        mine = {pid: u for pid, u in shared.usage.items() if pid in ids}
        return ListedProfiles(
            profiles=[
                ProfileCredential(id=pid, provider=provider, type=stored[pid].type, usable=True)
                for pid in ids
            ],
            configured_order=order,
            state=ProfileState(
                usage=mine,
                order={p: o for p, o in shared.order.items() if p == provider},
                last_good={p: g for p, g in shared.last_good.items() if p == provider},
            ),
            configured={
                pid: p
                for pid, p in config.auth_profiles.items()
                if p.provider == provider and not p.implied
            },
            failover=(
                failover_config(config, inp.agent_id, inp.model)
                if inp.agent_id is not None and inp.model is not None
                else None
            ),
        )

    @activity.defn(name=LIST_PROFILES)
    async def list_profiles(self, inp: ListProfilesInput) -> ListedProfiles:
        return await asyncio.to_thread(self._list, inp)


def failover_config(config: AgentlaneConfig, agent_id: str, requested: str) -> FailoverConfig:
    """What the config says about failover for a run of `agent_id` on `requested`. Only an
    agent configured in the file has a primary to append (SPEC §8.1); the implicit main agent
    of a config without `[agents.main]` has none."""
    try:
        agent = config.agent(agent_id)
    except ConfigError:
        return FailoverConfig(cooldowns=config.auth_cooldowns)
    configured = agent_id in config.agents
    primary = agent.model if configured else None
    refs = [requested, *([primary] if primary else []), *(agent.fallbacks if configured else [])]
    models: dict[str, ModelOption] = {}
    for ref in refs:
        if ref in config.models and ref not in models:
            window = config.context_window(ref, agent_id)
            capped = window < config.model(ref).context_window
            models[ref] = ModelOption(
                ref=ref,
                context_window=window,
                window_source="agentContextTokens" if capped else "model",
            )
    return FailoverConfig(
        primary=primary,
        fallbacks=list(agent.fallbacks) if configured else [],
        models=models,
        cooldowns=config.auth_cooldowns,
    )
