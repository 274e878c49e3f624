"""Qwen3 (``Qwen/Qwen3-8B``): ChatML turns, ``<think>`` reasoning, ``<tool_call>`` JSON.

What the official template renders (``⏎`` is a newline)::

    <|im_start|>system⏎{system}⏎⏎# Tools ... <tools>⏎{tool JSON per line}⏎</tools> ...<|im_end|>⏎
    <|im_start|>user⏎{text}<|im_end|>⏎
    <|im_start|>assistant⏎<think>⏎{reasoning}⏎</think>⏎⏎{text}⏎
        <tool_call>⏎{"name": NAME, "arguments": ARGS}⏎</tool_call><|im_end|>⏎
    <|im_start|>user⏎<tool_response>⏎{result}⏎</tool_response>⏎<tool_response>...<|im_end|>⏎

``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``, ``<tool_response>`` are single
control tokens. Reasoning is kept for assistant turns after the last user query and
dropped before it; the last assistant turn always gets a think block (empty without
reasoning). ``enable_thinking=False`` appends an empty think block to the generation
prompt. Sampling stops at ``<|im_end|>``; ``<|endoftext|>`` is end-of-sequence.

Training keeps the untrained prefix of a trained turn equal to its generation prompt:

- reasoning the template drops (turns before the last user query) is rendered dropped
  for untrained turns; for a trained turn it is a ``ValueError`` naming the ``reasoning``
  option, and ``reasoning="drop"`` trains the turn without it;
- with ``enable_thinking=False`` a trained turn is written after the prompt's empty think
  block (which stays untrained); reasoning in it is refused the same way (or dropped with
  ``reasoning="drop"``), and a trained turn the template writes without the block (one
  with no user message before it, or before the last one) is a ``ValueError``;
- as in the template, the conversation is written whole: a trained turn that a later user
  message follows is in its history form (the reasoning of turns before it dropped), and
  an assistant turn right before the trained one lacks the empty think block a prompt
  ending with it would give it; train such turns on the conversation cut after them.

Like the template, an assistant message without reasoning whose text contains
``</think>`` is read as inline reasoning (``"<think>r</think>answer"``, the convention of
R1-style datasets): the part before ``</think>`` becomes the think block.

Tool-call arguments are written as the text given, verbatim (``{"a":1}`` stays
``{"a":1}``): the template writes a string ``arguments`` as is and an object as ``tojson``
(a dict given as arguments is written as its ``tojson`` here too). A server that parses
the arguments text into an object before templating (vLLM) makes the template write
``tojson`` of it: the same text whenever the given text is in that form.

Parsing (the :class:`~renderers.core.grammars.TagGrammar` that :func:`grammar` builds):
parts in sampled order, the separators above removed so a parsed message renders back.
Reasoning ends at ``</think>``: a ``<tool_call>`` drafted inside it stays reasoning text,
with an issue (``drafted_calls="call"`` reads it as vLLM does). A call's body is
``{"name": ..., "arguments": ...}``, its arguments kept as sampled; a body off that
grammar, or a call cut off, is an :class:`UnparsedToolCallPart`. A ``<think>`` or
``<tool_call>`` sampled inside a call cuts it there; a closing marker out of place is kept
as text with an issue; ``<|im_start|>`` before ``<|im_end|>`` ends the message there.

Prefill (``build_generation_prompt(..., prefill=text)``): with thinking on, the prefill
starts the reasoning, ``<think>⏎{prefill}`` after the generation prompt (the opener the
model samples first), as ``continue_final_message="reasoning_content"`` writes it; with
``enable_thinking=False`` it starts the answer after the prompt's empty think block, as
``continue_final_message="content"`` writes it. (With thinking on the latter writes a
final answer with an empty think block: that is the ``enable_thinking=False`` prompt.)

Degenerate inputs: ``content: None`` is empty text, ``tool_calls: []`` no calls and a
``None`` tool result an empty one (what vLLM hands a template; our message model has no
other spelling for them); the template renders them the same way whether transformers
passes the ``None`` (5.0 to 5.22) or drops the key (5.23 and later).

Divergences from the template, on purpose:

- list-of-parts content is rendered as its text parts joined (the template renders it
  as an empty string, silently dropping training text);
- message text that spells a control token (``<|im_end|>``, ``<think>``...) is encoded as
  ordinary text, never as the control token;
- a trained turn after the last user query is encoded apart from its generation prompt
  (``assistant⏎``, and with ``enable_thinking=False`` the prompt's empty think block), as
  the model samples it (the template's text tokenized whole can merge the prompt's last
  newlines with the answer's first characters: a turn without a think block starting
  with whitespace); a trained turn a later user message follows is in its history form,
  where such a merged token is refused;
- assistant parts in a non-canonical order (``[thinking, text, tool call, thinking, ...]``)
  are written in that order with the same markers, so parsed messages render back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL
from renderers.core.engine import StreamParser
from renderers.core.grammars import TaggedParser, TagGrammar, json_call_builder
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import DraftedCalls, Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.tokens import TokenTable
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, joined_text_parts, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["Qwen3Options", "Qwen3Renderer", "grammar"]

_TOOLS_INTRO = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_OUTRO = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
)


@dataclass(frozen=True, slots=True)
class Qwen3Options:
    """Options of the Qwen3 format (names follow the template's kwargs)."""

    enable_thinking: bool = True
    """False: the generation prompt ends with an empty think block (no reasoning)."""
    strip_thinking_history: bool = True
    """True (template behaviour): reasoning of turns before the last user query is dropped.
    False: every assistant turn keeps its reasoning."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (a turn
    before the last user query, whose reasoning the template drops; any reasoning with
    ``enable_thinking=False``, whose generation prompt closes an empty think block):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is rendered as the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call, as vLLM's Qwen3 parser
    reads it (``"call"``; see :data:`~renderers.core.options.DraftedCalls`)."""


def grammar(table: TokenTable, thinking: bool = True) -> TagGrammar:
    """The parsing grammar: text, think blocks and ``<tool_call>`` JSON in any order, with
    the separators the template writes (a newline inside a think block on both sides, a
    blank line after it, a newline before a call after text or another call).
    ``thinking=False`` (the formats without think blocks): ``<think>`` and ``</think>`` are
    not markers."""
    control = table.control_id
    return TagGrammar(
        stop=(control("<|im_end|>"),),
        eos=(control("<|endoftext|>"),),
        ends_message=(control("<|im_start|>"),),
        think=control("<think>") if thinking else None,
        think_end=control("</think>") if thinking else None,
        call=control("<tool_call>"),
        call_end=control("</tool_call>"),
        build_call=json_call_builder("</tool_call>"),
        think_padding="\n",
        after_think="\n\n",
        before_call="\n",
    )


class Qwen3Renderer(Renderer):
    """Renderer and parser for Qwen3 thinking models; the writer of the Qwen line's
    ``<tool_call>`` JSON formats (Qwen2.5, Qwen3-2507, Qwen3-VL subclass it)."""

    name = "qwen3"
    default_model = "Qwen/Qwen3-8B"
    Options: ClassVar[type[Any]] = Qwen3Options
    roles = ("system", "user", "assistant", "tool")
    message_markers = MessageMarkers(starts={"<|im_start|>": ""})
    # The formats of the Qwen line that share this writer (renderers.qwen2_5,
    # renderers.qwen3_2507) differ only in these:
    _thinking: ClassVar[bool] = True  # think blocks (reasoning, inline </think>)
    _opens_think: ClassVar[bool] = False  # the generation prompt ends "<think>⏎"
    _default_system: ClassVar[str | None] = None  # the system text without a system message
    _late_system: ClassVar[bool] = True  # a system message after the first is a turn
    _text_tool_response: ClassVar[bool] = False  # <tool_response> is text (not in the vocab)

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.im_start = control("<|im_start|>")
        self.im_end = control("<|im_end|>")
        self.end_of_text = control("<|endoftext|>")
        if self._thinking:  # (Qwen2.5's vocabulary has no think tokens)
            self.think = control("<think>")
            self.think_end = control("</think>")
        self.tool_call = control("<tool_call>")
        self.tool_call_end = control("</tool_call>")
        if not self._text_tool_response:
            self.tool_response = control("<tool_response>")
            self.tool_response_end = control("</tool_response>")
        self._newline = tuple(self.table.encode("\n"))
        self._assistant_header = tuple(self.table.encode("assistant\n"))
        self.grammar = grammar(self.table, self._thinking)
        """The parsing grammar (see :func:`grammar`)."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.im_end, self.end_of_text)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
        add_generation_prompt: bool,
    ) -> None:
        name = self.name
        first_is_system = bool(messages) and messages[0].role == "system"
        system = plain_text(messages[0], 0, name) if first_is_system else self._default_system
        system_index = 0 if first_is_system else -1
        if tools:
            w.control(self.im_start)
            w.text("system\n")
            if system is not None:
                w.text(system + "\n\n", system_index)
            w.template(_TOOLS_INTRO)
            for tool in tools:
                w.text("\n" + json.dumps(tool, ensure_ascii=False))
            w.template(_TOOLS_OUTRO)
        elif system is not None:
            self._turn(w, "system", system, system_index)

        last_query = _last_query_index(messages)
        n = len(messages)
        for i, m in enumerate(messages):
            if m.role == "user" or (m.role == "system" and i > 0):
                if m.role == "system" and not self._late_system:
                    raise ValueError(
                        f"messages[{i}].role: a system message after the first is silently "
                        f"dropped by {name}'s template; put the system message first"
                    )
                self._turn(w, m.role, plain_text(m, i, name), i)
            elif m.role == "assistant":
                parts = _assistant_parts(m) if self._thinking else list(m.parts)
                has_reasoning = any(type(p) is ThinkingPart and p.text for p in parts)
                think_block = (
                    self._thinking
                    and (i > last_query or not options.strip_thinking_history)
                    and ((i == n - 1 and i > last_query) or has_reasoning)
                )
                if w.trains(i):
                    parts, think_block = self._trained_parts(parts, i, think_block, options)
                prompt_form = w.trains(i) and i > last_query
                self._assistant(w, parts, i, think_block, options, prompt_form)
            elif m.role == "tool":
                if i == 0 or messages[i - 1].role != "tool":
                    w.control(self.im_start, i)
                    w.text("user", i)
                if self._text_tool_response:
                    w.text(f"\n<tool_response>\n{plain_text(m, i, name)}\n</tool_response>", i)
                else:
                    w.text("\n", i)
                    w.control(self.tool_response, i)
                    w.text("\n" + plain_text(m, i, name) + "\n", i)
                    w.control(self.tool_response_end, i)
                if i == n - 1 or messages[i + 1].role != "tool":
                    w.control(self.im_end, i)
                    w.text("\n", i)
        if add_generation_prompt:
            w.control(self.im_start)
            w.text("assistant\n")
            if self._opens_think:
                w.control(self.think)
                w.text("\n")
            elif self._thinking and not options.enable_thinking:
                self._empty_think_block(w, -1, False)

    def _trained_parts(
        self, parts: list[Part], i: int, think_block: bool, options: Any
    ) -> tuple[list[Part], bool]:
        """The parts of trained turn ``i`` and whether it gets a think block, such that its
        untrained prefix is the generation prompt: reasoning the format cannot write there
        is refused or dropped (option ``reasoning``)."""
        reasoning = any(type(p) is ThinkingPart and p.text.strip("\n") for p in parts)
        if not self._thinking:
            if reasoning and options.reasoning == "error":
                raise reasoning_error(self.name, i, "the format has no place for reasoning")
            return [p for p in parts if type(p) is not ThinkingPart], False
        if self._opens_think and not think_block:
            raise ValueError(
                f"messages[{i}]: {self.name} writes this turn without the think block its "
                "generation prompt opens (the template writes one only for turns after the "
                "last user query), so it cannot be trained; train turns after the last user "
                "query (one example per turn), or pass strip_thinking_history=False"
            )
        if self._opens_think or options.enable_thinking:
            if reasoning and not think_block and options.reasoning == "error":
                raise reasoning_error(
                    self.name, i, "its template drops reasoning before the last user query"
                )
            return parts, think_block
        if not think_block:
            raise ValueError(
                f"messages[{i}]: qwen3 with enable_thinking=False writes this turn without the "
                "empty think block its generation prompt ends with (the template writes one "
                "only for the last turn after a user message), so it cannot be trained; "
                "train that turn, or use enable_thinking=True"
            )
        if reasoning:
            if options.reasoning == "error":
                raise reasoning_error(
                    self.name,
                    i,
                    "with enable_thinking=False the generation prompt closes an empty think block",
                )
            parts = [p for p in parts if type(p) is not ThinkingPart]
        return parts, True

    def _turn(self, w: TokenWriter, role: str, text: str, i: int) -> None:
        w.control(self.im_start, i)
        w.text(role + "\n" + text, i)
        w.control(self.im_end, i)
        w.text("\n", i)

    def _empty_think_block(
        self, w: TokenWriter, msg: int, sampled: bool, prompt_end: bool = False
    ) -> None:
        """``prompt_end``: the block ends the generation prompt of a trained turn, whose
        sampled tokens are encoded apart from it (as the model samples them)."""
        w.control(self.think, msg, sampled)
        w.text("\n\n", msg, sampled)
        w.control(self.think_end, msg, sampled)
        if prompt_end:
            w.encoded(self.table.encode("\n\n"), msg)
        else:
            w.text("\n\n", msg, sampled)

    def _assistant(
        self,
        w: TokenWriter,
        parts: list[Part],
        i: int,
        think_block: bool,
        options: Any,
        prompt_form: bool = False,
    ) -> None:
        """``prompt_form``: a trained turn after the last user query, written after its
        generation prompt as sampled (the rest are written as the template writes the
        whole conversation)."""
        w.control(self.im_start, i)
        if prompt_form:
            # The generation prompt's end: the sampled tokens follow it, encoded on their
            # own (an answer starting with whitespace would merge with its newline).
            w.encoded(self._assistant_header, i)
        else:
            w.text("assistant\n", i)
        parts = joined_text_parts(parts)
        previous: str | None = None
        if not think_block:
            parts = [p for p in parts if type(p) is not ThinkingPart]
        elif self._opens_think and w.trains(i):
            # The generation prompt ends "<think>⏎": the sampled reasoning follows, encoded
            # on its own (as the model samples it).
            reasoning = ""
            if parts and type(parts[0]) is ThinkingPart:
                reasoning, parts = parts[0].text.strip("\n"), parts[1:]
            w.control(self.think, i)
            w.encoded(self._newline, i)
            w.text(reasoning + "\n", i, True)
            w.control(self.think_end, i, True)
            w.text("\n\n", i, True)
            previous = THINKING
        elif not parts or type(parts[0]) is not ThinkingPart or not parts[0].text.strip("\n"):
            # The template's empty block; with thinking off it is part of the prompt (a
            # trained turn's reasoning was refused or dropped: see _trained_parts).
            thinking = self._opens_think or options.enable_thinking
            self._empty_think_block(w, i, thinking, prompt_end=not thinking and w.trains(i))
            previous = THINKING
            if parts and type(parts[0]) is ThinkingPart:
                parts = parts[1:]
        for part in parts:
            if type(part) is ThinkingPart:
                w.control(self.think, i, True)
                w.text("\n" + part.text.strip("\n") + "\n", i, True)
                w.control(self.think_end, i, True)
                w.text("\n\n", i, True)
                previous = THINKING
            elif type(part) is TextPart:
                text = part.text.lstrip("\n") if previous == THINKING else part.text
                if text:
                    w.text(text, i, True)
                if part.text:
                    # The template tests the unstripped content before a call's separator.
                    previous = TEXT
            else:
                if previous in (TEXT, TOOL_CALL):
                    w.text("\n", i, True)
                w.control(self.tool_call, i, True)
                if type(part) is ToolCallPart:
                    arguments = checked_arguments(part, i)
                    if json.dumps(part.name, ensure_ascii=False)[1:-1] != part.name:
                        raise ValueError(
                            f"messages[{i}]: tool name {part.name!r} needs JSON escaping, which "
                            f"{self.name}'s template does not do (it writes the name unescaped)"
                        )
                    w.text(
                        '\n{"name": "' + part.name + '", "arguments": ' + arguments + "}\n", i, True
                    )
                else:
                    assert type(part) is UnparsedToolCallPart
                    w.text(part.raw, i, True)
                w.control(self.tool_call_end, i, True)
                previous = TOOL_CALL
        w.control(self.im_end, i, True)
        w.text("\n", i)

    # -- prefill ------------------------------------------------------------------------

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        """With thinking on a prefill starts the reasoning (``<think>⏎{prefill}``, as the
        model opens it); with it off (or no think blocks) it follows the prompt."""
        if self._thinking and not self._opens_think and options.enable_thinking:
            w.control(self.think)
            prefill = "\n" + prefill
        w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        if self._thinking and not self._opens_think and options.enable_thinking:
            return [self.think, *self.table.encode("\n" + prefill)]
        return self.table.encode(prefill)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return TaggedParser(
            self.grammar,
            self.table,
            events,
            opens_reasoning=self._opens_think,
            calls_end_reasoning=getattr(options, "drafted_calls", "reasoning") == "call",
        )

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            'tool calls are re-serialized as {"name": ..., "arguments": ...}',
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if self._thinking:
            reasons.insert(
                0, "the last assistant turn gets an empty think block that history turns lose"
            )
            if self.options.strip_thinking_history:
                reasons.insert(0, "reasoning of turns before the last user query is dropped")
        return ExtensionProperty(False, "; ".join(reasons))

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        return 0, self.grammar.closing(result, (self.im_end,))


def _has_inline_reasoning(m: Message) -> bool:
    return m.thinking is None and "</think>" in m.text


def _assistant_parts(m: Message) -> list[Part]:
    """The parts to write, with the template's inline ``<think>...</think>`` convention
    (reasoning written into a string ``content``) turned into a thinking part."""
    parts = list(m.parts)
    if _has_inline_reasoning(m):
        content = m.text
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        rest = content.split("</think>")[-1].lstrip("\n")
        others = [p for p in parts if type(p) is not TextPart]
        parts = [ThinkingPart(reasoning), *([TextPart(rest)] if rest else []), *others]
    return parts


def _last_query_index(messages: list[Message]) -> int:
    """Index of the last user message that is a real query (not wrapped tool output)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "user":
            text = m.text
            if not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
                return i
    return len(messages) - 1
