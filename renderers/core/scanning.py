"""Byte and marker scanning: what an id is, where its bytes fall, and markers spelled by text.

Per tokenizer table and set of structural ids, :func:`structural_ids` builds the lookup
tables the engine reads (is an id structural, its text if it is plain, its byte length);
:func:`scan_ids` checks a chunk of ids and finds its structural ones at once (NumPy), and
:func:`chunk_bytes` joins a chunk's ordinary text. :class:`MarkerScanner` finds markers that
are not single tokens in a stream of bytes, and :class:`TokenByteEnds` maps a byte offset
of the ordinary text back to the token holding it.
"""

from __future__ import annotations

import re
import struct
import weakref
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from renderers.core.tokens import TokenTable

__all__ = [
    "MarkerScanner",
    "StructuralIds",
    "TokenByteEnds",
    "chunk_bytes",
    "sampled_text_ids",
    "scan_ids",
    "structural_ids",
]


class MarkerScanner:
    """Finds markers spelled by ordinary tokens (e.g. ``<think>`` in DeepSeek-V3) in a
    stream of bytes, holding back a tail that could still become a marker.

    Works on UTF-8 bytes so positions map exactly to tokens; a marker never matches
    inside a multi-byte character because UTF-8 is self-synchronising.
    """

    __slots__ = ("_buf", "_ends", "_offset")

    def __init__(self, ends: TokenByteEnds | None = None) -> None:
        self._buf = b""
        self._offset = 0  # absolute byte offset of _buf[0] in the text stream
        # A parser's byte ends, which count every byte of the text stream: the offset
        # comes from them instead (every byte must reach the scanner, pushed or passed
        # through, before the offset is read).
        self._ends = ends

    def pass_through(self, data: bytes, first: bytes = b"<") -> bool:
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


class TokenByteEnds:
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


@dataclass(frozen=True, slots=True)
class StructuralIds:
    """A parser's ids (stop, end-of-sequence, and all it reacts to) and the per-id tables
    built from them, made once per table and set of ids."""

    stop: frozenset[int]
    eos: frozenset[int]
    structural: frozenset[int]
    kinds: np.ndarray
    plain: list[str | None]
    text_len: np.ndarray
    text_stops: np.ndarray


# Per table: the ids a parser was given (as given) -> its StructuralIds. Parsers whose
# ids differ in order or in which are stops but not in their union share the same tables.
_STRUCTURAL_IDS: weakref.WeakKeyDictionary[
    TokenTable, dict[tuple[tuple[int, ...], ...], StructuralIds]
] = weakref.WeakKeyDictionary()


def structural_ids(
    table: TokenTable, structural: tuple[int, ...], stop: tuple[int, ...], eos: tuple[int, ...]
) -> StructuralIds:
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
            found = StructuralIds(
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


def scan_ids(
    tables: StructuralIds,
    table: TokenTable,
    ids: list[int] | None,
    arr: np.ndarray | None,
    offset: int,
) -> tuple[np.ndarray, list[int], list[int], bool]:
    """The ids (a list, or else an array) as an integer array, checked, with the positions
    of the structural ids, those ids, and whether the array is the caller's (``arr``).
    ``ValueError`` names the first id that is no token (positions count from ``offset``)."""
    if arr is None:
        assert ids is not None
        try:  # exactly Python ints (or NumPy integers) fit; a float or str raises
            if len(ids) <= _PACK_MAX:
                arr = np.frombuffer(struct.pack(f"{len(ids)}q", *ids), dtype=np.int64)
            else:
                arr = np.frombuffer(_packed(ids), dtype=np.int64)
        except (OverflowError, TypeError, ValueError, struct.error):
            table.check_ids(ids, offset)
            raise ValueError("token_ids: expected integers") from None
    elif arr.dtype.kind not in "iu":
        table.check_ids(arr.tolist(), offset)
        raise ValueError(f"token_ids: expected integers, got an array of {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"token_ids: expected a 1-D array, got shape {arr.shape}")
    # One lookup checks every id and finds the structural ones: ids beyond the vocabulary
    # are clipped to the table's last entry (not a token). NumPy would read a negative
    # index, or a uint64 one beyond int64, from the end: those are kept apart.
    if arr.dtype.kind == "i":
        kinds = None if arr.min() < 0 else tables.kinds.take(arr, mode="clip")
    elif arr.dtype.itemsize >= 8:  # (a max, not a clipped copy: no 8 bytes per id)
        kinds = None if arr.max() >= table.vocab_size else tables.kinds.take(arr, mode="clip")
    else:
        kinds = tables.kinds.take(arr, mode="clip")
    if kinds is None:
        table.check_ids(arr.tolist() if ids is None else ids, offset)
        raise AssertionError("unreachable: check_ids raises")  # pragma: no cover
    cuts: list[int] = kinds.nonzero()[0].tolist()
    tokens: list[int] = arr[cuts].tolist()
    if not tables.structural.issuperset(tokens):  # ids that are no token
        table.check_ids(arr.tolist() if ids is None else ids, offset)
    return arr, cuts, tokens, ids is None


def chunk_bytes(
    tables: StructuralIds, table: TokenTable, arr: np.ndarray
) -> tuple[bytes, np.ndarray]:
    """The ordinary text of the ids ``arr`` joined (structural ids count no bytes), with
    each id's cumulative byte end."""
    lengths = tables.text_len[arr]
    ends = lengths.cumsum()
    # Byte k of the text is flat[stops[id] - ends[i] + k] for the token i holding it.
    offsets = tables.text_stops[arr] - ends
    data = table.gather_bytes(offsets, int(ends[-1]) if len(arr) else 0, lengths)
    return data, ends


_PACK_MAX = 1 << 14  # ids packed at once (struct's argument tuple)


def _packed(ids: list[int]) -> bytearray:
    """``ids`` as native int64s, packed ``_PACK_MAX`` at a time: struct converts a list
    about twice as fast as ``array.array`` (the chunks bound its argument tuples)."""
    n = len(ids)
    data = bytearray(8 * n)
    for k in range(0, n, _PACK_MAX):
        chunk = ids[k : k + _PACK_MAX]
        struct.pack_into(f"{len(chunk)}q", data, 8 * k, *chunk)
    return data


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
