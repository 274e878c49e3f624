"""Stable import path: the parsing engine lives in :mod:`renderers.core.parsing`."""

from __future__ import annotations

from renderers.core.parsing import *  # noqa: F403
from renderers.core.parsing import __all__ as __all__
