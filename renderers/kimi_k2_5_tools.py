"""Kimi-K2.5's TypeScript-style tool declarations.

The tokenizer in the model repository (``tokenization_kimi.py``, remote code) converts
the tools of every request to this text before templating (``tools_ts_str``), with its
``tool_declaration_ts.py``; the template writes it as the tool declaration, so it is what
the model sees wherever the hub tokenizer renders the chat (vLLM, SGLang,
``apply_chat_template``)::

    # Tools⏎⏎## functions⏎namespace functions {⏎
    // {description, one comment per line}⏎
    type {name} = (_: {⏎  {required parameters by name, then optional ones}⏎}) => any;⏎
    }⏎

A parameter is ``name: type`` (``name?`` when optional), after comment lines for its
description, constraints (``maxLength``, ``minLength``, ``pattern`` of strings;
``maximum``, ``minimum`` of numbers; ``minItems``, ``maxItems`` of arrays) and default;
``integer`` is ``number``, an enum is its values joined by ``|``, an array is
``Array<item>``, ``anyOf`` and type lists are unions, ``$defs`` become interfaces and
``$ref`` their names. A schema this cannot express makes the tokenizer fall back to the
JSON declaration (:func:`typescript_declaration` returns ``None``).

Written after tinker-cookbook 0.6.1's ``kimi_k2_5_tool_declaration_ts.py`` (a copy of the
model repository's ``tool_declaration_ts.py``) and checked against it on every tool
schema of the tests (``tests/test_kimi_k2_5.py``); its quirks are kept, since the model
was trained on its output: values print as Python prints them (``True``, ``1.0``), enum
strings are quoted without escaping, and a self-referencing schema's root interface keeps
the properties in their order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["typescript_declaration"]

_INDENT = "  "
_FIELDS = ",\n"
_CONSTRAINTS = {
    "string": ("maxLength", "minLength", "pattern"),
    "number": ("maximum", "minimum"),
    "integer": ("maximum", "minimum"),
}
_UNION_NAMES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "{}",
    "array": "Array<any>",
}


class _Unsupported(Exception):
    """A schema the declaration cannot express (the tokenizer then declares JSON)."""


def typescript_declaration(tools: Sequence[Mapping[str, Any]]) -> str | None:
    """The TypeScript-style declaration of OpenAI ``tools`` (keys already deep-sorted, as
    the tokenizer sorts them), or ``None`` where the tokenizer falls back to JSON: a
    schema it cannot express, or no function tool."""
    try:
        functions = [
            _function(tool["function"])
            for tool in tools
            if tool.get("type") == "function" and tool.get("function")
        ]
    except (_Unsupported, AttributeError, KeyError, TypeError, ValueError, RecursionError):
        return None
    if not functions:
        return None
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(functions) + "\n}\n"


def _comment(text: str, indent: str = "") -> str:
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


@dataclass
class _Definitions:
    """The ``$defs`` of a function's parameters, and whether a ``$ref`` names the root."""

    schemas: dict[str, Any] = field(default_factory=dict)
    root_referenced: bool = False

    def reference(self, ref: str) -> str:
        if ref == "#":
            self.root_referenced = True
            return "parameters"
        if ref.startswith("#/$defs/"):
            name = ref.split("/")[-1]
            if name not in self.schemas:
                raise _Unsupported(f"reference not found: {ref}")
            return name
        raise _Unsupported(f"unsupported reference: {ref}")


@dataclass
class _Type:
    """A parsed schema: how it is written, and its comment lines."""

    description: str
    constraints: dict[str, Any]

    def comments(self, indent: str) -> str:
        lines = []
        if self.description:
            lines.append(_comment(self.description, indent))
        if self.constraints:
            pairs = ", ".join(f"{k}: {v}" for k, v in sorted(self.constraints.items()))
            lines.append(f"{indent}// {pairs}")
        return "".join(line + "\n" for line in lines)

    def written(self, indent: str) -> str:
        raise NotImplementedError


@dataclass
class _Name(_Type):
    """A scalar type, a type list, an enum, a union or a reference: one line."""

    text: str = ""

    def written(self, indent: str) -> str:
        return self.text


@dataclass
class _Union(_Type):
    """``anyOf``: the alternatives joined by ``|``, each written at the same indent."""

    alternatives: list[_Type] = field(default_factory=list)

    def written(self, indent: str) -> str:
        return " | ".join(t.written(indent) for t in self.alternatives)


@dataclass
class _Parameter:
    name: str
    type: _Type
    optional: bool
    default: Any

    def written(self, indent: str) -> str:
        comments = self.type.comments(indent)
        if self.default is not None:
            default = (
                repr(self.default)
                if isinstance(self.default, (int, float, bool))
                else json.dumps(self.default, ensure_ascii=False)
            )
            comments += f"{indent}// Default: {default}\n"
        mark = "?" if self.optional else ""
        return f"{comments}{indent}{self.name}{mark}: {self.type.written(indent)}"


@dataclass
class _Object(_Type):
    parameters: list[_Parameter] = field(default_factory=list)
    extra: Any = None
    """``additionalProperties``: ``None`` (absent), a boolean or a parsed schema."""

    def written(self, indent: str) -> str:
        inner = indent + _INDENT
        ordered = sorted((p for p in self.parameters if not p.optional), key=lambda p: p.name)
        ordered += sorted((p for p in self.parameters if p.optional), key=lambda p: p.name)
        fields = [p.written(inner) for p in ordered]
        if self.extra is not None:
            if self.extra is True:
                extra = "any"
            elif self.extra is False:
                extra = "never"
            elif isinstance(self.extra, _Type):
                extra = self.extra.written(inner)
            else:
                raise _Unsupported(f"additionalProperties: {self.extra!r}")
            fields.append(f"{inner}[k: string]: {extra}")
        if not fields:
            return "{}"
        return "{\n" + _FIELDS.join(fields) + "\n" + indent + "}"


@dataclass
class _Array(_Type):
    item: _Type | None = None

    def written(self, indent: str) -> str:
        assert self.item is not None
        inner = indent + _INDENT
        comments = self.item.comments(inner)
        if comments:
            return f"Array<\n{comments}{inner}{self.item.written(inner)}\n{indent}>"
        return f"Array<{self.item.written(indent)}>"


def _parse(schema: Any, defs: _Definitions) -> _Type:
    if isinstance(schema, bool):
        return _Name("", {}, "any" if schema else "null")
    description = schema.get("description", "")
    if "$ref" in schema:
        return _Name(description, {}, defs.reference(schema["$ref"]))
    if "anyOf" in schema:
        return _Union(description, {}, [_parse(t, defs) for t in schema["anyOf"]])
    if "enum" in schema:
        return _enum(schema, description)
    if "type" in schema:
        kind = schema["type"]
        if isinstance(kind, list):
            return _Name(description, {}, " | ".join(_UNION_NAMES[t] for t in kind))
        if kind == "object":
            return _object(schema, defs)
        if kind == "array":
            constraints = {k: v for k, v in schema.items() if k in ("minItems", "maxItems")}
            items = schema.get("items")
            item = _parse(items, defs) if items else _Name("", {}, "any")
            return _Array(description, constraints, item)
        allowed = _CONSTRAINTS.get(kind, ())
        constraints = {k: v for k, v in schema.items() if k in allowed}
        return _Name(description, constraints, "number" if kind == "integer" else kind)
    if schema == {}:
        return _Name("", {}, "any")
    raise _Unsupported(f"not a JSON schema: {schema!r}")


def _object(schema: Mapping[str, Any], defs: _Definitions) -> _Object:
    node = _Object(schema.get("description", ""), {})
    if not schema:
        return node
    defs.schemas.update(schema.get("$defs") or {})
    extra = schema.get("additionalProperties")
    node.extra = _parse(extra, defs) if isinstance(extra, dict) else extra
    properties = schema.get("properties")
    if properties is None:
        return node
    required = schema.get("required", [])
    node.parameters = [
        _Parameter(
            name,
            _parse(prop, defs),
            name not in required,
            prop.get("default") if isinstance(prop, dict) else None,
        )
        for name, prop in properties.items()
    ]
    return node


def _enum(schema: Mapping[str, Any], description: str) -> _Name:
    values = schema["enum"]
    kind = schema.get("type")
    if isinstance(kind, list):
        if len(kind) == 1:
            kind = kind[0]
        elif len(kind) == 2 and "null" in kind:
            kind = kind[0] if kind[0] != "null" else kind[1]
        else:
            raise _Unsupported(f"enum type {kind}")
    expected: dict[Any, type | tuple[type, ...]] = {
        "string": str,
        "number": (int, float),
        "integer": int,
        "boolean": bool,
    }
    if (
        isinstance(kind, str)
        and kind in expected
        and any(v is not None and not isinstance(v, expected[kind]) for v in values)
    ):
        raise _Unsupported(f"enum values of another type than {kind}")
    text = " | ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values)
    return _Name(description, {}, text)


def _function(function: Mapping[str, Any]) -> str:
    defs = _Definitions()
    parameters = _object(function.get("parameters") or {}, defs)
    interfaces = []
    root = None
    if defs.root_referenced:
        root = "parameters"
        # The root's properties in their order, without additionalProperties.
        fields = _FIELDS.join(p.written(_INDENT) for p in parameters.parameters)
        body = f"\n{fields}\n" if fields else ""
        interfaces.append(f"interface {root} {{{body}}}")
    for name, schema in dict(defs.schemas).items():
        written = _parse(schema, defs).written("")
        description = schema.get("description", "")
        heading = _comment(description) + "\n" if description else ""
        interfaces.append(f"{heading}interface {name} {written}")
    name = function.get("name", "function")
    signature = f"type {name} = (_: {root or parameters.written('')}) => any;"
    description = function.get("description")
    parts = ["\n".join(interfaces), (description and _comment(description)) or "", signature]
    return "\n".join(p for p in parts if p)
