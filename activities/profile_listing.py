"""Auth-profile routing behind activities: lists a provider's profiles (ids and types from the
auth store, the config's order and failover settings; keys stay here, DESIGN decision 2) with
the shared usage state, updates one profile's usage race-free, and lets a model call check its
profile just before sending.

The shared state is in the store (`store/`: one row per profile, with a version), changed by
compare-and-set on that version: a run sends the usage it saw and the usage it computed (the
cooldown math is the workflow's, `workflows/policy/auth_profiles.py`); when another run changed
that profile in between, nothing is written and the run recomputes from what is there. A
success's "used" mark commutes with everything and is merged (retried until its write lands).
So 200 sessions failing at once lose no update, and every session sees a cooldown as soon as
it is written.

Why not an entity workflow: it sustains only a few updates per second, and every failure of
every session would go through it. Measured cost (bench/bench_fault_storm.py, 200 sessions, 3
profiles, 30 % 429s): nothing per step; one read at a run's start and one write at its end; per
429 one read and one write (2-3 writes per 429 counting successes, 2-4 compare-and-set refusals
under that contention); the model activity's check is one keyed read per call. Every host that
reaches the store sees a cooldown as soon as it is written."""

from __future__ import annotations

from temporalio import activity

from activities.auth_store import AuthStore
from agentlane.config import AgentlaneConfig, ApiKind, ConfigError, ConfigWatcher
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
from store.interface import Store
from store.models import UsageRow

# A window must reach this far past the activity's own clock to stop a call: worker clocks
# differ a little from workflow time, and a window about to end is better tried than skipped.
COOLING_MARGIN_SECONDS = 0.5


def _usage(row: UsageRow | None) -> ProfileUsage | None:
    return None if row is None else ProfileUsage.model_validate_json(row.usage)


async def clear_health(store: Store, profile_id: str) -> bool:
    """Forget a profile's cooldown, disable and error counts (an operator who set a new key or
    paid the bill); its last use stays. False when it had nothing to forget."""
    for _ in range(5):  # compare-and-set against the runs that write it too
        row = await store.usage_row(profile_id)
        usage = _usage(row)
        if usage is None or usage == ProfileUsage(last_used=usage.last_used):
            return False
        cleared = ProfileUsage(last_used=usage.last_used)
        assert row is not None
        if await store.set_usage(profile_id, row.version, cleared.model_dump_json()):
            return True
    return False


class SharedCooldowns:
    """The shared state as a model call sees it just before sending. A run picks its profile
    when it schedules the call; the call may then wait for a free slot while another session's
    429 (on any host) cools that very profile. One keyed read per call."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def cooling(self, profile_id: str, model_id: str, now: float) -> ProfileUsage | None:
        """The profile's usage when it is cooling down for `model_id` well past `now`."""
        usage = _usage(await self.store.usage_row(profile_id))
        if usage is None or not usage.blocks(now + COOLING_MARGIN_SECONDS, model_id):
            return None
        return usage


class ProfileListing:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.config = ConfigWatcher(settings.data_dir)

    async def _read(self) -> ProfileState:
        rows = await self.store.usage_rows()
        return ProfileState(
            usage={r.profile_id: ProfileUsage.model_validate_json(r.usage) for r in rows},
            order=await self.store.profile_orders(),
            last_good=await self.store.last_good(),
        )

    async def _update(self, inp: UsageUpdate) -> UsageUpdateResult:
        while True:
            row = await self.store.usage_row(inp.profile_id)
            current = _usage(row)
            new = inp.new
            if inp.touch:
                base = current or ProfileUsage()
                last = max(base.last_used or 0.0, new.last_used or 0.0) or None
                new = base.model_copy(update={"last_used": last})
            elif current != inp.expected:
                return UsageUpdateResult(applied=False, current=current)
            written = await self.store.set_usage(
                inp.profile_id,
                row.version if row else None,
                new.model_dump_json(),
                last_good_for=inp.good_for,
            )
            if written:
                return UsageUpdateResult(applied=True, current=new)
            # Another writer got there between the read and the write: a "used" mark commutes
            # and is merged again; anything else goes back to the run to recompute.

    @activity.defn(name=UPDATE_PROFILE_USAGE)
    async def update_profile_usage(self, inp: UsageUpdate) -> UsageUpdateResult:
        return await self._update(inp)

    async def _list(self, inp: ListProfilesInput) -> ListedProfiles:
        provider = inp.provider
        config = self.config.current()
        order = list(config.auth_order.get(provider, []))
        store = await AuthStore(self.settings, declared=config.auth_profiles).load(self.store)
        stored = store.profiles()
        ids = store.profile_ids(provider, order)
        shared = await self._read()
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
        return await self._list(inp)


def _offline(config: AgentlaneConfig, ref: str) -> bool:
    entry = config.models.get(ref)
    return entry is not None and entry.api == ApiKind.OFFLINE


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
    if primary is not None and _offline(config, primary) and not _offline(config, requested):
        # A session on a real provider never falls back to the offline stand-in: it is no
        # answer to a failed call, and its "success" would hide the failure.
        primary = None
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
