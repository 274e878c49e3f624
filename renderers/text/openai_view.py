"""Split parts as the ``content`` / ``reasoning_content`` fields OpenAI-compatible
servers return."""

from __future__ import annotations

from collections.abc import Iterable

from renderers.core.messages import ThinkingPart
from renderers.text.events import ReasoningPart
from renderers.text.splitter import split_reasoning
from renderers.text.styles import StyleSpec
from renderers.text.whitespace import Whitespace

__all__ = ["openai_fields", "split_reasoning_openai"]


def openai_fields(parts: Iterable[ReasoningPart]) -> dict[str, str | None]:
    """``{"content": ..., "reasoning_content": ...}`` as OpenAI-compatible servers give.

    ``content`` is the text parts joined; ``reasoning_content`` the thinking texts joined
    by a blank line, or ``None`` when there was no reasoning.
    """
    content: list[str] = []
    thinking: list[str] = []
    any_thinking = False
    for p in parts:
        if type(p) is ThinkingPart:
            any_thinking = True
            if p.text:
                thinking.append(p.text)
        else:
            content.append(p.text)
    return {
        "content": "".join(content),
        "reasoning_content": "\n\n".join(thinking) if any_thinking else None,
    }


def split_reasoning_openai(
    text: str, style: StyleSpec = "auto", *, whitespace: Whitespace = "tidy"
) -> dict[str, str | None]:
    """:func:`openai_fields` of :func:`~renderers.text.splitter.split_reasoning`."""
    return openai_fields(split_reasoning(text, style, whitespace=whitespace))
