"""Shared fixtures: real tokenizers from the hub cache (``HF_HUB_CACHE``) or the hub."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import renderers


@functools.cache
def tokenizer_for(model_id: str) -> Any:
    """The real tokenizer of ``model_id``, loaded once per test session."""
    return renderers.load_tokenizer(model_id)


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> Any:
    return tokenizer_for("Qwen/Qwen3-8B")
