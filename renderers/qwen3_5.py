"""Qwen3.5, Qwen3.6 and Qwen3.8 (``Qwen/Qwen3.5-27B``..., ``Qwen/Qwen3.6-27B``...,
``Qwen/Qwen3.8-27B``): ChatML turns, a think block opened by every generation prompt, XML
tool calls. Qwen3.6's template is Qwen3.5's with ``preserve_thinking`` and JSON scalars.

What the official templates render (``⏎`` is a newline; every message's text is trimmed
of surrounding whitespace, as the templates' ``|trim`` does)::

    <|im_start|>system⏎{effort}⏎⏎# Tools⏎⏎You have access to the following functions:⏎⏎<tools>
        ⏎{tool JSON}⏎{tool JSON}⏎</tools>⏎⏎If you choose to call a function ... </IMPORTANT>
        ⏎⏎{system}<|im_end|>⏎
    <|im_start|>user⏎{text}<|im_end|>⏎
    <|im_start|>assistant⏎<think>⏎{reasoning}⏎</think>⏎⏎{text}⏎⏎<tool_call>⏎<function=NAME>⏎
    <parameter=KEY>⏎{value}⏎</parameter>⏎</function>⏎</tool_call>⏎<tool_call>...</tool_call><|im_end|>⏎
    <|im_start|>user⏎<tool_response>⏎{result}⏎</tool_response>⏎<tool_response>...<|im_end|>⏎
    <|im_start|>assistant⏎<think>⏎

``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``, ``<tool_response>`` and
``</tool_response>`` are single control tokens; ``<function=``, ``<parameter=`` and their
closing tags are text. Sampling stops at ``<|im_end|>``; ``<|endoftext|>`` is
end-of-sequence.

- **System turn**: with tools, the tool block (each tool as ``tojson``:
  ``ensure_ascii=False``, default separators) comes first and the first system message's
  text follows after a blank line; without tools the system message is its own turn
  (an empty one: an empty turn in Qwen3.5/3.6, none in Qwen3.8). A system message anywhere
  else is an error in the templates, and here.
- **Generation prompt**: ``<|im_start|>assistant⏎<think>⏎``: the completion starts inside
  the reasoning, and the parser starts in the thinking state. ``enable_thinking=False``
  closes the block in the prompt, ``<think>⏎⏎</think>⏎⏎``, and the completion starts with
  the answer (reasoning in a trained turn is then refused, see ``reasoning``).
- **Reasoning**: an assistant turn after the last user query gets a think block (empty
  without reasoning); turns before it are written without one (their reasoning dropped),
  unless ``preserve_thinking``; training such a turn is a ``ValueError`` (its untrained
  prefix would not be the generation prompt, which opens a think block). Qwen3.5 and 3.6,
  like Qwen3, read reasoning written inline in a plain answer
  (``"<think>r</think>answer"``: the text before ``</think>`` is the reasoning); Qwen3.8
  does not. With ``enable_thinking=False`` an untrained last turn
  keeps its reasoning, as the template writes it.
- **Tool calls**: after the text, the first call is preceded by a blank line (none when
  the message has no text), later ones by a newline. Each argument is a
  ``<parameter=KEY>`` block: a string value as is; other values as JSON (``tojson``), but
  Qwen3.5 writes numbers, ``true``/``false`` and ``null`` the way Python prints them
  (``10.0``, ``True``, ``False``, ``None``: its template applies ``|string`` to scalars).
- **Arguments as servers render them**: the templates iterate over an arguments object,
  and inference servers parse a call's arguments text into one before templating (vLLM's
  ``_postprocess_messages``, ``vllm/entrypoints/chat_utils.py`` at vllm-project/vllm
  bd5ec6d5), so the model sees each value re-serialised: arguments given as JSON text are
  parsed and written that way (``{"a":1}`` -> ``{"a": 1}``, ``1e1`` -> ``10.0``; a key
  given twice keeps its last value, as ``json.loads`` does). ``verbatim_arguments=True``
  writes each value's JSON text as given instead (arguments parsed from a completion then
  render back as sampled). ``arguments: ""`` is a call without arguments (no
  ``<parameter>``): Qwen3.8's template skips it (``tool_call.arguments != ''``); Qwen3.5's
  and 3.6's fail on it (``|items`` of a string), and vLLM hands the template ``{}`` for
  it, which renders the same way.
- **Tool results** follow the call turn as a user turn holding one ``<tool_response>``
  block per result.
- **Qwen3.8 reasoning effort**: ``reasoning_effort="xhigh"`` (default) or ``"low"`` puts
  an instruction at the start of the system turn (creating one if needed), ``"medium"``
  none; only when thinking is enabled.

Parsing (the :class:`~renderers.core.grammars.TagGrammar` that :func:`grammar` builds):
parts in sampled order, the separators above removed so a parsed message renders back.
Reasoning ends at ``</think>``; a ``<tool_call>`` drafted inside the reasoning stays
reasoning text (only a call after ``</think>`` is a call), and a nested ``<think>`` is
reasoning too. A call's ``<function=NAME>`` and ``<parameter=KEY>`` blocks become a
:class:`ToolCallPart` whose arguments are a JSON object: a value that is a JSON number,
boolean, null, object or array is kept as sampled, any other value is a string of its
text (the format does not say which parameters are strings: a string argument ``"3"`` or
Qwen3.5's ``True`` reads back as the number ``3`` and the string ``"True"``; use the
tool's schema to convert). A call that does not follow the grammar, or was cut off, is an
:class:`UnparsedToolCallPart` holding the text between the markers; any other marker
sampled inside a call cuts it there. A control token out of place is kept as text with
an issue, so no sampled character is lost.

Verified against tml-renderers 0.2.1 (``Qwen35()``, ``Qwen38()``; the official templates
were not available offline). Where that oracle differs from the templates as documented by
``tinker_cookbook/renderers/qwen3_5.py`` and its Hugging Face parity tests (tinker-cookbook,
thinking-machines-lab), this renderer follows the templates, and says so in tests: a blank
line (not a newline) between text and the first call; nested argument values as
``tojson`` (``{"a": 1}``, not ``{"a":1}``); a system message only at the start; Qwen3.5's
inline-reasoning convention; ``preserve_thinking`` history blocks written with the
template's newlines.

Qwen3.6 against its official template (``qwen3_6.jinja``, TRL's byte-exact copy; the
tokenizer is Qwen3.5's, as tinker-cookbook 0.6.1 ``model_info.py`` records), 42 corpus
conversations under ``{}``, ``enable_thinking=False`` and ``preserve_thinking=True``: 177
of 177 generation prompts, 123 of 123 whole conversations and 85 of 85 supervised
examples equal (a late system message is an error in both; 8 examples with reasoning
and thinking off are refused, see ``reasoning``); the 85 trained turns parse back to
their messages, streaming as in one shot, and tml's ``Qwen35`` parser reads the 60 it
can as we do (tests/test_qwen3_6.py).

Prefill: after the generation prompt, which opens the think block (the prefill starts the
reasoning, as ``continue_final_message="reasoning_content"`` writes it) or, with
``enable_thinking=False``, closes an empty one (the answer, as
``continue_final_message="content"`` writes it; with thinking on that writes the answer
after an empty think block, the ``enable_thinking=False`` prompt).

Degenerate inputs: ``content: None`` is empty text, ``tool_calls: []`` no calls and a
``None`` tool result an empty one (what vLLM hands a template; our message model has no
other spelling for them); the templates render them the same way whether transformers
passes the ``None`` (5.0 to 5.22) or drops the key (5.23 and later).

Divergences from the templates, on purpose:

- message text that spells a control token is encoded as ordinary text;
- list-of-parts content is rendered as its text parts joined;
- a supervised example encodes the trained turn after the generation prompt's
  ``<think>⏎`` on its own, as the model samples it (tokenizing the template's text whole
  would merge that newline with the next one of an empty think block);
- assistant parts in a non-canonical order are written in that order with the same
  markers (a later thinking part as another think block), so parsed messages render back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, json_object_members
from renderers.core.engine import StreamParser
from renderers.core.grammars import TaggedParser, TagGrammar, xml_call_builder
from renderers.core.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import DraftedCalls, Reasoning
from renderers.core.result import ParseResult
from renderers.core.tokens import TokenTable
from renderers.core.writer import TokenWriter
from renderers.qwen3 import _assistant_parts
from renderers.rendering import Renderer, checked_arguments, joined_text_parts, plain_text
from renderers.rollout import ExtensionProperty

__all__ = [
    "Qwen35Options",
    "Qwen35Renderer",
    "Qwen36Renderer",
    "Qwen38Options",
    "Qwen38Renderer",
    "grammar",
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
_EFFORT_INSTRUCTIONS = {
    "xhigh": "Reasoning effort is set to xhigh. Please think carefully through the task, "
    "validate key assumptions, consider plausible alternatives, and prioritize correctness, "
    "consistency, and clarity in the final answer.",
    "medium": "",
    "low": "Reasoning effort is set to low. Keep your thinking brief and focused, moving "
    "directly to the conclusion without unnecessary elaboration.",
}


@dataclass(frozen=True, slots=True)
class Qwen35Options:
    """Options of the Qwen3.5 and Qwen3.6 formats (names follow the templates' kwargs)."""

    enable_thinking: bool = True
    """False: the generation prompt closes an empty think block (no reasoning)."""
    preserve_thinking: bool = False
    """True: every assistant turn keeps its think block and reasoning (the Qwen3.6+
    templates' kwarg). False (the default; Qwen3.5's template has no kwarg): turns before
    the last user query are written without one."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write
    (``enable_thinking=False``): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it
    out. Reasoning of untrained turns is rendered as the template does."""
    verbatim_arguments: bool = False
    """False (as servers render them): a call's arguments text is parsed and each value
    written as the template writes the parsed value (``{"a":1}`` -> ``{"a": 1}``,
    ``1e1`` -> ``10.0``). True: each value's JSON text is written as given."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call, as vLLM's Qwen3 parser
    reads it (``"call"``; see :data:`~renderers.core.options.DraftedCalls`)."""


@dataclass(frozen=True, slots=True)
class Qwen38Options:
    """Options of the Qwen3.8 format (names follow the template's kwargs)."""

    enable_thinking: bool = True
    """False: the generation prompt closes an empty think block (no reasoning)."""
    preserve_thinking: bool = True
    """True (template default): every assistant turn keeps its think block and
    reasoning. False: turns before the last user query are written without one."""
    reasoning_effort: Literal["xhigh", "medium", "low"] = "xhigh"
    """The instruction the system turn starts with when thinking is enabled
    (``"medium"``: none)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write
    (``enable_thinking=False``): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it
    out. Reasoning of untrained turns is rendered as the template does."""
    verbatim_arguments: bool = False
    """False (as servers render them): a call's arguments text is parsed and each value
    written as the template writes the parsed value (``{"a":1}`` -> ``{"a": 1}``,
    ``1e1`` -> ``10.0``). True: each value's JSON text is written as given."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call, as vLLM's Qwen3 parser
    reads it (``"call"``; see :data:`~renderers.core.options.DraftedCalls`)."""


def grammar(table: TokenTable) -> TagGrammar:
    """The parsing grammar: reasoning, text and ``<tool_call>`` XML in any order, with the
    separators the templates write (a blank line before a call after text, a newline
    between calls and after the last); a nested ``<think>`` is reasoning, and any marker
    sampled inside a call cuts it."""
    control = table.control_id
    return TagGrammar(
        stop=(control("<|im_end|>"),),
        eos=(control("<|endoftext|>"),),
        ends_message=(control("<|im_start|>"),),
        think=control("<think>"),
        think_end=control("</think>"),
        call=control("<tool_call>"),
        call_end=control("</tool_call>"),
        build_call=xml_call_builder("</tool_call>"),
        think_padding="\n",
        after_think="\n\n",
        before_call="\n\n",
        after_call="\n",
        before_think="\n",
        nested_think_is_reasoning=True,
        markers_cut_calls=True,
    )


class _Qwen35Family(Renderer):
    """What Qwen3.5 and Qwen3.8 share; the subclasses set the differences."""

    roles = ("system", "user", "assistant", "tool")
    _python_scalars: ClassVar[bool]  # Qwen3.5 writes True/False/None, Qwen3.8 JSON
    _inline_reasoning: ClassVar[bool]  # Qwen3.5 reads "<think>r</think>answer" text
    _empty_system_turn: ClassVar[bool]  # Qwen3.5 writes an empty system message's turn

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.im_start = control("<|im_start|>")
        self.im_end = control("<|im_end|>")
        self.end_of_text = control("<|endoftext|>")
        self.think = control("<think>")
        self.think_end = control("</think>")
        self.tool_call = control("<tool_call>")
        self.tool_call_end = control("</tool_call>")
        self.tool_response = control("<tool_response>")
        self.tool_response_end = control("</tool_response>")
        self._newline = tuple(self.table.encode("\n"))
        self.grammar = grammar(self.table)
        """The parsing grammar (see :func:`grammar`)."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.im_end, self.end_of_text)

    def _effort_instructions(self, options: Any) -> str:
        return ""

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
        add_generation_prompt: bool,
    ) -> None:
        if not messages:
            raise ValueError(f"messages: {self.name}'s template needs at least one message")
        for i, m in enumerate(messages):
            if m.role == "system" and i > 0:
                raise ValueError(
                    f"messages[{i}].role: a system message after the first is an error in "
                    f"{self.name}'s template (a system message only starts the conversation)"
                )
        last_query = _last_query(messages)
        if last_query < 0:
            raise ValueError(
                f"messages: {self.name}'s template needs a user message that is not only "
                "<tool_response> blocks"
            )
        self._system_turn(w, messages, tools, options)
        n = len(messages)
        trained = not add_generation_prompt and messages[-1].role == "assistant"
        for i, m in enumerate(messages):
            if m.role == "user":
                w.control(self.im_start, i)
                w.text("user\n" + plain_text(m, i, self.name).strip(), i)
                w.control(self.im_end, i)
                w.text("\n", i)
            elif m.role == "assistant":
                think_block = options.preserve_thinking or i > last_query
                if w.trains(i) and not think_block:
                    raise ValueError(
                        f"messages[{i}]: {self.name} writes a turn before the last user query "
                        "without the think block its generation prompt opens, so it cannot be "
                        "trained; train turns after the last user query (one example per "
                        "turn), or pass preserve_thinking=True"
                    )
                # The last turn, and any trained one, is written as the model samples it
                # after the generation prompt.
                last = (trained and i == n - 1) or w.trains(i)
                self._assistant(w, m, i, think_block, last, options)
            elif m.role == "tool":
                if i == 0 or messages[i - 1].role != "tool":
                    w.control(self.im_start, i)
                    w.text("user", i)
                w.text("\n", i)
                w.control(self.tool_response, i)
                w.text("\n" + plain_text(m, i, self.name).strip() + "\n", i)
                w.control(self.tool_response_end, i)
                if i == n - 1 or messages[i + 1].role != "tool":
                    w.control(self.im_end, i)
                    w.text("\n", i)
        if add_generation_prompt:
            w.control(self.im_start)
            w.text("assistant\n")
            if options.enable_thinking:
                w.control(self.think)
                w.text("\n")
            else:
                self._empty_think_block(w, -1)

    def _system_turn(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
    ) -> None:
        """The effort instruction, the tool block and the system message, a blank line
        apart. An empty system message alone is an empty turn in Qwen3.5's template, nothing
        in Qwen3.8's."""
        first = messages[0]
        system = plain_text(first, 0, self.name).strip() if first.role == "system" else None
        effort = self._effort_instructions(options)
        if not (effort or tools or system or (system is not None and self._empty_system_turn)):
            return
        w.control(self.im_start)
        w.text("system\n")
        separator = ""
        if effort:
            w.text(effort)
            separator = "\n\n"
        if tools:
            w.text(separator)
            w.template(_TOOLS_INTRO)
            for tool in tools:
                w.text("\n" + json.dumps(tool, ensure_ascii=False))
            w.template(_TOOLS_OUTRO)
            separator = "\n\n"
        if system:
            w.text(separator + system, 0)
        w.control(self.im_end)
        w.text("\n")

    def _empty_think_block(self, w: TokenWriter, msg: int) -> None:
        w.control(self.think, msg)
        w.text("\n\n", msg)
        w.control(self.think_end, msg)
        w.text("\n\n", msg)

    def _assistant(
        self,
        w: TokenWriter,
        m: Message,
        i: int,
        think_block: bool,
        last: bool,
        options: Any,
    ) -> None:
        parts = _assistant_parts(m) if self._inline_reasoning else list(m.parts)
        has_reasoning = any(type(p) is ThinkingPart and p.text.strip() for p in parts)
        if last and not options.enable_thinking and has_reasoning:
            if not w.trains(i):
                last = False  # not trained: its reasoning as the template writes it
            elif options.reasoning == "error":
                raise ValueError(
                    f"messages[{i}]: {self.name} with enable_thinking=False cannot write the "
                    "reasoning of this trained turn (the generation prompt closes an empty "
                    "think block); pass reasoning='drop' to leave it out, or remove it"
                )
            else:
                parts = [p for p in parts if type(p) is not ThinkingPart]
        w.control(self.im_start, i)
        w.text("assistant\n", i)
        previous: str | None = None  # the kind of the last thing written
        if think_block:
            first = parts[0] if parts and type(parts[0]) is ThinkingPart else None
            if first is not None:
                parts = parts[1:]
            if last and not options.enable_thinking:
                self._empty_think_block(w, i)  # exactly the generation prompt's block
            else:
                # The generation prompt ends with "<think>⏎"; the sampled reasoning follows,
                # encoded on its own in a supervised example (see the module docs).
                w.control(self.think, i)
                if last:
                    w.encoded(self._newline, i)
                else:
                    w.text("\n", i)
                reasoning = first.text.strip() if first is not None else ""
                w.text(reasoning + "\n", i, True)
                w.control(self.think_end, i, True)
                w.text("\n\n", i, True)
            previous = THINKING
        else:
            parts = [p for p in parts if type(p) is not ThinkingPart]
        for part in joined_text_parts(parts):
            if type(part) is ThinkingPart:
                if previous == TOOL_CALL:
                    w.text("\n", i, True)
                w.control(self.think, i, True)
                w.text("\n" + part.text.strip() + "\n", i, True)
                w.control(self.think_end, i, True)
                w.text("\n\n", i, True)
                previous = THINKING
            elif type(part) is TextPart:
                text = part.text.strip()
                if text:
                    w.text(("\n" if previous == TOOL_CALL else "") + text, i, True)
                    previous = TEXT
            else:
                separator = {TEXT: "\n\n", TOOL_CALL: "\n"}.get(previous or "", "")
                w.text(separator, i, True)
                w.control(self.tool_call, i, True)
                if type(part) is ToolCallPart:
                    w.text(self._call_body(part, i, options.verbatim_arguments), i, True)
                else:
                    assert type(part) is UnparsedToolCallPart
                    w.text(part.raw, i, True)
                w.control(self.tool_call_end, i, True)
                previous = TOOL_CALL
        w.control(self.im_end, i, True)
        w.text("\n", i)

    def _call_body(self, part: ToolCallPart, i: int, verbatim: bool) -> str:
        """``⏎<function=NAME>⏎<parameter=KEY>⏎{value}⏎</parameter>⏎...</function>⏎``: each
        value as the template writes the parsed value, or as given (``verbatim``)."""
        lines = [f"\n<function={part.name}>\n"]
        if part.arguments != "":  # no arguments (see the module docs)
            members = self._parameters(part, i, verbatim)
            lines += [f"<parameter={key}>\n{text}\n</parameter>\n" for key, text in members]
        lines.append("</function>\n")
        return "".join(lines)

    def _parameters(self, part: ToolCallPart, i: int, verbatim: bool) -> list[tuple[str, str]]:
        """Each argument's key and the text of its ``<parameter>`` block."""
        checked_arguments(part, i)
        try:
            if verbatim:
                members = [(k, v, raw) for k, v, raw in json_object_members(part.arguments)]
            else:
                parsed = json.loads(part.arguments)
                if not isinstance(parsed, dict):
                    raise ValueError(f"expected an object, got {type(parsed).__name__}")
                members = [(k, v, "") for k, v in parsed.items()]
        except ValueError as exc:
            raise ValueError(
                f"messages[{i}]: arguments of tool call {part.name!r} must be a JSON object, "
                f"which {self.name} writes one <parameter> per key ({exc}): "
                f"{part.arguments[:60]!r}"
            ) from None
        out = []
        for key, value, raw in members:
            if isinstance(value, str):
                text = value
            elif self._python_scalars and (value is None or isinstance(value, bool)):
                text = str(value)  # Qwen3.5: ``|string``, as Python prints it
            elif verbatim:
                text = raw
            elif self._python_scalars and not isinstance(value, (dict, list)):
                text = str(value)  # a number: ``|string`` (``10.0``, ``1e+20``)
            else:
                text = _TOJSON(value)  # ``tojson``
            out.append((key, text))
        return out

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return TaggedParser(
            self.grammar,
            self.table,
            events,
            opens_reasoning=options.enable_thinking,
            calls_end_reasoning=options.drafted_calls == "call",
        )

    # -- multi-turn rollouts ------------------------------------------------------------

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt ends "<think>⏎".
        opened = list(prompt_ids[-1 - len(self._newline) :]) == [self.think, *self._newline]
        return self.parse_response(completion_ids, **{**options, "enable_thinking": opened})

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        return 0, self.grammar.closing(result, (self.im_end,))

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "text is trimmed and re-tokenized (a sampled tokenization may differ from encoding it)",
            "tool-call parameters are re-serialized",
        ]
        if not self.options.preserve_thinking:
            reasons.insert(0, "reasoning of turns before the last user query is dropped")
        return ExtensionProperty(False, "; ".join(reasons))


class Qwen35Renderer(_Qwen35Family):
    """Renderer and parser for Qwen3.5."""

    name = "qwen3.5"
    default_model = "Qwen/Qwen3.5-27B"
    model_ids = (
        "Qwen/Qwen3.5-27B",
        "Qwen/Qwen3.5-397B-A17B",
        "Qwen/Qwen3.5-35B-A3B",
        "Qwen/Qwen3.5-4B",
    )
    Options = Qwen35Options
    _python_scalars = True
    _inline_reasoning = True
    _empty_system_turn = True


class Qwen36Renderer(_Qwen35Family):
    """Renderer and parser for Qwen3.6 (Qwen3.5's format, scalars written as JSON); the
    model ids are those TRL's ``chat_templates/README.md`` names for ``qwen3_6.jinja``."""

    name = "qwen3.6"
    default_model = "Qwen/Qwen3.6-27B"
    model_ids = (
        "Qwen/Qwen3.6-27B",
        "Qwen/Qwen3.6-27B-FP8",
        "Qwen/Qwen3.6-35B-A3B",
        "Qwen/Qwen3.6-35B-A3B-FP8",
    )
    Options = Qwen35Options
    _python_scalars = False
    _inline_reasoning = True
    _empty_system_turn = True


class Qwen38Renderer(_Qwen35Family):
    """Renderer and parser for Qwen3.8 (reasoning effort, reasoning kept in history)."""

    name = "qwen3.8"
    default_model = "Qwen/Qwen3.8-27B"
    Options = Qwen38Options
    _python_scalars = False
    _inline_reasoning = False
    _empty_system_turn = False

    def _effort_instructions(self, options: Any) -> str:
        return _EFFORT_INSTRUCTIONS[options.reasoning_effort] if options.enable_thinking else ""


def _last_query(messages: list[Message]) -> int:
    """The index of the last user message that is a query, not wrapped tool output (the
    templates' ``last_query_index``), or -1."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            text = messages[i].text.strip()
            if not (text.startswith("<tool_response>") and text.endswith("</tool_response>")):
                return i
    return -1
