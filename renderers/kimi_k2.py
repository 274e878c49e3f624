"""Kimi-K2 (``moonshotai/Kimi-K2-Instruct``, ``moonshotai/Kimi-K2-Thinking``): role-tagged
turns, ``functions.NAME:IDX`` tool calls, and (K2-Thinking) ``<think>`` reasoning.

What the official templates (``chat_template.jinja``) render, with no newlines between
turns::

    <|im_system|>tool_declare<|im_middle|>{tools as JSON, keys deep-sorted}<|im_end|>
    <|im_system|>system<|im_middle|>{system or the default}<|im_end|>
    <|im_user|>{name or "user"}<|im_middle|>{text}<|im_end|>
    <|im_assistant|>{name or "assistant"}<|im_middle|>{think block}{text}
      <|tool_calls_section_begin|>
        <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}<|tool_call_end|>
        ...
      <|tool_calls_section_end|><|im_end|>
    <|im_system|>{name or "tool"}<|im_middle|>## Return of functions.NAME:IDX\\n{result}<|im_end|>

Every marker above is a single control token. The generation prompt is
``<|im_assistant|>assistant<|im_middle|>``; sampling stops at ``<|im_end|>`` and ``[EOS]``
is end-of-sequence.

- **Default system prompt**: when the first message is not a system message the template
  inserts ``You are Kimi, an AI assistant created by Moonshot AI.`` (K2-Instruct writes a
  ``\\n`` after its ``<|im_end|>``, K2-Thinking does not; K2-Thinking inserts it even for an
  empty conversation).
- **Tools** are declared as JSON (``tojson``: ``ensure_ascii=False``, default separators)
  after upstream's tokenizer deep-sorted the keys of every dict in ``tools``.
- **Tool-call ids** are ``functions.NAME:IDX`` where IDX counts the calls of the whole
  conversation; the caller's own call ids are ignored. Each tool result takes the oldest
  id not yet answered (``functions.{name or "unknown"}:{count}`` when none is left).
  Arguments given as a string are written verbatim, a dict as ``tojson``.
- **Headers** use the message's ``name`` when it has one (a tool result named
  ``get_weather`` gets ``<|im_system|>get_weather<|im_middle|>``).
- **Reasoning** (K2-Thinking only; K2-Instruct's templates drop it, and so does its
  renderer for turns that are not trained; a *trained* K2-Instruct turn with reasoning is
  a ``ValueError`` naming the ``reasoning`` option rather than silently lost training
  data, and ``reasoning="drop"`` leaves it out on purpose): ``<think>`` and ``</think>`` are
  control tokens 163606/163607 (in K2-Instruct they are three ordinary tokens each).
  Assistant turns up to and including the conversation's *first* assistant message
  without tool calls are written ``<think></think>{text}``; later ones
  ``<think>{reasoning}</think>{text}``. (The template's comment says it looks for the
  *last* such message, but its loop runs backwards without a break and so finds the
  first; this renderer reproduces what the template does.) The same rule holds there: a
  trained turn whose reasoning the template drops is a ``ValueError`` unless
  ``reasoning="drop"`` (or ``keep_last_reasoning`` for the last turn, below).

K2-Instruct's ``tokenizer_config.json`` embeds an older (July 2025) template, selectable
with ``template="initial"``: default system ``You are a helpful assistant`` (no ``\\n``),
headers always the role, IDX counted per message, results ``## Return of
{tool_call_id}`` followed by a literal backslash-n (``\\\\n``: the template's JSON escaping
is off by one level). Two of its behaviours are not reproduced: it JSON-quotes string
arguments a second time (arguments are written as given here), and it writes the
list-of-parts content of a tool result or of an assistant message with tool calls as a
Python list repr (its text parts joined here).

Divergences from the templates, on purpose:

- tool-call arguments must be JSON text (a ``ValueError`` names the message otherwise; the
  templates write any string verbatim), and K2-Instruct rejects reasoning (see above);
- a ``None`` tool result is an empty one (the template ``tokenizer_config.json`` embeds
  writes the text ``None`` when transformers 5.0 to 5.22 pass it through); ``content:
  None`` and ``tool_calls: []`` render as the templates render them;
- list-of-parts content renders its text parts joined, as the templates do; thinking parts
  of an assistant message are its reasoning (the templates only read
  ``reasoning_content``; a thinking item of list content would be written as answer text);
- message text that spells a control token (``<|im_end|>``, ``<think>``...) is encoded as
  ordinary text, never as the control token;
- assistant parts in a non-canonical order (``[text, tool call, text]``,
  ``[thinking, text, thinking]``) are written in that order with the same markers, so
  parsed messages render back;
- ``keep_last_reasoning=True`` (K2-Thinking, off by default) fixes a training defect of
  the template: when the conversation's last assistant answer is its first plain answer,
  the template renders it ``<think></think>`` (dropping the reasoning being trained on)
  and drops the reasoning of the tool-calling turns before it, which the generation
  prompt had shown. With the option, the last assistant message and everything before it
  render as its generation prompt followed by the message as sampled (reasoning kept);
  the empty think blocks are decided on the messages before it. Earlier turns keep the
  template's rendering of the whole conversation, which can differ from the prompts they
  were sampled after: for ``train_on="all_assistant"`` on agentic transcripts, train
  from the sampled ids.

Prefill: K2-Instruct's starts the answer after the generation prompt; K2-Thinking's
starts the reasoning, ``<think>{prefill}`` (the model opens it first; the official
template writes a final plain answer's reasoning as history, ``<think></think>``, so its
``continue_final_message`` renders a tool-calling final message's reasoning only).

Parsing (both models): parts in sampled order. The model may enter the tool-call section
straight from reasoning without ``</think>`` (the section ends the thinking part); the
section may be opened by the misspelled text ``<|tool_call_section_begin|>`` (not a
token: found at the text level); call ids without ``:IDX`` or sanitized
(``functions_get_weather_0``) still give a call whose name is derived from the id (the id
is kept as sampled); text after the section is kept. A call that is cut off or whose
arguments are not JSON becomes an :class:`UnparsedToolCallPart`. K2-Instruct is not a
reasoning model: ``<think>`` in its output is ordinary text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.parsing import (
    TEXT,
    THINKING,
    TOOL_CALL,
    BatchRuns,
    MarkerScanner,
    ParseResult,
    StreamParser,
)
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
    "KimiK2Options",
    "KimiK2Renderer",
    "KimiK2ThinkingOptions",
    "KimiK2ThinkingRenderer",
    "deep_sort",
    "tool_name_from_id",
]

DEFAULT_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."
INITIAL_DEFAULT_SYSTEM = "You are a helpful assistant"
_TEMPLATES = ("chat_template", "initial")
_ARGUMENT_MARKER = "<|tool_call_argument_begin|>"
# Misspellings of the section markers that models have sampled; not tokens, so text.
_SECTION_BEGIN_TEXT = b"<|tool_call_section_begin|>"
_SECTION_END_TEXT = b"<|tool_call_section_end|>"
_SECTION_BEGIN_STR = _SECTION_BEGIN_TEXT.decode()
_SECTION_END_STR = _SECTION_END_TEXT.decode()


@dataclass(frozen=True, slots=True)
class KimiK2Options:
    """Options of the K2-Instruct format."""

    template: str = "chat_template"
    """``"chat_template"`` (``chat_template.jinja``, what ``transformers`` loads) or
    ``"initial"`` (the older template embedded in ``tokenizer_config.json``)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn, which K2-Instruct cannot write:
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped as the templates do."""


@dataclass(frozen=True, slots=True)
class KimiK2ThinkingOptions:
    """Options of the K2-Thinking format."""

    keep_last_reasoning: bool = False
    """False (template behaviour). True (for training data): the last assistant message
    renders exactly as the model sampled it, after the generation prompt of the messages
    before it, reasoning kept (see the module docs: the template drops the reasoning of a
    final answer that is the conversation's first plain answer, and of the tool-calling
    turns before it). Generation prompts are not affected."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the template drops (turns up to
    the conversation's first plain answer): ``"error"`` raises ``ValueError``, ``"drop"``
    leaves it out. Reasoning of untrained turns is rendered as the template does."""


def deep_sort(value: Any) -> Any:
    """``value`` with the keys of every mapping sorted, recursively (what upstream's
    tokenizer does to ``tools`` before templating)."""
    if isinstance(value, Mapping):
        return {k: deep_sort(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [deep_sort(v) for v in value]
    return value


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
        return _json_declaration(tools, (", ", ": "))

    def _default_system(self, w: TokenWriter, text: str, newline: bool) -> None:
        w.control(self.im_system)
        w.text("system")
        w.control(self.im_middle)
        w.text(text)
        w.control(self.im_end)
        if newline:
            w.text("\n")

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

    def _calls(
        self, w: TokenWriter, calls: list[Part], i: int, ids: _CallIds, per_message: bool
    ) -> None:
        """One tool-call section holding ``calls`` (sampled text of message ``i``)."""
        w.control(self.section_begin, i, True)
        for k, part in enumerate(calls):
            w.control(self.call_begin, i, True)
            if type(part) is ToolCallPart:
                call_id = ids.next_call(part.name, k if per_message else None)
                w.text(call_id, i, True)
                w.control(self.argument_begin, i, True)
                w.text(checked_arguments(part, i), i, True)
            else:
                assert type(part) is UnparsedToolCallPart
                ids.next_call(part.name or "unknown", k if per_message else None, part.id)
                head, marker, rest = part.raw.partition(_ARGUMENT_MARKER)
                w.text(head, i, True)
                if marker:
                    w.control(self.argument_begin, i, True)
                    w.text(rest, i, True)
            w.control(self.call_end, i, True)
        w.control(self.section_end, i, True)

    def _body(
        self,
        w: TokenWriter,
        parts: list[Part],
        i: int,
        ids: _CallIds,
        *,
        per_message_ids: bool = False,
    ) -> None:
        """Assistant parts in order: text, thinking blocks, and runs of calls as sections."""
        pending: list[Part] = []
        for part in parts:
            if type(part) in (ToolCallPart, UnparsedToolCallPart):
                pending.append(part)
                continue
            if pending:
                self._calls(w, pending, i, ids, per_message_ids)
                pending = []
            if type(part) is TextPart:
                w.text(part.text, i, True)
            elif type(part) is ThinkingPart and self.think is not None:
                assert self.think_end is not None
                w.control(self.think, i, True)
                w.text(part.text, i, True)
                w.control(self.think_end, i, True)
        if pending:
            self._calls(w, pending, i, ids, per_message_ids)

    def _tool_result(
        self, w: TokenWriter, m: Message, i: int, ids: _CallIds, initial: bool
    ) -> None:
        text = plain_text(m, i, self.name)
        if initial:
            w.text(f"## Return of {m.tool_call_id or ''}\\n{text}", i)
        else:
            w.text(f"## Return of {ids.answer(m.name)}\n{text}", i)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return _KimiK2Parser(self, events)

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "tool-call ids are renumbered across the conversation",
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if self._has_thinking:
            reasons.insert(0, "reasoning of turns up to the first plain answer is dropped")
        return ExtensionProperty(False, "; ".join(reasons))

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

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        # Call ids count calls across the conversation (functions.NAME:IDX): the context
        # holds as many answered calls as the prompt shows.
        calls = sum(1 for t in prompt_ids if t == self.call_begin)
        if not calls:
            return [Message("user", "")]
        assistant = Message("assistant", [ToolCallPart("f", "{}") for _ in range(calls)])
        results = [Message("tool", "") for _ in range(calls)]
        return [Message("user", ""), assistant, *results]


class KimiK2Renderer(_KimiK2Base):
    """Renderer and parser for Kimi-K2-Instruct (no reasoning)."""

    name = "kimi_k2"
    default_model = "moonshotai/Kimi-K2-Instruct"
    Options = KimiK2Options

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: KimiK2Options,
        add_generation_prompt: bool,
    ) -> None:
        if options.template not in _TEMPLATES:
            raise ValueError(
                f"template: expected one of {', '.join(map(repr, _TEMPLATES))}, "
                f"got {options.template!r}"
            )
        initial = options.template == "initial"
        if options.reasoning == "error":
            _reject_reasoning(messages, w)
        self._tool_declaration(w, tools, options)
        if messages and messages[0].role != "system":
            if initial:
                self._default_system(w, INITIAL_DEFAULT_SYSTEM, newline=False)
            else:
                self._default_system(w, DEFAULT_SYSTEM, newline=True)
        ids = _CallIds()
        for i, m in enumerate(messages):
            self._header(w, m, i, use_name=not initial)
            if m.role == "assistant":
                self._body(w, _assistant_parts(m), i, ids, per_message_ids=initial)
                w.control(self.im_end, i, True)
                continue
            if m.role == "tool":
                self._tool_result(w, m, i, ids, initial)
            else:
                w.text(plain_text(m, i, self.name), i)
            w.control(self.im_end, i)
        if add_generation_prompt:
            self._generation_prompt(w)


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
        # The template's split: the FIRST assistant message without tool calls (its loop
        # meant to find the last). Messages up to it get an empty think block.
        considered = messages
        if options.keep_last_reasoning and not add_generation_prompt:
            last = max((k for k, m in enumerate(messages) if m.role == "assistant"), default=0)
            considered = messages[:last]
        split = next(
            (k for k, m in enumerate(considered) if m.role == "assistant" and not _has_calls(m)),
            -1,
        )
        self._tool_declaration(w, tools, options)
        if not messages or messages[0].role != "system":
            self._default_system(w, DEFAULT_SYSTEM, newline=False)
        ids = _CallIds()
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
                self._tool_result(w, m, i, ids, initial=False)
            else:
                w.text(plain_text(m, i, self.name), i)
            w.control(self.im_end, i)
        if add_generation_prompt:
            self._generation_prompt(w)

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        """A prefill starts the reasoning: ``<think>{prefill}`` after the prompt."""
        assert self.think is not None
        w.control(self.think)
        w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        assert self.think is not None
        return [self.think, *self.table.encode(prefill)]


def _reject_trained_reasoning(parts: list[Part], i: int) -> None:
    """The template writes ``<think></think>`` for the conversation's first plain answer;
    in a supervised example that silently drops the reasoning being trained on."""
    if any(type(p) is ThinkingPart and p.text for p in parts):
        raise reasoning_error(
            "kimi_k2_thinking",
            i,
            "its template writes <think></think> for every turn up to the conversation's "
            "first plain answer; keep_last_reasoning=True keeps the last turn's",
        )


class _CallIds:
    """The templates' tool-call id bookkeeping: a conversation-wide counter and the queue
    of ids not yet answered by a tool result."""

    __slots__ = ("count", "queue")

    def __init__(self) -> None:
        self.count = 0
        self.queue: list[str] = []

    def next_call(self, name: str, per_message: int | None, given: str | None = None) -> str:
        index = self.count if per_message is None else per_message
        call_id = given or f"functions.{name}:{index}"
        self.count += 1
        self.queue.append(call_id)
        return call_id

    def answer(self, name: str | None) -> str:
        if self.queue:
            return self.queue.pop(0)
        return f"functions.{name or 'unknown'}:{self.count}"


def _reject_reasoning(messages: list[Message], w: TokenWriter) -> None:
    """Kimi-K2-Instruct is not a reasoning model: its templates drop reasoning, and silently
    dropping it from a trained turn would corrupt training data."""
    for i, m in enumerate(messages):
        if m.role != "assistant" or not w.trains(i):
            continue
        if any(type(p) is ThinkingPart and p.text for p in m.parts):
            raise reasoning_error(
                "kimi_k2",
                i,
                "Kimi-K2-Instruct has no reasoning and its templates drop it; "
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
