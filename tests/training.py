"""Building supervised examples under the library's one reasoning rule, for tests whose
subject is something else (token parity, weights).

A trained turn whose reasoning the format cannot write is refused by default
(``ValueError`` naming the ``reasoning`` option); ``reasoning="drop"`` trains it without
that reasoning, which is then what the template renders.
"""

from __future__ import annotations

from typing import Any

from renderers.supervised_example import SupervisedExample

DROP_HINT = "reasoning='drop'"


def supervised_or_dropped(
    r: Any, messages: Any, *args: Any, **kwargs: Any
) -> tuple[SupervisedExample, bool]:
    """The supervised example, or, when the renderer refuses a trained turn's reasoning
    (the error names the option), the example with ``reasoning="drop"``; and whether it
    was refused. Any other ``ValueError`` propagates."""
    try:
        return r.build_supervised_example(messages, *args, **kwargs), False
    except ValueError as exc:
        if DROP_HINT not in str(exc):
            raise
    return r.build_supervised_example(messages, *args, **kwargs, reasoning="drop"), True
