"""The JSON Schema of a matrix file, generated from the declarations in ``schema.py``
(``harness matrix schema > harness/matrix/matrix.schema.json``)."""

from __future__ import annotations

from harness.matrix.schema import MATRIX, Bool, Date, Dict, Int, Num, Obj, OneOf, Seq, Str, Type


def _json(node: Type) -> dict[str, object]:
    out: dict[str, object]
    if isinstance(node, Str):
        out = {"type": "string"}
        if node.enum is not None:
            out["enum"] = list(node.enum)
        elif node.pattern is not None:
            out["pattern"] = node.pattern
        if node.ref == "path":
            out["not"] = {"pattern": r"^/|(^|/)\.\.(/|$)"}
    elif isinstance(node, Int):
        out = {"type": "integer"}
        if node.minimum is not None:
            out["minimum"] = node.minimum
    elif isinstance(node, Num):
        out = {"type": "number"}
        if node.minimum is not None:
            out["minimum"] = node.minimum
    elif isinstance(node, Bool):
        out = {"type": "boolean"}
    elif isinstance(node, Date):
        out = {"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
    elif isinstance(node, Seq):
        out = {"type": "array", "items": _json(node.item)}
    elif isinstance(node, Dict):
        out = {
            "type": "object",
            "propertyNames": _json(node.keys),
            "additionalProperties": _json(node.value),
        }
    elif isinstance(node, Obj):
        props: dict[str, object] = {}
        for name, sub in node.fields.items():
            props[name] = _json(sub)
            if isinstance(sub, Seq):  # `key+:` appends to the inherited list
                props[name + "+"] = _json(sub)
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if node.required:
            out["required"] = list(node.required)
    elif isinstance(node, OneOf):
        out = {"anyOf": [_json(option) for option in node.options]}
    else:  # pragma: no cover - every Type subclass is handled above
        raise TypeError(node)
    if node.nullable:
        options = out.get("anyOf")
        if not isinstance(options, list):
            out = {"anyOf": [out, {"type": "null"}]}
        elif {"type": "null"} not in options:
            options.append({"type": "null"})
    if node.doc:
        out["description"] = node.doc
    return out


def json_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of one matrix file, or of a resolved matrix."""
    body = _json(MATRIX)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://harness.invalid/matrix.schema.json",
        "title": "harness capability matrix",
        "description": "Generated from harness/matrix/schema.py by `harness matrix schema`; "
        "do not edit by hand.",
        **{k: v for k, v in body.items() if k != "description"},
    }
