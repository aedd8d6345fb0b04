"""A run's context-recovery state, carried across continue-as-new (issue 10)."""

from __future__ import annotations

from pydantic import BaseModel


class RunContextState(BaseModel):
    """The counters of SPEC §4.5 (overflow compactions, the one-shot truncation) and §4.6.4
    (timeout compactions), and how many markers the run wrote (their ids)."""

    compactions: int = 0
    truncations: int = 0
    overflow_compactions: int = 0
    timeout_compactions: int = 0
    truncation_tried: bool = False
