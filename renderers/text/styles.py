"""Tag styles: which tags open and close a reasoning block, by name or built by hand.

Names (``style=``, case-insensitive, ``-`` and ``_`` alike)::

    "auto"      the default: <think>, <thinking …> and ◁think▷ blocks, whichever appears
    "think"     <think>…</think>                     several blocks, any position
    "thinking"  <thinking>…</thinking>, <thinking thought="…" … />
    "kimi"      ◁think▷…◁/think▷
    "forced"    …</think>…     the text starts inside reasoning; a leading <think> is
                               accepted and removed

The reasoning-parser names of the inference servers, each behaving as that parser does
where a text-level splitter can (whitespace aside: those parsers keep the whitespace
around the tags, this module applies its own rule)::

    "deepseek_r1"     forced: reasoning until the first </think>, <think> optional
                      (vLLM ``deepseek_r1``, SGLang ``deepseek-r1``)
    "qwen3"           <think> blocks; text without <think> is content (SGLang ``qwen3``,
                      and vLLM ``qwen3`` up to v0.12, which needed both tags)
    "qwen3_thinking"  forced, for templates that put <think> in the prompt (SGLang
                      ``qwen3-thinking``; recent vLLM ``qwen3`` with thinking enabled)
    "kimi_k2"         <think> blocks, also ended by Kimi-K2's tool-call section marker,
                      which stays in the content (SGLang ``kimi_k2``; vLLM ``kimi_k2``
                      at 01a70348 also starts inside reasoning unless thinking is off)
    "think_tag"       <think>…</think> blocks: the generic default detector of the
                      reasoning-parser document (the same as "think")

``gpt_oss`` (vLLM ``openai_gptoss``, SGLang ``gpt-oss``) is known but refused: gpt-oss
writes Harmony channels, which the token-level parser of ``get_renderer("gpt_oss")``
reads. Where the servers disagree (``qwen3`` on text without tags, ``kimi_k2`` on text
without ``<think>``) the names follow SGLang, whose parsers decide from the text alone;
the models this library renders (Qwen3-8B, Kimi-K2-Thinking) write ``<think>``
themselves. Read from: vLLM ``vllm/reasoning/`` — ``deepseek_r1_reasoning_parser.py``
at 0172203d with ``basic_parsers.py`` at 00e9cc9f, ``qwen3_reasoning_parser.py`` as of v0.12.0 (both
tags needed) and at 00a4c6a1 (Qwen3.5: text without ``</think>`` is reasoning unless
``enable_thinking=False``), ``kimi_k2_reasoning_parser.py`` at 01a70348; SGLang
``python/sglang/srt/parser/reasoning_parser.py`` (``DetectorMap``) at 002e9bfc and
``test/srt/test_reasoning_parser.py`` at 08bdf3ef.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from renderers.text.whitespace import WS

__all__ = [
    "KIMI",
    "STYLES",
    "THINK",
    "THINKING_TAG",
    "THINK_FORCED",
    "THINK_KIMI_K2",
    "TOOL_CALL_TAG",
    "StyleSpec",
    "TagStyle",
    "resolve_style",
]

_TAG_NAME = re.compile(r"<[A-Za-z_][-A-Za-z0-9_:.]*\Z")


@dataclass(frozen=True, slots=True)
class TagStyle:
    """One kind of reasoning block.

    ``open``/``close`` are the tags. With ``attributes`` the opening tag is XML-like:
    ``open`` is ``"<" + name`` and attributes, then ``>`` or ``/>`` follow;
    ``text_attribute`` names the attribute holding reasoning text. ``forced`` means the
    text starts inside a block of this style. ``implicit_close`` are markers that also
    end an open block but belong to what follows, so they stay in the content. Tags
    match case-insensitively unless ``case_sensitive``. With ``tool_call`` a block is not
    reasoning but a tool call written as text: its body is read whole and parsed as
    ``{"name": ..., "arguments": ...}`` (see :data:`TOOL_CALL_TAG`).
    """

    open: str
    close: str
    attributes: bool = False
    forced: bool = False
    case_sensitive: bool = False
    text_attribute: str | None = None
    implicit_close: tuple[str, ...] = ()
    tool_call: bool = False

    def __post_init__(self) -> None:
        tags = [("open", self.open), ("close", self.close)]
        tags += [(f"implicit_close[{i}]", t) for i, t in enumerate(self.implicit_close)]
        for field, value in tags:
            if not isinstance(value, str) or not value:
                raise ValueError(f"{field}: expected a non-empty string, got {value!r}")
            if value[0] in WS:
                raise ValueError(f"{field}: a tag cannot start with whitespace ({value!r})")
        if self.attributes and not _TAG_NAME.match(self.open):
            raise ValueError(
                f"open: an attribute style needs '<' and a tag name, like '<thinking', "
                f"got {self.open!r}"
            )
        if self.attributes and self.forced:
            raise ValueError("forced: an attribute style cannot be forced")
        if self.tool_call and (self.attributes or self.forced):
            raise ValueError("tool_call: a tool-call style has no attributes and is not forced")


THINK = TagStyle("<think>", "</think>")
"""``<think>…</think>`` (Qwen3, DeepSeek, most open models writing reasoning inline)."""
THINKING_TAG = TagStyle("<thinking", "</thinking>", attributes=True, text_attribute="thought")
"""``<thinking …>…</thinking>`` and ``<thinking thought="…" … />``."""
KIMI = TagStyle("◁think▷", "◁/think▷")
"""Kimi's ``◁think▷…◁/think▷``."""
THINK_FORCED = TagStyle("<think>", "</think>", forced=True)
"""DeepSeek-R1: the text starts inside reasoning and only ``</think>`` appears."""
THINK_KIMI_K2 = TagStyle(
    "<think>",
    "</think>",
    implicit_close=("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"),
)
"""Kimi-K2-Thinking: ``<think>`` blocks that the tool-call section may end (also in the
misspelling the model sometimes writes, as the token-level Kimi parser accepts)."""
TOOL_CALL_TAG = TagStyle("<tool_call>", "</tool_call>", case_sensitive=True, tool_call=True)
"""A tool call written as text, ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
(Qwen3 and other Hermes-style models; ``tool_calls=True`` of the splitter adds it)."""

STYLES: dict[str, tuple[TagStyle, ...]] = {
    "auto": (THINK, THINKING_TAG, KIMI),
    "think": (THINK,),
    "thinking": (THINKING_TAG,),
    "kimi": (KIMI,),
    "forced": (THINK_FORCED,),
    "deepseek_r1": (THINK_FORCED,),
    "qwen3": (THINK,),
    "qwen3_thinking": (THINK_FORCED,),
    "kimi_k2": (THINK_KIMI_K2,),
    "think_tag": (THINK,),
}
"""The named styles accepted by ``style=`` (the CLI's ``--style``), including the
reasoning-parser names of vLLM and SGLang."""

_HARMONY = ("gpt_oss", "openai_gptoss")  # names of servers' parsers for Harmony, not tags

StyleSpec: TypeAlias = str | tuple[str, str] | TagStyle | Sequence[TagStyle]


def resolve_style(style: StyleSpec) -> tuple[TagStyle, ...]:
    """The tag styles a ``style=`` value stands for (raises ``ValueError`` if unknown).

    Accepts a name from :data:`STYLES` (case-insensitive; ``deepseek-r1`` is
    ``deepseek_r1``), an ``(open, close)`` pair of strings, a :class:`TagStyle`, or a
    sequence of them (at most one forced).
    """
    if isinstance(style, str):
        key = style.strip().lower().replace("-", "_")
        found = STYLES.get(key)
        if found is not None:
            return found
        if key in _HARMONY:
            raise ValueError(
                f"style: {style!r}: gpt-oss writes Harmony channels "
                "(<|channel|>analysis<|message|>…<|end|>), not inline reasoning tags; parse "
                "its token ids with get_renderer('gpt_oss').parse_response (renderers parse "
                "--model gpt_oss)"
            )
        raise ValueError(
            f"style: unknown style {style!r}; expected one of {', '.join(STYLES)}, "
            "or an (open, close) pair of tags"
        )
    if isinstance(style, TagStyle):
        return (style,)
    if isinstance(style, tuple) and len(style) == 2 and all(isinstance(t, str) for t in style):
        return (TagStyle(style[0], style[1]),)  # type: ignore[arg-type]
    if isinstance(style, Sequence) and style:
        styles = tuple(s for s in style if isinstance(s, TagStyle))
        if len(styles) == len(style):
            if sum(s.forced for s in styles) > 1:
                raise ValueError("style: at most one style can be forced")
            return styles
    raise ValueError(
        f"style: expected a style name, an (open, close) pair of strings or TagStyle "
        f"objects, got {style!r}"
    )
