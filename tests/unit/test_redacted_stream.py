"""A command's streamed output is redacted before it is shown, a secret split over chunks
included: text is held back to a point no secret crosses."""

from __future__ import annotations

from activities.redacted_stream import LONG_LINE_CHARS, RedactedStream

KEY = "sk-proj-" + "a1B2c3D4" * 6


def shown(chunks: list[str], limit: int = 100_000, secrets: tuple[str, ...] = ()) -> str:
    out: list[tuple[int, str]] = []
    stream = RedactedStream(limit, list(secrets), lambda at, text: out.append((at, text)))
    for chunk in chunks:
        stream.feed(chunk)
    stream.flush()
    # Positions follow on from each other: the watcher's text is their concatenation.
    at = 0
    for position, text in out:
        assert position == at
        at += len(text)
    return "".join(text for _, text in out)


def test_a_key_split_over_chunks_is_redacted() -> None:
    text = f"OPENAI_API_KEY={KEY}\nnext line\n"
    for cut in range(1, len(text)):
        got = shown([text[:cut], text[cut:]])
        assert KEY[8:20] not in got, cut
        assert got.endswith("next line\n")


def test_a_known_value_of_any_shape_is_redacted() -> None:
    plain = "correct horse battery staple 42"
    got = shown(["password is cor", "rect horse battery staple 42\n"], secrets=(plain,))
    assert plain not in got and "<redacted>" in got


def test_a_long_line_goes_out_at_whitespace_and_the_rest_at_the_end() -> None:
    words = "word " * (LONG_LINE_CHARS // 5 + 10)
    got = shown([words[: len(words) // 2], words[len(words) // 2 :]])
    assert got == words


def test_only_the_preview_is_shown() -> None:
    assert shown(["x" * 50 + "\n", "y" * 50 + "\n"], limit=60) == "x" * 50 + "\n" + "y" * 9
