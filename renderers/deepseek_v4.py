"""DeepSeek-V4 (``deepseek-ai/DeepSeek-V4-Pro``, ``deepseek-ai/DeepSeek-V4-Flash``):
role markers without newlines, ``<think>`` reasoning, DSML tool calls.

The models' reference encoder (``encoding/encoding_dsv4.py`` in the model repositories; the
Jinja template added later is documented as equivalent to it) writes::

    <｜begin▁of▁sentence｜>{effort}{system}⏎⏎## Tools ... ### Available Tool Schemas⏎⏎
        {schema}⏎{schema}⏎⏎You MUST ...⏎
    <｜User｜>{text}<｜Assistant｜><think>{reasoning}</think>{text}⏎⏎<｜DSML｜tool_calls>⏎
        <｜DSML｜invoke name="NAME">⏎
        <｜DSML｜parameter name="KEY" string="true">VALUE</｜DSML｜parameter>⏎
        </｜DSML｜invoke>⏎
        </｜DSML｜tool_calls><｜end▁of▁sentence｜>
    <｜User｜><tool_result>{result}</tool_result><｜Assistant｜><think>

(``⏎`` is a newline; the turns follow each other without one.) ``<think>``,
``</think>``, the role markers and ``｜DSML｜`` are single control tokens; the ``<``,
``</`` and tag names around ``｜DSML｜`` are text. Sampling stops at
``<｜end▁of▁sentence｜>``.

- **Messages** are written in order: system text as is (several system messages run
  together), a user turn ``<｜User｜>{text}``, an assistant turn ``{text}{calls}`` ending
  with ``<｜end▁of▁sentence｜>``. Tool results join the user turn that follows the call
  turn, each as ``<tool_result>{result}</tool_result>``, in the order of the calls (when
  every result names a call id); consecutive user texts and results are one user turn,
  their blocks a blank line apart.
- **Transitions**: a user turn followed by an assistant turn, or ending the conversation
  (the generation prompt), is followed by ``<｜Assistant｜>`` and ``<think>`` in thinking
  mode (the completion then starts inside the reasoning) or ``</think>`` in chat mode
  (``thinking_mode="chat"``) and for user turns before the last one while history
  reasoning is dropped. An assistant turn after the last user turn starts with
  ``{reasoning}</think>`` in thinking mode.
- **History reasoning** is dropped (``drop_thinking=True``, the encoder's default) for
  assistant turns before the last user turn, except when tools are declared: then every
  turn keeps it. Training such a turn in thinking mode is a ``ValueError``: it follows
  ``</think>`` where its generation prompt opens ``<think>``. A trained turn's reasoning
  that chat mode cannot write is refused (option ``reasoning``, ``"drop"`` leaves it out).
- **Tools** are declared after the first system message's text (an empty one is created
  when the conversation does not start with one), each function as JSON
  (``ensure_ascii=False``, default separators), one per line.
- **Calls**: a string argument is written as is with ``string="true"``, any other value
  as JSON with ``string="false"``. The encoder parses a call's arguments text
  (``encode_arguments_to_dsml``: ``json.loads``) and writes each non-string value with
  ``to_json`` (``json.dumps(value, ensure_ascii=False)``), so arguments given as JSON
  text are re-serialised (``{"a":1}`` -> ``{"a": 1}``, ``1e1`` -> ``10.0``; a key given
  twice keeps its last value); ``verbatim_arguments=True`` writes each value's text as
  given (parsed calls then render back as sampled). ``arguments: ""``, which ``json.loads``
  refuses, is the encoder's fallback: one string argument named ``arguments``
  (``<｜DSML｜parameter name="arguments" string="true"></｜DSML｜parameter>``). (vLLM
  turns ``""`` into ``{}`` before encoding, no parameter; other text that is not a JSON
  object is a caller error here, though the encoder would wrap it the same way.)
- **Reasoning effort** (thinking mode): ``"high"`` and ``"max"`` put the encoder's effort
  instruction before the first message; ``None`` and ``"low"`` put nothing.

Parsing: parts in sampled order. Reasoning ends at ``</think>``; ``｜DSML｜`` inside
reasoning is reasoning text (a drafted call is not a call). The text before a section
loses the blank line the format puts there. Each ``invoke`` is a
:class:`ToolCallPart` (arguments: a JSON object, ``string="true"`` values as strings, the
others kept as sampled) or, when it does not follow the grammar or was cut off, an
:class:`UnparsedToolCallPart` holding its text with ``｜DSML｜`` spelled out. Spans are
token ranges; a token holding the end of one structure and the start of the next
(``>⏎<``) is in both. A control token out of place is kept as text with an issue.

Verified against tml-renderers 0.2.1 (``DeepSeekV4()``, ``DeepSeekV4.chat()``; the
official encoder was not available offline). Where that oracle differs from the reference
encoder, this renderer follows the encoder, and says so in tests: consecutive user
messages are joined by a blank line (the oracle joins them directly) and tool results are
put in the order of the calls (the oracle keeps the given order).

Prefill: after the transition of the generation prompt: the reasoning after ``<think>`` in
thinking mode, the answer after ``</think>`` in chat mode.

Degenerate inputs: ``content: None`` is empty text and ``tool_calls: []`` no calls, as
the encoder reads them (``content or ""``, ``if tool_calls``).

Divergences from the encoder, on purpose:

- message text that spells a control token is encoded as ordinary text (the encoder's
  text is tokenized whole);
- list-of-parts content is rendered as its text parts joined;
- a conversation whose last message is a user turn gets the transition only as a
  generation prompt (``build_generation_prompt``), not in a supervised example;
- assistant parts in a non-canonical order are written in that order (a later thinking
  part as ``<think>…</think>``, each run of calls as its own section), so parsed messages
  render back;
- the encoder's ``task``, ``developer``, ``latest_reminder`` and ``wo_eos`` extensions are
  not supported (``developer`` and ``latest_reminder`` roles are errors);
- a ``None`` tool result is an empty one (the encoder formats it as the text ``None``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, json_object_members
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import Reasoning
from renderers.core.result import ParseIssue, ParseResult
from renderers.core.writer import TokenWriter
from renderers.deepseek_v3 import ASSISTANT, BOS, EOS, THINK, THINK_END, USER
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty

__all__ = ["DeepSeekV4Options", "DeepSeekV4Renderer"]

DSML = "｜DSML｜"

_TOOLS = (
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You "
    f'can invoke tools by writing a "<{DSML}tool_calls>" block like the following:\n\n'
    f'<{DSML}tool_calls>\n<{DSML}invoke name="$TOOL_NAME">\n<{DSML}parameter '
    f'name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{DSML}parameter>\n...\n'
    f'</{DSML}invoke>\n<{DSML}invoke name="$TOOL_NAME2">\n...\n</{DSML}invoke>\n'
    f"</{DSML}tool_calls>\n\nString parameters should be specified as is and set "
    '`string="true"`. For all other types (numbers, booleans, arrays, objects), pass the '
    'value in JSON format and set `string="false"`.\n\nIf thinking_mode is enabled '
    "(triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output "
    "directly after </think> with tool calls or final response.\n\n### Available Tool "
    "Schemas\n\n"
)
_TOOLS_END = (
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
    "invoke tool calls.\n"
)
_EFFORT = {
    "low": "",
    "high": "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be "
    "very thorough in your thinking and comprehensively decompose the problem to resolve "
    "the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation "
    "process, documenting every intermediate step, considered alternative, and rejected "
    "hypothesis to ensure absolutely no assumption is left unchecked.\n\n",
    "max": "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising."
    "\nYou MUST reason with the utmost depth and rigor, leaving absolutely nothing to "
    "chance: exhaustively decompose the problem into its most fundamental components, "
    "trace every causal chain to its root, and resolve the underlying cause rather than "
    "any surface symptom.\nDo not stop reasoning until you have independently verified "
    "the solution from multiple angles and are certain that no assumption remains "
    "unchecked and no error remains undiscovered.\n\n",
}


@dataclass(frozen=True, slots=True)
class DeepSeekV4Options:
    """Options of the DeepSeek-V4 format (names follow the reference encoder's
    arguments)."""

    thinking_mode: Literal["thinking", "chat"] = "thinking"
    """``"thinking"``: the generation prompt opens a think block and the parser starts in
    it. ``"chat"``: it ends ``</think>``; reasoning is not written."""
    reasoning_effort: Literal["low", "high", "max"] | None = None
    """Thinking mode: ``"high"``/``"max"`` start the conversation with the encoder's
    effort instruction; ``None``/``"low"`` with nothing."""
    drop_thinking: bool = True
    """True (encoder default): the reasoning of assistant turns before the last user turn
    is dropped, unless tools are declared. False: every turn keeps it."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (chat
    mode): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of
    untrained turns is rendered as the encoder does."""
    verbatim_arguments: bool = False
    """False (as the encoder renders them): a call's arguments text is parsed and each
    non-string value written as ``json.dumps`` writes it (``{"a":1}`` -> ``{"a": 1}``,
    ``1e1`` -> ``10.0``). True: each value's JSON text is written as given."""


@dataclass(slots=True)
class _Turn:
    """A message as the encoder sees it after merging tool results into user turns."""

    role: str
    index: int  # the (last) original message it renders
    message: Message | None = None  # system and assistant turns
    blocks: list[tuple[int, str, str | None]] | None = None
    """User turns: ``(message index, text, call id of a tool result)`` blocks."""
    calls: tuple[str, ...] = ()  # user turns: the call ids of the assistant turn before


class DeepSeekV4Renderer(Renderer):
    """Renderer and parser for DeepSeek-V4 (thinking and chat modes)."""

    name = "deepseek_v4"
    default_model = "deepseek-ai/DeepSeek-V4-Pro"
    model_ids = ("deepseek-ai/DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V4-Flash")
    Options = DeepSeekV4Options
    roles = ("system", "user", "assistant", "tool")

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        control = self.table.control_id
        self.bos = control(BOS)
        self.eos = control(EOS)
        self.user = control(USER)
        self.assistant = control(ASSISTANT)
        self.think = control(THINK)
        self.think_end = control(THINK_END)
        self.dsml = control(DSML)

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self.eos,)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: DeepSeekV4Options,
        add_generation_prompt: bool,
    ) -> None:
        turns = _turns(messages, self.name)
        if tools and not (turns and turns[0].role == "system"):
            turns.insert(0, _Turn("system", -1, Message("system", "")))
        thinking = options.thinking_mode == "thinking"
        drop = thinking and options.drop_thinking and not tools
        last_user = max((k for k, t in enumerate(turns) if t.role == "user"), default=-1)
        trained = not add_generation_prompt and bool(messages) and messages[-1].role == "assistant"
        w.control(self.bos)
        for k, turn in enumerate(turns):
            if k == 0 and thinking:
                w.text(_EFFORT[options.reasoning_effort or "low"])
            if turn.role == "system":
                assert turn.message is not None
                w.text(plain_text(turn.message, max(turn.index, 0), self.name), turn.index)
                if k == 0 and tools:
                    w.text("\n\n")
                    w.template(_TOOLS)
                    w.text("\n".join(json.dumps(_function(t), ensure_ascii=False) for t in tools))
                    w.template(_TOOLS_END)
            elif turn.role == "user":
                assert turn.blocks is not None
                w.control(self.user, turn.index)
                for b, (i, text, _) in enumerate(turn.blocks):
                    w.text(("\n\n" if b else "") + text, i)
                following = turns[k + 1].role if k + 1 < len(turns) else None
                if following == "assistant" or (following is None and add_generation_prompt):
                    w.control(self.assistant, turn.index)
                    opens = thinking and (not drop or k >= last_user)
                    w.control(self.think if opens else self.think_end, turn.index)
            else:
                assert turn.message is not None
                keeps = thinking and (not drop or k > last_user)
                if thinking and not keeps and w.trains(turn.index):
                    raise ValueError(
                        f"messages[{turn.index}]: deepseek_v4 writes a turn before the last user "
                        "turn after </think> where its generation prompt opens <think> "
                        "(drop_thinking), so it cannot be trained; train turns after the last "
                        "user turn (one example per turn), or pass drop_thinking=False"
                    )
                last = trained and turn.index == len(messages) - 1
                self._assistant(w, turn.message, turn.index, keeps, last, options)

    def _assistant(
        self, w: TokenWriter, m: Message, i: int, keeps: bool, last: bool, options: Any
    ) -> None:
        parts = list(m.parts)
        if not keeps:
            reasoning = any(type(p) is ThinkingPart and p.text for p in parts)
            if w.trains(i) and reasoning and options.reasoning == "error":
                raise ValueError(
                    f"messages[{i}]: deepseek_v4 in chat mode cannot write the reasoning "
                    "of this trained turn; pass thinking_mode='thinking', or "
                    "reasoning='drop' to leave it out, or remove it"
                )
            parts = [p for p in parts if type(p) is not ThinkingPart]
        else:
            # The turn opened by "<think>" (the transition): its reasoning, then "</think>".
            if parts and type(parts[0]) is ThinkingPart:
                w.text(parts[0].text, i, True)
                parts = parts[1:]
            w.control(self.think_end, i, True)
        section = False
        for part in parts:
            if type(part) is ToolCallPart or type(part) is UnparsedToolCallPart:
                if not section:
                    self._tag(w, i, "\n\n<", "tool_calls>\n")
                    section = True
                else:
                    w.text("\n", i, True)
                self._call(w, part, i, options.verbatim_arguments)
                continue
            if section:
                self._end_section(w, i)
                section = False
            if type(part) is ThinkingPart:
                w.control(self.think, i, True)
                w.text(part.text, i, True)
                w.control(self.think_end, i, True)
            elif type(part) is TextPart:
                w.text(part.text, i, True)
        if section:
            self._end_section(w, i)
        w.control(self.eos, i, True)

    def _end_section(self, w: TokenWriter, i: int) -> None:
        self._tag(w, i, "\n</", "tool_calls>")

    def _call(self, w: TokenWriter, part: Part, i: int, verbatim: bool) -> None:
        if type(part) is UnparsedToolCallPart:
            self._dsml_text(w, part.raw, i)
            return
        assert type(part) is ToolCallPart
        # ｜DSML｜ is written as the token only where the format puts it: names, keys
        # and values are text, whatever they spell.
        self._tag(w, i, "<", f'invoke name="{part.name}">\n')
        for k, (key, value, raw) in enumerate(_parameters(part, i, verbatim)):
            if isinstance(value, str):
                flag, text = "true", value
            else:
                flag, text = "false", raw if verbatim else _TO_JSON(value)
            self._tag(w, i, "\n<" if k else "<", f'parameter name="{key}" string="{flag}">')
            self._tag(w, i, text + "</", "parameter>")
        self._tag(w, i, "\n</", "invoke>")

    def _tag(self, w: TokenWriter, i: int, before: str, after: str) -> None:
        """Sampled ``{before}｜DSML｜{after}``."""
        w.text(before, i, True)
        w.control(self.dsml, i, True)
        w.text(after, i, True)

    def _dsml_text(self, w: TokenWriter, text: str, i: int) -> None:
        """An unparsed call's raw text, whose ``｜DSML｜`` spellings are the tokens that
        split it (as parsed)."""
        for k, piece in enumerate(text.split(DSML)):
            if k:
                w.control(self.dsml, i, True)
            w.text(piece, i, True)

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: DeepSeekV4Options, events: bool) -> StreamParser:
        return _DeepSeekV4Parser(self, events, thinking=options.thinking_mode == "thinking")

    # -- multi-turn rollouts ------------------------------------------------------------

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt ends "<think>", and
        # outside after "</think>" (chat mode). A prompt with no assistant header (a system
        # message after the last user message: the encoder writes none) is followed by the
        # turn as the mode writes it, "</think>{text}" in thinking mode.
        last = prompt_ids[-1] if len(prompt_ids) else None
        if last == self.think:
            mode = "thinking"
        elif last == self.think_end:
            mode = "chat"
        else:
            mode = self._with_options(self.options, options).thinking_mode
        return self.parse_response(completion_ids, **{**options, "thinking_mode": mode})

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if result.stop_token_id is not None:
            return 0, []
        parts = result.message.parts
        last = parts[-1] if parts else None
        closing: list[int] = []
        if type(last) is ThinkingPart and last.incomplete:
            closing.append(self.think_end)
        elif type(last) is UnparsedToolCallPart and last.incomplete:
            closing += [*self.table.encode("</"), self.dsml, *self.table.encode("invoke>")]
        if _open_section(self.table, completion_ids):
            closing += [*self.table.encode("\n</"), self.dsml, *self.table.encode("tool_calls>")]
        closing.append(self.eos)
        return 0, closing

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "tool-call parameters are re-serialized",
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if self.options.drop_thinking:
            reasons.insert(
                0,
                "without declared tools, reasoning of turns before the last user turn is "
                "dropped and their transition becomes </think>",
            )
        return ExtensionProperty(False, "; ".join(reasons))


def _function(tool: Mapping[str, Any]) -> Any:
    """The function schema of an OpenAI tool (the encoder declares ``tool["function"]``)."""
    function = tool.get("function")
    return function if isinstance(function, Mapping) else tool


_TO_JSON = json.JSONEncoder(ensure_ascii=False).encode
"""The encoder's ``to_json`` (``json.dumps(value, ensure_ascii=False)``)."""


def _parameters(part: ToolCallPart, i: int, verbatim: bool) -> list[tuple[str, Any, str]]:
    """A call's arguments as the encoder's ``encode_arguments_to_dsml`` reads them: its
    JSON text parsed, an empty text as one string argument named ``arguments`` (the
    encoder's fallback for text ``json.loads`` refuses); with each value's JSON text as
    given (used when ``verbatim``)."""
    if part.arguments == "":
        return [("arguments", "", '""')]
    checked_arguments(part, i)
    try:
        members = json_object_members(part.arguments)
        if not verbatim:
            members = [(k, v, "") for k, v in json.loads(part.arguments).items()]
    except ValueError as exc:
        raise ValueError(
            f"messages[{i}]: arguments of tool call {part.name!r} must be a JSON object, "
            f"which deepseek_v4 writes one parameter per key ({exc}): "
            f"{part.arguments[:60]!r}"
        ) from None
    return members


def _turns(messages: list[Message], renderer: str) -> list[_Turn]:
    """The encoder's message list: tool results and user texts merged into user turns,
    the results in the order of the calls they answer when every one names a call."""
    turns: list[_Turn] = []
    calls: tuple[str, ...] = ()  # call ids of the last assistant turn
    for i, m in enumerate(messages):
        if m.role in ("assistant", "system"):
            turns.append(_Turn(m.role, i, m))
            calls = tuple(p.id or "" for p in m.parts if type(p) is ToolCallPart)
            continue
        text = plain_text(m, i, renderer)
        block: tuple[int, str, str | None] = (
            (i, f"<tool_result>{text}</tool_result>", m.tool_call_id or "")
            if m.role == "tool"
            else (i, text, None)
        )
        last = turns[-1] if turns else None
        if last is not None and last.role == "user" and last.blocks is not None:
            last.blocks.append(block)
            last.index = i
        else:
            turns.append(_Turn("user", i, blocks=[block], calls=calls))
        if m.role == "user":
            calls = ()
    for turn in turns:
        if turn.blocks is not None:
            _order_results(turn.blocks, turn.calls)
    return turns


def _order_results(blocks: list[tuple[int, str, str | None]], calls: tuple[str, ...]) -> None:
    """Put the tool results of a user turn in the order of the calls they answer (the
    encoder's ``_sort_tool_results``), when each names a distinct call of the turn before."""
    results = [b for b in blocks if b[2] is not None]
    ids = [b[2] for b in results]
    if len(results) < 2 or len(set(ids)) != len(ids) or not set(ids) <= set(calls) - {""}:
        return
    ordered = iter(sorted(results, key=lambda b: calls.index(b[2] or "")))
    blocks[:] = [next(ordered) if b[2] is not None else b for b in blocks]


def _open_section(table: Any, completion_ids: Sequence[int]) -> bool:
    """Whether a completion that was cut off is inside a tool-call section."""
    text: str = table.decode(completion_ids)
    return text.rfind(f"<{DSML}tool_calls>") > text.rfind(f"</{DSML}tool_calls>")


# -- parsing ------------------------------------------------------------------------------

_INVOKE = re.compile(r'invoke name="([^"\n]*)">\n')
_PARAMETER = re.compile(r'parameter name="([^"\n]*)" string="(true|false)">(.*)</', re.DOTALL)
_PARAMETER_END = re.compile(r"parameter>\n(<|</)")


def _tool_call_from_segments(segments: list[str], incomplete: bool) -> Part:
    """An ``invoke`` block split at its ``｜DSML｜`` tokens -> a tool call."""
    raw = DSML.join(segments)
    name_match = _INVOKE.match(segments[1]) if len(segments) > 1 else None
    name = name_match.group(1) if name_match else None
    if incomplete:
        return UnparsedToolCallPart(
            raw, "cut off before the invoke ended", name=name, incomplete=True
        )
    error = "expected <｜DSML｜invoke name=...> with parameter blocks"
    if segments[0] != "<" or name_match is None or not name:
        return UnparsedToolCallPart(raw, error, name=name)
    rest = segments[1][name_match.end() :]
    members: list[str] = []
    k = 2
    if rest == "<":  # parameters follow
        while True:
            parameter = _PARAMETER.fullmatch(segments[k]) if k < len(segments) else None
            end = _PARAMETER_END.fullmatch(segments[k + 1]) if k + 1 < len(segments) else None
            if parameter is None or end is None:
                return UnparsedToolCallPart(raw, "a parameter block is malformed", name=name)
            key, flag, value = parameter.groups()
            if flag == "true":
                value = json.dumps(value, ensure_ascii=False)
            else:
                try:
                    json.loads(value)
                except ValueError as exc:
                    return UnparsedToolCallPart(
                        raw, f'parameter {key!r} (string="false") is not JSON: {exc}', name=name
                    )
            members.append(json.dumps(key, ensure_ascii=False) + ": " + value)
            k += 2
            if end.group(1) == "</":
                break
    elif rest not in ("\n</", "</"):
        return UnparsedToolCallPart(raw, error, name=name)
    if segments[k:] != ["invoke>"]:
        return UnparsedToolCallPart(
            raw, "expected </｜DSML｜invoke> after the parameters", name=name
        )
    return ToolCallPart(name, "{" + ", ".join(members) + "}")


_SECTION = "section"  # inside <｜DSML｜tool_calls>, between invokes
_INVOKE_STATE = "invoke"  # inside <｜DSML｜invoke ...> ... </｜DSML｜invoke>
# A tail of text that may still open a tag when ｜DSML｜ follows ("<", "</"), with the
# blank line the format puts before a section.
_OPENER_TAIL = re.compile(rb"\n{0,2}(?:</?)?\Z")
_OPENER_TAIL_MAX = 4
_INVOKE_TAG = re.compile(rb'invoke name="[^"\n]*"')
_MAX_TAG = 1024  # bytes of a tag name before ">" (longer: not a tag)
_INVOKE_END = b"invoke>"
_ASCII_SPACE = " \t\n\r\x0b\x0c"  # what bytes.strip() strips: whitespace between invokes
_SECTION_TEXT = "text inside the tool-call section (kept as text)"


class _DeepSeekV4Parser(StreamParser):
    """DeepSeek-V4 completions: reasoning (from the start in thinking mode), text and DSML
    tool-call sections, in any order.

    ``｜DSML｜`` is a control token, the ``<``/``</`` before it and the tag after it are
    text: text that may open a tag is held back until the next token says whether it
    does, and a tag is read up to its ``>``. Positions inside runs of text come from byte
    offsets.
    """

    def __init__(self, r: DeepSeekV4Renderer, events: bool, *, thinking: bool) -> None:
        super().__init__(
            r.table,
            structural=(r.think, r.think_end, r.dsml, r.bos, r.user, r.assistant),
            stop_ids=(r.eos,),
            events=events,
            byte_offsets=True,
        )
        self._r = r
        self._ends_turn = frozenset((r.bos, r.user, r.assistant))
        self._dsml_text = DSML.encode()
        self._state = THINKING if thinking else TEXT
        self._held = b""  # TEXT/SECTION: text that may open a tag
        # After "<｜DSML｜" or "</｜DSML｜": (closing, token of "<", the text it replaced).
        self._tag: tuple[bool, int, bytes] | None = None
        self._tag_text = b""
        self._invoke_tail = b""  # INVOKE: the last bytes of the open segment
        self._invoke_end: bytes | None = None  # INVOKE: bytes after "</｜DSML｜" so far
        if thinking:
            self.asm.open(THINKING, 0, explicit=True)
        else:
            self.asm.open(TEXT, 0)

    # -- one shot -------------------------------------------------------------------------

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse of a completion in the format's order: reasoning, text, and
        sections of whole invokes (text between them is a reported text part), each tag
        in the run after its ``｜DSML｜``. The parts, spans and issues are those the general
        path gives; anything else it would report (a tag it does not read, a token out of
        place, a replacement character where positions count bytes) takes that path."""
        r = self._r
        texts = runs.texts
        cuts = runs.cuts
        tokens = runs.tokens
        byte_ends = runs.byte_ends
        last = runs.count - 1

        def token_at(offset: int) -> int:  # the token holding ordinary byte ``offset``
            return max(0, min(int(np.searchsorted(byte_ends, offset, "right")), last))

        parts: list[Part | None] = []
        spans: list[tuple[int, int]] = []
        calls: list[tuple[int, list[str], bool]] = []  # built last: a decline costs less
        issues: list[ParseIssue] = []  # the parser's own only once the parse is taken
        state = self._state
        start = 0
        reasoning: list[str] = []  # THINKING: its runs, and markers kept as reasoning
        segments: list[str] = []  # INVOKE: the open call's segments before the current one
        tag: tuple[bool, int] | None = None  # after "<" or "</" and ｜DSML｜: (closing, start)
        before = ""  # the text a tag ends (TEXT: before a section; SECTION: between invokes)
        before_start = 0  # SECTION: where that text starts
        armed = False  # INVOKE: the segment before ｜DSML｜ ended with "</"
        stop = None
        n = len(tokens)
        for j in range(n + 1):
            text = texts[j]
            at = int(byte_ends[cuts[j - 1]]) if j else 0  # where ``text``'s bytes start
            if tag is not None:
                end = text.find(">")
                if end < 0 or "\ufffd" in text[: end + 1]:
                    return None
                name = text[:end]
                spelled = name.encode()
                size = len(spelled)
                closing, tag_start = tag
                tag = None
                if size > _MAX_TAG:
                    return None
                opens = not closing and (
                    name == "tool_calls" if state == TEXT else bool(_INVOKE_TAG.fullmatch(spelled))
                )
                if not opens and not (closing and name == "tool_calls" and state == _SECTION):
                    return None
                if before:
                    parts.append(TextPart(before))
                    spans.append(
                        (start, tag_start + 1) if state == TEXT else (before_start, tag_start)
                    )
                    before = ""
                if state == TEXT:
                    state = _SECTION
                elif opens:
                    state, start, segments = _INVOKE_STATE, tag_start, ["<"]
                    text = name + ">" + text[end + 1 :]
                else:
                    state, start = TEXT, token_at(at + size) + 1
                if state != _INVOKE_STATE:
                    text = text[end + 1 :]
                    at += size + 1
            elif state == _INVOKE_STATE and armed and text.startswith("invoke>"):
                calls.append((len(parts), [*segments, "invoke>"], False))
                parts.append(None)
                spans.append((start, token_at(at + 6) + 1))
                state = _SECTION
                text = text[7:]
                at += 7
            t = tokens[j] if j < n else None
            if state == THINKING:
                reasoning.append(text)
                if t == r.think_end:
                    thinking = "".join(reasoning)
                    if thinking:
                        parts.append(ThinkingPart(thinking))
                        spans.append((start, cuts[j] + 1))
                    state, start = TEXT, cuts[j] + 1
                elif t == r.dsml or t == r.think:
                    reasoning.append(DSML if t == r.dsml else THINK)
                elif t is not None:
                    return None
            elif state == _INVOKE_STATE:
                if t == r.dsml:
                    segments.append(text)
                    armed = text.endswith("</")
                elif t is None:
                    calls.append((len(parts), [*segments, text], True))
                    parts.append(None)
                    spans.append((start, runs.count))
                else:
                    return None
            elif t == r.dsml:
                opener = "</" if text.endswith("</") else "<" if text.endswith("<") else ""
                if not opener:
                    return None
                rest = text[: len(text) - len(opener)]
                if state == TEXT:
                    before = rest[:-2] if rest.endswith("\n\n") else rest
                else:
                    before = rest.lstrip(_ASCII_SPACE)
                    if before:
                        before_start = token_at(at + len(rest) - len(before))
                        issues.append(ParseIssue(before_start, _SECTION_TEXT))
                tag = opener == "</", token_at(int(byte_ends[cuts[j]]) - len(opener))
            elif state == _SECTION:
                return None  # text, another token or the end inside the section: reported
            else:  # TEXT
                if t is not None and t != r.think and t not in self._stop_ids:
                    return None
                end = runs.count if t is None else cuts[j]
                if text:
                    parts.append(TextPart(text, None, t is None))
                    spans.append((start, end))
                if t is None:
                    break
                if t != r.think:
                    stop = j
                    break
                state, start, reasoning = THINKING, cuts[j], []
        else:
            if state == THINKING:  # cut off in the reasoning (an explicit region)
                parts.append(ThinkingPart("".join(reasoning), None, True))
                spans.append((start, runs.count))
        for k, call, incomplete in calls:
            parts[k] = _tool_call_from_segments(call, incomplete)
        self._issues += issues
        return self._one_shot_result(runs, parts, spans, stop)

    # -- text -----------------------------------------------------------------------------

    def _text_ok(self, data: bytes) -> bool:
        if self._tag is not None:
            return False
        if self._state == THINKING:
            return True
        return self._state == TEXT and not self._held and b"<" not in data and b"\n" not in data

    def _on_text(self, text: str) -> None:
        self.asm.write(text)

    def _section_text(self, at: int) -> None:
        """Text in a tool-call section (between invokes) starts a text part at ``at``."""
        if self._state == _SECTION and self.asm.kind is None:
            self._issue(at, _SECTION_TEXT)
            self.asm.open(TEXT, at)

    def _content(self, data: bytes, base: int) -> None:
        """Ordinary text of the text or section state, at ordinary-byte offset ``base``;
        in a section, the whitespace between invokes is structure."""
        if self._state == _SECTION and self.asm.kind is None:
            text = data.lstrip()
            if not text:
                return
            self._section_text(self._token_at_byte(base + len(data) - len(text)))
            data = text
        self._decode(data)

    def _on_bytes(self, data: bytes) -> None:
        base = self._byte_end(self._pos - 1) - len(data)
        while data:
            if self._tag is not None:
                data, base = self._tag_bytes(data, base)
            elif self._state == THINKING:
                self._decode(data)
                return
            elif self._state == _INVOKE_STATE:
                data, base = self._invoke_bytes(data, base)
            else:
                buf = self._held + data
                # The tail is at most "\n\n</": only the last bytes can start it.
                match = _OPENER_TAIL.search(buf, max(0, len(buf) - _OPENER_TAIL_MAX))
                assert match is not None
                self._held = match.group()
                if match.start():
                    self._content(buf[: match.start()], base - (len(buf) - len(data)))
                return

    def _flush_held(self, pos: int) -> None:
        """Release the held text (before the token at ``pos``, which opens no tag)."""
        held, self._held = self._held, b""
        if held:
            self._content(held, self._byte_end(pos - 1) - len(held))
        self._flush_pending()

    def _tag_bytes(self, data: bytes, base: int) -> tuple[bytes, int]:
        """Read a tag up to its ``>``; returns the bytes after it (and their offset)."""
        end = data.find(b">")
        chunk = data if end == -1 else data[: end + 1]
        self._tag_text += chunk
        tag = self._tag_text
        if end == -1:
            if len(tag) > _MAX_TAG or b"\n" in tag:
                self._not_a_tag()
            return b"", base + len(data)
        if len(tag) - 1 > _MAX_TAG:  # however the bytes came (in one chunk or many)
            self._not_a_tag()
        else:
            self._end_tag(tag[:-1], self._token_at_byte(base + end) + 1)
        return data[end + 1 :], base + end + 1

    def _end_tag(self, name: bytes, end: int) -> None:
        assert self._tag is not None
        closing, start, _ = self._tag
        asm = self.asm
        state = self._state
        if not closing and name == b"tool_calls" and state == TEXT:
            self._tag = None
            asm.close(start + 1)
            self._state = _SECTION
        elif not closing and _INVOKE_TAG.fullmatch(name) and state in (TEXT, _SECTION):
            self._tag = None
            if state == TEXT:
                self._issue(start, "an invoke outside a tool-call section")
            asm.close(start)
            asm.open(TOOL_CALL, start)
            asm.write("<")
            asm.next_segment(DSML)
            self._decode(name + b">")
            self._flush_pending()
            self._state = _INVOKE_STATE
            self._invoke_tail = b">"
        elif closing and name == b"tool_calls" and state == _SECTION:
            self._tag = None
            asm.close(start)
            self._state = TEXT
            asm.open(TEXT, end)
        else:
            self._not_a_tag()

    def _not_a_tag(self) -> None:
        """The text held as a tag is text (with an issue): written where it stands."""
        assert self._tag is not None
        _, start, opener = self._tag
        text = opener + self._dsml_text + self._tag_text
        self._tag = None
        self._tag_text = b""
        self._issue(start, f"{DSML} does not start a tag of the format (kept as text)")
        self._section_text(start)
        self._decode(text)
        self._flush_pending()

    def _invoke_bytes(self, data: bytes, base: int) -> tuple[bytes, int]:
        """Bytes of an open invoke; returns what follows its end tag, if it ended."""
        consumed = data
        if self._invoke_end is not None:
            for k in range(len(data)):
                self._invoke_end += data[k : k + 1]
                if self._invoke_end == _INVOKE_END:
                    consumed = data[: k + 1]
                    self._decode(consumed)
                    self._flush_pending()
                    self._invoke_end = None
                    self.asm.close(
                        self._token_at_byte(base + k) + 1, build=_tool_call_from_segments
                    )
                    self._state = _SECTION
                    return data[k + 1 :], base + k + 1
                if not _INVOKE_END.startswith(self._invoke_end):
                    self._invoke_end = None
                    break
        self._decode(consumed)
        self._invoke_tail = (self._invoke_tail + consumed)[-2:]
        return b"", base + len(data)

    # -- structure ------------------------------------------------------------------------

    def _on_token(self, token_id: int, pos: int) -> None:
        r = self._r
        if self._tag is not None:  # a tag cut by a token is text
            self._not_a_tag()
        state = self._state
        if token_id == r.dsml:
            self._on_dsml(pos)
        elif token_id in self._ends_turn:
            name = self._table.control_text(token_id)
            self._issue(pos, f"{name} before {EOS}: the message ends here")
            self._end_message(pos)
        elif state == THINKING:
            if token_id == r.think_end:
                self.asm.close(pos + 1)
                self._state = TEXT
                self.asm.open(TEXT, pos + 1)
            else:  # <think> inside the reasoning
                self.asm.write(self._table.control_text(token_id) or "")
        else:
            if state == _INVOKE_STATE:
                self._cut_invoke(pos, f"{self._table.control_text(token_id)} inside an invoke")
            self._flush_held(pos)
            if token_id == r.think:
                if self._state == _SECTION:
                    self._issue(pos, f"{THINK} inside a tool-call section (the section ends)")
                self.asm.close(pos)
                self._state = THINKING
                self.asm.open(THINKING, pos, explicit=True)
            else:  # </think> without an open think block
                self._issue(pos, f"{THINK_END} without an open think block (kept as text)")
                self._section_text(pos)
                self._on_text(THINK_END)

    def _on_dsml(self, pos: int) -> None:
        state = self._state
        if state == THINKING:
            self.asm.write(DSML)  # a call drafted inside the reasoning is reasoning
            return
        if state == _INVOKE_STATE:
            self.asm.next_segment(DSML)
            self._invoke_end = b"" if self._invoke_tail.endswith(b"</") else None
            self._invoke_tail = b""
            return
        held = self._held
        closing = held.endswith(b"</")
        if not held.endswith(b"<") and not closing:
            self._flush_held(pos)
            self._issue(pos, f"{DSML} does not start a tag of the format (kept as text)")
            self._section_text(pos)
            self._on_text(DSML)
            return
        opener = b"</" if closing else b"<"
        before = held[: -len(opener)]
        self._held = b""
        if state == TEXT and before.endswith(b"\n\n"):
            before = before[:-2]  # the blank line before a section is structure
        if before:
            self._content(before, self._byte_end(pos - 1) - len(held))
        self._flush_pending()
        start = self._token_at_byte(self._byte_end(pos - 1) - len(opener))
        self._tag = (closing, start, held[len(before) :] if before else held)
        self._tag_text = b""

    def _cut_invoke(self, pos: int, why: str) -> None:
        self._issue(pos, why + " (the invoke is cut there)")
        self.asm.close(pos, incomplete=True, build=_tool_call_from_segments)
        self._invoke_end = None
        self._state = _SECTION

    def _on_end(self, pos: int, stopped: bool) -> None:
        if self._tag is not None:
            self._not_a_tag()
        state = self._state
        if state != _INVOKE_STATE:
            self._flush_held(pos)
        if stopped:
            if state == THINKING:
                self._issue(pos, "the message ended inside an open think block")
            elif state == _INVOKE_STATE:
                self._issue(pos, "the message ended inside an invoke")
            elif state == _SECTION:
                self._issue(pos, "the message ended inside a tool-call section")
        self.asm.close(
            pos,
            incomplete=not stopped or state == _INVOKE_STATE,
            build=_tool_call_from_segments,
        )
