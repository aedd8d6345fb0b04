"""The HTTP gateway for chat adapters (issue 11): messages in, resumable Server-Sent Events out,
webhook delivery, and a web chat page.

* `app.py`: the ASGI app (FastAPI) and its routes under `/v1/`, `/healthz`, `/openapi.json`;
* `sse.py`: session events as SSE, `id:` = the offset in the session's Workflow Stream;
* `auth.py`: bearer tokens (hashed store, key-prefix scopes, read-only), rate limits;
* `agui.py`: the AG-UI vocabulary of the same events;
* `webhooks.py`: the client side of webhook delivery (callback registration, signatures);
* `static/`: the web chat page served at `/`.
"""
