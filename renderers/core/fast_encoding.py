"""A faster exact encoder for ordinary text: tiktoken over the tokenizer's own ranks.

``tokenizers`` spends most of a render encoding text; tiktoken runs the same byte-level
BPE about 6-7x faster. It is used only for tokenizers on the proven list below: each entry
is a fingerprint of a token table (every token's bytes) with the split pattern and
normalizer of that tokenizer, and ``tests/test_fast_encoding.py`` proves, on a large varied
corpus, that tiktoken gives the ids of the tokenizer itself (a Hugging Face tokenizer's or
an ordinary-text tokenizer's own encoder). Any other tokenizer (or a failed self-check at
load) keeps the tokenizer's own encoder.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, count
from typing import Any, Protocol

__all__ = ["PROVEN", "ByteVocabulary", "engine_pattern", "fast_encoder", "fingerprint"]


class ByteVocabulary(Protocol):
    """What this module reads of a token table (:class:`renderers.core.tokens.TokenTable`)."""

    @property
    def id_to_bytes(self) -> Sequence[bytes]: ...
    @property
    def valid(self) -> Sequence[bool]: ...
    @property
    def control_ids(self) -> frozenset[int]: ...
    @property
    def length_array(self) -> Any: ...


_QWEN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3.5's pattern: letters run together with their combining marks, and punctuation runs
# stop at a mark (Qwen3's put marks in the punctuation class).
_QWEN35 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_O200K = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Tekken's pattern (Mistral's; Nemotron-3 uses it): single digits, no contractions.
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_KIMI = (
    r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


# DeepSeek's pre-tokenizer first isolates runs of up to 3 digits, then CJK runs, then
# splits each remaining piece with its main pattern (text no alternative matches stays a
# piece of its own). One pattern does the same: digits and CJK first, and the main
# alternatives (and the gap alternative) never cross into them, treating them as the end
# of a piece in their lookahead.
_CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"
_ISOLATED = rf"\p{{N}}{_CJK}"
_DEEPSEEK_MAIN = (
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
    rf"|[^\r\n\p{{L}}\p{{P}}\p{{S}}{_ISOLATED}]?[\p{{L}}\p{{M}}&&[^{_ISOLATED}]]+"
    rf"| ?[\p{{P}}\p{{S}}&&[^{_ISOLATED}]]+[\r\n]*|\s*[\r\n]+|\s+(?![^\s{_ISOLATED}])|\s+"
)
_DEEPSEEK = rf"\p{{N}}{{1,3}}|[{_CJK}]+|{_DEEPSEEK_MAIN}|(?:(?!{_DEEPSEEK_MAIN})[^{_ISOLATED}])+"


@dataclass(frozen=True, slots=True)
class Proven:
    """A tokenizer whose encoding tiktoken reproduces exactly with the split ``pattern``
    (after NFC normalization if ``nfc``)."""

    model: str
    pattern: str
    nfc: bool


PROVEN: dict[str, Proven] = {
    "455bee1bbe1f0ec7b7fd3d6e54b734a882b585677ae8d1f36fe47a25b2c74735": Proven(
        "Qwen/Qwen3-8B", _QWEN, nfc=True
    ),
    "f5bf08699b8f17554dac907d0668de45cd941e087bc74dea5428b17e6eae8bba": Proven(
        "openai/gpt-oss-20b", _O200K, nfc=False
    ),
    "0836e2ffff9d36113a8986a5e80b555c82822c5dd72d5322ea0b03bc16a71ed9": Proven(
        "moonshotai/Kimi-K2-Instruct", _KIMI, nfc=False
    ),
    "ee6a6276f2dde6cf826ef6618f2800d235bbde2df69233d63f9b7e4b588caa5e": Proven(
        "moonshotai/Kimi-K2-Thinking", _KIMI, nfc=False
    ),
    "a20fd7321032199989a135d25f943584f969b2c95c48786305775438f0b72145": Proven(
        "deepseek-ai/DeepSeek-V3", _DEEPSEEK, nfc=False
    ),
    "68f0af56d51ba0c75d3536e44bbe5b8b366cf154503807ea56594a56859beceb": Proven(
        "deepseek-ai/DeepSeek-V3.1", _DEEPSEEK, nfc=False
    ),
    # The 2026 families, as tml-renderers 0.2.1 bundles their tokenizers (the proof's
    # reference is the bundled tokenizer's own encode_ordinary).
    "d5f3f820ba97a1c3eb5962acbed006542b6c941fed59f385a53cce9ef1f2f74a": Proven(
        "Qwen/Qwen3.5-27B", _QWEN35, nfc=True
    ),
    "7adf774ae88a9d42d1d594f3951d7e40805fc1c81c4170864730c82d4a53e03f": Proven(
        "deepseek-ai/DeepSeek-V4-Pro", _DEEPSEEK, nfc=False
    ),
    "d2793779fef9846dff721998b9f7832c9fd39fc5b7ac061fda70439877a0c149": Proven(
        "deepseek-ai/DeepSeek-V4.1-Flash", _DEEPSEEK, nfc=False
    ),
    "346409135c11aa04183aba51197491694de9245cc109e3009d283c1638085c50": Proven(
        "moonshotai/Kimi-K2.5", _KIMI, nfc=False
    ),
    "3e3c130024a4e2df09163a7c1cd03189d160e4ff9c514a47bdfc31ee91df000f": Proven(
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B", _TEKKEN, nfc=False
    ),
}
"""Fingerprint -> how to encode; filled only with tokenizers the tests prove equal."""

# A self-check run when the fast encoder is built: scripts, digits, whitespace runs,
# contractions, code, combining marks and emoji.
_SAMPLE = (
    "Hello, World! It's 2025-06-28; we'll test 12345678 numbers & symbols: <tag/> {x: [1, 2]}\n"
    "  indented\tline\r\n\n\n   trailing   \n中文文本，日本語のテキスト、한국어 문장. "
    "Ünïcödé façade e\u0301 "
    "Größe ΑΒΓ αβγ Кириллица عربى हिन्दी 🎉🚀 👍🏽 def f(x):\n    return x**2  # comment\n"
)


def fingerprint(table: ByteVocabulary) -> str:
    """A hash of every token's bytes (and lengths), identifying a tokenizer's vocabulary."""
    digest = hashlib.sha256(table.length_array.tobytes())
    digest.update(b"".join(table.id_to_bytes))
    return digest.hexdigest()


def fast_encoder(
    table: ByteVocabulary, reference: Callable[[str], list[int]]
) -> Callable[[str], list[int]] | None:
    """The tiktoken encoder for ``table`` if its tokenizer is proven, else ``None``.

    ``reference`` is the tokenizer's own ordinary-text encoder; the fast encoder must give
    its ids on a built-in sample before it is used.
    """
    proven = PROVEN.get(fingerprint(table))
    if proven is None:
        return None
    encode = build(table, proven)
    if encode is None or encode(_SAMPLE) != reference(_SAMPLE):
        return None
    return encode


_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def engine_pattern(pattern: str) -> str:
    """``pattern`` with its leading top-level alternatives that have no lookaround in one
    group: tiktoken's fancy-regex then runs them as one regex-crate match where it would
    try them one by one, which encodes 1.2-1.5x faster on the bench corpus. Alternation
    is leftmost-first either way, so every split is the same."""
    alternatives = _top_level_alternatives(pattern)
    plain = 0
    while plain < len(alternatives) and not any(
        mark in alternatives[plain] for mark in _LOOKAROUND
    ):
        plain += 1
    if plain < 2 or plain == len(alternatives):
        return pattern
    return "|".join(["(?:" + "|".join(alternatives[:plain]) + ")", *alternatives[plain:]])


def _top_level_alternatives(pattern: str) -> list[str]:
    """``pattern`` split at each ``|`` outside groups and character classes."""
    alternatives: list[str] = []
    depth = in_class = start = 0
    k = 0
    while k < len(pattern):
        char = pattern[k]
        if char == "\\":
            k += 2
            continue
        if char == "[":
            in_class += 1
        elif char == "]" and in_class:
            in_class -= 1
        elif not in_class and char == "(":
            depth += 1
        elif not in_class and char == ")":
            depth -= 1
        elif not in_class and not depth and char == "|":
            alternatives.append(pattern[start:k])
            start = k + 1
        k += 1
    alternatives.append(pattern[start:])
    return alternatives


def build(table: ByteVocabulary, proven: Proven) -> Callable[[str], list[int]] | None:
    """tiktoken over the table's ordinary tokens (ranks are the token ids)."""
    try:
        import tiktoken
    except ImportError:
        return None
    keep = list(table.valid)
    for i in table.control_ids:
        keep[i] = False
    # The same dict as {b: i for ordinary ids i}, built without a Python-level loop.
    ranks = dict(zip(compress(table.id_to_bytes, keep), compress(count(), keep), strict=False))
    encoding = tiktoken.Encoding(
        name=f"renderers:{proven.model}",
        pat_str=engine_pattern(proven.pattern),
        mergeable_ranks=ranks,
        special_tokens={},
    )
    encode_ordinary = encoding.encode_ordinary
    if proven.nfc:
        normalize = unicodedata.normalize

        def encode(text: str) -> list[int]:
            return encode_ordinary(normalize("NFC", text))

        return encode
    return encode_ordinary
