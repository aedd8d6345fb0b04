"""Moved to `workflows.policy.queue` (SPEC §17); these names stay until the session switches."""

from workflows.policy.queue import Action, Batch, debounce_remaining_ms, decide, next_batch, remove

__all__ = ["Action", "Batch", "debounce_remaining_ms", "decide", "next_batch", "remove"]
