"""Typed access to the known attributes of a ``<thinking …>`` element.

A :class:`~renderers.core.messages.ThinkingPart` keeps its attributes as written
(``part.attribute("confidence") == "0.7"``); these functions read the known ones as
values, with the convention's defaults applied only here, when asked.
"""

from __future__ import annotations

import math
from typing import overload

from renderers.core.messages import ThinkingPart

__all__ = [
    "DEFAULT_CONFIDENCE",
    "attribute_problems",
    "confidence",
    "confidence_problem",
    "thought_type",
]

DEFAULT_CONFIDENCE = 0.5
"""The confidence of a thought whose tag gives none."""


def confidence_problem(value: str) -> str | None:
    """Why ``value`` is not a confidence (a number from 0 to 1), or ``None`` if it is."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if 0.0 <= number <= 1.0:
        return None
    return f"confidence: expected a number from 0 to 1, got {value!r}"


@overload
def confidence(part: ThinkingPart, default: float = ...) -> float: ...
@overload
def confidence(part: ThinkingPart, default: None) -> float | None: ...
def confidence(part: ThinkingPart, default: float | None = DEFAULT_CONFIDENCE) -> float | None:
    """The part's ``confidence`` attribute as a number from 0 to 1, or ``default`` when
    it has none (raises ``ValueError`` naming the value when it is not such a number)."""
    value = part.attribute("confidence")
    if value is None:
        return default
    problem = confidence_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return float(value)


def thought_type(part: ThinkingPart) -> str | None:
    """The part's ``thought_type`` attribute (``"planning"``, ``"verification"``, ...),
    or ``None``."""
    return part.attribute("thought_type")


def attribute_problems(part: ThinkingPart) -> list[str]:
    """Why the part's known attributes do not read as their types (empty when they do)."""
    value = part.attribute("confidence")
    problem = None if value is None else confidence_problem(value)
    return [] if problem is None else [problem]
