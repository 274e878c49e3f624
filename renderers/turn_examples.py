"""Supervised examples that train every turn as the model samples it.

A conversation rendered whole trains each assistant turn after the tokens the template
writes before it. Those are the turn's generation prompt only where the format's history
extends turn by turn. Where it does not (Qwen3 writes a history turn without the think
block its prompt ends with, templates drop earlier reasoning, Harmony ends an earlier
answer with ``<|end|>`` where the model sampled ``<|return|>``), the whole conversation
would train tokens the model never samples there, or the renderer refuses the turn.

:func:`split_examples` finds the examples that train every turn exactly as the format
trains it when it is the last turn of the conversation cut after it (its *reference*:
the untrained prefix is its generation prompt, the trained tokens run to its stop token),
and no more examples than needed: the whole conversation when every turn extends into
it, else each turn in the longest conversation (the whole one, or one cut after a turn)
that writes it as its reference does. Comparing with the reference, rather than asking a
format when it extends, makes the rule the same for every format, the template-driven
one included, and exact by construction.

Compared with tinker-cookbook's ``Renderer.build_supervised_examples`` (v0.5.5, commit
9dfcc3a2, ``tinker_cookbook/renderers/base.py``): there a renderer-wide flag
(``has_extension_property``) decides, and without it every trained assistant message
becomes its own example (the conversation cut after it); modes that train other roles
raise ``NotImplementedError``. Here the decision is per conversation and per turn, turns
that extend together share an example (fewer repeated prefixes), and other trained
messages are trained once, in the whole conversation's example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from renderers.supervised_example import SupervisedExample

__all__ = ["ExampleBuilder", "split_examples", "trains_as"]

ExampleBuilder = Callable[[int, Sequence[int], bool], SupervisedExample]
"""``build(cut, turns, others)``: the supervised example of the conversation's first
``cut`` messages that trains the assistant messages ``turns`` and, with ``others``, the
trained messages that are not turns (other roles; template text under ``train_on="all"``);
a ``ValueError`` where the renderer refuses it."""

Rendering = Callable[[int], Sequence[int]]
"""``rendered(cut)``: the ids of the conversation's first ``cut`` messages with nothing
trained (never refused for what a trained turn would need)."""


def split_examples(
    num_messages: int,
    turns: Sequence[int],
    others: bool,
    build: ExampleBuilder,
    rendered: Rendering,
) -> list[SupervisedExample]:
    """The examples that train each of ``turns`` (assistant message indices) once, as its
    reference trains it, in conversation order; ``others`` are trained once, in the first
    example built (the whole conversation).

    The conversations tried go from the longest down: the whole one, then the one cut
    after the last turn not yet trained. Each takes the remaining turns it writes as their
    references do (checked token by token, weights included); the last turn of a cut
    conversation is its own reference, so every round trains at least one turn and a
    conversation gives at most one example per turn. Turns that extend into a longer
    conversation share its example: Qwen3's turns after the last user message (reasoning
    kept) are one example, not one each, which keeps the repeated prefixes, and the
    tokens trained per token written, down.
    """
    references: dict[int, SupervisedExample] = {}

    def reference(t: int) -> SupervisedExample:
        if t not in references:
            references[t] = build(t + 1, (t,), False)
        return references[t]

    remaining = sorted(turns)
    if not remaining or remaining == [num_messages - 1]:
        # Nothing to split: the whole conversation is the (only) turn's reference.
        return [build(num_messages, remaining, others)]
    examples: list[SupervisedExample] = []
    cut = num_messages
    with_others = others
    try_all = True  # the first conversation tries every turn at once (the common case)
    while remaining or with_others:
        if remaining == [cut - 1] and not with_others:
            example: SupervisedExample | None = reference(cut - 1)
            taken = remaining
        else:
            example, taken = _group(
                cut, remaining, with_others, try_all, build, rendered, reference
            )
        if example is not None:
            examples.append(example)
        remaining = [t for t in remaining if t not in taken]
        with_others = try_all = False
        if remaining:
            cut = remaining[-1] + 1
    examples.reverse()
    return examples


def _group(
    cut: int,
    candidates: list[int],
    with_others: bool,
    try_all: bool,
    build: ExampleBuilder,
    rendered: Rendering,
    reference: Callable[[int], SupervisedExample],
) -> tuple[SupervisedExample | None, list[int]]:
    """The example of the first ``cut`` messages and the turns it trains: every candidate
    when they all extend into it (tried first with ``try_all``), else those whose tokens
    the untrained rendering shares with their references (always the last message when it
    is a turn), else the last turn alone."""
    if try_all:
        example = _built(build, cut, candidates, with_others)
        if example is not None and all(trains_as(example, reference(t)) for t in candidates):
            return example, candidates
    ids = np.asarray(rendered(cut), dtype=np.int64)
    group = [t for t in candidates if t == cut - 1 or _written_as(ids, reference(t))]
    if group == [cut - 1] and not with_others:
        return reference(cut - 1), group
    if group != candidates or not try_all:
        example = _built(build, cut, group, with_others) if group or with_others else None
        if example is not None and all(trains_as(example, reference(t)) for t in group):
            return example, group
    if with_others:
        return build(cut, (), True), []
    if cut - 1 in candidates:
        return reference(cut - 1), [cut - 1]
    return None, []


def _built(
    build: ExampleBuilder, cut: int, turns: Sequence[int], others: bool
) -> SupervisedExample | None:
    """The example, or ``None`` where the renderer refuses it (a turn it cannot train in
    this conversation: the smaller groups that follow find which)."""
    try:
        return build(cut, turns, others)
    except ValueError:
        return None


def _trained_span(reference: SupervisedExample) -> tuple[int, int] | None:
    trained = np.flatnonzero(reference.weights)
    if not len(trained):
        return None
    return int(trained[0]), int(trained[-1]) + 1


def trains_as(example: SupervisedExample, reference: SupervisedExample) -> bool:
    """Whether ``example`` trains a turn as its ``reference`` does: the same tokens up to
    the end of the turn's trained span (its untrained prefix included) and the same
    weights on that span. A reference that trains nothing is matched by any example."""
    span = _trained_span(reference)
    if span is None:
        return True
    start, end = span
    return (
        len(example.tokens) >= end
        and np.array_equal(example.tokens[:end], reference.tokens[:end])
        and np.array_equal(example.weights[start:end], reference.weights[start:end])
    )


def _written_as(ids: np.ndarray, reference: SupervisedExample) -> bool:
    """Whether a rendering writes the tokens of the reference up to its trained end."""
    span = _trained_span(reference)
    if span is None:
        return True
    end = span[1]
    return len(ids) >= end and np.array_equal(ids[:end], reference.tokens[:end])
