"""Kimi-K2's tokenizer built from its ``tiktoken.model`` data, without remote code.

Upstream (``moonshotai/Kimi-K2-*``) ships a ``TikTokenTokenizer`` Python class that
``transformers`` only runs with ``trust_remote_code``. Everything that class needs is data,
so this module rebuilds the same tokenizer as an ordinary Hugging Face fast tokenizer:

- **ranks**: ``tiktoken.model`` holds lines ``<base64 bytes> <rank>``; the rank is the
  token id (163,584 ranks: ids 0..163583);
- **split pattern**: the pre-tokenizer regex of upstream's class (:data:`KIMI_PATTERN`),
  applied with ``Split(pattern, "isolated")``;
- **special tokens**: the 256 ids after the ranks (163584..163839), named from
  ``added_tokens_decoder`` in ``tokenizer_config.json`` and ``<|reserved_token_{id}|>``
  for the unnamed ones; ``bos``/``eos``/``pad``/``unk`` as the config names them.
  K2-Thinking's config adds ``<think>`` (163606) and ``</think>`` (163607); in K2-Instruct
  those slots are reserved and ``<think>`` is three ordinary tokens.

The BPE is expressed the way ``transformers``' ``TikTokenConverter`` does: byte-level
vocabulary strings (GPT-2's ``bytes_to_unicode`` map), merges derived from the ranks
(every split of a token into two tokens, ordered by the merged token's rank), and
``ignore_merges`` so a pre-token that is itself a token maps to it directly, as tiktoken
does. The pre-tokenizer is ``Split`` followed by ``ByteLevel(use_regex=False)``; the
decoder is ``ByteLevel``. ``tests/test_kimi_tokenizer.py`` proves the ids equal a direct
``tiktoken.Encoding`` of the same data.

One upstream behaviour is not reproduced: upstream's ``encode`` cuts very long inputs
into chunks (400,000 characters, and runs of more than 25,000 whitespace or
non-whitespace characters) before calling tiktoken, which can change the ids at the cut
points of such pathological texts. This tokenizer encodes the text whole, as the BPE
itself defines it.

Building takes a couple of seconds (deriving ~300k merges); the result is cached per
``(model_id, revision)`` in the process, so every caller shares one tokenizer object.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from renderers.core.byte_level import bytes_to_unicode

__all__ = [
    "KIMI_PATTERN",
    "NUM_RESERVED_SPECIAL_TOKENS",
    "build_kimi_tokenizer",
    "load_kimi_tokenizer",
    "read_tiktoken_ranks",
    "special_token_names",
]

KIMI_PATTERN = "|".join(
    [
        r"[\p{Han}]+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
        r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
        r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
"""The pre-tokenizer split pattern of upstream's ``TikTokenTokenizer`` (Han runs are
their own pieces; letters exclude Han)."""

NUM_RESERVED_SPECIAL_TOKENS = 256
"""Special-token ids after the ranks (163584..163839 for Kimi-K2)."""

_TOKENIZER_FILES = ("tiktoken.model", "tokenizer_config.json")


def read_tiktoken_ranks(path: str | Path) -> dict[bytes, int]:
    """The BPE ranks of a tiktoken file (lines ``<base64 bytes> <rank>``).

    Raises ``ValueError`` naming the line on malformed content, and when the ranks are not
    exactly ``0..n-1`` (the rank is the token id, so a gap would shift every id after it).
    """
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                token_b64, rank_text = fields
                ranks[base64.b64decode(token_b64, validate=True)] = int(rank_text)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: expected '<base64> <rank>' ({exc})") from None
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError(f"{path}: ranks are not exactly 0..{len(ranks) - 1} with no repeats")
    return ranks


def special_token_names(config: Mapping[str, Any], num_base_tokens: int) -> list[str]:
    """The names of the special tokens ``num_base_tokens .. +255`` in id order: from the
    config's ``added_tokens_decoder`` where named, else ``<|reserved_token_{id}|>``."""
    decoder = config.get("added_tokens_decoder") or {}
    names = []
    for i in range(num_base_tokens, num_base_tokens + NUM_RESERVED_SPECIAL_TOKENS):
        entry = decoder.get(str(i))
        names.append(entry["content"] if entry else f"<|reserved_token_{i}|>")
    return names


def _vocab_and_merges(
    ranks: Mapping[bytes, int],
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level vocabulary and merges equivalent to tiktoken's rank-driven BPE.

    As ``transformers``' ``TikTokenConverter``: every split of a token into two tokens is a
    merge with the merged token's rank as priority; splits of the same token are ordered by
    the ranks of their halves.
    """
    # Byte strings decode as latin-1 one char per byte; translate maps each to its symbol.
    translation = bytes_to_unicode()

    def to_str(b: bytes) -> str:
        return b.decode("latin-1").translate(translation)

    strs = {token: to_str(token) for token in ranks}
    vocab = {strs[token]: rank for token, rank in ranks.items()}
    ranked: list[tuple[int, int, int, bytes, bytes]] = []
    get = ranks.get
    for token, rank in ranks.items():
        for k in range(1, len(token)):
            left = get(token[:k])
            if left is None:
                continue
            right = get(token[k:])
            if right is not None:
                ranked.append((rank, left, right, token[:k], token[k:]))
    ranked.sort()
    merges = [(strs[a], strs[b]) for _, _, _, a, b in ranked]
    return vocab, merges


def build_kimi_tokenizer(
    tiktoken_path: str | Path,
    config: Mapping[str, Any],
    chat_template: str | None = None,
    name_or_path: str | None = None,
) -> Any:
    """A ``transformers`` fast tokenizer equal to Kimi's tiktoken tokenizer.

    ``config`` is the parsed ``tokenizer_config.json`` (special-token names and flags,
    ``bos_token``...). ``chat_template`` becomes the tokenizer's chat template.
    """
    from transformers import PreTrainedTokenizerFast

    ranks = read_tiktoken_ranks(tiktoken_path)
    vocab, merges = _vocab_and_merges(ranks)
    backend = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(KIMI_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)

    num_base = len(ranks)
    decoder_cfg = config.get("added_tokens_decoder") or {}
    added = []
    for i, name in enumerate(special_token_names(config, num_base), num_base):
        entry = decoder_cfg.get(str(i)) or {}
        added.append(
            AddedToken(
                name,
                single_word=bool(entry.get("single_word", False)),
                lstrip=bool(entry.get("lstrip", False)),
                rstrip=bool(entry.get("rstrip", False)),
                normalized=False,
                special=bool(entry.get("special", True)),
            )
        )
    backend.add_tokens(added)
    for i, token in enumerate(added, num_base):
        if backend.token_to_id(token.content) != i:
            raise ValueError(
                f"special token {token.content!r} did not get id {i} "
                "(it collides with an ordinary token)"
            )

    def named(key: str) -> str | None:
        value = config.get(key)
        if isinstance(value, Mapping):
            value = value.get("content")
        return value if isinstance(value, str) else None

    kwargs: dict[str, Any] = {
        "bos_token": named("bos_token"),
        "eos_token": named("eos_token"),
        "unk_token": named("unk_token"),
        "pad_token": named("pad_token"),
        "additional_special_tokens": list(config.get("additional_special_tokens") or []),
        "clean_up_tokenization_spaces": False,
    }
    max_length = config.get("model_max_length")
    if isinstance(max_length, int):
        kwargs["model_max_length"] = max_length
    if chat_template is not None:
        kwargs["chat_template"] = chat_template
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **kwargs)  # type: ignore[no-untyped-call]
    if name_or_path is not None:
        # Set afterwards: given to the constructor, transformers may query the hub for it.
        tokenizer.name_or_path = name_or_path
    return tokenizer


_CACHE: dict[tuple[str, str | None], Any] = {}
_CACHE_LOCK = threading.Lock()


def load_kimi_tokenizer(model_id: str, revision: str | None = None) -> Any:
    """The tokenizer of a Kimi-K2 model (``moonshotai/Kimi-K2-Instruct``...), built from
    its ``tiktoken.model`` and ``tokenizer_config.json`` fetched with the hub client
    (offline from ``HF_HUB_CACHE`` with ``HF_HUB_OFFLINE=1``).

    Cached per ``(model_id, revision)``: callers share one tokenizer object (do not
    mutate it). Its chat template is ``chat_template.jinja`` when the repository has one
    (as ``transformers`` loads it), else the config's ``chat_template``.
    """
    key = (model_id, revision)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is None:
            cached = _load(model_id, revision)
            _CACHE[key] = cached
    return cached


def _load(model_id: str, revision: str | None) -> Any:
    from huggingface_hub import hf_hub_download

    paths = {
        name: Path(hf_hub_download(model_id, name, revision=revision)) for name in _TOKENIZER_FILES
    }
    config = json.loads(paths["tokenizer_config.json"].read_text(encoding="utf-8"))
    chat_template = _optional_file(model_id, "chat_template.jinja", revision)
    if chat_template is None:
        embedded = config.get("chat_template")
        chat_template = embedded if isinstance(embedded, str) else None
    return build_kimi_tokenizer(
        paths["tiktoken.model"], config, chat_template=chat_template, name_or_path=model_id
    )


def _optional_file(model_id: str, filename: str, revision: str | None) -> str | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        path = hf_hub_download(model_id, filename, revision=revision)
    except (EntryNotFoundError, LocalEntryNotFoundError):
        return None
    return Path(path).read_text(encoding="utf-8")
