"""The two figures a context-overflow message may carry: the prompt size the provider counted
and the window it enforces.

Compaction calibrates its own token estimate against the provider's count and learns the real
window when the configured one is wrong, so both numbers are worth reading whenever a provider
writes them. Shapes read (each seen in real error bodies):

* Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
* Anthropic / Bedrock: "input length and `max_tokens` exceed context limit: 188240 + 21333 >
  200000" (the prompt is the first term; the second is the reserved output)
* OpenAI, DeepSeek, vLLM, Groq: "This model's maximum context length is 8192 tokens. However,
  your messages resulted in 9000 tokens" / "… your request has 9000 input tokens" / "… you
  requested 9000 tokens (8000 in the messages, 1000 in the completion)" (the prompt is the
  messages part; the total includes the completion); OpenRouter's "(A of text input, B of tool
  input, C in the output)" (the prompt is A + B)
* xAI: "This model's maximum prompt length is 131072 but the request contains 136973 tokens."
* Gemini / Vertex: "The input token count (1200000) exceeds the maximum number of tokens allowed
  (1048576)."
* Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768
  maximum context length"
* llama.cpp server: "request (5584 tokens) exceeds the available context size (4096 tokens)",
  or its newer body whose message has no numbers but whose fields do (`"n_prompt_tokens":
  14429, "n_ctx": 8192`, also as a Python repr in an SDK's message)
* LM Studio: "Trying to keep the first 9000 tokens when context the overflows. However, the
  model is loaded with context length of only 4096 tokens"
* llama-cpp-python: "Requested tokens (2285) exceed context window of 2048"
* vLLM (old scheduler): "Input prompt (2664 tokens) is too long and exceeds limit of 2048"
* Hugging Face TGI: "`inputs` tokens + `max_new_tokens` must be <= 8192. Given: 6204 `inputs`
  tokens and 2047 `max_new_tokens`" / "`inputs` must have less than 4096 tokens. Given: 4545"

Numbers may carry thousands separators ("1,048,576", "200_000"). A message that names only one
figure gives that one ("maximum context length is 8192 tokens" → (None, 8192)); none, or
messages without figures (OpenAI Responses' "Your input exceeds the context window of this
model", Ollama's "the input length exceeds the context length") → (None, None).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

# A count: plain digits, or groups of three after a separator (comma, dot, underscore,
# apostrophe, no-break spaces). The lookahead keeps "4096." of "4096 tokens." from growing.
_N: Final = r"(\d{1,3}(?:[,._'\u00a0\u202f]\d{3})+(?!\d)|\d+)"
_FLAGS: Final = re.IGNORECASE | re.DOTALL


def _count(raw: str | None) -> int | None:
    if raw is None:
        return None
    value = int(re.sub(r"\D", "", raw))
    return value if value > 0 else None


def _breakdown(total: str, detail: str | None) -> int | None:
    """OpenAI's "(8000 in the messages, 1000 in the completion)" and OpenRouter's "(A of text
    input, B of tool input, C in the output)": the input parts, else the requested total."""
    if detail:
        parts = re.findall(
            rf"{_N}\s*(?:in the messages|in your prompt|of \w+ input)", detail, _FLAGS
        )
        if parts:
            return sum(_count(part) or 0 for part in parts) or None
    return _count(total)


@dataclass(frozen=True)
class _Shape:
    pattern: re.Pattern[str]
    read: Callable[[re.Match[str]], tuple[int | None, int | None]]


def _shape(regex: str, prompt: int, limit: int) -> _Shape:
    def read(found: re.Match[str]) -> tuple[int | None, int | None]:
        return _count(found.group(prompt)), _count(found.group(limit))

    return _Shape(re.compile(regex, _FLAGS), read)


def _requested(found: re.Match[str]) -> tuple[int | None, int | None]:
    return _breakdown(found.group(2), found.group(3)), _count(found.group(1))


# Most specific first: the OpenAI family's prefix is shared by three endings.
_SHAPES: Final = (
    _shape(rf"prompt is too long:\s*{_N}\s*tokens?\s*>\s*{_N}", 1, 2),
    _shape(rf"exceed context limit:\s*{_N}\s*\+\s*{_N}\s*>\s*{_N}", 1, 3),
    _Shape(
        re.compile(
            rf"maximum context length is\s*{_N}\s*tokens.{{0,80}}?you requested(?:\s+about)?\s*"
            rf"{_N}\s*tokens(?:\s*\(([^)]*)\))?",
            _FLAGS,
        ),
        _requested,
    ),
    _shape(
        rf"maximum context length is\s*{_N}\s*tokens.{{0,80}}?resulted in\s*{_N}\s*tokens", 2, 1
    ),
    _shape(
        rf"maximum context length is\s*{_N}\s*tokens.{{0,80}}?request has\s*{_N}\s*input tokens",
        2,
        1,
    ),
    _shape(rf"maximum prompt length is\s*{_N}\s*but the request contains\s*{_N}\s*tokens", 2, 1),
    _shape(
        rf"input token count\s*\(?\s*{_N}\s*\)?\s*exceeds the maximum number of tokens allowed"
        rf"\s*\(?\s*{_N}",
        1,
        2,
    ),
    _shape(
        rf"prompt contains\s*{_N}\s*tokens.{{0,80}}?too large for model with\s*{_N}\s*maximum",
        1,
        2,
    ),
    _shape(
        rf"(?:request|prompt)\s*\(\s*{_N}\s*tokens\s*\)\s*exceeds the available context size"
        rf"\s*\(\s*{_N}\s*tokens",
        1,
        2,
    ),
    _shape(
        rf"keep the first\s*{_N}\s*tokens when context the overflows.{{0,200}}?"
        rf"context length of only\s*{_N}\s*tokens",
        1,
        2,
    ),
    _shape(rf"requested tokens\s*\(\s*{_N}\s*\)\s*exceed context window of\s*{_N}", 1, 2),
    _shape(
        rf"input prompt\s*\(\s*{_N}\s*tokens\s*\)\s*is too long and exceeds limit of\s*{_N}", 1, 2
    ),
    _shape(
        rf"`?inputs`?\s*tokens\s*\+\s*`?max_new_tokens`?\s*must be\s*<=\s*{_N}\W*given:\s*{_N}",
        2,
        1,
    ),
    _shape(rf"`?inputs`?\s*must have less than\s*{_N}\s*tokens\W*given:\s*{_N}", 2, 1),
)

# llama.cpp's error fields, as JSON or as the Python repr an SDK prints ("'n_ctx': 8192").
_LLAMA_PROMPT: Final = re.compile(rf"[\"']?n_prompt_tokens[\"']?\s*[:=]\s*{_N}", _FLAGS)
_LLAMA_WINDOW: Final = re.compile(rf"[\"']?n_ctx[\"']?\s*[:=]\s*{_N}", _FLAGS)

# One figure alone, when no full shape matched.
_PROMPT_ONLY: Final = (
    re.compile(rf"prompt is too long:\s*{_N}\s*tokens", _FLAGS),
    re.compile(rf"resulted in\s*{_N}\s*tokens", _FLAGS),
    re.compile(rf"request has\s*{_N}\s*input tokens", _FLAGS),
    re.compile(rf"input token count\s*\(?\s*{_N}", _FLAGS),
)
_LIMIT_ONLY: Final = (
    re.compile(rf"maximum context length is\s*{_N}\s*tokens", _FLAGS),
    re.compile(rf"maximum prompt length is\s*{_N}", _FLAGS),
    re.compile(rf"exceeds the available context size\s*\(\s*{_N}\s*tokens", _FLAGS),
    re.compile(rf"context length of only\s*{_N}\s*tokens", _FLAGS),
    re.compile(rf"maximum number of tokens allowed\s*\(?\s*{_N}", _FLAGS),
    re.compile(rf"exceed context window of\s*{_N}", _FLAGS),
)


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return _count(found.group(1))
    return None


def overflow_figures(text: str) -> tuple[int | None, int | None]:
    """(prompt tokens the provider counted, the window it enforces) read from an overflow
    message or error body; None for a figure the text does not give."""
    for shape in _SHAPES:
        found = shape.pattern.search(text)
        if found:
            return shape.read(found)
    prompt, window = _first((_LLAMA_PROMPT,), text), _first((_LLAMA_WINDOW,), text)
    if prompt is not None or window is not None:
        return prompt, window
    return _first(_PROMPT_ONLY, text), _first(_LIMIT_ONLY, text)
