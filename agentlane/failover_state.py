"""What a run carries of its failover across continue-as-new: the model fallback chain's
position and attempts (SPEC §8.2-8.3), the config read at its start, and the §4.2 counters that
are not plain integers. Data only; the decisions are `workflows/policy/`'s."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.errors import FailoverReason
from agentlane.profile_listing import FailoverConfig


class FallbackAttemptRecord(BaseModel):
    """One failed or skipped candidate of the chain, as the "All models failed" summary lists
    it."""

    provider: str
    model: str
    error: str
    reason: FailoverReason | None = None
    status: int | None = None


class FallbackState(BaseModel):
    """`workflows/policy/model_fallback.FallbackChain`, serialisable."""

    candidates: list[str]
    position: int = 0
    attempts: list[FallbackAttemptRecord] = Field(default_factory=list)
    probed_providers: list[str] = Field(default_factory=list)
    throttle: dict[str, float] = Field(default_factory=dict)
    running_probe: str | None = None


class RunFailover(BaseModel):
    """The failover part of a run's carry."""

    config: FailoverConfig = Field(default_factory=FailoverConfig)
    chain: FallbackState | None = None
    # A profile the user pinned to the session: never rotated away from (SPEC §7.5).
    locked_profile: str | None = None
    # A profile used while it cools down, on purpose (one probe near its window's end, §8.2).
    probe_profile: str | None = None
    same_model_idle_retries: int = 0
    last_retry_reason: FailoverReason | None = None
    # Waits for a cooling profile or model so far, and their total (bounded by the session's
    # max_wait_seconds, like every other retry).
    waits: int = 0
    waited_seconds: float = 0.0
    # Transient server errors (issue 24): the current call's retries and their waits (reset
    # when a call succeeds), and whether the whole chain was retried once (SPEC §8.4).
    transient_retries: int = 0
    overload_retries: int = 0
    transient_waited: float = 0.0
    chain_retried: bool = False
    # The same call's attempts and waits up to its last give-up, and the wait before the chain
    # was made again (SPEC §8.4): the next give-up counts them too ("on 6 attempts, after
    # waiting 20 s in all").
    attempts_before_chain: int = 0
    waited_before_chain: float = 0.0
