"""Tool definitions generated from the schema registry: one generator, three dialects.

Each operation of :mod:`.requests` becomes a tool whose input schema is its request model's JSON
Schema, narrowed by the schema in use: ``attribute`` names only the schema's attributes,
``relations`` only its relations, ``memory_types`` only its memory types, and each fact that
``remember`` takes is one of the attributes, with that attribute's value type (its enum values,
the target entity of a relation) and subject types. So a model sees exactly what it may write.

``sgam tools --format openai|anthropic|mcp`` prints them.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from sgam.graph.models import MAX_VALUE_BYTES
from sgam.graph.schema import AttributeSpec, Schema

from .requests import OPERATIONS, Operation

Dialect = Literal["openai", "anthropic", "mcp"]
DIALECTS: tuple[str, ...] = ("openai", "anthropic", "mcp")


def describe_schema(schema: Schema) -> dict[str, Any]:
    """The schema as a model or a client reads it (the ``schema`` operation's answer)."""
    return {
        "name": schema.name,
        "version": schema.version,
        "entity_types": list(schema.entity_types),
        "memory_types": list(schema.memory_types()),
        "attributes": {name: _attribute(spec) for name, spec in sorted(schema.attributes.items())},
    }


def _attribute(spec: AttributeSpec) -> dict[str, Any]:
    described: dict[str, Any] = {
        "value_type": spec.value_type, "cardinality": spec.cardinality.value,
        "subject_types": list(spec.subject_types), "memory_type": spec.memory_type,
        "visibility": spec.visibility,
    }
    if spec.values:
        described["values"] = list(spec.values)
    if spec.target:
        described["target"] = spec.target
    if spec.visibility == "private":
        described["readers"] = list(spec.readers)
    if spec.gated:
        described["confirmation"] = ("a candidate until its subject (or a listed confirmer) confirms it"
                                     if spec.sensitive else f"a candidate until {spec.requires} episodes state it")
    if spec.description:
        described["description"] = spec.description
    return described


def value_schema(spec: AttributeSpec) -> dict[str, Any]:
    """The JSON Schema of one value of an attribute."""
    kind = spec.value_type
    if kind == "enum":
        return {"type": "string", "enum": list(spec.values)}
    if kind == "entity":
        return {"type": "string", "minLength": 1, "maxLength": 128,
                "description": f"The id of the {spec.target} this points to"}
    if kind == "date":
        return {"type": "string", "format": "date", "description": "YYYY-MM-DD"}
    if kind == "datetime":
        return {"type": "string", "format": "date-time", "description": "ISO 8601 with a timezone"}
    simple = {"int": "integer", "float": "number", "bool": "boolean"}
    if kind in simple:
        return {"type": simple[kind]}
    return {"type": "string", "minLength": 1, "maxLength": MAX_VALUE_BYTES}


def _one_line(name: str, spec: AttributeSpec) -> str:
    kind = {"entity": f"-> {spec.target}", "enum": "one of " + "/".join(spec.values)}.get(
        spec.value_type, spec.value_type)
    notes = [kind, spec.cardinality.value]
    if spec.subject_types:
        notes.append("on " + "/".join(spec.subject_types))
    if spec.visibility == "private":
        notes.append("private: read only by " + ", ".join(spec.readers))
    line = f"{name} ({'; '.join(notes)})"
    return f"{line}: {spec.description}" if spec.description else line


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` into ``defs`` replaced by its definition and titles dropped
    (function-calling dialects take no ``$defs``)."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _fact_schema(base: dict[str, Any], name: str, spec: AttributeSpec) -> dict[str, Any]:
    properties = copy.deepcopy(base["properties"])
    properties["attribute"] = {"const": name}
    properties["value"] = value_schema(spec)
    properties["replaces"] = value_schema(spec)
    if spec.subject_types:
        properties["subject_type"] = {"type": "string", "enum": list(spec.subject_types)}
    # A retraction may leave the value out (one-valued attributes); any other fact names it.
    return {"type": "object", "description": _one_line(name, spec), "properties": properties,
            "required": ["subject", "attribute"], "additionalProperties": False,
            "if": {"properties": {"op": {"const": "retract"}}, "required": ["op"]},
            "else": {"required": ["value"]}}


def input_schema(operation: Operation, schema: Schema) -> dict[str, Any]:
    """The JSON Schema of ``operation``'s arguments under ``schema``."""
    raw = operation.model.model_json_schema()
    generated: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    generated.setdefault("properties", {})
    generated["additionalProperties"] = False
    properties = generated["properties"]
    attributes = sorted(schema.attributes)
    if "attribute" in properties:
        properties["attribute"] = _nullable(properties["attribute"], {"type": "string", "enum": attributes})
    if "relations" in properties:
        relations = sorted(n for n, s in schema.attributes.items() if s.value_type == "entity")
        properties["relations"]["items"] = {"type": "string", "enum": relations}
    if "memory_types" in properties:
        properties["memory_types"] = {"anyOf": [{"type": "array", "maxItems": 100, "items": {
            "type": "string", "enum": list(schema.memory_types())}}, {"type": "null"}]}
    if "deltas" in properties:
        base = properties["deltas"]["items"]
        properties["deltas"]["items"] = {"anyOf": [_fact_schema(base, n, schema.attributes[n])
                                                   for n in attributes]}
    return generated


def _nullable(original: dict[str, Any], narrowed: dict[str, Any]) -> dict[str, Any]:
    optional = "anyOf" in original and any(branch.get("type") == "null" for branch in original["anyOf"])
    return {"anyOf": [narrowed, {"type": "null"}]} if optional else narrowed


def description(operation: Operation, schema: Schema) -> str:
    """The tool's description; ``remember`` lists the attributes it may write."""
    text = operation.description
    if operation.name == "remember":
        lines = "\n".join(f"- {_one_line(n, s)}" for n, s in sorted(schema.attributes.items()))
        text += f"\nAttributes of schema {schema.name} v{schema.version}:\n{lines}"
    return f"{text}\n(Needs a key with scope {operation.scope.value}.)"


def tool_definitions(schema: Schema, dialect: Dialect = "mcp") -> list[dict[str, Any]]:
    """Every operation as a tool definition in ``dialect``: ``mcp`` (``tools/list``), ``openai``
    (Chat Completions / Responses function tools) or ``anthropic`` (Messages API tools)."""
    tools = []
    for operation in OPERATIONS:
        name, text, parameters = operation.name, description(operation, schema), input_schema(operation, schema)
        if dialect == "openai":
            tools.append({"type": "function", "function": {"name": name, "description": text,
                                                           "parameters": parameters}})
        elif dialect == "anthropic":
            tools.append({"name": name, "description": text, "input_schema": parameters})
        elif dialect == "mcp":
            tools.append({"name": name, "description": text, "inputSchema": parameters})
        else:
            raise ValueError(f"unknown tool format {dialect!r}; use one of {', '.join(DIALECTS)}")
    return tools
