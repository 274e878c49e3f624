"""What the official gpt-oss chat template (Hugging Face ``chat_template.jinja``) writes
where it departs from openai-harmony: its TypeScript for function tools, a port of its
Jinja macros with their quirks, and its ``tojson`` filter.

The template's ``render_tool_namespace("functions", tools)`` adds a comma after every
``// default:`` comment, flattens nested object types onto lines indented by the macro's
own indentation, writes every ``oneOf`` variant by variant (its "has object variants"
flag never leaves the loop that sets it) and fails on non-string ``oneOf`` defaults (we
write them as JSON). openai-harmony's conversion is :func:`harmony.tools.typescript_type`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from harmony.tools import ToolDescription

__all__ = ["template_functions", "tojson"]

_TOJSON = json.JSONEncoder(ensure_ascii=False).encode


def tojson(value: Any) -> str:
    """The template's ``tojson`` filter (transformers': non-ASCII kept, default separators)."""
    return _TOJSON(value)


def _concat(value: Any) -> str:
    """``"..." + value`` in the template: strings as is; the template fails on other values,
    we write them as JSON."""
    return value if isinstance(value, str) else tojson(value)


_NESTED = "\n" + " " * 16  # the template's indentation leaking into nested object types


def _template_type(spec: Any) -> str:
    """The template's ``render_typescript_type`` macro, quirks included."""
    if not isinstance(spec, Mapping):
        return "any"
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        if items and isinstance(items, Mapping):
            item_kind = items.get("type")
            if item_kind == "string":
                out = "string[]"
            elif item_kind in ("number", "integer"):
                out = "number[]"
            elif item_kind == "boolean":
                out = "boolean[]"
            else:
                inner = _template_type(items)
                out = "any[]" if inner == "object | object" or len(inner) > 50 else inner + "[]"
        else:
            out = "any[]"
        return out + " | null" if spec.get("nullable") else out
    if isinstance(kind, list) and kind:
        return " | ".join(map(str, kind)) if len(kind) > 1 else str(kind[0])
    one_of = spec.get("oneOf")
    if one_of and isinstance(one_of, list):
        # The macro's "has object variants" flag is set inside a loop and never leaves it
        # (Jinja scoping), so every oneOf is written out variant by variant.
        out = ""
        for k, variant in enumerate(one_of):
            out += _template_type(variant)
            if isinstance(variant, Mapping):
                if variant.get("description"):
                    out += "// " + str(variant["description"])
                if "default" in variant:
                    out += " " * 20 + "// default: " + tojson(variant["default"])
            if k < len(one_of) - 1:
                out += " | \n"
        return out
    if kind == "string":
        enum = spec.get("enum")
        if enum and isinstance(enum, list):
            return '"' + '" | "'.join(map(str, enum)) + '"'
        return "string | null" if spec.get("nullable") else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "object":
        properties = spec.get("properties")
        if not properties or not isinstance(properties, Mapping):
            return "object"
        required = spec.get("required") or []
        fields = [
            name + ("" if name in required else "?") + ": " + _NESTED + _template_type(prop)
            for name, prop in properties.items()
        ]
        return "{\n" + ", ".join(fields) + "}"
    return "any"


def template_functions(tools: Sequence[ToolDescription]) -> str:
    """The template's ``render_tool_namespace("functions", tools)`` macro."""
    out = "## functions\n\nnamespace functions {\n\n"
    for tool in tools:
        out += "// " + tool.description + "\n" + "type " + tool.name + " = "
        params = tool.parameters
        properties = params.get("properties") if params else None
        if not properties or not isinstance(properties, Mapping):
            out += "() => any;\n\n"
            continue
        assert params is not None
        required = params.get("required") or []
        out += "(_: {\n"
        for name, spec in properties.items():
            spec = spec if isinstance(spec, Mapping) else {}
            if spec.get("description"):
                out += "// " + str(spec["description"]) + "\n"
            out += name + ("" if name in required else "?") + ": " + _template_type(spec)
            if "default" in spec:
                if spec.get("enum"):
                    out += ", // default: " + _concat(spec["default"])
                elif spec.get("oneOf"):
                    out += "// default: " + _concat(spec["default"])
                else:
                    out += ", // default: " + tojson(spec["default"])
            out += ",\n"
        out += "}) => any;\n\n"
    return out + "} // namespace functions"
