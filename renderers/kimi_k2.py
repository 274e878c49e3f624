"""Kimi-K2 (``moonshotai/Kimi-K2-Instruct``, ``moonshotai/Kimi-K2-Thinking``): role-tagged
turns, tool calls in sections, and (K2-Thinking) ``<think>`` reasoning.

The format is Moonshot's templates: K2-Thinking's ``chat_template.jinja`` (revision
6126819) and, for K2-Instruct, the template embedded in its ``tokenizer_config.json``
(July 2025; no later official K2-Instruct template was found). K2-Thinking's, with no
newlines between turns::

    <|im_system|>tool_declare<|im_middle|>{tools as compact JSON, keys deep-sorted}<|im_end|>
    <|im_system|>system<|im_middle|>{system or the default}<|im_end|>
    <|im_user|>{name or "user"}<|im_middle|>{text}<|im_end|>
    <|im_assistant|>{name or "assistant"}<|im_middle|><think>{reasoning}</think>{text}
      <|tool_calls_section_begin|>
        <|tool_call_begin|>{call id}<|tool_call_argument_begin|>{json}<|tool_call_end|>
        ...
      <|tool_calls_section_end|><|im_end|>
    <|im_system|>{name or "tool"}<|im_middle|>## Return of {tool_call_id}\\n{result}<|im_end|>

Every marker above is a single control token. The generation prompt is
``<|im_assistant|>assistant<|im_middle|>``; sampling stops at ``<|im_end|>`` and ``[EOS]``
is end-of-sequence.

- **Default system prompt** ``You are Kimi, an AI assistant created by Moonshot AI.``
  when the first message is not a system message (an empty conversation too).
- **Tools** are declared as compact JSON (``tojson(separators=(',', ':'))``, non-ASCII
  kept) after Moonshot's tokenizer code deep-sorted the keys of every dict in ``tools``.
- **Headers** use the message's ``name`` when it has one (a tool result named
  ``get_weather`` gets ``<|im_system|>get_weather<|im_middle|>``).
- **Call ids** are the caller's: a call is written with its ``id``, a tool result is
  headed with its ``tool_call_id``. The id is the only place a call names its function,
  and Kimi models sample ``functions.NAME:IDX``, IDX counting the calls of the whole
  conversation (vLLM numbers the calls it parses so: ``make_tool_call_id`` and
  ``get_history_tool_calls_cnt`` in ``vllm/entrypoints/chat_utils.py``, commit bd5ec6d).
  Ids of another form (``call_abc``) are written as given, as the template does, but the
  prompt is then off-distribution: a renderer says so once, in a ``UserWarning``. A
  *trained* call whose id does not name its function is a ``ValueError`` naming the
  message: the model would learn a call to no function. ``call_ids="numbered"`` writes
  every call ``functions.NAME:IDX`` and heads every result with the id written for the
  call it answers (the latest call with the result's ``tool_call_id``; without one, the
  oldest call not yet answered; an id that names no earlier call is a ``ValueError``). By
  default a call without an id or a result without ``tool_call_id`` is a ``ValueError``
  naming the message (the template writes an empty id: the call would name no function).
- **Reasoning**: ``<think>`` and ``</think>`` are control tokens 163606/163607. Every
  assistant turn up to and including the conversation's *last* assistant message without
  tool calls is history, written ``<think></think>{text}``; later turns keep theirs,
  ``<think>{reasoning}</think>{text}``. A *trained* turn whose reasoning the template
  drops is a ``ValueError`` naming the ``reasoning`` option (``"drop"`` trains it
  without); untrained turns render as the template does. In a supervised example that
  ends with a plain answer, that answer is the last one, so the template drops its
  reasoning and that of every earlier turn, which its generation prompt showed:
  ``keep_last_reasoning=True`` (off by default) renders the last assistant message and
  everything before it as its generation prompt followed by the message as sampled
  (reasoning kept). Earlier turns keep the template's rendering of the whole
  conversation, which can differ from the prompts they were sampled after: for
  ``train_on="all_assistant"`` on agentic transcripts, train from the sampled ids.

K2-Instruct's template writes the same turns, except:

- the default system prompt is ``You are a helpful assistant``, written before a first
  message that is not a system message (nothing for an empty conversation);
- headers are always the role (``tool`` for a tool result), never a ``name``;
- tools are declared with ``tojson``'s default separators (``", "``, ``": "``);
- it has no reasoning: the template reads none, and in K2-Instruct ``<think>`` and
  ``</think>`` are three ordinary tokens each. Reasoning of untrained turns is dropped; a
  *trained* turn with reasoning is a ``ValueError`` naming the ``reasoning`` option
  rather than silently lost training data (``reasoning="drop"`` leaves it out);
- calls are written ``functions.NAME:IDX``, IDX counting the calls of their message,
  whatever the caller's ids; a tool result is headed ``## Return of {tool_call_id}``
  followed by a literal backslash-n (``\\\\n``: the template's JSON escaping is off by
  one level). A ``tool_call_id`` not of the form ``functions.NAME:IDX`` gets the warning;
  ``call_ids="numbered"`` heads each result with the id written for the call it answers.

Two of its behaviours are not reproduced: it JSON-quotes string arguments a second time
(arguments are written as given here, the JSON the model samples), and it writes the
list-of-parts content of a tool result or of an assistant message with tool calls as a
Python list repr (its text parts joined here).

llama.cpp's hand-edited copies of both templates (``models/templates/Kimi-K2-*.jinja``
after its PR #17376) are another format: they number calls with a conversation-wide
counter whatever the caller's ids (at commit f519483, only calls without one), head
results from a queue of unanswered ids, split the history at the *first* plain answer and
declare tools with default separators. They are not rendered here;
:class:`~renderers.template.TemplateRenderer` renders any template.

Divergences from the templates, on purpose:

- tool-call arguments must be JSON text (a ``ValueError`` names the message otherwise; the
  templates write any string verbatim);
- a call without an id, a result without ``tool_call_id`` and a trained call whose id
  does not name its function are errors (above);
- a ``None`` tool result is an empty one (the template ``tokenizer_config.json`` embeds
  writes the text ``None`` when transformers 5.0 to 5.22 pass it through); ``content:
  None`` and ``tool_calls: []`` render as the templates render them;
- list-of-parts content renders its text parts joined, as the templates do; thinking parts
  of an assistant message are its reasoning (the templates only read
  ``reasoning_content``: a thinking item of list content has no ``text`` and is written as
  nothing);
- message text that spells a control token (``<|im_end|>``, ``<think>``...) is encoded as
  ordinary text, never as the control token;
- assistant parts in a non-canonical order (``[text, tool call, text]``,
  ``[thinking, text, thinking]``) are written in that order with the same markers, so
  parsed messages render back.

Prefill: K2-Instruct's starts the answer after the generation prompt; K2-Thinking's
starts the reasoning, ``<think>{prefill}`` (the model opens it first; the official
template writes a final plain answer's reasoning as history, ``<think></think>``, so its
``continue_final_message`` renders a tool-calling final message's reasoning only).

Parsing (both models): parts in sampled order. The model may enter the tool-call section
straight from reasoning without ``</think>`` (the section ends the thinking part); the
section may be opened by the misspelled text ``<|tool_call_section_begin|>`` (not a
token: found at the text level); call ids without ``:IDX`` or sanitized
(``functions_get_weather_0``) still give a call whose name is derived from the id. A
call's id is kept as sampled (K2-Thinking writes it back as given); text after the
section is kept. A call that is cut off or whose arguments are not JSON
becomes an :class:`UnparsedToolCallPart`. K2-Instruct is not a reasoning model:
``<think>`` in its output is ordinary text.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

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
    id_json_call,
    section_parser,
    tool_name_from_id,
    write_sections,
)
from renderers.core.tools import deep_sort
from renderers.core.writer import TokenWriter
from renderers.kimi_k2_ids import CallIdBook
from renderers.rendering import Renderer, checked_arguments, plain_text, section_closing
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = [
    "CallIds",
    "KimiK2Options",
    "KimiK2Renderer",
    "KimiK2ThinkingOptions",
    "KimiK2ThinkingRenderer",
    "tool_name_from_id",
]

DEFAULT_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."
INSTRUCT_DEFAULT_SYSTEM = "You are a helpful assistant"
_ARGUMENT_MARKER = "<|tool_call_argument_begin|>"
# Misspellings of the section markers that models have sampled; not tokens, so text.
_SECTION_TEXT = ("<|tool_call_section_begin|>", "<|tool_call_section_end|>")

CallIds = Literal["given", "numbered"]
"""How call ids are written: ``"given"`` as the caller gives them (the templates),
``"numbered"`` as ``functions.NAME:IDX`` (what Kimi models sample), results following."""


@dataclass(frozen=True, slots=True)
class KimiK2Options:
    """Options of the K2-Instruct format."""

    call_ids: CallIds = "given"
    """The template writes calls ``functions.NAME:IDX`` (IDX counting the message's calls)
    and heads a tool result with its ``tool_call_id``: ``"given"`` (the template) writes
    that id (required), ``"numbered"`` the id written for the call the result answers."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn, which K2-Instruct cannot write:
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped as the template does."""


@dataclass(frozen=True, slots=True)
class KimiK2ThinkingOptions:
    """Options of the K2-Thinking format."""

    keep_last_reasoning: bool = False
    """False (template behaviour). True (for training data): the last assistant message
    renders exactly as the model sampled it, after the generation prompt of the messages
    before it, reasoning kept (see the module docs: the template drops the reasoning of a
    final plain answer and of every turn before it). Generation prompts are not affected."""
    call_ids: CallIds = "given"
    """``"given"`` (the template): calls and tool results carry the caller's ids
    (required; a warning, once, when not of the form ``functions.NAME:IDX``; a trained
    call's id must name its function).
    ``"numbered"``: calls are written ``functions.NAME:IDX``, IDX counting the
    conversation's calls (the ids Kimi models sample), and each result with the id of the
    call it answers."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the template drops (turns up to
    the conversation's last plain answer): ``"error"`` raises ``ValueError``, ``"drop"``
    leaves it out. Reasoning of untrained turns is rendered as the template does."""


def _json_declaration(tools: list[Any], separators: tuple[str, str]) -> str:
    try:
        return json.dumps(tools, ensure_ascii=False, separators=separators)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"tools: cannot be declared as JSON ({exc})") from None


class _KimiK2Base(Renderer):
    """What both Kimi-K2 formats share: turns, tools, tool calls, the parser."""

    roles = ("system", "user", "assistant", "tool")
    message_markers = MessageMarkers(
        starts={"<|im_system|>": "", "<|im_user|>": "", "<|im_assistant|>": ""}
    )
    _has_thinking = False
    _separators = (",", ":")
    """``tojson``'s separators in the tool declaration."""
    _result_newline = "\n"
    """What follows ``## Return of {id}`` in a tool result."""
    _per_message_ids = False
    """True: calls are written ``functions.NAME:IDX``, IDX counting the message's calls,
    whatever the caller's ids (K2-Instruct's template)."""

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.im_system = control("<|im_system|>")
        self.im_user = control("<|im_user|>")
        self.im_assistant = control("<|im_assistant|>")
        self.im_middle = control("<|im_middle|>")
        self.im_end = control("<|im_end|>")
        self.eos = control("[EOS]")
        self.section_begin = control("<|tool_calls_section_begin|>")
        self.section_end = control("<|tool_calls_section_end|>")
        self.call_begin = control("<|tool_call_begin|>")
        self.argument_begin = control(_ARGUMENT_MARKER)
        self.call_end = control("<|tool_call_end|>")
        self._declarations: dict[str, tuple[int, ...]] = {}
        self._warned: set[str] = set()
        self.think: int | None = None
        self.think_end: int | None = None
        if self._has_thinking:
            self.think = control("<think>")
            self.think_end = control("</think>")

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.im_end, self.eos)

    # -- rendering ----------------------------------------------------------------------

    def _tool_declaration(
        self, w: TokenWriter, tools: list[Mapping[str, Any]] | None, options: Any
    ) -> None:
        if not tools:
            return
        w.control(self.im_system)
        w.text("tool_declare")
        w.control(self.im_middle)
        # The declaration sits between two control tokens, so its ids can be encoded on
        # their own and cached: the same tools are declared in every rollout of a run.
        declaration = self._declaration(deep_sort(tools), options)
        ids = self._declarations.get(declaration)
        if ids is None:
            ids = tuple(self.table.encode(declaration))
            if len(self._declarations) >= 32:
                self._declarations.clear()
            self._declarations[declaration] = ids
        w.encoded(ids)
        w.control(self.im_end)

    def _declaration(self, tools: list[Any], options: Any) -> str:
        """The text declaring ``tools`` (keys deep-sorted): JSON as ``tojson`` writes it."""
        return _json_declaration(tools, self._separators)

    def _default_system(self, w: TokenWriter, text: str) -> None:
        w.control(self.im_system)
        w.text("system")
        w.control(self.im_middle)
        w.text(text)
        w.control(self.im_end)

    def _header(self, w: TokenWriter, m: Message, i: int, use_name: bool) -> None:
        if m.role == "user":
            w.control(self.im_user, i)
        elif m.role == "assistant":
            w.control(self.im_assistant, i)
        else:
            w.control(self.im_system, i)
        w.text((m.name if use_name and m.name else m.role), i)
        w.control(self.im_middle, i)

    def _generation_prompt(self, w: TokenWriter) -> None:
        w.control(self.im_assistant)
        w.text("assistant")
        w.control(self.im_middle)

    def _call(self, w: TokenWriter, i: int, part: Part, ids: CallIdBook) -> None:
        """One call of message ``i`` (sampled): its id, then its arguments; an unparsed
        call's raw text, its argument marker written as the token."""
        w.control(self.call_begin, i, True)
        if type(part) is ToolCallPart:
            w.text(self._call_id(part, i, w.trains(i), ids), i, True)
            w.control(self.argument_begin, i, True)
            w.text(checked_arguments(part, i), i, True)
        else:
            assert type(part) is UnparsedToolCallPart
            ids.unparsed_call(part)
            head, marker, rest = part.raw.partition(_ARGUMENT_MARKER)
            w.text(head, i, True)
            if marker:
                w.control(self.argument_begin, i, True)
                w.text(rest, i, True)
        w.control(self.call_end, i, True)

    def _call_id(self, part: ToolCallPart, i: int, trained: bool, ids: CallIdBook) -> str:
        """The id a call is written with (see the module docs)."""
        return ids.call(part, i, trained)

    def _thinking(self, w: TokenWriter, i: int, text: str) -> None:
        if self.think is not None and self.think_end is not None:
            w.control(self.think, i, True)
            w.text(text, i, True)
            w.control(self.think_end, i, True)

    def _body(self, w: TokenWriter, parts: list[Part], i: int, ids: CallIdBook) -> None:
        """Assistant parts in order: text, thinking blocks, and runs of calls as sections."""
        ids.new_message()

        def call(w: TokenWriter, i: int, part: Part) -> None:
            self._call(w, i, part, ids)

        write_sections(w, i, parts, (self.section_begin, self.section_end), call, self._thinking)

    def _tool_result(self, w: TokenWriter, m: Message, i: int, ids: CallIdBook) -> None:
        text = plain_text(m, i, self.name)
        w.text(f"## Return of {ids.result(m, i)}{self._result_newline}{text}", i)

    def _call_ids(self, options: Any) -> CallIdBook:
        """The id bookkeeping of one rendering under ``options.call_ids``."""
        return CallIdBook(self, numbered=options.call_ids == "numbered")

    def _warn_once(self, situation: str, message: str) -> None:
        """A ``UserWarning`` the first time this renderer meets ``situation``."""
        if situation not in self._warned:
            self._warned.add(situation)
            warnings.warn(message, UserWarning, stacklevel=2)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return section_parser(self.grammar, self.table, events)

    @cached_property
    def grammar(self) -> SectionGrammar:
        """The parse side: a call's id, then its arguments; a call or section begin ends
        open reasoning; text between calls is reported; a new turn ends the message."""
        think = (
            None if self.think is None or self.think_end is None else (self.think, self.think_end)
        )
        return SectionGrammar(
            stop=(self.im_end,),
            eos=(self.eos,),
            ends_message=(self.im_user, self.im_assistant, self.im_system),
            section=(self.section_begin, self.section_end),
            call=(self.call_begin, self.call_end),
            separator=self.argument_begin,
            build_call=id_json_call(_ARGUMENT_MARKER, "<|tool_call_end|>"),
            think=think,
            drafted_calls=False,
            one_separator=True,
            report_section_text=True,
            text_sections=_SECTION_TEXT,
        )

    # -- multi-turn rollouts ------------------------------------------------------------

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        return 0, section_closing(
            result,
            completion_ids,
            think_end=[self.think_end] if self.think_end is not None else [],
            call_end=self.call_end,
            section_begin=self.section_begin,
            section_end=self.section_end,
            stop=self.im_end,
        )


class KimiK2Renderer(_KimiK2Base):
    """Renderer and parser for Kimi-K2-Instruct (no reasoning)."""

    name = "kimi_k2"
    default_model = "moonshotai/Kimi-K2-Instruct"
    Options = KimiK2Options
    _separators = (", ", ": ")
    _result_newline = "\\n"  # a literal backslash-n: the template's escaping
    _per_message_ids = True

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: KimiK2Options,
        add_generation_prompt: bool,
    ) -> None:
        ids = self._call_ids(options)
        if options.reasoning == "error":
            _reject_reasoning(messages, w)
        self._tool_declaration(w, tools, options)
        if messages and messages[0].role != "system":
            self._default_system(w, INSTRUCT_DEFAULT_SYSTEM)
        for i, m in enumerate(messages):
            self._header(w, m, i, use_name=False)
            if m.role == "assistant":
                self._body(w, _assistant_parts(m), i, ids)
                w.control(self.im_end, i, True)
                continue
            if m.role == "tool":
                self._tool_result(w, m, i, ids)
            else:
                w.text(plain_text(m, i, self.name), i)
            w.control(self.im_end, i)
        if add_generation_prompt:
            self._generation_prompt(w)

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "tool-call ids are renumbered per message; "
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        )


class KimiK2ThinkingRenderer(_KimiK2Base):
    """Renderer and parser for Kimi-K2-Thinking (``<think>`` reasoning)."""

    name = "kimi_k2_thinking"
    default_model = "moonshotai/Kimi-K2-Thinking"
    Options = KimiK2ThinkingOptions
    _has_thinking = True

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: KimiK2ThinkingOptions,
        add_generation_prompt: bool,
    ) -> None:
        ids = self._call_ids(options)
        # The template's split: the LAST assistant message without tool calls (its loop
        # runs backwards and breaks at the first it finds). It and every message before it
        # are history, written with an empty think block.
        considered = messages
        if options.keep_last_reasoning and not add_generation_prompt:
            last = max((k for k, m in enumerate(messages) if m.role == "assistant"), default=0)
            considered = messages[:last]
        split = max(
            (k for k, m in enumerate(considered) if m.role == "assistant" and not _has_calls(m)),
            default=-1,
        )
        self._tool_declaration(w, tools, options)
        if not messages or messages[0].role != "system":
            self._default_system(w, DEFAULT_SYSTEM)
        for i, m in enumerate(messages):
            self._header(w, m, i, use_name=True)
            if m.role == "assistant":
                parts = _assistant_parts(m)
                if i <= split:
                    if w.trains(i) and options.reasoning == "error":
                        _reject_trained_reasoning(parts, i)
                    parts = [p for p in parts if type(p) is not ThinkingPart]
                if not parts or type(parts[0]) is not ThinkingPart:
                    assert self.think is not None and self.think_end is not None
                    w.control(self.think, i, True)
                    w.control(self.think_end, i, True)
                self._body(w, parts, i, ids)
                w.control(self.im_end, i, True)
                continue
            if m.role == "tool":
                self._tool_result(w, m, i, ids)
            else:
                w.text(plain_text(m, i, self.name), i)
            w.control(self.im_end, i)
        if add_generation_prompt:
            self._generation_prompt(w)

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "reasoning of turns up to the last answer without tool calls is dropped",
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if self.options.call_ids == "numbered":
            reasons.insert(1, "tool-call ids are renumbered across the conversation")
        return ExtensionProperty(False, "; ".join(reasons))

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        if options.get("call_ids", self.options.call_ids) != "numbered":
            return [Message("user", "")]  # the caller's ids: nothing is counted
        # Numbered ids count the calls of the conversation: the context holds as many
        # answered calls as the prompt shows.
        calls = sum(1 for t in prompt_ids if t == self.call_begin)
        if not calls:
            return [Message("user", "")]
        assistant = Message("assistant", [ToolCallPart("f", "{}") for _ in range(calls)])
        results = [Message("tool", "") for _ in range(calls)]
        return [Message("user", ""), assistant, *results]

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        """A prefill starts the reasoning: ``<think>{prefill}`` after the prompt."""
        assert self.think is not None
        w.control(self.think)
        w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        assert self.think is not None
        return [self.think, *self.table.encode(prefill)]


def _reject_trained_reasoning(parts: list[Part], i: int) -> None:
    """The template writes ``<think></think>`` for every turn up to the conversation's last
    plain answer; in a supervised example that silently drops the reasoning being trained
    on."""
    if any(type(p) is ThinkingPart and p.text for p in parts):
        raise reasoning_error(
            "kimi_k2_thinking",
            i,
            "its template writes <think></think> for every turn up to the conversation's "
            "last plain answer; keep_last_reasoning=True keeps the last turn's",
        )


def _reject_reasoning(messages: list[Message], w: TokenWriter) -> None:
    """Kimi-K2-Instruct is not a reasoning model: its template drops reasoning, and silently
    dropping it from a trained turn would corrupt training data."""
    for i, m in enumerate(messages):
        if m.role != "assistant" or not w.trains(i):
            continue
        if any(type(p) is ThinkingPart and p.text for p in m.parts):
            raise reasoning_error(
                "kimi_k2",
                i,
                "Kimi-K2-Instruct has no reasoning and its template drops it; "
                "kimi_k2_thinking writes it",
            )


def _has_calls(m: Message) -> bool:
    return any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in m.parts)


def _assistant_parts(m: Message) -> list[Part]:
    """The parts to write; empty thinking and text parts write nothing."""
    return [
        p for p in m.parts if not ((type(p) is TextPart or type(p) is ThinkingPart) and not p.text)
    ]
