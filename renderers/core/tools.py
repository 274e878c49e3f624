"""Tool definitions in the shapes users have, normalized once to the shape templates expect.

Every chat template this package reproduces declares tools from the OpenAI chat shape
``{"type": "function", "function": {"name", "description", "parameters"}}``. Datasets and
SDKs hold other shapes; :func:`normalize_tools` accepts each of them:

- OpenAI chat completions: ``{"type": "function", "function": {...}}`` (kept as given);
- flat: ``{"name", "description", "parameters"}`` (the bare ``function`` object);
- OpenAI Responses: ``{"type": "function", "name", "description", "parameters", "strict"}``;
- Anthropic Messages: ``{"name", "description", "input_schema"}``;
- MCP ``tools/list`` entries: ``{"name", "title", "description", "inputSchema", ...}``.

The last four become the chat shape with the function's own keys in their given order
(Anthropic's and MCP's API metadata such as ``cache_control``, ``title``,
``annotations`` and ``outputSchema`` is not part of a function declaration and is left out).

A tool whose ``type`` is not ``"function"`` (a built-in such as ``{"type": "retrieval"}``)
is kept as given: JSON-declaring templates dump it like any tool, Kimi-K2.5's TypeScript
declaration skips it, and formats that can only declare functions reject it by name.

A tool may also be JSON text, and so may the whole list (datasets often store tools as a
string column). Tools are otherwise rendered exactly as given, an explicit ``null`` too.

Data read back from Arrow or Parquet needs one more step, :func:`without_nulls`: struct
columns give every row every key seen in any row, filled with null, so ``{"a": 1}`` comes
back as ``{"a": 1, "b": None}``. The dataset pipeline (:mod:`renderers.prepare`) applies
it to every row it reads, so a schema read back from Parquet renders exactly as the JSON
it was written from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["deep_sort", "normalize_tools", "without_nulls"]


def normalize_tools(tools: Any) -> list[Mapping[str, Any]] | None:
    """``tools`` as a list of OpenAI chat-shaped tool dicts (``None`` stays ``None``).

    Errors are ``ValueError`` naming the tool index and field, e.g.
    ``tools[2]: expected a function tool with a name ...``.
    """
    if tools is None:
        return None
    if isinstance(tools, str):
        tools = _json_text(tools, "tools")
        if not isinstance(tools, list):
            raise ValueError(f"tools: expected a JSON list, got {type(tools).__name__}")
        return [_normalized(tool, i) for i, tool in enumerate(tools)]
    if isinstance(tools, (bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ValueError(f"tools: expected a list of tool definitions, got {type(tools).__name__}")
    return [_normalized(tool, i) for i, tool in enumerate(tools)]


def without_nulls(value: Any) -> Any:
    """``value`` with every ``None``-valued mapping key removed, recursively (through lists
    too): how to read a row back from Arrow, whose struct columns fill absent keys with
    null. The same object when there is nothing to remove."""
    if isinstance(value, Mapping):
        cleaned = {k: without_nulls(v) for k, v in value.items() if v is not None}
        if len(cleaned) == len(value) and all(cleaned[k] is v for k, v in value.items()):
            return value
        return cleaned
    if isinstance(value, list):
        items = [without_nulls(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _json_text(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None


def _normalized(tool: Any, i: int) -> dict[str, Any]:
    where = f"tools[{i}]"
    if isinstance(tool, str):
        tool = _json_text(tool, where)
    if not isinstance(tool, Mapping):
        raise ValueError(f"{where}: expected a dict, got {type(tool).__name__}")
    function = tool.get("function")
    if function is not None:  # the chat shape
        if not isinstance(function, Mapping):
            raise ValueError(f"{where}.function: expected a dict, got {type(function).__name__}")
        _check_name(function.get("name"), f"{where}.function.name")
        return tool if type(tool) is dict else dict(tool)
    kind = tool.get("type")
    if kind not in (None, "function"):
        # A built-in tool (``{"type": "retrieval"}``, Responses' ``web_search``): no function
        # to declare. Kept as given; each format renders or skips it as its template does.
        return tool if type(tool) is dict else dict(tool)
    name = tool.get("name")
    _check_name(name, f"{where}.name")
    if "input_schema" in tool or "inputSchema" in tool:  # Anthropic, MCP
        schema_key = "input_schema" if "input_schema" in tool else "inputSchema"
        declared: dict[str, Any] = {"name": name}
        if tool.get("description") is not None:
            declared["description"] = tool["description"]
        declared["parameters"] = tool[schema_key]
        return {"type": "function", "function": declared}
    # Flat and Responses: the function object itself, less the Responses "type".
    declared = {k: v for k, v in tool.items() if k != "type"}
    return {"type": "function", "function": declared}


def _check_name(name: Any, where: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: expected a non-empty string, got {name!r}")


def deep_sort(value: Any) -> Any:
    """``value`` with the keys of every mapping sorted, recursively (what upstream's
    tokenizer does to ``tools`` before templating)."""
    if isinstance(value, Mapping):
        return {k: deep_sort(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [deep_sort(v) for v in value]
    return value
