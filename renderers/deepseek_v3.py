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

DeepSeek-V3.1 (renderer ``deepseek_v3.1``, option ``thinking``)
-----------------------------------------------------------------
``<think>`` and ``</think>`` are control tokens. The turn after a user message starts
with ``<｜Assistant｜></think>`` (non-thinking) and the generation prompt is
``<｜Assistant｜></think>``, or ``<｜Assistant｜><think>`` with ``thinking=True``: the
completion then starts inside the reasoning, ``{reasoning}</think>{answer}``, and the
parser starts in the thinking state. Tool calls and results::

    <｜Assistant｜></think>{text}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>
    <｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜><｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜>{answer}<｜end▁of▁sentence｜>

After tool outputs the template adds no ``<｜Assistant｜>`` (neither before a history answer
nor as generation prompt, which is then empty). This is reproduced: it is consistent
(what the prompt ends with is what the history shows), so it does not corrupt training
data. Parse such a completion with ``thinking=False``: the prompt opened no think block.
The same holds for an assistant turn with no user message before it, which follows the
system text directly: the template writes ``{system}{answer}`` with no marker, and the
tokenizer may merge the two texts into one token (``s`` + ``a`` -> ``sa``). Such a turn is
rendered as the template does, but training it is a ``ValueError`` (the model would be
trained on system text it never samples); a trained token never holds untrained text.

Every assistant message is rendered without its reasoning (the template drops
``reasoning_content`` and, for a plain answer, the text up to the first ``</think>``).
So with ``thinking=True`` the template cannot express a training target with reasoning,
and its history turns (``<｜Assistant｜></think>{answer}``) do not extend the thinking
generation prompt. ``keep_thinking=True`` (with ``thinking=True``) renders the *last*
message, when it is an assistant turn right after a user message, as the model samples it
in thinking mode, ``<｜Assistant｜><think>{reasoning}</think>{answer}<｜end▁of▁sentence｜>``.
Every other turn stays as the template writes it, so the untrained prefix is always the
template's generation prompt; to train the reasoning of several turns, build one example
per turn (the conversation cut after it).

Parsing (both formats)
----------------------
Structure comes from token ids: parts in sampled order (reasoning, text, calls, and
again), several tool-call sections, text between and after sections kept. A call's
arguments are kept exactly as sampled and must be valid JSON; otherwise the call is an
``UnparsedToolCallPart`` holding the raw text between ``<｜tool▁call▁begin｜>`` and
``<｜tool▁call▁end｜>`` (``<｜tool▁sep｜>`` spelled out) and the name when it is readable.
Names are taken verbatim (``get-weather.v2``, ``ns.tool_3``). V3 calls need the type
``function``; the json fence is read leniently. A token that starts another turn
(``<｜User｜>``, ``<｜Assistant｜>``, tool outputs) ends the message as malformed; other
markers out of place are kept as text with an issue, and a call drafted inside open
reasoning (before ``</think>``) stays reasoning text, reported; a message that stops inside a
tool-call section (no ``<｜tool▁calls▁end｜>``) is malformed. Cut-off reasoning, text or
calls are marked incomplete (termination ``LENGTH``). V3's text-level ``</think>`` maps
to tokens at token granularity: a token holding both the end of the marker and the
answer's first characters belongs to both parts' spans.

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
- ``tool_calls: []`` is no calls (vLLM drops an empty list before templating): V3.1's
  template tests ``'tool_calls' in message`` and writes
  ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>`` in place of the text; a ``None`` tool
  result is an empty one (both templates fail concatenating it). With transformers 5.23
  and later, which drop every ``None``-valued key, both templates fail on any tool-call
  message without text (``'dict object' has no attribute 'content'``); 5.0 to 5.22 pass
  ``content: None`` through (what the tests' oracle renders);
- message text that spells a control token (``<｜User｜>``, ``</think>``...) is encoded as
  ordinary text, never as the control token;
- assistant parts in a non-canonical order (text after a call, several sections) are
  written in that order, each run of calls in its own section, so parsed messages
  render back (V3 with ``fix_tool_format=True``; the V3 template's quirks only describe
  "text, then calls").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, ToolCallBuilder, without_prefix
from renderers.core.engine import BatchRuns, StreamParser
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
from renderers.core.scanning import MarkerScanner
from renderers.core.writer import TokenWriter
from renderers.rendering import (
    Renderer,
    checked_arguments,
    plain_text,
    section_closing,
)
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = [
    "DeepSeekV3Options",
    "DeepSeekV3Renderer",
    "DeepSeekV31Options",
    "DeepSeekV31Renderer",
]

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
    """False (template parity): tool calls and outputs as the template writes them, defects
    included. True: the consistent format the template intends (see the module doc)."""
    render_thinking: bool = False
    """False: assistant reasoning is not written (as the template does; see ``reasoning``
    for a trained turn). True: it is written as text, R1-style
    ``<think>\\n{reasoning}\\n</think>\\n\\n``, so parsed R1-style completions render back."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (without
    ``render_thinking``): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out.
    Reasoning of untrained turns is dropped as the template does."""


@dataclass(frozen=True, slots=True)
class DeepSeekV31Options:
    """Options of the DeepSeek-V3.1 format (``thinking`` is the template's kwarg)."""

    thinking: bool = False
    """True: the generation prompt opens a think block (``<｜Assistant｜><think>``) and the
    parser starts in the thinking state. False: it ends ``<｜Assistant｜></think>``."""
    keep_thinking: bool = False
    """With ``thinking=True``: the last message, if it is an assistant turn right after a
    user message, keeps its reasoning, ``<｜Assistant｜><think>{reasoning}</think>{answer}``,
    the way the model samples it (the template drops it). No effect with
    ``thinking=False``."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (every
    turn but the one ``keep_thinking`` keeps): ``"error"`` raises ``ValueError``,
    ``"drop"`` leaves it out. Reasoning of untrained turns is dropped as the template
    does."""


class _DeepSeekRenderer(Renderer):
    """What both DeepSeek formats share: token ids, system prompt, stop token, text."""

    roles = ("system", "user", "assistant", "tool")
    _call_separator: ClassVar[str]  # written between two calls of one section

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.bos = control(BOS)
        self.eos = control(EOS)
        self.user = control(USER)
        self.assistant = control(ASSISTANT)
        self.calls_begin = control(CALLS_BEGIN)
        self.calls_end = control(CALLS_END)
        self.call_begin = control(CALL_BEGIN)
        self.call_end = control(CALL_END)
        self.sep = control(SEP)
        self.outputs_begin = control(OUTPUTS_BEGIN)
        self.outputs_end = control(OUTPUTS_END)
        self.output_begin = control(OUTPUT_BEGIN)
        self.output_end = control(OUTPUT_END)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    # -- multi-turn rollouts ------------------------------------------------------------

    def _think_end_ids(self) -> list[int]:
        raise NotImplementedError

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        return 0, section_closing(
            result,
            completion_ids,
            think_end=self._think_end_ids(),
            call_end=self.call_end,
            section_begin=self.calls_begin,
            section_end=self.calls_end,
            stop=self.eos,
        )

    # -- shared rendering -----------------------------------------------------------------

    def _check(self, messages: list[Message]) -> None:
        for i, m in enumerate(messages):
            if m.role != "assistant":
                plain_text(m, i, self.name)

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        raise NotImplementedError

    def _write_call(self, w: TokenWriter, i: int, part: Part) -> None:
        raise NotImplementedError

    def _body(self, w: TokenWriter, i: int, parts: list[Part]) -> None:
        """An assistant turn's parts in order, each run of calls in its own section, then
        the stop token."""
        in_section = False
        for part in parts:
            if type(part) is TextPart or type(part) is ThinkingPart:
                if not part.text and type(part) is TextPart:
                    continue
                if in_section:
                    w.control(self.calls_end, i, True)
                    in_section = False
                if type(part) is ThinkingPart:
                    self._write_thinking(w, i, part.text)
                else:
                    w.text(part.text, i, True)
                continue
            if not in_section:
                w.control(self.calls_begin, i, True)
                in_section = True
            elif self._call_separator:
                w.text(self._call_separator, i, True)
            self._write_call(w, i, part)
        if in_section:
            w.control(self.calls_end, i, True)
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

    def _raw_call(self, w: TokenWriter, i: int, raw: str, sampled: bool = True) -> None:
        """An unparsed call's raw text; its ``<｜tool▁sep｜>`` markers become the token."""
        for k, piece in enumerate(raw.split(SEP)):
            if k:
                w.control(self.sep, i, sampled)
            w.text(piece, i, sampled)

    def _tool_output(self, w: TokenWriter, i: int, text: str) -> None:
        w.control(self.output_begin, i)
        w.text(text, i)
        w.control(self.output_end, i)


# -- DeepSeek-V3 ----------------------------------------------------------------------------


@dataclass(slots=True)
class _V3State:
    """The template's namespace flags (``is_first`` and ``is_output_first`` are never
    reset by the template)."""

    is_first: bool = False
    is_output_first: bool = True
    is_tool: bool = False


class DeepSeekV3Renderer(_DeepSeekRenderer):
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
        state = _V3State()
        for i, m in enumerate(messages):
            if m.role == "user":
                if fixed and state.is_tool:
                    w.control(self.outputs_end, i)
                state.is_tool = False
                w.control(self.user, i)
                w.text(m.text, i)
            elif m.role == "assistant":
                if not options.render_thinking and w.trains(i) and options.reasoning == "error":
                    _reject_reasoning(m, i)
                parts = [
                    p for p in m.parts if type(p) is not ThinkingPart or options.render_thinking
                ]
                if w.trains(i) and options.reasoning == "error":
                    _check_leading_reasoning(parts, i)
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
        self, w: TokenWriter, i: int, parts: list[Part], state: _V3State
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

    def _write_call(self, w: TokenWriter, i: int, part: Part, sampled: bool = True) -> None:
        w.control(self.call_begin, i, sampled)
        if type(part) is ToolCallPart:
            if "\n" in part.name:
                raise ValueError(
                    f"messages[{i}]: tool name {part.name!r} contains a newline, which "
                    "deepseek_v3 cannot express (the name ends at the first newline)"
                )
            w.text("function", i, sampled)
            w.control(self.sep, i, sampled)
            arguments = checked_arguments(part, i)
            w.text(part.name + "\n" + _FENCE_OPEN + arguments + _FENCE_CLOSE, i, sampled)
        else:
            assert type(part) is UnparsedToolCallPart
            self._raw_call(w, i, part.raw, sampled)
        w.control(self.call_end, i, sampled)

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

    def _think_end_ids(self) -> list[int]:
        return self.table.encode(_R1_CLOSE)  # R1-style reasoning is text

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
        return _V3Parser(self, events)


# -- DeepSeek-V3.1 --------------------------------------------------------------------------


class DeepSeekV31Renderer(_DeepSeekRenderer):
    """Renderer and parser for DeepSeek-V3.1 (thinking and non-thinking modes)."""

    name = "deepseek_v3.1"
    default_model = "deepseek-ai/DeepSeek-V3.1"
    Options = DeepSeekV31Options
    message_markers = MessageMarkers(
        starts={USER: "user", ASSISTANT: "assistant", OUTPUT_BEGIN: "tool"},
        after={OUTPUT_END: "assistant"},  # the answer after tool outputs has no marker
        leading="system",
    )
    _call_separator = ""

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        self.think = self.table.control_id(THINK)
        self.think_end = self.table.control_id(THINK_END)

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: DeepSeekV31Options,
        add_generation_prompt: bool,
    ) -> None:
        self._check(messages)
        self._system_prompt(w, messages)
        is_tool = False
        is_last_user = False
        for i, m in enumerate(messages):
            if m.role == "user":
                is_tool = False
                is_last_user = True
                w.control(self.user, i)
                w.text(m.text, i)
            elif m.role == "assistant":
                parts = list(m.parts)
                has_calls = any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in parts)
                if not has_calls and not is_tool:
                    parts = _split_inline_reasoning(parts)
                keep = (
                    options.thinking
                    and options.keep_thinking
                    and is_last_user
                    and i == len(messages) - 1
                )
                if w.trains(i) and not keep and options.reasoning == "error":
                    _reject_trained_reasoning(
                        parts,
                        i,
                        after_tools=is_tool,
                        after_user=is_last_user,
                        keeping=options.thinking and options.keep_thinking,
                    )
                if is_last_user:
                    w.control(self.assistant, i)
                    w.control(self.think if keep else self.think_end, i)
                elif (
                    w.trains(i)
                    and _after_system_text(messages, i)
                    and not all(w.trains(k) for k in range(i))
                ):
                    raise ValueError(
                        f"messages[{i}]: deepseek_v3.1's template writes an assistant turn with "
                        "no user message before it right after the system text, with no marker "
                        "between them, so it cannot be trained; add a user message before it"
                    )
                self._v31_body(w, i, parts, keep)
                is_last_user = False
                is_tool = False
            elif m.role == "tool":
                is_last_user = False
                is_tool = True
                self._tool_output(w, i, m.text)
        if add_generation_prompt and is_last_user and not is_tool:
            w.control(self.assistant)
            w.control(self.think if options.thinking else self.think_end)

    def _v31_body(self, w: TokenWriter, i: int, parts: list[Part], keep: bool) -> None:
        """Parts in order (reasoning only when ``keep``), each run of calls in its own
        section, then the stop token. With ``keep`` the header opened a think block."""
        if keep:
            if parts and type(parts[0]) is ThinkingPart:
                w.text(parts[0].text, i, True)
                parts = parts[1:]
            w.control(self.think_end, i, True)
        self._body(w, i, parts if keep else [p for p in parts if type(p) is not ThinkingPart])

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        w.control(self.think, i, True)
        w.text(text, i, True)
        w.control(self.think_end, i, True)

    def _write_call(self, w: TokenWriter, i: int, part: Part) -> None:
        w.control(self.call_begin, i, True)
        if type(part) is ToolCallPart:
            w.text(part.name, i, True)
            w.control(self.sep, i, True)
            w.text(checked_arguments(part, i), i, True)
        else:
            assert type(part) is UnparsedToolCallPart
            self._raw_call(w, i, part.raw)
        w.control(self.call_end, i, True)

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "history turns are written without reasoning (after <｜Assistant｜></think>), "
            "which thinking-mode prompts (<think>) did not show; tool calls are "
            "re-serialized; text is re-tokenized",
        )

    def _think_end_ids(self) -> list[int]:
        return [self.think_end]

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt opened a think block
        # (after tool outputs the template's generation prompt adds nothing).
        opened = bool(prompt_ids) and prompt_ids[-1] == self.think
        return self.parse_response(completion_ids, **{**options, "thinking": opened})

    def _new_parser(self, options: DeepSeekV31Options, events: bool) -> StreamParser:
        return _V31Parser(self, events, thinking=options.thinking)


# -- helpers --------------------------------------------------------------------------------


def _reject_trained_reasoning(
    parts: list[Part], i: int, *, after_tools: bool, after_user: bool, keeping: bool
) -> None:
    """The template drops every turn's reasoning; in a supervised example the trained
    (last) turn would silently lose the reasoning it should teach: a caller error."""
    if any(type(p) is ThinkingPart and p.text for p in parts):
        if after_tools:
            how = "a turn right after tool outputs has no think block in this format"
        elif keeping or not after_user:
            how = "keep_thinking keeps the reasoning of the last turn, right after a user message"
        else:
            how = "pass thinking=True, keep_thinking=True to train on it"
        raise reasoning_error("deepseek_v3.1", i, f"its template drops it; {how}")


def _after_system_text(messages: list[Message], i: int) -> bool:
    """Whether message ``i`` directly follows the system prompt's text (only system
    messages before it, one of them not empty)."""
    before = messages[:i]
    return all(m.role == "system" for m in before) and any(m.text for m in before)


def _check_leading_reasoning(parts: list[Part], i: int) -> None:
    """R1-style reasoning is one ``<think>`` block at the start of the turn: a later one
    would be written as text that reads back as text."""
    for k, part in enumerate(parts):
        if type(part) is ThinkingPart and k > 0:
            raise ValueError(
                f"messages[{i}].content[{k}]: deepseek_v3 writes reasoning R1-style, one "
                "<think> block at the start of the turn; merge the reasoning into the first "
                "part, pass reasoning='drop' to leave it out, or remove it"
            )


def _reject_reasoning(m: Message, i: int) -> None:
    """DeepSeek-V3's template drops reasoning; silently dropping it from a trained turn
    would corrupt training data (see the ``reasoning`` option)."""
    if any(type(p) is ThinkingPart and p.text for p in m.parts):
        raise reasoning_error(
            "deepseek_v3",
            i,
            "its template drops it; render_thinking=True writes it R1-style, <think>...</think>",
        )


def _split_inline_reasoning(parts: list[Part]) -> list[Part]:
    """V3.1's template drops a plain answer's text up to its first ``</think>`` (reasoning
    written inline). That text becomes the reasoning, after any the message has in parts."""
    text = join_text(parts)
    if THINK_END not in text:
        return parts
    before, after = text.split(THINK_END, 1)
    # Reasoning of the message's own parts, then the inline reasoning: neither is dropped.
    own = "".join(p.text for p in parts if type(p) is ThinkingPart)
    reasoning = own + before.removeprefix(THINK)
    return [ThinkingPart(reasoning), *([TextPart(after)] if after else [])]


# -- parsing --------------------------------------------------------------------------------


def _v31_tool_call(segments: list[str], incomplete: bool) -> Part:
    """``NAME<｜tool▁sep｜>{ARGS}`` -> a tool call (arguments kept exactly as sampled)."""
    raw = SEP.join(segments)
    name = segments[0] if len(segments) > 1 and segments[0] else None
    if incomplete:
        return UnparsedToolCallPart(raw, f"cut off before {CALL_END}", name=name, incomplete=True)
    if len(segments) != 2:
        return UnparsedToolCallPart(
            raw, f"expected NAME{SEP}ARGUMENTS, got {len(segments) - 1} separators", name=name
        )
    if name is None:
        return UnparsedToolCallPart(raw, "empty tool name")
    arguments = segments[1]
    try:
        json.loads(arguments)
    except ValueError as exc:
        return UnparsedToolCallPart(
            raw, f"invalid JSON arguments: {exc}", name=name, arguments=arguments
        )
    return ToolCallPart(name, arguments)


def _unfence(body: str) -> str:
    """The JSON inside V3's fenced block; lenient about the fence's whitespace."""
    if body.startswith(_FENCE_OPEN) and body.endswith(_FENCE_CLOSE):
        return body[len(_FENCE_OPEN) : -len(_FENCE_CLOSE)]
    s = body.strip()
    if s.startswith("```"):
        newline = s.find("\n")
        s = s[newline + 1 :] if newline != -1 else ""
        if s.endswith("```"):
            s = s[:-3]
    return s.strip()


def _v3_tool_call(segments: list[str], incomplete: bool) -> Part:
    """``function<｜tool▁sep｜>NAME\\n```json\\n{ARGS}\\n``` `` -> a tool call."""
    raw = SEP.join(segments)
    rest = segments[1] if len(segments) > 1 else ""
    name = rest.split("\n", 1)[0] if "\n" in rest else None
    if incomplete:
        return UnparsedToolCallPart(raw, f"cut off before {CALL_END}", name=name, incomplete=True)
    if len(segments) != 2:
        return UnparsedToolCallPart(
            raw, f"expected TYPE{SEP}NAME, got {len(segments) - 1} separators", name=name
        )
    if name is None:
        return UnparsedToolCallPart(raw, "no newline after the tool name")
    if segments[0] != "function":
        return UnparsedToolCallPart(raw, f"unknown tool type {segments[0]!r}", name=name or None)
    if not name:
        return UnparsedToolCallPart(raw, "empty tool name")
    arguments = _unfence(rest.split("\n", 1)[1])
    try:
        json.loads(arguments)
    except ValueError as exc:
        return UnparsedToolCallPart(
            raw, f"invalid JSON arguments: {exc}", name=name, arguments=arguments
        )
    return ToolCallPart(name, arguments)


class _DeepSeekParser(StreamParser):
    """Text, think blocks (V3.1 tokens) and tool-call sections, in any order.

    Tokens that begin another turn (``<｜User｜>``, ``<｜Assistant｜>``, tool outputs) end the
    message as malformed; a control token out of place is kept as text with an issue (no
    sampled character is lost).
    """

    def __init__(
        self,
        r: _DeepSeekRenderer,
        events: bool,
        *,
        extra: tuple[int, ...],
        build: ToolCallBuilder,
        call_separator: str,
        byte_offsets: bool = False,
    ) -> None:
        ends_turn = (
            r.bos,
            r.user,
            r.assistant,
            r.outputs_begin,
            r.outputs_end,
            r.output_begin,
            r.output_end,
        )
        super().__init__(
            r.table,
            structural=(
                r.calls_begin,
                r.calls_end,
                r.call_begin,
                r.call_end,
                r.sep,
                *ends_turn,
                *extra,
            ),
            stop_ids=(r.eos,),
            events=events,
            byte_offsets=byte_offsets,
        )
        self._r = r
        self._ends_turn = frozenset(ends_turn)
        self._build = build
        self._call_separator = call_separator
        self._in_section = False
        self._call_tokens = frozenset((r.calls_begin, r.calls_end, r.call_begin, r.call_end, r.sep))
        self._think_id: int | None = None  # the think tokens, where the format has them
        self._think_end_id: int | None = None
        self._on_text = self.asm.write  # type: ignore[method-assign]

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return True, None  # text goes to the assembler as it comes

    def _drain(self) -> None:
        """Release text a format holds back (called before any token or the end)."""

    def _unexpected(self, token_id: int, pos: int) -> None:
        text = self._table.control_text(token_id) or ""
        self._keep_as_text(token_id, pos, f"unexpected {text} (kept as text)")

    def _close_call(self, pos: int, why: str) -> None:
        self._issue(pos, why)
        self.asm.close(pos, incomplete=True, build=self._build)

    def _on_token(self, token_id: int, pos: int) -> None:
        self._drain()
        r = self._r
        asm = self.asm
        kind = asm.kind
        if kind == THINKING and token_id in self._call_tokens:
            self._drafted_call(token_id, pos)
            return
        if token_id == r.calls_begin:
            if kind == TOOL_CALL:
                self._close_call(pos, f"{CALLS_BEGIN} inside a tool call (the call is cut there)")
            elif self._in_section:
                self._unexpected(token_id, pos)
                return
            else:
                asm.close(pos)
            self._in_section = True
            asm.open(TEXT, pos + 1)
        elif token_id == r.call_begin:
            if kind == TOOL_CALL:
                self._close_call(pos, f"{CALL_BEGIN} inside a tool call (the call is cut there)")
            else:
                if not self._in_section:
                    self._issue(pos, f"{CALL_BEGIN} outside a tool-call section")
                asm.close(pos)
            self._in_section = True
            asm.open(TOOL_CALL, pos)
        elif token_id == r.sep:
            if kind == TOOL_CALL:
                asm.next_segment(SEP)
            else:
                self._unexpected(token_id, pos)
        elif token_id == r.call_end:
            if kind != TOOL_CALL:
                self._unexpected(token_id, pos)
                return
            asm.close(pos + 1, build=self._build)
            asm.open(TEXT, pos + 1, strip_prefix=self._call_separator)
        elif token_id == r.calls_end:
            if not self._in_section:
                self._unexpected(token_id, pos)
                return
            if kind == TOOL_CALL:
                self._close_call(pos, f"{CALLS_END} inside a tool call (the call is cut there)")
            else:
                asm.close(pos)
            self._in_section = False
            asm.open(TEXT, pos + 1)
        elif token_id in self._ends_turn:
            name = self._table.control_text(token_id)
            self._issue(pos, f"{name} before {EOS}: the message ends here")
            self._end_message(pos)
        else:
            self._on_think_token(token_id, pos)

    def _parse_in_order(
        self,
        runs: BatchRuns,
        first: str,
        kind: str,
        start: int,
        prefix: str,
        head: Sequence[tuple[Part, tuple[int, int]]] = (),
    ) -> ParseResult | None:
        """The one-shot parse of a completion in order (think blocks, text, a section of
        whole calls closed before the stop token): the parts :meth:`_on_token` and the
        assembler make, each region's text being one run. The first run's text is
        ``first``, in a region of ``kind`` opened at ``start`` with ``prefix`` to strip,
        after the parts ``head`` (with their spans). Anything else (an issue to report)
        takes the general path."""
        r = self._r
        texts = runs.texts
        cuts = runs.cuts
        parts: list[Part | None] = [part for part, _ in head]
        spans: list[tuple[int, int]] = [span for _, span in head]
        explicit = kind == THINKING
        in_section = False
        segments: list[str] = []  # the open call's text before each separator
        stop_id = None
        j = -1
        for j, t in enumerate(runs.tokens):
            pos = cuts[j]
            text = texts[j] if j else first
            if prefix:
                text = without_prefix(text, prefix)
            if kind == TOOL_CALL:
                if t == r.sep:
                    segments.append(text)
                elif t == r.call_end:
                    parts.append(self._build([*segments, text], False))
                    spans.append((start, pos + 1))
                    kind, start, explicit = TEXT, pos + 1, False
                    prefix = self._call_separator
                else:
                    return None
                continue
            if t == r.call_begin and in_section:
                after, next_start = TOOL_CALL, pos
                segments = []
            elif t == r.calls_begin and not in_section and kind == TEXT:
                after, next_start, in_section = TEXT, pos + 1, True
            elif t == r.calls_end and in_section:
                after, next_start, in_section = TEXT, pos + 1, False
            elif t == self._think_id and kind == TEXT and not in_section:
                after, next_start = THINKING, pos
            elif t == self._think_end_id and kind == THINKING:
                after, next_start = TEXT, pos + 1
            elif t == r.eos and kind == TEXT and not in_section:
                after, next_start = TEXT, pos
                stop_id = t
            else:
                return None
            if text:
                parts.append(ThinkingPart(text) if kind == THINKING else TextPart(text))
                spans.append((start, pos + 1 if t == self._think_end_id else pos))
            if stop_id is not None:
                break
            kind, start, explicit, prefix = after, next_start, after == THINKING, ""
        if stop_id is None:  # cut off: what is open is incomplete
            text = texts[j + 1] if j >= 0 else first
            if prefix:
                text = without_prefix(text, prefix)
            end = runs.count
            if kind == TOOL_CALL:
                parts.append(self._build([*segments, text], True))
                spans.append((start, end))
            elif text or explicit:
                cut = ThinkingPart if kind == THINKING else TextPart
                parts.append(cut(text, None, True))
                spans.append((start, end))
        return self._one_shot_result(runs, parts, spans, None if stop_id is None else j)

    def _on_think_token(self, token_id: int, pos: int) -> None:
        self._unexpected(token_id, pos)

    def _on_end(self, pos: int, stopped: bool) -> None:
        self._drain()
        asm = self.asm
        kind = asm.kind
        if stopped:
            if kind == THINKING:
                self._issue(pos, "the message ended inside an open think block")
            elif kind == TOOL_CALL:
                self._issue(pos, f"the message ended inside a tool call (no {CALL_END})")
            elif self._in_section:
                self._issue(pos, f"the message ended inside a tool-call section (no {CALLS_END})")
        asm.close(pos, incomplete=not stopped or kind == TOOL_CALL, build=self._build)


class _V31Parser(_DeepSeekParser):
    """DeepSeek-V3.1: ``<think>``/``</think>`` are tokens; in thinking mode the completion
    starts inside the reasoning."""

    def __init__(self, r: DeepSeekV31Renderer, events: bool, *, thinking: bool) -> None:
        super().__init__(
            r,
            events,
            extra=(r.think, r.think_end),
            build=_v31_tool_call,
            call_separator="",
        )
        self._think_id = r.think
        self._think_end_id = r.think_end
        self._thinking = thinking
        if thinking:
            self.asm.open(THINKING, 0, explicit=True)
        else:
            self.asm.open(TEXT, 0)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """See :meth:`_DeepSeekParser._parse_in_order`; the completion may start inside
        the reasoning (thinking mode)."""
        kind = THINKING if self._thinking else TEXT
        return self._parse_in_order(runs, runs.texts[0], kind, 0, "")

    def _on_think_token(self, token_id: int, pos: int) -> None:
        asm = self.asm
        kind = asm.kind
        if token_id == self._think_id:
            if kind == THINKING:
                self._unexpected(token_id, pos)
                return
            if kind == TOOL_CALL:
                self._close_call(pos, f"{THINK} inside a tool call (the call is cut there)")
            else:
                if self._in_section:
                    self._issue(pos, f"{THINK} inside a tool-call section")
                asm.close(pos)
            self._in_section = False
            asm.open(THINKING, pos, explicit=True)
        else:  # </think>
            if kind != THINKING:
                self._unexpected(token_id, pos)
                return
            asm.close(pos + 1)
            asm.open(TEXT, pos + 1)


_START, _THINK_PHASE, _TEXT_PHASE = 0, 1, 2
_THINK_BYTES = THINK.encode()
_THINK_END_BYTES = THINK_END.encode()


class _V3Parser(_DeepSeekParser):
    """DeepSeek-V3: ``<think>`` is text, recognised only at the very start of the
    completion (R1-style reasoning); ``</think>`` is then found by a text-level matcher."""

    def __init__(self, r: DeepSeekV3Renderer, events: bool) -> None:
        super().__init__(
            r,
            events,
            extra=(),
            build=_v3_tool_call,
            call_separator="\n",
            byte_offsets=True,
        )
        self._phase = _START
        self._head = b""
        self._scanner = self._new_scanner()
        self.asm.open(TEXT, 0)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """See :meth:`_DeepSeekParser._parse_in_order`, after a reasoning block that
        begins the completion and closes within its first run (else the general path)."""
        first = runs.texts[0]
        if not first.startswith(THINK):
            return self._parse_in_order(runs, first, TEXT, 0, "")
        end = first.find(THINK_END, len(THINK))
        if end < 0:
            return None  # reasoning still open at a control token or cut off
        after = end + len(THINK_END)
        if "\ufffd" in first[:after]:
            return None  # (byte offsets below count characters as UTF-8)
        # The think part ends with the token holding the marker's last byte; the text
        # region starts there too when that token holds more.
        byte = len(first[:after].encode())
        byte_ends = runs.byte_ends
        last = int(np.searchsorted(byte_ends, byte - 1, side="right"))
        start = last + 1 if int(byte_ends[last]) == byte else last
        thinking = without_prefix(first[len(THINK) : end], "\n").removesuffix("\n")
        head = [(ThinkingPart(thinking), (0, last + 1))] if thinking else []
        return self._parse_in_order(runs, first[after:], TEXT, start, "\n\n", head)

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        phase = self._phase
        if phase == _TEXT_PHASE:
            return True, None
        # In reasoning, text that cannot hold or continue "</think>" skips the scanner.
        return phase == _THINK_PHASE, self._scanner

    def _text_ok(self, data: bytes) -> bool:
        phase = self._phase
        if phase == _TEXT_PHASE:
            return True
        # In reasoning, text that cannot hold or continue "</think>" skips the scanner.
        return phase == _THINK_PHASE and self._scanner.pass_through(data)

    def _on_bytes(self, data: bytes) -> None:
        if self._phase == _TEXT_PHASE:
            self._decode(data)
            return
        if self._phase == _START:
            head = self._head + data
            if not (_THINK_BYTES.startswith(head) or head.startswith(_THINK_BYTES)):
                self._phase = _TEXT_PHASE
                self._head = b""
                self._decode(head)
                return
            if len(head) < len(_THINK_BYTES):
                self._head = head
                return
            self._head = b""
            self._phase = _THINK_PHASE
            self.asm.close(0)
            self.asm.open(THINKING, 0, strip_prefix="\n", holdback="\n", explicit=True)
            self._scanner.push(head)
            self._scanner.next((_THINK_BYTES,))  # consume the opening marker
            data = b""
        scanner = self._scanner
        if data:
            scanner.push(data)
        text, marker = scanner.next((_THINK_END_BYTES,))
        if text:
            self._decode(text)
        if marker is None:
            return
        self._flush_pending()
        end = scanner.offset
        last = self._token_at_byte(end - 1)
        start = last + 1 if self._byte_end(last) == end else last
        self.asm.close(last + 1, strip_suffix="\n")
        self.asm.open(TEXT, start, strip_prefix="\n\n")
        self._phase = _TEXT_PHASE
        rest = scanner.flush()
        if rest:
            self._decode(rest)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self._phase == _THINK_PHASE and token_id in self._call_tokens:
            # A call drafted inside the reasoning is reasoning: a later </think> still counts.
            rest = self._scanner.flush()
            if rest:
                self._decode(rest)
            self._flush_pending()
            self._drafted_call(token_id, pos)
            return
        _DeepSeekParser._on_token(self, token_id, pos)

    def _drain(self) -> None:
        if self._phase == _START:
            head, self._head = self._head, b""
            self._phase = _TEXT_PHASE
            if head:
                self._decode(head)
        elif self._phase == _THINK_PHASE:
            self._phase = _TEXT_PHASE
            rest = self._scanner.flush()
            if rest:
                self._decode(rest)
