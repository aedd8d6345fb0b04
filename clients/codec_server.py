"""The codec server: lets the Temporal UI and `temporal workflow show --codec-endpoint` show
encrypted payloads in the clear to an operator who holds the keys (and, when
`AGENTLANE_CODEC_TOKEN` is set, the token).

    agentlane codec-server --port 8081 [--origin http://localhost:8233]

Speaks the codec-server protocol: POST /encode and POST /decode with `{"payloads": [...]}` in
protobuf JSON. /decode also fetches offloaded payloads (`data/payloads/`), then decrypts them.
It binds to 127.0.0.1 unless told otherwise: whoever reaches it reads every conversation.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import DataConverter

from agentlane.data_converter import make_data_converter
from agentlane.encryption import codec_from_env
from agentlane.settings import Settings


def build_converter(settings: Settings) -> DataConverter:
    codec = codec_from_env(settings.encryption_env())
    if codec is None:
        raise SystemExit(
            "encryption is off (set AGENTLANE_ENCRYPTION_KEYS_FILE): there is nothing to decode"
        )
    return make_data_converter(settings, settings.payload_offload_threshold, codec)


async def transform(converter: DataConverter, path: str, payloads: list[Payload]) -> list[Payload]:
    # The SDK's own inbound/outbound chain (offload + codec), one payload at a time.
    if path == "/decode":
        return [await converter._transform_inbound_payload(p) for p in payloads]
    return [await converter._transform_outbound_payload(p) for p in payloads]


def make_handler(
    converter: DataConverter, origins: str | list[str], token: str | None
) -> type[BaseHTTPRequestHandler]:
    allowed = [origins] if isinstance(origins, str) else list(origins)

    class Handler(BaseHTTPRequestHandler):
        def _cors(self) -> None:
            # One origin per answer (CORS takes no list): the caller's, when it is allowed.
            asked = self.headers.get("Origin")
            self.send_header(
                "Access-Control-Allow-Origin", asked if asked in allowed else allowed[0]
            )
            self.send_header("Vary", "Origin")
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header(
                "Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization"
            )
            self.send_header("Access-Control-Allow-Credentials", "true")

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self._cors()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_OPTIONS(self) -> None:  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self._cors()
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            if self.path not in ("/encode", "/decode"):
                self._reply(404, {"message": "use /encode or /decode"})
                return
            if token is not None:
                given = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                if not hmac.compare_digest(given, token):
                    self._reply(401, {"message": "a valid Authorization token is required"})
                    return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                request = json_format.Parse(self.rfile.read(length), Payloads())
                out = asyncio.run(transform(converter, self.path, list(request.payloads)))
            except Exception as err:  # the caller gets the reason, not a dropped connection
                self._reply(400, {"message": f"{type(err).__name__}: {err}"})
                return
            body = json.loads(json_format.MessageToJson(Payloads(payloads=out)))
            self._reply(200, body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # payload contents never reach a log

    return Handler


def serve(host: str, port: int, origins: list[str]) -> None:
    settings = Settings.from_env()
    handler = make_handler(
        build_converter(settings), origins, os.environ.get("AGENTLANE_CODEC_TOKEN")
    )
    server = ThreadingHTTPServer((host, port), handler)
    shown = " or ".join(origins)
    print(f"agentlane codec server on http://{host}:{port} (UI origin {shown})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
