"""Loading a model's tokenizer by model id, once per process.

Tokenizers come from the standard Hugging Face hub client, so the same code works online
(downloads on first use) and offline against a hub cache (``HF_HUB_CACHE`` and
``HF_HUB_OFFLINE=1``). Kimi-K2 tokenizers are built from their ``tiktoken.model`` data
without remote code (:mod:`renderers.core.kimi_tokenizer`).

A source ``"module:Class"`` (for example ``"tml_renderers.tokenizers:Qwen35Tokenizer"``)
is a tokenizer object that its class builds without arguments, an ordinary-text tokenizer
(:class:`~renderers.core.vocabulary.OrdinaryTokenizer`); such tokenizers are pickled by
that name.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from typing import Any

from renderers.core.kimi_tokenizer import load_kimi_tokenizer
from renderers.core.vocabulary import class_spec

__all__ = [
    "LOADING_VARIABLES",
    "TokenizerSource",
    "TokenizerUnavailableError",
    "load_tokenizer",
    "loading_environment",
    "source_of",
]

LOADING_VARIABLES = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "HF_ENDPOINT",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "TRANSFORMERS_OFFLINE",
    "TIKTOKEN_ENCODINGS_BASE",
    "TIKTOKEN_RS_CACHE_DIR",
)
"""The environment variables that decide where tokenizers load from (the hub client's
cache and offline mode, Harmony's tiktoken encodings). Access tokens are not among them:
give those to workers yourself."""

# Model ids whose tokenizer must be built from tiktoken data (no remote code).
# Kimi-K2.5 ships the same tiktoken data (its vocabulary equals K2-Thinking's, checked
# against tml-renderers' KimiK25Tokenizer in tests/test_token_table.py).
_KIMI_MODEL_IDS = (
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2-Thinking",
    "moonshotai/Kimi-K2.5",
)
_CLASS_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")

TokenizerSource = tuple[str, str | None]
"""Where a tokenizer comes from: ``(model id, local path or "module:Class", revision)``."""

_LOADED: dict[TokenizerSource, Any] = {}
_LOCK = threading.Lock()


class TokenizerUnavailableError(OSError):
    """The tokenizer of a model could not be found (not in the hub cache, no network)."""


def load_tokenizer(model_id: str, revision: str | None = None) -> Any:
    """The tokenizer of ``model_id`` (a hub id, a local directory, or ``"module:Class"``
    naming a tokenizer class that takes no arguments), loaded once per process and shared
    by every caller (do not mutate it).

    Raises :class:`TokenizerUnavailableError` naming the model and the hub cache when the
    files are neither cached nor downloadable, ``ValueError`` when a ``"module:Class"``
    cannot be imported or built.
    """
    key = (model_id, revision)
    with _LOCK:
        tokenizer = _LOADED.get(key)
    if tokenizer is None:
        tokenizer = _load(model_id, revision)
        with _LOCK:
            tokenizer = _LOADED.setdefault(key, tokenizer)
    return tokenizer


def loading_environment() -> dict[str, str]:
    """The :data:`LOADING_VARIABLES` set in this process: what another process (a Ray
    worker, which does not inherit the driver's environment) needs to load the same
    tokenizers the same way."""
    return {name: os.environ[name] for name in LOADING_VARIABLES if name in os.environ}


def source_of(tokenizer: Any) -> TokenizerSource | None:
    """Where ``tokenizer`` can be loaded again by name: the ``(model id, revision)``
    :func:`load_tokenizer` loaded it from in this process, or ``("module:Class", None)``
    for a tokenizer its class builds without arguments (which this process then shares
    under that name); ``None`` for any other tokenizer."""
    with _LOCK:
        for key, loaded in _LOADED.items():
            if loaded is tokenizer:
                return key
        spec = class_spec(tokenizer)
        if spec is None:
            return None
        _LOADED.setdefault((spec, None), tokenizer)
        return (spec, None)


def _load(model_id: str, revision: str | None) -> Any:
    if _CLASS_SPEC.fullmatch(model_id):
        return _build_from_class(model_id)
    try:
        if model_id in _KIMI_MODEL_IDS:
            return load_kimi_tokenizer(model_id, revision=revision)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_id, revision=revision)
    except OSError as exc:  # huggingface_hub's errors (offline, missing file) are OSErrors
        raise TokenizerUnavailableError(_unavailable(model_id, exc)) from exc


def _build_from_class(spec: str) -> Any:
    module_name, _, qualname = spec.partition(":")
    try:
        factory: Any = importlib.import_module(module_name)
        for attribute in qualname.split("."):
            factory = getattr(factory, attribute)
        return factory()
    except (ImportError, AttributeError, TypeError) as exc:
        raise ValueError(f"cannot build the tokenizer {spec!r}: {exc}") from None


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
