"""Reading token ids into a format's hooks: the lower half of the parsing engine.

:class:`IdReader` turns ids into calls of a format's hooks, in order: runs of ordinary
text (decoded from the table's bytes, a UTF-8 character split across ids held until it is
whole) go to :meth:`~IdReader._on_text` (or :meth:`~IdReader._on_bytes`), structural ids
to :meth:`~IdReader._on_token`, a stop id to :meth:`~IdReader._on_end`. Ids come three
ways, by what they are: one id, a list of a few ids (read id by id), or an array (its
structural ids found at once with NumPy, its ordinary text joined once a block at a time
and handed on run by run). Once the message has ended, the ids that follow are kept as
trailing ids. :class:`~renderers.core.engine.StreamParser` builds on it.
"""

from __future__ import annotations

import codecs
from bisect import bisect_left

import numpy as np

from renderers.core.result import TrailingPiece
from renderers.core.scanning import StructuralIds, TokenByteEnds, chunk_bytes, scan_ids
from renderers.core.tokens import TokenTable, int_ids

__all__ = ["IdReader"]

SMALL_CHUNK = 48  # lists up to this many ids are read id by id (NumPy has a fixed cost)
_DECODE_CHUNK = 1 << 16  # bytes of text decoded and handed on at once
_BLOCK = 1 << 14  # an array's ids read at once (their text joined): bounds its memory


class IdReader:
    """Reads token ids into the hooks a format implements (see the module docstring).

    ``self._pos`` counts the ids read so far (in :meth:`_on_text`: the end of the run
    being handed on); ``self._done`` says the message ended (what follows is trailing).
    """

    # Slots: a format's parser adds its own state to these, and an instance dict of more
    # than 30 keys stops sharing keys with its class's other instances (slower to build
    # and to read); the engine's fields in slots keep a format's dict small.
    __slots__ = (
        "_byte_ends",
        "_decoder",
        "_done",
        "_eos_ids",
        "_id_bytes",
        "_id_str",
        "_ids",
        "_one_shot",
        "_pending",
        "_pos",
        "_shift",
        "_stop_id",
        "_stop_ids",
        "_structural",
        "_table",
        "_trailing",
        "_trailing_pieces",
        "_valid",
        "_vocab_size",
    )

    def __init__(self, table: TokenTable, ids: StructuralIds) -> None:
        self._table = table
        self._id_bytes = table.id_to_bytes
        self._id_str = table.id_to_str
        self._valid = table.valid
        self._vocab_size = table.vocab_size
        self._ids = ids
        self._stop_ids = ids.stop
        self._eos_ids = ids.eos
        self._structural = ids.structural
        self._decoder: codecs.IncrementalDecoder | None = None
        self._pending = False  # the decoder holds part of a UTF-8 character
        self._pos = 0
        self._shift = 0  # ids read before the completion (a prefill): positions skip them
        self._done = False  # the message ended: what follows is trailing
        self._stop_id: int | None = None
        self._trailing: list[int] = []
        # Long runs of ids after the end, kept as they came, in order, before _trailing.
        self._trailing_pieces: list[TrailingPiece] = []
        self._one_shot = False  # parse(): the ids are not fed again nor changed meanwhile
        self._byte_ends: TokenByteEnds | None = None  # (made by a format that reads bytes)

    # -- hooks for formats ----------------------------------------------------------------

    def _on_text(self, text: str) -> None:
        """A run of ordinary text, decoded from the ids read up to ``self._pos``."""
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

    def _text_ok(self, data: bytes) -> bool:
        """Formats with ``byte_offsets``: whether ``data`` (one token's complete UTF-8 text)
        may go straight to :meth:`_on_text` because it cannot hold or continue a marker. A
        format answering yes accounts for the bytes in its scanner
        (:meth:`MarkerScanner.pass_through`)."""
        return False

    # -- decoding -----------------------------------------------------------------------

    def _decode(self, data: bytes) -> None:
        """Hand ``data`` to :meth:`_on_text` as text; a character split across calls is
        held until its last byte comes (:attr:`_pending`)."""
        if len(data) > _DECODE_CHUNK:
            # Long text goes in pieces: decoding it at once widens the text's buffer as
            # wider characters appear (copying it), and a format stripping a separator
            # from it would copy it whole again; the part joins the pieces once.
            for k in range(0, len(data), _DECODE_CHUNK):
                self._decode_piece(data[k : k + _DECODE_CHUNK])
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
        self._decode_piece(data)

    def _decode_piece(self, data: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        self._pending = bool(decoder.getstate()[0])
        if text:
            self._on_text(text)

    def _flush_pending(self) -> None:
        """A character left incomplete (a structural id or the end came) is replaced."""
        if self._pending and self._decoder is not None:
            text = self._decoder.decode(b"", final=True)
            self._pending = False
            if text:
                self._on_text(text)

    # -- reading ids ----------------------------------------------------------------------

    @property
    def _offset(self) -> int:
        """Where the next id is in the caller's ids (what an error names)."""
        return self._pos - self._shift

    def _feed_id(self, t: int) -> None:
        """One id (an int in the vocabulary's range, the message not ended)."""
        if t in self._structural:
            self._structural_token(t)
            return
        text = None if self._pending else self._id_str[t]
        if text is not None:  # complete UTF-8 text: no decoding
            byte_ends = self._byte_ends
            if byte_ends is not None:
                if not self._text_ok(self._id_bytes[t]):
                    text = None
                else:
                    byte_ends.tail.append(t)
            if text is not None:
                self._pos += 1
                if text:
                    self._on_text(text)
                return
        if not self._valid[t]:
            self._table.check_ids([t], self._offset)  # raises, naming it
        self._read_run([t])

    def _feed_list(self, ids: list[int]) -> None:
        """A list of ids: a few are read id by id, runs of ordinary ids between structural
        ones decoded per run; many are read as an array."""
        ended = self._done  # (a local: the format may end the message below)
        if ended:
            self._table.check_ids(ids, self._offset)
            self._trailing += int_ids(ids)  # (the caller's own items: any integers)
            self._pos += len(ids)
            return
        if len(ids) > SMALL_CHUNK:
            self._feed_array(*scan_ids(self._ids, self._table, ids, None, self._offset))
            return
        if not all(type(t) is int for t in ids):
            self._table.check_ids(ids, self._offset)  # names the first non-integer
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
                        self._table.check_ids([t], self._offset + k - start)
                    k += 1
                    continue
            if k > start:
                self._read_run(ids[start:k])
            if k == end:
                return
            self._structural_token(ids[k])
            k += 1
            start = k
            if self._done:
                rest = ids[k:]
                self._table.check_ids(rest, self._offset)
                self._trailing.extend(rest)
                self._pos += len(rest)
                return

    def _read_run(self, run: list[int]) -> None:
        """Decode a run of ordinary ids (already checked) and hand it to the format."""
        self._pos += len(run)
        data = b"".join(map(self._id_bytes.__getitem__, run))
        byte_ends = self._byte_ends
        if byte_ends is not None:
            if byte_ends.covered:
                byte_ends.consumed(len(data))
            else:
                byte_ends.tail += run
            self._on_bytes(data)
        else:
            self._decode(data)

    def _feed_array(
        self, arr: np.ndarray, cuts: list[int], tokens: list[int], borrowed: bool
    ) -> None:
        """An array of checked ids with its structural ids (``tokens``, at ``cuts``), read
        a block at a time: the block's ordinary text joined once (structural ids count no
        bytes) and each run between structural ids handed on as a slice of it. A
        ``borrowed`` array is the caller's (a block kept for byte offsets is copied)."""
        borrowed = borrowed and not self._one_shot
        n = len(arr)
        if n <= _BLOCK:
            self._read_block(arr, cuts, tokens, borrowed)
            return
        first = 0
        for start in range(0, n, _BLOCK):
            if self._done:  # the rest is trailing
                self._keep_trailing(arr[start:])
                self._pos += n - start
                return
            stop = min(n, start + _BLOCK)
            last = bisect_left(cuts, stop, first)
            block_cuts = [c - start for c in cuts[first:last]]
            self._read_block(arr[start:stop], block_cuts, tokens[first:last], borrowed)
            first = last

    def _read_block(
        self, arr: np.ndarray, cuts: list[int], tokens: list[int], borrowed: bool
    ) -> None:
        data, ends = chunk_bytes(self._ids, self._table, arr)
        byte_ends = self._byte_ends
        if byte_ends is not None:
            byte_ends.cover(arr, self._pos, ends)
        bounds: list[int] = ends[cuts].tolist() if cuts else []
        bounds.append(len(data))
        text = None  # the block's text when each run's is a slice of it
        if byte_ends is None and not self._pending and len(data) <= _DECODE_CHUNK:
            text = data.decode("ascii") if data.isascii() else None
        base = self._pos
        n = len(arr)
        prev = at = 0
        cuts.append(n)
        for j, cut in enumerate(cuts):
            if self._done:  # the rest of the block is trailing
                self._keep_trailing(arr[prev:])
                self._pos = base + n
                break
            stop = bounds[j]
            if cut > prev:
                self._pos = base + cut
                if text is not None:
                    if stop > at:
                        self._on_text(text[at:stop])
                elif byte_ends is not None:
                    byte_ends.consumed(stop - at)
                    self._on_bytes(data[at:stop])
                else:
                    self._decode(data[at:stop])
            at = stop
            if cut < n:
                self._pos = base + cut
                self._structural_token(tokens[j])
            prev = cut + 1
        if byte_ends is not None:
            byte_ends.uncover(self._pos, borrowed)

    def _keep_trailing(self, ids: np.ndarray) -> None:
        """Ids after the end of the message, in order: a long run is kept as an array (a
        copy), not as a Python int per id, until ``trailing_ids`` is read."""
        if len(ids) <= SMALL_CHUNK:
            self._trailing += ids.tolist()
            return
        if self._trailing:
            self._trailing_pieces.append(self._trailing)
            self._trailing = []
        self._trailing_pieces.append(ids.copy())

    def _structural_token(self, t: int) -> None:
        pos = self._pos
        if self._pending:
            self._flush_pending()
        self._pos = pos + 1
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
