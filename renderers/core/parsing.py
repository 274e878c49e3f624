"""The shared token-level parsing engine: one incremental engine for batch and streaming.

A format's parser subclasses :class:`StreamParser` and reacts to two things: runs of
ordinary text (decoded from a per-tokenizer byte table, UTF-8 split across tokens handled)
and structural token ids (single control tokens such as ``<think>``). Markers that are not
single tokens are found by :class:`MarkerScanner`, which holds back a partial marker at the
end of a chunk. The :class:`PartAssembler` turns the regions the format opens and closes
into ordered parts, emitting stream events and recording token spans.

Batch parsing is the same engine fed one big chunk: the chunk is scanned for structural
ids at once (NumPy) and each run between them is decoded in one go.
"""

from __future__ import annotations

import codecs
import json
import re
import struct
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, TypeAlias

import numpy as np

from renderers.core.messages import Message, Part, TextPart, ThinkingPart, UnparsedToolCallPart
from renderers.core.tokens import TokenTable, as_token_ids, int_ids

__all__ = [
    "BatchRuns",
    "Event",
    "MarkerScanner",
    "ParseIssue",
    "ParseResult",
    "PartAssembler",
    "PartFinished",
    "PartStarted",
    "StreamParser",
    "Termination",
    "TextDelta",
    "json_object_members",
    "sampled_text_ids",
    "without_prefix",
]

TEXT = "text"
THINKING = "thinking"
TOOL_CALL = "tool_call"


class Termination(StrEnum):
    """How a sampled completion ended."""

    STOP = "stop"
    """Ended at one of the format's stop tokens."""
    EOS = "eos"
    """Ended at the tokenizer's end-of-sequence token."""
    LENGTH = "length"
    """Ran out of tokens without a stop token: the open part is marked incomplete."""
    MALFORMED = "malformed"
    """The parser had to repair the structure (see :attr:`ParseResult.issues`)."""


@dataclass(frozen=True, slots=True)
class ParseIssue:
    """A structural problem the lenient parser repaired, at ``position``: a token index
    for token-level parsers, a character offset for text-level ones."""

    position: int
    message: str


@dataclass(frozen=True, slots=True)
class ParseResult:
    """A parsed completion.

    ``spans[i]`` is the ``[start, end)`` token range of ``message.parts[i]`` in the
    completion, markers included. ``stop_token_id`` is the token that ended the message
    (``None`` if none did); ``trailing_ids`` are the tokens after it, which are not part of
    the message (``trailing_text`` is their text).
    """

    message: Message
    termination: Termination
    spans: tuple[tuple[int, int], ...]
    stop_token_id: int | None = None
    trailing_ids: tuple[int, ...] = ()
    trailing_text: str = ""
    issues: tuple[ParseIssue, ...] = ()


class _Deferred:
    """A :class:`ParseResult` field's value, computed when the field is first read."""

    __slots__ = ()

    def value(self) -> Any:
        raise NotImplementedError


_TrailingPiece: TypeAlias = "list[int] | np.ndarray"
"""Ids after the end of a message as a parser got them (an array: its own copy)."""


class _TrailingIds(_Deferred):
    """The ids after a stop token, made a tuple when first read: the tail can be most of
    a long completion (an array's is never a Python int per id unless read)."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: list[_TrailingPiece]) -> None:
        self._pieces = pieces

    def value(self) -> tuple[int, ...]:
        out: list[int] = []
        for piece in self._pieces:
            out += piece.tolist() if isinstance(piece, np.ndarray) else piece
        return tuple(out)


class _TrailingText(_Deferred):
    """The text of the ids after a stop token, decoded when first read."""

    __slots__ = ("_pieces", "_table")

    def __init__(self, table: TokenTable, pieces: list[_TrailingPiece]) -> None:
        self._table = table
        self._pieces = pieces

    def value(self) -> str:
        id_bytes = self._table.id_to_bytes
        data = b"".join(
            self._table.join_bytes(piece)
            if isinstance(piece, np.ndarray)
            else b"".join(map(id_bytes.__getitem__, piece))
            for piece in self._pieces
        )
        return data.decode("utf-8", "replace")


class _LazyField:
    """A :class:`ParseResult` field whose slot holds a :class:`_Deferred` until read, then
    its value. Equality, hashing, repr, pickling and ``replace`` read the field, so they
    see the value."""

    def __init__(self, slot: Any) -> None:
        self._slot = slot

    def __get__(self, obj: ParseResult | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = self._slot.__get__(obj, owner)
        if isinstance(value, _Deferred):
            value = value.value()
            self._slot.__set__(obj, value)
        return value

    def __set__(self, obj: ParseResult, value: Any) -> None:
        self._slot.__set__(obj, value)


_trailing_ids_slot = vars(ParseResult)["trailing_ids"]
_trailing_text_slot = vars(ParseResult)["trailing_text"]
ParseResult.trailing_ids = _LazyField(_trailing_ids_slot)  # type: ignore[assignment,misc]
ParseResult.trailing_text = _LazyField(_trailing_text_slot)  # type: ignore[assignment,misc]


@dataclass(frozen=True, slots=True)
class PartStarted:
    """A part began: ``kind`` is ``"text"``, ``"thinking"`` or ``"tool_call"``."""

    index: int
    kind: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text of part ``index`` (for a tool call: its raw text as sampled)."""

    index: int
    text: str


# A frozen dataclass sets each field through object.__setattr__, which costs more than
# the rest of the one-token streaming path; the assembler sets the slots directly.
_new_object = object.__new__
_set_delta_index = vars(TextDelta)["index"].__set__
_set_delta_text = vars(TextDelta)["text"].__set__


@dataclass(frozen=True, slots=True)
class PartFinished:
    """Part ``index`` is complete; ``part`` is its final value."""

    index: int
    part: Part


Event: TypeAlias = PartStarted | TextDelta | PartFinished
ToolCallBuilder: TypeAlias = Callable[[list[str], bool], Part]
"""Turns a tool-call region's raw segments into a part; the flag says it was cut off."""


# Deltas are immutable, and building one costs more than the rest of a token's path, so
# the deltas of short texts (a token's or two) are kept and returned again, by part index
# and text, across parsers: a stream mostly repeats tokens other streams had. Bounded:
# parts from _KEPT_PARTS on, and texts beyond _KEPT_TEXTS per part index, get new ones.
_SHORT = 64
_KEPT_PARTS = 8
_KEPT_TEXTS = 4096
_KEPT_DELTAS: list[dict[str, TextDelta]] = [{} for _ in range(_KEPT_PARTS)]


class PartAssembler:
    """Builds the ordered parts of one message from regions of text.

    A format opens a region (text, thinking or tool call) at a token position, writes its
    text, and closes it at another position. Separators the renderer adds around a part are
    removed here: ``strip_prefix`` at the start, and a suffix given at close time for which
    a tail matching ``holdback`` is held back until the region's end is known. A text or
    thinking part starts only when it gets its first character, so an empty region yields
    no part.
    """

    __slots__ = (
        "_channel",
        "_chunks",
        "_deltas",
        "_explicit",
        "_held",
        "_holdback",
        "_index",
        "_prefix",
        "_segments",
        "_sink",
        "_start",
        "events",
        "kind",
        "parts",
        "spans",
    )

    def __init__(self, events: bool) -> None:
        self.parts: list[Part | None] = []
        self.spans: list[tuple[int, int]] = []
        self.events: list[Event] | None = [] if events else None
        self.kind: str | None = None
        self._channel: str | None = None
        self._start = 0
        self._index = -1
        self._explicit = False
        self._prefix = ""
        self._holdback = ""
        self._held = ""
        self._chunks: list[str] = []
        self._segments: list[str] = []
        # The open part's chunks while a write of text that does not end in a holdback
        # character only appends to them (the part began, no prefix to strip, nothing
        # held back), else None: the one check of the streaming fast path.
        self._sink: list[str] | None = None
        # The kept deltas of the open part's index (see _KEPT_DELTAS).
        self._deltas: dict[str, TextDelta] = _KEPT_DELTAS[0]

    def _update_sink(self) -> None:
        if self.kind is not None and self._index >= 0 and not self._prefix and not self._held:
            self._sink = self._chunks
        else:
            self._sink = None

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
        """Open a region of ``kind`` whose span starts at token ``start``.

        ``explicit`` regions (opened by a marker) still yield an empty, incomplete part
        when the completion is cut off inside them. Tool-call regions always yield a part.
        """
        self.kind = kind
        self._start = start
        self._channel = channel
        self._explicit = explicit or kind == TOOL_CALL
        self._prefix = strip_prefix
        self._holdback = holdback
        self._held = ""
        self._chunks = []
        self._segments = []
        self._index = -1
        self._sink = None
        if kind == TOOL_CALL:
            self._begin()

    @property
    def start(self) -> int:
        """The token position where the open (or last) region started."""
        return self._start

    def _begin(self) -> None:
        self._index = len(self.parts)
        self.parts.append(None)
        self.spans.append((self._start, self._start))
        index = self._index
        self._deltas = _KEPT_DELTAS[index] if index < _KEPT_PARTS else {}
        self._update_sink()
        if self.events is not None:
            self.events.append(PartStarted(self._index, self.kind or TEXT))

    def _emit(self, text: str) -> None:
        if self._index < 0:
            self._begin()
        self._chunks.append(text)
        events = self.events
        if events is not None:
            delta = _new_object(TextDelta)
            _set_delta_index(delta, self._index)
            _set_delta_text(delta, text)
            events.append(delta)

    def write(self, text: str) -> None:
        """Add text to the open region."""
        if not text:
            return
        sink = self._sink
        if sink is None:
            held = self._held
            if not held or self._index < 0:  # (text is held only once a prefix is stripped)
                self._write(text)
                self._update_sink()
                return
            text = held + text  # the part began; only text held back goes first
            self._held = ""
            sink = self._sink = self._chunks
        holdback = self._holdback
        if text[-1] in holdback:
            # The longest tail of the text that begins the holdback (a one-character
            # holdback: that character).
            if len(holdback) == 1:
                k = 1
            else:
                k = min(len(text), len(holdback))
                while k and not holdback.startswith(text[-k:]):
                    k -= 1
            if k:
                self._held = text[-k:]
                self._sink = None
                text = text[:-k]
                if not text:
                    return
        sink.append(text)
        events = self.events
        if events is not None:
            if len(text) <= _SHORT:
                events.append(self._deltas.get(text) or self._delta(text))
            else:
                delta = _new_object(TextDelta)
                _set_delta_index(delta, self._index)
                _set_delta_text(delta, text)
                events.append(delta)

    def _delta(self, text: str) -> TextDelta:
        """A new delta of the open part's ``text``, kept (see _KEPT_DELTAS)."""
        delta = _new_object(TextDelta)
        _set_delta_index(delta, self._index)
        _set_delta_text(delta, text)
        deltas = self._deltas
        if len(deltas) < _KEPT_TEXTS:
            deltas[text] = delta
        return delta

    def _write(self, text: str) -> None:
        prefix = self._prefix
        if prefix:
            if text.startswith(prefix):
                n = len(prefix)
            else:
                n = 0
                limit = min(len(prefix), len(text))
                while n < limit and text[n] == prefix[n]:
                    n += 1
            if n == len(text) and n < len(prefix):
                self._prefix = prefix[n:]
                return
            self._prefix = ""
            text = text[n:]
            if not text:
                return
        holdback = self._holdback
        if holdback and (self._held or text[-1] in holdback):
            if self._held:
                text = self._held + text
                self._held = ""
            k = min(len(text), len(holdback))
            while k and not holdback.startswith(text[-k:]):
                k -= 1
            if k:
                self._held = text[-k:]
                text = text[:-k]
                if not text:
                    return
        self._emit(text)

    def next_segment(self, separator: str = "") -> None:
        """Start a new raw segment of the open tool-call region (e.g. name, then args).

        ``separator`` is the marker's spelling that the call's raw text joins segments
        with: it is streamed as a delta too, so a part's deltas spell its raw text.
        """
        if self._held:
            self._flush_held("")
        self._segments.append("".join(self._chunks))
        self._chunks = []
        self._update_sink()
        if separator and self.events is not None:
            if self._index < 0:
                self._begin()
            self.events.append(TextDelta(self._index, separator))

    def _flush_held(self, strip_suffix: str) -> None:
        held = self._held
        if held:
            self._held = ""
            if strip_suffix and held.endswith(strip_suffix):
                held = held[: -len(strip_suffix)]
            if held:
                self._emit(held)
            self._update_sink()

    def close(
        self,
        end: int,
        *,
        strip_suffix: str = "",
        incomplete: bool = False,
        build: ToolCallBuilder | None = None,
    ) -> Part | None:
        """Close the open region at token ``end`` (exclusive); returns the part it made.

        ``strip_suffix`` is removed if the held-back tail ends with it (the separator the
        renderer puts before the next marker). ``build`` turns a tool call's raw segments
        into its part.
        """
        kind = self.kind
        if kind is None:
            return None
        self.kind = None
        if self._held:
            self._flush_held(strip_suffix)
        self._sink = None
        part: Part | None
        chunks = self._chunks
        self._chunks = []  # not kept alive with the part's text
        if kind == TOOL_CALL:
            segments = [*self._segments, "".join(chunks)]
            self._segments = []
            assert build is not None, "closing a tool-call region needs a builder"
            part = build(segments, incomplete)
        elif self._index >= 0:
            text = "".join(chunks)
            del chunks
            if kind == THINKING:
                part = ThinkingPart(text, self._channel, incomplete)
            else:
                part = TextPart(text, self._channel, incomplete)
        elif incomplete and self._explicit:
            self._begin()
            part = (
                ThinkingPart("", self._channel, True)
                if kind == THINKING
                else TextPart("", self._channel, True)
            )
        else:
            return None
        self.parts[self._index] = part
        self.spans[self._index] = (self._start, end)
        if self.events is not None:
            self.events.append(PartFinished(self._index, part))
        return part

    def add(self, part: Part, start: int, end: int, raw: str = "") -> None:
        """Append a whole part (no open region may be pending); ``raw`` is its text as
        sampled, given to event listeners as one delta."""
        assert self.kind is None, "add() while a region is open"
        index = len(self.parts)
        self.parts.append(part)
        self.spans.append((start, end))
        if self.events is not None:
            self.events.append(PartStarted(index, _kind_of(part)))
            if raw:
                self.events.append(TextDelta(index, raw))
            self.events.append(PartFinished(index, part))


def _kind_of(part: Part) -> str:
    if type(part) is TextPart:
        return TEXT
    if type(part) is ThinkingPart:
        return THINKING
    return TOOL_CALL


class MarkerScanner:
    """Finds markers spelled by ordinary tokens (e.g. ``<think>`` in DeepSeek-V3) in a
    stream of bytes, holding back a tail that could still become a marker.

    Works on UTF-8 bytes so positions map exactly to tokens; a marker never matches
    inside a multi-byte character because UTF-8 is self-synchronising.
    """

    __slots__ = ("_buf", "_ends", "_offset")

    def __init__(self, ends: _TokenByteEnds | None = None) -> None:
        self._buf = b""
        self._offset = 0  # absolute byte offset of _buf[0] in the text stream
        # A parser's byte ends, which count every byte of the text stream: the offset
        # comes from them instead (every byte must reach the scanner, pushed or passed
        # through, before the offset is read).
        self._ends = ends

    def pass_through(self, data: bytes, first: bytes = b"<") -> bool:  # see _MARKER_START
        """Account for ``data`` without scanning it when nothing is held back and no marker
        can start in it (every marker starts with ``first``); ``False`` means push it."""
        if self._buf or first[0] in data:  # (an int is found in bytes much faster)
            return False
        if self._ends is None:
            self._offset += len(data)
        return True

    def push(self, data: bytes) -> None:
        """Append bytes of ordinary text."""
        self._buf = self._buf + data if self._buf else data

    def next(self, markers: Sequence[bytes]) -> tuple[bytes, bytes | None]:
        """The text before the first marker and the marker (or ``None``); :attr:`offset`
        is then just after them.

        Without a marker, the returned text excludes a held-back tail that is a proper
        prefix of some marker; call again after the next :meth:`push`.
        """
        buf = self._buf
        best = -1
        hit: bytes | None = None
        for m in markers:
            i = buf.find(m)
            if i != -1 and (best == -1 or i < best):
                best, hit = i, m
        if hit is not None:
            cut = best + len(hit)
            self._buf = buf[cut:]
            if self._ends is None:
                self._offset += cut
            return buf[:best], hit
        keep = 0
        for m in markers:
            k = min(len(m) - 1, len(buf))
            while k > keep and not buf.endswith(m[:k]):
                k -= 1
            keep = max(keep, k)
        cut = len(buf) - keep
        self._buf = buf[cut:]
        if self._ends is None:
            self._offset += cut
        return buf[:cut], None

    @property
    def offset(self) -> int:
        """The absolute byte offset of the bytes held back: just after what :meth:`next`
        or :meth:`flush` returned last."""
        if self._ends is not None:
            return self._ends.seen - len(self._buf)
        return self._offset

    def flush(self) -> bytes:
        """Release everything held back (at the end of a run of text)."""
        buf = self._buf
        self._buf = b""
        if self._ends is None:
            self._offset += len(buf)
        return buf


class _TokenByteEnds:
    """Maps ordinary-text byte offsets back to tokens, so a marker found in the text maps
    to tokens exactly: which token holds a byte, and where a token's bytes end.

    Nothing is computed per token while parsing: the ids are kept (a batch as the array the
    parser scans, tokens fed a few at a time appended to ``tail``), and byte lengths are
    summed only when asked: a block's when a marker asks about it, the tail's when the byte
    count so far (:attr:`seen`) is read (a streamed token costs one append). Structural
    tokens are kept too and count zero bytes (their spelling is not ordinary text).
    Queries name ``count``, the number of tokens consumed so far.
    """

    __slots__ = (
        "_begin",
        "_blocks",
        "_counted",
        "_ends",
        "_first",
        "_lengths",
        "_seen",
        "_tail_begin",
        "_tail_first",
        "covered",
        "tail",
    )

    def __init__(self, lengths: np.ndarray) -> None:
        self._lengths = lengths  # byte length of every id, zero for structural ids
        self._seen = 0  # bytes up to the end of tail[_counted - 1] (or of the last block)
        self._counted = 0
        self.tail: list[int] = []  # ids of the tokens after the last block
        self.covered = False  # the tokens being consumed are in a block already
        self._tail_first = 0  # index of the token tail[0]
        self._tail_begin = 0  # byte offset where tail[0] starts
        self._blocks: list[np.ndarray | list[int]] = []
        self._ends: list[np.ndarray | None] = []  # a block's cumulative byte ends, if known
        self._first: list[int] = []  # first token of each block
        self._begin: list[int] = []  # byte offset where each block starts

    @property
    def seen(self) -> int:
        """Bytes so far: the end of the latest token."""
        tail = self.tail
        counted = self._counted
        if counted < len(tail):
            self._seen += int(self._lengths[tail[counted:]].sum())
            self._counted = len(tail)
        return self._seen

    def consumed(self, size: int) -> None:
        """``size`` more bytes of covered tokens were consumed."""
        self._seen += size

    def cover(self, ids: np.ndarray, first: int, ends: np.ndarray | None = None) -> None:
        """The tokens ``first, first + 1, ...`` are ``ids``, consumed next (until
        :meth:`uncover`): only the byte count is kept up to date meanwhile
        (:meth:`consumed`). ``ends`` are their cumulative byte lengths when the caller
        has them."""
        self._freeze()
        self._blocks.append(ids)
        self._ends.append(ends)
        self._first.append(first)
        self._begin.append(self.seen)
        self.covered = True

    def uncover(self, count: int, borrowed: bool) -> None:
        """The covered tokens were consumed; ``count`` tokens so far. A ``borrowed`` array
        (the caller's, who may reuse it for the next ids) is copied."""
        if borrowed:
            self._blocks[-1] = self._blocks[-1].copy()
        self.covered = False
        self._tail_first = count
        self._tail_begin = self.seen

    def _freeze(self) -> None:
        """Make the tail a block."""
        tail = self.tail
        if tail:
            self._blocks.append(tail)
            self._ends.append(None)
            self._first.append(self._tail_first)
            self._begin.append(self._tail_begin)
            self._tail_first += len(tail)
            self._tail_begin = self.seen
            self.tail = []
            self._counted = 0

    def _lengths_of(self, b: int, start: int, stop: int) -> np.ndarray:
        chunk = self._blocks[b][start:stop]
        ids = chunk if isinstance(chunk, np.ndarray) else np.array(chunk, dtype=np.int64)
        lengths: np.ndarray = self._lengths[ids]
        return lengths

    def token_at(self, offset: int, count: int) -> int:
        """The index of the token holding byte ``offset``."""
        self._freeze()
        b = bisect_right(self._begin, offset) - 1
        k = count
        if b >= 0 and offset < self.seen:
            # Summed a chunk at a time: a long block never needs a whole array of ends.
            base = self._begin[b]
            size = min(len(self._blocks[b]), count - self._first[b])
            known = self._ends[b]
            if known is not None:
                if size > 0 and base + int(known[size - 1]) > offset:
                    k = self._first[b] + int(known[:size].searchsorted(offset - base, "right"))
                return max(0, min(k, count - 1))
            for start in range(0, size, _ENDS_CHUNK):
                ends = np.cumsum(self._lengths_of(b, start, min(size, start + _ENDS_CHUNK)))
                if base + int(ends[-1]) > offset:
                    j = start + int(np.searchsorted(ends, offset - base, "right"))
                    k = self._first[b] + j
                    break
                base += int(ends[-1])
        return max(0, min(k, count - 1))

    def end_of(self, k: int, count: int) -> int:
        """The end offset of token ``k``."""
        if k >= count - 1:
            return self.seen
        if k < 0:
            return 0
        self._freeze()
        b = bisect_right(self._first, k) - 1
        end = self._begin[b]
        stop = k - self._first[b] + 1
        known = self._ends[b]
        if known is not None:
            return end + int(known[stop - 1])
        for start in range(0, stop, _ENDS_CHUNK):
            end += int(self._lengths_of(b, start, min(stop, start + _ENDS_CHUNK)).sum())
        return end


_ENDS_CHUNK = 1 << 16


_SMALL_CHUNK = 48
# Feeds of up to this many ids may take the streaming hot path (what servers send per chunk).
_DIRECT_MAX = 16
_DECODE_CHUNK = 1 << 16  # bytes of text decoded and handed on at once
_GATHER_MIN = 512  # runs shorter than this are joined in Python (NumPy has a fixed cost)
_JOIN_MAX = 1 << 14  # chunks up to this many ids are joined whole (_feed_joined)


class StreamParser:
    """Base of every format's incremental parser (``feed`` / ``finish``).

    Subclasses set ``structural`` ids (besides the stop ids) and implement
    :meth:`_on_text`, :meth:`_on_token` and :meth:`_on_end`. In :meth:`_on_text` the run
    being decoded covers tokens ``[self._run_start, self._pos)``.
    """

    role = "assistant"

    def __init__(
        self,
        table: TokenTable,
        *,
        structural: Iterable[int],
        stop_ids: Iterable[int],
        eos_ids: Iterable[int] = (),
        events: bool = True,
        byte_offsets: bool = False,
    ) -> None:
        self._table = table
        self._id_bytes = table.id_to_bytes
        self._id_str = table.id_to_str
        self._valid = table.valid
        self._vocab_size = table.vocab_size
        ids = _structural_ids(table, tuple(structural), tuple(stop_ids), tuple(eos_ids))
        self._stop_ids = ids.stop
        self._eos_ids = ids.eos
        self._structural = ids.structural
        self._kinds = ids.kinds
        self._plain = ids.plain
        self._text_len = ids.text_len
        self._text_stops = ids.text_stops
        self.asm = PartAssembler(events)
        # Whether a one-token feed of ordinary text may write it to the assembler itself
        # (see _writes_through), and the scanner it must pass first: decided after every
        # other feed, so the first one never takes that path.
        self._direct = False
        self._gate: MarkerScanner | None = None
        self._decoder: codecs.IncrementalDecoder | None = None
        self._pending = False
        self._pos = 0
        self._run_start = 0
        self._done = False
        self._finished = False
        self._stop_id: int | None = None
        self._trailing: list[int] = []
        # Long runs of ids after the end, kept as they came, in order, before _trailing.
        self._trailing_pieces: list[_TrailingPiece] = []
        self._issues: list[ParseIssue] = []
        self._draft_reported = -1  # the think block whose drafted call was reported
        self._one_shot = False  # parse(): the ids are not fed again nor changed meanwhile
        self._byte_ends = _TokenByteEnds(self._text_len) if byte_offsets else None
        self._shift = 0  # ids read before the completion (a prefill): positions skip them
        self._early: list[Event] | None = None  # their events, for the first feed

    # -- hooks for formats ----------------------------------------------------------------

    def _on_text(self, text: str) -> None:
        """A run of ordinary text decoded from tokens ``[self._run_start, self._pos)``."""
        raise NotImplementedError

    def _on_token(self, token_id: int, pos: int) -> None:
        """A structural (non-stop) token at ``pos``."""
        raise NotImplementedError

    def _on_end(self, pos: int, stopped: bool) -> None:
        """The message ends at ``pos``: at a stop token if ``stopped``, else cut off."""
        raise NotImplementedError

    def _on_bytes(self, data: bytes) -> None:
        """Formats with ``byte_offsets`` may override this to see raw bytes instead."""
        self._decode(data)

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        """Whether, in the format's state now, the text of an ordinary token goes unchanged
        to ``self.asm.write`` (so :meth:`feed` writes a one-token feed's text itself, without
        :meth:`_on_bytes` and :meth:`_on_text`); formats with ``byte_offsets`` also name the
        scanner (from :meth:`_new_scanner`) whose :meth:`MarkerScanner.pass_through` the
        token's bytes must pass first. Asked after every feed that did not take that path."""
        return _NOT_THROUGH

    def _new_scanner(self) -> MarkerScanner:
        """A scanner of this parser's ordinary text (``byte_offsets``), counting bytes by
        the parser's: every ordinary byte must reach it (pushed or passed through) before
        it is asked for the next marker."""
        assert self._byte_ends is not None, "parser was created without byte_offsets"
        return MarkerScanner(self._byte_ends)

    def _text_ok(self, data: bytes) -> bool:
        """Formats with ``byte_offsets``: whether ``data`` (one token's complete UTF-8 text)
        may go straight to :meth:`_on_text` because it cannot hold or continue a marker. A
        format answering yes accounts for the bytes in its scanner
        (:meth:`MarkerScanner.pass_through`)."""
        return False

    # -- helpers for formats --------------------------------------------------------------

    def _issue(self, pos: int, message: str) -> None:
        self._issues.append(ParseIssue(pos, message))

    def _keep_as_text(self, token_id: int, pos: int, why: str | None) -> None:
        """A control token that is content where it was sampled (e.g. a tool call drafted
        inside open reasoning): its spelling stays in the open part, reported as ``why``."""
        if why is not None:
            self._issue(pos, why)
        self.asm.write(self._table.control_text(token_id) or "")

    def _drafted_call(self, token_id: int, pos: int) -> None:
        """A tool-call token inside open reasoning: reasoning ends only at its closing
        marker, so the drafted call stays reasoning text, as inference servers keep it
        (reported once per think block)."""
        why = None
        if self._draft_reported != self.asm.start:
            self._draft_reported = self.asm.start
            name = self._table.control_text(token_id)
            why = f"a tool call drafted inside open reasoning ({name}) is kept as reasoning"
        self._keep_as_text(token_id, pos, why)

    def _end_message(self, pos: int) -> None:
        """End the message before token ``pos`` without a stop token (it is malformed):
        the token and everything after it are trailing."""
        self._on_end(pos, True)
        self._done = True

    def _token_at_byte(self, offset: int) -> int:
        """The index of the token holding ordinary-text byte ``offset`` (byte_offsets)."""
        assert self._byte_ends is not None, "parser was created without byte_offsets"
        return self._byte_ends.token_at(offset, self._pos)

    def _byte_end(self, k: int) -> int:
        """The end offset (in ordinary-text bytes) of token ``k`` (byte_offsets)."""
        assert self._byte_ends is not None, "parser was created without byte_offsets"
        return self._byte_ends.end_of(k, self._pos)

    def _decode(self, data: bytes) -> None:
        if len(data) > _DECODE_CHUNK:
            self._decode_long(data)
            return
        if not self._pending:
            try:  # the common case, complete UTF-8, without the incremental decoder
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                if text:
                    self._on_text(text)
                return
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        self._pending = bool(decoder.getstate()[0])
        if text:
            self._on_text(text)

    def _decode_long(self, data: bytes) -> None:
        """Long text is handed on in pieces: decoding it at once widens the text's buffer
        as wider characters appear (copying it), and a format stripping a separator from
        it would copy it whole again; the part joins the pieces once."""
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for k in range(0, len(data), _DECODE_CHUNK):
            text = decoder.decode(data[k : k + _DECODE_CHUNK])
            if text:
                self._on_text(text)
        self._pending = bool(decoder.getstate()[0])

    def _flush_pending(self) -> None:
        if self._pending and self._decoder is not None:
            text = self._decoder.decode(b"", final=True)
            self._pending = False
            if text:
                self._on_text(text)

    # -- driving --------------------------------------------------------------------------

    def read_before(self, token_ids: Sequence[int]) -> None:
        """Read ``token_ids`` before the completion as if they had been sampled: the ids a
        prompt holds after its generation prompt (a prefill, the text the model is forced to
        start with), so the parts they begin include them. Spans, issues and error positions
        count from the completion's first id (a part begun here starts at 0); the events
        these ids make come with the first :meth:`feed` (or :attr:`final_events`)."""
        if self._pos or self._finished or self._shift:
            raise RuntimeError("read_before() must come before any other id")
        ids = list(token_ids)
        if not ids:
            return
        events = self._feed_other(ids)
        self._shift = len(ids)
        self._early = list(events) if self.asm.events is not None else None
        self._direct = False  # the first feed delivers these events

    def feed(self, token_ids: Sequence[int] | np.ndarray) -> list[Event]:
        """Consume more sampled token ids; returns the events they produced."""
        if self._direct and type(token_ids) is list and len(token_ids) == 1:
            # The streaming hot path: one ordinary token of complete UTF-8 text that the
            # format writes unchanged into the open part (inlined: the hottest path).
            t = token_ids[0]
            if type(t) is int and 0 <= t < self._vocab_size:
                text = self._plain[t]
                if text is not None:
                    byte_ends = self._byte_ends
                    if byte_ends is not None:
                        gate = self._gate  # it counts bytes by byte_ends: nothing to add
                        if gate is not None and (gate._buf or _MARKER_START in text):
                            return self._feed_other(token_ids)
                        byte_ends.tail.append(t)  # its bytes are counted when asked
                    self._pos += 1
                    asm = self.asm
                    sink = asm._sink
                    if sink is not None and text[-1] not in asm._holdback:
                        sink.append(text)
                        if asm.events is None:
                            return []
                        delta = asm._deltas.get(text)
                        if delta is None:
                            delta = asm._delta(text)
                        return [delta]
                    return self._write_text(text)
        elif self._direct and type(token_ids) is list and 1 < len(token_ids) <= _DIRECT_MAX:
            return self._feed_direct(token_ids)
        return self._feed_other(token_ids)

    def _write_text(self, text: str) -> list[Event]:
        """The hot path's ``text`` into the open part, with the events it makes."""
        asm = self.asm
        if asm.events is None:
            asm.write(text)
            return []
        events = asm.events = []
        asm.write(text)
        return events

    def _feed_direct(self, ids: list[int]) -> list[Event]:
        """The hot path for a few ids (what a server sends per chunk): their texts joined
        and written at once, as decoding them and handing the text to the format does."""
        plain = self._plain
        size = self._vocab_size
        texts: list[str] = []
        for t in ids:
            piece = plain[t] if type(t) is int and 0 <= t < size else None
            if piece is None:
                return self._feed_other(ids)
            texts.append(piece)
        text = "".join(texts)
        byte_ends = self._byte_ends
        if byte_ends is not None:
            gate = self._gate
            if gate is not None and (gate._buf or _MARKER_START in text):
                return self._feed_other(ids)
            byte_ends.tail += ids
        self._pos += len(ids)
        return self._write_text(text)

    def _feed_other(self, token_ids: Sequence[int] | np.ndarray) -> list[Event]:
        self._direct = False  # until the format says so again (not if _feed raises)
        events = self._feed(token_ids if type(token_ids) is list else as_token_ids(token_ids))
        if self._early is not None:  # the first feed after read_before()
            events = [*self._early, *events]
            self._early = None
        if self._pending or self._done or self._finished:
            self._direct = False
        else:
            self._direct, self._gate = self._writes_through()
            # The hot path adds no bytes to a scanner: it must count them by ours.
            assert self._gate is None or self._gate._ends is self._byte_ends
        return events

    def _feed(self, token_ids: Sequence[int] | np.ndarray) -> list[Event]:
        """:meth:`feed` off its hot path."""
        asm = self.asm
        if asm.events is not None:
            asm.events = []
        if (
            type(token_ids) is list
            and len(token_ids) == 1
            and not self._done
            and not self._finished
            and type(token_ids[0]) is int
            and 0 <= token_ids[0] < self._vocab_size
        ):
            # One token (what _feed_small does for it, without its checks and loop).
            t = token_ids[0]
            if t in self._structural:
                self._structural_token(t)
                return asm.events if asm.events is not None else []
            text = None if self._pending else self._id_str[t]
            if text is not None:  # complete UTF-8 text: no decoding
                byte_ends = self._byte_ends
                if byte_ends is not None:
                    if not self._text_ok(self._id_bytes[t]):
                        text = None
                    else:
                        byte_ends.tail.append(t)
                if text is not None:
                    self._run_start = self._pos
                    self._pos += 1
                    if text:
                        self._on_text(text)
                    return asm.events if asm.events is not None else []
            if self._valid[t]:
                self._run([t])
                return asm.events if asm.events is not None else []
        if self._finished:
            raise RuntimeError("feed() called after finish()")
        if isinstance(token_ids, np.ndarray):
            if self._done or token_ids.size <= _SMALL_CHUNK:
                token_ids = token_ids.tolist()
            else:
                self._feed_large(None, token_ids)
                events = asm.events
                return events if events is not None else []
        ids = token_ids if isinstance(token_ids, list) else list(token_ids)
        if self._done:
            self._table.check_ids(ids, self._pos - self._shift)
            self._trailing += int_ids(ids)
            self._pos += len(ids)
            return []
        if len(ids) <= _SMALL_CHUNK:
            self._feed_small(ids)
        else:
            self._feed_large(ids, None)
        events = asm.events
        return events if events is not None else []

    def _feed_small(self, ids: list[int]) -> None:
        """A few ids: runs of ordinary tokens between structural ones, decoded per run."""
        if not all(type(t) is int for t in ids):
            self._table.check_ids(ids, self._pos - self._shift)  # names the first non-integer
            ids = int_ids(ids)  # NumPy integers, 0-d integer tensors
        structural = self._structural
        valid = self._valid
        n = self._vocab_size
        start = 0
        end = len(ids)
        k = 0
        while k <= end:
            if k < end:
                t = ids[k]
                if t not in structural:
                    if not (0 <= t < n and valid[t]):
                        self._table.check_ids([t], self._pos - self._shift + k - start)
                    k += 1
                    continue
            if k > start:
                self._run(ids[start:k])
            if k == end:
                return
            self._structural_token(ids[k])
            k += 1
            start = k
            if self._done:
                rest = ids[k:]
                self._table.check_ids(rest, self._pos - self._shift)
                self._trailing.extend(rest)
                self._pos += len(rest)
                return

    def _run(self, run: list[int]) -> None:
        """Decode a run of ordinary tokens (already validated) and hand it to the format."""
        self._run_start = self._pos
        self._pos += len(run)
        byte_ends = self._byte_ends
        id_bytes = self._id_bytes
        if byte_ends is not None:
            data = b"".join(map(id_bytes.__getitem__, run))
            if byte_ends.covered:
                byte_ends.consumed(len(data))
            else:
                byte_ends.tail += run
            self._on_bytes(data)
            return
        self._decode(b"".join(map(id_bytes.__getitem__, run)))

    def _feed_large(self, ids: list[int] | None, arr: np.ndarray | None) -> None:
        """Many ids (a list, or else an array): structural ids found and every id checked
        at once with NumPy, then each run between structural ids decoded in one go. An
        array is never turned into one big list (a Python int per id is 36 bytes)."""
        arr, cuts, tokens = self._scan(ids, arr)
        n = len(arr)
        byte_ends = self._byte_ends
        if n <= _JOIN_MAX:
            self._feed_joined(arr, cuts, tokens)
            if byte_ends is not None:
                byte_ends.uncover(self._pos, ids is None and not self._one_shot)
            return
        if byte_ends is not None:
            byte_ends.cover(arr, self._pos)
        base = self._pos

        def on_run(j: int, prev: int, cut: int) -> None:
            self._pos = base + prev
            if cut - prev < _GATHER_MIN:
                self._run(arr[prev:cut].tolist())
            else:
                self._run_large(arr[prev:cut])

        self._walk(arr, cuts, tokens, on_run)
        if byte_ends is not None:
            byte_ends.uncover(self._pos, ids is None and not self._one_shot)

    def _scan(
        self, ids: list[int] | None, arr: np.ndarray | None
    ) -> tuple[np.ndarray, list[int], list[int]]:
        """The ids as an integer array, with the positions of the structural ids and
        those ids; ``ValueError`` names the first id that is no token (positions count
        from ``self._pos``)."""
        if arr is None:
            assert ids is not None
            try:  # exactly Python ints (or NumPy integers) fit; a float or str raises
                if len(ids) <= _JOIN_MAX:
                    arr = np.frombuffer(struct.pack(f"{len(ids)}q", *ids), dtype=np.int64)
                else:
                    arr = np.frombuffer(_packed(ids), dtype=np.int64)
            except (OverflowError, TypeError, ValueError, struct.error):
                self._table.check_ids(ids, self._pos - self._shift)
                raise ValueError("token_ids: expected integers") from None
        elif arr.dtype.kind not in "iu":
            self._table.check_ids(arr.tolist(), self._pos - self._shift)
            raise ValueError(f"token_ids: expected integers, got an array of {arr.dtype}")
        if arr.ndim != 1:
            raise ValueError(f"token_ids: expected a 1-D array, got shape {arr.shape}")
        # One lookup checks every id and finds the structural ones: ids beyond the
        # vocabulary are clipped to the table's last entry (not a token). NumPy would read a
        # negative index, or a uint64 one beyond int64, from the end: those are kept apart.
        if arr.dtype.kind == "i":
            kinds = None if arr.min() < 0 else self._kinds.take(arr, mode="clip")
        elif arr.dtype.itemsize >= 8:  # (a max, not a clipped copy: no 8 bytes per id)
            kinds = None if arr.max() >= self._vocab_size else self._kinds.take(arr, mode="clip")
        else:
            kinds = self._kinds.take(arr, mode="clip")
        if kinds is None:
            self._table.check_ids(arr.tolist() if ids is None else ids, self._pos - self._shift)
            raise AssertionError("unreachable: check_ids raises")  # pragma: no cover
        cuts: list[int] = kinds.nonzero()[0].tolist()
        tokens: list[int] = arr[cuts].tolist()
        if not self._structural.issuperset(tokens):  # ids that are no token
            self._table.check_ids(arr.tolist() if ids is None else ids, self._pos - self._shift)
        return arr, cuts, tokens

    def _walk(
        self,
        arr: np.ndarray,
        cuts: list[int],
        tokens: list[int],
        on_run: Callable[[int, int, int], None],
    ) -> None:
        """A chunk's runs and structural ids in order: ``on_run(j, prev, cut)`` for the
        ordinary ids ``[prev, cut)`` before structural id ``j`` (at ``cuts[j]``), then that
        id; once the message has ended, the rest of the chunk is trailing (taken from
        ``arr``, whose items are ints whatever integers a caller's list held)."""
        n = len(arr)
        base = self._pos
        prev = 0
        cuts.append(n)
        for j, cut in enumerate(cuts):
            if self._done:
                self._trail(arr[prev:])
                self._pos = base + n
                return
            if cut > prev:
                on_run(j, prev, cut)
            if cut < n:
                self._pos = base + cut
                self._structural_token(tokens[j])
            prev = cut + 1

    def _trail(self, ids: np.ndarray) -> None:
        """Ids after the end of the message, in order: a long run is kept as an array (a
        copy), not as a Python int per id, until ``trailing_ids`` is read."""
        if len(ids) <= _SMALL_CHUNK:
            self._trailing += ids.tolist()
            return
        if self._trailing:
            self._trailing_pieces.append(self._trailing)
            self._trailing = []
        self._trailing_pieces.append(ids.copy())

    def _feed_joined(self, arr: np.ndarray, cuts: list[int], tokens: list[int]) -> None:
        """The rest of :meth:`_feed_large` for a chunk of up to ``_JOIN_MAX`` ids: the
        ordinary text of the whole chunk is joined once (structural ids count no bytes)
        and each run between structural ids is a slice of it (of its decoded text when
        it is ASCII: what decoding the run's bytes gives)."""
        data, ends = self._chunk_bytes(arr)
        byte_ends = self._byte_ends
        if byte_ends is not None:
            byte_ends.cover(arr, self._pos, ends)
        bounds: list[int] = ends[cuts].tolist() if cuts else []
        bounds.append(len(data))
        write: Callable[[int, int], None]  # the text of bytes [at, stop) of the chunk
        if (
            byte_ends is None
            and not self._pending
            and len(data) <= _DECODE_CHUNK
            and data.isascii()  # each run's text is a slice of the chunk's
        ):
            text = data.decode("ascii")

            def write(at: int, stop: int) -> None:
                if stop > at:
                    self._on_text(text[at:stop])

        else:

            def write(at: int, stop: int) -> None:
                chunk = data[at:stop]
                if byte_ends is not None:
                    byte_ends.consumed(len(chunk))
                    self._on_bytes(chunk)
                else:
                    self._decode(chunk)

        base = self._pos

        def on_run(j: int, prev: int, cut: int) -> None:
            self._run_start = base + prev
            self._pos = base + cut
            # Structural ids have no bytes: a run starts where the one before it ended.
            write(bounds[j - 1] if j else 0, bounds[j])

        self._walk(arr, cuts, tokens, on_run)

    def _chunk_bytes(self, arr: np.ndarray) -> tuple[bytes, np.ndarray]:
        """The ordinary text of the ids ``arr`` joined (structural ids count no bytes),
        with each id's cumulative byte end."""
        lengths = self._text_len[arr]
        ends = lengths.cumsum()
        # Byte k of the text is flat[stops[id] - ends[i] + k] for the token i holding it.
        offsets = self._text_stops[arr] - ends
        data = self._table.gather_bytes(offsets, int(ends[-1]) if len(arr) else 0, lengths)
        return data, ends

    def _run_large(self, arr: np.ndarray) -> None:
        """Like :meth:`_run` for a long run given as an array: its bytes gathered and its
        byte offsets computed with NumPy."""
        self._run_start = self._pos
        self._pos += len(arr)
        data = self._table.join_bytes(arr)
        if self._byte_ends is not None:
            self._byte_ends.consumed(len(data))  # the tokens are covered (_feed_large)
            self._on_bytes(data)
        else:
            self._decode(data)

    def _structural_token(self, t: int) -> None:
        pos = self._pos
        if self._pending:
            self._flush_pending()
        self._pos = self._run_start = pos + 1
        byte_ends = self._byte_ends
        if byte_ends is not None and not byte_ends.covered:
            byte_ends.tail.append(t)
        if t in self._stop_ids or t in self._eos_ids:
            self._stop_id = t
            self._on_end(pos, True)
            self._done = True
        else:
            self._on_token(t, pos)
            if self._done:  # the format ended the message at this token
                self._trailing.append(t)

    def parse(self, token_ids: Sequence[int] | np.ndarray) -> ParseResult:
        """All the sampled ids at once: :meth:`feed` then :meth:`finish` (or the format's
        one-shot path, :meth:`_parse_runs`, which gives the same result)."""
        self._one_shot = True
        token_ids = as_token_ids(token_ids)
        if (
            self.asm.events is None
            and not self._pos
            and not self._finished
            and type(self)._parse_runs is not StreamParser._parse_runs
        ):
            runs = self._batch_runs(token_ids)
            result = None if runs is None else self._parse_runs(runs)
            if result is not None:
                return result
        self.feed(token_ids)
        return self.finish()

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """A format's one-shot parse of a whole completion, without events: the result
        :meth:`feed` then :meth:`finish` give, or ``None`` to take that path (for what the
        format does not read this way, e.g. malformed structure); it returns
        :meth:`_one_shot_result`."""
        return None

    def _one_shot_result(
        self,
        runs: BatchRuns,
        parts: list[Part | None],
        spans: list[tuple[int, int]],
        stop: int | None,
    ) -> ParseResult:
        """The result of a one-shot parse (:meth:`_parse_runs`): ``parts`` with their
        ``spans``, the completion ended by structural id ``runs.tokens[stop]`` (a stop
        or end-of-sequence id; the ids after it trail) or cut off (``None``). The parser
        is finished."""
        if stop is not None:
            self._stop_id = runs.tokens[stop]
            self._trail(runs.ids[runs.cuts[stop] + 1 :])
        self._done = self._finished = True
        self._pos = runs.count
        self.asm.kind = None
        self.asm.parts = parts
        self.asm.spans = spans
        return self._result()

    def _batch_runs(self, token_ids: Sequence[int] | np.ndarray) -> BatchRuns | None:
        """``token_ids`` split at the structural ids for :meth:`_parse_runs`, or ``None``
        for ids the general path takes in other ways (few, very many, not a list or a
        1-D array)."""
        if type(token_ids) is list:
            ids: list[int] | None = token_ids
            arr = None
            n = len(token_ids)
        elif isinstance(token_ids, np.ndarray) and token_ids.ndim == 1:
            ids = None
            arr = token_ids
            n = arr.size
        else:
            return None
        if not _SMALL_CHUNK < n <= _JOIN_MAX:
            return None
        arr, cuts, tokens = self._scan(ids, arr)
        data, ends = self._chunk_bytes(arr)
        bounds: list[int] = ends[cuts].tolist() if cuts else []
        bounds.append(len(data))
        starts = [0, *bounds[:-1]]
        # Each run decoded on its own, as the engine does (it flushes its decoder at every
        # structural id); an ASCII chunk's runs are slices of its text.
        if data.isascii():
            text = data.decode("ascii")
            texts = [text[a:b] for a, b in zip(starts, bounds, strict=True)]
        else:
            texts = [
                data[a:b].decode("utf-8", "replace") for a, b in zip(starts, bounds, strict=True)
            ]
        return BatchRuns(texts, tokens, cuts, n, arr, ends)

    def finish(self) -> ParseResult:
        """End of the sampled ids: close what is open and return the result."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        self._finished = True
        self._direct = False
        if self.asm.events is not None:
            self.asm.events = self._early or []
            self._early = None
        self._flush_pending()
        if not self._done:
            self._on_end(self._pos, False)
        return self._result()

    @property
    def final_events(self) -> list[Event]:
        """The events :meth:`finish` produced (parts closed at the end of the ids)."""
        if not self._finished or self.asm.events is None:
            return []
        return self.asm.events

    def _result(self) -> ParseResult:
        parts = [p for p in self.asm.parts if p is not None]
        spans = self.asm.spans
        for part, (start, _) in zip(self.asm.parts, spans, strict=True):
            if type(part) is UnparsedToolCallPart and not part.incomplete:
                # The model called a tool and the call cannot be read: an agent must know.
                self._issues.append(ParseIssue(start, f"tool call not parsed: {part.error}"))
        self._issues.sort(key=lambda issue: issue.position)
        if self._shift:  # count from the completion's first id (see read_before)
            k = self._shift
            spans = [(max(a - k, 0), max(b - k, 0)) for a, b in spans]
            self._issues = [ParseIssue(max(i.position - k, 0), i.message) for i in self._issues]
        message = Message(self.role, parts)
        if isinstance(message.content, str) and len(spans) > 1:
            spans = [(spans[0][0], spans[-1][1])]
        if self._issues:
            termination = Termination.MALFORMED
        elif self._stop_id is None:
            termination = Termination.LENGTH
        elif self._stop_id in self._stop_ids:
            termination = Termination.STOP
        else:
            termination = Termination.EOS
        pieces = self._trailing_pieces
        trailing = tuple(self._trailing) if not pieces else ()
        result = ParseResult(
            message, termination, tuple(spans), self._stop_id, trailing, "", tuple(self._issues)
        )
        if pieces:  # made a tuple when read
            pieces.append(self._trailing)
            _trailing_ids_slot.__set__(result, _TrailingIds(pieces))
        if trailing or pieces:  # decoded when read
            text = _TrailingText(self._table, pieces or [self._trailing])
            _trailing_text_slot.__set__(result, text)
        return result


@dataclass(frozen=True, slots=True)
class BatchRuns:
    """A whole completion split at its structural ids (:meth:`StreamParser._parse_runs`):
    ``texts[j]`` is the text of the ordinary ids before structural id ``tokens[j]`` (at
    position ``cuts[j]``), decoded as the engine decodes a run, and ``texts[-1]`` the text
    after the last one; ``count`` ids in all."""

    texts: list[str]
    tokens: list[int]
    cuts: list[int]
    count: int
    ids: np.ndarray
    """The ids as integers (whatever integers the caller gave)."""
    byte_ends: np.ndarray
    """Per id, where its bytes end in the joined ordinary text (structural ids have none)."""


_NOT_THROUGH: tuple[bool, MarkerScanner | None] = (False, None)
# Every marker a MarkerScanner finds starts with it (a token's text holds it if and only if
# its bytes do: the text is their complete decoding; a str is searched much faster).
_MARKER_START = "<"


@dataclass(frozen=True, slots=True)
class _StructuralIds:
    """A parser's ids (stop, end-of-sequence, and all it reacts to) and the per-id tables
    built from them, made once per table and set of ids."""

    stop: frozenset[int]
    eos: frozenset[int]
    structural: frozenset[int]
    kinds: np.ndarray
    plain: list[str | None]
    text_len: np.ndarray
    text_stops: np.ndarray


# Per table: the ids a parser was given (as given) -> its _StructuralIds. Parsers whose
# ids differ in order or in which are stops but not in their union share the same tables.
_STRUCTURAL_IDS: weakref.WeakKeyDictionary[
    TokenTable, dict[tuple[tuple[int, ...], ...], _StructuralIds]
] = weakref.WeakKeyDictionary()


def _structural_ids(
    table: TokenTable, structural: tuple[int, ...], stop: tuple[int, ...], eos: tuple[int, ...]
) -> _StructuralIds:
    by_ids = _STRUCTURAL_IDS.get(table)
    if by_ids is None:
        by_ids = _STRUCTURAL_IDS[table] = {}
    key = (structural, stop, eos)
    found = by_ids.get(key)
    if found is None:
        stop_ids = frozenset(stop)
        eos_ids = frozenset(eos)
        every = frozenset(structural) | stop_ids | eos_ids
        same = next((f for f in by_ids.values() if f.structural == every), None)
        if same is None:
            kinds = _token_kinds(table, every)
            text_len = _text_lengths(table, kinds)
            found = _StructuralIds(
                stop_ids,
                eos_ids,
                every,
                kinds,
                _plain_texts(table, every),
                text_len,
                _text_stops(table, text_len),
            )
        else:
            found = replace(same, stop=stop_ids, eos=eos_ids)
        if len(by_ids) > 64:
            by_ids.clear()
        by_ids[key] = found
    return found


def _plain_texts(table: TokenTable, ids: frozenset[int]) -> list[str | None]:
    """Per id: the text of a token that is ordinary text (not one of ``ids``), complete
    UTF-8 and not empty, else ``None``: one lookup tells a one-token feed it is plain."""
    texts = [s or None for s in table.id_to_str]
    for t in ids:
        if 0 <= t < len(texts):
            texts[t] = None
    return texts


_STRUCTURAL, _NOT_A_TOKEN = 1, 2


def _token_kinds(table: TokenTable, ids: frozenset[int]) -> np.ndarray:
    """Per id: 0 for ordinary text, ``_STRUCTURAL`` for ``ids``, ``_NOT_A_TOKEN`` for ids
    no token has, and one more entry, ``_NOT_A_TOKEN``, past the vocabulary."""
    kinds = np.where(table.valid_array, 0, _NOT_A_TOKEN).astype(np.int8)
    kinds[list(ids)] = _STRUCTURAL
    kinds = np.append(kinds, np.int8(_NOT_A_TOKEN))  # where larger ids are clipped to
    kinds.flags.writeable = False
    return kinds


def _text_lengths(table: TokenTable, kinds: np.ndarray) -> np.ndarray:
    """The byte length of every id as ordinary text: zero for the structural ids."""
    lengths = np.where(kinds[:-1] == _STRUCTURAL, 0, table.length_array)
    lengths.flags.writeable = False
    return lengths


def _text_stops(table: TokenTable, lengths: np.ndarray) -> np.ndarray:
    """Where the ordinary text of every id ends in the table's flat bytes (for the
    structural ids, which have none: where their bytes start)."""
    stops: np.ndarray = table.start_array + lengths
    stops.flags.writeable = False
    return stops


def _packed(ids: list[int]) -> bytearray:
    """``ids`` as native int64s, packed ``_JOIN_MAX`` at a time: struct converts a list
    about twice as fast as ``array.array`` (the chunks bound its argument tuples)."""
    n = len(ids)
    data = bytearray(8 * n)
    for k in range(0, n, _JOIN_MAX):
        chunk = ids[k : k + _JOIN_MAX]
        struct.pack_into(f"{len(chunk)}q", data, 8 * k, *chunk)
    return data


def without_prefix(text: str, prefix: str) -> str:
    """``text`` without its longest beginning that begins ``prefix`` (what the assembler
    strips of a separator the renderer writes)."""
    if text.startswith(prefix):
        return text[len(prefix) :]
    n = 0
    limit = min(len(prefix), len(text))
    while n < limit and text[n] == prefix[n]:
        n += 1
    return text[n:]


_CONTROL_PATTERNS: weakref.WeakKeyDictionary[TokenTable, re.Pattern[str] | None] = (
    weakref.WeakKeyDictionary()
)


def sampled_text_ids(table: TokenTable, text: str) -> list[int]:
    """Ids for text a model sampled (e.g. a completion an API returned as text): every
    control-token spelling is that control token, the longest spelling winning, and the
    text between them is ordinary text. The opposite of rendering message text, where
    typed control spellings stay text."""
    if table not in _CONTROL_PATTERNS:
        spellings = sorted(table.control_tokens, key=len, reverse=True)
        _CONTROL_PATTERNS[table] = (
            re.compile("|".join(map(re.escape, spellings))) if spellings else None
        )
    pattern = _CONTROL_PATTERNS[table]
    if pattern is None:
        return table.encode(text)
    ids: list[int] = []
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            ids += table.encode(text[at : match.start()])
        ids.append(table.control_tokens[match.group()])
        at = match.end()
    if at < len(text):
        ids += table.encode(text[at:])
    return ids


_JSON = json.JSONDecoder()
_WS = " \t\n\r"


def _skip_ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


def json_object_members(text: str) -> list[tuple[str, Any, str]]:
    """Parse a JSON object, returning ``(key, value, raw value text)`` per member.

    The raw text is the value exactly as written, so tool-call arguments can be kept as
    sampled instead of re-serialised. Raises ``ValueError`` on anything but one object.
    """
    i = _skip_ws(text, 0)
    if i >= len(text) or text[i] != "{":
        raise ValueError("expected a JSON object")
    i = _skip_ws(text, i + 1)
    members: list[tuple[str, Any, str]] = []
    if i < len(text) and text[i] == "}":
        i += 1
    else:
        while True:
            if i >= len(text) or text[i] != '"':
                raise ValueError(f"expected a string key at character {i}")
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            i = _skip_ws(text, i)
            if i >= len(text) or text[i] != ":":
                raise ValueError(f"expected ':' at character {i}")
            i = _skip_ws(text, i + 1)
            value, j = _JSON.raw_decode(text, i)
            members.append((key, value, text[i:j]))
            i = _skip_ws(text, j)
            if i < len(text) and text[i] == ",":
                i = _skip_ws(text, i + 1)
                continue
            if i < len(text) and text[i] == "}":
                i += 1
                break
            raise ValueError(f"expected ',' or '}}' at character {i}")
    if _skip_ws(text, i) != len(text):
        raise ValueError(f"extra data after the JSON object at character {i}")
    return members
