"""How completions of a template-driven format are parsed: :class:`FormatSpec`, and its
inference from the template and the vocabulary.

A spec is declarative: the think markers and whether the generation prompt opens
reasoning, the tool-call grammar (one of a few known ones), stop and end-of-sequence
tokens, and the separators the template writes around parts. The renderer runs it with
the existing parsers (:mod:`renderers.core.grammars`; the DeepSeek, Kimi and Harmony
parsers of the specialised modules), so streaming, spans, terminations and "nothing
lost" hold as they do there.

Inference renders a few probe conversations through the placeholders and reads the
structure around the probe's fields: the control tokens just before and after an
assistant's reasoning are its think markers, the control token after its answer ends the
turn, the control tokens around a tool call's name and arguments are its tags and the
text between them says JSON or XML. Formats with a vocabulary of their own (Harmony,
Kimi, DeepSeek) are recognised by their control tokens. What cannot be read
unambiguously is left out (tool calls then parse as text) and said in the notes; a caller
can give a spec instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from renderers.core.grammars import bare_json_calls
from renderers.core.messages import Message, TextPart, ThinkingPart, ToolCallPart
from renderers.core.tokens import TokenTable
from renderers.template.placeholders import Field, Rendering

__all__ = [
    "PROBE_CALL_ONLY",
    "PROBE_TOOL",
    "PROBE_USER",
    "FormatSpec",
    "ToolCallSyntax",
    "infer_spec",
]

ToolCallSyntax = Literal[
    "json_in_tags", "xml_in_tags", "bare_json", "deepseek_v3", "deepseek_v3.1", "kimi", "harmony"
]
"""The known tool-call grammars: JSON ``{"name", "arguments"}`` between tags (Hermes,
Qwen3), Qwen3-Coder's function/parameter XML between tags, a bare JSON object (Llama
3.1), and the formats of DeepSeek-V3, DeepSeek-V3.1, Kimi-K2 and Harmony (gpt-oss)."""

TAGGED = ("json_in_tags", "xml_in_tags")


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """How completions of a template-driven format are parsed.

    Markers are spellings of control tokens of the tokenizer. Separators are what the
    template writes around parts, removed when parsing so parsed messages render back:
    Qwen3 writes ``<think>\\n{reasoning}\\n</think>\\n\\n{answer}`` (``think_padding="\\n"``,
    ``after_think="\\n\\n"``) and ``\\n`` before each ``<tool_call>`` (``before_call``).
    """

    tool_calls: ToolCallSyntax | None = None
    """The tool-call grammar; ``None``: tool calls are not parsed (they stay text)."""
    call_tags: tuple[str, str] | None = None
    """Opening and closing tags of a call (``json_in_tags``, ``xml_in_tags``)."""
    think: tuple[str, str] | None = None
    """Opening and closing markers of reasoning; ``None``: reasoning is not parsed."""
    prompt_opens_reasoning: bool | None = None
    """Whether completions start inside reasoning; ``None``: when the generation prompt
    (rendered with the call's options) ends with the opening think marker."""
    stop: tuple[str, ...] = ()
    """Tokens that end a turn (``Termination.STOP``)."""
    eos: tuple[str, ...] = ()
    """End-of-sequence tokens (``Termination.EOS``)."""
    ends_message: tuple[str, ...] = ()
    """Tokens that begin another turn: sampled before a stop token, they end the message
    as malformed."""
    think_padding: str = ""
    think_end_padding: str | None = None
    """What is written before the closing think marker where it is not ``think_padding``
    (Nemotron-3 Ultra writes ``<think>\\n{reasoning}</think>``)."""
    after_think: str = ""
    before_call: str = ""
    after_calls: str = ""
    """What is written after the last call, before the end of the turn (Nemotron-3:
    ``\\n``)."""
    python_scalars: bool = False
    """XML call parameters spell ``true``/``false``/``null`` as Python prints them
    (``True``/``False``/``None``: Qwen3.5's and Nemotron-3's templates apply ``|string`` to
    scalars); they parse back as those JSON values."""

    def __post_init__(self) -> None:
        if self.tool_calls is not None and self.tool_calls not in get_args(ToolCallSyntax):
            choices = ", ".join(get_args(ToolCallSyntax))
            raise ValueError(f"tool_calls: expected one of {choices}, got {self.tool_calls!r}")
        if self.tool_calls in TAGGED and self.call_tags is None:
            raise ValueError(f"tool_calls={self.tool_calls!r} needs call_tags (open, close)")
        if not self.stop:
            raise ValueError("stop: a format needs at least one stop token")

    def describe(self) -> list[str]:
        """One line per setting, for people."""
        lines = []
        if self.tool_calls is None:
            lines.append("tool calls: not parsed (text)")
        elif self.call_tags is not None:
            lines.append(
                f"tool calls: {self.tool_calls} in {self.call_tags[0]}…{self.call_tags[1]}"
            )
        else:
            lines.append(f"tool calls: {self.tool_calls}")
        if self.tool_calls == "harmony":
            lines.append("reasoning: the analysis channel (Harmony)")
        elif self.think is None:
            lines.append("reasoning: not parsed")
        else:
            opens = {
                None: "when the generation prompt opens it",
                True: "always",
                False: "never",
            }
            lines.append(
                f"reasoning: {self.think[0]}…{self.think[1]} (a completion starts inside it: "
                f"{opens[self.prompt_opens_reasoning]})"
            )
        lines.append("stop: " + ", ".join(self.stop))
        if self.eos:
            lines.append("end of sequence: " + ", ".join(self.eos))
        if self.ends_message:
            lines.append("a new turn ends the message: " + ", ".join(self.ends_message))
        separators = {
            "think_padding": self.think_padding,
            "think_end_padding": self.think_end_padding,
            "after_think": self.after_think,
            "before_call": self.before_call,
            "after_calls": self.after_calls,
        }
        shown = ", ".join(
            f"{k}={v!r}"
            for k, v in separators.items()
            if v or (v == "" and k.endswith("end_padding"))
        )
        if shown:
            lines.append("separators: " + shown)
        if self.python_scalars:
            lines.append("parameters: True, False, None are JSON true, false, null")
        return lines


Render = Callable[[list[Message], Sequence[Mapping[str, Any]] | None, bool], Rendering]
"""Renders messages (with tools, with or without the generation prompt), attributed."""

PROBE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "probe_tool",
        "description": "A probe.",
        "parameters": {
            "type": "object",
            "properties": {"probe_arg": {"type": "string"}},
            "required": ["probe_arg"],
        },
    },
}
PROBE_USER = Message("user", "Probe question?")
_REASONING = ThinkingPart("Probe reasoning.")
_CALL = ToolCallPart("probe_tool", '{"probe_arg": "probe value"}')
_ANSWER = Message("assistant", [_REASONING, TextPart("Probe answer.")])
_TEXT_AND_CALL = Message("assistant", [_REASONING, TextPart("Probe text."), _CALL])
PROBE_CALL_ONLY = Message("assistant", [_CALL])
_NAME = "tool_calls[0].function.name"
_ARGUMENTS = "tool_calls[0].function.arguments"

# Control tokens that identify a format with a vocabulary of its own.
_HARMONY = ("<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|return|>")
_KIMI = "<|tool_calls_section_begin|>"
_DEEPSEEK = "<｜tool▁calls▁begin｜>"
_DEEPSEEK_SEP = "<｜tool▁sep｜>"


class _Probe:
    """A rendered probe conversation: where the fields of its last message are."""

    def __init__(self, rendering: Rendering, message: int, table: TokenTable) -> None:
        self.pieces = rendering.pieces
        self.fields = rendering.fields
        self.message = message
        self.table = table

    def span(self, path: str) -> tuple[int, int] | None:
        """First and last piece of the field ``path`` of the probed message."""
        target = Field(self.message, path)
        found = [
            k for k, p in enumerate(self.pieces) if p.field >= 0 and self.fields[p.field] == target
        ]
        return (found[0], found[-1]) if found else None

    def control_near(self, k: int, step: int, *, blank: bool) -> tuple[int, str] | None:
        """The nearest control token from piece ``k`` in direction ``step`` and the text
        between (``blank``: only whitespace may be between); ``None`` if there is none."""
        gap: list[str] = []
        j = k + step
        while 0 <= j < len(self.pieces):
            value = self.pieces[j].value
            if type(value) is int:
                text = "".join(reversed(gap)) if step < 0 else "".join(gap)
                return value, text
            assert isinstance(value, str)
            if blank and value.strip():
                return None
            gap.append(value)
            j += step
        return None

    def text_between(self, a: int, b: int) -> str:
        """The text of pieces ``a..b`` (control tokens spelled out)."""
        out = []
        for p in self.pieces[a : b + 1]:
            value = p.value
            out.append(self.table.id_to_bytes[value].decode() if isinstance(value, int) else value)
        return "".join(out)


def infer_spec(
    render: Render, table: TokenTable, source: str, eos: Sequence[str]
) -> tuple[FormatSpec | None, tuple[str, ...]]:
    """The spec a template implies, and notes on how each part was found (or why not).

    ``eos`` are the end-of-sequence spellings of the tokenizer and ``generation_config.json``.
    ``None`` when not even the end of an assistant turn can be read (then a caller must
    give a spec to parse)."""
    notes: list[str] = []
    control = table.control_tokens
    spell = table.control_text

    def probe(messages: list[Message], tools: Any = None) -> _Probe | None:
        try:
            return _Probe(render(messages, tools, False), len(messages) - 1, table)
        except ValueError:
            return None

    answer = probe([PROBE_USER, _ANSWER])
    with_call = probe([PROBE_USER, _TEXT_AND_CALL], [PROBE_TOOL])
    call_only = probe([PROBE_USER, PROBE_CALL_ONLY], [PROBE_TOOL])

    # End of turn: the control token right after the answer.
    eot: str | None = None
    if answer is not None and (content := answer.span("content")) is not None:
        after = answer.control_near(content[1], 1, blank=True)
        if after is not None:
            eot = spell(after[0])
            notes.append(f"end of turn: {eot} (the control token after a rendered answer)")
    next_turns: tuple[str, ...] = ()
    if eot is None:
        next_turns = _next_turn_tokens(render, table)
        if not next_turns:
            notes.append("end of turn: not found (no control token follows a rendered answer)")
            return None, tuple(notes)
        eot = next_turns[0]
        notes.append(
            "end of turn: "
            + ", ".join(next_turns)
            + " (no control token follows a rendered answer: the control token that begins "
            "the next turn, after an answer and after a call)"
        )

    # Reasoning: the control tokens around a rendered reasoning.
    think: tuple[str, str] | None = None
    think_padding = after_think = ""
    think_end_padding: str | None = None
    for p in (answer, with_call):
        span = p.span("reasoning_content") if p is not None else None
        if p is None or span is None:
            continue
        before = p.control_near(span[0], -1, blank=True)
        after = p.control_near(span[1], 1, blank=True)
        if before is None or after is None:
            notes.append("reasoning: written with text markers, which are not parsed")
            break
        think = (spell(before[0]) or "", spell(after[0]) or "")
        think_padding = before[1]
        think_end_padding = None if after[1] == before[1] else after[1]
        content = p.span("content")
        if content is not None:
            gap = p.text_between(span[1] + 1, content[0] - 1)
            after_think = gap.removeprefix(after[1] + think[1])
        notes.append(f"reasoning: {think[0]}…{think[1]} (around a rendered reasoning)")
        break
    else:
        notes.append("reasoning: the template writes no reasoning of an assistant turn")

    header = _generation_header(render, table)
    ends_message = tuple(spell(t) or "" for t in header[:1])

    # Tool calls.
    tool_calls: ToolCallSyntax | None = None
    call_tags: tuple[str, str] | None = None
    before_call = after_calls = ""
    python_scalars = False
    eos_names = [e for e in dict.fromkeys(eos) if e in control and e != eot]
    stop: tuple[str, ...] = (eot, *next_turns[1:])
    if all(t in control for t in _HARMONY) and "<|channel|>" in source:
        tool_calls = "harmony"
        stop = ("<|return|>", "<|call|>")
        eos_names.append("<|endoftext|>")
        think = None
        notes.append(
            "tool calls and reasoning: Harmony channels (the template writes <|channel|> and "
            "the vocabulary has it)"
        )
    elif _KIMI in control and _KIMI in source:
        tool_calls = "kimi"
        notes.append(f"tool calls: Kimi-K2 sections ({_KIMI} in the template and vocabulary)")
    elif _DEEPSEEK in control and _DEEPSEEK in source:
        tool_calls = _deepseek_version(call_only or with_call, table)
        notes.append(f"tool calls: {tool_calls} ({_DEEPSEEK} in the template and vocabulary)")
        if tool_calls == "deepseek_v3.1" and think is None and "</think>" in control:
            think = ("<think>", "</think>")
            notes.append(
                "reasoning: <think>…</think> (DeepSeek-V3.1's tokens; its template writes no "
                "reasoning of assistant turns)"
            )
    else:
        for p in (with_call, call_only):
            if p is None:
                continue
            found = _tagged_or_bare(p, table, eot, think, header)
            if found is None:
                continue
            tool_calls, call_tags, before_call, note = found
            notes.append(note)
            assert call_tags is not None or tool_calls == "bare_json"
            if call_tags is not None:
                after_calls = _after_calls(call_only or p, table, call_tags[1], eot)
                if after_calls:
                    notes.append(f"after the last call: {after_calls!r} (from a rendered call)")
            if tool_calls == "xml_in_tags":
                python_scalars = _python_scalars(render)
                if python_scalars:
                    notes.append("parameters: a true argument is written True (Python's str)")
            break
        else:
            notes.append(
                "tool calls: not recognised in the template's rendering of a call (they parse "
                "as text; give a spec to parse them)"
            )
    if tool_calls not in (*TAGGED, "bare_json", None):
        # The specialised parsers of these formats know their own separators and turns.
        ends_message = ()
        think_padding = after_think = before_call = after_calls = ""
        think_end_padding = None
    spec = FormatSpec(
        tool_calls=tool_calls,
        call_tags=call_tags,
        think=think,
        stop=stop,
        eos=tuple(e for e in dict.fromkeys(eos_names) if e not in stop),
        ends_message=ends_message,
        think_padding=think_padding,
        think_end_padding=think_end_padding,
        after_think=after_think,
        before_call=before_call,
        after_calls=after_calls,
        python_scalars=python_scalars,
    )
    return spec, tuple(notes)


def _after_calls(p: _Probe, table: TokenTable, close: str, eot: str) -> str:
    """The whitespace a rendered call turn has between its last call's closing tag and the
    end of the turn (``""`` when something else is there)."""
    close_id, eot_id = table.control_tokens.get(close), table.control_tokens.get(eot)
    arguments = p.span(_ARGUMENTS)
    if arguments is None:
        return ""
    k = next(
        (j for j in range(arguments[1] + 1, len(p.pieces)) if p.pieces[j].value == close_id),
        None,
    )
    found = p.control_near(k, 1, blank=True) if k is not None else None
    return found[1] if found is not None and found[0] == eot_id else ""


def _python_scalars(render: Render) -> bool:
    """Whether the template writes a ``true`` argument as ``True`` (Python's ``str``)."""
    call = ToolCallPart(_CALL.name, '{"probe_arg": true}')
    try:
        rendering = render([PROBE_USER, Message("assistant", [call])], [PROBE_TOOL], False)
    except ValueError:
        return False
    return ">\nTrue\n<" in rendering.text or ">True<" in rendering.text


def _next_turn_tokens(render: Render, table: TokenTable) -> tuple[str, ...]:
    """For a template that writes no end of turn (GLM: the next turn's header ends it),
    the first control token the template adds after an answer when a user message follows,
    and after a call when its result follows (one the turn alone does not end with): what
    sampling stops at."""
    result = Message("tool", "Probe result.", tool_call_id="call_0")
    found: list[str] = []
    for turn, last_field, follower, tools in (
        ([PROBE_USER, _ANSWER], "content", Message("user", "Probe follow-up?"), None),
        ([PROBE_USER, PROBE_CALL_ONLY], _ARGUMENTS, result, [PROBE_TOOL]),
    ):
        try:
            alone = _Probe(render(turn, tools, False), len(turn) - 1, table)
            followed = _Probe(render([*turn, follower], tools, False), len(turn) - 1, table)
        except ValueError:
            continue
        ends = [alone.span(last_field), followed.span(last_field)]
        if ends[0] is None or ends[1] is None:
            continue
        own = {p.value for p in alone.pieces[ends[0][1] + 1 :] if type(p.value) is int}
        added = [p.value for p in followed.pieces[ends[1][1] + 1 :] if type(p.value) is int]
        first = next((t for t in added if t not in own), None)
        if first is not None and (name := table.control_text(first)) and name not in found:
            found.append(name)
    return tuple(found)


def _generation_header(render: Render, table: TokenTable) -> list[int]:
    """The control tokens the generation prompt adds after a user message."""
    try:
        with_prompt = render([PROBE_USER], None, True).pieces
        without = render([PROBE_USER], None, False).pieces
    except ValueError:
        return []
    n = 0
    while n < min(len(with_prompt), len(without)) and with_prompt[n] == without[n]:
        n += 1
    return [p.value for p in with_prompt[n:] if type(p.value) is int]


def _deepseek_version(p: _Probe | None, table: TokenTable) -> ToolCallSyntax:
    """V3 writes ``function<｜tool▁sep｜>NAME``, V3.1 ``NAME<｜tool▁sep｜>ARGS``."""
    if p is not None:
        sep = table.control_tokens.get(_DEEPSEEK_SEP)
        for k, piece in enumerate(p.pieces):
            if piece.value == sep and k > 0 and p.pieces[k - 1].value == "function":
                return "deepseek_v3"
    return "deepseek_v3.1"


def _tagged_or_bare(
    p: _Probe,
    table: TokenTable,
    eot: str,
    think: tuple[str, str] | None,
    header: list[int],
) -> tuple[ToolCallSyntax, tuple[str, str] | None, str, str] | None:
    """A rendered call between tags (JSON or XML body) or as a bare JSON object."""
    name = p.span(_NAME)
    arguments = p.span(_ARGUMENTS)
    if name is None or arguments is None:
        return None
    spell = table.control_text
    before = p.control_near(name[0], -1, blank=False)
    after = p.control_near(arguments[1], 1, blank=False)
    if before is None or after is None:
        return None
    not_tags = {eot, *(think or ())} | {spell(t) or "" for t in header}
    open_, close = spell(before[0]) or "", spell(after[0]) or ""
    body = before[1] + after[1]
    content = p.span("content")
    if open_ not in not_tags and close not in not_tags:
        before_call = ""
        if content is not None:
            gap = p.control_near(content[1], 1, blank=True)
            if gap is not None and spell(gap[0]) == open_:
                before_call = gap[1]
        if "<function=" in body:
            return (
                "xml_in_tags",
                (open_, close),
                before_call,
                (f"tool calls: XML function/parameter in {open_}…{close} (from a rendered call)"),
            )
        if '"name"' in body:
            return (
                "json_in_tags",
                (open_, close),
                before_call,
                (f"tool calls: JSON in {open_}…{close} (from a rendered call)"),
            )
        return None
    # No tags: a bare JSON object between the turn's control tokens (after its header)?
    start = name[0]
    while start > 0 and type(p.pieces[start - 1].value) is not int:
        start -= 1
    end = arguments[1]
    while end + 1 < len(p.pieces) and type(p.pieces[end + 1].value) is not int:
        end += 1
    text = p.text_between(start, end)
    for k, ch in enumerate(text):
        if ch in "{[":
            calls = bare_json_calls(text[k:])
            if calls and getattr(calls[0], "name", None) == _CALL.name:
                return "bare_json", None, "", "tool calls: bare JSON objects (from a rendered call)"
    return None
