"""DeepSeek-V3 (``deepseek-ai/DeepSeek-V3``) and DeepSeek-V3.1 (``deepseek-ai/DeepSeek-V3.1``).

Both formats put every system message first (joined by a blank line) and then alternate
role markers, with no newlines between turns::

    <｜begin▁of▁sentence｜>{system}\\n\\n{system}<｜User｜>{user}<｜Assistant｜>{answer}<｜end▁of▁sentence｜>

Sampling stops at ``<｜end▁of▁sentence｜>`` (also the end-of-sequence token). The role and
tool markers below are single control tokens; message text is encoded as ordinary text.
The templates ignore ``tools`` (declare tools in the system prompt yourself, as the model
cards describe), a message's ``name`` and ``tool_call_id``.

DeepSeek-V3 (renderer ``deepseek_v3``)
--------------------------------------
A tool-call turn and its results, as the template means them::

    <｜Assistant｜>{text}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{ARGS}\\n```<｜tool▁call▁end｜>
    \\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{ARGS}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>
    <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜>\\n<｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>{answer}<｜end▁of▁sentence｜>

The answer after tool outputs has no ``<｜Assistant｜>``: the generation prompt after tool
outputs is ``<｜tool▁outputs▁end｜>``. ``<think>`` is *not* a token of this tokenizer: the
parser treats a completion that starts with the text ``<think>`` as DeepSeek-R1-style
reasoning (``<think>\\n{reasoning}\\n</think>\\n\\n{answer}``; R1 shares this format and
tokenizer). ``<think>`` anywhere else is ordinary text. The template ignores the reasoning
of assistant messages, and so does this renderer for turns that are not trained
(generation prompts included). A *trained* turn with reasoning is a ``ValueError`` naming
the ``reasoning`` option (silently dropping it would corrupt training data), unless
``render_thinking=True`` writes it R1-style or ``reasoning="drop"`` leaves it out.

The official template has defects in its tool-call branch, reproduced by default
(``fix_tool_format=False``) for token parity:

- tool calls are rendered only when ``content`` is None: a message with text *and* calls
  loses its calls, and ``content: ""`` hides them too;
- a tool-call section with a single call is never closed (no ``<｜tool▁calls▁end｜>``, no
  ``<｜end▁of▁sentence｜>``), while with several calls ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``
  follows every call after the first;
- its "first call" flag is never reset, so every later tool-call message is written,
  per call, as
  ``\\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>``,
  without ``<｜Assistant｜>`` or ``<｜tool▁calls▁begin｜>``; likewise only the very first tool
  result of a conversation gets ``<｜tool▁outputs▁begin｜>`` (later ones start with ``\\n``);
- ``<｜tool▁outputs▁end｜>`` is written only before a text answer or at the end, not before
  a user message or another tool-call message.

Training on these renderings teaches the model formats it cannot be prompted into (the
untrained prefix before such a turn differs from the generation prompt, and a single
call's trained tokens end at ``<｜tool▁call▁end｜>``, with no stop token to learn). Calls the
template writes after an ``<｜end▁of▁sentence｜>`` of the same turn are not trained: the
model stops there, so a later call is never sampled after it.
``fix_tool_format=True`` renders the format the template intends instead: every
tool-call message is::

    {header}{text}<｜tool▁calls▁begin｜>{calls,\\n-separated}<｜tool▁calls▁end｜><｜end▁of▁sentence｜>

(header ``<｜Assistant｜>`` after a user message, nothing after tool outputs), and every
group of consecutive results is ``<｜tool▁outputs▁begin｜>...<｜tool▁outputs▁end｜>``.
This corrected form is derived from the template's own branches, not from another
DeepSeek release.

DeepSeek-V3.1 (renderer ``deepseek_v3.1``)
-------------------------------------------
Its think tokens, ``thinking`` modes and tool-call form: :mod:`renderers.deepseek_v3_1`.

Parsing (both formats)
----------------------
Parsed by the section grammar (:mod:`renderers.core.sections`): parts in sampled order,
several sections, text between and after them kept. A call's arguments are kept as
sampled and must be valid JSON, else the call is an ``UnparsedToolCallPart`` (its raw
text, ``<｜tool▁sep｜>`` spelled out, and its name when readable). Names are verbatim
(``get-weather.v2``). V3 calls need the type ``function``; the json fence is read
leniently. A token of another turn (``<｜User｜>``, ``<｜Assistant｜>``, tool outputs), or a
stop inside a section, makes the message malformed; other markers out of place are kept
as text, reported; a call drafted in open reasoning (before ``</think>``) stays reasoning.
V3's text-level ``</think>`` maps to tokens at token granularity: a token holding the
marker's end and the answer's start belongs to both parts' spans.

Prefill: after the generation prompt. V3: the answer (as ``continue_final_message``
writes it; an R1-style ``<think>`` written in it is text the parser reads as the reasoning
marker, as if sampled). V3.1: the answer after ``</think>``, or with ``thinking=True`` the
reasoning after ``<think>``, which ``continue_final_message`` cannot express (the template
drops every message's reasoning; its ``"content"`` form is the ``thinking=False`` prompt).

Tool-call arguments are written as the text given, verbatim (``{"a":1}`` stays
``{"a":1}``): both templates concatenate the arguments string into their text (an object
there fails: ``+`` of text and a mapping), so the given text is what the model sees; a
dict given as arguments is written as its ``tojson``.

Divergences from both templates, on purpose:

- tool-call arguments must be JSON text (a ``ValueError`` names the message otherwise;
  the templates would write any string); V3: reasoning is an error without
  ``render_thinking=True`` (see above) instead of being dropped, and so is a tool name
  with a newline (V3 ends the name at the first newline);
- list-of-parts content (the templates fail on it) is rendered as its text parts joined;
- an assistant message with text and tool calls keeps both (V3: see above), and
  ``content: ""`` with calls is treated like ``content: None`` (our message model does
  not tell them apart; V3's template would hide the calls);
- V3: an assistant message with neither content nor calls is an empty answer
  (``<｜Assistant｜><｜end▁of▁sentence｜>``, as for ``content: ""``); for ``content: None``
  the template writes nothing at all, and V3.1's fails;
- ``tool_calls: []`` is no calls, as vLLM drops it (V3.1's template writes
  ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>`` in place of the text); a ``None`` tool result
  is an empty one (both templates fail on it, and with transformers 5.23+, which drops
  ``None`` values, on a tool-call message without text; 5.0 to 5.22, the tests' oracle,
  pass ``content: None`` through);
- message text that spells a control token (``<｜User｜>``, ``</think>``...) is encoded as
  ordinary text, never as the control token;
- assistant parts in a non-canonical order (text after a call, several sections) are
  written in that order, each run of calls in its own section, so parsed messages
  render back (V3 with ``fix_tool_format=True``; the V3 template's quirks only describe
  "text, then calls").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from renderers.core.engine import StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.sections import (
    SectionGrammar,
    TextThink,
    fenced_json_call,
    section_parser,
    write_sections,
)
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text, section_closing
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["DeepSeekRenderer", "DeepSeekV3Options", "DeepSeekV3Renderer"]

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
OUTPUTS_END = "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
OUTPUT_END = "<｜tool▁output▁end｜>"
THINK = "<think>"
THINK_END = "</think>"

_FENCE_OPEN = "```json\n"
_FENCE_CLOSE = "\n```"
# DeepSeek-R1-style reasoning written as text (V3, where <think> is not a token).
_R1_OPEN = "<think>\n"
_R1_CLOSE = "\n</think>\n\n"


@dataclass(frozen=True, slots=True)
class DeepSeekV3Options:
    """Options of the DeepSeek-V3 format (the template has no kwargs)."""

    fix_tool_format: bool = False
    """False: tool calls and outputs as the template writes them, defects included. True:
    the consistent format the template intends (see the module doc)."""
    render_thinking: bool = False
    """True: reasoning is written R1-style, as text (parsed R1-style completions render
    back). False: it is not written, as the template does."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn without ``render_thinking``: ``"error"``
    raises ``ValueError``, ``"drop"`` leaves it out (untrained turns: dropped)."""


class DeepSeekRenderer(Renderer):
    """What both DeepSeek formats share: token ids, system prompt, stop token, text."""

    roles = ("system", "user", "assistant", "tool")
    _call_separator: ClassVar[str]  # written between two calls of one section

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.eos = control(EOS)
        self.calls_begin, self.calls_end = control(CALLS_BEGIN), control(CALLS_END)
        self.call_begin, self.call_end, self.sep = map(control, (CALL_BEGIN, CALL_END, SEP))
        turns = (BOS, USER, ASSISTANT, OUTPUTS_BEGIN, OUTPUTS_END, OUTPUT_BEGIN, OUTPUT_END)
        self._turns = tuple(map(control, turns))  # each begins another turn
        self.bos, self.user, self.assistant = self._turns[:3]
        self.outputs_begin, self.outputs_end, self.output_begin, self.output_end = self._turns[3:]

    def _grammar(self, **format: Any) -> SectionGrammar:
        """The parse side: sections of calls; a token that begins another turn ends the
        message; ``format``: the version's call body, think tokens or text."""
        section, call = (self.calls_begin, self.calls_end), (self.call_begin, self.call_end)
        return SectionGrammar((self.eos,), (), self._turns, section, call, self.sep, **format)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        think = self.grammar.think  # V3: R1-style reasoning is text
        think_end = [think[1]] if think else self.table.encode(_R1_CLOSE)
        return 0, section_closing(
            result,
            completion_ids,
            think_end=think_end,
            call_end=self.call_end,
            section_begin=self.calls_begin,
            section_end=self.calls_end,
            stop=self.eos,
        )

    @property
    def grammar(self) -> SectionGrammar:
        """The parse side of the format (see :mod:`renderers.core.sections`)."""
        raise NotImplementedError

    # -- shared rendering -----------------------------------------------------------------

    def _check(self, messages: list[Message]) -> None:
        for i, m in enumerate(messages):
            if m.role != "assistant":
                plain_text(m, i, self.name)

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        raise NotImplementedError

    def _call_text(self, part: ToolCallPart, i: int) -> tuple[str, str]:
        """A call's text before and after ``<｜tool▁sep｜>``."""
        raise NotImplementedError

    def _write_call(self, w: TokenWriter, i: int, part: Part, sampled: bool = True) -> None:
        w.control(self.call_begin, i, sampled)
        if type(part) is ToolCallPart:
            head, body = self._call_text(part, i)
            w.text(head, i, sampled)
            w.control(self.sep, i, sampled)
            w.text(body, i, sampled)
        else:  # the raw text; its <｜tool▁sep｜> markers become the token
            assert type(part) is UnparsedToolCallPart
            for k, piece in enumerate(part.raw.split(SEP)):
                if k:
                    w.control(self.sep, i, sampled)
                w.text(piece, i, sampled)
        w.control(self.call_end, i, sampled)

    def _body(self, w: TokenWriter, i: int, parts: list[Part]) -> None:
        """An assistant turn's parts in order, each run of calls in its own section, then
        the stop token."""
        section = (self.calls_begin, self.calls_end)
        write_sections(
            w, i, parts, section, self._write_call, self._write_thinking, self._call_separator
        )
        w.control(self.eos, i, True)

    def _system_prompt(self, w: TokenWriter, messages: list[Message]) -> None:
        """``<｜begin▁of▁sentence｜>`` and every system message, joined by a blank line."""
        w.control(self.bos)
        first = True
        for i, m in enumerate(messages):
            if m.role == "system":
                if not first:
                    w.text("\n\n")
                w.text(m.text, i)
                first = False

    def _tool_output(self, w: TokenWriter, i: int, text: str) -> None:
        w.control(self.output_begin, i)
        w.text(text, i)
        w.control(self.output_end, i)


# -- DeepSeek-V3 ----------------------------------------------------------------------------


@dataclass(slots=True)
class TemplateFlags:
    """The V3 and R1 templates' namespace flags (``is_first`` and ``is_output_first`` are never
    reset by the template)."""

    is_first: bool = False
    is_output_first: bool = True
    is_tool: bool = False


class DeepSeekV3Renderer(DeepSeekRenderer):
    """Renderer and parser for DeepSeek-V3 (and R1-style completions in its format)."""

    name = "deepseek_v3"
    default_model = "deepseek-ai/DeepSeek-V3"
    Options = DeepSeekV3Options
    message_markers = MessageMarkers(
        starts={USER: "user", ASSISTANT: "assistant", OUTPUTS_BEGIN: "tool", OUTPUT_BEGIN: "tool"},
        after={OUTPUTS_END: "assistant"},  # the answer after tool outputs has no marker
        leading="system",
    )
    _call_separator = "\n"

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: DeepSeekV3Options,
        add_generation_prompt: bool,
    ) -> None:
        self._check(messages)
        self._system_prompt(w, messages)
        fixed = options.fix_tool_format
        state = TemplateFlags()
        for i, m in enumerate(messages):
            if m.role == "user":
                if fixed and state.is_tool:
                    w.control(self.outputs_end, i)
                state.is_tool = False
                w.control(self.user, i)
                w.text(m.text, i)
            elif m.role == "assistant":
                if w.trains(i) and options.reasoning == "error":
                    _check_v3_reasoning(m, i, options.render_thinking)
                parts = [
                    p for p in m.parts if type(p) is not ThinkingPart or options.render_thinking
                ]
                # Reasoning R1 style cannot write (after the start) is dropped, as the
                # template drops all reasoning: untrained turns, or reasoning="drop".
                parts = [p for k, p in enumerate(parts) if type(p) is not ThinkingPart or k == 0]
                has_calls = any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in parts)
                if fixed or not has_calls:
                    # Header: <｜Assistant｜> after anything but tool outputs.
                    w.control(self.outputs_end if state.is_tool else self.assistant, i)
                    self._body(w, i, parts)
                else:
                    self._v3_template_calls(w, i, parts, state)
                state.is_tool = False
            elif m.role == "tool":
                if fixed:
                    if state.is_tool:
                        w.text("\n", i)
                    else:
                        w.control(self.outputs_begin, i)
                elif state.is_output_first:
                    w.control(self.outputs_begin, i)
                    state.is_output_first = False
                else:
                    w.text("\n", i)
                self._tool_output(w, i, m.text)
                state.is_tool = True
        if state.is_tool:
            w.control(self.outputs_end)
        elif add_generation_prompt:
            w.control(self.assistant)

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        w.text(_R1_OPEN + text + _R1_CLOSE, i, True)

    def _v3_template_calls(
        self, w: TokenWriter, i: int, parts: list[Part], state: TemplateFlags
    ) -> None:
        """The template's tool-call branch, defects included (text and reasoning first)."""
        if not state.is_first:
            w.control(self.assistant, i)
        for part in parts:
            if type(part) is ThinkingPart:
                w.text(_R1_OPEN + part.text + _R1_CLOSE, i, True)
        for part in parts:
            if type(part) is TextPart:
                w.text(part.text, i, True)
        sampled = True  # until the <｜end▁of▁sentence｜> the model stops at
        for part in parts:
            if type(part) is TextPart or type(part) is ThinkingPart:
                continue
            if not state.is_first:
                w.control(self.calls_begin, i, True)
                self._write_call(w, i, part)
                state.is_first = True
            else:
                w.text("\n", i, sampled)
                self._write_call(w, i, part, sampled)
                w.control(self.calls_end, i, sampled)
                w.control(self.eos, i, sampled)
                sampled = False

    def _call_text(self, part: ToolCallPart, i: int) -> tuple[str, str]:
        if "\n" in part.name:
            raise ValueError(
                f"messages[{i}]: tool name {part.name!r} contains a newline, which "
                "deepseek_v3 cannot express (the name ends at the first newline)"
            )
        arguments = checked_arguments(part, i)
        return "function", part.name + "\n" + _FENCE_OPEN + arguments + _FENCE_CLOSE

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "tool calls are re-serialized in fenced JSON",
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if not self.options.fix_tool_format:
            reasons.insert(0, "the template's tool-call defects re-render earlier turns")
        if not self.options.render_thinking:
            reasons.insert(0, "reasoning is not written at all")
        return ExtensionProperty(False, "; ".join(reasons))

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        # The template marks only the first tool output of a conversation with
        # <｜tool▁outputs▁begin｜>: an earlier tool exchange must be in the context.
        if self.outputs_begin in prompt_ids:
            call = ToolCallPart("f", "{}")
            return [Message("user", ""), Message("assistant", [call]), Message("tool", "")]
        return [Message("user", "")]

    def _new_parser(self, options: DeepSeekV3Options, events: bool) -> StreamParser:
        return section_parser(self.grammar, self.table, events)

    @cached_property
    def grammar(self) -> SectionGrammar:
        """V3's calls ``function<sep>NAME\\n```json...``` ``, ``\\n`` between them;
        R1-style reasoning written as text at the start."""
        return self._grammar(
            build_call=fenced_json_call(SEP, CALL_END), after_call="\n", text_think=TextThink()
        )


# -- DeepSeek-V3.1 --------------------------------------------------------------------------


def _check_v3_reasoning(m: Message, i: int, written: bool) -> None:
    """The reasoning of a trained turn: the template drops it (silently dropping it would
    corrupt training data), and R1 style writes one block, at the start of the turn."""
    if not written and any(type(p) is ThinkingPart and p.text for p in m.parts):
        why = "its template drops it; render_thinking=True writes it R1-style, <think>...</think>"
        raise reasoning_error("deepseek_v3", i, why)
    for k, part in enumerate(m.parts):
        if written and type(part) is ThinkingPart and k > 0:
            raise ValueError(
                f"messages[{i}].content[{k}]: deepseek_v3 writes reasoning R1-style, one "
                "<think> block at the start of the turn; merge the reasoning into the first "
                "part, pass reasoning='drop' to leave it out, or remove it"
            )
