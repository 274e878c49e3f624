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
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL
from renderers.core.engine import BatchRuns, StreamParser
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
from renderers.core.scanning import MarkerScanner
from renderers.core.tools import deep_sort
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
_SECTION_BEGIN_TEXT = b"<|tool_call_section_begin|>"
_SECTION_END_TEXT = b"<|tool_call_section_end|>"
_SECTION_BEGIN_STR = _SECTION_BEGIN_TEXT.decode()
_SECTION_END_STR = _SECTION_END_TEXT.decode()

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

    def _calls(self, w: TokenWriter, calls: list[Part], i: int, ids: _CallIds) -> None:
        """One tool-call section holding ``calls`` (sampled text of message ``i``)."""
        w.control(self.section_begin, i, True)
        for part in calls:
            w.control(self.call_begin, i, True)
            if type(part) is ToolCallPart:
                w.text(ids.call(part, i, w.trains(i)), i, True)
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
        w.control(self.section_end, i, True)

    def _body(self, w: TokenWriter, parts: list[Part], i: int, ids: _CallIds) -> None:
        """Assistant parts in order: text, thinking blocks, and runs of calls as sections."""
        ids.new_message()
        pending: list[Part] = []
        for part in parts:
            if type(part) in (ToolCallPart, UnparsedToolCallPart):
                pending.append(part)
                continue
            if pending:
                self._calls(w, pending, i, ids)
                pending = []
            if type(part) is TextPart:
                w.text(part.text, i, True)
            elif type(part) is ThinkingPart and self.think is not None:
                assert self.think_end is not None
                w.control(self.think, i, True)
                w.text(part.text, i, True)
                w.control(self.think_end, i, True)
        if pending:
            self._calls(w, pending, i, ids)

    def _tool_result(self, w: TokenWriter, m: Message, i: int, ids: _CallIds) -> None:
        text = plain_text(m, i, self.name)
        w.text(f"## Return of {ids.result(m, i)}{self._result_newline}{text}", i)

    def _call_ids(self, options: Any) -> _CallIds:
        """The id bookkeeping of one rendering under ``options.call_ids``."""
        return _CallIds(self, numbered=options.call_ids == "numbered")

    def _warn_once(self, situation: str, message: str) -> None:
        """A ``UserWarning`` the first time this renderer meets ``situation``."""
        if situation not in self._warned:
            self._warned.add(situation)
            warnings.warn(message, UserWarning, stacklevel=2)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return _KimiK2Parser(self, events)

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


_KIMI_ID = re.compile(r"functions\.(.+):\d+\Z", re.DOTALL)


class _CallIds:
    """The call ids of one rendering: what each call is written with and what each tool
    result is headed with (see the module docs)."""

    __slots__ = ("count", "in_message", "numbered", "renderer", "unanswered", "written")

    def __init__(self, renderer: _KimiK2Base, *, numbered: bool) -> None:
        self.renderer = renderer
        self.numbered = numbered
        self.count = 0  # calls of the conversation so far
        self.in_message = 0  # calls of the current message so far
        self.written: dict[str, str] = {}  # the caller's id -> the id written (numbered)
        self.unanswered: list[str] = []  # ids written, not yet answered (numbered)

    def new_message(self) -> None:
        self.in_message = 0

    def call(self, part: ToolCallPart, i: int, trained: bool) -> str:
        """The id written for the call ``part`` of message ``i`` (``trained``: a trained
        turn, whose calls must name their function)."""
        per_message = self.renderer._per_message_ids
        if per_message or self.numbered:
            index = self.in_message if per_message else self.count
            call_id = f"functions.{part.name}:{index}"
        else:
            if part.id is None:
                raise ValueError(
                    f"messages[{i}]: {self.renderer.name} writes each tool call's id, which "
                    f"names its function; the call to {part.name!r} has none (give ids, "
                    "or pass call_ids='numbered' to number the calls functions.NAME:IDX)"
                )
            call_id = part.id
            match = _KIMI_ID.match(call_id)
            if match is None or match.group(1) != part.name:
                if trained and tool_name_from_id(call_id) != part.name:
                    raise ValueError(
                        f"messages[{i}]: {self.renderer.name} writes a tool call's id, not its "
                        f"name, and the id {call_id!r} of this trained call to {part.name!r} "
                        "does not name it: the model would learn a call to no function (give "
                        "ids functions.NAME:IDX, or pass call_ids='numbered')"
                    )
                self._foreign(call_id, i)
        self._count(part.id, call_id)
        return call_id

    def unparsed_call(self, part: UnparsedToolCallPart) -> None:
        """An unparsed call (written as sampled, its id inside): counted like a call."""
        self._count(part.id, part.id or "")

    def _count(self, given: str | None, written: str) -> None:
        self.count += 1
        self.in_message += 1
        if self.numbered:
            if given is not None:
                self.written[given] = written
            self.unanswered.append(written)

    def result(self, m: Message, i: int) -> str:
        """The id heading the tool result ``m`` (message ``i``)."""
        given = m.tool_call_id
        if not self.numbered:
            if given is None:
                raise ValueError(
                    f"messages[{i}]: {self.renderer.name} heads a tool result with the id of "
                    "the call it answers; this tool message has no tool_call_id (give it, or "
                    "pass call_ids='numbered' to answer the calls in order)"
                )
            if _KIMI_ID.match(given) is None:
                self._foreign(given, i)
            return given
        if given is None:
            if not self.unanswered:
                raise ValueError(
                    f"messages[{i}]: this tool message has no tool_call_id and every earlier "
                    "tool call is answered (call_ids='numbered' answers calls in order)"
                )
            return self.unanswered.pop(0)
        written = self.written.get(given)
        if written is None:
            raise ValueError(
                f"messages[{i}]: tool_call_id {given!r} names no earlier tool call "
                "(call_ids='numbered' heads a result with the id written for its call)"
            )
        if written in self.unanswered:
            self.unanswered.remove(written)
        return written

    def _foreign(self, call_id: str, i: int) -> None:
        r = self.renderer
        if "foreign ids" in r._warned:  # every render of a history meets its ids again
            return
        r._warn_once(
            "foreign ids",
            f"{r.name}: tool-call ids not of the form functions.NAME:IDX, the form Kimi "
            f"models were trained on (messages[{i}]: {call_id!r}), are written as given, as "
            "the template does; call_ids='numbered' writes functions.NAME:IDX ids",
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


# -- parsing ----------------------------------------------------------------------------

_COLON_INDEX = re.compile(r":\d+\Z")
_UNDERSCORE_INDEX = re.compile(r"_\d+\Z")


def tool_name_from_id(call_id: str) -> str:
    """The function name inside a Kimi call id: ``functions.NAME:IDX`` as the template
    writes it, and the variants models sample (``functions.NAME`` without the index,
    sanitized ``functions_NAME_IDX``, ``NAME:IDX``)."""
    name = call_id.strip()
    if name.startswith("functions_"):
        name = name[len("functions_") :]
        match = _UNDERSCORE_INDEX.search(name)
    else:
        name = name.removeprefix("functions.")
        match = _COLON_INDEX.search(name)
    if match and match.start() > 0:
        name = name[: match.start()]
    return name


def _tool_call_from_body(segments: list[str], incomplete: bool) -> Part:
    call_id = segments[0].strip()
    name = tool_name_from_id(call_id) or None
    raw = _ARGUMENT_MARKER.join(segments[:2]) + "".join(segments[2:])
    if incomplete:
        return UnparsedToolCallPart(
            raw,
            "cut off before <|tool_call_end|>",
            name=name,
            id=call_id or None,
            incomplete=True,
        )
    if len(segments) < 2:
        return UnparsedToolCallPart(
            raw,
            "no <|tool_call_argument_begin|> in the tool call",
            name=name,
            id=call_id or None,
        )
    if name is None:
        return UnparsedToolCallPart(raw, "the tool call has no id / function name")
    arguments = segments[1]
    try:
        json.loads(arguments)
    except ValueError as exc:
        return UnparsedToolCallPart(
            raw, f"arguments are not valid JSON: {exc}", name=name, id=call_id, arguments=arguments
        )
    return ToolCallPart(name, arguments, id=call_id)


_SECTION = "section"  # inside the tool-call section, between calls
_CALL_ID = "call_id"  # after <|tool_call_begin|>
_CALL_ARGS = "call_args"  # after <|tool_call_argument_begin|>


class _KimiK2Parser(StreamParser):
    """Kimi-K2 completions: thinking (K2-Thinking), text, and tool-call sections.

    Structure comes from control tokens; the misspelled section markers are found in the
    text by a :class:`MarkerScanner` (hence ``byte_offsets``).
    """

    def __init__(self, r: _KimiK2Base, events: bool) -> None:
        structural = [
            r.section_begin,
            r.section_end,
            r.call_begin,
            r.argument_begin,
            r.call_end,
            r.im_user,
            r.im_assistant,
            r.im_system,
        ]
        if r.think is not None and r.think_end is not None:
            structural += [r.think, r.think_end]
        super().__init__(
            r.table,
            structural=structural,
            stop_ids=(r.im_end,),
            eos_ids=(r.eos,),
            events=events,
            byte_offsets=True,
        )
        self._r = r
        self._state = TEXT
        self._scanner = self._new_scanner()
        self._section_text_reported = False
        # Where the open text region of the section starts: the position of the issue for
        # text inside the section (the token that holds the text depends on how the ids
        # were chunked, which must not change the result).
        self._section_text_start = 0
        self.asm.open(TEXT, 0)

    # -- text -----------------------------------------------------------------------------

    def _markers(self) -> tuple[bytes, ...]:
        state = self._state
        if state in (TEXT, THINKING):
            return (_SECTION_BEGIN_TEXT,)
        if state == _SECTION:
            return (_SECTION_END_TEXT,)
        return ()

    def _text_ok(self, data: bytes) -> bool:
        return self._scanner.pass_through(data)  # every marker starts with "<"

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        # Text inside the section is reported (_on_text); elsewhere it is written as it
        # comes once it passes the scanner (which counts every byte, so always that one).
        return self._state != _SECTION, self._scanner

    def _on_bytes(self, data: bytes) -> None:
        scanner = self._scanner
        if scanner.pass_through(data):
            self._decode(data)
            return
        scanner.push(data)
        while True:
            markers = self._markers()
            if not markers:
                rest = scanner.flush()
                if rest:
                    self._decode(rest)
                return
            before, marker = scanner.next(markers)
            if before:
                self._decode(before)
            if marker is None:
                return
            self._flush_pending()
            end = scanner.offset
            self._text_marker(marker, end - len(marker), end)

    def _flush_scanner(self) -> None:
        rest = self._scanner.flush()
        if rest:
            self._decode(rest)

    def _on_text(self, text: str) -> None:
        if self._state == _SECTION and not self._section_text_reported and text.strip():
            self._section_text_reported = True
            self._issue(
                self._section_text_start, "text inside the tool-call section (kept as text)"
            )
        self.asm.write(text)

    def _text_marker(self, marker: bytes, start: int, end: int) -> None:
        """A misspelled section marker spanning ordinary-text bytes ``[start, end)``."""
        first = self._token_at_byte(start)
        first_start = self._byte_end(first - 1) if first > 0 else 0
        before = first if first_start >= start else first + 1  # text part ends here
        last = self._token_at_byte(end - 1)
        after = last + 1 if self._byte_end(last) <= end else last  # the next region starts here
        if marker == _SECTION_BEGIN_TEXT:
            self._enter_section(before, after)
        else:
            self._leave_section(before, after)

    # -- structure ------------------------------------------------------------------------

    def _enter_section(self, end: int, start: int) -> None:
        asm = self.asm
        asm.close(end)
        self._state = _SECTION
        self._section_text_reported = False
        self._open_section_text(start)

    def _open_section_text(self, start: int) -> None:
        """Open the text region between calls of the section (text there is an issue)."""
        self._section_text_start = start
        self.asm.open(TEXT, start)

    def _leave_section(self, end: int, start: int) -> None:
        asm = self.asm
        asm.close(end)
        self._state = TEXT
        asm.open(TEXT, start)

    def _cut_call(self, pos: int, why: str) -> None:
        self._issue(pos, why)
        self.asm.close(pos, incomplete=True, build=_tool_call_from_body)

    def _on_token(self, token_id: int, pos: int) -> None:
        self._flush_scanner()
        r = self._r
        asm = self.asm
        state = self._state
        in_call = state in (_CALL_ID, _CALL_ARGS)
        if token_id == r.think:
            if state == THINKING:
                self._keep_as_text(
                    token_id, pos, "<think> inside an open think block (kept as text)"
                )
                return
            if in_call:
                self._cut_call(pos, "<think> inside a tool call (the call is cut there)")
            else:
                if state == _SECTION:
                    self._issue(pos, "<think> inside the tool-call section (section ended)")
                asm.close(pos)
            self._state = THINKING
            asm.open(THINKING, pos, explicit=True)
        elif token_id == r.think_end:
            if state != THINKING:
                self._keep_as_text(
                    token_id, pos, "</think> without an open think block (kept as text)"
                )
                return
            asm.close(pos + 1)
            self._state = TEXT
            asm.open(TEXT, pos + 1)
        elif token_id == r.section_begin:
            if in_call:
                self._cut_call(pos, "tool-call section begin inside a tool call")
                self._state = _SECTION
                self._open_section_text(pos + 1)
            elif state == _SECTION:
                self._keep_as_text(
                    token_id, pos, "tool-call section begin inside the section (kept as text)"
                )
            else:  # from text, or straight from reasoning without </think>
                self._enter_section(pos, pos + 1)
        elif token_id == r.call_begin:
            if in_call:
                self._cut_call(pos, "<|tool_call_begin|> inside a tool call (the call is cut)")
            else:
                if state != _SECTION:
                    self._issue(pos, "<|tool_call_begin|> outside a tool-call section")
                asm.close(pos)
            self._state = _CALL_ID
            asm.open(TOOL_CALL, pos)
        elif token_id == r.argument_begin:
            if state != _CALL_ID:
                self._keep_as_text(
                    token_id,
                    pos,
                    "<|tool_call_argument_begin|> outside a tool-call id (kept as text)",
                )
                return
            asm.next_segment(_ARGUMENT_MARKER)
            self._state = _CALL_ARGS
        elif token_id == r.call_end:
            if not in_call:
                self._keep_as_text(
                    token_id, pos, "<|tool_call_end|> without an open tool call (kept as text)"
                )
                return
            asm.close(pos + 1, build=_tool_call_from_body)
            self._state = _SECTION
            self._open_section_text(pos + 1)
        elif token_id == r.section_end:
            if in_call:
                self._cut_call(pos, "tool-call section ended inside a tool call")
                self._state = TEXT
                asm.open(TEXT, pos + 1)
            elif state != _SECTION:
                self._keep_as_text(
                    token_id, pos, "tool-call section end without a section (kept as text)"
                )
            else:
                self._leave_section(pos, pos + 1)
        else:  # <|im_user|>, <|im_assistant|>, <|im_system|>: the model began another turn
            self._issue(pos, "a new turn began before <|im_end|>: the message ends here")
            self._end_message(pos)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse of a completion whose structure is in order (think blocks,
        text, a section of whole calls with nothing but whitespace between them, then the
        stop token): the parts :meth:`_on_token` and the assembler make, each region's
        text being one run. Anything else (an issue to report, a section marker spelled
        as text) takes the general path."""
        r = self._r
        texts = runs.texts
        cuts = runs.cuts
        if any(_SECTION_BEGIN_STR in t or _SECTION_END_STR in t for t in texts):
            return None
        ends = self._stop_ids | self._eos_ids
        parts: list[Part | None] = []
        spans: list[tuple[int, int]] = []
        state, start = self._state, 0  # TEXT, or THINKING where the prompt opened it
        call_id = ""  # the text of the open call's id
        stop_id = None
        j = -1
        for j, t in enumerate(runs.tokens):
            pos = cuts[j]
            text = texts[j]
            if state == _CALL_ID and t == r.argument_begin:
                call_id, state = text, _CALL_ARGS
                continue
            if state in (_CALL_ID, _CALL_ARGS):
                if t != r.call_end:
                    return None
                segments = [text] if state == _CALL_ID else [call_id, text]
                parts.append(_tool_call_from_body(segments, False))
                spans.append((start, pos + 1))
                state, start = _SECTION, pos + 1
                continue
            if state == _SECTION and text.strip():
                return None  # text inside the section: reported
            closes = (
                (t == r.section_begin and state != _SECTION)
                or (t == r.call_begin and state == _SECTION)
                or (t == r.section_end and state == _SECTION)
                or (t == r.think and state == TEXT)
                or (t == r.think_end and state == THINKING)
                or (t in ends and state == TEXT)
            )
            if not closes:
                return None
            if text:
                parts.append(ThinkingPart(text) if state == THINKING else TextPart(text))
                spans.append((start, pos + 1 if t == r.think_end else pos))
            if t == r.section_begin:
                state, start = _SECTION, pos + 1
            elif t == r.call_begin:
                state, start = _CALL_ID, pos
            elif t == r.section_end or t == r.think_end:
                state, start = TEXT, pos + 1
            elif t == r.think:
                state, start = THINKING, pos
            else:
                stop_id = t
                break
        if stop_id is None:  # cut off: what is open is incomplete
            text = texts[j + 1]
            end = runs.count
            if state in (_CALL_ID, _CALL_ARGS):
                segments = [text] if state == _CALL_ID else [call_id, text]
                parts.append(_tool_call_from_body(segments, True))
                spans.append((start, end))
            elif state == _SECTION and text.strip():
                return None
            elif text or state == THINKING:
                cut = ThinkingPart if state == THINKING else TextPart
                parts.append(cut(text, None, True))
                spans.append((start, end))
        return self._one_shot_result(runs, parts, spans, None if stop_id is None else j)

    def _on_end(self, pos: int, stopped: bool) -> None:
        self._flush_scanner()
        state = self._state
        if stopped:
            if state == THINKING:
                self._issue(pos, "the message ended inside an open think block")
            elif state in (_CALL_ID, _CALL_ARGS):
                self._issue(pos, "the message ended inside a tool call (no <|tool_call_end|>)")
            elif state == _SECTION:
                self._issue(pos, "the message ended inside the tool-call section")
        self.asm.close(pos, incomplete=not stopped, build=_tool_call_from_body)
