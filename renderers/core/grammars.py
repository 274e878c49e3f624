"""Tool-call grammars that several formats share, run by the parsing engine.

- **Calls in paired tags** (:class:`TaggedParser`): text, think blocks and tool calls
  between paired control tokens, in any order. The body of a call is JSON
  ``{"name": ..., "arguments": ...}`` as Qwen3 and Hermes write it
  (:func:`json_call_builder`), function/parameter XML as Qwen3-Coder, Qwen3.5 and
  Nemotron-3 write it (:func:`xml_call_builder`)::

      <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>

  or GLM's key/value tags (:func:`glm_call_builder`).

- **Bare JSON calls** (:class:`BareJsonParser`): a message that is nothing but a JSON object
  ``{"name": ..., "arguments"|"parameters": {...}}`` (or a JSON list of them) is a tool
  call, as Llama 3.1 writes them; any other message is text. A parser may read more
  spellings (``read_calls``: Llama 4's calls back to back, :func:`concatenated_json_calls`,
  or as a Python list, :func:`pythonic_calls`), and a grammar's ``breaks`` (Llama 4's
  ``<|python_start|>``/``<|python_end|>``) split text into regions read one by one.

Reasoning ends only at its closing marker: a call drafted inside open reasoning stays
reasoning text (reported as an issue), and a control token out of place is kept as text
with an issue, so no sampled character is lost. A parser made with ``calls_end_reasoning``
reads such a call as inference servers' Qwen3 parsers do instead (see
:class:`TaggedParser`).

A :class:`TagGrammar` holds the token ids and the separators a template writes around
parts (Qwen3: ``<think>\\n...\\n</think>\\n\\n``, ``\\n`` before a call; Nemotron-3: ``\\n``
after the last call, dropped only when the stop token follows), which the parser removes
so a parsed message renders back to the same ids. From them it makes its table of moves
(:func:`tag_moves`: per open region and control token, what the token does, and the
regions each move opens with what they strip), the one description of the grammar that
:class:`TaggedParser` runs both token by token as a completion streams and over whole
runs of text for a one-shot parse.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from renderers.core.assembly import (
    TEXT,
    THINKING,
    TOOL_CALL,
    ToolCallBuilder,
    json_object_members,
    without_prefix,
)
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import Part, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseResult
from renderers.core.scanning import MarkerScanner
from renderers.core.tokens import TokenTable

__all__ = [
    "BareJsonParser",
    "CallReader",
    "Move",
    "Region",
    "TagGrammar",
    "TaggedParser",
    "bare_json_call_texts",
    "bare_json_calls",
    "concatenated_json_calls",
    "glm_call_builder",
    "json_call_builder",
    "pythonic_calls",
    "tag_moves",
    "xml_call_builder",
]


@dataclass(frozen=True, slots=True)
class Region:
    """A region a control token opens: its kind, the separator stripped from its start,
    the tail held back while it may be the separator its closing marker strips, and
    whether it is ``explicit`` (cut off inside, it still yields an empty part).
    ``before_stop`` is stripped from its end when the stop token ends it (the text after
    a call: the template's ``after_calls``); a cut-off completion keeps it."""

    kind: str
    strip_prefix: str = ""
    holdback: str = ""
    explicit: bool = False
    before_stop: str = ""


OPEN = "open"
"""The open region ends at the token (or after it) and the move's region begins there."""
KEEP = "keep"
"""The token is text of the open region (reported unless the move has no issue)."""
DRAFT = "draft"
"""A call token inside open reasoning: reasoning text, reported once per think block."""
CUT = "cut"
"""The open call is cut at the token (incomplete) and the move's region (text) begins
there, in which the token is then read."""
END = "end"
"""The message ends before the token (reported)."""


@dataclass(frozen=True, slots=True)
class Move:
    """What a control token does in an open region: one entry of a tagged grammar's
    table, which both the streaming and the one-shot parse run.

    ``issue`` is a format string of the token's spelling (``{0}``) and the first stop
    token's (``{1}``). ``ends_reasoning``: a call that ended the open reasoning (its
    closing marker, sampled later in text, is dropped)."""

    action: str
    region: Region | None = None
    at: int = 0
    """The open region ends, and the next begins, at the token (0) or after it (1)."""
    strip_suffix: str = ""
    issue: str | None = None
    ends_reasoning: bool = False

    @property
    def plain(self) -> bool:
        """A move of a well-formed completion (the one-shot path reads only those)."""
        return self.action == OPEN and self.issue is None and not self.ends_reasoning


STOP = Move(OPEN)
"""A stop or end-of-sequence token in text, or in a call of a grammar without
``call_end`` (read by the one-shot parse): the region ends there (text less its
``before_stop``), and the message."""

Moves: TypeAlias = dict[str, dict[int, Move]]
"""A tagged grammar's table: per open region's kind, per control id, its move."""


@dataclass(frozen=True, slots=True)
class TagGrammar:
    """The tokens and separators of a format whose completions hold text, think blocks and
    tool calls between paired control tokens (``None``: the format has no such part).

    ``ends_message`` are tokens that begin another turn: sampled before a stop token, they
    end the message as malformed. ``build_call`` turns a call's raw body into a part; a
    grammar with ``call`` and no ``call_end`` reads a call up to the stop token (Llama 3's
    ``<|python_tag|>`` ... ``<|eom_id|>``).
    """

    stop: tuple[int, ...]
    eos: tuple[int, ...] = ()
    ends_message: tuple[int, ...] = ()
    think: int | None = None
    think_end: int | None = None
    call: int | None = None
    call_end: int | None = None
    build_call: ToolCallBuilder | None = None
    think_padding: str = ""
    """Written inside a think block on both sides (Qwen3: ``"\\n"``)."""
    think_end_padding: str | None = None
    """Written before the think block's closing marker where it is not ``think_padding``
    (Nemotron-3 Ultra: ``""``, after ``<think>\\n``); see :attr:`closing_padding`."""
    after_think: str = ""
    """Written between a think block and the text after it (Qwen3: ``"\\n\\n"``)."""
    before_call: str = ""
    """Written before a call's opening tag after text (Qwen3: ``"\\n"``, Qwen3.5:
    ``"\\n\\n"``); after another call too, unless ``after_call`` says otherwise."""
    after_call: str = ""
    """Written after each call's closing tag before whatever follows it, another call,
    a think block or text (Qwen3.5: ``"\\n"``): stripped from the start of the text after
    a call."""
    after_calls: str = ""
    """Written once after the last call, before the stop token (Nemotron-3: ``"\\n"``):
    stripped from the end of the text after a call only when the stop token ends it (a
    cut-off turn keeps it); held back meanwhile (see :attr:`after_call_holdback`)."""
    before_think: str = ""
    """Removed from the end of the text before a think block (Qwen3.5: ``"\\n"``, which it
    writes between a call and a think block)."""
    nested_think_is_reasoning: bool = False
    """A think marker inside open reasoning is reasoning text, not an issue (Qwen3.5)."""
    breaks: tuple[int, ...] = ()
    """Markers that end the text before them and open new text, and are dropped (Llama 4's
    ``<|python_start|>``/``<|python_end|>``, which its template writes around a call turn's
    text): each side is read on its own, so the text after them may be bare calls."""
    text_prefix: str = ""
    """Written before the text a completion starts with and before a call body after its
    call token (Mistral v7: ``" "``, SentencePiece's dummy prefix): stripped there."""
    markers_cut_calls: bool = False
    """Any marker but the call's end, sampled inside a call, cuts the call there and is read
    after it (Qwen3.5). Otherwise only an opening marker does: a stray think end is call
    text, and a token of another turn ends the message inside the call (Qwen3)."""

    _structural: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _moves: tuple[Moves, Moves] = field(init=False, repr=False, compare=False)
    _plain: Moves = field(init=False, repr=False, compare=False)
    _start: tuple[Region, Region] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = (self.think, self.think_end, self.call, self.call_end, *self.breaks)
        ids += tuple(self.ends_message)
        object.__setattr__(self, "_structural", tuple(t for t in ids if t is not None))
        moves = tag_moves(self, False)
        object.__setattr__(self, "_moves", (moves, tag_moves(self, True)))
        plain = {kind: {t: m for t, m in row.items() if m.plain} for kind, row in moves.items()}
        for t in (*self.stop, *self.eos):
            plain[TEXT][t] = STOP
            if self.call is not None and self.call_end is None:
                plain[TOOL_CALL][t] = STOP  # a call that runs to the stop token
        object.__setattr__(self, "_plain", plain)
        text = Region(TEXT, self.text_prefix, holdback=self.before_call)
        thinking = Region(THINKING, "", self.closing_padding, explicit=True)
        object.__setattr__(self, "_start", (text, thinking))

    def structural(self) -> tuple[int, ...]:
        """The ids the parser reacts to (besides stop and end-of-sequence ids)."""
        return self._structural

    def closing(self, result: ParseResult, end: tuple[int, ...]) -> list[int]:
        """The ids that end a turn the sampler stopped without its stop token: the marker
        closing a think block or call it was cut off inside, then ``end``; none when the
        turn kept its stop token."""
        if result.stop_token_id is not None:
            return []
        last = result.message.parts[-1] if result.message.parts else None
        if getattr(last, "incomplete", False):
            if type(last) is ThinkingPart and self.think_end is not None:
                return [self.think_end, *end]
            if type(last) is UnparsedToolCallPart and self.call_end is not None:
                return [self.call_end, *end]
        return list(end)

    @property
    def closing_padding(self) -> str:
        """What is written before the think block's closing marker."""
        return self.think_padding if self.think_end_padding is None else self.think_end_padding

    @property
    def after_call_holdback(self) -> str:
        """The tail held back in text after a call: it may be the separator before the
        next call, or what follows the last one (the longer of the two)."""
        longer = len(self.after_calls) > len(self.before_call)
        return self.after_calls if longer else self.before_call

    def moves(self, calls_end_reasoning: bool) -> Moves:
        """The grammar's table (see :func:`tag_moves`), made once."""
        return self._moves[calls_end_reasoning]

    def plain_moves(self) -> Moves:
        """The plain moves of the table (a well-formed completion's), and :data:`STOP` for
        a stop or end-of-sequence id in text (and in a call, without ``call_end``): what
        the one-shot parse reads."""
        return self._plain

    def start(self, opens_reasoning: bool, reasoning_prefix: str = "") -> Region:
        """The region a completion starts in: text, or reasoning when the prompt opened
        it (``reasoning_prefix``: padding the prompt did not write, stripped)."""
        if reasoning_prefix and opens_reasoning:
            return Region(THINKING, reasoning_prefix, self.closing_padding, explicit=True)
        return self._start[opens_reasoning]


def tag_moves(g: TagGrammar, calls_end_reasoning: bool) -> Moves:
    """The moves of a tagged grammar: think blocks and calls open and close at their
    markers, with the separators the template writes around them stripped; a marker out
    of place is text with an issue, a call drafted in reasoning is reasoning (or ends it,
    ``calls_end_reasoning``), a token of another turn ends the message."""
    text = Region(TEXT, holdback=g.before_call)
    closing = g.closing_padding
    thinking = Region(THINKING, g.think_padding, closing, explicit=True)
    call = Region(TOOL_CALL)
    stray_end = Move(KEEP, issue="{0} without an open think block (kept as text)")
    stray_call_end = Move(KEEP, issue="{0} without an open tool call (kept as text)")
    ends = Move(END, issue="{0} before {1}: the message ends here")
    cut = Move(CUT, text, issue="{0} inside a tool call (the call is cut there)")
    in_text = {
        g.think: Move(OPEN, thinking, strip_suffix=g.before_think),
        g.think_end: stray_end,
        g.call: Move(OPEN, call, strip_suffix=g.before_call),
        g.call_end: stray_call_end,
    }
    nested = "{0} inside an open think block (kept as text)"
    after_think = Region(TEXT, g.after_think, g.before_call)
    in_thinking = {
        g.think: Move(KEEP, issue=None if g.nested_think_is_reasoning else nested),
        g.think_end: Move(OPEN, after_think, 1, closing),
        g.call: (
            Move(OPEN, call, strip_suffix=closing, ends_reasoning=True)
            if calls_end_reasoning
            else Move(DRAFT)
        ),
        g.call_end: Move(DRAFT),
    }
    after_call = Region(TEXT, g.after_call, g.after_call_holdback, before_stop=g.after_calls)
    in_call = {
        g.think: cut,
        g.think_end: cut if g.markers_cut_calls else stray_end,
        g.call: cut,
        g.call_end: Move(OPEN, after_call, 1),
    }
    table = {TEXT: in_text, THINKING: in_thinking, TOOL_CALL: in_call}
    for t in g.breaks:
        in_text[t] = Move(OPEN, text, 1)
        in_thinking[t] = Move(KEEP, issue=nested)
        in_call[t] = Move(KEEP, issue="{0} inside a tool call (kept as call text)")
    for t in g.ends_message:
        in_text[t] = in_thinking[t] = ends
        in_call[t] = cut if g.markers_cut_calls else ends
    return {
        kind: {t: m for t, m in moves.items() if t is not None} for kind, moves in table.items()
    }


class TaggedParser(StreamParser):
    """Completions of a :class:`TagGrammar`: text, think blocks and tool calls in any order,
    read by the grammar's table of moves (:func:`tag_moves`), token by token as they
    stream and run over whole runs for a one-shot parse.

    ``opens_reasoning``: the generation prompt ended with the think marker, so the
    completion starts inside the reasoning; ``reasoning_prefix`` is the padding the prompt
    did not write yet (removed from the start of the reasoning).

    ``calls_end_reasoning``: a call opened inside open reasoning ends the reasoning there
    and is a call (vLLM's Qwen3 parser: ``<tool_call>`` is an implicit end of reasoning);
    the think block's own closing marker, sampled later, is dropped from the text around
    it, as vLLM drops it from the content (no issue for either).
    """

    def __init__(
        self,
        grammar: TagGrammar,
        table: TokenTable,
        events: bool,
        *,
        opens_reasoning: bool = False,
        reasoning_prefix: str = "",
        calls_end_reasoning: bool = False,
    ) -> None:
        super().__init__(
            table,
            structural=grammar.structural(),
            stop_ids=grammar.stop,
            eos_ids=grammar.eos,
            events=events,
        )
        self._g = grammar
        self._moves = grammar.moves(calls_end_reasoning)
        self._ended_by_call = False  # a call ended the open reasoning; its end may follow
        self._region: Region  # the open region (set by _enter)
        self._first = first = grammar.start(opens_reasoning, reasoning_prefix)
        self._on_text = self.asm.write  # type: ignore[method-assign]
        self._enter(first, 0)

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return True, None  # text goes to the assembler as it comes

    def _build(self, segments: list[str], incomplete: bool) -> Part:
        build = self._g.build_call
        assert build is not None, "a tool-call region needs the grammar's call builder"
        return build(segments, incomplete)

    def _enter(self, region: Region, start: int) -> None:
        self._region = region
        self.asm.open(
            region.kind,
            start,
            strip_prefix=region.strip_prefix,
            holdback=region.holdback,
            explicit=region.explicit,
        )

    def _said(self, issue: str, token_id: int) -> str:
        """An issue of the table, spelt with the token's spelling and the stop token's."""
        name = self._table.control_text
        stop = name(self._g.stop[0]) if self._g.stop else "a stop token"
        return issue.format(name(token_id), stop)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self._ended_by_call:
            if token_id == self._g.think_end and self.asm.kind == TEXT:
                # The end of the think block a call ended: the server drops it from the text.
                self._ended_by_call = False
                return
            if token_id == self._g.think:
                self._ended_by_call = False
        self._move(self._moves[self.asm.kind or TEXT][token_id], token_id, pos)

    def _move(self, move: Move, token_id: int, pos: int) -> None:
        action = move.action
        asm = self.asm
        if action == OPEN:
            at = pos + move.at
            asm.close(at, strip_suffix=move.strip_suffix, build=self._build)
            assert move.region is not None
            self._enter(move.region, at)
            if move.ends_reasoning:
                self._ended_by_call = True
        elif action == KEEP:
            why = None if move.issue is None else self._said(move.issue, token_id)
            self._keep_as_text(token_id, pos, why)
        elif action == DRAFT:
            self._drafted_call(token_id, pos)
        elif action == CUT:
            assert move.issue is not None
            self._issue(pos, self._said(move.issue, token_id))
            asm.close(pos, incomplete=True, build=self._build)
            assert move.region is not None
            self._enter(move.region, pos)
            self._move(self._moves[TEXT][token_id], token_id, pos)
        else:  # END
            assert move.issue is not None
            self._issue(pos, self._said(move.issue, token_id))
            self._end_message(pos)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse: the same table run over whole runs (each region's text is
        one run, its separators stripped once, as the assembler strips them across
        writes), for a completion whose moves are all plain (each think block and call
        closed before the next opens, nothing open at the stop token). Anything else (an
        issue to report) takes the general path."""
        plain = self._g.plain_moves()
        build = self._build
        texts = runs.texts
        cuts = runs.cuts
        parts: list[Part | None] = []
        spans: list[tuple[int, int]] = []
        region = self._first
        kind = region.kind
        prefix = region.strip_prefix
        start = 0
        stop = None
        j = -1
        for j, t in enumerate(runs.tokens):
            move = plain[kind].get(t)
            if move is None:
                return None  # an issue to report (or a stop inside a think block or call)
            end = cuts[j] + move.at
            text = texts[j]
            if kind == TOOL_CALL:
                parts.append(build([text], False))
                spans.append((start, end))
            else:
                if prefix:
                    text = without_prefix(text, prefix)
                suffix = region.before_stop if move is STOP else move.strip_suffix
                if suffix:
                    text = text.removesuffix(suffix)
                if text:
                    parts.append(TextPart(text) if kind == TEXT else ThinkingPart(text))
                    spans.append((start, end))
            if move is STOP:
                stop = j
                break
            assert move.region is not None
            region = move.region
            kind, prefix, start = region.kind, region.strip_prefix, end
        if stop is None:  # cut off: what is open is incomplete
            text = texts[j + 1]
            if kind == TOOL_CALL:
                parts.append(build([text], True))
                spans.append((start, runs.count))
            else:
                if prefix:
                    text = without_prefix(text, prefix)
                if text or region.explicit:
                    cut = ThinkingPart if kind == THINKING else TextPart
                    parts.append(cut(text, None, True))
                    spans.append((start, runs.count))
        return self._one_shot_result(runs, parts, spans, stop)

    def _on_end(self, pos: int, stopped: bool) -> None:
        asm = self.asm
        if stopped and asm.kind == THINKING:
            self._issue(pos, "the message ended inside an open think block")
        elif stopped and asm.kind == TOOL_CALL and self._g.call_end is not None:
            # (A grammar without ``call_end`` ends a call at the stop token: Llama's
            # ``<|python_tag|>`` call, which ``<|eom_id|>`` ends.)
            close = self._table.control_text(self._g.call_end)
            self._issue(pos, f"the message ended inside a tool call (no {close})")
        strip = self._region.before_stop if stopped and asm.kind == TEXT else ""
        asm.close(pos, strip_suffix=strip, incomplete=not stopped, build=self._build)


# -- JSON in tags ----------------------------------------------------------------------------

_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _visible_name(raw: str) -> str | None:
    match = _NAME.search(raw)
    if match is None:
        return None
    try:
        name = json.loads('"' + match.group(1) + '"')
    except ValueError:
        return None
    return name if isinstance(name, str) else None


_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*?)\s*\}\s*\Z', re.S)


def _visible_arguments(raw: str) -> str | None:
    """The text after ``"arguments":`` up to the object's closing brace, as sampled (the
    arguments OpenAI would report for a call whose JSON is invalid)."""
    match = _ARGUMENTS.search(raw)
    return match.group(1) if match else None


# The common spelling, read without the general member scanner: ``{"name": "NAME",
# "KEY": `` with a name and key free of escapes (JSON whitespace only, no control
# characters), then one JSON value and the closing brace.
_CALL_HEAD = re.compile(
    r'[ \t\n\r]*\{[ \t\n\r]*"name"[ \t\n\r]*:[ \t\n\r]*"([^"\\\x00-\x1f]*)"'
    r'[ \t\n\r]*,[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*'
)
_CALL_TAIL = re.compile(r"[ \t\n\r]*\}[ \t\n\r]*\Z")
_VALUE = json.JSONDecoder().raw_decode


def _json_call(raw: str, keys: tuple[str, ...], with_id: bool = False) -> Part:
    """``{"name": NAME, KEY: ARGS}`` (KEY one of ``keys``; ``with_id``: and an optional
    ``"id": ID`` member, Mistral's) -> a tool call whose arguments are the raw JSON text of
    ARGS as sampled."""
    head = _CALL_HEAD.match(raw)
    if head is not None and head.group(2) in keys:
        at = head.end()
        try:
            end = _VALUE(raw, at)[1]
        except ValueError as exc:  # the member scanner fails at the same value, alike
            return _invalid_json_call(raw, exc)
        if _CALL_TAIL.match(raw, end):
            return ToolCallPart(head.group(1), raw[at:end])
    return _scanned_json_call(raw, keys, with_id)


def _invalid_json_call(raw: str, exc: ValueError) -> Part:
    return UnparsedToolCallPart(
        raw, f"invalid JSON: {exc}", name=_visible_name(raw), arguments=_visible_arguments(raw)
    )


def _scanned_json_call(raw: str, keys: tuple[str, ...], with_id: bool = False) -> Part:
    """:func:`_json_call` by the general member scanner (any spelling, and the errors)."""
    try:
        members = json_object_members(raw)
    except ValueError as exc:
        return _invalid_json_call(raw, exc)
    names = [k for k, _, _ in members]
    fields = {k: (v, text) for k, v, text in members}
    key = next((k for k in keys if k in fields), keys[0])
    call_id = fields.get("id", (None, ""))[0] if with_id else None
    if call_id is not None and isinstance(call_id, str):
        names = [k for k in names if k != "id"]
    if sorted(names) != sorted(["name", key]):
        expected = " or ".join(f'{{"name": ..., "{k}": ...}}' for k in keys)
        return UnparsedToolCallPart(
            raw, f"expected {expected}, got keys {names}", name=_visible_name(raw)
        )
    name = fields["name"][0]
    if not isinstance(name, str):
        return UnparsedToolCallPart(raw, "the tool-call name is not a string")
    return ToolCallPart(name, fields[key][1], id=call_id)


def json_call_builder(close: str) -> ToolCallBuilder:
    """Builds a call from ``{"name": ..., "arguments": ...}`` between tags (``close`` is the
    closing tag's spelling, named when a call is cut off)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        if incomplete:
            return UnparsedToolCallPart(
                raw, f"cut off before {close}", name=_visible_name(raw), incomplete=True
            )
        return _json_call(raw, ("arguments",))

    return build


# -- XML function/parameter in tags (Qwen3-Coder, Qwen3.5) ----------------------------------

_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>\n?(.*?)</function>\s*\Z", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>\n?(.*?)\n?</parameter>\s*", re.S)
_OPEN_FUNCTION = re.compile(r"<function=([^>\n]+)>")


_PYTHON_SCALARS = {"True": "true", "False": "false", "None": "null"}


def _parameter_value(text: str, python_scalars: bool = False) -> str:
    """A parameter's JSON text: a JSON number, boolean, null, object or array as written;
    any other text is a string (the format writes strings raw). ``python_scalars``:
    ``True``, ``False`` and ``None`` are the JSON constants (a template writing scalars
    with Python's ``str``)."""
    if python_scalars and text in _PYTHON_SCALARS:
        return _PYTHON_SCALARS[text]
    try:
        value = json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def xml_call_builder(close: str, *, python_scalars: bool = False) -> ToolCallBuilder:
    """Builds a call from Qwen3-Coder's, Qwen3.5's and Nemotron-3's XML (``<function=NAME>``
    with ``<parameter=KEY>`` children). Arguments become a JSON object with default
    separators; values that parse as JSON numbers, booleans, null, objects or arrays keep
    their text, others are strings (the format does not say which a value was: ``"42"``
    reads back as the number 42). ``python_scalars``: ``True``/``False``/``None`` are
    ``true``/``false``/``null`` (Nemotron-3; Qwen3.5 reads them as strings)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        opened = _OPEN_FUNCTION.search(raw)
        name = opened.group(1) if opened else None
        if incomplete:
            return UnparsedToolCallPart(raw, f"cut off before {close}", name=name, incomplete=True)
        function = _FUNCTION.match(raw)
        if function is None:
            return UnparsedToolCallPart(raw, "expected <function=NAME>...</function>", name=name)
        body = function.group(2)
        members: list[str] = []
        at = len(body) - len(body.lstrip())
        for parameter in _PARAMETER.finditer(body, at):
            if parameter.start() != at:
                break
            key = json.dumps(parameter.group(1), ensure_ascii=False)
            members.append(f"{key}: {_parameter_value(parameter.group(2), python_scalars)}")
            at = parameter.end()
        if body[at:].strip():
            return UnparsedToolCallPart(
                raw, f"unexpected text in the function body: {body[at : at + 40]!r}", name=name
            )
        return ToolCallPart(function.group(1), "{" + ", ".join(members) + "}")

    return build


# -- GLM's key/value calls in tags --------------------------------------------------------------

_GLM_CALL = re.compile(r"\s*([^<>\s][^<>]*?)\s*((?:<arg_key>.*)?)\Z", re.S)
_GLM_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>\s*", re.S)


def glm_call_builder(close: str) -> ToolCallBuilder:
    """Builds a call from GLM's ``NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...``
    (the tags are control tokens, read here by their spelling). Arguments become a JSON
    object with default separators; a value that is JSON other than a string keeps its
    text, any other value is a string (GLM writes strings raw, other values as JSON)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        head = _GLM_CALL.match(raw)
        name = head.group(1) if head else None
        if incomplete:
            return UnparsedToolCallPart(raw, f"cut off before {close}", name=name, incomplete=True)
        if head is None:
            return UnparsedToolCallPart(raw, "expected NAME<arg_key>...", name=None)
        body = head.group(2)
        members: list[str] = []
        at = 0
        for argument in _GLM_ARGUMENT.finditer(body):
            if argument.start() != at:
                break
            key = json.dumps(argument.group(1), ensure_ascii=False)
            members.append(f"{key}: {_parameter_value(argument.group(2))}")
            at = argument.end()
        if body[at:]:
            return UnparsedToolCallPart(
                raw, f"unexpected text in the call: {body[at : at + 40]!r}", name=name
            )
        return ToolCallPart(head.group(1), "{" + ", ".join(members) + "}")

    return build


# -- bare JSON ---------------------------------------------------------------------------------


def bare_json_calls(text: str) -> list[Part] | None:
    """The tool calls ``text`` is, when it is nothing but a JSON call object
    ``{"name": ..., "arguments"|"parameters": {...}}`` or a JSON list of them; else ``None``."""
    calls = _bare_json_calls(text)
    return None if calls is None else [call for call, _ in calls]


def bare_json_call_texts(text: str) -> list[tuple[Part, str]] | None:
    """:func:`bare_json_calls` with each call's JSON text as sampled."""
    return _bare_json_calls(text)


def _bare_json_calls(text: str, with_id: bool = False) -> list[tuple[Part, str]] | None:
    """:func:`bare_json_calls` with each call's JSON text as sampled (``with_id``: calls may
    hold an ``"id"``)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    if stripped[0] == "{":
        call = _json_call(stripped, ("arguments", "parameters"), with_id)
        return [(call, stripped)] if type(call) is ToolCallPart else None
    try:
        items = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(items, list) or not items:
        return None
    calls: list[tuple[Part, str]] = []
    decoder = json.JSONDecoder()
    at = 1
    for _ in items:  # re-read each element's text so arguments stay as written
        while stripped[at] in " \t\r\n,":
            at += 1
        _, end = decoder.raw_decode(stripped, at)
        call = _json_call(stripped[at:end], ("arguments", "parameters"), with_id)
        if type(call) is not ToolCallPart:
            return None
        calls.append((call, stripped[at:end]))
        at = end
    return calls


def concatenated_json_calls(
    text: str, also: Callable[[str], Part | None] | None = None
) -> list[tuple[Part, str]] | None:
    """The calls ``text`` is when it is JSON call objects back to back, ``{...}{...}``
    (whitespace between them allowed), each ``{"name": ..., "arguments"|"parameters": ...}``
    (Llama 4's template writes a message's calls so) or an object ``also`` reads as a call,
    with each call's text; else ``None``."""
    decoder = json.JSONDecoder()
    calls: list[tuple[Part, str]] = []
    at, end = 0, len(text)
    while True:
        while at < end and text[at] in " \t\r\n":
            at += 1
        if at == end:
            return calls or None
        if text[at] != "{":
            return None
        try:
            _, stop = decoder.raw_decode(text, at)
        except ValueError:
            return None
        raw = text[at:stop]
        call: Part | None = _json_call(raw, ("arguments", "parameters"))
        if type(call) is not ToolCallPart:
            call = also(raw) if also is not None else None
            if call is None:
                return None
        calls.append((call, raw))
        at = stop


def _bracketed_groups(text: str) -> list[str] | None:
    """``text`` cut into its top-level bracketed groups, ``[...][...]`` (Python tokens, so
    brackets inside strings do not count); ``None`` if anything else is at the top."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    groups: list[str] = []
    depth, begin = 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER):
                continue
            if tok.type in (tokenize.INDENT, tokenize.DEDENT):
                continue
            at = starts[tok.start[0] - 1] + tok.start[1]
            if depth == 0:
                if tok.string != "[":
                    return None
                begin = at
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth -= 1
                if depth == 0:
                    groups.append(text[begin : at + 1])
    except (tokenize.TokenError, SyntaxError):
        return None
    return groups if depth == 0 and groups else None


def pythonic_calls(text: str) -> list[tuple[Part, str]] | None:
    """The calls ``text`` is when it is Python lists of calls with keyword arguments of
    literal values, ``[get_weather(city="Paris", days=2), now()]`` (Meta's ``python_list``
    tool format, which Llama 3.2 and 4 are prompted to sample; llama-models' encoder writes
    each call of a message as its own list, back to back), each call's arguments as a JSON
    object (Python's ``True``/``None`` as ``true``/``null``), with each call's text; else
    ``None`` (positional arguments, names or expressions as values, anything else)."""
    groups = _bracketed_groups(text.strip())
    if groups is None:
        return None
    calls: list[tuple[Part, str]] = []
    for group in groups:
        listed = _pythonic_list(group)
        if listed is None:
            return None
        calls += listed
    return calls


def _pythonic_list(stripped: str) -> list[tuple[Part, str]] | None:
    """One list of :func:`pythonic_calls`."""
    try:
        tree = ast.parse(stripped, mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls: list[tuple[Part, str]] = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = ast.get_source_segment(stripped, node.func)
        if name is None or not re.fullmatch(r"[A-Za-z_][\w.\-]*", name):
            return None
        arguments: dict[str, object] = {}
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg in arguments:
                return None
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
        try:
            encoded = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # a set, bytes, complex or non-finite number
            return None
        calls.append((ToolCallPart(name, encoded), ast.get_source_segment(stripped, node) or ""))
    return calls


CallReader: TypeAlias = Callable[[str, bool], list[tuple[Part, str]] | None]
"""Reads a held text region (and whether it follows the call token) as calls with each
call's text, or ``None`` when it spells none (see :class:`BareJsonParser`)."""


class BareJsonParser(TaggedParser):
    """Completions whose text may be a bare JSON tool call (see :func:`bare_json_calls`).

    A text region whose first non-whitespace character is ``{`` or ``[`` is held back until
    it ends: then it is the calls it spells or, if it spells none (or was cut off), text.
    Other text streams as it comes. Think blocks work as in :class:`TaggedParser`.

    ``calls_after_call_token`` (Mistral's ``[TOOL_CALLS][{"name": ..., "arguments": ...,
    "id": ...}]``): the grammar's call token opens such a region whatever it holds (calls
    may carry an ``"id"``), and a body that spells no calls is an unparsed call;
    ``text_calls=False``: text regions are only ever text. ``read_calls`` reads a region
    as calls in place of :func:`bare_json_calls` (Llama 4: JSON calls back to back or a
    Python list of calls as well).
    """

    def __init__(
        self,
        grammar: TagGrammar,
        table: TokenTable,
        events: bool,
        *,
        opens_reasoning: bool = False,
        reasoning_prefix: str = "",
        calls_end_reasoning: bool = False,
        calls_after_call_token: bool = False,
        text_calls: bool = True,
        read_calls: CallReader | None = None,
    ) -> None:
        super().__init__(
            grammar,
            table,
            events,
            opens_reasoning=opens_reasoning,
            reasoning_prefix=reasoning_prefix,
            calls_end_reasoning=calls_end_reasoning,
        )
        self._write = self.asm.write
        self._on_text = self._text  # type: ignore[method-assign]
        self._held = ""  # the open text region's text while it may be a JSON call
        self._undecided: bool | None = None if text_calls else False
        self._json = self._undecided  # None: undecided until a non-whitespace character
        self._forced = False  # the region follows the call token (calls_after_call_token)
        self._calls_after_call_token = calls_after_call_token
        self._region_start = 0
        self._read_calls: CallReader = read_calls or _bare_json_calls

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return False, None  # text may be held back as a JSON call

    # Text regions may be calls: the general path (not even split for the one-shot one).
    _parse_runs = StreamParser._parse_runs

    def _text(self, text: str) -> None:
        if self.asm.kind != TEXT or self._json is False:
            self._write(text)
            return
        self._held += text
        if self._json is None:
            body = self._held.lstrip()
            if body:
                self._json = body[0] in "{["
                if not self._json:
                    self._write(self._held)
                    self._held = ""

    def _settle(self, pos: int, stopped: bool) -> None:
        """The open text region ends at ``pos``: its held text is the calls it spells, or
        text."""
        held, self._held, json_like, self._json = self._held, "", self._json, self._undecided
        forced, self._forced = self._forced, False
        if forced:
            held = without_prefix(held, self._g.text_prefix)
        calls = self._read_calls(held, forced) if json_like and stopped else None
        asm = self.asm
        if calls is None and forced:
            error = "expected a JSON list of calls" if stopped else "cut off before the stop token"
            calls = [(UnparsedToolCallPart(held, error, incomplete=not stopped), held)]
        elif calls is None:
            self._write(held)
            return
        asm.close(pos)
        for call, raw in calls:
            asm.add(call, self._region_start, pos, raw)
        asm.open(TEXT, pos)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self.asm.kind == TEXT:
            self._settle(pos, True)
        if self._calls_after_call_token and token_id == self._g.call and self.asm.kind == TEXT:
            self.asm.close(pos)
            self.asm.open(TEXT, pos + 1)
            self._forced, self._json, self._region_start = True, True, pos
            return
        super()._on_token(token_id, pos)
        if self.asm.kind == TEXT:
            self._region_start = pos + 1

    def _on_end(self, pos: int, stopped: bool) -> None:
        if self.asm.kind == TEXT:
            self._settle(pos, stopped)
        super()._on_end(pos, stopped)
