"""Lean tool schemas: what `tools/list` publishes, sized for a model that reads it before its first call.

Why: the SDK derives each tool's output schema from its pydantic result model (titles on every field, every
default, every nested model of the judge's internals) and a client that forwards output schemas to its model
paid about 40k tokens for them (issue 41). The SDK reads `outputSchema` as published data, so the server lists
a compacted copy (`GuardedServer.list_tools`); results are still validated against the full model.

The compacted schema describes a superset of what a tool returns, so a client that validates results against
it still accepts them: nothing is added, `required` and `default` are dropped (lean results leave out empty
fields), and judge internals that results leave out by default (`lean.INTERNAL_EVALUATION_FIELDS`) are not
described. Shared definitions stay in `$defs`, once per schema, and a type is described in full by one tool
only (HOMES); descriptions, cut to their first sentence, are kept on a result's own fields.
"""

from __future__ import annotations

import copy
from typing import Any

from adaexplore_mcp.surface.lean import INTERNAL_EVALUATION_FIELDS

# Keys of a JSON schema object that hold schemas by name (property names are data, not keywords).
_NAMED_SCHEMAS = ("properties", "$defs", "patternProperties")
_DROPPED_KEYWORDS = ("title", "default", "required", "examples", "minimum", "maximum", "exclusiveMinimum",
                     "exclusiveMaximum")
MAX_DESCRIPTION = 70  # a longer first sentence is cut at its first clause


# Each result type is described in full by one tool, its home; another tool that returns one names the home
# instead of repeating it (expand_node's `evaluation` is "as evaluate_kernel returns it"). With the shared
# `$defs` of each schema, this is what keeps the list lean: the brief and the evaluation are described once.
HOMES = {
    "Evaluation": "evaluate_kernel", "StepBrief": "next_step", "Brief": "next_step", "ExpandResult": "expand_node",
    "RuleInfo": "add_rule", "TaskInfo": "get_task", "SearchTree": "get_search",
    "Job": "get_job",
}
# Where "as <home> returns it" would not be exact.
HOME_NOTES = {"TaskInfo": "a task, as get_task returns it less the reference source"}
# Types a model reads as a whole, not field by field: published as an object with one line.
OPAQUE = {"SearchParams": "the search's tuning constants (UCB, rewards, sizes)"}


def compact_output_schema(schema: dict[str, Any], tool: str = "") -> dict[str, Any]:
    """The published output schema of `tool`: no titles, defaults, bounds or `required`; judge internals left
    out; a type whose home is another tool named, not repeated; descriptions (first sentence) only on the
    result's own fields; unused definitions removed."""
    home = HOMES.get(schema.get("title", ""))
    if home is not None and home != tool:
        return _named(schema["title"])
    schema = copy.deepcopy(schema)
    defs = schema.get("$defs", {})
    for model in (schema, defs.get("Evaluation")):
        if model is not None and {"verdict", "backend", "eval_id"} <= set(model.get("properties", {})):
            for name in INTERNAL_EVALUATION_FIELDS:
                model["properties"].pop(name, None)
    full = copy.deepcopy(schema)
    _strip(schema)
    _nullable_types(schema)
    _share_bases(schema)
    _field_descriptions(schema, full)
    for model in schema.get("$defs", {}).values():
        if "properties" in model and model.get("type") == "object":
            del model["type"]  # implied by `properties`; only the root must say it (the MCP spec)
    defs = schema.get("$defs", {})
    for name in list(defs):
        if HOMES.get(name, tool) != tool:
            defs[name] = _named(name)
        elif name in OPAQUE:
            defs[name] = {"type": "object", "description": OPAQUE[name]}
    if defs:
        used = _referenced(schema)
        schema["$defs"] = {name: d for name, d in defs.items() if name in used}
        if not schema["$defs"]:
            del schema["$defs"]
    return schema


def _named(model: str) -> dict[str, Any]:
    """A type described at its home tool, referred to by it."""
    return {"type": "object", "description": HOME_NOTES.get(model, f"as {HOMES[model]} returns it")}


def compact_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The published input schema: the same, less titles, with nullable types written short (defaults and
    `required` tell a caller what to send; argument descriptions are kept whole)."""
    schema = copy.deepcopy(schema)
    _drop_titles(schema)
    _nullable_types(schema)
    return schema


def _strip(node: Any) -> None:
    """Drop keywords a model does not need, and every description (`_field_descriptions` puts some back)."""
    if isinstance(node, list):
        for item in node:
            _strip(item)
        return
    if not isinstance(node, dict):
        return
    for key in (*_DROPPED_KEYWORDS, "description"):
        node.pop(key, None)
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]  # results are checked against the model; a published schema only widens
    for key, value in node.items():
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            for child in value.values():
                _strip(child)
        elif key not in ("enum", "const"):
            _strip(value)


def _field_descriptions(compact: dict[str, Any], full: dict[str, Any]) -> None:
    """Field descriptions, first clause only, on the result's own fields (the root model and the model it
    extends): what a model reads to use a result. Nested types' fields are named, typed and not described."""
    full_defs = full.get("$defs", {})
    owners = [(compact, full)]
    for base in compact.get("allOf", []):
        name = base.get("$ref", "").rsplit("/", 1)[-1]
        if name in compact.get("$defs", {}) and name in full_defs:
            owners.append((compact["$defs"][name], full_defs[name]))
    for model, source in owners:
        for field, schema in model.get("properties", {}).items():
            text = source.get("properties", {}).get(field, {}).get("description")
            if isinstance(text, str) and isinstance(schema, dict):
                schema["description"] = _first_sentence(text)


def _share_bases(schema: dict[str, Any]) -> None:
    """A model that extends another (StepBrief of Brief, MemoryEntry of KernelRef) lists only its own fields
    beside `allOf: [$ref base]`, instead of repeating the base's."""
    defs = schema.get("$defs", {})
    models = [("", schema)] + [(name, d) for name, d in defs.items()]
    for name, model in models:
        props = model.get("properties")
        if not isinstance(props, dict):
            continue
        bases = [(b, d["properties"]) for b, d in defs.items() if b != name and isinstance(d.get("properties"), dict)
                 and 2 < len(d["properties"]) < len(props)
                 and all(props.get(k) == v for k, v in d["properties"].items())]
        if bases:
            base, base_props = max(bases, key=lambda b: len(b[1]))
            model["properties"] = {k: v for k, v in props.items() if k not in base_props}
            model["allOf"] = [{"$ref": f"#/$defs/{base}"}]


def _nullable_types(node: Any) -> None:
    """`anyOf: [{type: T}, {type: null}]` as `type: [T, null]`: the same values, a third of the text."""
    if isinstance(node, list):
        for item in node:
            _nullable_types(item)
        return
    if not isinstance(node, dict):
        return
    options = node.get("anyOf")
    if (isinstance(options, list) and len(options) == 2 and options[1] == {"type": "null"}
            and isinstance(options[0], dict) and isinstance(options[0].get("type"), str)):
        plain = options[0]
        del node["anyOf"]
        node.update({**plain, "type": [plain["type"], "null"]})
        if "enum" in plain:
            node["enum"] = [*plain["enum"], None]
    for key, value in node.items():
        if key not in ("description", "enum", "const"):
            _nullable_types(value)


def _drop_titles(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _drop_titles(item)
    elif isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                for child in value.values():
                    _drop_titles(child)
            elif key not in ("description", "default", "enum", "const"):
                _drop_titles(value)


def _first_sentence(text: str) -> str:
    """A description's first sentence (or clause, when the sentence is longer than MAX_DESCRIPTION)."""
    text = text.split(". ", 1)[0]
    for stop in ("; ", " (", ", "):
        if len(text) > MAX_DESCRIPTION and stop in text:
            text = text.split(stop, 1)[0]
    return text


def _referenced(schema: dict[str, Any]) -> set[str]:
    """Names of the `$defs` reachable from the schema's own properties (transitively)."""
    defs = schema.get("$defs", {})
    seen: set[str] = set()
    todo = [{k: v for k, v in schema.items() if k != "$defs"}]
    while todo:
        node = todo.pop()
        for ref in _refs(node):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen and name in defs:
                seen.add(name)
                todo.append(defs[name])
    return seen


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []
