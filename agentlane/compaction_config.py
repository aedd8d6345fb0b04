"""Settings of context compaction (`[compaction]` in the config; SPEC §11, issue 10). Read by the
compaction activity; the decisions of when to compact are `workflows/policy/`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# A compaction (every summariser call, merges included) is bounded by this; past it the
# compaction ends without compacting and the history stays as it was.
DEFAULT_TIMEOUT_SECONDS = 300


class CompactionConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # The summariser ("provider/model"). None: the model the catalogue names as the session
    # model's lighter sibling (`summariser`), else the session's model itself.
    model: str | None = None
    # Room kept free for the answer (SPEC §11.1 reserveTokens; never below 20 000, scaled down
    # on small windows by the §10.3 rule). None: the original's default.
    reserve_tokens: int | None = Field(default=None, gt=0)
    # The reserve never goes below this (the original's reserveTokensFloor, 20 000); lower it
    # to let small windows hold more prompt.
    reserve_tokens_floor: int = Field(default=20_000, ge=0)
    # Recent context kept verbatim (pi's keepRecentTokens). None: 30 % of the prompt budget, at
    # most 20 000 tokens.
    keep_recent_tokens: int | None = Field(default=None, gt=0)
    # Recent user turns quoted verbatim at the end of a summary (0-12).
    recent_turns: int = Field(default=3, ge=0, le=12)
    timeout_seconds: int = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0)
    # Extra instructions for the summariser (≤ 800 characters are used).
    instructions: str | None = None
