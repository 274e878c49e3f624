"""Tool declarations in Harmony: JSON-schema parameters rendered as TypeScript.

A tool namespace is rendered into the system message (built-in tools) or the developer
message (function tools) as::

    ## functions

    namespace functions {

    // Gets the current weather in the provided location.
    type get_current_weather = (_: {
    // The city and state, e.g. San Francisco, CA
    location: string,
    format?: "celsius" | "fahrenheit", // default: celsius
    }) => any;

    } // namespace functions

A namespace without tools (``python``) is its description as plain text. Namespaces are
sorted by name. :func:`typescript_type` follows openai-harmony's JSON-schema conversion
exactly (checked against the package on a corpus of schemas): descriptions, titles and
string examples become ``//`` comments, non-required properties get ``?``, enums become
string-literal unions, ``oneOf`` becomes a ``|`` list with per-variant comments, nested
objects are indented by four spaces, ``nullable`` adds ``| null`` and defaults become
trailing ``// default:`` comments (strings quoted unless the property is an enum).

The official Hugging Face chat template renders function tools with its own Jinja macro,
which differs on defaults, nested objects, ``oneOf`` and more; :mod:`harmony.chat_template`
ports that macro for template parity (the gpt-oss renderer's ``template`` dialect).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BROWSER",
    "PYTHON",
    "ToolDescription",
    "ToolNamespace",
    "functions_namespace",
    "render_namespace",
    "render_namespaces",
    "typescript_type",
]


@dataclass(frozen=True, slots=True)
class ToolDescription:
    """One tool: a name, a description and JSON-schema ``parameters`` (``None``: the tool
    takes no arguments and is rendered as ``() => any``)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None

    @classmethod
    def from_openai(cls, tool: Mapping[str, Any]) -> ToolDescription:
        """A tool from an OpenAI tool dict (``{"type": "function", "function": {...}}``) or
        from its bare ``function`` dict."""
        function = tool.get("function", tool)
        if not isinstance(function, Mapping):
            raise ValueError(f"function: expected a dict, got {type(function).__name__}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"function.name: expected a non-empty string, got {name!r}")
        description = function.get("description") or ""
        if not isinstance(description, str):
            raise ValueError(
                f"function.description: expected a string, got {type(description).__name__}"
            )
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, Mapping):
            raise ValueError(
                f"function.parameters: expected a dict, got {type(parameters).__name__}"
            )
        return cls(name, description, parameters)


@dataclass(frozen=True, slots=True)
class ToolNamespace:
    """A named group of tools (``functions``, ``browser``) or, without tools, a described
    capability (``python``)."""

    name: str
    description: str | None = None
    tools: tuple[ToolDescription, ...] = ()


def functions_namespace(tools: Iterable[Mapping[str, Any] | ToolDescription]) -> ToolNamespace:
    """The ``functions`` namespace of OpenAI tool dicts (errors name the tool index)."""
    out: list[ToolDescription] = []
    for i, tool in enumerate(tools):
        if isinstance(tool, ToolDescription):
            out.append(tool)
            continue
        kind = tool.get("type")
        if kind not in (None, "function") and "function" not in tool:
            raise ValueError(
                f"tools[{i}].type: {kind!r} is not a function tool (Harmony declares function "
                "tools only; built-in browser/python tools are options of the system message)"
            )
        try:
            out.append(ToolDescription.from_openai(tool))
        except ValueError as exc:
            raise ValueError(f"tools[{i}].{exc}") from None
    return ToolNamespace("functions", None, tuple(out))


# -- TypeScript of a JSON schema (openai-harmony's algorithm) ------------------------------


def _json(value: Any) -> str:
    """serde_json's compact rendering (keys in given order, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_enum(schema: Mapping[str, Any]) -> bool:
    return isinstance(schema.get("enum"), list)


def _default_comment(schema: Mapping[str, Any], default: Any) -> str:
    if isinstance(default, str) and not _is_enum(schema):
        return f'default: "{default}"'
    if isinstance(default, str):
        return f"default: {default}"
    return f"default: {_json(default)}"


def _nullable(schema: Mapping[str, Any], type_str: str) -> str:
    if schema.get("nullable") is True and "null" not in type_str:
        return type_str + " | null"
    return type_str


def _variant(variant: Any, indent: str) -> str:
    """One ``oneOf`` variant: its type and its trailing description/default comment."""
    if not isinstance(variant, Mapping):
        return "any"
    out = _nullable(variant, typescript_type(variant, indent + "   "))
    comments = []
    description = variant.get("description")
    if isinstance(description, str):
        comments.append(description)
    if "default" in variant:
        comments.append(_default_comment(variant, variant["default"]))
    if comments:
        out += " // " + " ".join(comments)
    return out


def typescript_type(schema: Mapping[str, Any], indent: str = "") -> str:
    """The TypeScript type of a JSON schema, exactly as openai-harmony writes it."""
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        return "".join(f"\n{indent} | " + _variant(v, indent) for v in one_of)
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if t == "integer" else t for t in kind if isinstance(t, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object_type(schema, indent)
    if kind == "string":
        values = schema.get("enum")
        if isinstance(values, list):
            literals = [f'"{v}"' for v in values if isinstance(v, str)]
            if literals:
                return " | ".join(literals)
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, Mapping):
            return typescript_type(items, indent) + "[]"
        return "Array<any>"
    return "any"


def _object_type(schema: Mapping[str, Any], indent: str) -> str:
    lines: list[str] = []
    description = schema.get("description")
    head = f"{indent}// {description}\n{{\n" if isinstance(description, str) else "{\n"
    properties = schema.get("properties")
    required = schema.get("required")
    required_names = (
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    )
    if isinstance(properties, Mapping):
        for key, value in properties.items():
            spec: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
            optional = "" if key in required_names else "?"
            title = spec.get("title")
            if isinstance(title, str):
                lines.append(f"{indent}// {title}\n{indent}//\n")
            one_of = spec.get("oneOf")
            prop_description = spec.get("description")
            if not isinstance(one_of, list) and isinstance(prop_description, str):
                lines.append(f"{indent}// {prop_description}\n")
            examples = spec.get("examples")
            if isinstance(examples, list) and examples:
                lines.append(f"{indent}// Examples:\n")
                lines.extend(f'{indent}// - "{ex}"\n' for ex in examples if isinstance(ex, str))
            if isinstance(one_of, list):
                if isinstance(prop_description, str):
                    lines.append(f"{indent}// {prop_description}\n")
                if "default" in spec:
                    default = spec["default"]
                    shown = f'"{default}"' if isinstance(default, str) else _json(default)
                    lines.append(f"{indent}// default: {shown}\n")
                lines.append(f"{indent}{key}{optional}:\n")
                lines.extend(f"{indent} | {_variant(v, indent)}\n" for v in one_of)
                lines.append(f"{indent},\n")
                continue
            line = f"{indent}{key}{optional}: "
            line += _nullable(spec, typescript_type(spec, indent + "    ")) + ","
            if "default" in spec:
                line += " // " + _default_comment(spec, spec["default"])
            lines.append(line + "\n")
    return head + "".join(lines) + indent + "}"


# -- namespaces ----------------------------------------------------------------------------


def _comment_lines(text: str) -> str:
    return "".join(f"// {line}\n" for line in text.splitlines())


def render_namespace(namespace: ToolNamespace) -> str:
    """One namespace section (``## name`` ...), without a trailing newline."""
    out = f"## {namespace.name}\n\n"
    if not namespace.tools:
        return out + (namespace.description or "")
    if namespace.description:
        out += _comment_lines(namespace.description)
    out += f"namespace {namespace.name} {{\n\n"
    for tool in namespace.tools:
        out += _comment_lines(tool.description)
        if tool.parameters is None:
            out += f"type {tool.name} = () => any;\n\n"
        else:
            out += f"type {tool.name} = (_: {typescript_type(tool.parameters)}) => any;\n\n"
    return out + f"}} // namespace {namespace.name}"


def render_namespaces(namespaces: Sequence[ToolNamespace]) -> str:
    """The ``# Tools`` section body: namespaces sorted by name, separated by blank lines."""
    return "\n\n".join(render_namespace(ns) for ns in sorted(namespaces, key=lambda n: n.name))


# -- built-in tools ------------------------------------------------------------------------

BROWSER = ToolNamespace(
    "browser",
    "Tool for browsing.\n"
    "The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
    "Cite information from the tool using the following format:\n"
    "`【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n"
    "Do not quote more than 10 words directly from the tool output.\n"
    "sources=web (default: web)",
    (
        ToolDescription(
            "search",
            "Searches for information related to `query` and displays `topn` results.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "topn": {"type": "number", "default": 10},
                    "source": {"type": "string"},
                },
                "required": ["query"],
            },
        ),
        ToolDescription(
            "open",
            "Opens the link `id` from the page indicated by `cursor` starting at line number "
            "`loc`, showing `num_lines` lines.\n"
            "Valid link ids are displayed with the formatting: `【{id}†.*】`.\n"
            "If `cursor` is not provided, the most recent page is implied.\n"
            "If `id` is a string, it is treated as a fully qualified URL associated with "
            "`source`.\n"
            "If `loc` is not provided, the viewport will be positioned at the beginning of the "
            "document or centered on the most relevant passage, if available.\n"
            "Use this function without `id` to scroll to a new location of an opened page.",
            {
                "type": "object",
                "properties": {
                    "id": {"type": ["number", "string"], "default": -1},
                    "cursor": {"type": "number", "default": -1},
                    "loc": {"type": "number", "default": -1},
                    "num_lines": {"type": "number", "default": -1},
                    "view_source": {"type": "boolean", "default": False},
                    "source": {"type": "string"},
                },
            },
        ),
        ToolDescription(
            "find",
            "Finds exact matches of `pattern` in the current page, or the page given by `cursor`.",
            {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "cursor": {"type": "number", "default": -1},
                },
                "required": ["pattern"],
            },
        ),
    ),
)
"""The built-in ``browser`` tool (recipients ``browser.search``, ``browser.open``,
``browser.find``)."""

PYTHON = ToolNamespace(
    "python",
    "Use this tool to execute Python code in your chain of thought. The code will not be "
    "shown to the user. This tool should be used for internal reasoning, but not for code "
    "that is intended to be visible to the user (e.g. when creating plots, tables, or "
    "files).\n\n"
    "When you send a message containing Python code to python, it will be executed in a "
    "stateful Jupyter notebook environment. python will respond with the output of the "
    "execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to "
    "save and persist user files. Internet access for this session is UNKNOWN. Depends on "
    "the cluster.",
)
"""The built-in ``python`` tool (recipient ``python``)."""
