"""The subset of JSON Schema that endpoints enforcing strict structured outputs accept.

Hosted OpenAI-compatible APIs with ``"strict": true`` compile the schema into a decoding
constraint and refuse one outside their subset: every object lists all of its properties in
``required`` (optional ones are nullable instead) and sets ``additionalProperties: false``, and
length and numeric bounds are not supported. ``strict_subset`` turns slowwave's answer schema
into that form (references inlined, bounds dropped: the guard enforces them per item anyway;
the properties a grammar lets a model leave out, all nullable, required);
``strict_violations`` says what a schema breaks, so a test holds the answer schema to the rules.
"""

from __future__ import annotations

from typing import Any

# Keywords outside the strict subset: bounds the guard enforces itself, and annotations.
UNSUPPORTED = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "default",
        "title",
    }
)


def strict_subset(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``$ref``s inlined and the keywords strict endpoints refuse removed."""
    definitions = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return walk({**definitions[name], **siblings})
        strict = {
            key: (walk(value) if key != "enum" else value)
            for key, value in node.items()
            if key not in UNSUPPORTED and key != "$defs"
        }
        if "properties" in strict:
            strict["required"] = list(strict["properties"])
        return strict

    result: dict[str, Any] = walk(schema)
    return result


def strict_violations(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every place where ``schema`` breaks the strict rules (empty: it is valid)."""
    found: list[str] = []
    if "$ref" in schema or "$defs" in schema:
        found.append(f"{path}: references must be inlined")
    for key in sorted(UNSUPPORTED & schema.keys()):
        found.append(f"{path}: keyword {key!r} is not supported")
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            found.append(f"{path}: additionalProperties must be false")
        missing = sorted(set(properties) - set(schema.get("required", [])))
        if missing:
            found.append(f"{path}: properties not required: {missing}")
        for name, sub in properties.items():
            found += strict_violations(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        found += strict_violations(schema["items"], f"{path}[]")
    for alternative in schema.get("anyOf", []):
        found += strict_violations(alternative, f"{path}|")
    return found
