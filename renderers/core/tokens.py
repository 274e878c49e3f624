"""The per-tokenizer table renderers use (loading by model id is :mod:`renderers.core.loading`).

A :class:`TokenTable` is built once per tokenizer (cached) and holds what rendering and
parsing need: the bytes of every token id (decoding by joining bytes is ~3x faster than
the tokenizer's own decode), the control tokens by name, and an encoder for ordinary
text that never produces a control token, even when the text spells one.
"""

from __future__ import annotations

import operator
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from itertools import compress, count
from typing import Any, NoReturn

import numpy as np

from renderers.core.fast_encoding import fast_encoder
from renderers.core.vocabulary import class_spec, read_vocabulary

__all__ = ["TokenTable", "as_token_ids", "id_list", "int_ids", "token_table"]


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
        control = vocabulary.control
        self.control_tokens: dict[str, int] = control
        self.control_ids = frozenset(control.values())
        self._id_to_control = {i: s for s, i in control.items()}
        self._vocabulary = vocabulary
        self._init_encoding()

    def _init_encoding(self) -> None:
        # Text is encoded by the tokenizer itself until the fast encoder is built (see
        # _interim_encode); _encode_fn is whichever encodes now.
        self._final: Callable[[str], list[int]] | None = None
        self._encode_fn: Callable[[str], list[int]] = self._interim_encode
        self._interim_seconds = 0.0
        self._fast = False
        self._lock = threading.Lock()
        self._cache: dict[str, list[int]] = {}

    # -- the vocabulary, read on first need (rendering a prompt needs none of it) ------------

    @cached_property
    def _pieces(self) -> list[bytes | None]:
        return self._vocabulary.read_pieces()

    @cached_property
    def vocab_size(self) -> int:
        """Ids are ``0 .. vocab_size - 1`` (some may be no token)."""
        return len(self._pieces)

    @cached_property
    def id_to_bytes(self) -> list[bytes]:
        """The bytes of every token id (``b""`` where no token has that id)."""
        return [b if b is not None else b"" for b in self._pieces]

    @cached_property
    def valid(self) -> list[bool]:
        """Whether each id is a token."""
        return [b is not None for b in self._pieces]

    @cached_property
    def valid_array(self) -> np.ndarray:
        """:attr:`valid` as a NumPy array, for validating whole chunks at once."""
        return np.fromiter(self.valid, dtype=bool, count=self.vocab_size)

    @cached_property
    def length_array(self) -> np.ndarray:
        """The byte length of every token, as a NumPy array."""
        return np.fromiter(map(len, self.id_to_bytes), dtype=np.int64, count=self.vocab_size)

    @cached_property
    def _flat_bytes(self) -> np.ndarray:
        # Every token's bytes end to end (with _starts): a long run of ids is joined by one
        # NumPy gather (about twice as fast as joining a Python list).
        return np.frombuffer(b"".join(self.id_to_bytes), dtype=np.uint8)

    @cached_property
    def _starts(self) -> np.ndarray:
        starts: np.ndarray = np.cumsum(self.length_array) - self.length_array
        return starts

    @cached_property
    def id_to_str(self) -> list[str | None]:
        """The text of each token whose bytes are complete UTF-8, else ``None``."""
        return _complete_texts(self.id_to_bytes, self.valid)

    # -- encoding ------------------------------------------------------------------------

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
        """Whether ordinary text is encoded with tiktoken (a proven-equal fast path); asking
        builds it."""
        self._encode_ordinary  # noqa: B018  (builds the encoder)
        return self._fast

    @property
    def _encode_ordinary(self) -> Callable[[str], list[int]]:
        """The encoder text settles on: tiktoken if proven equal and its self-check passes,
        else the tokenizer's own (built now if not yet)."""
        encode = self._final
        if encode is None:
            with self._lock:
                encode = self._final
                if encode is None:
                    probe = self._vocabulary.probe
                    fast = fast_encoder(self, probe)
                    self._fast = fast is not None
                    encode = self._final = fast or probe
                    self._encode_fn = encode
        return encode

    def _interim_encode(self, text: str) -> list[int]:
        """The tokenizer's own ids while they come cheaply, until encoding has taken
        ``_INTERIM_SECONDS`` (then the fast encoder is built: a few tenths of a second that
        a process rendering one prompt does not pay, and one rendering many soon repays)."""
        start = time.perf_counter()
        quick = self._vocabulary.quick
        ids = quick(text) if quick is not None else self._vocabulary.encode(text)
        if ids is None:  # the text spells an added token: settle now
            return self._encode_ordinary(text)
        self._interim_seconds += time.perf_counter() - start
        if self._interim_seconds > _INTERIM_SECONDS:
            self._encode_ordinary  # noqa: B018  (builds the encoder)
        return ids

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_final", "_encode_fn", "_interim_seconds", "_fast", "_lock", "_cache"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_encoding()

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
                cached = self._encode_fn(text)
                if len(self._cache) >= 65536:
                    self._cache.clear()
                self._cache[text] = cached
            return list(cached)
        return self._encode_fn(text)

    def clear_cache(self) -> None:
        """Forget cached encodings of short texts (benchmarks measure cold rendering)."""
        self._cache.clear()

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Like :meth:`encode`, also returning each token's character span in ``text``."""
        return self._vocabulary.encode_with_offsets(text)

    def check_ids(self, ids: Sequence[int], offset: int = 0) -> None:
        """Raise ``ValueError`` naming the first position holding an invalid token id
        (not an integer, negative, or not in the vocabulary). Integers are what Python
        takes as an index: ints (a ``bool`` is one), NumPy integers, 0-d integer tensors."""
        valid = self.valid
        n = self.vocab_size
        for pos, t in enumerate(ids):
            if type(t) is not int:
                try:
                    t = operator.index(t)
                except TypeError:
                    raise ValueError(
                        f"token_ids[{offset + pos}] = {t!r} is not an integer token id"
                    ) from None
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

    def gather_bytes(self, offsets: np.ndarray, total: int, lengths: np.ndarray) -> bytes:
        """``total`` bytes of the flat table: ``lengths[i]`` of them (which add up to
        ``total``) for each ``i``, byte ``k`` of the result being ``k + offsets[i]``."""
        index = offsets.repeat(lengths)
        index += _ARANGE[:total] if total <= len(_ARANGE) else np.arange(total)
        data: bytes = self._flat_bytes[index].tobytes()
        return data

    @property
    def start_array(self) -> np.ndarray:
        """Where each token's bytes start in the table's flat bytes."""
        return self._starts

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Decode ids to text (control tokens as their text, bad UTF-8 replaced)."""
        listed = id_list(ids)
        self.check_ids(listed)
        return b"".join(map(self.id_to_bytes.__getitem__, listed)).decode("utf-8", "replace")


def int_ids(ids: Iterable[Any]) -> list[int]:
    """Checked ids as Python ints (what results hold, whatever integers a caller gave;
    ``operator.index`` over them is faster than testing whether they already are)."""
    return list(map(operator.index, ids))


def id_list(token_ids: Any) -> list[Any]:
    """The ids a caller gave (see :func:`as_token_ids`) as a list, unchecked."""
    given = as_token_ids(token_ids)
    return given.tolist() if isinstance(given, np.ndarray) else list(given)


def as_token_ids(token_ids: Any) -> Sequence[int] | np.ndarray:
    """Token ids as a caller gives them, in a form the parsers read: a list, a sequence of
    ints or a 1-D NumPy array as given; any other array NumPy reads (a PyTorch or JAX
    tensor on the CPU, what ``generate`` returns) as a NumPy array. Text, or an array of
    another shape, is a ``ValueError`` saying so."""
    if type(token_ids) is list:
        return token_ids
    if isinstance(token_ids, (str, bytes, bytearray)):
        raise ValueError(
            f"token_ids: expected a sequence of token ids, got {type(token_ids).__name__}"
            " (parse_text parses a completion given as text)"
        )
    array: np.ndarray
    if isinstance(token_ids, np.ndarray):
        array = token_ids
        if array.dtype.kind == "O":  # Python objects: read one by one, as a list's
            return list(array) if array.ndim == 1 else _refused_shape(array)
    elif not hasattr(token_ids, "__array__"):
        sequence: Sequence[int] = token_ids
        return sequence
    else:
        try:
            array = np.asarray(token_ids)
        except (TypeError, ValueError, RuntimeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(
                f"token_ids: cannot read a {type(token_ids).__name__} as an array ({first})"
            ) from None
    return array if array.ndim == 1 else _refused_shape(array)


def _refused_shape(array: np.ndarray) -> NoReturn:
    raise ValueError(
        f"token_ids: expected a 1-D sequence of token ids, got an array of shape {array.shape}"
    )


_GATHER_CHUNK = 1 << 15
_ARANGE = np.arange(1 << 15)  # the offsets within a gather, for short ones
_ARANGE.flags.writeable = False
_INTERIM_SECONDS = 0.1


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
    ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
    flat = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    with_nul = sorted(set(np.searchsorted(ends, np.flatnonzero(flat == 0), "right").tolist()))
    joined = list(pieces)
    for i in with_nul:
        joined[i] = b""
    whole = b"\x00".join(joined).decode("utf-8", "surrogateescape")
    decoded = whole.split("\x00")
    char_ends = np.cumsum(np.fromiter(map(len, decoded), dtype=np.int64, count=len(decoded)) + 1)
    bad = [m.start() for m in _SURROGATE.finditer(whole)]
    texts: list[str | None] = list(decoded)
    for i in set(np.searchsorted(char_ends, bad, "right").tolist()):
        texts[i] = None
    for i in with_nul:
        texts[i] = _complete_utf8(pieces[i])
    for i in compress(count(), map(operator.not_, valid)):
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
