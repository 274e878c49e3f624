"""Tokenizers that model publishers ship inside their Python packages, read without the hub.

- **Llama 3.x** (``llama-models``: ``llama_models/llama3/tokenizer.model``): tiktoken ranks
  (128,000) and 256 named special tokens after them, as ``llama_models.llama3.tokenizer.
  Tokenizer`` builds them (``<|begin_of_text|>`` = 128000 ... ``<|eot_id|>`` = 128009).
- **Llama 4** (``llama-models``: ``llama_models/llama4/tokenizer.model``): tiktoken ranks
  (200,000, the o200k split pattern) and 2,048 named special tokens after them, as
  ``llama_models.llama4.tokenizer.Tokenizer`` builds them (``<|begin_of_text|>`` = 200000,
  ``<|header_start|>`` = 200005, ``<|eot|>`` = 200008).
- **Mistral** (``mistral-common``: ``mistral_common/data/tekken_240718.json``): Tekken,
  tiktoken ranks after the control tokens (``[INST]``, ``[TOOL_CALLS]`` ...), as
  mistral-common's ``Tekkenizer`` builds them (``MistralTokenizer.v3(is_tekken=True)``).
- **Mistral instruct v7** (``mistral-common``: ``mistral_instruct_tokenizer_241114.model.v7``,
  ``MistralTokenizer.v7()``): a SentencePiece BPE (32,768 pieces, byte fallback, no
  normalization), the control tokens first (``<s>`` = 1, ``[INST]`` = 3,
  ``[SYSTEM_PROMPT]`` = 16). SentencePiece writes a space before every text it encodes
  (its dummy prefix); the wrapper encodes text as it is, so the renderer writes that space
  as part of the format.

Each is wrapped as an :class:`~renderers.core.vocabulary.OrdinaryTokenizer` (ordinary text
never becomes a control token; ids decode to bytes), whose class builds it without
arguments, so renderers pickle it by name (``"renderers.core.packaged_tokenizers:
Llama3Tokenizer"``). :func:`packaged_tokenizer` adapts the packages' own tokenizer objects
(``Tokenizer.get_instance()``, ``MistralTokenizer.v3(is_tekken=True)``,
``MistralTokenizer.v7()``) to these wrappers, and refuses another vocabulary of a kind.

Ordinary text is encoded whole by tiktoken; the packages' ``encode`` first cuts texts of
over 400,000 characters (and runs of over 25,000 whitespace or non-whitespace characters),
which can change the ids at those cuts of pathological texts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = [
    "Llama3Tokenizer",
    "Llama4Tokenizer",
    "MistralV7Tokenizer",
    "TekkenTokenizer",
    "packaged_tokenizer",
]

_MISSING = "{} ships this tokenizer: pip install 'exact-renderers[families]'"


class _TiktokenTokenizer:
    """An ordinary-text tokenizer over a ``tiktoken.Encoding`` and named control tokens."""

    def __init__(self, encoding: Any, control: dict[str, int]) -> None:
        self._encoding = encoding
        self._control = control
        self._bytes: dict[int, bytes] = {i: name.encode() for name, i in control.items()}

    def encode_ordinary(self, text: str) -> list[int]:
        """``text`` as ordinary tokens (never a control token, whatever it spells)."""
        ids: list[int] = self._encoding.encode_ordinary(text)
        return ids

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The bytes of ``token_ids`` (a control token's are its name)."""
        control = self._bytes
        try:
            if not any(t in control for t in token_ids):
                data: bytes = self._encoding.decode_bytes(list(token_ids))
                return data
            out = bytearray()
            for t in token_ids:
                out += control[t] if t in control else self._encoding.decode_single_token_bytes(t)
        except KeyError as exc:  # tiktoken's error for an id that is not a token
            raise ValueError(f"no token has the id {exc}") from None
        return bytes(out)

    def special_tokens(self) -> list[str]:
        """The names of the control tokens."""
        return list(self._control)

    def encode_special(self, name: str) -> int:
        """The id of the control token named ``name``."""
        return self._control[name]


class Llama3Tokenizer(_TiktokenTokenizer):
    """Llama 3.x's tokenizer from ``llama-models`` (the same for 3.1, 3.2 and 3.3)."""

    def __init__(self) -> None:
        try:
            from llama_models.llama3.tokenizer import Tokenizer
        except ImportError:
            raise ImportError(_MISSING.format("llama-models")) from None
        meta = Tokenizer.get_instance()
        super().__init__(meta.model, dict(meta.special_tokens))


class Llama4Tokenizer(_TiktokenTokenizer):
    """Llama 4's tokenizer from ``llama-models`` (Scout and Maverick share it)."""

    def __init__(self) -> None:
        try:
            from llama_models.llama4.tokenizer import Tokenizer
        except ImportError:
            raise ImportError(_MISSING.format("llama-models")) from None
        meta = Tokenizer.get_instance()
        super().__init__(meta.model, dict(meta.special_tokens))


class TekkenTokenizer(_TiktokenTokenizer):
    """Tekken as Mistral-Nemo, Ministral-8B and Mistral-Small-2409 use it
    (``MistralTokenizer.v3(is_tekken=True)``, ``tekken_240718.json``): control tokens take
    the first ids and the ranks follow them (the encoding of mistral-common's
    ``Tekkenizer`` holds the ranks only)."""

    def __init__(self) -> None:
        try:
            from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
        except ImportError:
            raise ImportError(_MISSING.format("mistral-common")) from None
        self._read(MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer)

    def _read(self, tekken: Any) -> None:
        shift = tekken.num_special_tokens
        control = {tekken.id_to_piece(i): i for i in range(shift)}
        self._shift = shift
        super().__init__(tekken._model, control)  # the ranks, ids shifted by ``shift``

    def _vocabulary(self) -> Any:
        """What makes the vocabulary: its control tokens and ranks."""
        return self._control, self._encoding._mergeable_ranks

    def encode_ordinary(self, text: str) -> list[int]:
        shift = self._shift
        return [t + shift for t in self._encoding.encode_ordinary(text)]

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        control, shift, encoding = self._bytes, self._shift, self._encoding
        out = bytearray()
        for t in token_ids:
            if t < 0:
                raise ValueError(f"no token has the id {t}")
            try:
                out += control[t] if t < shift else encoding.decode_single_token_bytes(t - shift)
            except KeyError:
                raise ValueError(f"no token has the id {t}") from None
        return bytes(out)


class MistralV7Tokenizer:
    """Mistral instruct v7's SentencePiece tokenizer (Mistral-Large-Instruct-2411:
    ``MistralTokenizer.v7()``), encoding text without SentencePiece's dummy prefix: its
    ``encode_ordinary(" " + text)`` is the encoder's ``encode(text)``.

    A piece decodes to its text with ``▁`` read as a space (so a ``▁`` typed in text, which
    SentencePiece encodes as a space, decodes as one, as mistral-common's decoder does), a
    byte piece to its byte, a control token (and ``<unk>``) to its name.
    """

    def __init__(self) -> None:
        try:
            from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
        except ImportError:
            raise ImportError(_MISSING.format("mistral-common")) from None
        try:
            mistral = MistralTokenizer.v7()
        except ImportError:  # mistral-common without its sentencepiece extra
            raise ImportError(_MISSING.format("mistral-common[sentencepiece]")) from None
        sentencepiece: Any = mistral.instruct_tokenizer.tokenizer
        self._read(sentencepiece._model)

    def _read(self, model: Any) -> None:
        from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(model.serialized_model_proto())
        proto.normalizer_spec.add_dummy_prefix = False
        self._model = SentencePieceProcessor(model_proto=proto.SerializeToString())
        pieces: list[bytes] = []
        control: dict[str, int] = {}
        for i, piece in enumerate(proto.pieces):
            if piece.type == piece.BYTE:
                pieces.append(bytes([int(piece.piece[1:-1], 16)]))  # "<0x0A>"
            else:
                pieces.append(piece.piece.replace("\u2581", " ").encode())
                if piece.type in (piece.CONTROL, piece.UNKNOWN):
                    control[piece.piece] = i
        self._pieces = pieces
        self._control = control
        model_pieces = b"".join(p.SerializeToString() for p in proto.pieces)  # with scores
        self._fingerprint = hashlib.sha256(model_pieces).hexdigest()

    def _vocabulary(self) -> Any:
        """What makes the vocabulary: its pieces, their types and scores (the merges)."""
        return self._fingerprint

    def encode_ordinary(self, text: str) -> list[int]:
        """``text`` as ordinary tokens (never a control token, whatever it spells), with no
        space added before it."""
        ids: list[int] = self._model.encode(text)
        return ids

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The bytes of ``token_ids`` (a control token's are its name)."""
        pieces = self._pieces
        out = bytearray()
        for t in token_ids:
            if not 0 <= t < len(pieces):
                raise ValueError(f"no token has the id {t}")
            out += pieces[t]
        return bytes(out)

    def special_tokens(self) -> list[str]:
        """The names of the control tokens (``<unk>`` among them)."""
        return list(self._control)

    def encode_special(self, name: str) -> int:
        """The id of the control token named ``name``."""
        return self._control[name]


def packaged_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` as an ordinary-text tokenizer when it is one of the packages' own
    objects (llama-models' Llama 3 or 4 ``Tokenizer``; mistral-common's ``MistralTokenizer``,
    its ``Tekkenizer`` or ``SentencePieceTokenizer`` of the vocabularies above); any other
    tokenizer as given."""
    module = type(tokenizer).__module__
    if module.startswith(("llama_models.llama3", "llama_models.llama4")):
        cls = Llama4Tokenizer if module.startswith("llama_models.llama4") else Llama3Tokenizer
        llama = cls.__new__(cls)
        _TiktokenTokenizer.__init__(llama, tokenizer.model, dict(tokenizer.special_tokens))
        return llama
    if module.startswith("mistral_common."):
        inner = getattr(getattr(tokenizer, "instruct_tokenizer", None), "tokenizer", tokenizer)
        kind = type(inner).__name__
        if kind == "Tekkenizer":
            tekken = TekkenTokenizer.__new__(TekkenTokenizer)
            tekken._read(inner)
            return _the_packaged(tekken, TekkenTokenizer, "MistralTokenizer.v3(is_tekken=True)")
        if kind == "SentencePieceTokenizer":
            sentencepiece = MistralV7Tokenizer.__new__(MistralV7Tokenizer)
            sentencepiece._read(inner._model)
            return _the_packaged(sentencepiece, MistralV7Tokenizer, "MistralTokenizer.v7()")
        raise TypeError(
            f"unsupported mistral-common tokenizer {kind}: supported are "
            "MistralTokenizer.v3(is_tekken=True) and MistralTokenizer.v7()"
        )
    return tokenizer


def _the_packaged(wrapped: Any, cls: type[Any], loader: str) -> Any:
    """The tokenizer ``cls`` builds if ``wrapped`` is the same (a renderer shares and pickles
    it by its class), else ``TypeError``: another vocabulary of the same kind is not supported."""
    packaged = _built(cls)
    if wrapped._vocabulary() == packaged._vocabulary():
        return packaged
    raise TypeError(
        f"unsupported mistral-common tokenizer: its vocabulary is not the one {loader} "
        "loads, the only one of its kind supported"
    )


_BUILT: dict[str, Any] = {}


def _built(cls: type[Any]) -> Any:
    """``cls()``, built once."""
    if cls.__name__ not in _BUILT:
        _BUILT[cls.__name__] = cls()
    return _BUILT[cls.__name__]
