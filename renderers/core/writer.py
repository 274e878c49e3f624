"""The token writer: a rendering as control tokens and text, encoded like a template.

A renderer writes a conversation as a sequence of pieces: control tokens (known ids) and
text. Adjacent text pieces are joined before encoding, exactly as a chat template's output
is tokenized between control tokens, so the ids equal the template's. Message text is
always encoded as ordinary text; only the template's own constant text may spell control
tokens. Each piece remembers its message and whether the model samples it, which is what
loss weights come from.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Collection, Sequence
from typing import NamedTuple

import numpy as np

from renderers.core.tokens import TokenTable

__all__ = ["NO_MESSAGE", "IdsAndWeights", "TokenWriter"]


class IdsAndWeights(NamedTuple):
    """Token ids and per-token loss weights (1-D NumPy arrays of equal length), and on
    request the index of the message each token belongs to (-1: template text outside any
    message)."""

    tokens: np.ndarray
    weights: np.ndarray
    messages: np.ndarray | None = None


NO_MESSAGE = -1


class TokenWriter:
    """Collects a rendering as control tokens and text, then encodes it.

    Each piece records the index of the message it belongs to and whether the model
    samples it (``sampled``: an assistant body and the stop token that ends it), which is
    what loss weights are computed from.
    """

    __slots__ = ("_items", "_msg", "_sampled", "_table", "trained")

    def __init__(self, table: TokenTable, trained: Collection[int] = ()) -> None:
        self._table = table
        self.trained = frozenset(trained)
        """The messages a supervised example trains (none for a generation prompt): a
        renderer refuses, or drops on request, what it cannot write for them."""
        # A control token id, text to encode, or a run of already-encoded ids.
        self._items: list[int | str | tuple[int, ...]] = []
        self._msg: list[int] = []
        self._sampled: list[bool] = []

    def trains(self, msg: int) -> bool:
        """Whether message ``msg`` is trained (never in a generation prompt)."""
        return msg in self.trained

    def control(self, token_id: int, msg: int = NO_MESSAGE, sampled: bool = False) -> None:
        """A control token (by id)."""
        self._items.append(token_id)
        self._msg.append(msg)
        self._sampled.append(sampled)

    def text(self, text: str, msg: int = NO_MESSAGE, sampled: bool = False) -> None:
        """Ordinary text: never becomes a control token, whatever it spells."""
        if text:
            self._items.append(text)
            self._msg.append(msg)
            self._sampled.append(sampled)

    def encoded(self, ids: Sequence[int], msg: int = NO_MESSAGE, sampled: bool = False) -> None:
        """Text already encoded (e.g. a cached tool declaration), possibly with the control
        tokens around it (a cached Harmony header); only valid where the text stands between
        control tokens, so it cannot merge with neighbouring text. One weight for all."""
        if ids:
            self._items.append(tuple(ids))
            self._msg.append(msg)
            self._sampled.append(sampled)

    def template(self, text: str, msg: int = NO_MESSAGE, sampled: bool = False) -> None:
        """Constant text of the template, in which control-token spellings are control
        tokens (as the template's tokenizer call would treat them)."""
        for piece in _split_controls(self._table, text):
            if isinstance(piece, int):
                self.control(piece, msg, sampled)
            else:
                self.text(piece, msg, sampled)

    def ids(self) -> list[int]:
        """The token ids of everything written."""
        out: list[int] = []
        buf: list[str] = []
        encode = self._table.encode
        for item in self._items:
            if type(item) is str:
                buf.append(item)
                continue
            if buf:
                out += encode(buf[0] if len(buf) == 1 else "".join(buf))
                buf.clear()
            if type(item) is int:
                out.append(item)
            else:
                out += item  # type: ignore[arg-type]
        if buf:
            out += encode("".join(buf))
        return out

    def ids_after(self, msg: int) -> list[int]:
        """The ids of everything written after message ``msg``'s last control token (the
        token that ends its turn): template text, later messages, generation prompt."""
        last = max(
            (k for k, m in enumerate(self._msg) if m == msg and type(self._items[k]) is int),
            default=None,
        )
        if last is None:
            raise ValueError(f"message {msg} has no control token to continue after")
        tail = TokenWriter(self._table)
        tail._items = self._items[last + 1 :]
        tail._msg = self._msg[last + 1 :]
        tail._sampled = self._sampled[last + 1 :]
        return tail.ids()

    def piece_weights(
        self,
        message_weights: Sequence[float],
        whole: Sequence[bool],
        *,
        outside: float = 0.0,
        end_token: bool = True,
    ) -> list[float]:
        """The weight of every piece written: ``message_weights[m]`` on the pieces of message
        ``m`` the model samples, or on all of its pieces where ``whole[m]`` is set;
        ``outside`` on template text outside any message. ``end_token=False`` leaves out
        the token that ends each sampled message (its last sampled piece, when that is a
        control token)."""
        weights = [
            outside if m < 0 else message_weights[m] if s or whole[m] else 0.0
            for m, s in zip(self._msg, self._sampled, strict=True)
        ]
        if not end_token:
            last: dict[int, int] = {}
            for k, (m, s) in enumerate(zip(self._msg, self._sampled, strict=True)):
                if s and m >= 0 and not whole[m]:
                    last[m] = k
            for k in last.values():
                if type(self._items[k]) is int:
                    weights[k] = 0.0
        return weights

    def ids_and_weights(
        self,
        piece_weights: Sequence[float],
        *,
        attribution: bool = False,
        loss_weights: bool = False,
    ) -> IdsAndWeights:
        """Ids plus the weight of each token (the weight of the piece it comes from; a token
        that merges text of several pieces gets the largest), and with ``attribution`` the
        message index of each token (likewise the largest of its pieces). With
        ``loss_weights`` (a supervised example's weights), a token merging weighted and
        unweighted text is a ``ValueError`` naming the trained message."""
        items = self._items
        pieces_msg = self._msg
        encode = self._table.encode
        ids: list[int] = []
        counts: list[int] = []  # run lengths of equal weight and message, in tokens
        weights: list[float] = []
        messages: list[int] = []
        k = 0
        n = len(items)
        while k < n:
            item = items[k]
            if type(item) is not str:
                if type(item) is int:
                    ids.append(item)
                    counts.append(1)
                else:
                    ids += item  # type: ignore[arg-type]
                    counts.append(len(item))  # type: ignore[arg-type]
                weights.append(piece_weights[k])
                messages.append(pieces_msg[k])
                k += 1
                continue
            j = k + 1
            while j < n and type(items[j]) is str:
                j += 1
            first = piece_weights[k]
            msg = pieces_msg[k]
            # One text between control tokens (the common case), or texts of one weight
            # (and message): encoded as one.
            if j == k + 1 or (
                all(piece_weights[i] == first for i in range(k + 1, j))
                and (not attribution or all(pieces_msg[i] == msg for i in range(k + 1, j)))
            ):
                segment = encode(item if j == k + 1 else "".join(items[k:j]))  # type: ignore[arg-type]
                ids += segment
                counts.append(len(segment))
                weights.append(first)
                messages.append(msg)
                k = j
                continue
            texts: list[str] = items[k:j]  # type: ignore[assignment]
            segment_weights = piece_weights[k:j]
            segment_msgs = pieces_msg[k:j]
            if not _walk_pieces(
                self._table,
                texts,
                segment_weights,
                segment_msgs,
                loss_weights,
                ids,
                counts,
                weights,
                messages,
            ):
                segment, first_piece, last_piece = _token_pieces(self._table, texts)
                if loss_weights:
                    _check_no_mixed_token(
                        self._table, segment, segment_weights, first_piece, last_piece, segment_msgs
                    )
                ids += segment
                token_weights = _span_max(np.asarray(segment_weights), first_piece, last_piece, 0.0)
                token_msgs = _span_max(
                    np.asarray(segment_msgs), first_piece, last_piece, NO_MESSAGE
                )
                # Runs of equal weight and message, as for whole pieces.
                change = np.flatnonzero((np.diff(token_weights) != 0) | (np.diff(token_msgs) != 0))
                starts = np.r_[0, change + 1]
                counts += np.diff(np.r_[starts, len(segment)]).tolist()
                weights += token_weights[starts].tolist()
                messages += token_msgs[starts].tolist()
            k = j
        return IdsAndWeights(
            _int64_array(ids),
            np.repeat(np.asarray(weights, dtype=np.float32), counts),
            np.repeat(np.asarray(messages, dtype=np.int32), counts) if attribution else None,
        )


_CONTROL_SPLITTERS: dict[int, re.Pattern[str]] = {}
_SPLIT_CACHE: dict[tuple[int, str], tuple[int | str, ...]] = {}


def _split_controls(table: TokenTable, text: str) -> tuple[int | str, ...]:
    key = (id(table), text)
    cached = _SPLIT_CACHE.get(key)
    if cached is not None:
        return cached
    pattern = _CONTROL_SPLITTERS.get(id(table))
    if pattern is None:
        names = sorted(table.control_tokens, key=len, reverse=True)
        pattern = re.compile("(" + "|".join(map(re.escape, names)) + ")")
        _CONTROL_SPLITTERS[id(table)] = pattern
    pieces: list[int | str] = []
    for k, piece in enumerate(pattern.split(text)):
        if k % 2:
            pieces.append(table.control_tokens[piece])
        elif piece:
            pieces.append(piece)
    result = tuple(pieces)
    if len(_SPLIT_CACHE) > 4096:
        _SPLIT_CACHE.clear()
    _SPLIT_CACHE[key] = result
    return result


def _int64_array(ids: list[int]) -> np.ndarray:
    """``ids`` as a new (writable) int64 array: packed with ``struct`` where the list is
    short enough to pass as arguments, which is about twice as fast as ``np.asarray``."""
    if len(ids) > _PACK_MAX:
        return np.fromiter(ids, dtype=np.int64, count=len(ids))
    return np.frombuffer(bytearray(struct.pack(f"{len(ids)}q", *ids)), dtype=np.int64)


_PACK_MAX = 1 << 14


def _walk_pieces(
    table: TokenTable,
    texts: list[str],
    piece_weights: Sequence[float],
    piece_msgs: Sequence[int],
    loss_weights: bool,
    ids: list[int],
    counts: list[int],
    weights: list[float],
    messages: list[int],
) -> bool:
    """Encode adjacent text pieces of different weights and append their ids and runs,
    walking tokens only up to the last piece boundary (the pieces before a trained body
    are short: a role header); every later token is the last piece's. Returns ``False``,
    appending nothing, when the tokens' bytes do not spell the text up to there (the
    tokenizer normalized it): :func:`_token_pieces` maps by character offsets instead."""
    segment = table.encode("".join(texts))
    head = [t.encode("utf-8") for t in texts[:-1]]
    ends: list[int] = []
    total = 0
    for data in head:
        total += len(data)
        ends.append(total)
    last = len(ends)  # the index of the last piece
    boundary = total
    id_to_bytes = table.id_to_bytes
    walked: list[bytes] = []
    runs: list[tuple[int, float, int]] = []  # (tokens, weight, message) of walked tokens
    pos = 0
    p = 0
    k = 0
    n = len(segment)
    while k < n and pos < boundary:
        data = id_to_bytes[segment[k]]
        walked.append(data)
        end = pos + len(data)
        while p < last and ends[p] <= pos:
            p += 1
        q = p
        while q < last and ends[q] < end:
            q += 1
        if p == q:
            w, m = piece_weights[p], piece_msgs[p]
        else:
            spanned = piece_weights[p : q + 1]
            w, m = max(spanned), max(piece_msgs[p : q + 1])
            if loss_weights and min(spanned) == 0 < w:
                return False  # the offset path raises, naming the message
        if runs and runs[-1][1] == w and runs[-1][2] == m:
            runs[-1] = (runs[-1][0] + 1, w, m)
        else:
            runs.append((1, w, m))
        pos = end
        k += 1
    # The walked tokens must spell the text up to there: the head pieces and the start
    # of the last one (its first ``pos - boundary`` characters hold at least that many bytes).
    past = pos - boundary
    if b"".join(walked) != b"".join(head) + texts[-1][:past].encode("utf-8")[:past]:
        return False
    if k < n:
        runs.append((n - k, piece_weights[last], piece_msgs[last]))
    ids += segment
    for count, w, m in runs:
        counts.append(count)
        weights.append(w)
        messages.append(m)
    return True


def _token_pieces(table: TokenTable, texts: list[str]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The ids of adjacent text pieces (which merge into tokens) and, for each token, the
    first and last piece its bytes come from (-1 for a token of no text)."""
    text = "".join(texts)
    ids = table.encode(text)
    data = text.encode("utf-8")
    if b"".join(map(table.id_to_bytes.__getitem__, ids)) != data:
        # The tokenizer normalized the text: map tokens to pieces by their character spans.
        ids, offsets = table.encode_with_offsets(text)
        bounds = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        piece_ends = np.cumsum([len(t) for t in texts])
    else:
        lengths = table.length_array[np.asarray(ids, dtype=np.int64)]
        ends = np.cumsum(lengths)
        bounds = np.stack([ends - lengths, ends], 1)
        piece_ends = np.cumsum([len(t.encode("utf-8")) for t in texts])
    empty = bounds[:, 1] <= bounds[:, 0]
    first = np.searchsorted(piece_ends, bounds[:, 0], side="right")
    last = np.searchsorted(piece_ends, bounds[:, 1] - 1, side="right")
    first[empty] = -1
    last[empty] = -1
    return ids, first, last


def _check_no_mixed_token(
    table: TokenTable,
    ids: list[int],
    piece_weights: Sequence[float],
    first: np.ndarray,
    last: np.ndarray,
    piece_msgs: Sequence[int],
) -> None:
    """A token whose text comes partly from trained and partly from untrained pieces would
    train the model on text it never samples: a caller error naming the message."""
    for k in np.flatnonzero(last > first):
        spanned = piece_weights[first[k] : last[k] + 1]
        if min(spanned) == 0 < max(spanned):
            start = int(first[k])
            trained = next(piece_msgs[start + j] for j, w in enumerate(spanned) if w > 0)
            text = table.id_to_bytes[ids[k]].decode("utf-8", "replace")
            raise ValueError(
                f"messages[{trained}]: the token {text!r} holds text of this trained turn "
                "and untrained text next to it (the format writes no control token between "
                "them), so it cannot be trained; train another turn or change the text"
            )


def _span_max(values: np.ndarray, first: np.ndarray, last: np.ndarray, empty: float) -> np.ndarray:
    """For each token, the largest of ``values[first:last + 1]`` (``empty`` for a token of
    no text, whose ``first`` is -1)."""
    out: np.ndarray = values[np.maximum(first, 0)]
    for k in np.flatnonzero(last > first):  # tokens across pieces are few
        out[k] = values[first[k] : last[k] + 1].max()
    out[first < 0] = empty
    return out
