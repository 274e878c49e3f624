"""Mistral instruct v3 with Tekken (Mistral-Nemo, Ministral-8B, Mistral-Small-2409) and v7
with SentencePiece (Mistral-Large-2411).

**v3** (``mistral``). What the official encoder writes (mistral-common 1.13.1:
``ChatCompletionRequest`` -> ``MistralTokenizer.v3(is_tekken=True).encode_chat_completion``;
``⏎`` is a newline)::

    <s>[INST]{user}[/INST]{answer}</s>
       [INST]{user}[/INST][TOOL_CALLS][{"name": NAME, "arguments": ARGS, "id": ID}, ...]</s>
       [TOOL_RESULTS]{"content": RESULT, "call_id": ID}[/TOOL_RESULTS]{answer}</s>
       [AVAILABLE_TOOLS][{"type": "function", "function": {...}}, ...][/AVAILABLE_TOOLS]
       [INST]{system}⏎⏎{last user}[/INST]

Every control token (``<s>``, ``</s>``, ``[INST]``, ``[/INST]``, ``[TOOL_CALLS]``,
``[AVAILABLE_TOOLS]``, ``[/AVAILABLE_TOOLS]``, ``[TOOL_RESULTS]``, ``[/TOOL_RESULTS]``) is a
single token. The encoder's request normalizer shapes the conversation first:

- system messages are taken out wherever they stand; their texts (empty ones skipped)
  joined by ``⏎⏎`` are written before the text of the **last** user turn, ``⏎⏎``
  between; the tools (``json.dumps`` of each as ``{"type": "function", "function":
  {"name", "description" (default ""), "parameters"}}``) are written right before that
  message's ``[INST]``;
- consecutive user messages (a system message between them keeps them apart) are one
  turn, their texts (empty ones skipped) joined by ``⏎⏎``; a conversation that does not
  start with a user message gets an empty one;
- an assistant message is its text with trailing spaces removed, or its tool calls (not
  both: the encoder refuses that, and an assistant message with neither), then ``</s>``;
  each call's arguments and each tool result are parsed as JSON where they are JSON and
  written back with ``json.dumps`` (``""`` is ``{}``), else written as JSON strings; an id
  is written when the call has one.

The generation prompt is the conversation as written (it ends with ``[/INST]`` or
``[/TOOL_RESULTS]``). Sampling stops at ``</s>``. A trained turn before the last user
message is written where a later prompt would put the system text and tools, so its
untrained prefix is not its own generation prompt; train such turns on the conversation
cut after them (one example per turn).

Parsing (:class:`~renderers.core.grammars.BareJsonParser` with
``calls_after_call_token``): text is text; ``[TOOL_CALLS]`` opens a JSON list of calls (or
one call object) running to ``</s>``, each with its ``"id"``; a body that is no such list
is an unparsed call keeping its text. ``[INST]``, ``[AVAILABLE_TOOLS]`` or
``[TOOL_RESULTS]`` sampled before ``</s>`` end the message as malformed.

Oracle (``tests/test_mistral.py``): mistral-common's own encoder, the official one (its
``ValidationMode.test`` for prompts, ``finetuning`` for whole conversations). It validates
what this renderer writes as given: tool-call ids must be 9 letters or digits, a system
message may not follow an assistant one. Divergences, on purpose:

- those two rules, and its rule that a tool name holds only letters, digits, ``_`` and
  ``-``, are not enforced (a dataset's ids and names are written as they are);
- the text parts of a list-of-parts message are joined as one text (the message model
  joins them); the encoder joins a request's text chunks with ``⏎⏎``;
- consecutive assistant messages (which the encoder merges into one) are refused, naming
  the message: merge them;
- a tool's keys besides name, description and parameters are left out (the encoder's
  model refuses them); message text that spells a control token is ordinary text (the
  encoder does the same);
- reasoning (this version has no ``[THINK]``) of a trained turn is refused, or dropped with
  ``reasoning="drop"``; untrained turns' reasoning is dropped.

Agreement, over the 44 conversations of ``tests/corpus.py``: 55 of 55 generation prompts
and 30 of 30 whole conversations (under every ``train_on``) of the 39 it can compare equal
the encoder's ids; three conversations both refuse (an empty assistant message, text
beside calls: asserted), the encoder refuses one this renderer writes (a tool named
``get-weather.v2``) and one differs on purpose (list content, below).

**v7** (``mistral_v7``): mistral-common 1.13.1's ``MistralTokenizer.v7()`` with its
SentencePiece file ``mistral_instruct_tokenizer_241114.model.v7``. SentencePiece encodes
every text after a space (``␣``, its dummy prefix; none before an empty text), so each text
the encoder writes begins with one::

    <s>[SYSTEM_PROMPT]␣{system}[/SYSTEM_PROMPT]
       [INST]␣{user}[/INST]␣{answer}[TOOL_CALLS]␣[{"name": NAME, "arguments": ARGS, "id": ID}]</s>
       [TOOL_RESULTS]␣{ID}[TOOL_CONTENT]␣{result}[/TOOL_RESULTS]␣{answer}</s>
       [AVAILABLE_TOOLS]␣[{"type": "function", "function": {...}}, ...][/AVAILABLE_TOOLS]
       [INST]␣{last user}[/INST]

What changed from v3 (``[SYSTEM_PROMPT]``, ``[/SYSTEM_PROMPT]`` and ``[TOOL_CONTENT]`` are
single tokens too):

- each system message stays where it stands, in ``[SYSTEM_PROMPT]`` ... ``[/SYSTEM_PROMPT]``
  (an empty one too); only an empty conversation gets an empty user message;
- an assistant message may hold text and calls: its text (trailing spaces removed), then
  ``[TOOL_CALLS]`` and the calls;
- a tool result is its call id, ``[TOOL_CONTENT]`` and its text as given (not JSON);
- the tools, consecutive user messages, calls and the reasoning rule are v3's.

Parsing is v3's, less the format's space: one space is stripped from the start of the
text and of the calls after ``[TOOL_CALLS]`` (a completion sampled without it keeps its
text whole), and ``[SYSTEM_PROMPT]`` also ends the message. The tokenizer
(:class:`~renderers.core.packaged_tokenizers.MistralV7Tokenizer`) encodes text as it is;
like SentencePiece, it reads a ``▁`` typed in text as a space.

Oracle (``tests/test_mistral.py``, both versions): the same encoder with that tokenizer. Divergences
are v3's, less the one about text beside calls; its validator also refuses a system
message after an assistant one, which this renderer writes in place (as the encoder does
without its validator). Agreement, over the 44 conversations: 58 of 58 generation prompts
and 31 of 31 whole conversations (under every ``train_on``) of the 41 it can compare equal
the encoder's ids; both refuse an empty assistant message (asserted), the encoder refuses
the tool named ``get-weather.v2`` and list content differs on purpose.

Not covered: instruct v7 with Tekken (Pixtral-Large, Mistral-Small-2501: no space before
texts) and ``[THINK]`` (v13 and later): mistral-common ships no such tokenizer, so neither
can be checked here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from renderers.core.engine import StreamParser
from renderers.core.grammars import BareJsonParser, TagGrammar
from renderers.core.messages import Message, TextPart, ThinkingPart, ToolCallPart
from renderers.core.messages import UnparsedToolCallPart as Unparsed
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.writer import NO_MESSAGE, TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["MistralOptions", "MistralRenderer", "MistralV7Renderer"]


@dataclass(frozen=True, slots=True)
class MistralOptions:
    """Options of the Mistral formats (v3 and v7)."""

    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn (the format has no place for it):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped."""


def _json_value(text: str) -> Any:
    """The encoder's reading of a tool result or arguments text: the JSON value it spells
    (``""``: ``{}``), else the text itself."""
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _tool(tool: Mapping[str, Any], k: int) -> dict[str, Any]:
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        raise ValueError(f"tools[{k}]: mistral declares function tools only, got {tool!r:.60}")
    return {
        "type": "function",
        "function": {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {}),
        },
    }


def _user_run(messages: list[Message], i: int) -> list[int]:
    """The user messages from ``i`` on that the encoder joins into one turn."""
    run = [i]
    while run[-1] + 1 < len(messages) and messages[run[-1] + 1].role == "user":
        run.append(run[-1] + 1)
    return run


class MistralRenderer(Renderer):
    """Renderer and parser for Mistral instruct v3 (Tekken)."""

    name = "mistral"
    default_model = "mistralai/Mistral-Nemo-Instruct-2407"
    model_ids = (
        "mistralai/Mistral-Nemo-Instruct-2407",
        "mistralai/Ministral-8B-Instruct-2410",
        "mistralai/Mistral-Small-Instruct-2409",
    )
    tokenizer_source = "renderers.core.packaged_tokenizers:TekkenTokenizer"
    Options = MistralOptions
    roles = ("system", "user", "assistant", "tool")
    message_markers = MessageMarkers(
        starts={"[INST]": "user", "[TOOL_RESULTS]": "tool", "[AVAILABLE_TOOLS]": "tools"},
        after={"[/INST]": "assistant", "[/TOOL_RESULTS]": "assistant"},
    )
    _text_prefix = ""
    """Written before every text the encoder writes (v7's SentencePiece dummy prefix)."""
    _text_beside_calls = False
    """An assistant message may hold text and calls (v7), not one or the other (v3)."""

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.bos = control("<s>")
        self.eos = control("</s>")
        self.inst = control("[INST]")
        self.inst_end = control("[/INST]")
        self.tools_start = control("[AVAILABLE_TOOLS]")
        self.tools_end = control("[/AVAILABLE_TOOLS]")
        self.results = control("[TOOL_RESULTS]")
        self.results_end = control("[/TOOL_RESULTS]")
        self.tool_calls = control("[TOOL_CALLS]")
        self.grammar = TagGrammar(
            stop=(self.eos,),
            ends_message=tuple(map(control, self.message_markers.starts)),  # another turn
            call=self.tool_calls,
            text_prefix=self._text_prefix,
        )
        """Text, or ``[TOOL_CALLS]`` and a JSON list of calls up to ``</s>``."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    # -- rendering ----------------------------------------------------------------------

    def _text(self, w: TokenWriter, text: str, i: int, sampled: bool = False) -> None:
        """A text the encoder encodes on its own (v7: after a space, SentencePiece's dummy
        prefix; none before empty text)."""
        if text:
            w.text(self._text_prefix + text, i, sampled)

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: MistralOptions,
        add_generation_prompt: bool,
    ) -> None:
        system = "\n\n".join(
            t
            for i, m in enumerate(messages)
            if m.role == "system"
            for t in [plain_text(m, i, self.name)]
            if t
        )
        turns = [i for i, m in enumerate(messages) if m.role != "system"]
        last_user = max((i for i in turns if messages[i].role == "user"), default=-1)
        declared = [_tool(t, k) for k, t in enumerate(tools or ())]
        w.control(self.bos)
        if not turns or messages[turns[0]].role != "user":
            # The empty user message the normalizer inserts (the last one if none follows).
            alone = last_user < 0
            self._user_turn(w, messages, [], declared if alone else [], system if alone else "")
        for i in turns:
            m = messages[i]
            previous = messages[i - 1].role if i else None  # a system message splits runs
            if m.role == "user":
                if previous != "user":
                    run = _user_run(messages, i)
                    if last_user in run:  # the tools and the system text go here
                        self._user_turn(w, messages, run, declared, system)
                    else:
                        self._user_turn(w, messages, run, [], "")
            else:
                self._reply(w, messages, i, options)

    def _user_turn(
        self, w: TokenWriter, messages: list[Message], run: list[int], tools: list[Any], system: str
    ) -> None:
        """A turn of user messages ``run``, the tools before it; its text is ``system`` then
        ``⏎⏎``, and the messages' texts (empty ones skipped) joined by ``⏎⏎``, which the
        encoder encodes as one text."""
        i = run[0] if run else NO_MESSAGE
        if tools:
            w.control(self.tools_start, i)
            self._text(w, json.dumps(tools, ensure_ascii=False), i)
            w.control(self.tools_end, i)
        w.control(self.inst, i)
        separator = self._text_prefix
        if system:
            w.text(separator + system + "\n\n", i)
            separator = ""
        for j in run:
            text = plain_text(messages[j], j, self.name)
            if text:
                w.text(separator + text, j)
                separator = "\n\n"
        w.control(self.inst_end, run[-1] if run else NO_MESSAGE)

    def _reply(
        self, w: TokenWriter, messages: list[Message], i: int, options: MistralOptions
    ) -> None:
        """An assistant message or a tool result."""
        m = messages[i]
        if m.role == "tool":
            text = plain_text(m, i, self.name)
            if not m.tool_call_id:
                raise ValueError(
                    f"messages[{i}].tool_call_id: {self.name} writes each tool result's id"
                )
            self._tool_result(w, text, i, m.tool_call_id)
        elif i and messages[i - 1].role == "assistant":
            raise ValueError(
                f"messages[{i}]: {self.name} writes consecutive assistant messages as one (its "
                "encoder merges them); merge them into one message"
            )
        else:
            self._assistant(w, m, i, options)

    def _assistant(self, w: TokenWriter, m: Message, i: int, options: MistralOptions) -> None:
        reasoning = any(type(p) is ThinkingPart and p.text for p in m.parts)
        if reasoning and w.trains(i) and options.reasoning == "error":
            raise reasoning_error(self.name, i, "this version has no place for reasoning")
        calls = [p for p in m.parts if isinstance(p, (ToolCallPart, Unparsed))]
        text = "".join(p.text for p in m.parts if type(p) is TextPart)
        if calls and text and not self._text_beside_calls:
            raise ValueError(
                f"messages[{i}]: {self.name} writes an assistant message as its text or its "
                "tool calls, not both (its encoder refuses this); split it into two messages"
            )
        if not calls and not text:
            raise ValueError(
                f"messages[{i}]: {self.name}'s encoder refuses an assistant message with "
                "neither text nor tool calls"
            )
        self._text(w, text.rstrip(" "), i, True)
        if calls:
            w.control(self.tool_calls, i, True)
            if len(calls) == 1 and type(calls[0]) is Unparsed:
                self._text(w, calls[0].raw, i, True)
            else:
                written = [self._call(p, i) for p in calls]
                self._text(w, json.dumps(written, ensure_ascii=False), i, True)
        w.control(self.eos, i, True)

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        self._text(w, prefill, NO_MESSAGE)  # the encoder's ``prefix`` assistant message

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        return self.table.encode(self._text_prefix + prefill)

    def _call(self, part: ToolCallPart | Unparsed, i: int) -> dict[str, Any]:
        if type(part) is Unparsed:
            raise ValueError(
                f"messages[{i}]: mistral writes the calls of a message as one JSON list, so "
                "an unparsed call can only be written alone"
            )
        assert type(part) is ToolCallPart
        call: dict[str, Any] = {
            "name": part.name,
            "arguments": _json_value(checked_arguments(part, i)),
        }
        if part.id and part.id != "null":
            call["id"] = part.id
        return call

    def _tool_result(self, w: TokenWriter, text: str, i: int, call_id: str) -> None:
        result = {"content": _json_value(text), "call_id": call_id}
        w.control(self.results, i)
        w.text(json.dumps(result, ensure_ascii=False), i)
        w.control(self.results_end, i)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: MistralOptions, events: bool) -> StreamParser:
        return BareJsonParser(
            self.grammar, self.table, events, calls_after_call_token=True, text_calls=False
        )

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "the system text and the tools move to the last user message; calls and JSON "
            "results are re-serialized with json.dumps; text is re-tokenized",
        )

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if result.stop_token_id is not None:
            return 0, []
        return 0, [self.eos]


class MistralV7Renderer(MistralRenderer):
    """Renderer and parser for Mistral instruct v7 (SentencePiece): v3's writer and parser
    with system messages in place, text beside calls, and SentencePiece's space before
    every text."""

    name = "mistral_v7"
    default_model = "mistralai/Mistral-Large-Instruct-2411"
    tokenizer_source = "renderers.core.packaged_tokenizers:MistralV7Tokenizer"
    message_markers = MessageMarkers(
        starts={"[SYSTEM_PROMPT]": "system", **MistralRenderer.message_markers.starts},
        after=MistralRenderer.message_markers.after,
    )
    _text_prefix = " "
    _text_beside_calls = True

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.system_start = control("[SYSTEM_PROMPT]")
        self.system_end = control("[/SYSTEM_PROMPT]")
        self.tool_content = control("[TOOL_CONTENT]")

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: MistralOptions,
        add_generation_prompt: bool,
    ) -> None:
        w.control(self.bos)
        if not messages:  # the empty user message the normalizer inserts
            self._user_turn(w, messages, [], [], "")
            return
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        declared = [_tool(t, k) for k, t in enumerate(tools or ())]
        for i, m in enumerate(messages):
            previous = messages[i - 1].role if i else None
            if m.role == "system":
                w.control(self.system_start, i)
                self._text(w, plain_text(m, i, self.name), i)
                w.control(self.system_end, i)
            elif m.role == "user":
                if previous != "user":
                    run = _user_run(messages, i)
                    self._user_turn(w, messages, run, declared if last_user in run else [], "")
            else:
                self._reply(w, messages, i, options)

    def _tool_result(self, w: TokenWriter, text: str, i: int, call_id: str) -> None:
        w.control(self.results, i)
        self._text(w, call_id, i)
        w.control(self.tool_content, i)
        self._text(w, text, i)
        w.control(self.results_end, i)

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "the tools move to the last user message; calls are re-serialized with "
            "json.dumps; text is re-tokenized",
        )
