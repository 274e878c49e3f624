"""DSML: the tool-call markup of DeepSeek-V4 and V4.1, run by one engine (:class:`DSMLParser`).

A completion holds reasoning, text and tool-call sections, in any order::

    <think>{reasoning}</think>{text}⏎⏎<｜DSML｜tool_calls>⏎
    <｜DSML｜invoke name="NAME">⏎
    <｜DSML｜parameter name="KEY" string="true">VALUE</｜DSML｜parameter>⏎
    <｜DSML｜parameter name="KEY" string="false">JSON</｜DSML｜parameter>⏎
    </｜DSML｜invoke>⏎
    </｜DSML｜tool_calls>{stop}

``<think>``, ``</think>`` and ``｜DSML｜`` are control tokens; the ``<`` or ``</`` before
``｜DSML｜`` and the tag after it (up to ``>``) are text. A :class:`DSMLGrammar` names the
token ids, the tag names (:class:`DSMLTags`; DeepSeek-V4.1 writes ``<｜DSML｜ calls>``,
``<｜DSML｜ invoke name=...>``, ``<｜DSML｜ parameter ...>``), whether a completion starts
inside reasoning (thinking mode) and what ends a message; :func:`dsml_call_builder` reads
an ``invoke`` (``string="true"`` values are strings, ``string="false"`` ones JSON kept as
sampled).

- Reasoning ends only at ``</think>``: ``｜DSML｜`` or ``<think>`` inside it is reasoning
  text (a drafted call is not a call).
- The blank line before a section is structure (removed from the text before it), and so
  is whitespace between invokes; other text between invokes is a text part with an issue.
- An ``invoke`` that does not follow the grammar is an :class:`UnparsedToolCallPart` with
  its text (``｜DSML｜`` spelled out); one cut off is incomplete.
- ``｜DSML｜`` not after ``<``/``</``, a tag the grammar does not know (or longer than
  1,024 bytes), ``</think>`` with no open think block: kept as text with an issue. A token
  that begins another turn ends the message (malformed).

Spans are token ranges found from byte offsets; a token holding the end of one structure
and the start of the next (``>⏎<``) is in both. Streaming and one-shot parsing run the
same steps (:meth:`DSMLParser._step`, :meth:`DSMLParser._on_token`,
:meth:`DSMLParser._on_end`): a one-shot parse hands them whole runs of text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any

import numpy as np

from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, ToolCallBuilder
from renderers.core.engine import BatchRuns, StreamParser, WritesThrough
from renderers.core.messages import Part, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseResult
from renderers.core.tokens import TokenTable

__all__ = ["DSML", "DSMLGrammar", "DSMLParser", "DSMLTags", "dsml_call", "dsml_call_builder"]

DSML = "｜DSML｜"
"""The control token that opens every DSML tag (after ``<`` or ``</``)."""

# A str as json.dumps(s, ensure_ascii=False) writes it (what that call returns for a str),
# without building an encoder per call.
_json_string = encode_basestring


@dataclass(frozen=True, slots=True)
class DSMLTags:
    """The tag names written after ``｜DSML｜`` (DeepSeek-V4's by default; V4.1 puts a
    space before each and names the section ``calls``)."""

    section: str = "tool_calls"
    invoke: str = "invoke"
    parameter: str = "parameter"


@lru_cache(maxsize=16)
def dsml_call_builder(tags: DSMLTags) -> ToolCallBuilder:
    """The reader of an ``invoke`` block written with ``tags``: the block split at its
    ``｜DSML｜`` tokens -> a tool call (built once per ``tags``)."""
    invoke = re.compile(re.escape(tags.invoke) + r' name="([^"\n]*)">\n')
    parameter = re.compile(
        re.escape(tags.parameter) + r' name="([^"\n]*)" string="(true|false)">(.*)</', re.DOTALL
    )
    parameter_end = re.compile(re.escape(tags.parameter) + r">\n(<|</)")
    invoke_end = [tags.invoke + ">"]
    error = f"expected <{DSML}{tags.invoke} name=...> with parameter blocks"
    end_error = f"expected </{DSML}{tags.invoke}> after the parameters"

    def dsml_call(segments: list[str], incomplete: bool) -> Part:
        raw = DSML.join(segments)
        name_match = invoke.match(segments[1]) if len(segments) > 1 else None
        name = name_match.group(1) if name_match else None
        if incomplete:
            return UnparsedToolCallPart(
                raw, "cut off before the invoke ended", name=name, incomplete=True
            )
        if segments[0] != "<" or name_match is None or not name:
            return UnparsedToolCallPart(raw, error, name=name)
        rest = segments[1][name_match.end() :]
        members: list[str] = []
        k = 2
        if rest == "<":  # parameters follow
            while True:
                block = parameter.fullmatch(segments[k]) if k < len(segments) else None
                end = parameter_end.fullmatch(segments[k + 1]) if k + 1 < len(segments) else None
                if block is None or end is None:
                    return UnparsedToolCallPart(raw, "a parameter block is malformed", name=name)
                key, flag, value = block.groups()
                if flag == "true":
                    value = _json_string(value)
                else:
                    try:
                        json.loads(value)
                    except ValueError as exc:
                        why = f'parameter {key!r} (string="false") is not JSON: {exc}'
                        return UnparsedToolCallPart(raw, why, name=name)
                members.append(_json_string(key) + ": " + value)
                k += 2
                if end.group(1) == "</":
                    break
        elif rest not in ("\n</", "</"):
            return UnparsedToolCallPart(raw, error, name=name)
        if segments[k:] != invoke_end:
            return UnparsedToolCallPart(raw, end_error, name=name)
        return ToolCallPart(name, "{" + ", ".join(members) + "}")

    return dsml_call


dsml_call = dsml_call_builder(DSMLTags())
"""DeepSeek-V4's ``invoke`` reader."""


@dataclass(frozen=True, slots=True)
class _Derived:
    """What a parser derives from its grammar, built once per grammar (not per parse)."""

    structural: tuple[int, ...]
    build: ToolCallBuilder
    section_tag: bytes
    invoke_tag: re.Pattern[bytes]
    invoke_end_tag: bytes
    invoke_end_text: str
    ends_turn: frozenset[int]


@dataclass(frozen=True, slots=True)
class DSMLGrammar:
    """The token ids of a DSML format and how its completions start and end.

    ``ends_message`` are tokens that begin another turn: sampled before a stop token, they
    end the message as malformed.
    """

    stop: tuple[int, ...]
    think: int
    think_end: int
    dsml: int
    ends_message: tuple[int, ...] = ()
    reasoning_first: bool = True
    """Thinking mode: the completion starts inside the reasoning (the prompt ends
    ``<think>``); chat mode (False): it starts with the answer."""
    tags: DSMLTags = DSMLTags()
    """The tag names after ``｜DSML｜``."""
    build_call: ToolCallBuilder | None = None
    """An ``invoke`` block split at its ``｜DSML｜`` tokens -> a part (default: the
    reader of ``tags``, :func:`dsml_call_builder`)."""
    _derived: _Derived = field(init=False, repr=False, compare=False)
    """What a parser needs beyond the fields, built with the record (not per parse)."""

    def __post_init__(self) -> None:
        invoke = self.tags.invoke
        derived = _Derived(
            structural=(self.think, self.think_end, self.dsml, *self.ends_message),
            build=self.build_call or dsml_call_builder(self.tags),
            section_tag=self.tags.section.encode(),
            invoke_tag=re.compile(re.escape(invoke.encode()) + rb' name="[^"\n]*"'),
            invoke_end_tag=invoke.encode() + b">",
            invoke_end_text=invoke + ">",
            ends_turn=frozenset(self.ends_message),
        )
        object.__setattr__(self, "_derived", derived)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by its fields alone (what it derives holds closures: it is rebuilt)."""
        return type(self), tuple(getattr(self, f.name) for f in fields(self) if f.init)


_SECTION = "section"  # inside <｜DSML｜tool_calls>, between invokes
_INVOKE_STATE = "invoke"  # inside <｜DSML｜invoke ...> ... </｜DSML｜invoke>
# A tail of text that may still open a tag when ｜DSML｜ follows ("<", "</"), with the
# blank line the format puts before a section.
_OPENER_TAIL = re.compile(rb"\n{0,2}(?:</?)?\Z")
_OPENER_TAIL_TEXT = re.compile(r"\n{0,2}(?:</?)?\Z")
_OPENER_TAIL_MAX = 4
_DSML_BYTES = DSML.encode()
_MAX_TAG = 1024  # bytes of a tag name before ">" (longer: not a tag)
_SECTION_TEXT = "text inside the tool-call section (kept as text)"
_WRITES_THROUGH = WritesThrough(True)
_NOT_THROUGH = WritesThrough(False)


class _WholeRuns(StreamParser):
    """A byte-offset parser whose one-shot parse hands its streaming step,
    :meth:`_step`, whole runs of decoded text (and its token hooks the structural ids
    between them), so the two paths run the same grammar."""

    def __init__(self, table: TokenTable, **options: Any) -> None:
        super().__init__(table, byte_offsets=True, **options)
        self._ends: np.ndarray | None = None  # a one-shot parse: each token's byte end

    def _step(self, data: bytes | None, text: str | None) -> None:
        """A run of ordinary text or a piece of it: its bytes (streaming), or its text
        when the run was decoded whole (a one-shot parse)."""
        raise NotImplementedError

    def _on_bytes(self, data: bytes) -> None:
        self._step(data, None)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse: the same steps as streaming, each run of text handed to
        :meth:`_step` whole (positions read from ``runs.byte_ends``). A run whose text
        holds a replacement character (its bytes are not its text's) takes the general
        path."""
        texts = runs.texts
        for text in texts:
            if "\ufffd" in text:
                return None
        self._ends = runs.byte_ends
        tokens = runs.tokens
        cuts = runs.cuts
        stop_ids = self._stop_ids
        eos_ids = self._eos_ids
        step = self._step
        stop = None
        for j, t in enumerate(tokens):
            cut = cuts[j]
            self._pos = cut
            if texts[j]:
                step(None, texts[j])
            if t in stop_ids or t in eos_ids:
                self._on_end(cut, True)
                stop = j
                break
            self._pos = cut + 1
            self._on_token(t, cut)
            if self._done:  # the format ended the message at this token
                self._trailing.append(t)
                self._keep_trailing(runs.ids[cut + 1 :])
                break
        else:
            self._pos = runs.count
            if texts[-1]:
                step(None, texts[-1])
            self._on_end(runs.count, False)
        self._ends = None
        return self._one_shot_result(runs, self.asm.parts, self.asm.spans, stop)

    def _token_at_byte(self, offset: int) -> int:
        ends = self._ends
        if ends is None:
            return super()._token_at_byte(offset)
        k = self._pos - 1  # the token holding the offset is most often one of the last
        for _ in range(4):
            if k <= 0 or ends[k - 1] <= offset:
                return max(k, 0)
            k -= 1
        return max(0, min(int(ends.searchsorted(offset, "right")), k))

    def _byte_end(self, k: int) -> int:
        ends = self._ends
        if ends is None:
            return super()._byte_end(k)
        return int(ends[min(k, self._pos - 1)]) if k >= 0 else 0


class DSMLParser(_WholeRuns):
    """Completions of a :class:`DSMLGrammar`: reasoning (from the start in thinking mode),
    text and tool-call sections, in any order.

    ``｜DSML｜`` is a control token, the ``<``/``</`` before it and the tag after it are
    text: text that may open a tag is held back until the next token says whether it
    does, and a tag is read up to its ``>``. Positions inside runs of text come from byte
    offsets.
    """

    def __init__(self, table: TokenTable, grammar: DSMLGrammar, events: bool) -> None:
        g = grammar
        d = self._d = g._derived
        super().__init__(table, structural=d.structural, stop_ids=g.stop, events=events)
        self._g = grammar
        self._dsml = g.dsml
        self._build = d.build
        self._state = THINKING if g.reasoning_first else TEXT
        self._held = b""  # TEXT/SECTION: text that may open a tag
        # After "<｜DSML｜" or "</｜DSML｜": (closing, token of "<", the text it replaced).
        self._tag: tuple[bool, int, bytes] | None = None
        self._tag_text = b""
        self._invoke_end: bytes | None = None  # INVOKE: bytes after "</｜DSML｜" so far
        if g.reasoning_first:
            self.asm.open(THINKING, 0, explicit=True)
        else:
            self.asm.open(TEXT, 0)

    # -- text -----------------------------------------------------------------------------

    def _writes_text(self) -> bool:
        """Ordinary text goes unchanged into the open part (reasoning, an invoke's body)."""
        state = self._state
        if self._tag is not None:
            return False
        return state == THINKING or (state == _INVOKE_STATE and self._invoke_end is None)

    def _text_ok(self, data: bytes) -> bool:
        plain = self._tag is None and self._state == TEXT and not self._held
        return self._writes_text() or (plain and b"<" not in data and b"\n" not in data)

    def _writes_through(self) -> WritesThrough:
        return _WRITES_THROUGH if self._writes_text() else _NOT_THROUGH

    def _on_text(self, text: str) -> None:
        self.asm.write(text)

    def _section_text(self, at: int) -> None:
        """Text in a tool-call section (between invokes) starts a text part at ``at``."""
        if self._state == _SECTION and self.asm.kind is None:
            self._issue(at, _SECTION_TEXT)
            self.asm.open(TEXT, at)

    def _content(self, data: bytes, after: int) -> None:
        """Ordinary text of the text or section state, followed by ``after`` bytes of what
        was read; in a section, the whitespace between invokes is structure."""
        if self._state == _SECTION and self.asm.kind is None:
            text = data.lstrip()
            if not text:
                return
            end = self._byte_end(self._pos - 1) - after
            self._section_text(self._token_at_byte(end - len(text)))
            data = text
        self._decode(data)

    def _step(self, data: bytes | None, text: str | None) -> None:
        """Reasoning and the inside of an invoke are written as they come; other text is
        read for the tags it may open."""
        if self._tag is None:
            state = self._state
            if state == THINKING:
                if text is None:
                    self._decode(data or b"")
                else:
                    self.asm.write(text)
                return
            if state == _INVOKE_STATE:
                pending = self._invoke_end
                if pending == b"" and text is not None:
                    # Right after "</｜DSML｜" (a whole run): text that neither begins
                    # "invoke>" nor is a beginning of it goes on the invoke.
                    end = self._d.invoke_end_text
                    if not (text.startswith(end) or end.startswith(text)):
                        pending = self._invoke_end = None
                if pending is None:
                    if text is None:
                        self._decode(data or b"")
                    else:
                        self.asm.write(text)
                    return
            if state == TEXT and text is not None and not self._held:
                # A run's text written but for a tail that may open a tag (ASCII).
                tail = _OPENER_TAIL_TEXT.search(text, max(0, len(text) - _OPENER_TAIL_MAX))
                assert tail is not None
                self._held = tail.group().encode()
                if tail.start():
                    self.asm.write(text[: tail.start()])
                return
        if data is None:
            data = (text or "").encode()
        while data:
            if self._tag is not None:
                data = self._tag_bytes(data)
            elif self._state == THINKING:
                self._decode(data)
                return
            elif self._state == _INVOKE_STATE:
                data = self._invoke_bytes(data)
            else:
                buf = self._held + data
                # The tail is at most "\n\n</": only the last bytes can start it.
                match = _OPENER_TAIL.search(buf, max(0, len(buf) - _OPENER_TAIL_MAX))
                assert match is not None
                self._held = match.group()
                if match.start():
                    self._content(buf[: match.start()], len(self._held))
                return

    def _flush_held(self, pos: int) -> None:
        """Release the held text (before the token at ``pos``, which opens no tag)."""
        held, self._held = self._held, b""
        if held:
            self._content(held, 0)
        self._flush_pending()

    def _tag_bytes(self, data: bytes) -> bytes:
        """Read a tag up to its ``>``; returns the bytes after it."""
        end = data.find(b">")
        chunk = data if end == -1 else data[: end + 1]
        self._tag_text += chunk
        tag = self._tag_text
        if end == -1:
            if len(tag) > _MAX_TAG or b"\n" in tag:
                self._not_a_tag()
            return b""
        if len(tag) - 1 > _MAX_TAG:  # however the bytes came (in one chunk or many)
            self._not_a_tag()
        else:
            self._end_tag(tag[:-1], self._byte_end(self._pos - 1) - len(data) + end)
        return data[end + 1 :]

    def _end_tag(self, name: bytes, at: int) -> None:
        """The tag ``name`` read, its ``>`` at ordinary-byte offset ``at``."""
        assert self._tag is not None
        closing, start, _ = self._tag
        asm = self.asm
        state = self._state
        d = self._d
        if not closing and name == d.section_tag and state == TEXT:
            self._tag = None
            asm.close(start + 1)
            self._state = _SECTION
        elif not closing and d.invoke_tag.fullmatch(name) and state in (TEXT, _SECTION):
            self._tag = None
            if state == TEXT:
                self._issue(start, "an invoke outside a tool-call section")
            asm.close(start)
            asm.open(TOOL_CALL, start)
            asm.write("<")
            asm.next_segment(DSML)
            self._decode(name + b">")
            if self._pending:
                self._flush_pending()
            self._state = _INVOKE_STATE
        elif closing and name == d.section_tag and state == _SECTION:
            self._tag = None
            asm.close(start)
            self._state = TEXT
            asm.open(TEXT, self._token_at_byte(at) + 1)
        else:
            self._not_a_tag()

    def _not_a_tag(self) -> None:
        """The text held as a tag is text (with an issue): written where it stands."""
        assert self._tag is not None
        _, start, opener = self._tag
        text = opener + _DSML_BYTES + self._tag_text
        self._tag = None
        self._tag_text = b""
        self._issue(start, f"{DSML} does not start a tag of the format (kept as text)")
        self._section_text(start)
        self._decode(text)
        self._flush_pending()

    def _invoke_bytes(self, data: bytes) -> bytes:
        """Bytes of an open invoke; returns what follows its end tag, if it ended."""
        pending = self._invoke_end
        if pending is not None:
            need = self._d.invoke_end_tag[len(pending) :]
            if data.startswith(need):  # the end tag
                n = len(need)
                self._decode(data[:n])
                if self._pending:
                    self._flush_pending()
                self._invoke_end = None
                at = self._byte_end(self._pos - 1) - len(data) + n - 1  # where ">" is
                self.asm.close(self._token_at_byte(at) + 1, build=self._build)
                self._state = _SECTION
                return data[n:]
            self._invoke_end = pending + data if need.startswith(data) else None
        self._decode(data)
        return b""

    # -- structure ------------------------------------------------------------------------

    def _on_token(self, token_id: int, pos: int) -> None:
        state = self._state
        if token_id == self._dsml and state == _INVOKE_STATE:
            # The commonest case (no tag is open): a new segment, after "</" maybe the end.
            asm = self.asm
            chunks = asm._chunks  # its text as written (an invoke strips nothing)
            tail = chunks[-1] if chunks else ""
            if len(tail) < 2 and len(chunks) > 1:
                tail = chunks[-2] + tail
            asm.next_segment(DSML)
            self._invoke_end = b"" if tail.endswith("</") else None
            return
        g = self._g
        if self._tag is not None:  # a tag cut by a token is text
            self._not_a_tag()
        if token_id == g.dsml:
            self._on_dsml(pos)
        elif token_id in self._d.ends_turn:
            name = self._table.control_text(token_id)
            stop = self._table.control_text(g.stop[0])
            self._issue(pos, f"{name} before {stop}: the message ends here")
            self._end_message(pos)
        elif state == THINKING:
            if token_id == g.think_end:
                self.asm.close(pos + 1)
                self._state = TEXT
                self.asm.open(TEXT, pos + 1)
            else:  # <think> inside the reasoning
                self.asm.write(self._table.control_text(token_id) or "")
        else:
            if state == _INVOKE_STATE:
                name = self._table.control_text(token_id)
                self._issue(pos, f"{name} inside an invoke (the invoke is cut there)")
                self.asm.close(pos, incomplete=True, build=self._build)
                self._invoke_end = None
                self._state = _SECTION
            self._flush_held(pos)
            if token_id == g.think:
                if self._state == _SECTION:
                    name = self._table.control_text(token_id)
                    self._issue(pos, f"{name} inside a tool-call section (the section ends)")
                self.asm.close(pos)
                self._state = THINKING
                self.asm.open(THINKING, pos, explicit=True)
            else:  # </think> without an open think block
                name = self._table.control_text(token_id) or ""
                self._issue(pos, f"{name} without an open think block (kept as text)")
                self._section_text(pos)
                self._on_text(name)

    def _on_dsml(self, pos: int) -> None:
        state = self._state
        if state == THINKING:
            self.asm.write(DSML)  # a call drafted inside the reasoning is reasoning
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
            self._content(before, len(held) - len(before))
        if self._pending:
            self._flush_pending()
        start = self._token_at_byte(self._byte_end(pos - 1) - len(opener))
        self._tag = (closing, start, held[len(before) :] if before else held)
        self._tag_text = b""

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
            build=self._build,
        )
