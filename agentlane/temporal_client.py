"""How every process connects to Temporal: the same data converter everywhere."""

from __future__ import annotations

import os
from collections.abc import Sequence

from temporalio.client import Client, Plugin
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from agentlane.data_converter import make_data_converter
from agentlane.encryption import codec_from_env
from agentlane.settings import Settings


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
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.namespace,
        api_key=api_key,
        tls=tls,
        data_converter=make_data_converter(
            settings,
            settings.payload_offload_threshold,
            codec_from_env(settings.encryption_env()),
        ),
        plugins=plugins,
        interceptors=interceptors,
        runtime=runtime,
        identity=identity,
    )
