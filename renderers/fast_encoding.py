"""Stable import path: the fast exact encoder lives in :mod:`renderers.core.fast_encoding`."""

from __future__ import annotations

from renderers.core.fast_encoding import *  # noqa: F403
from renderers.core.fast_encoding import __all__ as __all__
