"""Nemotron-3 Nano, Super and Ultra (``nvidia/NVIDIA-Nemotron-3-*``): ChatML turns, a think
block in every assistant turn, XML tool calls.

What the official templates render (``⏎`` is a newline; NANO/ULTRA mark where Ultra's
tighter think block differs)::

    <|im_start|>system⏎{system}⏎⏎# Tools⏎⏎You have access to the following functions:⏎⏎<tools>
        ⏎<function>⏎<name>NAME</name>⏎<description>...</description>⏎<parameters>⏎<parameter>
        ⏎<name>KEY</name>⏎<type>TYPE</type>...⏎</parameter>...⏎</parameters>⏎</function>
        ⏎</tools>⏎⏎If you choose to call a function ONLY reply ... </IMPORTANT><|im_end|>⏎
    <|im_start|>user⏎{text}<|im_end|>⏎
    <|im_start|>assistant⏎<think>⏎{reasoning}⏎</think>⏎{text}<|im_end|>⏎         (NANO)
    <|im_start|>assistant⏎<think>⏎{reasoning}</think>{text}<|im_end|>⏎           (ULTRA)
    <|im_start|>assistant⏎<think></think>{text}⏎<tool_call>⏎<function=NAME>⏎<parameter=KEY>⏎
        {value}⏎</parameter>⏎</function>⏎</tool_call>⏎<|im_end|>⏎
    <|im_start|>user⏎<tool_response>⏎{result}⏎</tool_response>⏎<tool_response>...<|im_end|>⏎
    <|im_start|>assistant⏎<think>⏎

``<|im_start|>``, ``<|im_end|>``, ``<think>``, ``</think>``, ``<tool_call>``,
``</tool_call>``, ``<tool_response>`` and ``</tool_response>`` are single control tokens
(the tool instructions' ``<tool_call>`` spellings too); ``<function=``, ``<parameter=``
and their closing tags are text. Sampling stops at ``<|im_end|>`` (the tokenizer's end of
sequence; ``stop()`` of tml-renderers' ``Nemotron3``).

- **System turn**: always written (empty without a system message); with tools, the
  system text, a blank line (when it is not empty) and the tool block. Each tool is
  written as XML: ``<name>``, ``<description>`` (trimmed), each parameter's ``<name>``,
  ``<type>``, ``<description>``, ``<enum>`` (``tojson``) and other keys (objects and
  lists ``tojson``, scalars as Python prints them), the other keys of ``parameters``,
  ``<required>`` and the tool's other keys, in the tool's key order.
- **User, system (later) and tool messages** are written as given (not trimmed); results
  of consecutive tool messages share one user turn.
- **Generation prompt**: ``<|im_start|>assistant⏎<think>⏎``: the completion starts inside
  the reasoning, and the parser starts in the thinking state. ``enable_thinking=False``
  writes ``<think></think>`` instead and the completion is the answer.
- **Assistant turns**: reasoning that is not blank becomes ``<think>⏎{reasoning}⏎</think>⏎``
  (Ultra: ``<think>⏎{reasoning}</think>``) before the text, written as given; without it
  the turn starts ``<think></think>``. The turn's text is trimmed at its end (the
  template trims the whole body). With calls a newline follows the text, and each call is
  ``<tool_call>…</tool_call>⏎``; the ``⏎`` before ``<|im_end|>`` is the template's, not
  text. Each argument is a ``<parameter=KEY>`` block: a string as is, an object or list
  as ``tojson``, any other value as Python prints it (``True``, ``None``, ``10.0``); a
  call's arguments given as JSON text are parsed first (what inference servers do before
  templating, vLLM's ``_postprocess_messages``; ``""`` is a call without arguments, the
  ``{}`` vLLM hands the template for it).
- **History** (``truncate_history_thinking``, default on): turns before the last user
  message lose their reasoning: ``<think></think>`` then the text after the reasoning
  (Nano and Super: ``⏎{text}`` trimmed at the end without calls, ``{text}`` trimmed with
  them; Ultra: the text, trimmed at the end without calls).
- **Effort**: Super's ``low_effort`` appends ``⏎⏎{reasoning effort: low}`` to the last
  user message, Ultra's ``medium_effort`` ``⏎⏎{reasoning effort: efficient}``.

Training (a trained token is sampled after exactly the generation prompt):

- a trained turn before the last user message (its history form) cannot follow the
  thinking prompt ``<think>⏎``: a ``ValueError`` (train it on the conversation cut after
  it); with ``enable_thinking=False`` its history form follows ``<think></think>`` as the
  prompt does, and it trains (its reasoning refused or dropped, option ``reasoning``);
- with ``enable_thinking=False`` a trained turn's reasoning is refused or dropped;
- with thinking on, a trained turn without reasoning is written as the model samples it
  after ``<think>⏎``: an empty think block, ``<think>⏎⏎</think>⏎{text}`` (Ultra:
  ``<think>⏎</think>{text}``), where the template writes ``<think></think>{text}``, which
  no completion of the generation prompt can give. Untrained turns are the template's.

Parsing: parts in sampled order on the shared tagged grammar
(:class:`~renderers.core.grammars.TagGrammar`). Reasoning ends at ``</think>`` (the
padding newline before it removed, Nano and Super; Ultra keeps everything, so reasoning
ending in a newline keeps it); a ``<tool_call>`` drafted inside the reasoning stays
reasoning text with an issue (``drafted_calls="call"``: vLLM's reading). A call's
``<function=NAME>`` and ``<parameter=KEY>`` blocks become a :class:`ToolCallPart` whose
arguments are a JSON object: a value that is JSON is kept as sampled, ``True``/``False``/
``None`` are the JSON literals the template wrote as Python prints them, any other value is
a string (``"3"`` given as a string reads back as the number 3: the format does not say).
The newline after ``</tool_call>`` is the template's (no text part). Anything off the
grammar is an :class:`UnparsedToolCallPart` or text with an issue; nothing sampled is lost.

Oracles: the official templates as TRL keeps them byte for byte
(``trl/chat_templates/nemotron_3_nano.jinja``, ``_super``, ``_ultra``; see that
directory's README), rendered in transformers' sandbox and tokenized with the real
vocabulary (tml-renderers' ``Nemotron3Tokenizer``); cross-checked against tml-renderers
0.2.1 ``Nemotron3`` (``Nemotron3()``, ``Nemotron3.ultra()``), which differs from the
templates where this renderer follows them: tml trims user text, and writes no newline
between ``</think>`` and the first ``<tool_call>``; Ultra writes a call turn without
reasoning as ``<think>⏎</think>`` in the history (the template: ``<think></think>``); it
reads a parameter ``True``/``None`` as that string. Agreement on the shared corpus (40 of
its 44 conversations: list content and control-token spellings are the divergences
below; 58 generation prompts, 31 trained answers), tests/test_nemotron3.py: the templates,
every prompt, untrained conversation and supervised example under 6 option sets; tml,
52 of 58 prompts as it renders them (Ultra 46), 57 once its differences above are undone,
and every parse of a trained turn. (tinker-cookbook's ``nemotron3`` was read, not run: it
is not installed here.)

Divergences from the templates, on purpose:

- message text that spells a control token is encoded as ordinary text, and assistant
  text spelling ``<think>``/``</think>`` is text (the template reads such content as a
  think block);
- list-of-parts content is rendered as its text parts joined (the template writes the
  list's Python repr for user messages and fails on a system message);
- a trained turn without reasoning, with thinking on, gets the empty think block it is
  sampled with (above), and a trained turn's reasoning is encoded apart from the prompt's
  ``<think>⏎`` (as the model samples it; the template's text tokenized whole can merge
  that newline with the reasoning's first characters);
- assistant parts in a non-canonical order are written in that order with the same
  markers, so parsed messages render back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from renderers.core.engine import StreamParser
from renderers.core.grammars import TaggedParser, TagGrammar, xml_call_builder
from renderers.core.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import DraftedCalls, Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, joined_text_parts, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = [
    "Nemotron3Options",
    "Nemotron3Renderer",
    "Nemotron3SuperOptions",
    "Nemotron3SuperRenderer",
    "Nemotron3UltraOptions",
    "Nemotron3UltraRenderer",
]

_TOJSON = json.JSONEncoder(ensure_ascii=False).encode
"""The templates' ``tojson`` (transformers': non-ASCII kept, default separators)."""

_TOOLS_INTRO = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
_TOOLS_OUTRO = (
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with "
    "NO suffix:\n\n<tool_call>\n<function=example_function_name>\n"
    "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>"
    "\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST "
    "follow the specified format: an inner <function=...></function> block must be nested "
    "within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You "
    "may provide optional reasoning for your function call in natural language BEFORE the "
    "function call, but NOT after\n- If there is no function call available, answer the "
    "question like normal with your current knowledge and do not tell the user about "
    "function calls\n</IMPORTANT>"
)


@dataclass(frozen=True, slots=True)
class Nemotron3Options:
    """Options of the Nemotron-3 Nano format (names follow the template's kwargs)."""

    enable_thinking: bool = True
    """False: the generation prompt writes ``<think></think>`` (no reasoning)."""
    truncate_history_thinking: bool = True
    """True (template default): turns before the last user message lose their reasoning.
    False: every turn keeps it."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (with
    ``enable_thinking=False``, or before the last user message): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call (``"call"``; see
    :data:`~renderers.core.options.DraftedCalls`)."""


@dataclass(frozen=True, slots=True)
class Nemotron3SuperOptions:
    """Options of the Nemotron-3 Super format: Nano's and ``low_effort``."""

    enable_thinking: bool = True
    """False: the generation prompt writes ``<think></think>`` (no reasoning)."""
    truncate_history_thinking: bool = True
    """True (template default): turns before the last user message lose their reasoning.
    False: every turn keeps it."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (with
    ``enable_thinking=False``, or before the last user message): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call (``"call"``; see
    :data:`~renderers.core.options.DraftedCalls`)."""
    low_effort: bool = False
    """True: the last user message ends with ``⏎⏎{reasoning effort: low}``."""


@dataclass(frozen=True, slots=True)
class Nemotron3UltraOptions:
    """Options of the Nemotron-3 Ultra format: Nano's and ``medium_effort``."""

    enable_thinking: bool = True
    """False: the generation prompt writes ``<think></think>`` (no reasoning)."""
    truncate_history_thinking: bool = True
    """True (template default): turns before the last user message lose their reasoning.
    False: every turn keeps it."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (with
    ``enable_thinking=False``, or before the last user message): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call (``"call"``; see
    :data:`~renderers.core.options.DraftedCalls`)."""
    medium_effort: bool = False
    """True: the last user message ends with ``⏎⏎{reasoning effort: efficient}``."""


class Nemotron3Renderer(Renderer):
    """Renderer and parser for Nemotron-3 Nano (Super and Ultra are subclasses)."""

    name = "nemotron3"
    default_model = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"
    tokenizer_source = "tml_renderers.tokenizers:Nemotron3Tokenizer"
    Options: ClassVar[type[Any]] = Nemotron3Options
    roles = ("system", "user", "assistant", "tool")
    message_markers = MessageMarkers(starts={"<|im_start|>": ""})
    _ultra: ClassVar[bool] = False  # Ultra's think block: no newline before </think> or after
    _effort: ClassVar[tuple[str, str] | None] = None  # (option, hint) of the last user message

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.im_start = control("<|im_start|>")
        self.im_end = control("<|im_end|>")
        self.think = control("<think>")
        self.think_end = control("</think>")
        self.tool_call = control("<tool_call>")
        self.tool_call_end = control("</tool_call>")
        self.tool_response = control("<tool_response>")
        self.tool_response_end = control("</tool_response>")
        self._pad = "" if self._ultra else "\n"  # before </think>, and after it before text
        self._newline = tuple(self.table.encode("\n"))
        self.grammar = TagGrammar(
            stop=(self.im_end,),
            ends_message=(self.im_start,),
            think=self.think,
            think_end=self.think_end,
            call=self.tool_call,
            call_end=self.tool_call_end,
            build_call=xml_call_builder("</tool_call>", python_scalars=True),
            think_padding=self._pad,
            after_think=self._pad,
            before_call="\n",
            after_calls="\n",
        )
        """The parsing grammar: think blocks, text and XML calls in any order."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.im_end,)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
        add_generation_prompt: bool,
    ) -> None:
        first_is_system = bool(messages) and messages[0].role == "system"
        system = plain_text(messages[0], 0, self.name) if first_is_system else ""
        w.control(self.im_start)
        w.text("system\n")
        w.text(system, 0 if first_is_system else -1)
        if tools:
            if system:
                w.text("\n\n")
            w.template(_TOOLS_INTRO)
            w.text(_tools_xml(tools))
            w.template(_TOOLS_OUTRO)
        w.control(self.im_end)
        w.text("\n")
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        hint = ""
        if self._effort is not None and getattr(options, self._effort[0]):
            hint = self._effort[1]
        n = len(messages)
        for i, m in enumerate(messages):
            if i == 0 and first_is_system:
                continue
            if m.role in ("user", "system"):
                w.control(self.im_start, i)
                text = plain_text(m, i, self.name)
                w.text(m.role + "\n" + text + (hint if i == last_user else ""), i)
                w.control(self.im_end, i)
                w.text("\n", i)
            elif m.role == "assistant":
                history = options.truncate_history_thinking and i < last_user
                self._assistant(w, m, i, history, options)
            else:  # tool
                previous = messages[i - 1].role if i > 0 else None
                if previous is not None and previous != "tool" and not (i == 1 and first_is_system):
                    w.control(self.im_start, i)
                    w.text("user\n", i)
                w.control(self.tool_response, i)
                w.text("\n" + plain_text(m, i, self.name) + "\n", i)
                w.control(self.tool_response_end, i)
                w.text("\n", i)
                if i == n - 1 or messages[i + 1].role != "tool":
                    w.control(self.im_end, i)
                    w.text("\n", i)
        if add_generation_prompt:
            w.control(self.im_start)
            w.text("assistant\n")
            w.control(self.think)
            if options.enable_thinking:
                w.text("\n")
            else:
                w.control(self.think_end)

    def _assistant(self, w: TokenWriter, m: Message, i: int, history: bool, options: Any) -> None:
        parts = joined_text_parts(m.parts)
        trained = w.trains(i)
        reasoning = parts[0].text if parts and type(parts[0]) is ThinkingPart else None
        if reasoning is not None:
            parts = parts[1:]
        had_reasoning = has_reasoning = bool(reasoning and reasoning.strip())
        if trained and history and options.enable_thinking:
            raise ValueError(
                f"messages[{i}]: {self.name} writes a turn before the last user message as "
                "<think></think>, which its generation prompt (<think>⏎) cannot precede, so it "
                "cannot be trained; train it on the conversation cut after it, or pass "
                "truncate_history_thinking=False"
            )
        if trained and has_reasoning and (history or not options.enable_thinking):
            if options.reasoning == "error":
                why = (
                    "the template drops reasoning before the last user message"
                    if history
                    else "with enable_thinking=False the generation prompt closes the think block"
                )
                raise reasoning_error(self.name, i, why)
            has_reasoning = False
        # The generation prompt's part of the turn, then what the model samples after it.
        w.control(self.im_start, i)
        w.text("assistant\n", i)
        calls = any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in parts)
        text = parts[0].text if parts and type(parts[0]) is TextPart else ""
        if text:
            parts = parts[1:]
        sampled_block = trained and options.enable_thinking
        if history:
            w.control(self.think, i)
            w.control(self.think_end, i)
            if calls and not self._ultra:
                text = text.strip()
            elif not calls:
                # The history form keeps the newline the dropped reasoning's block left.
                text = ((self._pad if had_reasoning else "") + text).rstrip()
            w.text(text, i, True)
        elif has_reasoning or sampled_block:
            w.control(self.think, i)
            if trained:
                w.encoded(self._newline, i)  # the prompt's newline, encoded apart
            else:
                w.text("\n", i)
            body = (reasoning or "") if has_reasoning else ""
            w.text(body + self._pad, i, True)
            w.control(self.think_end, i, True)
            w.text((self._pad + text).rstrip(), i, True)
        else:
            w.control(self.think, i)
            w.control(self.think_end, i)
            w.text(text.rstrip(), i, True)
        previous = "text"
        for part in parts:  # calls, then (in non-canonical orders) anything
            if type(part) is TextPart:
                w.text(part.text, i, True)
                previous = "text"
            elif type(part) is ThinkingPart:
                w.control(self.think, i, True)
                w.text("\n" + part.text + self._pad if not self._ultra else part.text, i, True)
                w.control(self.think_end, i, True)
                w.text(self._pad, i, True)
                previous = "text"
            else:
                if previous != "call":
                    w.text("\n", i, True)
                w.control(self.tool_call, i, True)
                if type(part) is ToolCallPart:
                    w.text(self._call_body(part, i), i, True)
                else:
                    assert type(part) is UnparsedToolCallPart
                    w.text(part.raw, i, True)
                w.control(self.tool_call_end, i, True)
                w.text("\n", i, True)
                previous = "call"
        w.control(self.im_end, i, True)
        w.text("\n", i)

    def _call_body(self, part: ToolCallPart, i: int) -> str:
        """``⏎<function=NAME>⏎<parameter=KEY>⏎{value}⏎</parameter>⏎...</function>⏎``."""
        # ``""``: no arguments (vLLM hands the template ``{}`` for it).
        arguments = json.loads(checked_arguments(part, i)) if part.arguments else {}
        if not isinstance(arguments, dict):
            raise ValueError(
                f"messages[{i}]: arguments of tool call {part.name!r} must be a JSON object, "
                f"which {self.name} writes one <parameter> per key: {part.arguments[:60]!r}"
            )
        lines = [f"\n<function={part.name}>\n"]
        for key, value in arguments.items():
            lines.append(f"<parameter={key}>\n{_python_string(value)}\n</parameter>\n")
        lines.append("</function>\n")
        return "".join(lines)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return TaggedParser(
            self.grammar,
            self.table,
            events,
            opens_reasoning=options.enable_thinking,
            calls_end_reasoning=options.drafted_calls == "call",
        )

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt ends "<think>⏎".
        opened = list(prompt_ids[-1 - len(self._newline) :]) == [self.think, *self._newline]
        return self.parse_response(completion_ids, **{**options, "enable_thinking": opened})

    # -- multi-turn rollouts ------------------------------------------------------------

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        return 0, self.grammar.closing(result, (self.im_end,))

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "a turn sampled without reasoning is written <think></think> in the history",
            "text is trimmed and re-tokenized (a sampled tokenization may differ from encoding it)",
            "tool-call parameters are re-serialized",
        ]
        if self.options.truncate_history_thinking:
            reasons.insert(0, "reasoning of turns before the last user message is dropped")
        return ExtensionProperty(False, "; ".join(reasons))


class Nemotron3SuperRenderer(Nemotron3Renderer):
    """Renderer and parser for Nemotron-3 Super (Nano's format and ``low_effort``)."""

    name = "nemotron3_super"
    default_model = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B"
    Options = Nemotron3SuperOptions
    _effort = ("low_effort", "\n\n{reasoning effort: low}")


class Nemotron3UltraRenderer(Nemotron3Renderer):
    """Renderer and parser for Nemotron-3 Ultra (a tighter think block, ``medium_effort``)."""

    name = "nemotron3_ultra"
    default_model = "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B"
    Options = Nemotron3UltraOptions
    _ultra = True
    _effort = ("medium_effort", "\n\n{reasoning effort: efficient}")


# -- tool declarations -----------------------------------------------------------------------


def _python_string(value: Any) -> str:
    """A value as the templates write it: objects and lists ``tojson``, strings as they are,
    anything else as Python prints it (jinja's ``|string``)."""
    if isinstance(value, (dict, list)):
        return _TOJSON(value)
    return value if isinstance(value, str) else str(value)


def _extra_keys(fields: Any, handled: tuple[str, ...]) -> str:
    """The template's ``render_extra_keys``: ``⏎<KEY>VALUE</KEY>`` for every other key."""
    if not isinstance(fields, Mapping):
        return ""
    return "".join(
        f"\n<{key}>{_python_string(value)}</{key}>"
        for key, value in fields.items()
        if key not in handled
    )


def _tools_xml(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tool declarations as the templates write them inside ``<tools>``."""
    out: list[str] = []
    for tool in tools:
        if "function" in tool:
            tool = tool["function"]
        out.append(f"\n<function>\n<name>{tool['name']}</name>")
        if "description" in tool:
            out.append(f"\n<description>{str(tool['description']).strip()}</description>")
        out.append("\n<parameters>")
        parameters = tool.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        if isinstance(properties, Mapping):
            for key, fields in properties.items():
                out.append(f"\n<parameter>\n<name>{key}</name>")
                if "type" in fields:
                    out.append(f"\n<type>{_python_string(fields['type'])}</type>")
                if "description" in fields:
                    out.append(f"\n<description>{str(fields['description']).strip()}</description>")
                if "enum" in fields:
                    out.append(f"\n<enum>{_TOJSON(fields['enum'])}</enum>")
                out.append(_extra_keys(fields, ("name", "type", "description", "enum")))
                out.append("\n</parameter>")
        out.append(_extra_keys(parameters, ("type", "properties", "required")))
        if isinstance(parameters, Mapping) and "required" in parameters:
            out.append(f"\n<required>{_TOJSON(parameters['required'])}</required>")
        out.append("\n</parameters>")
        out.append(_extra_keys(tool, ("type", "name", "description", "parameters")))
        out.append("\n</function>")
    return "".join(out)
