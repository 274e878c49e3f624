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

Each is wrapped as an :class:`~renderers.core.vocabulary.OrdinaryTokenizer` (ordinary text
never becomes a control token; ids decode to bytes), whose class builds it without
arguments, so renderers pickle it by name (``"renderers.core.packaged_tokenizers:
Llama3Tokenizer"``). :func:`packaged_tokenizer` adapts the packages' own tokenizer objects
(``Tokenizer.get_instance()``, ``MistralTokenizer.v3(is_tekken=True)``) to these wrappers.

Ordinary text is encoded whole by tiktoken; the packages' ``encode`` first cuts texts of
over 400,000 characters (and runs of over 25,000 whitespace or non-whitespace characters),
which can change the ids at those cuts of pathological texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Llama3Tokenizer", "Llama4Tokenizer", "TekkenTokenizer", "packaged_tokenizer"]

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


def packaged_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` as an ordinary-text tokenizer when it is one of the packages' own
    objects (llama-models' Llama 3 or 4 ``Tokenizer``, mistral-common's ``MistralTokenizer`` or its
    ``Tekkenizer``); any other tokenizer as given."""
    module = type(tokenizer).__module__
    if module.startswith(("llama_models.llama3", "llama_models.llama4")):
        cls = Llama4Tokenizer if module.startswith("llama_models.llama4") else Llama3Tokenizer
        llama = cls.__new__(cls)
        _TiktokenTokenizer.__init__(llama, tokenizer.model, dict(tokenizer.special_tokens))
        return llama
    if module.startswith("mistral_common."):
        tekken = getattr(getattr(tokenizer, "instruct_tokenizer", None), "tokenizer", tokenizer)
        if type(tekken).__name__ != "Tekkenizer":
            raise TypeError(
                f"unsupported mistral-common tokenizer {type(tekken).__name__}: only Tekken "
                "tokenizers are supported (MistralTokenizer.v3(is_tekken=True))"
            )
        mistral = TekkenTokenizer.__new__(TekkenTokenizer)
        mistral._read(tekken)
        return mistral
    return tokenizer
