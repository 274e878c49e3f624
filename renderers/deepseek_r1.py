"""DeepSeek-R1 (``deepseek-ai/DeepSeek-R1``): renderer ``deepseek_r1``.

What it shares with DeepSeek-V3 (system messages first, joined by a blank line; role
markers with no newlines between turns; the stop token ``<｜end▁of▁sentence｜>``; V3's
fenced tool calls and its tool-output markers; the section grammar it parses by; arguments
written verbatim; the divergences from the templates): :mod:`renderers.deepseek_v3`.

The template (``chat_template`` of the model repository's ``tokenizer_config.json``, the
revision whose generation prompt opens ``<think>\\n``) is V3's with three changes::

    <｜begin▁of▁sentence｜>{system}<｜User｜>{user}<｜Assistant｜>{answer}<｜end▁of▁sentence｜><｜User｜>{user}<｜Assistant｜><think>⏎

- **Generation prompt** ``<｜Assistant｜><think>\\n``: the completion starts inside the
  reasoning, ``{reasoning}</think>{answer}<｜end▁of▁sentence｜>`` (the parser starts in the
  thinking state). After tool outputs the prompt is ``<｜tool▁outputs▁end｜>``, which opens
  no think block (``starts_in_reasoning=False`` parses such a completion; rollouts decide
  from the prompt). ``<think>`` and ``</think>`` are tokens of R1's tokenizer (ids 128798
  and 128799; V3's tokenizer has place holders there).
- **History answers** lose their reasoning: a plain answer is written after its last
  ``</think>`` (text before it is dropped) and ``reasoning_content`` is never written.
- **Tool calls** (``'tool_calls' in message``), defects reproduced by default
  (``fix_tool_format=False``) for token parity: the first tool-call message of the
  conversation is ``<｜Assistant｜>{text}<｜tool▁calls▁begin｜>{calls}`` (``\\n`` between
  calls) then ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``;
  its "first call" flag is never reset, so every later one is ``\\n`` before each call,
  then ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``, without ``<｜Assistant｜>``,
  ``<｜tool▁calls▁begin｜>`` or its text (a trained turn whose text this drops is a
  ``ValueError``). Tool results: only the first of the conversation opens
  ``<｜tool▁outputs▁begin｜>``; results follow each other with nothing between them
  (V3 writes ``\\n``); ``<｜tool▁outputs▁end｜>`` is written only before a text answer or at
  the end. ``fix_tool_format=True`` writes every tool-call message as
  ``{header}{text}<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``
  (header ``<｜tool▁outputs▁end｜>`` after tool outputs) and every group of results as
  ``<｜tool▁outputs▁begin｜>...<｜tool▁outputs▁end｜>``.

The template writes every assistant turn as history, so its rendering of a conversation
does not extend its own generation prompt (``<｜Assistant｜>{answer}`` after
``<｜Assistant｜><think>\\n``). A supervised example therefore renders the trained (last)
turn after the generation prompt of the messages before it, exactly as the model samples
it, reasoning kept: ``{reasoning}</think>{text}{calls}<｜end▁of▁sentence｜>`` (a turn
without reasoning: ``</think>{text}...``), or after tool outputs ``{text}{calls}...`` with
no think block (its reasoning is a ``ValueError`` naming the ``reasoning`` option).
Earlier turns are rendered as the template writes them; a trained one with reasoning (the
template drops it) is a ``ValueError`` unless ``reasoning="drop"``.

DeepSeek-R1-0528 (``deepseek-ai/DeepSeek-R1-0528``) is not this renderer: its release
changed the template. The published template of its distill (``DeepSeek-R1-0528-Qwen3-8B``)
writes ``<｜Assistant｜>`` right after every user message, adds nothing as generation
prompt (no ``<think>\\n``: the model opens its own), resets the tool-call flags per user
message and separates results with ``\\n``; the 0528 model's own template could not be
read here, so no renderer claims it.

Oracles (the official template is not in the hub cache): R1's template text, transcribed
from two public copies of ``deepseek-ai/DeepSeek-R1``'s ``tokenizer_config.json`` (kept in
``tests/data/deepseek_r1_chat_template.jinja``) and rendered by jinja2's immutable sandbox
with tml-renderers 0.2.1's ``DeepSeekR1Tokenizer``; tml-renderers 0.2.1's ``DeepSeekR1()``
as cross-check. Agreement over the shared corpus (``tests/test_deepseek_r1.py``; 43
conversations, the corpus but the ones whose text spells ``<think>``, which R1's
tokenizer would make a control token): the template: 61 of 61 generation prompts, every
history turn, and every supervised example (33; its untrained prefix is the template's
generation prompt, the trained turn the hand-written sampled form; the one with reasoning
after tool outputs is refused); tml-renderers: 49 of 61 generation prompts (49 of the 50
without tool messages), 7 of 33 supervised examples, 27 of 27 parses of trained turns
(not after tool outputs). Where tml-renderers differs, this
renderer follows the template: tml writes a mid-conversation system message in place,
``<｜Assistant｜><think>\\n`` after tool outputs, reasoning and text of tool-call turns
in history, ``<｜Assistant｜>`` before an answer after tool outputs, and a trained answer
without reasoning inside the think block its prompt opened (no ``</think>``), which R1
would read as reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from renderers.core.engine import StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    join_text,
)
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.sections import SectionGrammar, fenced_json_call, section_parser
from renderers.core.writer import NO_MESSAGE, TokenWriter
from renderers.deepseek_v3 import (
    ASSISTANT,
    CALL_END,
    OUTPUT_BEGIN,
    OUTPUTS_BEGIN,
    OUTPUTS_END,
    SEP,
    THINK,
    THINK_END,
    USER,
    DeepSeekRenderer,
    TemplateFlags,
)
from renderers.rendering import checked_arguments
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["DeepSeekR1Options", "DeepSeekR1Renderer"]


@dataclass(frozen=True, slots=True)
class DeepSeekR1Options:
    """Options of the DeepSeek-R1 format (the template has no kwargs)."""

    fix_tool_format: bool = False
    """False: tool calls and outputs as the template writes them, defects included. True:
    the consistent format the template intends (see the module doc)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn the format cannot write (a history turn,
    or a turn after tool outputs): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it
    out (untrained turns: dropped, as the template does)."""
    starts_in_reasoning: bool = True
    """Parsing: the completion starts inside the reasoning the generation prompt opened
    (``<think>\\n``); False for one sampled after tool outputs (no think block)."""


class DeepSeekR1Renderer(DeepSeekRenderer):
    """Renderer and parser for DeepSeek-R1."""

    name = "deepseek_r1"
    default_model = "deepseek-ai/DeepSeek-R1"
    tokenizer_source = "tml_renderers.tokenizers:DeepSeekR1Tokenizer"
    Options = DeepSeekR1Options
    message_markers = MessageMarkers(
        starts={USER: "user", ASSISTANT: "assistant", OUTPUTS_BEGIN: "tool", OUTPUT_BEGIN: "tool"},
        after={OUTPUTS_END: "assistant"},  # the answer after tool outputs has no marker
        leading="system",
    )
    _call_separator = "\n"

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        self.think = self.table.control_id(THINK)
        self.think_end = self.table.control_id(THINK_END)

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: DeepSeekR1Options,
        add_generation_prompt: bool,
    ) -> None:
        self._check(messages)
        self._system_prompt(w, messages)
        fixed = options.fix_tool_format
        state = TemplateFlags()
        last = len(messages) - 1
        for i, m in enumerate(messages):
            if m.role == "user":
                if fixed and state.is_tool:
                    w.control(self.outputs_end, i)
                state.is_tool = False
                w.control(self.user, i)
                w.text(m.text, i)
            elif m.role == "assistant":
                if i == last and not add_generation_prompt:
                    self._sampled_turn(w, i, m, state.is_tool, options)
                    return
                reasoning = any(type(p) is ThinkingPart and p.text for p in m.parts)
                if reasoning and w.trains(i) and options.reasoning == "error":
                    why = "its template drops the reasoning of history turns"
                    raise reasoning_error(self.name, i, why)
                parts = [p for p in m.parts if type(p) is not ThinkingPart]
                if any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in parts):
                    self._calls_turn(w, i, parts, state, fixed)
                elif state.is_tool:
                    w.control(self.outputs_end, i)
                    w.text(join_text(parts), i, True)
                    w.control(self.eos, i, True)
                else:
                    w.control(self.assistant, i)
                    w.text(join_text(parts).split(THINK_END)[-1], i, True)
                    w.control(self.eos, i, True)
                state.is_tool = False
            elif m.role == "tool":
                if not state.is_tool and (fixed or state.is_output_first):
                    w.control(self.outputs_begin, i)
                    state.is_output_first = False
                self._tool_output(w, i, m.text)
                state.is_tool = True
        self._generation_prompt(w, state.is_tool, add_generation_prompt)

    def _generation_prompt(
        self, w: TokenWriter, after_tools: bool, add: bool, i: int = NO_MESSAGE
    ) -> None:
        """``<｜tool▁outputs▁end｜>`` after tool outputs (written at the end of a conversation
        even without a prompt), else ``<｜Assistant｜><think>\\n``."""
        if after_tools:
            w.control(self.outputs_end, i)
        elif add:
            w.control(self.assistant, i)
            w.control(self.think, i)
            # Encoded apart: the sampled reasoning is never merged into the prompt's "\n".
            w.encoded(self.table.encode("\n"), i)

    def _sampled_turn(
        self, w: TokenWriter, i: int, m: Message, after_tools: bool, options: DeepSeekR1Options
    ) -> None:
        """The last assistant turn after its generation prompt, as the model samples it."""
        parts = list(m.parts)
        reasoning = any(type(p) is ThinkingPart and p.text for p in parts)
        if after_tools and reasoning and w.trains(i) and options.reasoning == "error":
            why = "the generation prompt after tool outputs opens no think block"
            raise reasoning_error(self.name, i, why)
        self._generation_prompt(w, after_tools, True, i)
        if after_tools:
            parts = [p for p in parts if type(p) is not ThinkingPart]
        else:
            if parts and type(parts[0]) is ThinkingPart:
                w.text(parts[0].text, i, True)
                parts = parts[1:]
            w.control(self.think_end, i, True)
        self._body(w, i, parts)

    def _calls_turn(
        self, w: TokenWriter, i: int, parts: list[Part], state: TemplateFlags, fixed: bool
    ) -> None:
        """A tool-call message in history: the consistent form, or the template's (text
        first, then the calls; after the conversation's first call, no header or text)."""
        if fixed:
            w.control(self.outputs_end if state.is_tool else self.assistant, i)
            self._body(w, i, parts)
            return
        text = join_text([p for p in parts if type(p) is TextPart])
        calls = [p for p in parts if type(p) is not TextPart]
        if state.is_first and text and w.trains(i):
            raise ValueError(
                f"messages[{i}]: deepseek_r1's template drops the text of every tool-call "
                "message after the conversation's first, so this trained turn would lose "
                "it; pass fix_tool_format=True, or remove the text"
            )
        for part in calls:
            if not state.is_first:
                w.control(self.assistant, i)
                w.text(text, i, True)
                w.control(self.calls_begin, i, True)
                state.is_first = True
            else:
                w.text("\n", i, True)
            self._write_call(w, i, part)
        w.control(self.calls_end, i, True)
        w.control(self.eos, i, True)

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        w.control(self.think, i, True)
        w.text(text, i, True)
        w.control(self.think_end, i, True)

    def _call_text(self, part: ToolCallPart, i: int) -> tuple[str, str]:
        if "\n" in part.name:
            raise ValueError(
                f"messages[{i}]: tool name {part.name!r} contains a newline, which "
                "deepseek_r1 cannot express (the name ends at the first newline)"
            )
        arguments = checked_arguments(part, i)
        return "function", part.name + "\n```json\n" + arguments + "\n```"

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "history turns are written without their reasoning or the generation prompt's "
            "<think> (<｜Assistant｜>{answer}); tool calls are re-serialized in fenced JSON; "
            "text is re-tokenized",
        )

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt opened a think block.
        opened = len(prompt_ids) > 1 and prompt_ids[-2] == self.think
        return self.parse_response(completion_ids, **{**options, "starts_in_reasoning": opened})

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        # The template marks only the first tool output and call of a conversation: an
        # earlier tool exchange must be in the context.
        if self.outputs_begin in prompt_ids:
            call = ToolCallPart("f", "{}")
            return [Message("user", ""), Message("assistant", [call]), Message("tool", "")]
        return [Message("user", "")]

    def _new_parser(self, options: DeepSeekR1Options, events: bool) -> StreamParser:
        opens = options.starts_in_reasoning
        return section_parser(self.grammar, self.table, events, opens_reasoning=opens)

    @cached_property
    def grammar(self) -> SectionGrammar:
        """V3's calls ``function<sep>NAME\\n```json...``` ``, ``\\n`` between them;
        ``<think>``/``</think>`` tokens."""
        think = (self.think, self.think_end)
        return self._grammar(
            build_call=fenced_json_call(SEP, CALL_END), after_call="\n", think=think
        )
