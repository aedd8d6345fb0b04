"""The tool-result truncation activity (SPEC §4.5 step 3, §10.1): the one-shot recovery that cuts
oversized tool results in the session when compaction could not make room.

The stored results stay whole: a truncation marker lists the cut texts by entry id, and requests
send those instead (`context_view`). What is cut is decided by
`tool_result_truncation.plan_recovery_truncation`: every result over the per-result maximum,
then, newest first, the rest when together they exceed it.
"""

from __future__ import annotations

import time

from temporalio import activity

from activities.config_failure import config_failure
from activities.context.context_view import context_entries, is_summary
from activities.context.token_estimate import estimate_tokens
from activities.context.tool_result_truncation import apply_replacements, plan_recovery_truncation
from activities.providers.resolve import ModelUnavailable, ProviderResolver
from activities.transcript_store import TranscriptStore
from agentlane.context_ops import TRUNCATE_TOOL_RESULTS, TruncationInput, TruncationResult
from agentlane.transcript import Role, TranscriptEntry


class TruncationActivity:
    def __init__(self, store: TranscriptStore, resolver: ProviderResolver) -> None:
        self.store = store
        self.resolver = resolver

    @activity.defn(name=TRUNCATE_TOOL_RESULTS)
    async def truncate_tool_results(self, inp: TruncationInput) -> TruncationResult:
        key = inp.session_key
        done = await self.store.get(key, inp.entry_id)
        if done is not None:
            return _recorded(done)
        try:
            resolved = await self.resolver.aresolve(inp.model, None)
        except ModelUnavailable as err:
            raise config_failure(err) from err
        window = resolved.entry.context_window
        if inp.observed_limit:
            window = min(window, inp.observed_limit)
        stored = await self.store.read_context(key)
        entries = [e for e in context_entries(stored).entries if not is_summary(e)]
        plan = plan_recovery_truncation(entries, window)
        if not plan.changed:
            return TruncationResult()
        replacements = plan.replacements
        after = apply_replacements(entries, replacements)
        result = TruncationResult(
            truncated=len(replacements),
            chars_removed=sum(r.reduction for r in replacements),
            tokens_before=estimate_tokens(entries),
            tokens_after=estimate_tokens(after),
        )
        marker = TranscriptEntry(
            id=inp.entry_id,
            role=Role.TRUNCATION,
            ts=time.time(),
            run_id=inp.run_id,
            meta={
                "replacements": {r.entry_id: r.text for r in replacements},
                **result.model_dump(),
            },
        )
        await self.store.append(key, [marker])
        return result


def _recorded(marker: TranscriptEntry) -> TruncationResult:
    meta = {k: v for k, v in marker.meta.items() if k in TruncationResult.model_fields}
    return TruncationResult.model_validate(meta)
