"""Time to the first visible delta, minus the model's own time to first token, per provider.

    python bench/bench_first_delta.py       (from the repository root, with the venv's Python)

The providers talk to the fake provider server (`tests/fakes/provider_server.py`, a separate
process speaking the Anthropic Messages and OpenAI Chat / Responses wire protocols) scripted with
a fixed time to first token and inter-token delay; the offline model gets the same delays from
`AGENTLANE_OFFLINE_FIRST_TOKEN_MS` / `AGENTLANE_OFFLINE_TOKEN_MS`.

Two layers are measured and labelled apart:

* provider layer: `provider.stream()` called in this process, time to its first `TextDelta`;
* full engine: message submitted with `client.send` -> first new visible text at a client
  subscribed to the session's stream (update-with-start, session and run workflows, the model
  activity, the stream publisher's batching, the subscriber's long poll).

The full-engine path needs the worker's provider resolver to read the model configuration
(`AGENTLANE_CONFIG`); `engine_first_delta` tries every provider and reports the ones the resolver
does not know yet instead of failing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

import anthropic  # noqa: E402
import openai  # noqa: E402

from activities.providers.base import (  # noqa: E402
    Credentials,
    ModelProvider,
    ModelRequest,
    TextDelta,
)
from activities.providers.catalog import build_provider  # noqa: E402
from activities.providers.offline import OfflineProvider  # noqa: E402
from activities.tools.specs import tool_specs  # noqa: E402
from agentlane.config import ApiKind, build_config  # noqa: E402
from agentlane.events import EventKind  # noqa: E402
from agentlane.run import ExecutionStatus  # noqa: E402
from agentlane.transcript import Role, TranscriptEntry  # noqa: E402
from bench.common import (  # noqa: E402
    Figures,
    Stack,
    Table,
    Watcher,
    bench_stack,
    fresh_key,
    note,
    stats_ms,
    wait_idle,
    workspace,
)
from tests.fakes.provider_server import (  # noqa: E402
    DEFAULT_ANTHROPIC_KEY,
    DEFAULT_OPENAI_KEY,
    FakeProviderClient,
    spawn,
)
from tests.fakes.scripts import Api, Reply  # noqa: E402
from tests.harness import Deployment  # noqa: E402

QUICK = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
TTFT_S = 0.2
TOKEN_S = 0.02
MESSAGES = 5 if QUICK else 15
REPLY = "The quick brown fox jumps over the lazy dog, twice over, and so rests a while."

# (label, model reference, wire api); the references are catalogue models of each API kind.
PROVIDERS: list[tuple[str, str, Api | None]] = [
    ("anthropic", "anthropic/claude-haiku-4-5", "anthropic"),
    ("openai-chat", "openai/gpt-4.1", "openai-chat"),
    ("openai-responses", "openai/gpt-5", "openai-responses"),
    ("offline", "offline/planner", None),
]


def reply(api: Api) -> Reply:
    return Reply(text=REPLY, ttft=TTFT_S, delay=TOKEN_S, chunk_size=6, api=api)


def request(model_id: str, text: str) -> ModelRequest:
    return ModelRequest(
        model=model_id,
        system="You are the agent 'main'. Keep replies short.",
        entries=[TranscriptEntry(id="u1", role=Role.USER, ts=time.time(), text=text)],
        tools=tool_specs(["read", "write", "edit", "exec"]),
    )


# -- provider layer -------------------------------------------------------------------------


async def provider_first_delta(fake_url: str, ref: str, api: Api | None) -> list[float]:
    """Seconds from calling `stream()` to its first TextDelta, minus the scripted TTFT; one
    untimed warm-up call first (imports, first connection)."""
    out: list[float] = []
    provider: ModelProvider
    if api is None:
        provider = OfflineProvider(first_token_delay=TTFT_S, token_delay=TOKEN_S)
        req, creds = request("planner", f"say {REPLY}"), None
    else:
        entry = build_config({}, {}).model(ref)
        base = fake_url if entry.api == ApiKind.ANTHROPIC else fake_url + "/v1"
        entry = entry.model_copy(update={"base_url": base})
        provider = build_provider(entry, timeout_seconds=30)
        key = DEFAULT_ANTHROPIC_KEY if api == "anthropic" else DEFAULT_OPENAI_KEY
        req, creds = request(entry.id, "hello"), Credentials(profile_id="bench", api_key=key)
    fake = FakeProviderClient(fake_url)
    for i in range(MESSAGES + 1):
        if api is not None:
            await asyncio.to_thread(fake.script, reply(api))
        started = time.perf_counter()
        first: float | None = None
        async for event in provider.stream(req, creds):
            if first is None and isinstance(event, TextDelta):
                first = time.perf_counter()
        assert first is not None, f"{ref}: no text"
        if i:
            out.append(first - started - TTFT_S)
    return out


async def sdk_client_construction(fake_url: str, api: Api) -> list[float]:
    """Seconds to build the SDK client as the providers do at the start of every `stream()`
    call (see their `_client`), a part of the provider layer's figure."""
    out: list[float] = []
    for _ in range(MESSAGES):
        started = time.perf_counter()
        if api == "anthropic":
            client: anthropic.AsyncAnthropic | openai.AsyncOpenAI = anthropic.AsyncAnthropic(
                api_key=DEFAULT_ANTHROPIC_KEY, base_url=fake_url, max_retries=0, timeout=30
            )
        else:
            client = openai.AsyncOpenAI(
                api_key=DEFAULT_OPENAI_KEY, base_url=fake_url + "/v1", max_retries=0, timeout=30
            )
        out.append(time.perf_counter() - started)
        await client.close()
    return out


# -- full engine ----------------------------------------------------------------------------


def write_config(dep: Deployment, fake_url: str) -> Path:
    """Models of the catalogue pointed at the fake server (merged over the catalogue's
    entries by the config loader)."""
    lines: list[str] = []
    for _, ref, api in PROVIDERS:
        if api is None:
            continue
        provider, _, model_id = ref.partition("/")
        base = fake_url if api == "anthropic" else fake_url + "/v1"
        lines += [
            "[[models]]",
            f'provider = "{provider}"',
            f'id = "{model_id}"',
            f'base_url = "{base}"',
            "",
        ]
    path = dep.data_dir / "bench-config.toml"
    path.write_text("\n".join(lines))
    return path


@dataclass
class EngineFirstDelta:
    latencies: list[float]  # send -> first new visible text, minus TTFT
    message_start: list[float]  # send -> message_start at the client
    send_return: list[float]  # send -> its receipt (update-with-start round trip)


class NotWired(Exception):
    """The worker's resolver does not serve this provider (yet)."""


async def engine_first_delta(
    stack: Stack, dep: Deployment, fake_url: str, ref: str, api: Api | None
) -> EngineFirstDelta:
    """FULL ENGINE, per provider: one session on `ref`, MESSAGES timed messages after an
    untimed one. Raises NotWired when the worker cannot run the model (its resolver does not
    read the configuration yet)."""
    client = await stack.client(dep)
    fake = FakeProviderClient(fake_url)
    key = fresh_key(f"fd-{ref.split('/')[0]}")
    ws = workspace(dep, key)
    text = f"say {REPLY}" if api is None else "hello"
    out = EngineFirstDelta([], [], [])
    for i in range(MESSAGES + 1):
        if api is not None:
            await asyncio.to_thread(fake.script, reply(api))
        offset = await client.events_offset(key) if i else 0
        watcher = Watcher(client, key, offset).start()
        started = time.monotonic()
        receipt = await client.send_and_start(key, text, workspace=str(ws), model=ref)
        returned = time.monotonic()
        assert receipt.run_id
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 60)
        if result.status != ExecutionStatus.SUCCESS:
            await watcher.cancel()
            message = result.error.message if result.error else str(result.status)
            raise NotWired(message)
        await watcher.wait()
        await wait_idle(client, key, runs=i + 1)
        arrivals = watcher.text_arrivals()
        start_event = watcher.first(EventKind.MESSAGE_START)
        assert arrivals and start_event, "no text or message_start seen"
        if i:
            out.latencies.append(arrivals[0].at - started - TTFT_S)
            out.message_start.append(start_event.at - started)
            out.send_return.append(returned - started)
    return out


async def main() -> None:
    figures = Figures()
    async with bench_stack("bench-first-delta") as stack:
        proc, fake_url = spawn()
        stack.processes.append(proc)
        note(
            f"dev server {stack.server.address}; fake provider server {fake_url}; "
            f"TTFT {TTFT_S * 1000:.0f} ms, {TOKEN_S * 1000:.0f} ms between deltas; "
            f"{MESSAGES} timed messages per provider"
        )

        layer = Table(
            "Provider layer: provider.stream() -> first TextDelta, minus TTFT (ms)",
            ["provider", "median", "p95", "samples", "of which SDK client construction median"],
        )
        for label, ref, api in PROVIDERS:
            got = await provider_first_delta(fake_url, ref, api)
            med, p = stats_ms(got)
            ctor = stats_ms(await sdk_client_construction(fake_url, api))[0] if api else "-"
            layer.add(label, med, p, len(got), ctor)
            figures.add(f"first_delta_provider_layer_{label}_median", med, "ms")
            figures.add(f"first_delta_provider_layer_{label}_p95", p, "ms")
        layer.print()

        dep = stack.deployment(
            AGENTLANE_OFFLINE_FIRST_TOKEN_MS=str(TTFT_S * 1000),
            AGENTLANE_OFFLINE_TOKEN_MS=str(TOKEN_S * 1000),
            ANTHROPIC_API_KEY=DEFAULT_ANTHROPIC_KEY,
            OPENAI_API_KEY=DEFAULT_OPENAI_KEY,
        )
        dep.extra_env["AGENTLANE_CONFIG"] = str(write_config(dep, fake_url))
        dep.start_worker()
        engine = Table(
            "Full engine: send -> first new visible text at a subscribed client, minus TTFT (ms)",
            [
                "provider",
                "median",
                "p95",
                "samples",
                "send->message_start median",
                "send() round trip median",
            ],
        )
        missing: list[str] = []
        for label, ref, api in PROVIDERS:
            try:
                res = await engine_first_delta(stack, dep, fake_url, ref, api)
            except NotWired as err:
                missing.append(f"{label}: {err}")
                engine.add(label, "not wired", "-", 0, "-", "-")
                continue
            med, p = stats_ms(res.latencies)
            engine.add(
                label,
                med,
                p,
                len(res.latencies),
                stats_ms(res.message_start)[0],
                stats_ms(res.send_return)[0],
            )
            figures.add(f"first_delta_engine_{label}_median", med, "ms")
            figures.add(f"first_delta_engine_{label}_p95", p, "ms")
        engine.print()
        if missing:
            note(
                "not measured through the engine (the worker's resolver does not serve them "
                "yet; rerun once it reads AGENTLANE_CONFIG):\n  " + "\n  ".join(missing)
            )
        note(
            "method: the client subscribes from the stream's current offset, then sends; the "
            "first newly visible text (MessageView) minus the model's scripted time to first "
            "token is what the engine adds. The model activity's stream publisher sends text "
            "deltas in batches (AGENTLANE_STREAM_BATCH_MS, 200 ms by default), so up to one "
            "batch interval of that is batching by design; the subscriber's poll cooldown is "
            "50 ms."
        )
    figures.print()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
