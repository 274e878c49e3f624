"""Hypothesis strategies for random conversations, messages and completions."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from renderers import Message, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart

# Fragments that stress formats: control-token spellings of every supported model,
# text-level markers the parsers know, markup, separators and unicode edge cases.
TRICKY = [
    # Qwen3
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    # gpt-oss (Harmony)
    "<|start|>",
    "<|end|>",
    "<|channel|>",
    "<|message|>",
    "<|return|>",
    "<|call|>",
    # DeepSeek V3 / V3.1
    "<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁output▁end｜>",
    "```json\n",
    "```",
    "\n```",
    # Kimi-K2 (tokens, the misspelled section markers models sample, call ids)
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
    "<|im_middle|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_system|>",
    "[EOS]",
    "functions.f:0",
    "## Return of ",
    "◁think▷",
    # separators, control characters, unicode
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r",
    "\r\n",
    "\x00",
    "\x1b[0m",
    "\u2028",
    "\ufeff",
    "🎉",
    "日本語",
    "e\u0301",  # NFC composes it
    "\u212b",  # the Angstrom sign: NFC maps it to Å
    "{",
    '"',
    "\\",
]

_chars = st.characters(blacklist_categories=("Cs",))

whitespace = st.text(
    st.sampled_from([" ", "\n", "\t", "\r", "\xa0", "\u3000"]), min_size=1, max_size=4
)
"""Whitespace-only text (what formats strip around parts is made of it)."""

text = st.one_of(
    st.lists(st.one_of(st.text(_chars, max_size=12), st.sampled_from(TRICKY)), max_size=6).map(
        "".join
    ),
    whitespace,
)
"""Random unicode text, including whitespace-only, control characters and strings that
spell control tokens of the supported models."""

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

_SPELLINGS = (
    lambda d: json.dumps(d, ensure_ascii=False),
    lambda d: json.dumps(d, separators=(",", ":")),
    lambda d: json.dumps(d, indent=1, ensure_ascii=False),
)
any_arguments = st.tuples(
    st.dictionaries(text, json_values, max_size=5), st.sampled_from(_SPELLINGS)
).map(lambda t: t[1](t[0]))
"""Tool-call arguments as JSON object text in any spelling a caller may give (the
templates' ``tojson``, compact, ASCII-escaped, indented), for formats that write the
parsed value."""

tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,24}", fullmatch=True)

unparsable = text.map(lambda t: "{not json " + t)


def thinking_parts() -> st.SearchStrategy[ThinkingPart]:
    return st.builds(ThinkingPart, text)


def text_parts() -> st.SearchStrategy[TextPart]:
    return st.builds(TextPart, text)


def tool_call_parts(
    with_ids: bool = False, any_spelling: bool = False
) -> st.SearchStrategy[ToolCallPart]:
    """Calls with arguments as ``tojson`` writes them (``any_spelling``: any valid JSON)."""
    ids = st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True) if with_ids else st.none()
    return st.builds(ToolCallPart, tool_names, any_arguments if any_spelling else arguments, id=ids)


def unparsed_tool_call_parts(named: bool = False) -> st.SearchStrategy[UnparsedToolCallPart]:
    """Unparsable calls (``named``: with the tool name a parser could still read)."""
    names = tool_names if named else st.none()
    return st.builds(UnparsedToolCallPart, unparsable, st.just("invalid"), name=names)


def assistant_messages(
    *,
    interleaved: bool = True,
    unparsed: bool = True,
    thinking: bool = True,
    named_unparsed: bool = False,
    max_parts: int = 6,
    max_calls: int = 3,
    any_spelling: bool = False,
) -> st.SearchStrategy[Message]:
    """Random assistant messages: thinking, text and tool calls, interleaved in any order
    when ``interleaved``, else in the canonical order thinking, text, tool calls.
    ``thinking=False`` leaves reasoning out (for formats that cannot render it);
    ``named_unparsed`` gives unparsed calls a name (formats that address calls by name);
    ``any_spelling``: arguments in any valid JSON spelling."""
    calls = tool_call_parts(any_spelling=any_spelling)
    call = st.one_of(calls, unparsed_tool_call_parts(named_unparsed)) if unparsed else calls
    if interleaved:
        part = st.one_of(*([thinking_parts()] if thinking else []), text_parts(), call)
        parts = st.lists(part, max_size=max_parts)
    else:
        parts = st.tuples(
            st.lists(thinking_parts(), max_size=1 if thinking else 0),
            st.lists(text_parts(), max_size=1),
            st.lists(call, max_size=max_calls),
        ).map(lambda t: [*t[0], *t[1], *t[2]])
    return parts.map(lambda ps: Message("assistant", ps))


def conversations(
    *, tools: bool = True, reasoning: bool = True, max_turns: int = 3
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random OpenAI-style conversations: optional system, user turns, assistant turns
    with reasoning (unless ``reasoning=False``) and tool calls, and tool results answering
    them."""

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
            if reasoning and draw(st.booleans()):
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
