"""Token views: see what is trained, token by token, in a terminal or a browser.

>>> view = supervised_view(example.tokens, example.weights, renderer)
>>> print(view.to_text(color=True))          # trained green, untrained dim, headers
>>> Path("example.html").write_text(view.to_html())   # one self-contained page
>>> completion_view(renderer.parse_response(ids), ids, renderer)   # a notebook shows it

A view needs the ids, their weights and the format (anything with the renderer's
``table`` and ``message_markers``): a :class:`~renderers.core.result.ParseResult` holds
neither its ids nor a tokenizer, so its view is built from the result, the completion ids
and the renderer. :class:`~renderers.supervised_example.SupervisedExample` keeps its table and
markers, so ``example.to_html()`` and its notebook display need nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from renderers.core.result import ParseResult
from renderers.core.tokens import TokenTable
from renderers.view.html import html_page, notebook_html
from renderers.view.model import (
    MessageMarkers,
    PartSpan,
    RoleCount,
    Segment,
    Summary,
    TokenFormat,
    ViewData,
    message_segments,
    part_spans,
    token_text,
)
from renderers.view.terminal import terminal_text

__all__ = [
    "MessageMarkers",
    "PartSpan",
    "RoleCount",
    "Segment",
    "Summary",
    "TokenFormat",
    "TokenView",
    "completion_view",
    "supervised_view",
    "token_text",
]


class Format(Protocol):
    """What a view needs of a format (a :class:`renderers.Renderer` has both)."""

    @property
    def table(self) -> TokenTable: ...

    @property
    def message_markers(self) -> MessageMarkers: ...


class TokenView(ViewData):
    """Tokens, weights, messages and parts, ready to print, save or show in a notebook."""

    __slots__ = ()

    def to_text(self, color: bool = False) -> str:
        """Terminal text: ANSI colours when ``color``, plain markers otherwise."""
        return terminal_text(self, color)

    def to_html(self) -> str:
        """One self-contained HTML page (no network, no external assets)."""
        return html_page(self)

    def _repr_html_(self) -> str:
        return notebook_html(self)


def supervised_view(
    tokens: Sequence[int] | np.ndarray,
    weights: Sequence[float] | np.ndarray,
    fmt: Format,
    title: str = "",
    sequence_lengths: Sequence[int] | None = None,
    completions: Sequence[tuple[int, ParseResult]] = (),
) -> TokenView:
    """The view of a training example (a rendered conversation, a prepared row, a
    rollout): its tokens, weights and messages.

    A packed row's ``sequence_lengths`` split it into sequences, each with its own
    messages; tokens after them are padding. ``completions`` are the parsed completions
    the tokens hold (a rollout's sampled turns) with the position each starts at: their
    parts are outlined and their issues marked.
    """
    ids = _checked_ids(tokens, fmt.table)
    table, markers = fmt.table, fmt.message_markers
    if sequence_lengths is None:
        segments = message_segments(ids, table, markers)
    else:
        if any(n < 0 for n in sequence_lengths) or sum(sequence_lengths) > len(ids):
            raise ValueError(
                f"sequence lengths {list(sequence_lengths)} do not fit {len(ids)} tokens"
            )
        segments = []
        start = 0
        for k, n in enumerate(sequence_lengths):
            segments += message_segments(ids, table, markers, start, start + n, label=f"seq {k}")
            start += n
        if start < len(ids):
            segments.append(Segment(start, len(ids), "padding", "after the sequences"))
    n = len(ids)
    parts = tuple(
        replace(p, start=min(p.start + at, n), end=min(p.end + at, n))
        for at, result in completions
        for p in part_spans(result)
    )
    issues = tuple(
        (at + issue.position, issue.message)
        for at, result in completions
        for issue in result.issues
    )
    w = np.asarray(weights, dtype=np.float32)
    return TokenView(ids, w, table, tuple(segments), parts, title, (), issues)


def completion_view(
    result: ParseResult,
    completion_ids: Sequence[int] | np.ndarray,
    fmt: Format,
    title: str = "",
) -> TokenView:
    """The view of a parsed completion: parts outlined with their token spans, how it
    ended, the issues the parser repaired. Weights are what a rollout trains: 1 on the
    message's tokens (its stop token included), 0 on the tokens after the stop token."""
    table = fmt.table
    ids = _checked_ids(completion_ids, table)
    kept = len(ids) - len(result.trailing_ids) if result.stop_token_id is not None else len(ids)
    weights = np.zeros(len(ids), dtype=np.float32)
    weights[:kept] = 1
    segments = message_segments(ids, table, fmt.message_markers, 0, kept, leading="assistant")
    if kept < len(ids):
        segments.append(Segment(kept, len(ids), "trailing", "after the stop token"))
    notes = [f"termination: {result.termination.value}"]
    if result.stop_token_id is not None:
        notes.append(f"stop token: {token_text(table, result.stop_token_id)}")
    issues = tuple((issue.position, issue.message) for issue in result.issues)
    return TokenView(
        ids, weights, table, tuple(segments), part_spans(result), title, tuple(notes), issues
    )


def _checked_ids(ids: Sequence[int] | np.ndarray, table: TokenTable) -> np.ndarray:
    values = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    table.check_ids(values)
    return np.asarray(values, dtype=np.int64)
