"""Stable import path: tokenizer access lives in :mod:`renderers.core.tokens` and
:mod:`renderers.core.loading`."""

from __future__ import annotations

from renderers.core.loading import *  # noqa: F403
from renderers.core.loading import __all__ as _all1
from renderers.core.tokens import *  # noqa: F403
from renderers.core.tokens import __all__ as _all0

__all__ = [*_all0, *_all1]
