"""Llama 3.1 / 3.2 / 3.3 Instruct: header turns, bare JSON tool calls, ``ipython`` results.

What the official template renders (``llama3_1.jinja``, kept byte for byte by TRL in
``trl/chat_templates/``; Llama 3.3 ships the same file; ``⏎`` is a newline)::

    <|begin_of_text|><|start_header_id|>system<|end_header_id|>⏎⏎
    [Environment: ipython⏎]            (with tools)
    Cutting Knowledge Date: December 2023⏎Today Date: {date_string}⏎⏎
    {system, trimmed}<|eot_id|>
    <|start_header_id|>user<|end_header_id|>⏎⏎{tool instructions and tools}{text, trimmed}<|eot_id|>
    <|start_header_id|>assistant<|end_header_id|>⏎⏎{text, trimmed}<|eot_id|>
    <|start_header_id|>assistant<|end_header_id|>⏎⏎{"name": "NAME", "parameters": ARGS}<|eot_id|>
    <|start_header_id|>ipython<|end_header_id|>⏎⏎{result as a JSON string}<|eot_id|>

The system turn is always written (without a system message its text is the date header
alone). With tools, ``tools_in_user_message=True`` (the default) puts the instructions and
each tool as ``tojson(indent=4)`` followed by ``⏎⏎`` before the first user message's text;
``False`` puts them in the system turn before the system text. ``date_string`` defaults to
``26 Jul 2024`` (Llama 3.2's template writes today's date when transformers gives it
``strftime_now``: pass ``date_string`` to render 3.2 prompts reproducibly).

An assistant turn holds text or one tool call, written as the template writes a server's
parsed arguments: ``{"name": "NAME", "parameters": tojson(ARGS)}`` (transformers' ``tojson``:
default separators, non-ASCII kept; a dict given as arguments alike). A tool result is
written as ``tojson`` of its text, a quoted JSON string (the template's ``content is
iterable`` holds for strings). Sampling stops at ``<|eot_id|>`` or ``<|eom_id|>`` (a model
told ``Environment: ipython`` may end a call turn with it); ``<|end_of_text|>`` is
end-of-sequence.

Parsing (the grammar layer's :class:`~renderers.core.grammars.BareJsonParser`): a completion
whose text is nothing but ``{"name": ..., "parameters"|"arguments": ...}`` (or a JSON list
of them) is tool calls, any other text is text. A completion that opens with
``<|python_tag|>`` (what Meta's documentation shows the model sampling with ``Environment:
ipython``) is a call that runs to the stop token, read by :func:`python_tag_call`: the JSON
call, also in Meta's spelling ``{"type": "function", "name": ..., "parameters": ...}``;
any other body (a built-in tool's ``brave_search.call(query="...")``, raw code) is an
unparsed call that keeps its text.

Oracles (``tests/test_llama3.py``): the template above rendered by transformers'
``render_jinja_template`` and tokenized by the llama-models tokenizer (the one Meta ships
in ``llama-models`` 0.3.0, ``llama3/tokenizer.model``), and Meta's own encoder
(``llama_models.llama3.chat_format.ChatFormat.encode_dialog_prompt``, llama-models 0.3.0).
Meta's encoder writes messages as given (the caller builds the system text), so it
checks the turns' framing and tokenization; it differs from the template in two places,
where this renderer follows the template (what inference servers apply): it writes a tool
call as ``{"type": "function", "name": ..., "parameters": ...}`` and a tool result as its
raw text, not a JSON string.

Agreement, over the 44 conversations of ``tests/corpus.py`` (40 expressible: three hold
parallel calls, which the template refuses; one spells control tokens as text): with
``llama3_1.jinja`` 56 of 56 generation prompts, the same 56 with ``llama3_2.jinja`` (given
``date_string``), 16 of 16 with tools in the system turn, and all 38 trainable
conversations' supervised tokens under every ``train_on``; with Meta's encoder 31 of 31
generation prompts of the 24 conversations without tools. tinker-cookbook's ``llama3``
(thinking-machines-lab/tinker-cookbook@dd7749f6, ``tinker_cookbook/renderers/llama3.py``)
is a cross-check of the turn framing only: it leaves out the date header and writes calls
as ``<function=NAME>{...}</function>``, on purpose (its docstring says so). Llama 3.0's
template (no system header, no tools) is not covered; Llama 4 (``<|header_start|>`` turns)
is :mod:`renderers.llama4`.

Divergences from the template, on purpose:

- more than one tool call in an assistant message, or a trained one with text besides
  its call, is a ``ValueError`` (the template raises for the first and silently drops the
  text of the second; an untrained history turn's text is dropped as the template does);
- reasoning (which the format has no place for) of a trained turn is refused, or dropped
  with ``reasoning="drop"``; untrained turns' reasoning is dropped as the template drops it;
- list-of-parts content is its text parts joined; message text that spells a control token
  is encoded as ordinary text;
- a tool name that needs JSON escaping is refused (the template writes it unescaped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from renderers.core.assembly import json_object_members
from renderers.core.engine import StreamParser
from renderers.core.grammars import BareJsonParser, TagGrammar, bare_json_calls
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
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["Llama3Options", "Llama3Renderer", "python_tag_call"]

TOJSON = json.JSONEncoder(ensure_ascii=False).encode
"""The template's ``tojson`` (transformers': non-ASCII kept, default separators)."""
TOJSON_INDENT_4 = json.JSONEncoder(ensure_ascii=False, indent=4).encode
"""``tojson(indent=4)``, how the template declares each tool."""
TOOL_CALL_FORMAT = (
    'Respond in the format {"name": function name, "parameters": dictionary of argument '
    "name and its value}.Do not use variables.\n\n"
)
TOOLS_IN_USER = (
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\n" + TOOL_CALL_FORMAT
)
TOOLS_IN_SYSTEM = (
    "You have access to the following functions. To call a function, please respond with "
    "JSON for a function call." + TOOL_CALL_FORMAT
)
"""The templates' tool instructions (in the first user turn or the system turn); Llama 4's
template writes the same words (:mod:`renderers.llama4` uses these)."""


@dataclass(frozen=True, slots=True)
class Llama3Options:
    """Options of the Llama 3.1 format (names follow the template's kwargs)."""

    date_string: str = "26 Jul 2024"
    """The ``Today Date`` of the system turn (the template's default)."""
    tools_in_user_message: bool = True
    """True (template default): tools are declared in the first user message; False: in
    the system turn."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn (the format has no place for it):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped, as the template drops it."""


class Llama3Renderer(Renderer):
    """Renderer and parser for Llama 3.1 / 3.2 / 3.3 Instruct."""

    name = "llama3"
    default_model = "meta-llama/Llama-3.1-8B-Instruct"
    model_ids = (
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Llama-3.1-405B-Instruct",
        "meta-llama/Llama-3.2-1B-Instruct",
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct",
    )
    tokenizer_source = "renderers.core.packaged_tokenizers:Llama3Tokenizer"
    Options = Llama3Options
    roles = ("system", "user", "assistant", "tool", "ipython")
    message_markers = MessageMarkers(starts={"<|start_header_id|>": ""})

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.begin_of_text = control("<|begin_of_text|>")
        self.end_of_text = control("<|end_of_text|>")
        self.start_header = control("<|start_header_id|>")
        self.end_header = control("<|end_header_id|>")
        self.eot = control("<|eot_id|>")
        self.eom = control("<|eom_id|>")
        self.python_tag = control("<|python_tag|>")
        self.grammar = TagGrammar(
            stop=(self.eot, self.eom),
            eos=(self.end_of_text,),
            ends_message=(self.start_header,),
            call=self.python_tag,
            build_call=python_tag_call,
        )
        """Text that may be bare JSON calls; ``<|python_tag|>`` opens a call that runs to
        the stop token."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eot, self.eom, self.end_of_text)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Llama3Options,
        add_generation_prompt: bool,
    ) -> None:
        w.control(self.begin_of_text)
        start = 0
        system = ""
        if messages and messages[0].role == "system":
            system = plain_text(messages[0], 0, self.name).strip()
            start = 1
        declared = "".join(TOJSON_INDENT_4(t) + "\n\n" for t in tools or ())
        head = "Environment: ipython\n" if tools is not None else ""
        head += f"Cutting Knowledge Date: December 2023\nToday Date: {options.date_string}\n\n"
        if tools is not None and not options.tools_in_user_message:
            head += TOOLS_IN_SYSTEM + declared
        self._header(w, "system", -1)
        w.text(head)  # (tools and the date are data: ordinary text)
        if system:
            w.text(system, 0)
        w.control(self.eot, 0 if start else -1)
        if tools is not None and options.tools_in_user_message:
            if start >= len(messages) or messages[start].role != "user":
                raise ValueError(
                    f"messages[{start}]: llama3 with tools (tools_in_user_message=True) "
                    "declares them in the first user message, which must follow the system "
                    "message; pass tools_in_user_message=False to declare them in the system turn"
                )
            self._header(w, "user", start)
            w.text(TOOLS_IN_USER + declared, start)
            w.text(plain_text(messages[start], start, self.name).strip(), start)
            w.control(self.eot, start)
            start += 1
        for i in range(start, len(messages)):
            m = messages[i]
            if m.role == "assistant":
                self._assistant(w, m, i, options)
            elif m.role in ("tool", "ipython"):
                self._header(w, "ipython", i)
                w.text(TOJSON(plain_text(m, i, self.name)), i)
                w.control(self.eot, i)
            else:
                self._header(w, m.role, i)
                w.text(plain_text(m, i, self.name).strip(), i)
                w.control(self.eot, i)
        if add_generation_prompt:
            self._header(w, "assistant", -1)

    def _header(self, w: TokenWriter, role: str, i: int) -> None:
        w.control(self.start_header, i)
        w.text(role, i)
        w.control(self.end_header, i)
        w.text("\n\n", i)

    def _assistant(self, w: TokenWriter, m: Message, i: int, options: Llama3Options) -> None:
        trained = w.trains(i)
        calls = [p for p in m.parts if type(p) in (ToolCallPart, UnparsedToolCallPart)]
        text = "".join(p.text for p in m.parts if type(p) is TextPart).strip()
        if (
            trained
            and options.reasoning == "error"
            and any(type(p) is ThinkingPart and p.text for p in m.parts)
        ):
            raise reasoning_error(self.name, i, "the format has no place for reasoning")
        if len(calls) > 1:
            raise ValueError(
                f"messages[{i}]: llama3 writes one tool call per assistant message (its "
                f"template raises for {len(calls)}); split them into consecutive messages"
            )
        if calls and text and trained:
            raise ValueError(
                f"messages[{i}]: llama3's template writes a tool-call message without its "
                "text, so this trained turn would lose it; move the text to its own message"
            )
        self._header(w, "assistant", i)
        if calls:
            call = calls[0]
            if type(call) is ToolCallPart:
                if json.dumps(call.name, ensure_ascii=False)[1:-1] != call.name:
                    raise ValueError(
                        f"messages[{i}]: tool name {call.name!r} needs JSON escaping, which "
                        "llama3's template does not do (it writes the name unescaped)"
                    )
                arguments = TOJSON(json.loads(checked_arguments(call, i)))
                w.text('{"name": "' + call.name + '", "parameters": ' + arguments + "}", i, True)
            else:
                assert type(call) is UnparsedToolCallPart
                w.text(call.raw, i, True)
        elif text:
            w.text(text, i, True)
        w.control(self.eot, i, True)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Llama3Options, events: bool) -> StreamParser:
        return BareJsonParser(self.grammar, self.table, events)

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "text is trimmed and calls are re-serialized as "
            '{"name": ..., "parameters": ...} (a <|python_tag|> call and <|eom_id|> become '
            "the template's form); text is re-tokenized",
        )

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if result.stop_token_id is not None:
            return 0, []
        return 0, [self.eot]


def python_tag_call(segments: list[str], incomplete: bool) -> Part:
    """The call after ``<|python_tag|>``: ``{"name": ..., "parameters"|"arguments": ...}``
    or Meta's ``{"type": "function", "name": ..., "parameters": ...}``; any other body is
    an unparsed call holding its text."""
    raw = segments[0]
    if incomplete:
        return UnparsedToolCallPart(raw, "cut off before <|eom_id|>", incomplete=True)
    calls = bare_json_calls(raw)
    if calls is not None and len(calls) == 1:
        return calls[0]
    try:
        members = json_object_members(raw.strip())
    except ValueError:
        members = []
    fields = {k: (v, text) for k, v, text in members}
    if (
        sorted(fields) == ["name", "parameters", "type"]
        and len(members) == 3
        and fields["type"][0] == "function"
        and isinstance(fields["name"][0], str)
    ):
        return ToolCallPart(fields["name"][0], fields["parameters"][1])
    return UnparsedToolCallPart(
        raw, 'expected a JSON call {"name": ..., "parameters": ...} after <|python_tag|>'
    )
