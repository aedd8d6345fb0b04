"""The neutral stop reasons every provider reports in `Finish.stop_reason`.

The vocabulary is Anthropic's (the seed's `stopReason`), so the offline provider, the Anthropic
provider and the OpenAI providers all speak the same words; OpenAI's finish reasons are mapped here.
"""

from __future__ import annotations

END_TURN = "end_turn"
TOOL_USE = "tool_use"
MAX_TOKENS = "max_tokens"
STOP_SEQUENCE = "stop_sequence"
REFUSAL = "refusal"
PAUSE_TURN = "pause_turn"

_OPENAI_CHAT = {
    "stop": END_TURN,
    "length": MAX_TOKENS,
    "tool_calls": TOOL_USE,
    "function_call": TOOL_USE,
    "content_filter": REFUSAL,
}

_RESPONSES_INCOMPLETE = {
    "max_output_tokens": MAX_TOKENS,
    "content_filter": REFUSAL,
}


def from_anthropic(stop_reason: str | None, *, has_tool_calls: bool) -> str:
    if stop_reason is None:
        return TOOL_USE if has_tool_calls else END_TURN
    # "model_context_window_exceeded" is the model running out of room while answering: for the
    # run loop that is the same as hitting max_tokens.
    if stop_reason == "model_context_window_exceeded":
        return MAX_TOKENS
    return stop_reason


def from_openai_chat(finish_reason: str | None, *, has_tool_calls: bool) -> str:
    # Several OpenAI-compatible servers (Ollama, llama.cpp) finish a tool-calling turn with
    # "stop"; the tool calls are what matters to the run loop.
    if has_tool_calls and finish_reason in (None, "stop", "tool_calls", "function_call"):
        return TOOL_USE
    if finish_reason is None:
        return END_TURN
    return _OPENAI_CHAT.get(finish_reason, finish_reason)


def from_openai_responses(incomplete_reason: str | None, *, has_tool_calls: bool) -> str:
    if incomplete_reason is not None:
        return _RESPONSES_INCOMPLETE.get(incomplete_reason, incomplete_reason)
    return TOOL_USE if has_tool_calls else END_TURN
