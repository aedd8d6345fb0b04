"""A model behind a gateway, in a real worker process: the profile's headers (auth store) and an
`env:` header (the worker's environment) reach the gateway, and neither they nor the key appear
in any workflow history, stream item, run result, data file or the worker's log, even when the
gateway's 401 quotes the header it refused."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from activities.auth_store import set_key
from agentlane.run import ExecutionResult, ExecutionStatus
from clients.api import AgentlaneClient
from store.sync import run_sync
from tests.conftest import make_deployment, settings_for
from tests.e2e.support import collect
from tests.fakes.provider_server import FakeProviderServer
from tests.fakes.scripts import Reply
from tests.harness import Deployment
from tests.store_support import clear_profile_state

if TYPE_CHECKING:
    from store.interface import Store

KEY = "sk-gw-" + secrets.token_hex(20)
PROFILE_TOKEN = "cfaig-" + secrets.token_hex(20)
ENV_TOKEN = "envtok-" + secrets.token_hex(20)
# The same gateway settings through each SDK: the anthropic SDK logs request options at DEBUG.
MODELS = {"gw/claude-gw": "anthropic", "gw/gpt-gw": "openai-chat"}


async def _all_transcripts(store: Store) -> str:
    out = []
    for key in await store.session_keys():
        out += [e.model_dump_json() for _, e in await store.entries_after(key)]
        out += [result for _, result in await store.runs(key)]
        out.append(await store.session_record(key) or "")
    return "\n".join(out)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(anthropic_keys=[KEY], openai_keys=[KEY]) as server:
        yield server


@pytest.fixture(scope="module")
def deployment(
    server: object, fake: FakeProviderServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("gateway")
    (root / "config.toml").write_text(
        f"""
[[models]]
provider = "gw"
id = "claude-gw"
api = "anthropic"
base_url = "{fake.anthropic_base_url}"
auth_header = "x-api-key"
headers = {{ "X-Org" = "team-a", "X-Gw-Token" = "env:GW_TOKEN" }}

[[models]]
provider = "gw"
id = "gpt-gw"
api = "openai-compatible"
base_url = "{fake.openai_base_url}"
auth_header = "x-api-key"
headers = {{ "X-Org" = "team-a", "X-Gw-Token" = "env:GW_TOKEN" }}
"""
    )
    set_key(
        "gw:cf",
        "gw",
        KEY,
        data_dir=root,
        auth_header="bearer",
        headers={"cf-aig-authorization": f"Bearer {PROFILE_TOKEN}"},
    )
    dep = make_deployment(server, root, GW_TOKEN=ENV_TOKEN, AGENTLANE_LOG_LEVEL="DEBUG")
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def run_once(
    deployment: Deployment, fake: FakeProviderServer, model: str, required: dict[str, str]
) -> tuple[AgentlaneClient, ExecutionResult, str]:
    client = await AgentlaneClient.connect(settings_for(deployment))
    fake.reset()
    fake.require_headers(required)
    fake.script(Reply(text="through the gateway"))
    ws = deployment.data_dir / "ws" / uuid.uuid4().hex[:8]
    ws.mkdir(parents=True)
    session = f"gw-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(
        session, "hi", workspace=str(ws), model=model, session_overrides={"max_wait_seconds": 0}
    )
    assert receipt.run_id
    got = await collect(client, session, receipt.run_id)
    result = await client.wait_for_run(receipt.run_id)
    stream = "\n".join(e.model_dump_json() for e in got.events)
    return client, result, stream


@pytest.mark.parametrize("model", sorted(MODELS))
async def test_gateway_headers_arrive_and_no_secret_is_stored_anywhere(
    deployment: Deployment, fake: FakeProviderServer, model: str
) -> None:
    clear_profile_state(deployment.data_dir)  # no cooldown carried over
    _, ok, ok_stream = await run_once(
        deployment,
        fake,
        model,
        {"cf-aig-authorization": f"Bearer {PROFILE_TOKEN}", "X-Gw-Token": ENV_TOKEN},
    )
    assert ok.status == ExecutionStatus.SUCCESS, ok.error
    assert ok.reply == "through the gateway"
    headers = fake.requests(MODELS[model])[0].headers
    # The profile's bearer style wins over the entry's x-api-key.
    assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers
    assert headers["x-org"] == "team-a"

    # The gateway refuses the profile's header and quotes it back in its 401.
    client, refused, refused_stream = await run_once(
        deployment, fake, model, {"cf-aig-authorization": "Bearer another-token"}
    )
    assert refused.status == ExecutionStatus.ERROR
    assert refused.error is not None and refused.error.failure is not None
    assert refused.error.failure.status == 401
    assert "invalid cf-aig-authorization: <redacted>" in refused.error.failure.message

    needles = [KEY, PROFILE_TOKEN, ENV_TOKEN, KEY[-16:], PROFILE_TOKEN[-16:], ENV_TOKEN[-16:]]
    places = {
        "results": ok.model_dump_json() + refused.model_dump_json(),
        "stream": ok_stream + refused_stream,
    }
    async for wf in client.client.list_workflows(""):
        history = await client.client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        places[f"history of {wf.id}"] = history.to_json()
    assert any(name.startswith("history of") for name in places)
    for worker in deployment.workers:
        places[f"log {worker.log}"] = worker.log.read_text()
        assert places[f"log {worker.log}"], "an empty log would prove nothing"
    for path in deployment.data_dir.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json") and path.name != "auth.json":
            places[str(path)] = path.read_text(errors="replace")
    # Transcripts and records are in the store (its key table aside, like auth.json before).
    places["transcripts"] = run_sync(settings_for(deployment), _all_transcripts)
    for where, text in places.items():
        for needle in needles:
            assert needle not in text, f"secret material in {where}"
