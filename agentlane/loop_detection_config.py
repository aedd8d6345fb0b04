"""Settings of tool-loop detection (SPEC §14 `tools.loopDetection`). A contract carried by session
settings and run requests; the detectors themselves are `workflows/policy/loop_detection.py`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

DEFAULT_HISTORY_SIZE = 30
DEFAULT_WARNING = 10
DEFAULT_CRITICAL = 20
DEFAULT_BREAKER = 30


class LoopDetectionConfig(BaseModel):
    """`tools.loopDetection` of the original, flattened. Non-positive numbers mean "default".

    Unlike the original it is on by default: an unattended 48 h run must not burn its budget in
    a loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    history_size: int = DEFAULT_HISTORY_SIZE
    warning_threshold: int = DEFAULT_WARNING
    critical_threshold: int = DEFAULT_CRITICAL
    global_circuit_breaker_threshold: int = DEFAULT_BREAKER
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
