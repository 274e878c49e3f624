"""Hypothesis strategies for random conversations, messages and completions."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from renderers import Message, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart

# Fragments that stress formats: control-token spellings, markup, separators.
TRICKY = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|start|>",
    "<|end|>",
    "<|channel|>",
    "<|message|>",
    "<|return|>",
    "<|call|>",
    "<｜end▁of▁sentence｜>",
    "<｜tool▁calls▁begin｜>",
    "<|tool_calls_section_begin|>",
    "<|im_middle|>",
    "◁think▷",
    "```json\n",
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r\n",
    "\x00",
    "\x1b[0m",
    "🎉",
    "日本語",
    "e\u0301",
    "{",
    '"',
    "\\",
]

_chars = st.characters(blacklist_categories=("Cs",))
text = st.lists(st.one_of(st.text(_chars, max_size=12), st.sampled_from(TRICKY)), max_size=6).map(
    "".join
)
"""Random unicode text, including whitespace-only, control characters and strings that
spell control tokens of the supported models."""

whitespace = st.text(st.sampled_from([" ", "\n", "\t"]), min_size=1, max_size=4)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(text, json_values, max_size=5).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)
"""Tool-call arguments as JSON object text (nested values, unicode, numbers, booleans)."""

tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,24}", fullmatch=True)

unparsable = text.map(lambda t: "{not json " + t)


def thinking_parts() -> st.SearchStrategy[ThinkingPart]:
    return st.builds(ThinkingPart, text)


def text_parts() -> st.SearchStrategy[TextPart]:
    return st.builds(TextPart, text)


def tool_call_parts(with_ids: bool = False) -> st.SearchStrategy[ToolCallPart]:
    ids = st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True) if with_ids else st.none()
    return st.builds(ToolCallPart, tool_names, arguments, id=ids)


def assistant_messages(
    *,
    interleaved: bool = True,
    unparsed: bool = True,
    max_parts: int = 6,
) -> st.SearchStrategy[Message]:
    """Random assistant messages: thinking, text and tool calls, interleaved in any order
    when ``interleaved``, else in the canonical order thinking, text, tool calls."""
    part = st.one_of(
        thinking_parts(),
        text_parts(),
        tool_call_parts(),
        *([st.builds(UnparsedToolCallPart, unparsable, st.just("invalid"))] if unparsed else []),
    )
    if interleaved:
        parts = st.lists(part, max_size=max_parts)
    else:
        parts = st.tuples(
            st.lists(thinking_parts(), max_size=1),
            st.lists(text_parts(), max_size=1),
            st.lists(tool_call_parts(), max_size=3),
        ).map(lambda t: [*t[0], *t[1], *t[2]])
    return parts.map(lambda ps: Message("assistant", ps))


def conversations(
    *, tools: bool = True, max_turns: int = 3
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random OpenAI-style conversations: optional system, user turns, assistant turns
    with reasoning and tool calls, and tool results answering them."""

    @st.composite
    def build(draw: st.DrawFn) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if draw(st.booleans()):
            messages.append({"role": "system", "content": draw(text)})
        for _ in range(draw(st.integers(1, max_turns))):
            messages.append({"role": "user", "content": draw(text)})
            if not draw(st.booleans()):
                continue
            message: dict[str, Any] = {"role": "assistant", "content": draw(text)}
            if draw(st.booleans()):
                message["reasoning_content"] = draw(text)
            calls = draw(st.lists(st.tuples(tool_names, arguments), max_size=2)) if tools else []
            if calls:
                message["tool_calls"] = [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                    for k, (name, args) in enumerate(calls)
                ]
            messages.append(message)
            for k, (name, _) in enumerate(calls):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": f"call_{k}",
                        "name": name,
                        "content": draw(text),
                    }
                )
        return messages

    return build()
