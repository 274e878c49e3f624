"""Benchmark workloads built from real token ids: completions of a given length per model
(thinking, text, several tool calls, a long answer; also truncated and malformed ones) and
a 10-turn conversation with tools."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from renderers import Message, Renderer, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart

_MULTILINGUAL = (
    "Les résultats sont cohérents — naïve café, façade. Größenordnung über Straße. "
    "日本語のテキストも含まれます。中文文本也在这里。한국어 문장도 있습니다. "
    "Emoji: 🎉🚀✨ — math: ∑∫√≈≠ — arrows ←→↑↓. "
)


@functools.cache
def source_text() -> str:
    """Natural-looking text with code, prose and other scripts, from the standard library
    (present on every Python install, so the workload is reproducible anywhere)."""
    import argparse
    import difflib
    import textwrap
    from json import decoder

    pieces = [inspect.getsource(m) for m in (argparse, difflib, textwrap, decoder)]
    text = ""
    for k, piece in enumerate(pieces):
        text += piece + "\n" + _MULTILINGUAL * (k + 1) + "\n"
    return text


def _text_of_tokens(renderer: Renderer, n_tokens: int, offset: int) -> str:
    """About ``n_tokens`` tokens of source text, starting ``offset`` tokens in."""
    ids = _source_ids(renderer)
    start = offset % max(1, len(ids) - 1)
    chunk: list[int] = []
    while len(chunk) < n_tokens:
        take = ids[start : start + n_tokens - len(chunk)]
        chunk += take
        start = 0
    return renderer.table.decode(chunk)


@functools.cache
def _source_ids(renderer: Renderer) -> list[int]:
    return renderer.table.encode(source_text())


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the documentation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for"},
                    "limit": {"type": "integer", "description": "How many results"},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
]


@dataclass(frozen=True)
class Completion:
    kind: str
    ids: list[int]


def assistant_message(renderer: Renderer, n_tokens: int, *, malformed: bool = False) -> Message:
    """A realistic sampled turn of about ``n_tokens`` tokens: long reasoning, some text,
    three tool calls, more reasoning and a long answer."""
    think1 = _text_of_tokens(renderer, int(n_tokens * 0.45), 0)
    text1 = _text_of_tokens(renderer, int(n_tokens * 0.05), 1000)
    think2 = _text_of_tokens(renderer, int(n_tokens * 0.10), 3000)
    answer = _text_of_tokens(renderer, int(n_tokens * 0.35), 7000)
    arguments = [json.dumps({"query": f"topic {k} — ünïcode", "limit": k + 1}) for k in range(3)]
    # Ids as Kimi models sample them (K2-Thinking and K2.5 write the caller's ids,
    # K2-Instruct's template numbers the calls itself; the other formats have none).
    calls: list[Any] = [
        ToolCallPart("search", a, id=f"functions.search:{k}") for k, a in enumerate(arguments)
    ]
    if malformed:
        calls[1] = UnparsedToolCallPart('{"name": "search", "arguments": {"query": oops}', "bad")
    parts = [ThinkingPart(think1), TextPart(text1), *calls, ThinkingPart(think2), TextPart(answer)]
    return Message("assistant", _expressible(renderer, parts))


def _expressible(renderer: Renderer, parts: list[Any]) -> list[Any]:
    """Keep the parts in an order the renderer's format writes back faithfully."""
    if renderer.name.startswith("gpt_oss"):
        # Harmony: one tool call per assistant turn; analysis then final.
        return [p for p in parts if isinstance(p, (ThinkingPart, TextPart))]
    if renderer.name in ("kimi_k2", "qwen3_instruct_2507", "qwen3_vl"):  # instruct: no reasoning
        return [p for p in parts if not isinstance(p, ThinkingPart)]
    if renderer.name in ("deepseek_v3", "deepseek_v3.1"):  # one think block, at the start
        return [p for k, p in enumerate(parts) if k == 0 or not isinstance(p, ThinkingPart)]
    return parts


def sampled_ids(renderer: Renderer, message: Message) -> list[int]:
    """What the model samples for ``message`` after a user turn, as token ids."""
    user = {"role": "user", "content": "Investigate the module and report."}
    example = renderer.build_supervised_example([user, message], tools=TOOLS)
    ids: list[int] = example.tokens[example.weights > 0].tolist()
    return ids


def sized_ids(
    renderer: Renderer, n_tokens: int, make_message: Callable[[int], Message]
) -> list[int]:
    """The sampled ids of ``make_message(target)``, the target rescaled until they are
    within 5% of ``n_tokens`` (parts are scaled up when the format leaves some out, e.g.
    reasoning in non-thinking models); at most four tries."""
    target = n_tokens
    for _ in range(4):
        ids = sampled_ids(renderer, make_message(target))
        if abs(len(ids) - n_tokens) <= n_tokens // 20:
            break
        target = int(target * n_tokens / max(1, len(ids)))
    return ids


def complete_ids(renderer: Renderer, n_tokens: int) -> list[int]:
    """A complete completion of about ``n_tokens`` tokens."""
    return sized_ids(renderer, n_tokens, functools.partial(assistant_message, renderer))


def completions(renderer: Renderer, n_tokens: int) -> list[Completion]:
    """Complete, malformed and truncated completions of about ``n_tokens`` tokens."""
    complete = complete_ids(renderer, n_tokens)
    malformed = functools.partial(assistant_message, renderer, malformed=True)
    return [
        Completion("complete", complete),
        Completion("malformed", sized_ids(renderer, n_tokens, malformed)),
        Completion("truncated", complete[: int(len(complete) * 0.9)]),
    ]


def ten_turn_conversation(reasoning: bool = True) -> list[dict[str, Any]]:
    """A 10-turn conversation with tools, tool results and (optionally) reasoning."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful research assistant. " * 5}
    ]
    for turn in range(10):
        messages.append({"role": "user", "content": f"Question {turn}: " + _MULTILINGUAL})
        if turn % 2 == 0:
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": f"I need to search for topic {turn}.",
                    "tool_calls": [
                        {
                            "id": f"call_{turn}",
                            "type": "function",
                            "function": {
                                "name": "search",
                                "arguments": {"query": f"topic {turn}", "limit": 3},
                            },
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": f"call_{turn}",
                    "name": "search",
                    "content": json.dumps({"results": [f"doc {turn}.{k}" for k in range(3)]}),
                }
            )
        messages.append(
            {
                "role": "assistant",
                "content": f"Answer {turn}: " + "The findings are consistent. " * 8,
                "reasoning_content": f"Summarise turn {turn}.",
            }
        )
    if not reasoning:
        for m in messages:
            m.pop("reasoning_content", None)
    return messages
