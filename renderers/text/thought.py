"""Thoughts as values: the typed view of a thinking part's known ``<thinking …>``
attributes.

A :class:`~renderers.core.messages.ThinkingPart` keeps its attributes as written
(``part.attribute("confidence") == "0.7"``), so nothing the model wrote is lost.
:class:`Thought` reads the known ones as the thought-stream extraction document
specifies them::

    attribute      type     default
    thought        string   (the part's text)
    thought_type   string   none
    confidence     number   0.5

A confidence that is not a number from 0 to 1 (``"high"``, ``"1.5"``) is not one: the
document does not say what then, so it reads as the default, the text as written stays
in the attributes, and the splitter reports it as an issue. Nothing here raises on what a
model wrote.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, overload

from renderers.core.messages import Part, ThinkingPart

__all__ = [
    "DEFAULT_CONFIDENCE",
    "Thought",
    "attribute_problems",
    "confidence",
    "confidence_problem",
    "thought_type",
    "thoughts",
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
    """The part's ``confidence`` attribute as a number from 0 to 1, or ``default`` when it
    has none or one that is not such a number (``default=None`` tells them apart from a
    given confidence; the text as written is in ``part.attributes``)."""
    value = part.attribute("confidence")
    if value is None or confidence_problem(value) is not None:
        return default
    return float(value)


def thought_type(part: ThinkingPart) -> str | None:
    """The part's ``thought_type`` attribute (``"planning"``, ``"verification"``, ...),
    or ``None``: it has no default."""
    return part.attribute("thought_type")


def attribute_problems(part: ThinkingPart) -> list[str]:
    """Why the part's known attributes do not read as their types (empty when they do)."""
    value = part.attribute("confidence")
    problem = None if value is None else confidence_problem(value)
    return [] if problem is None else [problem]


@dataclass(frozen=True, slots=True)
class Thought:
    """A thinking part with its known attributes typed.

    ``thought_type`` is the ``thought_type`` attribute or ``None``; ``confidence`` the
    ``confidence`` attribute as a number, :data:`DEFAULT_CONFIDENCE` when absent or not a
    number from 0 to 1; ``attributes`` the others as written, in source order (a
    ``thought_id``, or a ``confidence`` that is not a number, stays here).
    """

    text: str
    thought_type: str | None = None
    confidence: float = DEFAULT_CONFIDENCE
    incomplete: bool = False
    attributes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, part: ThinkingPart) -> Thought:
        """The typed view of ``part``."""
        kind = thought_type(part)
        number = confidence(part, default=None)
        rest: list[tuple[str, str]] = []
        typed = {"thought_type": kind is not None, "confidence": number is not None}
        for name, value in part.attributes:
            key = name.lower()
            if typed.get(key):
                typed[key] = False  # the first of a name is the one read (as in HTML)
                continue
            rest.append((name, value))
        return cls(
            part.text,
            kind,
            DEFAULT_CONFIDENCE if number is None else number,
            part.incomplete,
            tuple(rest),
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"thought", "thoughtType", "confidence", "incomplete", "attributes"}`` as the
        thought-stream document names them (``thoughtType`` only when given,
        ``incomplete`` only when true, ``attributes`` only when there are any)."""
        out: dict[str, Any] = {"thought": self.text}
        if self.thought_type is not None:
            out["thoughtType"] = self.thought_type
        out["confidence"] = self.confidence
        if self.incomplete:
            out["incomplete"] = True
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        return out


def thoughts(parts: Iterable[Part]) -> list[Thought]:
    """The typed view of each thinking part of ``parts``, in order."""
    return [Thought.of(p) for p in parts if type(p) is ThinkingPart]
