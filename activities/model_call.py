"""The model-call activity: one LLM call, streamed, heartbeating, cancellable.

It reads the conversation from the transcript store (the workflow passes only references),
streams the provider's output to the session's event stream, enforces the 120 s idle limit,
writes the assistant entry to the store and returns a small summary. Every step is idempotent,
so a retried attempt (after a crash) neither duplicates transcript entries nor shows the user the
same text twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.cancellation import cancelled_for_good
from activities.config_failure import config_failure
from activities.context.compaction_plan import compaction_reserve_tokens
from activities.context.context_cache import ContextCache
from activities.context.context_check import ContextCheck, check_context
from activities.context.request_context import (
    PARTIAL_SUFFIX,
    RequestContext,
    context_for_request,
)
from activities.context.token_estimate import request_overhead_tokens
from activities.context.tool_result_truncation import reducible_tool_result_chars
from activities.event_publishing import (
    ResumeGuard,
    published_so_far,
    text_delta_template,
)
from activities.liveness import IdleTimeout, heartbeat_forever, with_idle_limit
from activities.model_output.pipeline import Emission, OutputPipeline
from activities.model_output.think_tags import ReasoningMode
from activities.profile_listing import SharedCooldowns
from activities.progress_details import ModelProgress
from activities.providers.base import (
    Finish,
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    TextDelta,
    ToolCallComplete,
)
from activities.providers.endpoint_hints import auth_header_hint, not_found_text
from activities.providers.error_classification import (
    classify_error,
    format_user_error_text,
    image_size_error,
    is_compaction_failure_error,
    role_ordering_error,
)
from activities.providers.overflow_figures import overflow_figures
from activities.providers.resolve import (
    ModelUnavailable,
    NoCredentials,
    ProviderResolver,
    ResolvedModel,
    UnknownModel,
)
from activities.providers.tool_call_ids import session_call_id
from activities.providers.transport_faults import endpoint_host, transport_kind
from activities.providers.unicode_repair import mended
from activities.refused_images import mark_refused, refused_images, without_refused_images
from activities.rejected_call_events import rejected_call_events
from activities.stream_gaps import record_run_start
from activities.stream_publishers import EventLease, SessionPublishers
from activities.stream_republish import RUNS_SEEN, Republisher
from activities.system_prompt import build_system_prompt
from activities.tools.process_tool import owner_queue
from activities.tools.specs import tool_specs
from activities.tools.workspace import local_workspace
from activities.transcript_store import TranscriptStore, tool_result_entry, user_entries
from agentlane.config import AgentlaneConfig
from agentlane.errors import (
    MODEL_IDLE_TIMEOUT,
    MODEL_PROVIDER_ERROR,
    WORKSPACE_MISSING,
    FailoverReason,
    ModelFailure,
)
from agentlane.events import AgentEvent, EventKind, turn_boundary
from agentlane.model_calls import (
    CALL_MODEL,
    ModelCallInput,
    ModelCallResult,
    ToolCallRef,
)
from agentlane.pricing import priced
from agentlane.private_files import make_private_dir
from agentlane.redaction import redact
from agentlane.settings import Settings
from agentlane.thinking_levels import THINKING_LEVELS, normalize_thinking_level
from agentlane.tool_catalog import canonical_tool_name
from agentlane.tool_signatures import call_signature, is_known_poll
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from agentlane.usage import Usage
from workflows.policy.preemptive_check import PRECHECK_OVERFLOW_TEXT

log = logging.getLogger(__name__)

# A retryable failure: the call is made again, without the images the provider refused.
IMAGE_REFUSED_ERROR = "ImageRefused"


@functools.lru_cache(maxsize=256)
def _overhead_tokens(system: str, tools: tuple[str, ...]) -> int:
    """What a request's system prompt and tool schemas add (the same for every call of a
    session: measured once, not by encoding the schemas again each call)."""
    return request_overhead_tokens(system, tool_specs(list(tools)))


def tool_call_summary(name: str, arguments: dict[str, Any]) -> str:
    """One line for the Temporal UI and the event stream."""
    name = canonical_tool_name(name)
    if name == "apply_patch":
        patch = str(arguments.get("input", ""))
        files = sum(
            1 for ln in patch.splitlines() if ln.startswith(("*** Add", "*** Update", "*** Delete"))
        )
        detail = f"{files} file{'s' if files != 1 else ''}"
    elif name == "process":
        action = str(arguments.get("action", ""))
        target = arguments.get("command") if action == "start" else arguments.get("id")
        detail = " ".join(f"{action} {target or ''}".split())
    else:
        detail = " ".join(str(arguments.get("command" if name == "exec" else "path", "")).split())
    # In history (the run's step results) and the activity's summary: no secrets.
    line = redact(f"{name} {detail}".strip())
    return line if len(line) <= 120 else line[:117] + "…"


def failure_headline(failure: ModelFailure) -> str:
    """A provider failure's message in history, where the UI shows it: reason, status, code,
    provider and model first, then the user-facing text ("rate_limit (429, rate_limit_error)
    from anthropic/claude-x: ..."). A transport fault names its kind (connection_refused, ...)
    rather than its failover reason."""
    said = ", ".join(str(x) for x in (failure.status, failure.code) if x is not None)
    where = f"{failure.provider}/{failure.model}"
    what = failure.transport_kind.value if failure.transport_kind else failure.reason
    return f"{what}{f' ({said})' if said else ''} from {where}: {failure.message}"


@dataclass
class _Accumulated:
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallComplete] = field(default_factory=list)
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    reply: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def _reasoning_mode(raw: str) -> ReasoningMode:
    try:
        return ReasoningMode(raw)
    except ValueError:
        return ReasoningMode.OFF


def _refuses_thinking_level(lowered: str) -> bool:
    """Anthropic-style "think value ... is not supported" or OpenAI's "Unsupported value:
    'reasoning_effort' does not support ..."."""
    refusal = any(p in lowered for p in ("not supported", "unsupported value", "does not support"))
    return refusal and any(w in lowered for w in ("think", "reasoning"))


# A request's thinking parameter, as a schema validation error names it ("thinking.type: Input
# should be 'enabled' or 'disabled'" for a model without adaptive thinking).
_THINKING_PARAMETER = re.compile(
    r"(?<![a-z_])(thinking\.(type|budget_tokens)|reasoning_effort|reasoning\.effort)\b"
)


def _rejects_thinking_parameter(err: ProviderError, lowered: str, thinking: str) -> bool:
    """A 400 that names the thinking parameter of a request that sent one: the level was
    refused, worded as a validation error rather than "not supported"."""
    return (
        err.status == 400
        and normalize_thinking_level(thinking) not in (None, "off")
        and _THINKING_PARAMETER.search(lowered) is not None
    )


def _levels_below(thinking: str, listed: Sequence[str]) -> list[str]:
    """The levels the model lists below `thinking` (strongest first, `off` last): what a refusal
    that names none leaves to try. Adaptive counts as above every budgeted level."""
    order = list(THINKING_LEVELS[:-1])  # off .. xhigh; adaptive is above them all
    level = normalize_thinking_level(thinking) or "off"
    top = len(order) if level == "adaptive" else order.index(level)
    below = [lv for lv in reversed(order[:top]) if lv in listed and lv != "off"]
    return [*below, "off"]


# A server that refuses connections (not running, wrong port) or a host that does not resolve:
# the message names the URL tried and what to check.
UNREACHABLE_MARKERS = (
    "connecterror",  # httpx: "ConnectError: All connection attempts failed"
    "all connection attempts failed",
    "connection refused",
    "connect call failed",
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "no address associated",
)


# Faults of a stream that had begun (activities/providers/sdk_errors.py), not of time.
_STREAM_FAULT_CODES = frozenset({"stream_incomplete", "malformed_response"})


def _unreachable(err: ProviderError) -> bool:
    lowered = err.message.lower()
    return err.transport and any(marker in lowered for marker in UNREACHABLE_MARKERS)


def typed_failure(
    err: ProviderError,
    resolved: ResolvedModel,
    thinking: str,
    *,
    produced_output: bool = False,
    oversized: Callable[[int], bool] | None = None,
    received_chars: int | None = None,
) -> ApplicationError:
    """Classify a provider error (SPEC §5) into a typed failure the run workflow decides on.

    Every provider failure is non-retryable, transport faults included (issue 24): the right
    reaction (wait and make the call again inside the run's wait budget, rotate the profile,
    lower thinking, compact, fall back) is the workflow's, on its durable, abortable timers.
    Temporal's retries are left to lost workers.

    Everything it says goes into history and before users: redacted (a provider may echo the
    key, the URL may carry a password).
    """
    text = redact(err.message)
    lowered = text.lower()
    classification = classify_error(text, err.status, err.code, err.provider)
    if role_ordering_error(text):
        reason = "role_ordering"
    elif image_size_error(text) is not None:
        reason = "image_size"
    elif _refuses_thinking_level(lowered):
        # Which level to try next is the workflow's call (workflows/thinking_fallback.py),
        # made from `raw_message`.
        reason = "thinking_unsupported"
    elif _rejects_thinking_parameter(err, lowered, thinking):
        # The workflow reads which levels to try from the words; these name none, so the
        # model's own list below the refused level is said as the provider would.
        reason = "thinking_unsupported"
        levels = _levels_below(thinking, resolved.entry.capabilities.thinking_levels)
        quoted = ", ".join(f"'{level}'" for level in levels)
        said = f"thinking level {thinking} is not supported; supported values are: {quoted}"
        text = f"{text} ({said})"
    elif classification.context_overflow:
        reason = "context_overflow"
    elif classification.reason is not None:
        reason = classification.reason.value
    else:
        reason = "timeout" if err.transport else "unknown"
    # The provider's own count of the prompt and the window it enforces, when it said.
    figures = overflow_figures(text) if reason == "context_overflow" else (None, None)
    user_text = format_user_error_text(text, status=err.status, provider=err.provider)
    if err.code in _STREAM_FAULT_CODES:
        # A stream that ended early or garbled is said as it was: nothing timed out.
        user_text = f"LLM request failed: {text}"
    if err.status == 404 and reason in ("model_not_found", "unknown"):
        user_text = not_found_text(user_text, resolved.entry.api, _base_url(resolved), text)
    elif err.status in (401, 403):
        user_text += auth_header_hint(text)
    if _unreachable(err):
        where = _endpoint(resolved)
        user_text = (
            f"Could not connect to the model provider at {where} ({err.provider}/{err.model}): "
            f"{text[:200]}. Check that the server runs and the base URL is right."
        )
    transport = transport_kind(err)
    failure = ModelFailure(
        reason=reason,
        message=redact(user_text),
        provider=err.provider,
        model=err.model,
        profile_id=resolved.credentials.profile_id if resolved.credentials else None,
        status=err.status,
        code=err.code,
        retry_after_seconds=err.retry_after_seconds,
        transport=err.transport,
        raw_message=text[:2000],
        thinking=thinking,
        produced_output=produced_output,
        # Measured against the window the provider enforces when it named one.
        oversized_tool_results=(
            reason == "context_overflow"
            and oversized is not None
            and oversized(min(resolved.entry.context_window, figures[1] or 1 << 62))
        ),
        compaction_failure=reason == "context_overflow" and is_compaction_failure_error(text),
        observed_tokens=figures[0],
        observed_limit=figures[1],
        transport_kind=transport,
        host=endpoint_host(_base_url(resolved), resolved.entry.api) if transport else None,
        received_chars=received_chars if transport else None,
    )
    # An expected provider error is the run workflow's to decide on, not a worker fault: one
    # log line here, and BENIGN keeps the SDK from logging it again with a traceback.
    log.warning(
        "model call failed: %s%s typed failure for the run (status %s, code %s, provider %s, "
        "model %s)",
        reason,
        f" ({transport})" if transport else "",
        err.status,
        err.code,
        failure.provider,
        failure.model,
    )
    return failure_error(failure)


def unusable_candidate(inp: ModelCallInput, err: NoCredentials | UnknownModel) -> ApplicationError:
    """A model this host cannot call (no key for its provider, not in its config) as the typed
    failure of a candidate, not a broken deployment: the run's failover moves to the next profile
    or fallback model (SPEC §3.3, §3.6), and ends with `auth` / `model_not_found` when none is
    left. Nothing was sent."""
    reason = (
        FailoverReason.AUTH if isinstance(err, NoCredentials) else FailoverReason.MODEL_NOT_FOUND
    )
    failure = ModelFailure(
        reason=reason.value,
        message=str(err),
        raw_message=str(err),
        provider=inp.model.provider,
        model=inp.model.model,
        profile_id=inp.profile_id,
        thinking=inp.thinking,
    )
    log.warning("model call not sent: %s", failure.message)
    return failure_error(failure)


def failure_error(failure: ModelFailure) -> ApplicationError:
    """A classified failure as the run workflow reads it: non-retryable (the run decides what
    follows), benign (one log line), its headline what the UI shows."""
    return ApplicationError(
        failure_headline(failure),
        failure.model_dump(mode="json"),
        type=MODEL_PROVIDER_ERROR,
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )


def partial_entry_id(inp: ModelCallInput) -> str:
    return inp.assistant_entry_id + PARTIAL_SUFFIX


def _base_url(resolved: ResolvedModel) -> str | None:
    if resolved.credentials is not None and resolved.credentials.base_url:
        return resolved.credentials.base_url
    return resolved.entry.base_url


def _endpoint(resolved: ResolvedModel) -> str:
    base = resolved.entry.base_url
    if resolved.credentials is not None and resolved.credentials.base_url:
        base = resolved.credentials.base_url
    return base or f"the {resolved.entry.provider} default endpoint"


class ModelCallActivity:
    def __init__(
        self,
        store: TranscriptStore,
        resolver: ProviderResolver,
        settings: Settings,
        publishers: SessionPublishers,
        cooldowns: SharedCooldowns | None = None,
    ):
        self.store = store
        self.resolver = resolver
        self.settings = settings
        self.publishers = publishers
        self.cooldowns = cooldowns
        # This worker's request context of each session, extended by appends (context_cache).
        self.context_cache = ContextCache()

    # -- transcript preparation -------------------------------------------------------------

    async def _prepare_transcript(self, inp: ModelCallInput) -> None:
        """Called right after the step read the session (`call_model`): no second check."""
        key = inp.session_key
        await self.store.answer_unanswered(key, inp.run_id, inp.unanswered_reason, recheck=False)
        await self.store.append(key, user_entries(inp.append_user, inp.run_id, time.time()))

    async def _workspace(self, inp: ModelCallInput) -> str:
        """The run's workspace: named in the input on the run's first call (and recorded),
        looked up from that record on later calls."""
        run_chain = inp.assistant_entry_id.rsplit(":t", 1)[0]
        if not inp.workspace:
            recorded = await self.store.run_workspace(inp.session_key, run_chain)
            if recorded is None:
                raise ApplicationError(
                    f"no workspace recorded for run {inp.run_id}: {self.store.describe()} "
                    "is not the one this run started with",
                    type=WORKSPACE_MISSING,
                    non_retryable=True,
                )
            return local_workspace(recorded, self.settings.data_dir)
        path = Path(local_workspace(inp.workspace, self.settings.data_dir))
        host = inp.workspace_host
        if (
            host is not None
            and self.settings.workspaces == "host"
            and host != self.settings.host_id
        ):
            pass  # on another host's disk: the worker there makes or checks it for the tools
        elif inp.create_workspace and self.settings.workspaces == "host":
            pass  # made by the host its first tool call lands on (not on every model call's)
        elif inp.create_workspace:
            # A default workspace, under the data dir: its owner's only, as the rest of it.
            await asyncio.to_thread(make_private_dir, path)
        elif not await asyncio.to_thread(path.is_dir):
            raise ApplicationError(
                f"workspace {inp.workspace} does not exist; create it or start the session with "
                "an existing folder",
                type=WORKSPACE_MISSING,
                non_retryable=True,
            )
        await self.store.record_run_workspace(inp.session_key, run_chain, inp.workspace)
        return str(path)

    @staticmethod
    def _result_from_entry(
        entry: TranscriptEntry, attempt: int, allowed: set[str]
    ) -> ModelCallResult:
        return ModelCallResult(
            stop_reason=entry.stop_reason or "end_turn",
            tool_calls=[
                ToolCallRef(
                    id=c.id,
                    name=canonical_tool_name(c.name),
                    summary=tool_call_summary(c.name, c.arguments),
                    rejected=c.raw_arguments is not None
                    or canonical_tool_name(c.name) not in allowed,
                    signature=call_signature(c.name, c.arguments),
                    known_poll=is_known_poll(c.name, c.arguments),
                )
                for c in entry.tool_calls
            ],
            usage=entry.usage or Usage(),
            text_chars=len(entry.text),
            reply_preview=entry.text[:200],
            attempt=attempt,
        )

    # -- the activity -----------------------------------------------------------------------

    @activity.defn(name=CALL_MODEL)
    async def call_model(self, inp: ModelCallInput) -> ModelCallResult:
        info = activity.info()
        new_here = RUNS_SEEN.first_here(inp.run_id)
        in_stream: set[str] = set()
        if info.attempt > 1 or (new_here and inp.turn_index > 0):
            # The previous attempt's (or step's) worker may have died with the run's events
            # unsent: they go out again before anything of this step.
            in_stream = await Republisher.for_step(
                self.store, self.publishers, info.attempt
            ).republish(activity.client(), inp.session_key, inp.run_id)
            activity.heartbeat()
        workspace = await self._workspace(inp)
        existing = await self.store.get(inp.session_key, inp.assistant_entry_id)
        if existing is not None:
            # An earlier attempt finished the call but died before reporting it. Checked before
            # preparing the transcript: this call's own tool calls are not "unanswered".
            found = self._result_from_entry(existing, info.attempt, set(inp.tools))
            found.tool_calls = await self._route(
                inp.session_key, existing.tool_calls, found.tool_calls
            )
            return found
        await self._prepare_transcript(inp)
        try:
            resolved = await self.resolver.aresolve(inp.model, inp.profile_id)
        except (NoCredentials, UnknownModel) as err:
            raise unusable_candidate(inp, err) from err
        except ModelUnavailable as err:
            raise config_failure(err) from err

        stored = await self.store.read_context(inp.session_key, recheck=False)
        window = min(resolved.entry.context_window, inp.context_window_cap or 1 << 62)
        measures = self.context_cache
        context = context_for_request(stored, window, measures, inp.session_key)
        log.debug(
            "context of %s: %d entries, %d chars; measured incrementally %d, whole %d; "
            "%d stored entries processed",
            inp.assistant_entry_id,
            len(context.entries),
            context.estimated_chars,
            measures.incremental,
            measures.whole,
            measures.processed,
        )
        if context.repaired or context.truncated_results:
            log.info(
                "request context of %s: %s%s",
                inp.assistant_entry_id,
                context.repaired,
                f" tool results cut to fit: {context.truncated_results}"
                if context.truncated_results
                else "",
            )
        # This call's own failed attempt is not part of what it is asked: sent, it would be
        # the last message (an Anthropic prefill the model continues, refused with thinking on;
        # a half-sentence OpenAI's model is told it said). Requests after this call's answer
        # leave it out anyway (`without_answered_partials`).
        retrying = partial_entry_id(inp)
        entries = [e for e in context.entries if e.id != retrying]
        if resolved.entry.capabilities.images:
            entries = await without_refused_images(self.store.store, inp.session_key, entries)
        tools = tool_specs(inp.tools)
        request = ModelRequest(
            model=resolved.model_id,
            system=build_system_prompt(workspace, tools),
            entries=entries,
            tools=tools if resolved.entry.capabilities.tools else [],
            thinking=inp.thinking,
            max_output_tokens=resolved.entry.max_output_tokens,
            images=resolved.entry.capabilities.images,
        )
        # Before anything is published or sent: a request that cannot fit is not made.
        checked = self._check_fits(inp, window, request, context, resolved.config)
        client = activity.client()
        prior_text = ""
        prior_unknown = False
        announced: set[str] = set()
        if info.attempt > 1 or inp.recheck_announce:
            # Only a retry needs to know what an earlier attempt showed, and it reads that back
            # from the stream itself (a query: no history, and no cost to first attempts).
            try:
                # From the run's start (recorded by its first call), not the stream's: the
                # answers stay small, whatever the session's age.
                run_start = await self.store.stream_start(inp.session_key, inp.run_id)
                prior_text, announced = await published_so_far(
                    client, inp.session_key, run_start or 0, inp.assistant_entry_id, inp.run_id
                )
            except Exception as err:
                log.warning("could not read back the earlier attempt's text: %s", err)
                prior_unknown = True
            # The read-back may have taken a while. A first attempt sends no heartbeat before
            # its stream's first quarter second: a call that ends sooner needs none (one server
            # round trip less per step), and the heartbeat timeout is 3 s.
            activity.heartbeat()

        if any(a.kind == EventKind.AGENT_START for a in inp.announce):
            # Where this run's events begin in the stream: its end reads from there only.
            await record_run_start(client, self.store, inp.session_key, inp.run_id)
        # As late as possible before the request goes out: the run chose this profile when it
        # scheduled the call, and the call may have waited for a slot since.
        await self._check_not_cooling(inp)
        async with self.publishers.lease(client, inp.session_key) as publisher:
            for announcement in [
                *inp.announce,
                *turn_boundary(inp.turn_index, inp.close_turn, inp.open_turn),
            ]:
                event = announcement.to_event(inp.session_key, inp.run_id)
                if event.event_id not in announced:  # an earlier attempt announced it already
                    publisher.publish(event)
            # Not urgent: it goes out with the first text, or at the next tick.
            start = self._message_event(inp, EventKind.MESSAGE_START, info.attempt)
            if info.attempt > 1 or inp.recheck_announce:
                # A call made again (by Temporal or by the run) starts the message again: an id
                # of its own, or a consumer that deduplicates by id drops it (issue 24). The
                # first call keeps the plain id the stream-gap check expects.
                start = start.model_copy(
                    update={"event_id": f"{start.event_id}/{info.activity_id}.a{info.attempt}"}
                )
            if start.event_id not in in_stream:  # once, even when this attempt is retried
                publisher.publish(start)
            if prior_unknown:
                # Nothing is known about what an earlier attempt showed: tell consumers to drop
                # anything they have for this message.
                publisher.publish(self._message_event(inp, EventKind.MESSAGE_RESET, info.attempt))
            acc = await self._stream_call(
                inp,
                request,
                resolved,
                publisher,
                prior_text,
                oversized=lambda window: reducible_tool_result_chars(entries, window) > 0,
                prompt_tokens=checked.prompt_tokens,
            )
            # Priced here, by the model that answered, and stored with the entry: the cost lands
            # in history once, and a retry that finds the entry reports the same figure.
            acc.usage = priced(acc.usage, resolved.entry.prices)
            entry, rejected_results, refs = self._assistant_entry(inp, acc, entries)
            refs = await self._route(inp.session_key, entry.tool_calls, refs)
            await self.store.append(inp.session_key, [entry, *rejected_results])
            end = self._message_event(inp, EventKind.MESSAGE_END, info.attempt).model_copy(
                update={"stop_reason": acc.stop_reason, "usage": acc.usage}
            )
            # Sent with the next batch, without waiting (a failure waits: the lease's exit),
            # except for text: what the user was shown must survive a crash right after this
            # returns, and a reply that ends the run must be in the stream before `agent_end`.
            publisher.publish(end)
            for event in rejected_call_events(
                entry,
                rejected_results,
                session_key=inp.session_key,
                turn_index=inp.turn_index,
                attempt=info.attempt,
            ):
                publisher.publish(event)
            if acc.text or not refs:
                publisher.wait_on_exit()
        return ModelCallResult(
            stop_reason=acc.stop_reason,
            tool_calls=refs,
            usage=acc.usage,
            text_chars=len(acc.text),
            # Only a reply that ends the run is worth a place in history.
            reply_preview="" if refs else acc.reply[:200],
            attempt=info.attempt,
        )

    def _message_event(self, inp: ModelCallInput, kind: EventKind, attempt: int) -> AgentEvent:
        suffix = f"/a{attempt}" if kind == EventKind.MESSAGE_RESET else ""
        return AgentEvent(
            kind=kind,
            event_id=f"{inp.assistant_entry_id}/{kind.value}{suffix}",
            session_key=inp.session_key,
            run_id=inp.run_id,
            attempt=attempt,
            turn_index=inp.turn_index,
            message_id=inp.assistant_entry_id,
            data={"model": inp.model.label()} if kind == EventKind.MESSAGE_START else {},
        )

    async def _stream_call(
        self,
        inp: ModelCallInput,
        request: ModelRequest,
        resolved: ResolvedModel,
        publisher: EventLease,
        prior_text: str,
        *,
        oversized: Callable[[int], bool] | None = None,
        prompt_tokens: int | None = None,
    ) -> _Accumulated:
        attempt = activity.info().attempt
        acc = _Accumulated()
        pipeline = OutputPipeline(_reasoning_mode(inp.reasoning_mode))
        guard = ResumeGuard(prior_text)
        shown = 0  # characters of the visible text handed to the publisher
        reasoning_shown = 0
        blocks = 0
        template = text_delta_template(
            inp.session_key, inp.run_id, inp.assistant_entry_id, inp.turn_index, attempt
        )
        # The reasoning and the blocks of a call the run makes again (after a server error, a
        # rotation, a lower thinking level) are its own: ids with the call's activity id, so a
        # reader that passes each id on once shows the new call's, not the failed one's.
        call = activity.info().activity_id
        reasoning_template = text_delta_template(
            inp.session_key,
            inp.run_id,
            inp.assistant_entry_id,
            inp.turn_index,
            attempt,
            EventKind.REASONING_DELTA,
            call=call,
        )

        def reset() -> None:
            publisher.publish(self._message_event(inp, EventKind.MESSAGE_RESET, attempt))

        def deliver(emission: Emission, final: bool) -> None:
            nonlocal shown, reasoning_shown, blocks
            if emission.reasoning:
                publisher.text(reasoning_template, reasoning_shown, emission.reasoning)
                reasoning_shown += len(emission.reasoning)
            if emission.reset_visible and shown:
                reset()
                shown = 0
            if guard.decide(pipeline.visible, final):
                if guard.reset:
                    reset()
                    guard.reset = False
                shown = max(shown, guard.publish_from)
                if len(pipeline.visible) > shown:
                    # The first text of a message goes out at once: the time to first delta
                    # should not wait for a batch tick.
                    publisher.text(template, shown, pipeline.visible[shown:], urgent=shown == 0)
                    shown = len(pipeline.visible)
            for n, block in enumerate(emission.blocks):
                # Stable ids: a retried attempt that produces the same blocks repeats nothing.
                publisher.publish(
                    AgentEvent(
                        kind=EventKind.BLOCK_REPLY,
                        event_id=f"{inp.assistant_entry_id}/block/{call}.{blocks}",
                        session_key=inp.session_key,
                        run_id=inp.run_id,
                        attempt=attempt,
                        turn_index=inp.turn_index,
                        message_id=inp.assistant_entry_id,
                        text=block,
                        index=blocks,
                        # Readers that show the answer from its deltas show this block alone.
                        data={"reasoning": True} if n == emission.reasoning_index else {},
                    )
                )
                blocks += 1

        received = 0  # characters of text and reasoning the provider sent
        # Heartbeats show the call's progress in the Temporal UI's Pending Activities.
        progress = ModelProgress(inp.model.label())
        beats = asyncio.create_task(heartbeat_forever(details=progress.details))
        try:
            stream = mended(resolved.provider.stream(request, resolved.credentials))
            async for event in with_idle_limit(stream, inp.idle_timeout_seconds):
                if isinstance(event, TextDelta):
                    received += len(event.text)
                    progress.delta(event.text)
                    deliver(pipeline.text(event.text), final=False)
                elif isinstance(event, ReasoningDelta):
                    received += len(event.text)
                    progress.delta(event.text)
                    deliver(pipeline.native_reasoning(event.text), final=False)
                elif isinstance(event, ToolCallComplete):
                    acc.tool_calls.append(event)
                elif isinstance(event, Finish):
                    acc.stop_reason = event.stop_reason
                    acc.usage = event.usage
                    acc.meta = dict(event.meta)
            deliver(pipeline.finish(), final=True)
        except IdleTimeout as err:
            await self._record_partial(inp, pipeline, "idle_timeout")
            idle = ModelFailure(
                reason="timeout",
                message=str(err),
                raw_message=str(err),
                provider=inp.model.provider,
                model=inp.model.model,
                profile_id=resolved.credentials.profile_id if resolved.credentials else None,
                thinking=inp.thinking,
                idle_timed_out=True,
                produced_output=bool(shown or pipeline.stripped),
                prompt_tokens=prompt_tokens,
            )
            log.warning(
                "model call failed: idle timeout after %s s (provider %s, model %s)",
                inp.idle_timeout_seconds,
                idle.provider,
                idle.model,
            )
            # The run workflow decides (rotate, retry once, fall back): benign for the worker.
            raise ApplicationError(
                str(err),
                idle.model_dump(mode="json"),
                type=MODEL_IDLE_TIMEOUT,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,
            ) from err
        except asyncio.CancelledError:
            if not cancelled_for_good():
                raise  # a retry follows; it must not find this attempt's text as final
            await asyncio.shield(self._record_partial(inp, pipeline, "aborted"))
            publisher.publish(
                self._message_event(inp, EventKind.MESSAGE_END, attempt).model_copy(
                    update={"stop_reason": "aborted"}
                ),
                urgent=True,
            )
            raise
        except ProviderError as err:
            refused = refused_images(request, err)
            if refused:
                # Nothing was shown (a 400 comes before any text): marked, the images are left
                # out of this call made again by Temporal, and of every later request.
                await mark_refused(self.store.store, inp.session_key, refused, err.message)
                log.warning("the provider refused an image of %s: %s", inp.session_key, err)
                raise ApplicationError(
                    f"the provider refused an image in the request ({err.message[:200]}); "
                    "the call is made again without it",
                    type=IMAGE_REFUSED_ERROR,
                ) from err
            failure = typed_failure(
                err,
                resolved,
                inp.thinking,
                produced_output=bool(shown or pipeline.stripped),
                oversized=oversized,
                received_chars=received,
            )
            if not err.transport:
                # A transport fault is made again as it was (the run waits and retries): what
                # the user saw is read back from the stream, and no partial entry changes the
                # request. Other failures keep the partial text under its own id.
                await self._record_partial(inp, pipeline, "error")
            raise failure from err
        finally:
            beats.cancel()
        acc.text = pipeline.stripped
        acc.reasoning = pipeline.reasoning
        acc.reply = pipeline.final_text
        return acc

    def _check_fits(
        self,
        inp: ModelCallInput,
        window: int,
        request: ModelRequest,
        context: RequestContext,
        config: AgentlaneConfig | None = None,
    ) -> ContextCheck:
        """The preemptive check (SPEC §10.3): a request estimated over the prompt budget is
        reported as a context overflow, with the recovery route, instead of being sent.
        `config`: the one the model was resolved in (read again when not given)."""
        config = self.resolver.config() if config is None else config
        checked: ContextCheck = check_context(
            context,
            overhead_tokens=_overhead_tokens(request.system, tuple(t.name for t in request.tools)),
            context_window=window,
            reserve_tokens=compaction_reserve_tokens(
                config.compaction.reserve_tokens, config.compaction.reserve_tokens_floor
            ),
            provider_window=inp.provider_window,
        )
        if checked.fits:
            return checked
        result = checked.result
        failure = ModelFailure(
            reason="context_overflow",
            message=PRECHECK_OVERFLOW_TEXT,
            raw_message=(
                f"precheck: ~{result.estimated_prompt_tokens} tokens estimated, budget "
                f"{result.prompt_budget_tokens} of a {window}-token window"
            ),
            provider=inp.model.provider,
            model=inp.model.model,
            profile_id=inp.profile_id,
            thinking=inp.thinking,
            precheck_route=checked.route.value,
            oversized_tool_results=result.reducible_chars > 0,
        )
        log.info("model call not sent: %s (%s)", failure.raw_message, checked.route.value)
        raise failure_error(failure)

    async def _check_not_cooling(self, inp: ModelCallInput) -> None:
        """Do not send a call on a profile another session has just found rate-limited (or
        overloaded, or out of credit) since this run chose it: the run rotates instead."""
        if self.cooldowns is None or inp.profile_id is None or inp.allow_cooling:
            return
        usage = await self.cooldowns.cooling(inp.profile_id, inp.model.model, time.time())
        if usage is None:
            return
        now = time.time()
        disabled = usage.disabled_until is not None and usage.disabled_until > now
        reason = (usage.disabled_reason if disabled else usage.cooldown_reason) or (
            FailoverReason.UNKNOWN
        )
        until = usage.unusable_until() or now
        failure = ModelFailure(
            reason=reason.value,
            message=(
                f"auth profile {inp.profile_id} is cooling down ({reason.value}) for another "
                f"{max(1, round(until - now))} s; the call was not sent"
            ),
            provider=inp.model.provider,
            model=inp.model.model,
            profile_id=inp.profile_id,
            thinking=inp.thinking,
            preempted=True,
        )
        log.info("model call not sent: %s", failure.message)
        raise failure_error(failure)

    async def _record_partial(
        self, inp: ModelCallInput, pipeline: OutputPipeline, reason: str
    ) -> None:
        """Keep what the user already saw; a partial turn never carries tool calls.

        A failed attempt's text goes under its own id (`<entry>/partial`): the run may make the
        same call again (another profile, a lower thinking level, another model), and that
        call's answer must be able to take the entry's own id. Requests leave out a partial
        whose call was answered in the end. An aborted call is not made again: its text is the
        entry."""
        if not pipeline.stripped:
            return
        entry = TranscriptEntry(
            id=inp.assistant_entry_id if reason == "aborted" else partial_entry_id(inp),
            role=Role.ASSISTANT,
            ts=time.time(),
            run_id=inp.run_id,
            text=pipeline.stripped,
            reasoning=pipeline.reasoning,
            stop_reason=reason,
            model=inp.model.label(),
        )
        await self.store.append(inp.session_key, [entry])

    async def _route(
        self, key: str, calls: list[ToolCall], refs: list[ToolCallRef]
    ) -> list[ToolCallRef]:
        """A call about a background process goes to the worker holding it (its own task
        queue, from the process's record, read off the event loop). Most steps have none and
        pay no thread hop."""
        if not any(ref.name == "process" for ref in refs):
            return refs
        return await asyncio.to_thread(self._routed, key, calls, refs)

    def _routed(
        self, key: str, calls: list[ToolCall], refs: list[ToolCallRef]
    ) -> list[ToolCallRef]:
        folder = self.store.session_dir(key) / "processes"
        arguments = {call.id: call.arguments for call in calls}
        return [
            ref.model_copy(update={"task_queue": owner_queue(folder, arguments.get(ref.id, {}))})
            if ref.name == "process" and not ref.rejected
            else ref
            for ref in refs
        ]

    def _assistant_entry(
        self, inp: ModelCallInput, acc: _Accumulated, context: list[TranscriptEntry]
    ) -> tuple[TranscriptEntry, list[TranscriptEntry], list[ToolCallRef]]:
        now = time.time()
        # Ids this session's calls already have: a call answered by id must not take one.
        taken: set[str] = {c.id for e in context for c in e.tool_calls} if acc.tool_calls else set()
        calls: list[ToolCall] = []
        refs: list[ToolCallRef] = []
        rejected_results: list[TranscriptEntry] = []
        allowed = set(inp.tools)
        for ordinal, given in enumerate(acc.tool_calls):
            made = session_call_id(
                given.id, inp.assistant_entry_id, ordinal, taken, trusted=given.session_unique
            )
            complete = dataclasses.replace(given, id=made)
            taken.add(complete.id)
            problem: str | None = None
            arguments: dict[str, Any] = {}
            raw: str | None = None
            try:
                parsed = json.loads(complete.arguments_json or "{}")
                if isinstance(parsed, dict):
                    arguments = parsed
                else:
                    raw = complete.arguments_json
                    problem = "tool arguments must be a JSON object"
            except json.JSONDecodeError as err:
                raw = complete.arguments_json
                problem = f"tool arguments are not valid JSON: {err.msg} at position {err.pos}"
                if acc.stop_reason == "max_tokens":
                    # Made again, the same call is cut at the same place.
                    problem += (
                        "; your reply reached the output-token limit inside these arguments, "
                        "so they were cut off: do it in smaller parts (several smaller writes "
                        "or edits)"
                    )
            # The workflow runs the tool under its canonical name (`apply-patch` is
            # `apply_patch`, SPEC §13.1); the transcript keeps the name the model wrote.
            name = canonical_tool_name(complete.name)
            if problem is None and name not in allowed and name in inp.refusals:
                # A tool the policy removed: the refusal says so (SPEC §13.3).
                problem = inp.refusals[name]
            elif problem is None and name not in allowed:
                problem = (
                    f"tool {complete.name!r} is not available; available tools: "
                    f"{', '.join(sorted(allowed)) or 'none'}"
                )
            calls.append(
                ToolCall(id=complete.id, name=complete.name, arguments=arguments, raw_arguments=raw)
            )
            refs.append(
                ToolCallRef(
                    id=complete.id,
                    name=name,
                    summary=tool_call_summary(complete.name, arguments),
                    rejected=problem is not None,
                    signature=call_signature(complete.name, arguments),
                    known_poll=is_known_poll(complete.name, arguments),
                )
            )
            if problem is not None:
                rejected_results.append(
                    tool_result_entry(
                        complete.id,
                        complete.name,
                        f"Error: {problem}",
                        inp.run_id,
                        is_error=True,
                        ts=now,
                    )
                )
        entry = TranscriptEntry(
            id=inp.assistant_entry_id,
            role=Role.ASSISTANT,
            ts=now,
            run_id=inp.run_id,
            text=acc.text,
            reasoning=acc.reasoning,
            tool_calls=calls,
            stop_reason=acc.stop_reason,
            usage=acc.usage,
            model=inp.model.label(),
            meta=acc.meta,
        )
        return entry, rejected_results, refs
