"""The per-tokenizer table renderers use (loading by model id is :mod:`renderers.core.loading`).

A :class:`TokenTable` is built once per tokenizer (cached) and holds what rendering and
parsing need: the bytes of every token id (decoding by joining bytes is ~3x faster than
the tokenizer's own decode), the control tokens by name, and an encoder for ordinary
text that never produces a control token, even when the text spells one.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from renderers.core.fast_encoding import fast_encoder
from renderers.core.vocabulary import class_spec, read_vocabulary

__all__ = ["TokenTable", "token_table"]


class TokenTable:
    """What renderers need to know about one tokenizer, computed once.

    - ``id_to_bytes[i]``: the bytes of token ``i`` (control tokens: their UTF-8 text);
    - ``id_to_str[i]``: the text of token ``i`` when its bytes are complete UTF-8, else
      ``None`` (lets streaming skip the incremental decoder for most tokens);
    - ``control_tokens``: every added token (special or not) by its text;
    - :meth:`encode`: ordinary text to ids without ever matching a control token.
    """

    def __init__(self, tokenizer: Any) -> None:
        vocabulary = read_vocabulary(tokenizer)
        table = vocabulary.pieces
        control = vocabulary.control
        size = len(table)
        self.vocab_size = size
        self.id_to_bytes: list[bytes] = [b if b is not None else b"" for b in table]
        self.valid = [b is not None for b in table]
        # The same as NumPy arrays, for validating and measuring whole chunks at once.
        self.valid_array = np.fromiter(self.valid, dtype=bool, count=size)
        self.length_array = np.fromiter(map(len, self.id_to_bytes), dtype=np.int64, count=size)
        # Every token's bytes end to end and where each starts: a long run of ids is joined
        # by one NumPy gather (about twice as fast as joining a Python list).
        self._flat_bytes = np.frombuffer(b"".join(self.id_to_bytes), dtype=np.uint8)
        self._starts = np.cumsum(self.length_array) - self.length_array
        self.control_tokens: dict[str, int] = control
        self.control_ids = frozenset(control.values())
        self._id_to_control = {i: s for s, i in control.items()}
        self._vocabulary = vocabulary
        self._encode_fn: Callable[[str], list[int]] | None = None
        self._fast = False
        self._cache: dict[str, list[int]] = {}

    @cached_property
    def id_to_str(self) -> list[str | None]:
        """The text of each token whose bytes are complete UTF-8, else ``None`` (built on
        first use: rendering never needs it)."""
        return _complete_texts(self.id_to_bytes, self.valid)

    @property
    def _encoder(self) -> Any:
        """A Hugging Face tokenizer's copy without added tokens (the fast-encoding proof
        batch-encodes with it); ``None`` for other tokenizers."""
        plain = self._vocabulary.plain_encoder
        return plain() if plain is not None else None

    def _reference_encode(self, text: str) -> list[int]:
        """The tokenizer's own ordinary-text encoding of ``text``."""
        return self._vocabulary.encode(text)

    @property
    def fast_encoding(self) -> bool:
        """Whether ordinary text is encoded with tiktoken (a proven-equal fast path)."""
        self._encode_ordinary  # noqa: B018  (builds the encoder)
        return self._fast

    @property
    def _encode_ordinary(self) -> Callable[[str], list[int]]:
        encode = self._encode_fn
        if encode is None:
            fast = fast_encoder(self, self._vocabulary.probe or self._reference_encode)
            self._fast = fast is not None
            encode = self._encode_fn = fast or self._reference_encode
        return encode

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_encode_fn"] = None
        state["_cache"] = {}
        return state

    def control_id(self, text: str) -> int:
        """The id of the control token spelled ``text`` (``KeyError`` if there is none)."""
        try:
            return self.control_tokens[text]
        except KeyError:
            raise KeyError(f"the tokenizer has no control token {text!r}") from None

    def control_text(self, token_id: int) -> str | None:
        """The text of control token ``token_id``, or ``None`` for an ordinary token."""
        return self._id_to_control.get(token_id)

    def encode(self, text: str) -> list[int]:
        """Encode ``text`` as ordinary text (control-token spellings stay plain text)."""
        if len(text) <= 256:
            cached = self._cache.get(text)
            if cached is None:
                cached = self._encode_ordinary(text)
                if len(self._cache) >= 65536:
                    self._cache.clear()
                self._cache[text] = cached
            return list(cached)
        return self._encode_ordinary(text)

    def clear_cache(self) -> None:
        """Forget cached encodings of short texts (benchmarks measure cold rendering)."""
        self._cache.clear()

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Like :meth:`encode`, also returning each token's character span in ``text``."""
        return self._vocabulary.encode_with_offsets(text)

    def check_ids(self, ids: Sequence[int], offset: int = 0) -> None:
        """Raise ``ValueError`` naming the first position holding an invalid token id
        (not an integer, negative, or not in the vocabulary). Python ints (a ``bool`` is
        one) and NumPy integers are integers."""
        valid = self.valid
        n = self.vocab_size
        for pos, t in enumerate(ids):
            if not isinstance(t, (int, np.integer)):
                raise ValueError(f"token_ids[{offset + pos}] = {t!r} is not an integer token id")
            if not (0 <= t < n and valid[t]):
                raise ValueError(
                    f"token_ids[{offset + pos}] = {t} is not a token id of this tokenizer "
                    f"(ids are 0..{n - 1})"
                )

    def join_bytes(self, ids: np.ndarray) -> bytes:
        """The bytes of ``ids`` (an integer array of valid ids) end to end."""
        pieces = []
        for k in range(0, len(ids), _GATHER_CHUNK):  # bounds the index arrays' memory
            chunk = ids[k : k + _GATHER_CHUNK]
            lengths = self.length_array[chunk]
            ends = np.cumsum(lengths)
            index = np.repeat(self._starts[chunk] - (ends - lengths), lengths)
            index += np.arange(len(index))
            pieces.append(self._flat_bytes[index].tobytes())
        return b"".join(pieces)

    def decode(self, ids: Sequence[int]) -> str:
        """Decode ids to text (control tokens as their text, bad UTF-8 replaced)."""
        self.check_ids(ids)
        return b"".join(map(self.id_to_bytes.__getitem__, ids)).decode("utf-8", "replace")


_GATHER_CHUNK = 1 << 15


def _complete_utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _complete_texts(pieces: list[bytes], valid: list[bool]) -> list[str | None]:
    """``_complete_utf8`` of every valid piece (``None`` for the others), decoding all of
    them in one pass: joined by NUL bytes (which end any unfinished UTF-8 sequence), each
    piece decodes as it would alone, and one that is not complete UTF-8 is the one whose
    text holds a surrogate escape. Pieces holding a NUL byte are decoded one by one."""
    with_nul = [i for i, b in enumerate(pieces) if b"\x00" in b]
    joined = [b"" if b"\x00" in b else b for b in pieces] if with_nul else pieces
    whole = b"\x00".join(joined).decode("utf-8", "surrogateescape")
    decoded = whole.split("\x00")
    ends = np.cumsum(np.fromiter(map(len, decoded), dtype=np.int64, count=len(decoded)) + 1)
    bad = [m.start() for m in _SURROGATE.finditer(whole)]
    texts: list[str | None] = list(decoded)
    for i in np.unique(np.searchsorted(ends, bad, side="right")).tolist():
        texts[i] = None
    for i in with_nul:
        texts[i] = _complete_utf8(pieces[i])
    for i, ok in enumerate(valid):
        if not ok:
            texts[i] = None
    return texts


_TABLES: weakref.WeakKeyDictionary[Any, TokenTable] = weakref.WeakKeyDictionary()
# Tokenizers that cannot be weakly referenced (tml-renderers'): one table per tokenizer
# class when the class builds the tokenizer without arguments, else per object.
_TABLES_BY_KEY: dict[Any, tuple[Any, TokenTable]] = {}
_TABLES_LOCK = threading.Lock()


def token_table(tokenizer: Any) -> TokenTable:
    """The cached :class:`TokenTable` of ``tokenizer`` (built on first use)."""
    try:
        weakref.ref(tokenizer)
    except TypeError:
        return _strongly_cached_table(tokenizer)
    with _TABLES_LOCK:
        table = _TABLES.get(tokenizer)
    if table is None:
        table = TokenTable(tokenizer)
        with _TABLES_LOCK:
            table = _TABLES.setdefault(tokenizer, table)
    return table


def _strongly_cached_table(tokenizer: Any) -> TokenTable:
    key = class_spec(tokenizer) or id(tokenizer)
    with _TABLES_LOCK:
        entry = _TABLES_BY_KEY.get(key)
    if entry is None:
        entry = (tokenizer, TokenTable(tokenizer))  # keeps an id-keyed tokenizer alive
        with _TABLES_LOCK:
            entry = _TABLES_BY_KEY.setdefault(key, entry)
    return entry[1]
