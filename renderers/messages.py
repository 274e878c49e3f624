"""Stable import path: the message model lives in :mod:`renderers.core.messages`."""

from __future__ import annotations

from renderers.core.messages import *  # noqa: F403
from renderers.core.messages import __all__ as __all__
