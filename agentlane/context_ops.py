"""Contracts of the context activities (issue 10): compaction and tool-result truncation.

Small records only: the transcript stays in the store; the workflow names the session, the
marker id to write (so a retried activity writes it once) and the budget, and gets back counts
and a one-line summary.
"""

from __future__ import annotations

from enum import StrEnum

from agentlane.events import Announcement
from agentlane.run import ModelRef
from agentlane.usage import Usage
from agentlane.wire import CompactModel, TraceCarrier

COMPACT_CONTEXT = "compact_context"
TRUNCATE_TOOL_RESULTS = "truncate_tool_results"


class CompactionOutcome(StrEnum):
    COMPACTED = "compacted"
    # Nothing before the recent turns to summarise: compaction cannot free anything.
    NOTHING_TO_COMPACT = "nothing_to_compact"
    # The summary would not make the context smaller.
    NO_PROGRESS = "no_progress"
    # System prompt + summary + the turns that must stay verbatim exceed the window.
    BASELINE_TOO_LARGE = "baseline_too_large"
    # The summariser failed, timed out or answered nothing: the history stays as it was.
    SUMMARY_FAILED = "summary_failed"


class CompactionInput(TraceCarrier):
    session_key: str
    run_id: str
    # The compaction marker's id; a retried attempt that finds it returns what it recorded.
    entry_id: str
    # The run's model (its window and, unless configured otherwise, the summariser).
    model: ModelRef
    profile_id: str | None = None
    # overflow, timeout_recovery, precheck, threshold, manual.
    trigger: str = "overflow"
    attempt: int = 1
    max_attempts: int = 3
    # The provider's own figures from the overflow error, when it gave them: the prompt's
    # size and the window it enforces (which may be smaller than the catalogue says).
    observed_tokens: int | None = None
    observed_limit: int | None = None
    # The agent's cap on the window, when it has one (`ModelCallInput.context_window_cap`).
    window_cap: int | None = None
    tools: list[str] = []
    # Per-summariser-call idle limit (the whole compaction is bounded by the config's timeout).
    idle_timeout_seconds: int = 120
    # The run's n-th compaction (event ids), and whether the run makes its call again after a
    # successful one (told to watchers in `compaction_end`).
    number: int = 1
    retry: bool = True
    # Lifecycle events the run has not published yet: they go out first.
    announce: list[Announcement] = []


class CompactionResult(CompactModel):
    outcome: CompactionOutcome
    tokens_before: int = 0
    tokens_after: int = 0
    # Entries summarised, and kept verbatim.
    summarized: int = 0
    kept: int = 0
    summariser: str = ""
    duration_ms: int = 0
    # What a user is told when compaction could not help (BASELINE_TOO_LARGE, SUMMARY_FAILED).
    message: str = ""
    # The summariser calls' usage and cost (priced by the activity), for the run's totals.
    usage: Usage = Usage()

    @property
    def compacted(self) -> bool:
        return self.outcome == CompactionOutcome.COMPACTED

    def line(self) -> str:
        """One line for the Temporal UI and the log."""
        if self.compacted:
            return (
                f"compacted {self.summarized} entries: ~{self.tokens_before} -> "
                f"~{self.tokens_after} tokens ({self.summariser}, {self.duration_ms} ms)"
            )
        return f"not compacted ({self.outcome.value}): {self.message}"[:300]


class TruncationInput(CompactModel):
    session_key: str
    run_id: str
    entry_id: str
    model: ModelRef
    observed_limit: int | None = None


class TruncationResult(CompactModel):
    truncated: int = 0
    chars_removed: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
