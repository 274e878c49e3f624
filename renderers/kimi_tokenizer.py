"""Stable import path: the Kimi tokenizer loader lives in :mod:`renderers.core.kimi_tokenizer`."""

from __future__ import annotations

from renderers.core.kimi_tokenizer import *  # noqa: F403
from renderers.core.kimi_tokenizer import __all__ as __all__
