"""Loading a model's tokenizer by model id, once per process.

Tokenizers come from the standard Hugging Face hub client, so the same code works online
(downloads on first use) and offline against a hub cache (``HF_HUB_CACHE`` and
``HF_HUB_OFFLINE=1``). Kimi-K2 tokenizers are built from their ``tiktoken.model`` data
without remote code (:mod:`renderers.core.kimi_tokenizer`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from renderers.core.kimi_tokenizer import load_kimi_tokenizer

__all__ = ["TokenizerSource", "TokenizerUnavailableError", "load_tokenizer", "source_of"]

# Model ids whose tokenizer must be built from tiktoken data (no remote code).
_KIMI_MODEL_IDS = ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Thinking")

TokenizerSource = tuple[str, str | None]
"""Where a tokenizer comes from: ``(model id or local path, revision)``."""

_LOADED: dict[TokenizerSource, Any] = {}
_LOCK = threading.Lock()


class TokenizerUnavailableError(OSError):
    """The tokenizer of a model could not be found (not in the hub cache, no network)."""


def load_tokenizer(model_id: str, revision: str | None = None) -> Any:
    """The tokenizer of ``model_id`` (a hub id or a local directory), loaded once per
    process and shared by every caller (do not mutate it).

    Raises :class:`TokenizerUnavailableError` naming the model and the hub cache when the
    files are neither cached nor downloadable.
    """
    key = (model_id, revision)
    with _LOCK:
        tokenizer = _LOADED.get(key)
    if tokenizer is None:
        tokenizer = _load(model_id, revision)
        with _LOCK:
            tokenizer = _LOADED.setdefault(key, tokenizer)
    return tokenizer


def source_of(tokenizer: Any) -> TokenizerSource | None:
    """The ``(model id, revision)`` :func:`load_tokenizer` loaded ``tokenizer`` from in this
    process, or ``None`` for a tokenizer it did not load (which cannot be reloaded by name)."""
    with _LOCK:
        for key, loaded in _LOADED.items():
            if loaded is tokenizer:
                return key
    return None


def _load(model_id: str, revision: str | None) -> Any:
    try:
        if model_id in _KIMI_MODEL_IDS:
            return load_kimi_tokenizer(model_id, revision=revision)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_id, revision=revision)
    except OSError as exc:  # huggingface_hub's errors (offline, missing file) are OSErrors
        raise TokenizerUnavailableError(_unavailable(model_id, exc)) from exc


def _unavailable(model_id: str, exc: Exception) -> str:
    from huggingface_hub import constants

    cache = os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE
    offline = constants.HF_HUB_OFFLINE
    how = (
        "HF_HUB_OFFLINE=1 is set, so nothing is downloaded" if offline else "downloading it failed"
    )
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        f"cannot load the tokenizer of {model_id!r}: it is not in the hub cache {cache} and "
        f"{how} ({first_line}). Point HF_HUB_CACHE at a cache that holds it, or run once "
        "with network access."
    )
