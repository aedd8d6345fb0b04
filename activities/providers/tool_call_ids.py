"""Tool-call ids: one per call in the whole session, in a form every provider takes.

The transcript answers each call by its id (its result is `<id>:result`), across turns and
across providers. Providers differ: Anthropic's and OpenAI's own ids are long random strings,
unique anywhere; OpenAI-compatible servers may send none, or per-response counters (`call_0`
every turn), or ids in a form Anthropic refuses (`functions.read:0`: its ids must match
`^[a-zA-Z0-9_-]+$`), and OpenAI refuses ids longer than 40 characters. So an id that does not
look unique, or that this session has seen, is replaced when the reply is taken in, and an id
recorded before this rule is put in each provider's form when a request is built (the same
mapping for a call and its result, so they still pair).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

# Long enough to be a provider's random id rather than a counter, and in every API's form.
_UNIQUE_LOOKING = re.compile(r"^[A-Za-z0-9_-]{20,40}$")
_ANTHROPIC_FORM = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OPENAI_MAX_ID = 40


def _made_id(seed: str) -> str:
    return "call_" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def session_call_id(
    given: str, entry_id: str, ordinal: int, taken: Container[str], *, trusted: bool = False
) -> str:
    """The id a call the model just made is recorded under: the provider's own when it looks
    unique (or the provider vouches for it: `trusted`) and is not taken yet, else one made from
    the entry's id (unique in the session) and the call's place in the reply, the same on
    every attempt."""
    looks_unique = _UNIQUE_LOOKING.match(given) or (trusted and _ANTHROPIC_FORM.match(given))
    if looks_unique and given not in taken:
        return given
    return _made_id(f"{entry_id}#{ordinal}#{given}")


def anthropic_wire_id(call_id: str) -> str:
    return call_id if _ANTHROPIC_FORM.match(call_id) else _made_id(call_id)


def openai_wire_id(call_id: str) -> str:
    return call_id if call_id and len(call_id) <= OPENAI_MAX_ID else _made_id(call_id)
