"""normalize_tool_schema per provider: pure, deep-copying, and what each API accepts."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from activities.providers.tool_schemas import (
    normalize_tool_schema,
    provider_family,
    strip_strict_nulls,
)

NESTED: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "command": {"type": "string", "pattern": "^[a-z]", "description": "What to run"},
        "timeout": {"type": "number", "maximum": 600, "default": 120},
        "when": {"type": "string", "format": "date-time"},
        "env": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
            "required": ["name"],
        },
        "files": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
        "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "ref": {"$ref": "#/$defs/thing"},
        # A property whose *name* is a keyword strict mode strips must survive.
        "default": {"type": "boolean"},
    },
    "required": ["command", "default"],
    "$defs": {"thing": {"type": "object", "properties": {"id": {"type": "string"}}}},
}


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object" or (
            isinstance(node.get("type"), list) and "object" in node["type"]
        ):
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


def test_inputs_are_never_mutated() -> None:
    before = copy.deepcopy(NESTED)
    for provider in ("openai", "anthropic", "gemini", "other"):
        for strict in (False, True):
            normalize_tool_schema(NESTED, provider, strict)
    assert before == NESTED


def test_openai_strict_closes_every_object_and_requires_everything() -> None:
    out = normalize_tool_schema(NESTED, "openai", strict=True)
    objects = _objects(out)
    assert len(objects) >= 4  # top, env, files.items, $defs.thing
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    props = out["properties"]
    assert props["command"]["type"] == "string"  # required stays non-nullable
    assert props["timeout"]["type"] == ["number", "null"]
    assert props["env"]["type"] == ["object", "null"]
    assert props["env"]["properties"]["value"]["type"] == ["string", "null"]
    assert props["env"]["properties"]["name"]["type"] == "string"
    assert props["ref"] == {"anyOf": [{"$ref": "#/$defs/thing"}, {"type": "null"}]}
    assert props["target"]["anyOf"][-1] == {"type": "null"} and "oneOf" not in props["target"]
    assert props["default"] == {"type": "boolean"}


def test_openai_strict_strips_rejected_keywords_but_keeps_their_meaning() -> None:
    out = normalize_tool_schema(NESTED, "openai", strict=True)
    text = json.dumps(out)
    for keyword in ('"$schema"', '"pattern"', '"format"', '"minItems"', '"maximum"'):
        assert keyword not in text
    props = out["properties"]
    assert "default" not in props["timeout"]
    assert "maximum: 600" in props["timeout"]["description"]
    assert props["command"]["description"].startswith("What to run (pattern:")


def test_openai_not_strict_only_closes_the_top() -> None:
    out = normalize_tool_schema(NESTED, "openai-compatible", strict=False)
    assert out["additionalProperties"] is False and "$schema" not in out
    assert out["required"] == ["command", "default"]
    assert out["properties"]["timeout"] == {"type": "number", "maximum": 600, "default": 120}
    assert "additionalProperties" not in out["properties"]["env"]


def test_openai_adds_empty_properties_for_a_tool_without_parameters() -> None:
    assert normalize_tool_schema({}, "openai", strict=True) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_anthropic_object_schema_without_schema_keyword() -> None:
    out = normalize_tool_schema(NESTED, "anthropic")
    assert "$schema" not in out and out["type"] == "object"
    assert out["properties"]["timeout"]["default"] == 120  # the rest is left alone
    assert normalize_tool_schema({"properties": {}}, "anthropic")["type"] == "object"
    with pytest.raises(ValueError, match="object schema"):
        normalize_tool_schema({"type": "string"}, "anthropic")


def test_gemini_strips_schema_and_additional_properties_everywhere() -> None:
    source = normalize_tool_schema(NESTED, "openai", strict=True)
    out = normalize_tool_schema(source, "gemini")
    text = json.dumps(out)
    assert "additionalProperties" not in text and "$schema" not in text


def test_provider_families() -> None:
    assert provider_family("openai-responses") == "openai"
    assert provider_family("Anthropic") == "anthropic"
    assert provider_family("google-vertex") == "gemini"
    assert provider_family("ollama") == "generic"


def test_strip_strict_nulls_uses_the_original_schema() -> None:
    raw = json.dumps(
        {
            "command": "ls",
            "timeout": None,
            "env": {"name": "A", "value": None},
            "files": [{"path": None}],
            "default": None,
        }
    )
    cleaned = json.loads(strip_strict_nulls(raw, NESTED))
    # "default" is required: its null is the model's own answer and stays.
    assert cleaned == {"command": "ls", "env": {"name": "A"}, "files": [{}], "default": None}
    assert strip_strict_nulls("not json", NESTED) == "not json"
    assert strip_strict_nulls('{"command": "x"}', NESTED) == '{"command": "x"}'
