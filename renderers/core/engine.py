"""The token-level parsing engine: one incremental engine for streaming and one-shot parsing.

A format's parser subclasses :class:`StreamParser` and reacts to two things: runs of
ordinary text (decoded from a per-tokenizer byte table, UTF-8 split across tokens handled)
and structural token ids (single control tokens such as ``<think>``), through the hooks
``_on_text``, ``_on_token`` and ``_on_end`` that :class:`~renderers.core.reading.IdReader`
calls. :class:`StreamParser` adds what a caller and a format see: ``feed`` (with the
streaming hot path, a few ordinary ids written straight into the open part), ``parse``,
``finish``, the :class:`~renderers.core.assembly.PartAssembler` (``self.asm``) and helpers
for formats. A whole completion (:meth:`StreamParser.parse`) is read as one array with
events off: the format's own hooks over whole runs, so one-shot parsing needs no second
copy of a grammar.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from renderers.core.assembly import Event, PartAssembler
from renderers.core.messages import Part
from renderers.core.reading import SMALL_CHUNK, IdReader
from renderers.core.result import ParseIssue, ParseResult, finished_result
from renderers.core.scanning import (
    MarkerScanner,
    StructuralIds,
    TokenByteEnds,
    chunk_bytes,
    scan_ids,
    structural_ids,
)
from renderers.core.tokens import TokenTable, as_token_ids

__all__ = ["BatchRuns", "StreamParser", "WritesThrough"]

_DIRECT_MAX = 16  # feeds of up to this many ids may take the hot path (a server's chunk)
_BATCH_MAX = 1 << 14  # the most ids a format's own one-shot parse (_parse_runs) is given
# Every marker a MarkerScanner finds starts with it (a token's text holds it if and only if
# its bytes do: the text is their complete decoding; a str is searched much faster).
_MARKER_START = "<"


class WritesThrough(NamedTuple):
    """A format's answer to :meth:`StreamParser._writes_through` (unpacks as a pair)."""

    writes: bool
    """An ordinary token's text goes unchanged to ``asm.write`` in the format's state now."""
    gate: MarkerScanner | None = None
    """For ``byte_offsets`` formats: the scanner the token's bytes must pass first."""


_NOT_THROUGH = WritesThrough(False)
# StreamParser's fields, in slots as IdReader's are (see IdReader).
_FIELDS = (
    "_bytes",
    "_direct",
    "_draft_reported",
    "_early",
    "_finished",
    "_gate",
    "_issues",
    "_plain",
    "asm",
)


class StreamParser(IdReader):
    """Base of every format's incremental parser (``feed`` / ``finish``, or ``parse``).

    Subclasses set ``structural`` ids (besides the stop ids), or ``ids`` their tables kept
    per grammar, and implement ``_on_text``, ``_on_token``, ``_on_end`` (see IdReader)."""

    __slots__ = _FIELDS  # (a format's parser adds its own fields in its instance dict)

    role = "assistant"

    def __init__(
        self,
        table: TokenTable,
        *,
        structural: Iterable[int] = (),
        stop_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        events: bool = True,
        byte_offsets: bool = False,
        ids: StructuralIds | None = None,
    ) -> None:
        ids = ids or structural_ids(table, tuple(structural), tuple(stop_ids), tuple(eos_ids))
        super().__init__(table, ids)
        self._bytes = byte_offsets  # byte offsets wanted: made when the first id is read
        self._plain = ids.plain
        self.asm = PartAssembler(events)
        # Whether a feed of a few ordinary ids may write their text to the assembler itself
        # (see _writes_through), and the scanner it must pass first: decided after every
        # other feed, so the first one never takes that path.
        self._direct = False
        self._gate: MarkerScanner | None = None
        self._finished = False
        self._issues: list[ParseIssue] = []
        self._draft_reported = -1  # the think block whose drafted call was reported
        self._early: list[Event] | None = None  # read_before()'s events, for the first feed

    # -- hooks for formats ----------------------------------------------------------------

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        """Whether, in the format's state now, an ordinary token's text goes unchanged to
        ``self.asm.write`` (so :meth:`feed` writes a few ordinary ids' text itself, without
        :meth:`_on_bytes` and :meth:`_on_text`); ``byte_offsets`` formats also name the
        scanner (:meth:`_new_scanner`) whose :meth:`MarkerScanner.pass_through` the bytes
        must pass first. A :class:`WritesThrough`; asked after every other feed."""
        return _NOT_THROUGH

    def _start_byte_offsets(self) -> None:
        """Before the first id is read (a parse of runs reads none): byte offsets, scanners."""
        self._bytes = False
        self._byte_ends = TokenByteEnds(self._ids.text_len)

    def _new_scanner(self) -> MarkerScanner:
        """A scanner of this parser's ordinary text (``byte_offsets``), counting bytes by
        the parser's: every ordinary byte must reach it (pushed or passed through) before
        it is asked for the next marker (made in :meth:`_start_byte_offsets`)."""
        assert self._byte_ends is not None, "parser was created without byte_offsets"
        return MarkerScanner(self._byte_ends)

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

    # -- reading ids ----------------------------------------------------------------------

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
        events = self._feed(ids)
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
                            return self._feed(token_ids)
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
            # The same for a few ids (what a server sends per chunk): their texts joined.
            text = self._plain_text(token_ids)
            if text is not None:
                byte_ends = self._byte_ends
                if byte_ends is not None:
                    gate = self._gate
                    if gate is not None and (gate._buf or _MARKER_START in text):
                        return self._feed(token_ids)
                    byte_ends.tail += token_ids
                self._pos += len(token_ids)
                return self._write_text(text)
        return self._feed(token_ids if type(token_ids) is list else as_token_ids(token_ids))

    def _write_text(self, text: str) -> list[Event]:
        """The hot path's ``text`` into the open part, with the events it makes."""
        asm = self.asm
        if asm.events is None:
            asm.write(text)
            return []
        events = asm.events = []
        asm.write(text)
        return events

    def _plain_text(self, ids: list[int]) -> str | None:
        """The joined text of ``ids`` if each is an ordinary token of complete UTF-8 text."""
        plain = self._plain
        size = self._vocab_size
        texts: list[str] = []
        for t in ids:
            piece = plain[t] if type(t) is int and 0 <= t < size else None
            if piece is None:
                return None
            texts.append(piece)
        return "".join(texts)

    def _feed(self, token_ids: Sequence[int] | np.ndarray) -> list[Event]:
        """:meth:`feed` off its hot path: ``token_ids`` (as :func:`as_token_ids` gives them)
        read as one id, a list or an array; then the format is asked whether the next feed
        may take the hot path."""
        self._direct = False  # until the format says so again (not if reading raises)
        if self._bytes:
            self._start_byte_offsets()
        asm = self.asm
        if asm.events is not None:
            asm.events = []
        if self._finished:
            raise RuntimeError("feed() called after finish()")
        ids = token_ids
        if isinstance(ids, np.ndarray):
            if ids.size > SMALL_CHUNK and not self._done:
                self._feed_array(*scan_ids(self._ids, self._table, None, ids, self._offset))
            else:
                self._feed_list(ids.tolist())
        elif type(ids) is not list:
            self._feed_list(list(ids))
        elif (
            len(ids) == 1
            and not self._done
            and type(ids[0]) is int
            and 0 <= ids[0] < self._vocab_size
        ):
            self._feed_id(ids[0])
        else:
            self._feed_list(ids)
        events = asm.events if asm.events is not None else []
        if self._early is not None:  # the first feed after read_before()
            events = [*self._early, *events]
            self._early = None
        if not (self._pending or self._done or self._finished):
            self._direct, self._gate = self._writes_through()
            # The hot path adds no bytes to a scanner: it must count them by ours.
            assert self._gate is None or self._gate._ends is self._byte_ends
        return events

    # -- results --------------------------------------------------------------------------

    def parse(self, token_ids: Sequence[int] | np.ndarray) -> ParseResult:
        """All the sampled ids at once: :meth:`feed` then :meth:`finish`, the whole
        completion read as one array (or a format's own :meth:`_parse_runs`, which gives
        the same result)."""
        self._one_shot = True
        token_ids = as_token_ids(token_ids)
        if (
            type(self)._parse_runs is not StreamParser._parse_runs
            and self.asm.events is None
            and not self._pos
            and not self._finished
        ):
            runs = _batch_runs(self, token_ids)
            result = None if runs is None else self._parse_runs(runs)
            if result is not None:
                return result
        self._feed(token_ids)
        return self.finish()

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """A format's own one-shot parse of a whole completion, without events: the result
        :meth:`feed` then :meth:`finish` give, or ``None`` to take that path; it returns
        :meth:`_one_shot_result`. Not needed: the default reads the whole completion with
        the format's hooks as fast (kept while formats still define one)."""
        return None

    def _one_shot_result(
        self,
        runs: BatchRuns,
        parts: list[Part | None],
        spans: list[tuple[int, int]],
        stop: int | None,
    ) -> ParseResult:
        """The result of :meth:`_parse_runs`: ``parts`` with their ``spans``, the
        completion ended by structural id ``runs.tokens[stop]`` (a stop or end-of-sequence
        id; the ids after it trail) or cut off (``None``). The parser is finished."""
        if stop is not None:
            self._stop_id = runs.tokens[stop]
            self._keep_trailing(runs.ids[runs.cuts[stop] + 1 :])
        self._done = self._finished = True
        self._pos = runs.count
        self.asm.kind = None
        self.asm.parts = parts
        self.asm.spans = spans
        return self._result()

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
        return finished_result(
            self.role,
            self.asm.parts,
            self.asm.spans,
            self._issues,
            shift=self._shift,
            stop_id=self._stop_id,
            stop_ids=self._stop_ids,
            table=self._table,
            trailing=self._trailing,
            trailing_pieces=self._trailing_pieces,
        )


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


def _batch_runs(parser: StreamParser, token_ids: Sequence[int] | np.ndarray) -> BatchRuns | None:
    """``token_ids`` split at the structural ids for :meth:`StreamParser._parse_runs`, or
    ``None`` for ids the general path takes in other ways (few, very many, not a list or a
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
    if not SMALL_CHUNK < n <= _BATCH_MAX:
        return None
    arr, cuts, tokens, _ = scan_ids(parser._ids, parser._table, ids, arr, 0)
    data, ends = chunk_bytes(parser._ids, parser._table, arr)
    bounds: list[int] = ends[cuts].tolist() if cuts else []
    bounds.append(len(data))
    starts = [0, *bounds[:-1]]
    # Each run decoded on its own, as the engine does (it flushes its decoder at every
    # structural id); an ASCII chunk's runs are slices of its text.
    if data.isascii():
        text = data.decode("ascii")
        texts = [text[a:b] for a, b in zip(starts, bounds, strict=True)]
    else:
        texts = [data[a:b].decode("utf-8", "replace") for a, b in zip(starts, bounds, strict=True)]
    return BatchRuns(texts, tokens, cuts, n, arr, ends)
