"""Split parts as the ``content`` / ``reasoning_content`` (/ ``tool_calls``) fields
OpenAI-compatible servers return."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from renderers.core.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.text.events import ReasoningPart
from renderers.text.splitter import split_reasoning
from renderers.text.styles import StyleSpec
from renderers.text.whitespace import Whitespace

__all__ = ["openai_fields", "split_reasoning_openai"]


def openai_fields(parts: Iterable[ReasoningPart]) -> dict[str, Any]:
    """``{"content": ..., "reasoning_content": ...}`` as OpenAI-compatible servers give.

    ``content`` is the text parts joined; ``reasoning_content`` the thinking texts joined
    by a blank line, or ``None`` when there was no reasoning. Tool calls (split with
    ``tool_calls=True``) add ``tool_calls`` in OpenAI's shape, an unparsed one as OpenAI
    reports invalid JSON (see :meth:`~renderers.core.messages.Message.to_openai`).
    """
    content: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCallPart | UnparsedToolCallPart] = []
    any_thinking = False
    for p in parts:
        if type(p) is ThinkingPart:
            any_thinking = True
            if p.text:
                thinking.append(p.text)
        elif type(p) is TextPart:
            content.append(p.text)
        elif isinstance(p, (ToolCallPart, UnparsedToolCallPart)):
            calls.append(p)
    out: dict[str, Any] = {
        "content": "".join(content),
        "reasoning_content": "\n\n".join(thinking) if any_thinking else None,
    }
    if calls:
        out["tool_calls"] = Message("assistant", calls).to_openai()["tool_calls"]
    return out


def split_reasoning_openai(
    text: str,
    style: StyleSpec = "auto",
    *,
    whitespace: Whitespace = "tidy",
    tool_calls: bool = False,
) -> dict[str, Any]:
    """:func:`openai_fields` of :func:`~renderers.text.splitter.split_reasoning`."""
    return openai_fields(split_reasoning(text, style, whitespace=whitespace, tool_calls=tool_calls))
