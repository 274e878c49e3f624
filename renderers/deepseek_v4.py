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

Parsing (the DSML grammar, :mod:`renderers.core.dsml`; thinking mode starts inside the
reasoning): parts in sampled order. Reasoning ends at ``</think>``; ``｜DSML｜`` inside
reasoning is reasoning text (a drafted call is not a call). The text before a section
loses the blank line the format puts there. Each ``invoke`` is a :class:`ToolCallPart`
(arguments: a JSON object, ``string="true"`` values as strings, the others kept as
sampled) or, when it does not follow the grammar or was cut off, an
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from renderers.core.assembly import json_object_members
from renderers.core.dsml import DSML, DSMLGrammar, DSMLParser, DSMLTags
from renderers.core.engine import StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import Reasoning
from renderers.core.result import ParseResult
from renderers.core.writer import NO_MESSAGE, TokenWriter
from renderers.deepseek_v3 import ASSISTANT, BOS, EOS, THINK, THINK_END, USER
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty

__all__ = ["DeepSeekV4Options", "DeepSeekV4Renderer"]


def _tools_prompt(tags: DSMLTags) -> str:
    """The encoder's tool instructions up to the schemas, spelling the format's tags."""
    section, invoke, parameter = (f"{DSML}{t}" for t in (tags.section, tags.invoke, tags.parameter))
    return (
        "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
        f'You can invoke tools by writing a "<{section}>" block like the following:\n\n'
        f'<{section}>\n<{invoke} name="$TOOL_NAME">\n<{parameter} '
        f'name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{parameter}>\n...\n'
        f'</{invoke}>\n<{invoke} name="$TOOL_NAME2">\n...\n</{invoke}>\n'
        f"</{section}>\n\nString parameters should be specified as is and set "
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
    Options: ClassVar[type[Any]] = DeepSeekV4Options
    roles = ("system", "user", "assistant", "tool")
    tags: ClassVar[DSMLTags] = DSMLTags()
    """The tag names after ``｜DSML｜``."""

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
        self._grammars: dict[str, DSMLGrammar] = {}  # by thinking mode (parse setup)

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
        turns = _turns(messages, self.name, self._order)
        if tools and not (turns and turns[0].role == "system"):
            turns.insert(0, _Turn("system", -1, Message("system", "")))
        thinking = options.thinking_mode == "thinking"
        drop = thinking and options.drop_thinking and not tools
        last_user = max((k for k, t in enumerate(turns) if self._asks(k, t)), default=-1)
        trained = not add_generation_prompt and bool(messages) and messages[-1].role == "assistant"
        w.control(self.bos)
        for k, turn in enumerate(turns):
            self._opening(w, k, turn, options)
            if turn.role == "system":
                assert turn.message is not None
                w.text(plain_text(turn.message, max(turn.index, 0), self.name), turn.index)
                if k == 0 and tools:
                    w.text("\n\n")
                    w.template(_tools_prompt(self.tags))
                    w.text("\n".join(json.dumps(_function(t), ensure_ascii=False) for t in tools))
                    w.template(_TOOLS_END)
            elif turn.role == "user":
                assert turn.blocks is not None
                w.control(self.user, turn.index)
                for b, (i, text, _) in enumerate(turn.blocks):
                    w.text(("\n\n" if b else "") + text, i)
            else:
                assert turn.message is not None
                keeps = thinking and (not drop or k > last_user)
                if thinking and not keeps and w.trains(turn.index):
                    raise ValueError(
                        f"messages[{turn.index}]: {self.name} writes a turn before the last user "
                        "turn after </think> where its generation prompt opens <think> "
                        "(drop_thinking), so it cannot be trained; train turns after the last "
                        "user turn (one example per turn), or pass drop_thinking=False"
                    )
                last = trained and turn.index == len(messages) - 1
                self._assistant(w, turn.message, turn.index, keeps, last, options)
            following = turns[k + 1].role if k + 1 < len(turns) else None
            if self._asks(k, turn) and (
                following == "assistant" or (following is None and add_generation_prompt)
            ):
                w.control(self.assistant, turn.index)
                opens = thinking and (not drop or k >= last_user)
                w.control(self.think if opens else self.think_end, turn.index)

    def _opening(self, w: TokenWriter, k: int, turn: _Turn, options: Any) -> None:
        """What the format writes before turn ``k``: the effort instruction first."""
        if k == 0 and options.thinking_mode == "thinking":
            w.text(_EFFORT[options.reasoning_effort or "low"], NO_MESSAGE)

    def _asks(self, k: int, turn: _Turn) -> bool:
        """Whether turn ``k`` is answered by the assistant: followed by ``<｜Assistant｜>``
        and counted as a user turn for the reasoning it drops (V4: user turns)."""
        return turn.role == "user"

    def _order(self, blocks: list[tuple[int, str, str | None]], calls: tuple[str, ...]) -> None:
        """Put a user turn's tool results in the order of the calls they answer."""
        _order_results(blocks, calls)

    def _assistant(
        self, w: TokenWriter, m: Message, i: int, keeps: bool, last: bool, options: Any
    ) -> None:
        parts = list(m.parts)
        if not keeps:
            reasoning = any(type(p) is ThinkingPart and p.text for p in parts)
            if w.trains(i) and reasoning and options.reasoning == "error":
                raise ValueError(
                    f"messages[{i}]: {self.name} in chat mode cannot write the reasoning "
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
                    self._tag(w, i, "\n\n<", f"{self.tags.section}>\n")
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
        self._tag(w, i, "\n</", f"{self.tags.section}>")

    def _call(self, w: TokenWriter, part: Part, i: int, verbatim: bool) -> None:
        if type(part) is UnparsedToolCallPart:
            self._dsml_text(w, part.raw, i)
            return
        assert type(part) is ToolCallPart
        # ｜DSML｜ is written as the token only where the format puts it: names, keys
        # and values are text, whatever they spell.
        tags = self.tags
        self._tag(w, i, "<", f'{tags.invoke} name="{part.name}">\n')
        for k, (key, value, raw) in enumerate(_parameters(part, i, verbatim, self.name)):
            if isinstance(value, str):
                flag, text = "true", value
            else:
                flag, text = "false", raw if verbatim else _TO_JSON(value)
            self._tag(w, i, "\n<" if k else "<", f'{tags.parameter} name="{key}" string="{flag}">')
            self._tag(w, i, text + "</", f"{tags.parameter}>")
        self._tag(w, i, "\n</", f"{tags.invoke}>")

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

    def grammar(self, options: DeepSeekV4Options) -> DSMLGrammar:
        """The parse side of the format: DSML, starting inside the reasoning in thinking
        mode; a new turn's marker ends a message."""
        return DSMLGrammar(
            stop=(self.eos,),
            think=self.think,
            think_end=self.think_end,
            dsml=self.dsml,
            ends_message=(self.bos, self.user, self.assistant),
            reasoning_first=options.thinking_mode == "thinking",
            tags=self.tags,
        )

    def _new_parser(self, options: DeepSeekV4Options, events: bool) -> StreamParser:
        grammar = self._grammars.get(options.thinking_mode)
        if grammar is None:  # the grammar depends on the mode alone: built once per mode
            grammar = self._grammars[options.thinking_mode] = self.grammar(options)
        return DSMLParser(self.table, grammar, events)

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
        tags = self.tags
        if type(last) is ThinkingPart and last.incomplete:
            closing.append(self.think_end)
        elif type(last) is UnparsedToolCallPart and last.incomplete:
            closing += [*self.table.encode("</"), self.dsml, *self.table.encode(f"{tags.invoke}>")]
        if _open_section(self.table, completion_ids, tags.section):
            closing += [
                *self.table.encode("\n</"),
                self.dsml,
                *self.table.encode(f"{tags.section}>"),
            ]
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


def _parameters(
    part: ToolCallPart, i: int, verbatim: bool, renderer: str
) -> list[tuple[str, Any, str]]:
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
            f"which {renderer} writes one parameter per key ({exc}): "
            f"{part.arguments[:60]!r}"
        ) from None
    return members


_Blocks = list[tuple[int, str, str | None]]


def _turns(
    messages: list[Message], renderer: str, order: Callable[[_Blocks, tuple[str, ...]], None]
) -> list[_Turn]:
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
            order(turn.blocks, turn.calls)
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


def _open_section(table: Any, completion_ids: Sequence[int], section: str) -> bool:
    """Whether a completion that was cut off is inside a tool-call section."""
    text: str = table.decode(completion_ids)
    return text.rfind(f"<{DSML}{section}>") > text.rfind(f"</{DSML}{section}>")
