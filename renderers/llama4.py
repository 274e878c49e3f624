"""Llama 4 Scout / Maverick Instruct: header turns, JSON tool calls after ``<|python_end|>``.

What the official template renders (the ``chat_template`` of transformers 5.24.0's
``Llama4Processor``, ``transformers/models/llama4/processing_llama4.py``, the template of
the Hub's ``meta-llama/Llama-4-Scout-17B-16E-Instruct``, which is not cached here;
llama-cpp-python's ``llama_chat_format.py`` keeps the same statements, citing the Hub's
``tokenizer_config.json``; ``⏎`` is a newline)::

    <|begin_of_text|>
    <|header_start|>system<|header_end|>⏎⏎     (only with a system message)
    [Environment: ipython⏎]                    (with tools)
    {system, trimmed}<|eot|>
    <|header_start|>user<|header_end|>⏎⏎{tool instructions and tools}{text, trimmed}<|eot|>
    <|header_start|>user<|header_end|>⏎⏎{text}<|eot|>
    <|header_start|>assistant<|header_end|>⏎⏎{text}<|eot|>
    <|header_start|>assistant<|header_end|>⏎⏎<|python_start|>{text}<|python_end|>
        {"name": "NAME", "parameters": ARGS}...<|eot|>      (a call turn, on one line)
    <|header_start|>ipython<|header_end|>⏎⏎{result as a JSON string}<|eot|>

Unlike Llama 3.1's, the template writes no date header and no system turn without a
system message, and does not trim text (only the system message and, with tools, the first
user message). With tools, ``tools_in_user_message=True`` (the default) puts the
instructions and each tool as ``tojson(indent=4)`` followed by ``⏎⏎`` before the first user
message's text; ``False`` puts them in the system turn (written only with a system
message) before the system text. An assistant message with tool calls is written as its
text between ``<|python_start|>`` and ``<|python_end|>`` (the pair is written even
without text), then each call as ``{"name": "NAME", "parameters": tojson(ARGS)}``, back to
back. A tool result is ``tojson`` of its text, a quoted JSON string. Sampling stops at
``<|eot|>`` or ``<|eom|>``; ``<|end_of_text|>`` is end-of-sequence.

Parsing (the grammar layer's :class:`~renderers.core.grammars.BareJsonParser`, whose
``breaks`` drop ``<|python_start|>``/``<|python_end|>`` and read each side on its own):
text that is nothing but calls is calls, in any of the spellings the two oracles write or
the model is prompted to sample: the template's ``{"name": ..., "parameters": ...}``
objects back to back (or a JSON list of them), Meta's ``{"type": "function", "name": ...,
"parameters": ...}`` (what llama-models' encoder writes with ``ToolPromptFormat.json``),
and Meta's pythonic list ``[get_weather(city="Paris"), now()]`` (``python_list``, the
format of Meta's Llama 4 tool prompts, which vLLM's ``llama4_pythonic`` parser reads); so
the template's call turn parses back to its text and calls in order. Any other text is
text.

Oracles (``tests/test_llama4.py``): the template above rendered by transformers'
``render_jinja_template`` and tokenized by the llama-models tokenizer (the one Meta ships
in ``llama-models`` 0.3.0, ``llama4/tokenizer.model``), and Meta's own encoder
(``llama_models.llama4.chat_format.ChatFormat.encode_dialog_prompt``, llama-models 0.3.0,
imported with placeholders for the image libraries it imports and the text path does not
use). Meta's encoder writes messages as given, so it checks the turns' framing and
tokenization; it differs from the template in three places, where this renderer follows
the template (what inference servers apply): it writes a tool call bare, as ``{"type":
"function", ...}`` (or the pythonic list), without the ``<|python_start|>`` pair; it ends a
call turn and a tool result with ``<|eom|>``; and it writes a tool result as its raw text.
The parser reads its calls and its ``<|eom|>``.

Agreement, over the 44 conversations of ``tests/corpus.py`` (43 expressible: one spells
control tokens as text; parallel calls and text beside calls, which Llama 3.1's template
refuses or drops, this one writes): with the template 61 of 61 generation prompts, 19 of
19 with tools in the system turn (a system message added where a conversation has
none), and all 43 conversations' supervised tokens under every ``train_on`` (195
examples); with Meta's encoder 31 of 31 generation prompts of the 24 conversations
without tools, and its call turns for the corpus's 19 call messages, in its JSON and
``python_list`` spellings, parse back to their calls (35 of 38; the other three it cannot
write: two hold arguments nested deeper than its ``ToolCall`` type allows, one a name that
is no Python name). No other library renders Llama 4 (tml-renderers 0.2.1 and
tinker-cookbook 0.6.1 have no Llama 4 renderer), so there is no benchmark peer.

Divergences from the template, on purpose:

- an assistant message with an empty ``tool_calls`` list is a text message (the template
  drops the whole message; servers remove the empty list first);
- reasoning (which the format has no place for) of a trained turn is refused, or dropped
  with ``reasoning="drop"``; untrained turns' reasoning is dropped as the template drops it;
- list-of-parts content is its text parts joined (the template writes only the first
  part of a system message); message text that spells a control token is encoded as
  ordinary text;
- a tool name that needs JSON escaping is refused (the template writes it unescaped).

A trained turn whose text opens with a line break cannot be trained: the template does
not trim it, and in its tokens the header's ``⏎⏎`` and the line break are one token, half
prompt and half completion (the writer refuses it, naming the message; untrained turns
are written as the template writes them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from renderers.core.assembly import json_object_members
from renderers.core.engine import StreamParser
from renderers.core.grammars import (
    BareJsonParser,
    TagGrammar,
    bare_json_call_texts,
    concatenated_json_calls,
    pythonic_calls,
)
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
from renderers.llama3 import TOJSON, TOJSON_INDENT_4, TOOLS_IN_SYSTEM, TOOLS_IN_USER
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["Llama4Options", "Llama4Renderer", "llama4_calls"]


@dataclass(frozen=True, slots=True)
class Llama4Options:
    """Options of the Llama 4 format (names follow the template's kwargs)."""

    tools_in_user_message: bool = True
    """True (template default): tools are declared in the first user message; False: in
    the system turn, which the template writes only with a system message."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn (the format has no place for it):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped, as the template drops it."""


class Llama4Renderer(Renderer):
    """Renderer and parser for Llama 4 Scout and Maverick Instruct."""

    name = "llama4"
    default_model = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    model_ids = (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
    )
    tokenizer_source = "renderers.core.packaged_tokenizers:Llama4Tokenizer"
    Options = Llama4Options
    roles = ("system", "user", "assistant", "tool", "ipython")
    message_markers = MessageMarkers(starts={"<|header_start|>": ""})

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.begin_of_text = control("<|begin_of_text|>")
        self.end_of_text = control("<|end_of_text|>")
        self.header_start = control("<|header_start|>")
        self.header_end = control("<|header_end|>")
        self.eot = control("<|eot|>")
        self.eom = control("<|eom|>")
        self.python_start = control("<|python_start|>")
        self.python_end = control("<|python_end|>")
        self.grammar = TagGrammar(
            stop=(self.eot, self.eom),
            eos=(self.end_of_text,),
            ends_message=(self.header_start,),
            breaks=(self.python_start, self.python_end),
        )
        """Text that may be calls; the ``<|python_start|>`` pair separates a call turn's
        text from its calls."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eot, self.eom, self.end_of_text)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Llama4Options,
        add_generation_prompt: bool,
    ) -> None:
        w.control(self.begin_of_text)
        start = 0
        declared = "".join(TOJSON_INDENT_4(t) + "\n\n" for t in tools or ())
        if messages and messages[0].role == "system":
            start = 1
            self._header(w, "system", 0)
            if tools is not None:
                w.text("Environment: ipython\n", 0)
                if not options.tools_in_user_message:
                    w.text(TOOLS_IN_SYSTEM + declared, 0)
            w.text(plain_text(messages[0], 0, self.name).strip(), 0)
            w.control(self.eot, 0)
        if tools is not None and options.tools_in_user_message:
            if start >= len(messages) or messages[start].role != "user":
                raise ValueError(
                    f"messages[{start}]: llama4 with tools (tools_in_user_message=True) "
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
                w.text(plain_text(m, i, self.name), i)
                w.control(self.eot, i)
        if add_generation_prompt:
            self._header(w, "assistant", -1)

    def _header(self, w: TokenWriter, role: str, i: int) -> None:
        w.control(self.header_start, i)
        w.text(role, i)
        w.control(self.header_end, i)
        w.text("\n\n", i)

    def _assistant(self, w: TokenWriter, m: Message, i: int, options: Llama4Options) -> None:
        calls = [p for p in m.parts if type(p) in (ToolCallPart, UnparsedToolCallPart)]
        text = "".join(p.text for p in m.parts if type(p) is TextPart)
        if (
            w.trains(i)
            and options.reasoning == "error"
            and any(type(p) is ThinkingPart and p.text for p in m.parts)
        ):
            raise reasoning_error(self.name, i, "the format has no place for reasoning")
        self._header(w, "assistant", i)
        if not calls:
            w.text(text, i, True)
            w.control(self.eot, i, True)
            return
        w.control(self.python_start, i, True)
        w.text(text, i, True)
        w.control(self.python_end, i, True)
        for call in calls:
            if type(call) is ToolCallPart:
                if json.dumps(call.name, ensure_ascii=False)[1:-1] != call.name:
                    raise ValueError(
                        f"messages[{i}]: tool name {call.name!r} needs JSON escaping, which "
                        "llama4's template does not do (it writes the name unescaped)"
                    )
                arguments = TOJSON(json.loads(checked_arguments(call, i)))
                w.text('{"name": "' + call.name + '", "parameters": ' + arguments + "}", i, True)
            else:
                assert type(call) is UnparsedToolCallPart
                w.text(call.raw, i, True)
        w.control(self.eot, i, True)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Llama4Options, events: bool) -> StreamParser:
        return BareJsonParser(self.grammar, self.table, events, read_calls=llama4_calls)

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "calls are re-serialized as the template writes them (<|python_start|><|python_end|>"
            '{"name": ..., "parameters": ...}; a pythonic or Meta-spelt call and <|eom|> '
            "become that form); text is re-tokenized",
        )

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if result.stop_token_id is not None:
            return 0, []
        return 0, [self.eot]


def llama4_calls(text: str, forced: bool) -> list[tuple[Part, str]] | None:
    """The calls a text region of a Llama 4 completion is, with each call's text: JSON
    ``{"name": ..., "parameters"|"arguments": ...}`` objects back to back or in a JSON list,
    Meta's ``{"type": "function", "name": ..., "parameters": ...}``, or a pythonic list
    ``[f(a=1), g()]``; ``None`` when it is none of them (it is text)."""
    stripped = text.strip()
    if stripped.startswith("["):
        return bare_json_call_texts(stripped) or pythonic_calls(stripped)
    return concatenated_json_calls(stripped, _typed_json_call)


def _typed_json_call(text: str) -> ToolCallPart | None:
    """Meta's spelling of a call, ``{"type": "function", "name": ..., "parameters": ...}``."""
    if not text.startswith("{") or '"type"' not in text:
        return None
    try:
        members = json_object_members(text)
    except ValueError:
        return None
    fields = {k: (v, raw) for k, v, raw in members}
    if (
        sorted(fields) == ["name", "parameters", "type"]
        and len(members) == 3
        and fields["type"][0] == "function"
        and isinstance(fields["name"][0], str)
    ):
        return ToolCallPart(fields["name"][0], fields["parameters"][1])
    return None
