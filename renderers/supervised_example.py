"""A supervised training example: token ids, loss weights, and what they came from."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from renderers.core.tokens import TokenTable
from renderers.view import MessageMarkers, TokenFormat, TokenView, supervised_view

__all__ = ["SupervisedExample"]


@dataclass(frozen=True, slots=True, eq=False)
class SupervisedExample:
    """Token ids and per-token loss weights (1-D NumPy arrays of equal length).

    Unpacks like a pair, ``tokens, weights = example``. ``renderer`` names the renderer
    that made it; ``table`` and ``markers`` (not pickled) decode its tokens and find its
    messages for display: ``example.to_html()``, ``print(example.to_text())``, or just
    ``example`` in a notebook. ``message_indices`` (int32, when asked for with
    ``attribution=True``) holds the index of the message each token belongs to, -1 for
    template text outside any message. ``turns`` are the indices of the assistant messages
    it trains (each as the model samples it), ``num_messages`` how many messages of the
    conversation it renders: all of them, or (from
    :meth:`~renderers.Renderer.build_supervised_examples`) the conversation cut after its
    last trained turn.
    """

    tokens: np.ndarray
    weights: np.ndarray
    renderer: str = ""
    table: TokenTable | None = field(default=None, repr=False)
    message_indices: np.ndarray | None = field(default=None, repr=False)
    markers: MessageMarkers = field(default_factory=MessageMarkers, repr=False)
    turns: tuple[int, ...] = ()
    num_messages: int | None = None

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
            (
                self.tokens,
                self.weights,
                self.renderer,
                None,
                self.message_indices,
                MessageMarkers(),
                self.turns,
                self.num_messages,
            ),
        )

    @property
    def num_trained(self) -> int:
        """How many tokens have a non-zero weight."""
        return int(np.count_nonzero(self.weights))

    def view(self, title: str = "") -> TokenView:
        """The token view: every token with its weight, under its message's header."""
        if self.table is None:
            raise ValueError(
                "this example has no token table (it is not pickled): view it with "
                "renderers.view.supervised_view(example.tokens, example.weights, renderer)"
            )
        fmt = TokenFormat(self.table, self.markers)
        return supervised_view(self.tokens, self.weights, fmt, title or self.renderer)

    def to_text(self, color: bool = False) -> str:
        """The token view as terminal text (ANSI colours when ``color``)."""
        return self.view().to_text(color)

    def to_html(self) -> str:
        """The token view as one self-contained HTML page."""
        return self.view().to_html()

    def _repr_html_(self) -> str | None:
        # Without a table (an unpickled example) a notebook falls back to the repr.
        return None if self.table is None else self.view()._repr_html_()
