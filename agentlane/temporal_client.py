"""How every process connects to Temporal: the same data converter everywhere."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from temporalio.api.namespace.v1 import UpdateNamespaceInfo
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, UpdateNamespaceRequest
from temporalio.client import Client, Plugin
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.runtime import Runtime
from temporalio.service import RPCError, TLSConfig

from agentlane.data_converter import make_data_converter
from agentlane.encryption import NAMESPACE_MARKER_ON, KeylessCodec, codec_from_env, marker_key
from agentlane.settings import Settings

log = logging.getLogger(__name__)


async def connect(
    settings: Settings,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
    identity: str | None = None,
    interceptors: Sequence[ClientInterceptor] = (),
) -> Client:
    """`plugins` and `runtime` carry a worker's telemetry (workers/telemetry.py); workers built
    on this client inherit the plugins. `identity`: who this client is in history (the CLI's
    `agentlane-cli <user>@<host>`, the gateway's `gateway token <name>`); None: the SDK's
    `<pid>@<host>`. `interceptors` come before the plugins' own."""
    api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    tls: bool | TLSConfig = settings.tls or api_key is not None
    codec = codec_from_env(settings.encryption_env())
    client = await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        api_key=api_key,
        tls=tls,
        data_converter=make_data_converter(settings, settings.payload_offload_threshold, codec),
        plugins=plugins,
        interceptors=interceptors,
        runtime=runtime,
        identity=identity,
    )
    if codec is None and await encryption_marked(client, settings.workflow_task_queue):
        config = client.config()
        config["data_converter"] = make_data_converter(
            settings, settings.payload_offload_threshold, KeylessCodec()
        )
        client = Client(**config)
    return client


async def encryption_marked(client: Client, task_queue: str) -> bool:
    """Whether a worker of this deployment that encrypts marked the namespace (`marker_key`).
    Not asked (a server that refuses the describe): taken as unmarked, as before the marker
    existed."""
    try:
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError:
        return False
    return described.namespace_info.data.get(marker_key(task_queue)) == NAMESPACE_MARKER_ON


async def mark_encryption(client: Client, task_queue: str) -> None:
    """Mark the namespace as one whose payloads are encrypted (a worker with keys, at start):
    keyless clients then refuse to send rather than write in clear. A server that does not
    allow it (a managed namespace) keeps the old behaviour, with a warning."""
    try:
        await client.workflow_service.update_namespace(
            UpdateNamespaceRequest(
                namespace=client.namespace,
                update_info=UpdateNamespaceInfo(data={marker_key(task_queue): NAMESPACE_MARKER_ON}),
            )
        )
    except RPCError as err:
        log.warning(
            "could not mark namespace %s as encrypted (%s): a client without the keys would "
            "send in clear",
            client.namespace,
            err,
        )
