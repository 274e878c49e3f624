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
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

import numpy as np

from renderers.core.tokens import TokenTable

__all__ = ["NO_MESSAGE", "IdsAndWeights", "TokenWriter"]


class IdsAndWeights(NamedTuple):
    """Token ids and per-token loss weights (both 1-D NumPy arrays of equal length)."""

    tokens: np.ndarray
    weights: np.ndarray


NO_MESSAGE = -1


class TokenWriter:
    """Collects a rendering as control tokens and text, then encodes it.

    Each piece records the index of the message it belongs to and whether the model
    samples it (``sampled``: an assistant body and the stop token that ends it), which is
    what loss weights are computed from.
    """

    __slots__ = ("_items", "_msg", "_sampled", "_table")

    def __init__(self, table: TokenTable) -> None:
        self._table = table
        # A control token id, text to encode, or a run of already-encoded ids.
        self._items: list[int | str | tuple[int, ...]] = []
        self._msg: list[int] = []
        self._sampled: list[bool] = []

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
        """Text already encoded (e.g. a cached tool declaration); only valid where the text
        stands between control tokens, so it cannot merge with neighbouring text."""
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

    def ids_and_weights(self, trained: Sequence[float]) -> IdsAndWeights:
        """Ids plus weights: ``trained[m]`` (1 for a flag that is set) on sampled pieces of
        message ``m`` (an index of -1 means template text outside any message); a token
        that text of several pieces merged into gets the largest of their weights."""
        items = self._items
        piece_weights = [
            float(trained[m]) if s and m >= 0 else 0.0
            for m, s in zip(self._msg, self._sampled, strict=True)
        ]
        encode = self._table.encode
        ids: list[int] = []
        counts: list[int] = []  # run lengths of equal weight, in tokens
        weights: list[float] = []
        k = 0
        n = len(items)
        while k < n:
            item = items[k]
            if type(item) is int:
                ids.append(item)
                counts.append(1)
                weights.append(piece_weights[k])
                k += 1
                continue
            if type(item) is tuple:
                ids += item
                counts.append(len(item))
                weights.append(piece_weights[k])
                k += 1
                continue
            j = k + 1
            while j < n and type(items[j]) is str:
                j += 1
            texts: list[str] = items[k:j]  # type: ignore[assignment]
            segment_weights = piece_weights[k:j]
            first = segment_weights[0]
            if all(w == first for w in segment_weights):
                segment = encode(texts[0] if len(texts) == 1 else "".join(texts))
                ids += segment
                counts.append(len(segment))
                weights.append(first)
            else:
                segment, token_weights = _mixed_segment(self._table, texts, segment_weights)
                ids += segment
                counts += [1] * len(segment)
                weights += token_weights
            k = j
        return IdsAndWeights(
            np.asarray(ids, dtype=np.int64),
            np.repeat(np.asarray(weights, dtype=np.float32), counts),
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


def _mixed_segment(
    table: TokenTable, texts: list[str], piece_weights: list[float]
) -> tuple[list[int], list[float]]:
    """The ids of text pieces of different weight, which merge into tokens, and each
    token's weight: a token is trained if any of its bytes belongs to a trained piece."""
    text = "".join(texts)
    ids = table.encode(text)
    id_bytes = table.id_to_bytes
    lengths = [len(id_bytes[t]) for t in ids]
    data = text.encode("utf-8")
    if b"".join(map(id_bytes.__getitem__, ids)) != data:
        # The tokenizer normalized the text: weigh tokens by their character spans.
        ids, offsets = table.encode_with_offsets(text)
        char_weight = np.repeat(piece_weights, [len(t) for t in texts])
        return ids, [float(char_weight[a:b].max()) if b > a else 0.0 for a, b in offsets]
    piece_ends = list(accumulate(len(t.encode("utf-8")) for t in texts))
    weights = []
    p = 0
    start = 0
    for n in lengths:
        end = start + n
        while piece_ends[p] <= start:  # the piece holding the token's first byte
            p += 1
        q = p
        weight = piece_weights[p]
        while piece_ends[q] < end:  # and every later piece it reaches into
            q += 1
            weight = max(weight, piece_weights[q])
        weights.append(weight)
        start = end
    return ids, weights
