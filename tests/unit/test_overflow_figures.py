"""Figures read from real context-overflow messages (quoted from public issue threads and error
bodies, numbers as the providers wrote them)."""

from __future__ import annotations

import pytest

from activities.providers.overflow_figures import overflow_figures


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        # Anthropic (stackblitz/bolt.new#1748); a whole error body, as the SDK prints it.
        ("prompt is too long: 202128 tokens > 200000 maximum", (202_128, 200_000)),
        ("prompt is too long: 210000 tokens > 200000 maximum", (210_000, 200_000)),
        (
            'Error code: 400 - {"type":"error","error":{"type":"invalid_request_error",'
            '"message":"prompt is too long: 40123 tokens > 32000 maximum"}}',
            (40_123, 32_000),
        ),
        # Anthropic / Bedrock: input + max_tokens (continuedev/continue#6080,
        # anthropics/claude-code#408 with its line break).
        (
            "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
            (199_759, 200_000),
        ),
        (
            "input length and `max_tokens` exceed context limit: \n     189136 + 20000 > 204648, "
            "decrease input length or `max_tokens` and try again",
            (189_136, 204_648),
        ),
        (
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000",
            (188_240, 200_000),
        ),
        # OpenAI Chat Completions (mckaywrigley/repo-chat#15).
        (
            "This model's maximum context length is 4097 tokens. However, your messages "
            "resulted in 13393 tokens. Please reduce the length of the messages.",
            (13_393, 4_097),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 9000 tokens",
            (9_000, 8_192),
        ),
        # The completion's share is not the prompt (vllm-project/vllm#20409, DeepSeek in
        # evalstate/fast-agent#621, old OpenAI "in your prompt" wording).
        (
            "This model's maximum context length is 16384 tokens. However, you requested 122946 "
            "tokens (112946 in the messages, 10000 in the completion). Please reduce the length "
            "of the messages or completion.",
            (112_946, 16_384),
        ),
        (
            "This model's maximum context length is 131072 tokens. However, you requested 131134 "
            "tokens (122942 in the messages, 8192 in the completion).",
            (122_942, 131_072),
        ),
        (
            "This model's maximum context length is 4097 tokens, however you requested 4162 "
            "tokens (1090 in your prompt; 3072 for the completion). Please reduce your prompt; "
            "or completion length.",
            (1_090, 4_097),
        ),
        (
            "This model's maximum context length is 8192 tokens. However, you requested 9000 "
            "tokens (8000 in the messages, 1000 in the completion)",
            (8_000, 8_192),
        ),
        # vLLM without a breakdown, and its newer wording (soundprediction/predicato#51).
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 "
            "tokens. Please reduce the length of the messages.",
            (5_000, 4_096),
        ),
        (
            "ValueError: This model's maximum context length is 40960 tokens. However, your "
            "request has 91714 input tokens. Please reduce the length of the input messages.",
            (91_714, 40_960),
        ),
        # OpenRouter (refly-ai/refly#1177; tool input counts as prompt too).
        (
            "This endpoint's maximum context length is 32768 tokens. However, you requested about "
            "42832 tokens (42832 of text input). Please reduce the length of either one, or use "
            'the "middle-out" transform to compress your prompt automatically.',
            (42_832, 32_768),
        ),
        (
            "This endpoint's maximum context length is 256000 tokens.\nHowever, you requested "
            "about 424983 tokens (358454 of text input, 56529 of tool input, 10000 in the output).",
            (414_983, 256_000),
        ),
        # xAI (cline/cline#3120).
        (
            "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
            (136_973, 131_072),
        ),
        # Gemini (google-gemini/gemini-cli#6678, #11507).
        (
            "The input token count (1200293) exceeds the maximum number of tokens allowed "
            "(1048576).",
            (1_200_293, 1_048_576),
        ),
        (
            "The input token count (461428) exceeds the maximum number of tokens allowed (131072)",
            (461_428, 131_072),
        ),
        # Mistral.
        (
            '{"object":"error","message":"Prompt contains 159202 tokens and 0 draft tokens, too '
            'large for model with 131072 maximum context length","type":"invalid_request_invalid_'
            'args","param":null,"code":"3051","raw_status_code":400}',
            (159_202, 131_072),
        ),
        # llama.cpp server: the older message, and the newer body whose figures are fields
        # (ggml-org/llama.cpp#15780, oobabooga/textgen#7257).
        (
            "request (5584 tokens) exceeds the available context size (4096 tokens), try "
            "increasing it",
            (5_584, 4_096),
        ),
        (
            '{"error":{"code":400,"message":"the request exceeds the available context size. try '
            'increasing the context size or enable context shift","type":"exceed_context_size_'
            'error","n_prompt_tokens":14429,"n_ctx":8192}}',
            (14_429, 8_192),
        ),
        (
            "Error code: 400 - {'error': {'code': 400, 'message': 'the request exceeds the "
            "available context size. try increasing the context size or enable context shift', "
            "'type': 'exceed_context_size_error', 'n_prompt_tokens': 1407, 'n_ctx': 256}}",
            (1_407, 256),
        ),
        # LM Studio (lmstudio-ai/lmstudio-bug-tracker#546).
        (
            "Trying to keep the first 111490 tokens when context the overflows. However, the "
            "model is loaded with context length of only 32768 tokens, which is not enough. Try "
            "to load the model with a larger context length, or provide a shorter input.",
            (111_490, 32_768),
        ),
        # llama-cpp-python (abetlen/llama-cpp-python, rllm-team/rllm#55).
        ("ValueError: Requested tokens (516) exceed context window of 512", (516, 512)),
        # vLLM's old scheduler warning (vllm-project/vllm#10440).
        ("Input prompt (36893 tokens) is too long and exceeds limit of 1000", (36_893, 1_000)),
        # Hugging Face TGI (huggingface/chat-ui#1149, meta-llama/llama#1103).
        (
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: "
            "6204 `inputs` tokens and 2047 `max_new_tokens`",
            (6_204, 8_192),
        ),
        (
            "Input validation error: `inputs` must have less than 4096 tokens. Given: 4545",
            (4_545, 4_096),
        ),
        # Thousands separators.
        ("prompt is too long: 210,000 tokens > 200,000 maximum", (210_000, 200_000)),
        (
            "This model's maximum context length is 128,000 tokens. However, your messages "
            "resulted in 130,532 tokens.",
            (130_532, 128_000),
        ),
        (
            "The input token count (1,200,000) exceeds the maximum number of tokens allowed "
            "(1,048,576).",
            (1_200_000, 1_048_576),
        ),
        # One figure only.
        ("This model's maximum context length is 8192 tokens", (None, 8_192)),
        ("prompt is too long: 212345 tokens", (212_345, None)),
        # No figures.
        (
            "Your input exceeds the context window of this model. Please adjust your input and "
            "try again.",
            (None, None),
        ),
        ("the request exceeds the available context size, try increasing it", (None, None)),
        ("the input length exceeds the context length", (None, None)),
        ("Input is too long for requested model.", (None, None)),
        ("prompt is too long", (None, None)),
        ("rate limit reached for 30000 tokens per minute", (None, None)),
        ("", (None, None)),
    ],
)
def test_overflow_figures(text: str, figures: tuple[int | None, int | None]) -> None:
    assert overflow_figures(text) == figures


def test_a_zero_is_no_figure() -> None:
    assert overflow_figures("prompt is too long: 0 tokens > 200000 maximum") == (None, 200_000)
