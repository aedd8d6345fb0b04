"""Tool parameter schemas shaped for each provider (seed 001 §9.3, layer 6).

Every function here is pure: it deep-copies its input and never mutates it.

* OpenAI strict mode (`strict: true` function tools) accepts a subset of JSON Schema: every object
  must say `additionalProperties: false` and list *all* its properties in `required`; a property
  that was optional becomes nullable instead. Keywords strict mode rejects are removed, and the
  constraints among them that matter to the model are kept as words in the description.
* OpenAI without strict mode wants an object schema at the top, closed with
  `additionalProperties: false` (the seed's rule), and nothing else changed.
* Anthropic wants `input_schema` to be an object schema and has no use for `$schema`.
* Gemini-style APIs reject `$schema` and `additionalProperties` anywhere.

Tool arguments coming back from a strict-mode call carry `null` for the optional properties the
model left out; `strip_strict_nulls` removes them again so tools see the shape they declared.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Schema = dict[str, Any]

# Children that are schemas, by how they hold them.
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_SINGLE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)

# Keywords OpenAI's strict mode rejects (or that have no meaning for it).
OPENAI_STRICT_UNSUPPORTED = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "default",
        "examples",
        "format",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "patternProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "dependentSchemas",
        "if",
        "then",
        "else",
        "not",
    }
)
# Of those, the ones worth telling the model in words once the keyword itself is gone.
_DESCRIBED_CONSTRAINTS = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "default",
)

GEMINI_UNSUPPORTED = frozenset({"$schema", "$id", "$comment", "additionalProperties"})


def provider_family(provider: str) -> str:
    """`anthropic`, `openai` (incl. Responses and compatible servers), `gemini` or `generic`."""
    name = provider.lower()
    if "anthropic" in name or "claude" in name:
        return "anthropic"
    if "gemini" in name or "google" in name or "vertex" in name:
        return "gemini"
    if "openai" in name:
        return "openai"
    return "generic"


def normalize_tool_schema(schema: Schema, provider: str, strict: bool = False) -> Schema:
    """The tool's parameter schema as `provider` accepts it; `strict` applies to OpenAI only."""
    family = provider_family(provider)
    if family == "openai":
        return to_openai_strict(schema) if strict else to_openai(schema)
    if family == "anthropic":
        return to_anthropic(schema)
    if family == "gemini":
        return strip_for_gemini(schema)
    return _object_at_top(_map_schema(copy.deepcopy(schema), _drop_keys({"$schema"})))


def to_anthropic(schema: Schema) -> Schema:
    return _object_at_top(_map_schema(copy.deepcopy(schema), _drop_keys({"$schema"})))


def to_openai(schema: Schema) -> Schema:
    out = _object_at_top(_map_schema(copy.deepcopy(schema), _drop_keys({"$schema"})))
    out.setdefault("properties", {})
    if not out.get("additionalProperties"):
        out["additionalProperties"] = False
    return out


def to_openai_strict(schema: Schema) -> Schema:
    out = _object_at_top(_map_schema(copy.deepcopy(schema), _strict_node))
    out.setdefault("properties", {})
    out.setdefault("required", [])
    out["additionalProperties"] = False
    return out


def strip_for_gemini(schema: Schema) -> Schema:
    out: Schema = _map_schema(copy.deepcopy(schema), _drop_keys(GEMINI_UNSUPPORTED))
    return out


def strip_strict_nulls(arguments_json: str, original_schema: Schema) -> str:
    """Remove the `null`s strict mode forced into optional properties (by the original schema).

    Text that is not a JSON object is returned unchanged: judging it is the caller's job.
    """
    try:
        value = json.loads(arguments_json)
    except ValueError:
        return arguments_json
    if not isinstance(value, dict):
        return arguments_json
    cleaned = _strip_nulls(value, original_schema)
    if cleaned == value:
        return arguments_json
    return json.dumps(cleaned, ensure_ascii=False)


# --- walking -------------------------------------------------------------------------------


def _map_schema(node: Any, visit: Callable[[Schema], Schema]) -> Any:
    """Post-order: children first, then `visit` on the node itself."""
    if not isinstance(node, dict):
        return node
    out: Schema = dict(node)
    for key in _SCHEMA_MAPS:
        children = out.get(key)
        if isinstance(children, dict):
            out[key] = {name: _map_schema(child, visit) for name, child in children.items()}
    for key in _SCHEMA_LISTS:
        children = out.get(key)
        if isinstance(children, list):
            out[key] = [_map_schema(child, visit) for child in children]
    for key in _SCHEMA_SINGLE:
        child = out.get(key)
        if isinstance(child, dict):
            out[key] = _map_schema(child, visit)
        elif key == "items" and isinstance(child, list):
            out[key] = [_map_schema(item, visit) for item in child]
    return visit(out)


def _drop_keys(keys: frozenset[str] | set[str]) -> Callable[[Schema], Schema]:
    def visit(node: Schema) -> Schema:
        return {k: v for k, v in node.items() if k not in keys}

    return visit


def _object_at_top(schema: Schema) -> Schema:
    kind = schema.get("type")
    if kind is None:
        schema["type"] = "object"
    elif kind != "object":
        raise ValueError(f"a tool's parameters must be an object schema, not type {kind!r}")
    return schema


def _is_object(node: Schema) -> bool:
    kind = node.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        return True
    return kind is None and "properties" in node


def _strict_node(node: Schema) -> Schema:
    notes = [
        f"{key}: {json.dumps(node[key], ensure_ascii=False)}"
        for key in _DESCRIBED_CONSTRAINTS
        if key in node
    ]
    out = {k: v for k, v in node.items() if k not in OPENAI_STRICT_UNSUPPORTED}
    if notes:
        described = str(out.get("description", "")).strip()
        out["description"] = (described + " " if described else "") + f"({'; '.join(notes)})"
    if "oneOf" in out and "anyOf" not in out:
        # Strict mode knows anyOf only; for tool arguments the difference rarely matters.
        out["anyOf"] = out.pop("oneOf")
    if _is_object(out):
        properties: Schema = out.get("properties") or {}
        required = set(out.get("required") or [])
        out["properties"] = {
            name: sub if name in required else _nullable(sub) for name, sub in properties.items()
        }
        out["required"] = list(properties)
        out["additionalProperties"] = False
        out.setdefault("type", "object")
    return out


def _nullable(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "$ref" in out or "const" in out:
        return {"anyOf": [out, {"type": "null"}]}
    kind = out.get("type")
    if isinstance(kind, str):
        if kind != "null":
            out["type"] = [kind, "null"]
    elif isinstance(kind, list):
        if "null" not in kind:
            out["type"] = [*kind, "null"]
    elif isinstance(out.get("anyOf"), list):
        if not any(isinstance(s, dict) and s.get("type") == "null" for s in out["anyOf"]):
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    elif "enum" not in out:
        return {"anyOf": [out, {"type": "null"}]}
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def _strip_nulls(value: Any, schema: Any) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        out: dict[str, Any] = {}
        for name, item in value.items():
            if item is None and name in properties and name not in required:
                continue
            out[name] = _strip_nulls(item, properties.get(name))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_strip_nulls(item, schema["items"]) for item in value]
    return value
