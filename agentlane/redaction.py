"""Secrets out of text that is shown: tool previews in history, heartbeat details, activity
summaries, provider error messages.

Two layers. Values the caller knows are secret (a profile's key, its header values, the worker's
secret-looking environment variables) are replaced wherever they appear. Then shapes that are
secrets wherever they come from: API keys of the well-known providers, bearer tokens, the value
of an assignment whose name says key / token / secret / password (`OPENAI_API_KEY=…`,
`"password": "…"`, `--token …` is not caught: only `=` and `:` assignments), credentials in a
URL, and masked keys some APIs echo back (`sk-ab***wxyz`).

Pure: no I/O. Over-redacting a harmless value is accepted; a missed secret is the bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"
# Shorter known secrets would blank out ordinary words.
SECRET_MIN_LENGTH = 4

# A token that contains a run of asterisks: how APIs echo a masked key.
_MASKED_KEY = re.compile(r"[^\s'\"`,;:()]*\*{3,}[^\s'\"`,;:().]*")
# Key shapes of the providers and forges a worker's commands are likely to print.
_KEY_SHAPES = re.compile(
    r"\b(?:"
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI, Anthropic (sk-ant-…), many OpenAI-compatible servers
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_-]{35}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r")"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)([ \t]+)[A-Za-z0-9._~+/=-]{8,}")
# `NAME=value`, `name: value`, `"name": "value"` where the name ends in a secret's word.
_ASSIGNED = re.compile(
    r"""(?ix)
    (?P<name>["']?[A-Za-z0-9_.-]*(?:api[_-]?key|_key|-key|secret|token|password|passwd)["']?)
    (?P<sep>[ \t]*[:=][ \t]*)
    (?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;&}\]]+)
    """
)
# Cheap to search for: only text that holds one of these words can hold such an assignment.
_ASSIGNED_HINT = re.compile(r"(?i)key|secret|token|passw")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+@")

# Environment variables whose values are secrets by their name.
# `AGENTLANE_KEY_<PROFILE>` holds a profile's key (activities/auth_store.py).
_SECRET_ENV_NAME = re.compile(
    r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$|^AGENTLANE_KEY_"
)


def redact_known(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every known secret value, and masked keys."""
    # Longest first: a secret that contains another must go whole, not leave its rest behind.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) >= SECRET_MIN_LENGTH:
            text = text.replace(secret, REDACTED)
    # The pattern is slow on long text; most text has no run of asterisks at all.
    return _MASKED_KEY.sub(_masked, text) if "***" in text else text


def _masked(match: re.Match[str]) -> str:
    # Asterisks alone are markup (`***` in Markdown, apply_patch's `*** Update File:`
    # headers), not a key: a masked key keeps some of its characters.
    token = match.group(0)
    return REDACTED if any(c.isalnum() for c in token) else token


def _assigned(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') else ""
    if value.strip("'\"") in ("", REDACTED):
        return match.group(0)
    return f"{match.group('name')}{match.group('sep')}{quote}{REDACTED}{quote}"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with known secrets and secret-shaped values replaced by `<redacted>`."""
    text = redact_known(text, secrets)
    text = _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", text)
    text = _BEARER.sub(rf"\1\2{REDACTED}", text)
    if _ASSIGNED_HINT.search(text):
        text = _ASSIGNED.sub(_assigned, text)
    return _KEY_SHAPES.sub(REDACTED, text)


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """Values of the environment variables named like secrets (`*_KEY`, `*_TOKEN`, …): a tool's
    command inherits the worker's environment and can print them."""
    return [v for k, v in env.items() if _SECRET_ENV_NAME.search(k) and len(v) >= 8]
