"""A supervised training example: token ids, loss weights, and what they came from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from renderers.core.tokens import TokenTable

__all__ = ["SupervisedExample"]


@dataclass(frozen=True, slots=True, eq=False)
class SupervisedExample:
    """Token ids and per-token loss weights (1-D NumPy arrays of equal length).

    Unpacks like a pair, ``tokens, weights = example``. ``renderer`` names the renderer
    that made it; ``table`` (not pickled) decodes its tokens for display.
    ``message_indices`` (int32, when asked for with ``attribution=True``) holds the index
    of the message each token belongs to, -1 for template text outside any message.
    """

    tokens: np.ndarray
    weights: np.ndarray
    renderer: str = ""
    table: TokenTable | None = field(default=None, repr=False)
    message_indices: np.ndarray | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.tokens
        yield self.weights

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> np.ndarray:
        return (self.tokens, self.weights)[index]

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            SupervisedExample,
            (self.tokens, self.weights, self.renderer, None, self.message_indices),
        )

    @property
    def num_trained(self) -> int:
        """How many tokens have a non-zero weight."""
        return int(np.count_nonzero(self.weights))
