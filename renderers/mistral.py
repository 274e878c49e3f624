"""Mistral instruct v3 with Tekken (Mistral-Nemo, Ministral-8B, Mistral-Small-2409).

What the official encoder writes (mistral-common 1.13.1: ``ChatCompletionRequest`` ->
``MistralTokenizer.v3(is_tekken=True).encode_chat_completion``; ``⏎`` is a newline)::

    <s>[INST]{user}[/INST]{answer}</s>
       [INST]{user}[/INST][TOOL_CALLS][{"name": NAME, "arguments": ARGS, "id": ID}, ...]</s>
       [TOOL_RESULTS]{"content": RESULT, "call_id": ID}[/TOOL_RESULTS]{answer}</s>
       [AVAILABLE_TOOLS][{"type": "function", "function": {...}}, ...][/AVAILABLE_TOOLS]
       [INST]{system}⏎⏎{last user}[/INST]

Every control token (``<s>``, ``</s>``, ``[INST]``, ``[/INST]``, ``[TOOL_CALLS]``,
``[AVAILABLE_TOOLS]``, ``[/AVAILABLE_TOOLS]``, ``[TOOL_RESULTS]``, ``[/TOOL_RESULTS]``) is a
single token. The encoder's request normalizer shapes the conversation first:

- system messages are taken out wherever they stand; their texts (empty ones skipped)
  joined by ``⏎⏎`` are written before the text of the **last** user message, ``⏎⏎``
  between; the tools (``json.dumps`` of each as ``{"type": "function", "function":
  {"name", "description" (default ""), "parameters"}}``) are written right before that
  message's ``[INST]``;
- consecutive user messages are one turn, texts joined by ``⏎⏎``; a conversation that
  does not start with a user message gets an empty one;
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

Not covered: instruct v7 and later (``[SYSTEM_PROMPT]``; ``[THINK]`` from v13) ship in
mistral-common only as SentencePiece files or not at all, so no Tekken tokenizer of those
versions can be loaded here.
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
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["MistralOptions", "MistralRenderer"]


@dataclass(frozen=True, slots=True)
class MistralOptions:
    """Options of the Mistral v3 format."""

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
            ends_message=(self.inst, self.tools_start, self.results),
            call=self.tool_calls,
        )
        """Text, or ``[TOOL_CALLS]`` and a JSON list of calls up to ``</s>``."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    # -- rendering ----------------------------------------------------------------------

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
            self._user_start(w, -1, declared if alone else [], "")
            if alone and system:
                w.text(system + "\n\n")
            w.control(self.inst_end)
        for n, i in enumerate(turns):
            m = messages[i]
            previous = messages[turns[n - 1]].role if n else None
            following = messages[turns[n + 1]].role if n + 1 < len(turns) else None
            if m.role == "user":
                if previous != "user":
                    last = last_user in turns[n:] and all(
                        messages[j].role == "user" for j in turns[n : turns.index(last_user) + 1]
                    )
                    self._user_start(w, i, declared if last else [], system if last else "")
                else:
                    w.text("\n\n", i)
                w.text(plain_text(m, i, self.name), i)
                if following != "user":
                    w.control(self.inst_end, i)
            elif m.role == "assistant":
                if previous == "assistant":
                    raise ValueError(
                        f"messages[{i}]: mistral writes consecutive assistant messages as one "
                        "(its encoder merges them); merge them into one message"
                    )
                self._assistant(w, m, i, options)
            else:
                self._tool_result(w, m, i)

    def _user_start(self, w: TokenWriter, i: int, tools: list[Any], system: str) -> None:
        """``[INST]`` of a user turn; the last one's after the tools and before the system
        text."""
        if tools:
            w.control(self.tools_start, i)
            w.text(json.dumps(tools, ensure_ascii=False), i)
            w.control(self.tools_end, i)
        w.control(self.inst, i)
        if system and i >= 0:
            w.text(system + "\n\n", i)

    def _assistant(self, w: TokenWriter, m: Message, i: int, options: MistralOptions) -> None:
        reasoning = any(type(p) is ThinkingPart and p.text for p in m.parts)
        if reasoning and w.trains(i) and options.reasoning == "error":
            raise reasoning_error(self.name, i, "this version has no place for reasoning")
        calls = [p for p in m.parts if isinstance(p, (ToolCallPart, Unparsed))]
        text = "".join(p.text for p in m.parts if type(p) is TextPart)
        if calls and text:
            raise ValueError(
                f"messages[{i}]: mistral writes an assistant message as its text or its tool "
                "calls, not both (its encoder refuses this); split it into two messages"
            )
        if not calls and not text.rstrip(" "):
            raise ValueError(
                f"messages[{i}]: mistral's encoder refuses an assistant message with neither "
                "text nor tool calls"
            )
        if calls:
            w.control(self.tool_calls, i, True)
            if len(calls) == 1 and type(calls[0]) is Unparsed:
                w.text(calls[0].raw, i, True)
            else:
                w.text(json.dumps([self._call(p, i) for p in calls], ensure_ascii=False), i, True)
        else:
            w.text(text.rstrip(" "), i, True)
        w.control(self.eos, i, True)

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

    def _tool_result(self, w: TokenWriter, m: Message, i: int) -> None:
        text = plain_text(m, i, self.name)
        if not m.tool_call_id:
            raise ValueError(f"messages[{i}].tool_call_id: mistral writes each tool result's id")
        result = {"content": _json_value(text), "call_id": m.tool_call_id}
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
