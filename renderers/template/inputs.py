"""The conversation as a chat template sees it: OpenAI-shaped dicts, every caller string
through the placeholders (:class:`~renderers.template.placeholders.Marks`).

A message becomes ``{"role", "content", ...}`` as ``apply_chat_template`` passes it after
its own normalisation (transformers 5.24's ``_normalize_chat_messages`` and
``_alias_reasoning_fields``): reasoning under both ``reasoning_content`` and ``thinking``,
tool calls as ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the
arguments as :class:`~renderers.template.environment.Arguments`, ``name`` and
``tool_call_id`` when set. List content is its text parts joined, as the specialised
renderers render it.

A tool-calling assistant message without text (``content: None``, ``""`` or absent: the
library's rule for degenerate input reads ``None`` as empty text) has no ``content``:
what ``apply_chat_template`` passes from transformers 5.23 on, which drops every key
whose value is ``None`` (5.23 in ``apply_chat_template`` itself,
``tokenization_utils_base.py`` and ``processing_utils.py``; 5.24 in
``_normalize_chat_messages``, ``utils/chat_template_utils.py``). Transformers 5.0 to
5.22 pass ``content: None`` to the template as given: TRL's official GLM-4-MoE template
then writes the literal ``None``, and Qwen3-VL's and gpt-oss's raise ``TypeError``; the
other official templates (Qwen2.5 to Qwen3.8, Nemotron-3) render ``None``, ``""`` and no
content alike, and every one of them renders no content as it renders ``""``
(``tests/test_template_official.py``). Templates that need ``content: None`` get it
(``none_content``: the DeepSeek templates test ``content is none`` and fail without it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from renderers.core.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.template.environment import Arguments
from renderers.template.placeholders import Marks

__all__ = ["template_messages", "template_value"]

_ROLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def template_messages(
    messages: Sequence[Message], marks: Marks, *, none_content: bool
) -> list[dict[str, Any]]:
    """The messages as template input (fields attributed when ``marks`` attributes)."""
    return [_message(m, i, marks, none_content) for i, m in enumerate(messages)]


def _message(m: Message, i: int, marks: Marks, none_content: bool) -> dict[str, Any]:
    if not m.role or not set(m.role) <= _ROLE_CHARS:
        raise ValueError(
            f"messages[{i}].role: {m.role!r} is not a role name a chat template can be given "
            "(letters, digits, '_', '-' and '.')"
        )
    thinking, text, calls = _fields(m, i)
    out: dict[str, Any] = {"role": m.role}

    def mark(value: str, path: str) -> str:
        return marks.text(value, marks.field(i, path), attribute=True)

    if text or not calls:
        out["content"] = mark(text, "content")
    elif none_content:
        out["content"] = None
    if thinking is not None:
        reasoning = mark(thinking, "reasoning_content")
        out["thinking"] = reasoning
        out["reasoning_content"] = reasoning
    if calls:
        out["tool_calls"] = [_call(call, i, k, marks) for k, call in enumerate(calls)]
    if m.name is not None:
        out["name"] = mark(m.name, "name")
    if m.tool_call_id is not None:
        out["tool_call_id"] = mark(m.tool_call_id, "tool_call_id")
    return out


def _fields(m: Message, i: int) -> tuple[str | None, str, list[ToolCallPart]]:
    """Reasoning, text and tool calls of ``m``: parts must come in that order (a template
    takes them as separate fields and could not write another order)."""
    if isinstance(m.content, str):
        return None, m.content, []
    thinking: list[str] = []
    texts: list[str] = []
    calls: list[ToolCallPart] = []
    stage = 0
    for k, part in enumerate(m.content):
        kind = type(part)
        if kind is UnparsedToolCallPart:
            raise ValueError(
                f"messages[{i}].content[{k}]: an unparsed tool call cannot be given to a chat "
                "template (it takes calls as a name and JSON arguments)"
            )
        if part.channel not in (None, "analysis", "final"):
            raise ValueError(
                f"messages[{i}].content[{k}]: a part on channel {part.channel!r} cannot be given "
                "to a chat template"
            )
        order = 0 if kind is ThinkingPart else 1 if kind is TextPart else 2
        if order < stage:
            raise ValueError(
                f"messages[{i}].content[{k}]: a chat template takes reasoning, text and tool "
                "calls as separate fields, so parts must come in that order (this "
                f"{kind.__name__} follows a later kind)"
            )
        stage = order
        if kind is ThinkingPart:
            assert isinstance(part, ThinkingPart)
            thinking.append(part.text)
        elif kind is TextPart:
            assert isinstance(part, TextPart)
            texts.append(part.text)
        else:
            assert isinstance(part, ToolCallPart)
            calls.append(part)
    if m.role != "assistant" and (thinking or calls):
        raise ValueError(
            f"messages[{i}]: only an assistant message can hold reasoning or tool calls"
        )
    return ("".join(thinking) if thinking else None), "".join(texts), calls


def _call(part: ToolCallPart, i: int, k: int, marks: Marks) -> dict[str, Any]:
    path = f"tool_calls[{k}]"
    name = marks.text(part.name, marks.field(i, f"{path}.function.name"), attribute=True)
    field = marks.field(i, f"{path}.function.arguments")
    arguments = Arguments(
        marks.text(part.arguments, field, attribute=True),
        part.arguments,
        marks.marker(field, attribute=True),
    )
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if part.id is not None:
        call["id"] = marks.text(part.id, marks.field(i, f"{path}.id"), attribute=True)
    return call


def template_value(value: Any, marks: Marks, path: str) -> Any:
    """A caller value that is not a message (tools, a template option) with every string
    in it protected (one field for all of them, named ``path``); dict keys are left as
    they are."""
    return _protected(value, marks, marks.field(-1, path))


def _protected(value: Any, marks: Marks, field: int) -> Any:
    if isinstance(value, str):
        return marks.text(value, field)
    if isinstance(value, Mapping):
        return {k: _protected(v, marks, field) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_protected(v, marks, field) for v in value]
    return value
