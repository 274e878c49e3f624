"""GLM-5.2, GLM-5.3 and GLM-5.3-Flash (``zai-org/GLM-5.*``): role tokens and no end-of-turn
token, a think block in every assistant turn, key/value tool calls.

What the format renders (shown on several lines; there is no newline between messages)::

    [gMASK]<sop><|system|>Reasoning Effort: Max
    <|system|>⏎# Tools⏎⏎You may call one or more functions ...<tools>⏎{tool JSON}⏎...</tools>⏎⏎
        For each function call, output ...:⏎<tool_call>{function-name}<arg_key>...</tool_call>
    <|system|>{system}
    <|user|>{text}
    <|assistant|><think>{reasoning}</think>{text}<tool_call>NAME<arg_key>KEY</arg_key>
        <arg_value>VALUE</arg_value>...</tool_call>
    <|observation|><tool_response>{result}</tool_response><tool_response>...
    <|assistant|><think>

Every role token, ``<think>``, ``</think>``, ``<tool_call>``, ``</tool_call>``,
``<tool_response>``, ``</tool_response>``, ``<arg_key>``, ``</arg_key>``, ``<arg_value>``,
``</arg_value>``, ``[gMASK]`` and ``<sop>`` are single control tokens.

- **Reasoning effort**: the prompt always starts with a system segment
  ``Reasoning Effort: Max`` (``High``, and GLM-5.3's ``Low``; option
  ``reasoning_effort``).
- **Tools**: a system segment of their own, before the conversation's system message:
  one line per tool, the tool's function object (``strict`` and ``defer_loading``
  removed, a tool with a true ``defer_loading`` skipped) as ``tojson`` (key order kept).
- **System, user and tool messages** are written as given. Consecutive tool results
  share one ``<|observation|>``.
- **Assistant turns**: ``<think>{reasoning}</think>`` (``<think></think>`` without
  reasoning, or for turns up to the last user message with ``clear_thinking``), the text
  stripped, then each call: a string value as is, any other value as ``tojson``; a
  call's arguments given as JSON text are parsed first (what servers do before
  templating; ``""`` is a call without arguments).
- **No end-of-turn token**: a turn ends at the next role token, which the model samples:
  ``<|user|>`` after an answer, ``<|observation|>`` after calls (with ``<|endoftext|>``,
  the sampler's stop tokens). A trained turn ends with that token: the next message's
  own (trained with the turn), or, for the conversation's last message, the one the model
  would sample (which the template, ending there, does not write).
- **Generation prompt**: ``<|assistant|><think>``: the completion starts inside the
  reasoning, and a turn without reasoning (``<think></think>``) continues it, so every
  turn after the last user message trains after exactly its prompt. Reasoning of a trained
  turn up to the last user message, which ``clear_thinking`` drops, is refused or dropped
  (option ``reasoning``).

Parsing: parts in sampled order on the shared tagged grammar
(:class:`~renderers.core.grammars.TagGrammar`); reasoning ends at ``</think>``, a
``<tool_call>`` drafted inside it stays reasoning with an issue. A call's ``NAME`` and
``<arg_key>``/``<arg_value>`` pairs become a :class:`ToolCallPart` whose arguments are a
JSON object (a value that is JSON other than a string kept as sampled, others strings;
:func:`~renderers.core.grammars.glm_call_builder`). ``<|user|>`` and ``<|observation|>``
end the message (stop), ``<|endoftext|>`` too (end of sequence); ``<|assistant|>`` or
``<|system|>`` before them ends it as malformed. Nothing sampled is lost.

Oracles: the official GLM-5 templates (``zai-org/GLM-5.3``'s ``chat_template.jinja``) are
not available here (TRL keeps only GLM-4.5's ``glm4moe.jinja``, a different format:
newlines after role tokens, no effort segment). This renderer is checked against
tml-renderers 0.2.1 (``Glm52``, ``Glm53``, ``Glm53Flash``, with the tokenizer
``GlmTokenizer``) and follows tinker-cookbook's ``glm5_3`` (thinking-machines-lab/
tinker-cookbook, ``tinker_cookbook/renderers/glm5_3.py`` at 1e3e7518), which documents the
template, where the two differ:

- GLM-5.3's ``clear_thinking`` defaults to False (the template's default as tinker-cookbook
  documents it; GLM-5.2's is True); tml clears by default for all three;
- the last trained turn ends with ``<|user|>`` or ``<|observation|>`` (tml:
  ``<|endoftext|>``);
- a tool's JSON keeps its key order (tml sorts a schema's ``properties``).

Agreement with tml on the shared corpus (40 of its 44 conversations: list content and
control-token spellings are divergences below; 58 generation prompts, 31 trained
answers; 6 option sets), tests/test_glm5.py: every prompt (30 of 58 as given, the others
differing only by tml's sorted ``properties``), every supervised example but its last
token, every parse of a trained turn (tml refuses the one without content). tinker-cookbook
was read, not run (not installed here).

Divergences, on purpose: message text spelling a control token is ordinary text (so
assistant text spelling ``<think>…</think>`` is text, not the template's inline
reasoning); list-of-parts content is its text parts joined; consecutive tool results are
written in the order given (the template reorders them by call id when every id
matches); parts in a non-canonical order are written in that order with the same markers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from renderers.core.engine import StreamParser
from renderers.core.grammars import TaggedParser, TagGrammar, glm_call_builder
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
    "Glm52Options",
    "Glm52Renderer",
    "Glm53FlashRenderer",
    "Glm53Options",
    "Glm53Renderer",
]

_TOJSON = json.JSONEncoder(ensure_ascii=False).encode

_TOOLS_INTRO = (
    "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
_TOOLS_OUTRO = (
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
    "<arg_value>{arg-value-2}</arg_value>...</tool_call>"
)


@dataclass(frozen=True, slots=True)
class Glm52Options:
    """Options of the GLM-5.2 format (names follow the template's kwargs)."""

    reasoning_effort: Literal["high", "max"] = "max"
    """The ``Reasoning Effort`` system segment every prompt starts with."""
    clear_thinking: bool = True
    """True (GLM-5.2's default): turns up to the last user message are written with an
    empty think block. False: every turn keeps its reasoning."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (a turn
    up to the last user message with ``clear_thinking``): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call (``"call"``)."""


@dataclass(frozen=True, slots=True)
class Glm53Options:
    """Options of the GLM-5.3 and GLM-5.3-Flash format (names follow the template's
    kwargs)."""

    reasoning_effort: Literal["low", "high", "max"] = "max"
    """The ``Reasoning Effort`` system segment every prompt starts with."""
    clear_thinking: bool = False
    """False (GLM-5.3's default): every turn keeps its reasoning. True: turns up to the
    last user message are written with an empty think block."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (a turn
    up to the last user message with ``clear_thinking``): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call (``"call"``)."""


class Glm52Renderer(Renderer):
    """Renderer and parser for GLM-5.2 (GLM-5.3 and 5.3-Flash are subclasses)."""

    name = "glm5.2"
    default_model = "zai-org/GLM-5.2"
    tokenizer_source = "tml_renderers.tokenizers:GlmTokenizer"
    Options: ClassVar[type[Any]] = Glm52Options
    roles = ("system", "user", "assistant", "tool")
    message_markers = MessageMarkers(
        starts={"<|system|>": "", "<|user|>": "", "<|assistant|>": "", "<|observation|>": ""}
    )

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.gmask = control("[gMASK]")
        self.sop = control("<sop>")
        self.system = control("<|system|>")
        self.user = control("<|user|>")
        self.assistant = control("<|assistant|>")
        self.observation = control("<|observation|>")
        self.end_of_text = control("<|endoftext|>")
        self.think = control("<think>")
        self.think_end = control("</think>")
        self.tool_call = control("<tool_call>")
        self.tool_call_end = control("</tool_call>")
        self.tool_response = control("<tool_response>")
        self.tool_response_end = control("</tool_response>")
        self.arg_key = control("<arg_key>")
        self.arg_key_end = control("</arg_key>")
        self.arg_value = control("<arg_value>")
        self.arg_value_end = control("</arg_value>")
        self.grammar = TagGrammar(
            stop=(self.user, self.observation),
            eos=(self.end_of_text,),
            ends_message=(self.assistant, self.system),
            think=self.think,
            think_end=self.think_end,
            call=self.tool_call,
            call_end=self.tool_call_end,
            build_call=glm_call_builder("</tool_call>"),
        )
        """The parsing grammar: think blocks, text and key/value calls in any order."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.user, self.observation, self.end_of_text)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
        add_generation_prompt: bool,
    ) -> None:
        w.control(self.gmask)
        w.control(self.sop)
        w.control(self.system)
        w.text("Reasoning Effort: " + options.reasoning_effort.capitalize())
        if tools:
            w.control(self.system)
            w.template(_TOOLS_INTRO)
            w.text("".join(line + "\n" for line in _tool_lines(tools)))
            w.template(_TOOLS_OUTRO)
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        headers = {"system": self.system, "user": self.user, "assistant": self.assistant}
        for i, m in enumerate(messages):
            previous = messages[i - 1].role if i > 0 else None
            # After an assistant turn, this message's role token ended it (written there).
            if m.role == "assistant":
                if previous != "assistant":
                    w.control(self.assistant, i)
                cleared = options.clear_thinking and i <= last_user
                self._assistant(w, m, i, cleared, messages[i + 1 :], options)
            elif m.role == "tool":
                if previous not in ("tool", "assistant"):
                    w.control(self.observation, i)
                w.control(self.tool_response, i)
                w.text(plain_text(m, i, self.name), i)
                w.control(self.tool_response_end, i)
            else:
                if previous != "assistant":
                    w.control(headers[m.role], i)
                w.text(plain_text(m, i, self.name), i)
        if add_generation_prompt:
            w.control(self.assistant)
            w.control(self.think)

    def _assistant(
        self,
        w: TokenWriter,
        m: Message,
        i: int,
        cleared: bool,
        following: list[Message],
        options: Any,
    ) -> None:
        """The turn after its role token, and the role token that ends it (the next
        message's, or for a trained last turn the one the model samples)."""
        trained = w.trains(i)
        parts = joined_text_parts(m.parts)
        reasoning = parts[0].text if parts and type(parts[0]) is ThinkingPart else ""
        if parts and type(parts[0]) is ThinkingPart:
            parts = parts[1:]
        if cleared and reasoning:
            if trained and options.reasoning == "error":
                raise reasoning_error(
                    self.name, i, "clear_thinking drops reasoning up to the last user message"
                )
            reasoning = ""
        w.control(self.think, i)  # the generation prompt ends here
        w.text(reasoning, i, True)
        w.control(self.think_end, i, True)
        calls = False
        for k, part in enumerate(parts):
            if type(part) is TextPart:
                w.text(part.text.strip() if k == 0 else part.text, i, True)
            elif type(part) is ThinkingPart:
                w.control(self.think, i, True)
                w.text(part.text, i, True)
                w.control(self.think_end, i, True)
            else:
                calls = True
                w.control(self.tool_call, i, True)
                if type(part) is ToolCallPart:
                    self._call(w, part, i)
                else:
                    assert type(part) is UnparsedToolCallPart
                    w.text(part.raw, i, True)
                w.control(self.tool_call_end, i, True)
        end = self.observation if calls else self.user
        if following:
            nxt = following[0].role
            if nxt == "assistant":
                end = self.assistant
            elif nxt == "system":
                end = self.system
            else:
                end = self.observation if nxt == "tool" else self.user
            if trained and end not in (self.user, self.observation):
                raise ValueError(
                    f"messages[{i}]: {self.name} ends this turn with the next message's "
                    f"{self.table.control_text(end)}, which is not a token the model stops "
                    "on, so it cannot be trained; train it on the conversation cut after it"
                )
            w.control(end, i, trained)
        elif trained:
            w.control(end, i, True)

    def _call(self, w: TokenWriter, part: ToolCallPart, i: int) -> None:
        """``NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...``."""
        # ``""``: no arguments (vLLM hands the template ``{}`` for it).
        arguments = json.loads(checked_arguments(part, i)) if part.arguments else {}
        if not isinstance(arguments, dict):
            raise ValueError(
                f"messages[{i}]: arguments of tool call {part.name!r} must be a JSON object, "
                f"which {self.name} writes as key/value pairs: {part.arguments[:60]!r}"
            )
        w.text(part.name, i, True)
        for key, value in arguments.items():
            w.control(self.arg_key, i, True)
            w.text(key, i, True)
            w.control(self.arg_key_end, i, True)
            w.control(self.arg_value, i, True)
            w.text(value if isinstance(value, str) else _TOJSON(value), i, True)
            w.control(self.arg_value_end, i, True)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        return TaggedParser(
            self.grammar,
            self.table,
            events,
            opens_reasoning=True,
            calls_end_reasoning=options.drafted_calls == "call",
        )

    # -- multi-turn rollouts ------------------------------------------------------------

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if result.stop_token_id is not None:
            return 0, []
        calls = any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in result.message.parts)
        end = self.observation if calls else self.user
        return 0, self.grammar.closing(result, (end,))

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "text is stripped and re-tokenized (a sampled tokenization may differ from "
            "encoding it)",
            "tool-call arguments are re-serialized",
        ]
        if self.options.clear_thinking:
            reasons.insert(0, "reasoning of turns up to the last user message is dropped")
        return ExtensionProperty(False, "; ".join(reasons))


class Glm53Renderer(Glm52Renderer):
    """Renderer and parser for GLM-5.3 (``Low`` effort; reasoning kept by default)."""

    name = "glm5.3"
    default_model = "zai-org/GLM-5.3"
    Options = Glm53Options


class Glm53FlashRenderer(Glm52Renderer):
    """Renderer and parser for GLM-5.3-Flash (GLM-5.3's format)."""

    name = "glm5.3_flash"
    default_model = "zai-org/GLM-5.3-Flash"
    Options = Glm53Options


def _tool_lines(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each declared tool's function object as ``tojson`` (``strict`` and
    ``defer_loading`` removed; a tool with a true ``defer_loading`` skipped)."""
    lines = []
    for tool in tools:
        function = tool.get("function", tool)
        if function.get("defer_loading") or tool.get("defer_loading"):
            continue
        kept = {k: v for k, v in function.items() if k not in ("strict", "defer_loading")}
        lines.append(_TOJSON(kept))
    return lines
