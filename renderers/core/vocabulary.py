"""How a tokenizer is read: every token's bytes, its control tokens, an ordinary-text encoder.

Two kinds of tokenizer are accepted (duck-typed, nothing is imported from their packages):

- a **Hugging Face** tokenizer (``transformers`` fast tokenizer or ``tokenizers.Tokenizer``)
  with a byte-level BPE: the vocabulary strings spell bytes in GPT-2's alphabet, control
  tokens are its added tokens, and ordinary text is encoded by a copy of the tokenizer
  without its added tokens (so a user typing ``<|im_end|>`` gets ordinary tokens);
- an **ordinary-text tokenizer** (:class:`OrdinaryTokenizer`, the interface of
  tml-renderers' tokenizers such as ``tml_renderers.tokenizers.Qwen35Tokenizer``), which
  names its control tokens (``special_tokens`` / ``encode_special``), decodes ids to bytes
  (``decode_bytes``) and encodes text without ever producing a control token
  (``encode_ordinary``).

A tokenizer of the second kind may normalize text before encoding (Qwen's NFC): the form
is found by encoding a probe text, and character offsets of tokens (which loss weights of
text pieces merged into one token need) are recovered from it.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from tokenizers import Tokenizer

from renderers.core.byte_level import bytes_to_unicode

__all__ = [
    "OrdinaryTokenizer",
    "Vocabulary",
    "class_spec",
    "read_vocabulary",
]

_UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}

Offsets = list[tuple[int, int]]


@runtime_checkable
class OrdinaryTokenizer(Protocol):
    """A tokenizer that names its control tokens, decodes ids to bytes and encodes
    ordinary text (tml-renderers' tokenizers implement it)."""

    def encode_ordinary(self, text: str) -> list[int]:
        """``text`` as ordinary tokens (never a control token, whatever it spells)."""
        ...

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The bytes of ``token_ids``; raises for an id that is not a token."""
        ...

    def special_tokens(self) -> list[str]:
        """The names of the control tokens."""
        ...

    def encode_special(self, name: str) -> int:
        """The id of the control token named ``name``."""
        ...


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What a token table is built from.

    ``read_pieces()`` gives the bytes of every token ``i`` (``None``: no token has that
    id; a control token's bytes are its text), read on first need (a fraction of a second
    for a large vocabulary; rendering a prompt does not need it); ``control`` maps each
    control token's text to its id; ``encode`` is the tokenizer's own ordinary-text
    encoder and ``encode_with_offsets`` also gives each token's character span in the text.
    """

    read_pieces: Callable[[], list[bytes | None]]
    control: dict[str, int]
    encode: Callable[[str], list[int]]
    encode_with_offsets: Callable[[str], tuple[list[int], Offsets]]
    plain_encoder: Callable[[], Tokenizer] | None = None
    """Hugging Face tokenizers: the tokenizer without its added tokens (built on first
    use), whose ``encode_batch`` the fast-encoding proof uses."""
    quick: Callable[[str], list[int] | None] | None = None
    """``encode``'s ids where they come cheaply (a Hugging Face tokenizer encoding text
    that spells no added token), else ``None``; ``None`` here: ``encode`` is cheap."""

    @property
    def probe(self) -> Callable[[str], list[int]]:
        """``encode``, by ``quick`` where it answers (the fast encoder's self-check)."""
        quick, encode = self.quick, self.encode
        if quick is None:
            return encode

        def probe(text: str) -> list[int]:
            ids = quick(text)
            return encode(text) if ids is None else ids

        return probe


def read_vocabulary(tokenizer: Any) -> Vocabulary:
    """The :class:`Vocabulary` of a Hugging Face or ordinary-text tokenizer.

    Raises ``TypeError`` naming what is accepted for any other object.
    """
    backend = _backend(tokenizer)
    if backend is not None:
        return _hugging_face_vocabulary(backend)
    if isinstance(tokenizer, OrdinaryTokenizer):
        return _ordinary_vocabulary(tokenizer)
    raise TypeError(
        f"unsupported tokenizer {type(tokenizer).__name__}: expected a Hugging Face fast "
        "tokenizer (with .backend_tokenizer), a tokenizers.Tokenizer, or a tokenizer with "
        "encode_ordinary, decode_bytes, special_tokens and encode_special (tml-renderers)"
    )


def class_spec(tokenizer: Any) -> str | None:
    """``"module:Class"`` for an ordinary-text tokenizer that its class builds without
    arguments (tml-renderers' tokenizers: every instance of a class is the same
    tokenizer), else ``None``. Such a tokenizer is shared and pickled by this name."""
    if _backend(tokenizer) is not None or not isinstance(tokenizer, OrdinaryTokenizer):
        return None
    cls = type(tokenizer)
    try:
        required = [
            p
            for p in inspect.signature(cls).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
    except (TypeError, ValueError):  # no signature to read: not known to be argument-free
        return None
    if required or "<" in cls.__qualname__:  # a local class cannot be imported back
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


# -- Hugging Face tokenizers ------------------------------------------------------------------


def _backend(tokenizer: Any) -> Tokenizer | None:
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend if isinstance(backend, Tokenizer) else None


def _is_byte_level(backend: Tokenizer) -> bool:
    decoder = backend.decoder
    if type(decoder).__name__ == "ByteLevel":
        return True
    if decoder is None:
        return False
    spec = json.loads(backend.to_str()).get("decoder") or {}
    return any(d.get("type") == "ByteLevel" for d in spec.get("decoders", []))


def _hugging_face_vocabulary(backend: Tokenizer) -> Vocabulary:
    if not _is_byte_level(backend):
        raise TypeError("unsupported tokenizer: only byte-level BPE tokenizers are supported")
    added = {i: t.content for i, t in backend.get_added_tokens_decoder().items()}
    control = {content: i for i, content in added.items()}
    encoder = _PlainEncoder(backend, tuple(control))
    return Vocabulary(
        functools.partial(_hugging_face_pieces, backend, added),
        control,
        encoder.encode,
        encoder.encode_with_offsets,
        encoder.tokenizer,
        encoder.quick,
    )


def _hugging_face_pieces(backend: Tokenizer, added: dict[int, str]) -> list[bytes | None]:
    spelled = _model_vocabulary(backend)
    size = max(len(spelled), max(added, default=-1) + 1)
    # Added tokens take their text below (DeepSeek spells its control tokens 0-2 as plain
    # text, not in the byte alphabet).
    texts = [t if t is not None else "" for t in spelled]
    for i in added:
        if i < len(texts):
            texts[i] = ""
    converted = _byte_pieces(texts)
    pieces: list[bytes | None] = [
        b if t is not None else None for b, t in zip(converted, spelled, strict=True)
    ]
    pieces += [None] * (size - len(pieces))
    for i, content in added.items():
        pieces[i] = content.encode("utf-8")
    while pieces and pieces[-1] is None:  # the size is the largest id + 1
        pieces.pop()
    return pieces


def _model_vocabulary(backend: Tokenizer) -> list[str | None]:
    """The model's token strings by id (``None``: no token has that id), without added
    tokens. Read id by id when the ids are dense (about twice as fast as ``get_vocab``,
    which hashes every string into a dict)."""
    count = backend.get_vocab_size(with_added_tokens=False)
    id_to_token = backend.model.id_to_token
    spelled: list[str | None] = list(
        map(id_to_token, range(backend.get_vocab_size(with_added_tokens=True)))
    )
    if len(spelled) - spelled.count(None) == count:
        return spelled
    vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)  # ids past the count
    spelled = [None] * (max(vocab.values(), default=-1) + 1)
    for piece, i in vocab.items():
        spelled[i] = piece
    return spelled


def _byte_alphabet_table() -> np.ndarray:
    """UTF-16 code unit -> the byte it spells in the byte alphabet, 256 for any other."""
    table = np.full(1 << 16, 256, dtype=np.uint16)
    for b, c in bytes_to_unicode().items():
        table[ord(c)] = b
    return table


_SPELLED_BYTE = _byte_alphabet_table()


def _byte_pieces(spelled: list[str]) -> list[bytes]:
    """The bytes each byte-alphabet string spells, converted in one NumPy pass over all of
    them (a per-string loop costs about half a second for a 200k vocabulary). Every
    alphabet character is one UTF-16 code unit; anything else maps to 256 and is refused."""
    units = np.frombuffer("".join(spelled).encode("utf-16-le"), dtype=np.uint16)
    values = _SPELLED_BYTE[units]
    if len(values) and int(values.max()) > 255:
        for piece in spelled:
            if not all(c in _UNICODE_TO_BYTE for c in piece):
                raise TypeError(f"token {piece!r} is not byte-level encoded")
        raise TypeError("the vocabulary is not byte-level encoded")  # not reached
    data = values.astype(np.uint8).tobytes()
    ends = list(accumulate(map(len, spelled)))
    return list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))


class _PlainEncoder:
    """A Hugging Face tokenizer without its added tokens: text is only ever split by the
    pre-tokenizer and BPE. Built on first use (parsing never needs it)."""

    def __init__(self, backend: Tokenizer, added: tuple[str, ...]) -> None:
        self._backend = backend
        self._added = added
        self._added_literals: _Literals | None = None
        self._plain: Tokenizer | None = None
        self._lock = threading.Lock()

    def tokenizer(self) -> Tokenizer:
        plain = self._plain
        if plain is None:
            with self._lock:
                plain = self._plain
                if plain is None:
                    plain = self._plain = _without_added_tokens(self._backend)
        return plain

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer().encode(text, add_special_tokens=False).ids
        return ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], Offsets]:
        enc = self.tokenizer().encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    def quick(self, text: str) -> list[int] | None:
        """:meth:`encode`'s ids by the tokenizer itself when ``text`` (as given or
        normalized) holds no added token's text: added tokens are then never matched, so
        the tokenizer and its copy without them give the same ids, and the copy (about
        1-3 s and 100-200 MB to build) is not needed. ``None`` when that does not hold."""
        if self._plain is not None:
            return self.encode(text)
        backend = self._backend
        if backend.truncation is not None or backend.padding is not None:
            return None
        added = self._added_literals
        if added is None:
            added = self._added_literals = _Literals(self._added)
        if added.found_in(text):
            return None
        normalizer = backend.normalizer
        if normalizer is not None and added.found_in(normalizer.normalize_str(text)):
            return None
        ids: list[int] = backend.encode(text, add_special_tokens=False).ids
        return ids

    def __getstate__(self) -> dict[str, Any]:
        return {"backend": self._backend, "added": self._added}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["backend"], state["added"])  # type: ignore[misc]


class _Literals:
    """Whether a text holds any of some literal texts: candidates are found by first
    character (one character-class scan), so setting up costs nothing even for a
    thousand literals (a regex alternation of them takes a fifth of a second to compile)."""

    def __init__(self, texts: tuple[str, ...]) -> None:
        self._empty = "" in texts
        by_first: dict[str, list[str]] = {}
        for t in texts:
            if t:
                by_first.setdefault(t[0], []).append(t)
        self._by_first = {c: tuple(ts) for c, ts in by_first.items()}
        firsts = "".join(sorted(by_first))
        self._first = re.compile("[" + re.escape(firsts) + "]") if firsts else None

    def found_in(self, text: str) -> bool:
        if self._empty:
            return True
        if self._first is None:
            return False
        by_first, startswith = self._by_first, text.startswith
        for m in self._first.finditer(text):
            p = m.start()
            if any(startswith(t, p) for t in by_first[text[p]]):
                return True
        return False


def _without_added_tokens(backend: Tokenizer) -> Tokenizer:
    spec = backend.to_str()
    # Splice out the "added_tokens" array without parsing the whole (large) document.
    key = spec.index('"added_tokens"')
    start = spec.index("[", key)
    _, end = json.JSONDecoder().raw_decode(spec, start)
    plain = Tokenizer.from_str(spec[:start] + "[]" + spec[end:])
    plain.no_truncation()
    plain.no_padding()
    return plain


# -- ordinary-text tokenizers ---------------------------------------------------------------

# Ids past the last control token are read until this many in a row are not tokens.
_ID_GAP = 4096

Form = Literal["NFC", "NFKC", "NFD", "NFKD"]
Normalization = Form | None
_FORMS: tuple[Form, ...] = ("NFC", "NFKC", "NFD", "NFKD")
# Composed and decomposed letters, a compatibility ligature and the Angstrom sign: every
# Unicode normalization form writes this text differently.
_NORMALIZATION_PROBE = "e\u0301 \u00e9 \ufb01 \u212b"


def _ordinary_vocabulary(tokenizer: OrdinaryTokenizer) -> Vocabulary:
    decode = tokenizer.decode_bytes
    control: dict[str, int] = {}
    for name in tokenizer.special_tokens():
        i = tokenizer.encode_special(name)
        control[decode([i]).decode("utf-8")] = i
    read_pieces = functools.cache(functools.partial(_ordinary_pieces, decode, control))
    encode = tokenizer.encode_ordinary
    form = _normalization(encode, decode)

    def encode_with_offsets(text: str) -> tuple[list[int], Offsets]:
        ids = encode(text)
        return ids, _offsets(ids, read_pieces(), text, form)

    return Vocabulary(read_pieces, control, encode, encode_with_offsets)


def _ordinary_pieces(
    decode: Callable[[list[int]], bytes], control: dict[str, int]
) -> list[bytes | None]:
    last_control = max(control.values(), default=-1)
    pieces: list[bytes | None] = []
    last_valid = -1
    i = 0
    while i <= last_control or i - last_valid <= _ID_GAP:
        try:
            pieces.append(decode([i]))
            last_valid = i
        except (ValueError, RuntimeError, OverflowError):
            pieces.append(None)
        i += 1
    del pieces[last_valid + 1 :]
    return pieces


def _normalization(
    encode: Callable[[str], list[int]], decode: Callable[[list[int]], bytes]
) -> Normalization:
    """The Unicode normalization the tokenizer applies before encoding, read off how it
    encodes a probe text."""
    text = decode(encode(_NORMALIZATION_PROBE)).decode("utf-8", "replace")
    if text == _NORMALIZATION_PROBE:
        return None
    for form in _FORMS:
        if text == unicodedata.normalize(form, _NORMALIZATION_PROBE):
            return form
    raise TypeError(
        "unsupported tokenizer: it changes text before encoding in a way that is not a "
        f"Unicode normalization form ({_NORMALIZATION_PROBE!r} became {text!r})"
    )


def _offsets(ids: list[int], pieces: list[bytes | None], text: str, form: Normalization) -> Offsets:
    """Each token's character span in ``text``, for a tokenizer that encodes the text
    normalized to ``form``.

    The text is cut into chunks that normalize independently (a cut before a character
    that does not combine with what precedes it); a token's span covers every chunk whose
    normalized bytes it overlaps, so a character changed by normalization belongs to all
    the tokens that hold part of it.
    """
    if form is None:
        chunks = [(k, k + 1, c.encode("utf-8")) for k, c in enumerate(text)]
    else:
        chunks = _normalization_chunks(text, form)
    ends: list[int] = []  # normalized byte offset at the end of each chunk
    seen = 0
    for _, _, data in chunks:
        seen += len(data)
        ends.append(seen)
    offsets: Offsets = []
    position = 0
    c = 0
    for t in ids:
        length = len(pieces[t] or b"")
        start, end = position, position + length
        position = end
        while c < len(chunks) and ends[c] <= start:
            c += 1
        if c == len(chunks) or length == 0:
            offsets.append((len(text), len(text)) if c == len(chunks) else (chunks[c][0],) * 2)
            continue
        last = c
        while last + 1 < len(chunks) and ends[last] < end:
            last += 1
        offsets.append((chunks[c][0], chunks[last][1]))
    return offsets


def _normalization_chunks(text: str, form: Form) -> list[tuple[int, int, bytes]]:
    """``(start, end, normalized bytes)`` of consecutive pieces of ``text`` whose
    normalized forms, joined, are the normalized text (one piece when none is found)."""
    normalize = unicodedata.normalize
    chunks: list[tuple[int, int, bytes]] = []
    start = 0
    for k in range(1, len(text) + 1):
        if k < len(text):
            c = text[k]
            if unicodedata.combining(c) or normalize(form, text[start : k + 1]) != normalize(
                form, text[start:k]
            ) + normalize(form, c):
                continue
        chunks.append((start, k, normalize(form, text[start:k]).encode("utf-8")))
        start = k
    if b"".join(data for _, _, data in chunks) != normalize(form, text).encode("utf-8"):
        return [(0, len(text), normalize(form, text).encode("utf-8"))]
    return chunks
