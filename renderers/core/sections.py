"""The section grammar that DeepSeek-V3/V3.1 and Kimi-K2/K2.5 share, run by one engine.

A completion holds text, think blocks and tool-call sections, in any order::

    {text}<think>{reasoning}</think>{text}
    SECTION_BEGIN CALL_BEGIN {name or id} SEPARATOR {arguments} CALL_END ... SECTION_END
    {text} STOP

every marker a control token. A :class:`SectionGrammar` holds the ids and what differs
between formats (how a call body is read, the text a template writes between calls,
what a call token inside open reasoning means, markers models also spell as text);
:func:`section_parser` runs it. The transitions are written once, in
:meth:`SectionParser._on_token`: streaming feeds them token by token, and the one-shot
parse of a whole completion (:meth:`SectionParser._parse_runs`) runs the same transitions
over its runs of text, each written at once into a light assembler (no events, nothing
held back), so the two cannot disagree. Markers spelled as text take the byte-level path.

A control token out of place is kept as text with an issue (no sampled character is
lost); a token that begins another turn ends the message as malformed; a call cut by
another marker or by the end is an incomplete :class:`UnparsedToolCallPart`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from renderers.core.assembly import (
    TEXT,
    THINKING,
    TOOL_CALL,
    PartAssembler,
    ToolCallBuilder,
    without_prefix,
)
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import Part, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseResult
from renderers.core.scanning import MarkerScanner, StructuralIds, structural_ids
from renderers.core.tokens import TokenTable
from renderers.core.writer import TokenWriter

__all__ = [
    "SectionGrammar",
    "SectionParser",
    "TextThink",
    "fenced_json_call",
    "id_json_call",
    "name_json_call",
    "section_parser",
    "tool_name_from_id",
    "write_sections",
]


@dataclass(frozen=True, slots=True)
class TextThink:
    """Reasoning written as text at the very start of a completion (DeepSeek-R1 style,
    ``<think>\\n{reasoning}\\n</think>\\n\\n``): the padding is removed from the parts."""

    open: str = "<think>"
    close: str = "</think>"
    after_open: str = "\n"
    before_close: str = "\n"
    after_close: str = "\n\n"


@dataclass(frozen=True, slots=True)
class SectionGrammar:
    """The tokens of a section format and what varies between its families."""

    stop: tuple[int, ...]
    eos: tuple[int, ...]
    ends_message: tuple[int, ...]
    """Tokens that begin another turn: the message ends there, malformed."""
    section: tuple[int, int]
    """The section's begin and end tokens."""
    call: tuple[int, int]
    """A call's begin and end tokens."""
    separator: int
    """Between a call's name (or id) and its arguments."""
    build_call: ToolCallBuilder
    """A call's raw segments (split at the separator) -> its part."""
    think: tuple[int, int] | None = None
    """The think block's tokens, where they are tokens."""
    after_call: str = ""
    """Text the template writes after a call (before the next), removed from the text."""
    drafted_calls: bool = True
    """True: a call token inside open reasoning is reasoning text, reported (DeepSeek).
    False: a call or section begin ends the reasoning (Kimi)."""
    one_separator: bool = False
    """True: a second separator in a call is text, reported (Kimi). False: it starts
    another segment, which the call builder reports (DeepSeek)."""
    report_section_text: bool = False
    """True: text between the calls of a section is reported, once per section."""
    text_think: TextThink | None = None
    """Reasoning spelled as text at the start (DeepSeek-V3, R1 style)."""
    text_sections: tuple[str, str] | None = None
    """Spellings of the section markers that models sample as text (Kimi's
    ``<|tool_call_section_begin|>``), read as the markers."""
    _derived: dict[TokenTable, _Derived] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """Per table: what a parser reads of this grammar, derived once (:meth:`derived`)."""

    def derived(self, table: TokenTable) -> _Derived:
        """What every parser of this grammar over ``table`` reads, made at the first."""
        found = self._derived.get(table)
        if found is None:
            found = self._derived[table] = _derive(self, table)
        return found


@dataclass(frozen=True, slots=True)
class _Derived:
    """A :class:`SectionGrammar`'s sets and spellings over one table, made once per
    grammar rather than per parse."""

    ids: StructuralIds
    ends: frozenset[int]
    """The tokens that begin another turn."""
    drafts: frozenset[int]
    """The tokens that are a call drafted inside open reasoning (``drafted_calls``)."""
    finals: frozenset[int]
    """The stop and end-of-sequence tokens."""
    separator: str
    """The separator's spelling (between a call's segments)."""


def _derive(g: SectionGrammar, table: TokenTable) -> _Derived:
    think = g.think or ()
    structural = (*g.section, *g.call, g.separator, *g.ends_message, *think)
    ids = structural_ids(table, structural, g.stop, g.eos)
    return _Derived(
        ids,
        frozenset(g.ends_message),
        frozenset((*g.section, *g.call, g.separator) if g.drafted_calls else ()),
        ids.stop | ids.eos,
        table.control_text(g.separator) or "",
    )


def section_parser(
    grammar: SectionGrammar, table: TokenTable, events: bool, *, opens_reasoning: bool = False
) -> SectionParser:
    """A parser of ``grammar`` for a completion that starts inside reasoning when
    ``opens_reasoning``."""
    if grammar.text_think is not None:
        return _TextThinkParser(grammar, table, events)
    if grammar.text_sections is not None:
        return _TextSectionsParser(grammar, table, events, opens_reasoning)
    return SectionParser(grammar, table, events, opens_reasoning)


_TEXT, _THINKING, _SECTION, _NAME, _ARGS = range(5)  # states; a call is >= _NAME


class SectionParser(StreamParser):
    """Text, think blocks and tool-call sections of a :class:`SectionGrammar`."""

    def __init__(
        self,
        grammar: SectionGrammar,
        table: TokenTable,
        events: bool,
        opens_reasoning: bool = False,
        byte_offsets: bool = False,
    ) -> None:
        g = grammar
        d = g.derived(table)
        super().__init__(table, ids=d.ids, events=events, byte_offsets=byte_offsets)
        self._g = g
        self._build = g.build_call
        self._section_begin, self._section_end = g.section
        self._call_begin, self._call_end = g.call
        self._separator = g.separator
        self._think: int | None = g.think[0] if g.think else None
        self._think_end: int | None = g.think[1] if g.think else None
        self._ends = d.ends
        self._drafts = d.drafts
        self._finals = d.finals
        self._sep_text = d.separator
        self._state = _TEXT
        self._section_start = 0  # where the section's open text starts (its issue's position)
        self._section_reported = False
        self._holds = False  # text may be held back at the text level (see _drain)
        if opens_reasoning:
            self._state = _THINKING
            self.asm.open(THINKING, 0, explicit=True)
        else:
            self.asm.open(TEXT, 0)
        if not g.report_section_text:
            self._on_text = self.asm.write  # type: ignore[method-assign]

    def _spelling(self, token_id: int) -> str:
        return self._table.control_text(token_id) or ""

    # -- text -------------------------------------------------------------------------------

    def _on_text(self, text: str) -> None:
        if self._state == _SECTION and not self._section_reported and text.strip():
            self._section_reported = True
            self._issue(self._section_start, "text inside the tool-call section (kept as text)")
        self.asm.write(text)

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return not self._g.report_section_text or self._state != _SECTION, None

    def _drain(self) -> None:
        """Release text held back at the text level (before any token or the end, when
        ``_holds``), and clear ``_holds``."""

    # -- transitions --------------------------------------------------------------------------

    def _unexpected(self, token_id: int, pos: int, where: str) -> None:
        self._keep_as_text(token_id, pos, f"{self._spelling(token_id)} {where} (kept as text)")

    def _cut_call(self, token_id: int, pos: int) -> None:
        name = self._spelling(token_id)
        self._issue(pos, f"{name} inside a tool call (the call is cut there)")
        self.asm.close(pos, incomplete=True, build=self._build)

    def _enter_section(self, end: int, start: int) -> None:
        """Close the open text or reasoning at ``end``; the section's text opens at
        ``start``."""
        self.asm.close(end)
        self._section_reported = False
        self._open_section(start)

    def _open_section(self, start: int) -> None:
        self._state = _SECTION
        self._section_start = start
        self.asm.open(TEXT, start)

    def _leave_section(self, end: int, start: int) -> None:
        self.asm.close(end)
        self._state = _TEXT
        self.asm.open(TEXT, start)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self._holds:
            self._drain()
        state = self._state
        asm = self.asm
        in_call = state >= _NAME
        if state == _THINKING and token_id in self._drafts:
            self._drafted_call(token_id, pos)
        elif token_id == self._call_begin:
            if in_call:
                self._cut_call(token_id, pos)
            else:
                if state != _SECTION:
                    self._issue(pos, f"{self._spelling(token_id)} outside a tool-call section")
                asm.close(pos)
            self._state = _NAME
            asm.open(TOOL_CALL, pos)
        elif token_id == self._separator:
            if state == _NAME or (state == _ARGS and not self._g.one_separator):
                asm.next_segment(self._sep_text)
                self._state = _ARGS
            else:
                where = "after the arguments began" if in_call else "outside a tool call"
                self._unexpected(token_id, pos, where)
        elif token_id == self._call_end:
            if not in_call:
                self._unexpected(token_id, pos, "without an open tool call")
                return
            asm.close(pos + 1, build=self._build)
            self._state = _SECTION
            self._section_start = pos + 1
            asm.open(TEXT, pos + 1, strip_prefix=self._g.after_call)
        elif token_id == self._section_begin:
            if in_call:
                self._cut_call(token_id, pos)
                self._open_section(pos + 1)
            elif state == _SECTION:
                self._unexpected(token_id, pos, "inside a tool-call section")
            else:  # from text (Kimi: or straight from reasoning, without </think>)
                self._enter_section(pos, pos + 1)
        elif token_id == self._section_end:
            if in_call:
                self._cut_call(token_id, pos)
                self._state = _TEXT
                asm.open(TEXT, pos + 1)
            elif state != _SECTION:
                self._unexpected(token_id, pos, "without a tool-call section")
            else:
                self._leave_section(pos, pos + 1)
        elif token_id == self._think:
            if state == _THINKING:
                self._unexpected(token_id, pos, "inside an open think block")
                return
            if in_call:
                self._cut_call(token_id, pos)
            else:
                if state == _SECTION:
                    self._issue(pos, f"{self._spelling(token_id)} inside a tool-call section")
                asm.close(pos)
            self._state = _THINKING
            asm.open(THINKING, pos, explicit=True)
        elif token_id == self._think_end:
            if state != _THINKING:
                self._unexpected(token_id, pos, "without an open think block")
                return
            asm.close(pos + 1)
            self._state = _TEXT
            asm.open(TEXT, pos + 1)
        else:  # a token that begins another turn
            stop = self._spelling(self._g.stop[0])
            self._issue(pos, f"{self._spelling(token_id)} before {stop}: the message ends here")
            self._end_message(pos)

    def _on_end(self, pos: int, stopped: bool) -> None:
        if self._holds:
            self._drain()
        state = self._state
        in_call = state >= _NAME
        if stopped:
            if state == _THINKING:
                self._issue(pos, "the message ended inside an open think block")
            elif in_call:
                end = self._spelling(self._call_end)
                self._issue(pos, f"the message ended inside a tool call (no {end})")
            elif state == _SECTION:
                end = self._spelling(self._section_end)
                self._issue(pos, f"the message ended inside a tool-call section (no {end})")
        self.asm.close(pos, incomplete=not stopped or in_call, build=self._build)

    # -- one-shot ---------------------------------------------------------------------------

    def _first_text(self, runs: BatchRuns) -> str | None:
        """The text to read before the first structural id, or ``None`` when the
        completion needs the byte-level path (text-level markers)."""
        return runs.texts[0]

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """A whole completion: the same hooks as streaming, each run of text at once."""
        tokens = runs.tokens
        if not self._ends.isdisjoint(tokens):
            return None  # the message ends early (its trailing ids: the general path)
        regions = _Regions(self.asm.kind or TEXT, self._state == _THINKING)
        self.asm, asm = regions, self.asm
        first = self._first_text(runs)
        if first is None:
            self.asm = asm
            return None
        texts = runs.texts
        cuts = runs.cuts
        write = regions.write
        report = self._g.report_section_text  # text in a section goes through _on_text
        step = SectionParser._on_token  # (text-level phases are over: see _first_text)
        ends = self._finals
        stop = None
        text = first
        for j, t in enumerate(tokens):
            if j:
                text = texts[j]
            if text:
                if report and self._state == _SECTION:
                    self._on_text(text)
                elif regions._prefix:
                    write(text)
                else:
                    regions._chunks.append(text)  # (what write does then)
            if t in ends:
                stop = j
                self._on_end(cuts[j], True)
                break
            step(self, t, cuts[j])
        else:
            text = texts[len(tokens)] if tokens else first
            if text:
                if report and self._state == _SECTION:
                    self._on_text(text)
                else:
                    write(text)
            self._on_end(runs.count, False)
        return self._one_shot_result(runs, self.asm.parts, self.asm.spans, stop)


class _Regions(PartAssembler):
    """The assembler of a one-shot parse: the regions the transitions open and close, as
    :class:`PartAssembler` makes them (no events, nothing held back), without its
    streaming bookkeeping."""

    __slots__ = ()

    def __init__(self, kind: str, explicit: bool) -> None:  # (what the methods read)
        self.parts: list[Part | None] = []
        self.spans: list[tuple[int, int]] = []
        self.events = None
        self.kind = kind
        self._start = 0
        self._explicit = explicit
        self._prefix = ""
        self._chunks: list[str] = []
        self._segments: list[str] = []

    def open(
        self,
        kind: str,
        start: int,
        *,
        strip_prefix: str = "",
        holdback: str = "",
        channel: str | None = None,
        explicit: bool = False,
    ) -> None:
        assert not holdback and channel is None, "not read in one shot"
        self.kind = kind
        self._start = start
        self._explicit = explicit
        self._prefix = strip_prefix
        self._chunks = []
        self._segments = []

    def write(self, text: str) -> None:
        prefix = self._prefix
        if prefix and text:
            n = 0
            limit = min(len(prefix), len(text))
            while n < limit and text[n] == prefix[n]:
                n += 1
            self._prefix = prefix[n:] if n == len(text) and n < len(prefix) else ""
            text = text[n:]
        if text:
            self._chunks.append(text)

    def next_segment(self, separator: str = "") -> None:
        self._segments.append("".join(self._chunks))
        self._chunks = []

    def close(
        self,
        end: int,
        *,
        strip_suffix: str = "",
        incomplete: bool = False,
        build: ToolCallBuilder | None = None,
    ) -> Part | None:
        kind = self.kind
        if kind is None:
            return None
        self.kind = None
        part: Part
        if kind == TOOL_CALL:
            assert build is not None, "closing a tool-call region needs a builder"
            part = build([*self._segments, "".join(self._chunks)], incomplete)
        elif self._chunks or (incomplete and self._explicit):
            text = "".join(self._chunks)
            if kind == THINKING:
                part = ThinkingPart(text, None, incomplete)
            else:
                part = TextPart(text, None, incomplete)
        else:
            return None
        self.parts.append(part)
        self.spans.append((self._start, end))
        return part


class _TextSectionsParser(SectionParser):
    """Section markers also spelled as text (Kimi's misspellings), found by a
    :class:`MarkerScanner` in the ordinary text."""

    def __init__(
        self, grammar: SectionGrammar, table: TokenTable, events: bool, opens_reasoning: bool
    ) -> None:
        super().__init__(grammar, table, events, opens_reasoning, byte_offsets=True)
        assert grammar.text_sections is not None
        self._spelled = grammar.text_sections
        self._begin_bytes = grammar.text_sections[0].encode()
        self._end_bytes = grammar.text_sections[1].encode()
        self._scanner: MarkerScanner  # made before the first id is read

    def _start_byte_offsets(self) -> None:
        super()._start_byte_offsets()
        self._scanner = self._new_scanner()

    def _markers(self) -> tuple[bytes, ...]:
        state = self._state
        if state == _TEXT or (state == _THINKING and not self._g.drafted_calls):
            return (self._begin_bytes,)
        if state == _SECTION:
            return (self._end_bytes,)
        return ()

    def _text_ok(self, data: bytes) -> bool:
        return self._scanner.pass_through(data)  # every marker starts with "<"

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        # Text inside the section is reported (_on_text); elsewhere it is written as it
        # comes once it passes the scanner (which counts every byte, so always that one).
        through = not self._g.report_section_text or self._state != _SECTION
        return through, self._scanner

    def _on_bytes(self, data: bytes) -> None:
        scanner = self._scanner
        if scanner.pass_through(data):
            self._decode(data)
            return
        scanner.push(data)
        self._holds = True
        while True:
            markers = self._markers()
            if not markers:
                self._drain()
                return
            before, marker = scanner.next(markers)
            if before:
                self._decode(before)
            if marker is None:
                return
            self._flush_pending()
            end = scanner.offset
            self._text_marker(marker, end - len(marker), end)

    def _drain(self) -> None:
        self._holds = False
        rest = self._scanner.flush()
        if rest:
            self._decode(rest)

    def _text_marker(self, marker: bytes, start: int, end: int) -> None:
        """A section marker spelled in ordinary-text bytes ``[start, end)``."""
        first = self._token_at_byte(start)
        first_start = self._byte_end(first - 1) if first > 0 else 0
        before = first if first_start >= start else first + 1  # the open part ends here
        last = self._token_at_byte(end - 1)
        after = last + 1 if self._byte_end(last) <= end else last  # the next region starts
        if marker == self._begin_bytes:
            self._enter_section(before, after)
        else:
            self._leave_section(before, after)

    def _first_text(self, runs: BatchRuns) -> str | None:
        begin, end = self._spelled
        for text in runs.texts:
            if begin in text or end in text:
                return None
        return runs.texts[0]


_START, _THINK_PHASE, _TEXT_PHASE = 0, 1, 2


class _TextThinkParser(SectionParser):
    """Reasoning spelled as text, recognised only at the very start of the completion
    (DeepSeek-R1 style); its closing marker is found by a text-level scanner."""

    def __init__(self, grammar: SectionGrammar, table: TokenTable, events: bool) -> None:
        super().__init__(grammar, table, events, byte_offsets=True)
        assert grammar.text_think is not None
        self._tt = grammar.text_think
        self._open_bytes = self._tt.open.encode()
        self._close_bytes = self._tt.close.encode()
        self._phase = _START
        self._head = b""
        self._scanner: MarkerScanner  # made before the first id is read
        self._holds = True  # until the text phase

    def _start_byte_offsets(self) -> None:
        super()._start_byte_offsets()
        self._scanner = self._new_scanner()

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        phase = self._phase
        if phase == _TEXT_PHASE:
            return True, None
        # In reasoning, text that cannot hold or continue the closing marker skips the scanner.
        return phase == _THINK_PHASE, self._scanner

    def _text_ok(self, data: bytes) -> bool:
        phase = self._phase
        if phase == _TEXT_PHASE:
            return True
        return phase == _THINK_PHASE and self._scanner.pass_through(data)

    def _on_bytes(self, data: bytes) -> None:
        if self._phase == _TEXT_PHASE:
            self._decode(data)
            return
        tt = self._tt
        if self._phase == _START:
            head = self._head + data
            opening = self._open_bytes
            if not (opening.startswith(head) or head.startswith(opening)):
                self._phase = _TEXT_PHASE
                self._holds = False
                self._head = b""
                self._decode(head)
                return
            if len(head) < len(opening):
                self._head = head
                return
            self._head = b""
            self._phase = _THINK_PHASE
            self._state = _THINKING
            self.asm.close(0)
            self.asm.open(
                THINKING, 0, strip_prefix=tt.after_open, holdback=tt.before_close, explicit=True
            )
            self._scanner.push(head)
            self._scanner.next((opening,))  # consume the opening marker
            data = b""
        scanner = self._scanner
        if data:
            scanner.push(data)
        text, marker = scanner.next((self._close_bytes,))
        if text:
            self._decode(text)
        if marker is None:
            return
        self._flush_pending()
        end = scanner.offset
        last = self._token_at_byte(end - 1)
        start = last + 1 if self._byte_end(last) == end else last
        self.asm.close(last + 1, strip_suffix=tt.before_close)
        self.asm.open(TEXT, start, strip_prefix=tt.after_close)
        self._phase = _TEXT_PHASE
        self._holds = False
        self._state = _TEXT
        rest = scanner.flush()
        if rest:
            self._decode(rest)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self._phase == _THINK_PHASE and token_id in self._drafts:
            # A call drafted inside the reasoning is reasoning: a later closing marker
            # still counts.
            rest = self._scanner.flush()
            if rest:
                self._decode(rest)
            self._flush_pending()
            self._drafted_call(token_id, pos)
            return
        SectionParser._on_token(self, token_id, pos)

    def _drain(self) -> None:
        self._holds = False
        if self._phase == _START:
            head, self._head = self._head, b""
            self._phase = _TEXT_PHASE
            if head:
                self._decode(head)
        elif self._phase == _THINK_PHASE:
            self._phase = _TEXT_PHASE
            rest = self._scanner.flush()
            if rest:
                self._decode(rest)

    def _first_text(self, runs: BatchRuns) -> str | None:
        """Reads a reasoning block that begins the completion and closes within its first
        run (else the byte-level path); returns the text after it."""
        tt = self._tt
        first = runs.texts[0]
        if not first.startswith(tt.open):
            self._phase = _TEXT_PHASE
            self._holds = False
            return first
        end = first.find(tt.close, len(tt.open))
        if end < 0 or "\ufffd" in first[: end + len(tt.close)]:
            return None  # open at a control token or cut off; or bytes counted otherwise
        after = end + len(tt.close)
        # The think part ends with the token holding the marker's last byte; the text
        # region starts there too when that token holds more.
        byte = len(first[:after].encode())
        byte_ends = runs.byte_ends
        last = int(np.searchsorted(byte_ends, byte - 1, side="right"))
        start = last + 1 if int(byte_ends[last]) == byte else last
        self._phase = _TEXT_PHASE
        self._holds = False
        asm = self.asm
        asm.close(0)
        asm.open(THINKING, 0)
        thinking = without_prefix(first[len(tt.open) : end], tt.after_open)
        asm.write(thinking.removesuffix(tt.before_close))
        asm.close(last + 1)
        asm.open(TEXT, start, strip_prefix=tt.after_close)
        return first[after:]


# -- call bodies ------------------------------------------------------------------------------


def name_json_call(separator: str, call_end: str) -> ToolCallBuilder:
    """``NAME{separator}{ARGS}`` -> a call (DeepSeek-V3.1; arguments kept as sampled)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = separator.join(segments)
        name = segments[0] if len(segments) > 1 and segments[0] else None
        if incomplete:
            return UnparsedToolCallPart(
                raw, f"cut off before {call_end}", name=name, incomplete=True
            )
        if len(segments) != 2:
            got = len(segments) - 1
            return UnparsedToolCallPart(
                raw, f"expected NAME{separator}ARGUMENTS, got {got} separators", name=name
            )
        if name is None:
            return UnparsedToolCallPart(raw, "empty tool name")
        arguments = segments[1]
        try:
            json.loads(arguments)
        except ValueError as exc:
            why = f"invalid JSON arguments: {exc}"
            return UnparsedToolCallPart(raw, why, name=name, arguments=arguments)
        return ToolCallPart(name, arguments)

    return build


def fenced_json_call(separator: str, call_end: str) -> ToolCallBuilder:
    """``function{separator}NAME\\n```json\\n{ARGS}\\n``` `` -> a call (DeepSeek-V3; the
    fence is read leniently)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = separator.join(segments)
        rest = segments[1] if len(segments) > 1 else ""
        name = rest.split("\n", 1)[0] if "\n" in rest else None
        if incomplete:
            return UnparsedToolCallPart(
                raw, f"cut off before {call_end}", name=name, incomplete=True
            )
        if len(segments) != 2:
            got = len(segments) - 1
            return UnparsedToolCallPart(
                raw, f"expected TYPE{separator}NAME, got {got} separators", name=name
            )
        if name is None:
            return UnparsedToolCallPart(raw, "no newline after the tool name")
        if segments[0] != "function":
            return UnparsedToolCallPart(
                raw, f"unknown tool type {segments[0]!r}", name=name or None
            )
        if not name:
            return UnparsedToolCallPart(raw, "empty tool name")
        arguments = _unfence(rest.split("\n", 1)[1])
        try:
            json.loads(arguments)
        except ValueError as exc:
            why = f"invalid JSON arguments: {exc}"
            return UnparsedToolCallPart(raw, why, name=name, arguments=arguments)
        return ToolCallPart(name, arguments)

    return build


def _unfence(body: str) -> str:
    """The JSON inside a fenced block (```json ... ```), lenient about its whitespace."""
    if body.startswith("```json\n") and body.endswith("\n```"):
        return body[len("```json\n") : -len("\n```")]
    s = body.strip()
    if s.startswith("```"):
        newline = s.find("\n")
        s = s[newline + 1 :] if newline != -1 else ""
        if s.endswith("```"):
            s = s[:-3]
    return s.strip()


_COLON_INDEX = re.compile(r":\d+\Z")
_UNDERSCORE_INDEX = re.compile(r"_\d+\Z")


def tool_name_from_id(call_id: str) -> str:
    """The function name inside a Kimi call id: ``functions.NAME:IDX`` as the template
    writes it, and the variants models sample (``functions.NAME`` without the index,
    sanitized ``functions_NAME_IDX``, ``NAME:IDX``)."""
    name = call_id.strip()
    if name.startswith("functions_"):
        name = name[len("functions_") :]
        match = _UNDERSCORE_INDEX.search(name)
    else:
        name = name.removeprefix("functions.")
        match = _COLON_INDEX.search(name)
    if match and match.start() > 0:
        name = name[: match.start()]
    return name


def id_json_call(separator: str, call_end: str) -> ToolCallBuilder:
    """``{call id}{separator}{ARGS}`` -> a call whose name is read from its id (Kimi)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        call_id = segments[0].strip()
        name = tool_name_from_id(call_id) or None
        raw = separator.join(segments)
        some_id = call_id or None
        if incomplete:
            why = f"cut off before {call_end}"
            return UnparsedToolCallPart(raw, why, name=name, id=some_id, incomplete=True)
        if len(segments) < 2:
            why = f"no {separator} in the tool call"
            return UnparsedToolCallPart(raw, why, name=name, id=some_id)
        if name is None:
            return UnparsedToolCallPart(raw, "the tool call has no id / function name")
        arguments = segments[1]
        try:
            json.loads(arguments)
        except ValueError as exc:
            why = f"invalid JSON arguments: {exc}"
            return UnparsedToolCallPart(raw, why, name=name, id=call_id, arguments=arguments)
        return ToolCallPart(name, arguments, id=call_id)

    return build


# -- writing ----------------------------------------------------------------------------------


def write_sections(
    w: TokenWriter,
    i: int,
    parts: list[Part],
    section: tuple[int, int],
    write_call: Callable[[TokenWriter, int, Part], None],
    write_thinking: Callable[[TokenWriter, int, str], None],
    between_calls: str = "",
) -> None:
    """An assistant turn's parts in order (sampled text of message ``i``), each run of
    calls in its own section; empty text parts write nothing."""
    in_section = False
    for part in parts:
        if type(part) is TextPart or type(part) is ThinkingPart:
            if type(part) is TextPart and not part.text:
                continue
            if in_section:
                w.control(section[1], i, True)
                in_section = False
            if type(part) is ThinkingPart:
                write_thinking(w, i, part.text)
            else:
                w.text(part.text, i, True)
            continue
        if not in_section:
            w.control(section[0], i, True)
            in_section = True
        elif between_calls:
            w.text(between_calls, i, True)
        write_call(w, i, part)
    if in_section:
        w.control(section[1], i, True)
