"""Argument errors a model can act on: which argument, what was expected, an example.

Why: the SDK validates a tool's arguments with pydantic and answered a wrong type with pydantic's own text
("1 validation error for start_searchArguments ... [type=int_parsing ...] For further information visit
https://errors.pydantic.dev/...", issue 41). `GuardedServer.call_tool` validates first with the same model and
raises `argument_error(...)` instead: one line per bad argument, e.g.

    budget: expected a whole number, got 'many' (text); e.g. budget=20

The expected type is read from the tool's published input schema; the example comes from EXAMPLES (by
argument name) or, failing that, from the type.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from adaexplore_mcp.errors import quote

MAX_LISTED = 5  # errors listed in one message; the rest are counted

# One valid value per argument name used by the tools (an example beats a type name).
EXAMPLES: dict[str, Any] = {
    "budget": 20, "count": 2, "next": 1, "seed": 0, "limit": 20, "max_nodes": 100, "timeout_s": 60,
    "task_id": "relu", "search_id": "srch_0123abcd", "step_id": "step_0123abcd", "eval_id": "ev_0123abcd",
    "job_id": "job_0123abcd", "rule_id": "seed-undefined-name", "rule_ids": ["r1", "r2"],
    "edits": [{"old": "BLOCK=128", "new": "BLOCK=256"}],
    "items": [{"step_id": "step_0123abcd", "edits": [{"old": "BLOCK=128", "new": "BLOCK=256"}], "note": "wider"}],
    "small_shapes": {"batch_size": 8}, "strategy": "adaexplore", "ripe_only": False, "include_sources": False,
    "detail": True, "origin": "user", "kernel_source": "import torch ... class ModelNew(nn.Module): ...",
}
_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "boolean": "true or false", "string": "text",
               "array": "a list", "object": "an object", "null": "null"}
_TYPE_EXAMPLES = {"integer": 1, "number": 1.0, "boolean": True, "string": "...", "array": [], "object": {}}


_UNION_TAGS = frozenset({"int", "float", "str", "bool", "dict", "list", "none", "tuple"})


def _union_tag(part: Any) -> bool:
    """A location part pydantic adds for one member of a union ('int', 'list[int]'): not an argument's name."""
    return isinstance(part, str) and (part in _UNION_TAGS or "[" in part)


def argument_error(exc: ValidationError, input_schema: dict[str, Any]) -> str:
    """The readable text of a failed argument validation (first MAX_LISTED errors). A value that fits no member
    of a union is one error (its location without the members' tags), not one per member."""
    errors, seen = [], set()
    for error in exc.errors(include_url=False):
        loc = tuple(part for part in error.get("loc", ()) if not _union_tag(part))
        if loc in seen:
            continue
        seen.add(loc)
        errors.append({**error, "loc": loc})
    lines, shown = [], set()
    for error in errors[:MAX_LISTED]:
        name = str(error.get("loc", ("",))[0]) if error.get("loc") else ""
        lines.append(_one(error, input_schema, example=name not in shown))
        shown.add(name)
    if len(errors) > MAX_LISTED:
        lines.append(f"... and {len(errors) - MAX_LISTED} more")
    return "invalid arguments: " + "; ".join(lines)


def _one(error: dict[str, Any], input_schema: dict[str, Any], example: bool = True) -> str:
    """One error: the argument's path, what was expected and what came; an example once per argument."""
    loc = [part for part in error.get("loc", ()) if part != "__root__"]
    path = _path(loc)
    schema = _schema_at(input_schema, loc)
    expected = _expected(schema, input_schema)
    name = str(loc[0]) if loc else ""
    sample = _example(name, loc, schema) if example else None
    if error.get("type") == "missing":
        told = f"{path} is required ({expected})"
    elif error.get("type") in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{path} is not an argument of this tool"
    else:
        told = f"{path}: expected {expected}, got {quote(error.get('input'), 60)} ({_kind(error.get('input'))})"
    return f"{told}; e.g. {name}={json.dumps(sample)}" if sample is not None else told


def _path(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _schema_at(schema: dict[str, Any], loc: list[Any]) -> dict[str, Any]:
    """The input schema's node for an error's location (an empty dict where it cannot be followed)."""
    node = schema
    for part in loc:
        node = _resolve(node, schema)
        if isinstance(part, int):
            node = node.get("items", {})
        else:
            props = node.get("properties")
            node = props.get(part, {}) if isinstance(props, dict) else node.get("additionalProperties", {})
        if not isinstance(node, dict):
            return {}
    return _resolve(node, schema)


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return root.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {})
    options = [o for o in node.get("anyOf", []) if isinstance(o, dict) and o.get("type") != "null"]
    return _resolve(options[0], root) if len(options) == 1 else node


def _expected(schema: dict[str, Any], root: dict[str, Any]) -> str:
    types = schema.get("type")
    if isinstance(types, str):
        types = [types]
    if not types and "anyOf" in schema:
        types = [o.get("type") for o in schema["anyOf"] if isinstance(o, dict) and isinstance(o.get("type"), str)]
    words = [_TYPE_WORDS.get(t, t) for t in (types or []) if t != "null"]
    if schema.get("enum"):
        words = ["one of " + ", ".join(json.dumps(v) for v in schema["enum"] if v is not None)]
    text = " or ".join(words) or "another value"
    if "array" in (types or []):
        item = _resolve(schema.get("items", {}), root)
        if item.get("properties"):
            text += " of objects with " + ", ".join(f'"{k}"' for k in item["properties"])
    elif "object" in (types or []) and _resolve(schema, root).get("additionalProperties"):
        value = _expected(_resolve(schema["additionalProperties"], root), root)
        text += f" of names to {value}s" if value != "another value" else ""
    return text


def _example(name: str, loc: list[Any], schema: dict[str, Any]) -> Any:
    if name in EXAMPLES:
        return EXAMPLES[name]
    types = schema.get("type")
    first = types if isinstance(types, str) else next((t for t in types or [] if t != "null"), None)
    return _TYPE_EXAMPLES.get(first) if len(loc) == 1 else None


def _kind(value: Any) -> str:
    """A value's JSON kind, in a model's words."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number with a fraction" if not value.is_integer() else "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__
