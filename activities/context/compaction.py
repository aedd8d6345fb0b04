"""The compaction activity (SPEC §11, issue 10): summarise the older part of a session's context
with a summariser model and append a compaction marker; the next request starts from it.

Steps, each a call into the pure modules beside this one:
1. the context as requests see it (`context_view`), repaired for summarising (an errored turn's
   results dropped, §11.4);
2. the cut (`compaction_plan.split_for_compaction`): recent turns kept verbatim, a tool call
   never split from its results, deeper on each further attempt;
3. the summary: the summariser is asked in chunks no larger than half its window, partial
   summaries merged (and merges split again when they would not fit), a split turn's prefix
   summarised on its own; each call bounded by the idle limit, the whole by a hard timeout;
4. beside it, the progress record (`progress_record`), folded into the previous one: the task,
   files, failures and open calls no summariser can lose;
5. checks before anything is written: an empty or failed summary, one that frees nothing, or a
   baseline (system prompt + summary + what must stay verbatim) over the budget end the
   compaction with a terminal outcome and leave the history as it was;
6. the marker, appended (never rewriting), under the id the workflow chose: a retried attempt
   that finds it returns what it recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextvars import ContextVar

from temporalio import activity

from activities.config_failure import config_failure
from activities.context.compaction_plan import (
    CompactionSplit,
    check_baseline,
    chunk_for_summary,
    compaction_reserve_tokens,
    keep_recent_budget,
    max_summary_chunk_tokens,
    plan_without_oversized,
    split_for_compaction,
)
from activities.context.context_view import context_entries, is_summary
from activities.context.progress_record import (
    ProgressRecord,
    render_progress_record,
    update_progress_record,
)
from activities.context.request_context import without_answered_partials
from activities.context.safeguard_summary import (
    MAX_SUMMARY_CHARS,
    SUMMARIZER_SYSTEM_PROMPT,
    assemble_summary,
    build_merge_prompt,
    build_summary_instructions,
    build_summary_prompt,
    format_recent_turns,
    format_split_turn_context,
    split_preserved_turns,
    split_turn_instructions,
)
from activities.context.token_estimate import (
    calibrated_context_tokens,
    estimate_text_tokens,
    estimate_tokens,
    request_overhead_tokens,
)
from activities.context.transcript_repair import ErroredTurnResults, repair_tool_result_pairing
from activities.liveness import IdleTimeout, heartbeat_forever, with_idle_limit
from activities.providers.base import (
    Finish,
    ModelRequest,
    ProviderError,
    TextDelta,
)
from activities.providers.resolve import ModelUnavailable, ProviderResolver, ResolvedModel
from activities.stream_publishers import SessionPublishers
from activities.system_prompt import build_system_prompt
from activities.tools.specs import tool_specs
from activities.transcript_store import TranscriptStore
from agentlane.context_ops import (
    COMPACT_CONTEXT,
    CompactionInput,
    CompactionOutcome,
    CompactionResult,
)
from agentlane.events import Announcement, EventKind
from agentlane.ids import storage_name
from agentlane.pricing import priced
from agentlane.run import ModelRef
from agentlane.transcript import Role, TranscriptEntry
from agentlane.usage import Usage
from workflows.policy.preemptive_check import SAFETY_MARGIN, prompt_budget_tokens

log = logging.getLogger(__name__)

# How much of the prompt budget a summary may take (the rest is for kept turns and the answer).
SUMMARY_BUDGET_SHARE = 0.3
# Characters per token the summary cap is converted with.
CHARS_PER_TOKEN = 4
# A merge that would not fit the summariser is split into groups of this many summaries.
MERGE_FAN_IN = 4


# The summariser calls of the compaction in progress (one per activity task): they cost money and
# count toward the run whatever the compaction's outcome.
_SPENT: ContextVar[list[Usage]] = ContextVar("summariser_calls")


def _spent_so_far() -> Usage:
    total = Usage()
    for call in _SPENT.get([]):
        total = total.plus(call)
    return total


class SummaryFailed(Exception):
    """The summariser failed, timed out or answered nothing."""


def summary_char_cap(prompt_budget: int) -> int:
    return max(2_000, min(MAX_SUMMARY_CHARS, int(prompt_budget * SUMMARY_BUDGET_SHARE) * 4))


class CompactionActivity:
    def __init__(
        self,
        store: TranscriptStore,
        resolver: ProviderResolver,
        publishers: SessionPublishers,
    ) -> None:
        self.store = store
        self.resolver = resolver
        self.publishers = publishers

    @activity.defn(name=COMPACT_CONTEXT)
    async def compact_context(self, inp: CompactionInput) -> CompactionResult:
        started = time.monotonic()
        announce = [
            *inp.announce,
            Announcement(
                kind=EventKind.COMPACTION_START,
                ts=time.time(),
                data={"compaction": inp.number, "trigger": inp.trigger, "attempt": inp.attempt},
            ),
        ]
        async with self.publishers.lease(activity.client(), inp.session_key) as publisher:
            for announcement in announce:
                publisher.publish(announcement.to_event(inp.session_key, inp.run_id))
            spent = _SPENT.set([])
            try:
                result = await self._compact(inp, started)
                # A result read back from the marker carries the usage it recorded, and spent
                # nothing this time.
                result.usage = result.usage.plus(_spent_so_far())
            finally:
                _SPENT.reset(spent)
            result.duration_ms = int((time.monotonic() - started) * 1000)
            end = Announcement(
                kind=EventKind.COMPACTION_END,
                ts=time.time(),
                text=result.line(),
                data={
                    "compaction": inp.number,
                    "trigger": inp.trigger,
                    "outcome": result.outcome.value,
                    "tokens_before": result.tokens_before,
                    "tokens_after": result.tokens_after,
                    "will_retry": result.compacted and inp.retry,
                    "duration_ms": result.duration_ms,
                },
            )
            publisher.publish(end.to_event(inp.session_key, inp.run_id), urgent=True)
            publisher.wait_on_exit()
        log.info("compaction %s of %s: %s", inp.entry_id, inp.session_key, result.line())
        return result

    # -- the steps -------------------------------------------------------------------------

    async def _compact(self, inp: CompactionInput, started: float) -> CompactionResult:
        key = inp.session_key
        done = await self.store.get(key, inp.entry_id)
        if done is not None:
            return _recorded(done)
        try:
            resolved = await self.resolver.aresolve(inp.model, inp.profile_id)
        except ModelUnavailable as err:
            raise config_failure(err) from err
        window = min(
            resolved.entry.context_window,
            inp.observed_limit or 1 << 62,
            inp.window_cap or 1 << 62,
        )
        compaction = self.resolver.config().compaction
        reserve = compaction_reserve_tokens(
            compaction.reserve_tokens, compaction.reserve_tokens_floor
        )
        budget = prompt_budget_tokens(window, reserve)
        stored = await self.store.read_context(key)
        view = context_entries(stored)
        body = [e for e in view.entries if not is_summary(e)]
        body = repair_tool_result_pairing(
            without_answered_partials(body), errored_turn_results=ErroredTurnResults.DROP
        ).entries
        tools = tool_specs(inp.tools)
        overhead = request_overhead_tokens(
            build_system_prompt(f"sessions/{storage_name(key)}", tools), tools
        )
        summary_tokens = estimate_text_tokens(view.summary or "")
        tokens_before = overhead + summary_tokens + estimate_tokens(body)
        # How far our estimate falls short of the provider's own count: its overflow figure,
        # or the usage it reported for the last call (plus what came after it).
        counted = calibrated_context_tokens(view.entries, usage_valid_from=view.fresh_from)
        truth = max(inp.observed_tokens or 0, counted.tokens if counted.reported else 0)
        underestimate = truth / tokens_before if truth and tokens_before else 1.0
        # What the kept turns and the summary are sized against: the budget as the run's check
        # before each call reads it (our estimate padded by its safety margin), less the system
        # prompt and tools. Sized against the bare budget, a small window's compacted context
        # failed that check at once and was compacted a second time.
        room = max(1, int(budget / SAFETY_MARGIN) - overhead)
        # Refused as too long with no figure, though it fits the budget by every count we
        # have: the provider's window is smaller than we know.
        unmeasured = (
            inp.trigger == "overflow"
            and inp.observed_tokens is None
            and inp.observed_limit is None
            and max(tokens_before, truth) <= budget
        )
        keep = keep_recent_budget(
            room,
            inp.attempt,
            configured=compaction.keep_recent_tokens,
            underestimate=underestimate,
            unmeasured_overflow_body=estimate_tokens(body) if unmeasured else None,
        )
        split = split_for_compaction(body, keep)
        if split.nothing_to_compact:
            return CompactionResult(
                outcome=CompactionOutcome.NOTHING_TO_COMPACT,
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                kept=len(split.kept),
                message=nothing_to_compact_text(split.kept, budget),
            )
        turn_start = split.turn_prefix[0] if split.turn_prefix else None
        kept_tokens = estimate_tokens(split.kept) + (
            estimate_tokens([turn_start]) if turn_start else 0
        )
        cap = summary_char_cap(room)
        baseline = check_baseline(
            # The budget keeps room for the answer; when the provider named its window, that
            # window is the hard limit (SPEC §5.6): a context that fits it is compacted and
            # sent, even if it eats into the room the budget would keep.
            context_window=window if inp.observed_limit else budget,
            full_window=None if inp.observed_limit else window,
            provider_stated=inp.observed_limit is not None and window == inp.observed_limit,
            system_prompt_tokens=overhead,
            summary_tokens=cap // CHARS_PER_TOKEN,
            kept_tokens=_must_keep_tokens(split.kept, turn_start),
        )
        if not baseline.fits:
            return CompactionResult(
                outcome=CompactionOutcome.BASELINE_TOO_LARGE,
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                kept=len(split.kept),
                message=baseline.message or "",
            )
        summariser, summariser_ref = await self._summariser(inp, resolved)
        summarised = [*split.to_summarize, *split.turn_prefix]
        try:
            async with asyncio.timeout(compaction.timeout_seconds):
                text = await self._summary(
                    inp,
                    summariser,
                    split,
                    view.summary,
                    compaction.instructions,
                    compaction.recent_turns,
                    cap,
                )
        except (SummaryFailed, TimeoutError) as err:
            why = str(err) or f"no summary within {compaction.timeout_seconds} s"
            return CompactionResult(
                outcome=CompactionOutcome.SUMMARY_FAILED,
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                summariser=summariser_ref,
                message=f"the summariser ({summariser_ref}) failed: {why}; the history was "
                "left as it was",
            )
        previous = _previous_record(view.compaction)
        record = update_progress_record(previous, summarised)
        summary = assemble_summary(
            text,
            split_turn=format_split_turn_context(split.turn_prefix) if split.turn_prefix else "",
            preserved_turns=text_preserved(summarised, compaction.recent_turns),
            progress=render_progress_record(record),
            max_chars=cap,
        )
        tokens_after = overhead + estimate_text_tokens(summary) + kept_tokens
        if tokens_after >= tokens_before:
            return CompactionResult(
                outcome=CompactionOutcome.NO_PROGRESS,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                summariser=summariser_ref,
                message="the summary would not make the context smaller",
            )
        first_kept = split.kept[0].id if split.kept else None
        spent = _spent_so_far()
        marker = TranscriptEntry(
            id=inp.entry_id,
            role=Role.COMPACTION,
            ts=time.time(),
            run_id=inp.run_id,
            text=summary,
            model=summariser_ref,
            meta={
                "first_kept_id": first_kept,
                "turn_start_id": turn_start.id if turn_start is not None else None,
                "trigger": inp.trigger,
                "attempt": inp.attempt,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "summarized": len(summarised),
                "kept": len(split.kept),
                "progress": record.model_dump(mode="json"),
                "duration_ms": int((time.monotonic() - started) * 1000),
                # A retry that finds this marker reports what its summary cost.
                "usage": spent.model_dump(mode="json", exclude_defaults=True),
            },
        )
        await self.store.append(key, [marker])
        return CompactionResult(
            outcome=CompactionOutcome.COMPACTED,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            summarized=len(summarised),
            kept=len(split.kept),
            summariser=summariser_ref,
        )

    async def _summariser(
        self, inp: CompactionInput, resolved: ResolvedModel
    ) -> tuple[ResolvedModel, str]:
        """The configured summariser, else the catalogue's lighter sibling when it is served by
        the same endpoint (same keys; a config that points the model at a proxy points only the
        model there), else the session's model."""
        own = inp.model.label()
        configured = self.resolver.config().compaction.model
        wanted = configured or resolved.entry.summariser
        if not wanted or wanted == own:
            return resolved, own
        provider, _, model = wanted.partition("/")
        ref = ModelRef(provider=provider, model=model)
        same_provider = provider == resolved.entry.provider
        try:
            # The run's profile goes with it when the keys are the same provider's.
            other = await self.resolver.aresolve(ref, inp.profile_id if same_provider else None)
        except ModelUnavailable as err:
            log.warning("summariser %s unavailable (%s); %s summarises itself", wanted, err, own)
            return resolved, own
        if configured is None and other.entry.base_url != resolved.entry.base_url:
            return resolved, own
        return other, wanted

    async def _summary(
        self,
        inp: CompactionInput,
        summariser: ResolvedModel,
        split: CompactionSplit,
        previous: str | None,
        custom: str | None,
        recent_turns: int,
        cap: int,
    ) -> str:
        instructions = build_summary_instructions(custom)
        window = summariser.entry.context_window
        max_output = min(summariser.entry.max_output_tokens, max(256, cap // CHARS_PER_TOKEN))
        to_summarise = split_preserved_turns(split.to_summarize, recent_turns).summarizable
        # An entry over half the summariser's window cannot go in any request: it is named in
        # a note instead (its start survives in the progress record when it was the task).
        fitting = plan_without_oversized(to_summarise, window)
        to_summarise = fitting.small
        partials: list[str] = []
        if to_summarise:
            chunk_tokens = max_summary_chunk_tokens(to_summarise, window)
            for index, chunk in enumerate(chunk_for_summary(to_summarise, chunk_tokens)):
                prompt = build_summary_prompt(
                    chunk, instructions, previous_summary=previous if index == 0 else None
                )
                partials.append(await self._ask(inp, summariser, prompt, max_output))
        elif previous:
            partials.append(previous)
        body = await self._merge(inp, summariser, partials, instructions, max_output)
        if fitting.notes:
            body = "\n".join([body, *fitting.notes]).strip()
        if split.turn_prefix:
            prefix = await self._ask(
                inp,
                summariser,
                build_summary_prompt(split.turn_prefix, split_turn_instructions(instructions)),
                max_output,
            )
            body = f"{body}\n\n**Turn Context (split turn):**\n\n{prefix}" if body else prefix
        # Empty only when everything summarised is quoted verbatim (the recent turns) and there
        # was no summary before: the assembled summary still holds those and the record.
        return body

    async def _merge(
        self,
        inp: CompactionInput,
        summariser: ResolvedModel,
        partials: Sequence[str],
        instructions: str,
        max_output: int,
    ) -> str:
        """One summary from many; a merge that would not fit half the summariser's window is
        done in groups first."""
        parts = [p for p in partials if p.strip()]
        half = summariser.entry.context_window // 2
        while len(parts) > 1:
            prompt = build_merge_prompt(parts, instructions)
            if estimate_text_tokens(prompt) * 1.2 <= half or len(parts) <= 2:
                return await self._ask(inp, summariser, prompt, max_output)
            groups = [parts[i : i + MERGE_FAN_IN] for i in range(0, len(parts), MERGE_FAN_IN)]
            parts = [
                await self._ask(inp, summariser, build_merge_prompt(g, instructions), max_output)
                for g in groups
            ]
        return parts[0] if parts else ""

    async def _ask(
        self, inp: CompactionInput, summariser: ResolvedModel, prompt: str, max_output: int
    ) -> str:
        request = ModelRequest(
            model=summariser.model_id,
            system=SUMMARIZER_SYSTEM_PROMPT,
            entries=[
                TranscriptEntry(id="summary-request", role=Role.USER, ts=time.time(), text=prompt)
            ],
            tools=[],
            thinking="off",
            max_output_tokens=max_output,
            purpose="summary",
        )
        parts: list[str] = []

        beats = asyncio.create_task(heartbeat_forever())
        try:
            stream = summariser.provider.stream(request, summariser.credentials)
            async for event in with_idle_limit(stream, inp.idle_timeout_seconds):
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, Finish):
                    # A call that answered is paid for, even if its answer is of no use.
                    call = priced(event.usage, summariser.entry.prices)
                    _SPENT.get([]).append(call)
                    if event.stop_reason == "error":
                        raise SummaryFailed("the summariser stopped with an error")
        except IdleTimeout as err:
            raise SummaryFailed(str(err)) from err
        except ProviderError as err:
            raise SummaryFailed(f"{err.status or ''} {err.message[:300]}".strip()) from err
        finally:
            beats.cancel()
        text = "".join(parts).strip()
        if not text:
            raise SummaryFailed("the summariser answered nothing")
        return text


def text_preserved(entries: Sequence[TranscriptEntry], recent_turns: int) -> str:
    preserved = split_preserved_turns(entries, recent_turns).preserved
    return format_recent_turns(preserved) if preserved else ""


def _must_keep_tokens(kept: Sequence[TranscriptEntry], turn_start: TranscriptEntry | None) -> int:
    """What no deeper cut can remove: the last user message and everything after it (the turn
    in progress), plus a split turn's opening message."""
    last_user = max((i for i, e in enumerate(kept) if e.role == Role.USER), default=0)
    tokens = estimate_tokens(kept[last_user:])
    return tokens + (estimate_tokens([turn_start]) if turn_start is not None else 0)


def _previous_record(compaction: TranscriptEntry | None) -> ProgressRecord | None:
    if compaction is None:
        return None
    raw = compaction.meta.get("progress")
    if not isinstance(raw, dict):
        return None
    try:
        return ProgressRecord.model_validate(raw)
    except ValueError:
        return None


def _recorded(marker: TranscriptEntry) -> CompactionResult:
    meta = marker.meta
    return CompactionResult(
        outcome=CompactionOutcome.COMPACTED,
        tokens_before=int(meta.get("tokens_before") or 0),
        tokens_after=int(meta.get("tokens_after") or 0),
        summarized=int(meta.get("summarized") or 0),
        kept=int(meta.get("kept") or 0),
        summariser=marker.model or "",
        usage=Usage.model_validate(meta.get("usage") or {}),
    )


def nothing_to_compact_text(kept: Sequence[TranscriptEntry], budget: int) -> str:
    """Why compaction cannot help, and what can: the most recent turns alone are too large, most
    often for one entry (a pasted document) that stays in every later request until a reset."""
    tokens = estimate_tokens(kept)
    sized = [(estimate_tokens([entry]), entry) for entry in kept]
    if tokens <= budget:
        # The provider counted more than this engine estimates (another tokenizer, images):
        # no single entry is to blame.
        return (
            f"nothing before the most recent turns to summarise: they come to about {tokens} "
            f"tokens by this engine's estimate, within the {budget}-token budget, but the "
            "provider counts them as more. Reset the session (`agentlane reset`) or use a "
            "model with a larger context window"
        )
    text = (
        f"nothing before the most recent turns to summarise: they alone take about {tokens} "
        f"tokens of a {budget}-token budget"
    )
    largest, entry = max(sized, key=lambda pair: pair[0])
    if largest * 4 < budget:
        return f"{text}. Reset the session (`agentlane reset`) or use a model with a larger window"
    role = entry.role.value
    article = "an" if role == "assistant" else "a"
    return (
        f"{text}, the largest {article} {role} entry of about {largest} tokens ({entry.id}). "
        "It stays in every later request: reset the session (`agentlane reset`) or use a "
        "model with a larger context window"
    )
