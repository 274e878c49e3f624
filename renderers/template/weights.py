"""Supervised weights from a template's structure: which tokens the model samples for an
assistant turn, found from the template's own renderings.

A turn starts where its generation prompt (the template's rendering of the messages
before it, with ``add_generation_prompt=True``) ends, and runs through the first stop
token, before the next message's text; without a stop token, through the turn's own text
and as far as the template's rendering of the conversation ending with that turn agrees
with the whole. Where the template renders the conversation before the turn otherwise,
the last trained turn is an error (its untrained prefix would not be the prompt the model
saw); an earlier turn is found after the generation prompt's header, in its history form.
The attribution placeholders (:class:`Owners`) say which message each token holds text of.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from renderers.core.messages import Message, ThinkingPart
from renderers.core.tokens import TokenTable
from renderers.template.placeholders import Rendering

__all__ = ["Owners", "check_written", "common_prefix", "owners_of", "turn_span"]

RenderIds = Callable[[list[Message], bool], list[int]]
"""The ids of the template's rendering of messages (with or without the generation
prompt), with the call's tools and options."""


@dataclass(frozen=True, slots=True)
class Owners:
    """For each token of a rendering, the index of the message whose text it holds (the
    latest, for a token merging text of two; -1: template text only)."""

    message: np.ndarray

    def later(self, t: int, start: int) -> int:
        """The first token at or after ``start`` holding text of a message after ``t``."""
        hits = np.flatnonzero(self.message[start:] > t)
        return start + int(hits[0]) if hits.size else len(self.message)

    def after_header(self, t: int, header: list[int], ids: list[int]) -> int | None:
        """Where turn ``t``'s tokens start: after the longest leading part of ``header``
        that occurs between the last token holding an earlier message's text and the first
        holding ``t``'s (its last occurrence there)."""
        own = np.flatnonzero(self.message == t)
        if not own.size:
            return None
        first = int(own[0])
        before = np.flatnonzero((self.message[:first] >= 0) & (self.message[:first] < t))
        low = int(before[-1]) + 1 if before.size else 0
        for n in range(len(header), 0, -1):
            for k in range(first - n, low - 1, -1):
                if ids[k : k + n] == header[:n]:
                    return k + n
        return None

    def last(self, t: int, start: int, end: int) -> int:
        """The last token in ``[start, end)`` holding text of message ``t`` (-1: none)."""
        own = np.flatnonzero(self.message[start:end] == t)
        return start + int(own[-1]) if own.size else -1

    def earlier(self, t: int, start: int) -> int | None:
        """The first message before ``t`` with text at or after ``start``, if any."""
        tail = self.message[start:]
        hits = tail[(tail >= 0) & (tail < t)]
        return int(hits.min()) if hits.size else None


def owners_of(rendering: Rendering, table: TokenTable, n_messages: int) -> Owners:
    """Which message each token of an attributed rendering holds text of."""
    writer = rendering.writer(table)
    pieces = writer.piece_weights([j + 1 for j in range(n_messages)], [False] * n_messages)
    latest = writer.ids_and_weights(pieces).weights
    return Owners(latest.astype(np.int64) - 1)


def turn_span(
    render: RenderIds,
    table: TokenTable,
    stops: frozenset[int],
    messages: list[Message],
    t: int,
    ids: list[int],
    owners: Owners | None,
    *,
    strict: bool,
) -> tuple[int, int]:
    """The ``[start, end)`` tokens of ``ids`` (the rendering of ``messages``) the model
    samples for assistant turn ``t`` (see the module docs; ``strict``: the turn's untrained
    prefix must be its generation prompt)."""
    prompt = render(messages[:t], True)
    start = common_prefix(prompt, ids)
    if start < len(prompt):
        prompt_text = table.decode(prompt)
        full_text = table.decode(ids)
        if not full_text.startswith(prompt_text):  # not only a merge at the boundary
            earlier = owners.earlier(t, start) if owners is not None else None
            if strict or owners is None:
                raise ValueError(_prefix_error(t, prompt_text, full_text, earlier, strict))
            if earlier is not None:
                before = render(messages[:t], False)
                header = prompt[len(before) :] if prompt[: len(before)] == before else []
                found = owners.after_header(t, header, ids) if header else None
                if found is None:
                    raise ValueError(_prefix_error(t, prompt_text, full_text, earlier, strict))
                start = found
        elif start < len(ids):
            # Only a merge at the boundary: the token at ``start`` holds the end of the
            # prompt and the turn's first text, which the model never samples as one.
            text = table.decode([ids[start]])
            raise ValueError(
                f"messages[{t}]: the token {text!r} holds the end of the generation prompt "
                "and text of this trained turn (the template writes no control token "
                "between them), so it cannot be trained; train another turn or change the text"
            )
    bound = owners.later(t, start) if owners is not None else len(ids)
    for k in range(start, bound):
        if ids[k] in stops:
            return start, k + 1
    alone = render(messages[: t + 1], False)
    end = common_prefix(alone, ids)
    if owners is not None:
        end = max(end, owners.last(t, start, bound) + 1)
    end = min(end, bound)
    if end <= start:
        raise ValueError(f"messages[{t}]: the chat template writes nothing for this turn")
    return start, end


def _prefix_error(t: int, prompt: str, full: str, earlier: int | None, strict: bool) -> str:
    k = common_prefix(prompt, full)
    where = f" (inside messages[{earlier}])" if earlier is not None else ""
    what = (
        "the untrained prefix would not be the generation prompt the model saw"
        if strict
        else "its sampled tokens cannot be found"
    )
    return (
        f"messages[{t}]: the chat template renders the conversation before this turn "
        f"differently from its generation prompt at character {k}{where}: prompt "
        f"{prompt[k : k + 30]!r}, conversation {full[k : k + 30]!r}; {what}. Train on a "
        "conversation that ends with this turn, or build one example per turn"
    )


def check_written(
    messages: list[Message],
    t: int,
    rendering: Rendering | None,
    raw_text: Callable[[list[Message]], str],
) -> None:
    """The trained last turn ``t`` must not lose its reasoning, text or calls: each must
    be in the attributed ``rendering`` whole. Without attribution, reasoning must change
    the template's output (``raw_text`` of messages)."""
    m = messages[t]
    if rendering is not None:
        written = rendering.written(t)
        for path in _paths(m):
            if path not in written:
                raise ValueError(
                    f"messages[{t}].{path}: the chat template drops this (or part of it) "
                    "from the trained turn, so training on it would silently lose it; "
                    "remove it or use a template (or template option) that keeps it"
                )
        return
    if m.thinking and m.thinking.strip():
        plain = Message(m.role, [p for p in m.parts if type(p) is not ThinkingPart], m.name)
        if raw_text(messages) == raw_text([*messages[:t], plain]):
            raise ValueError(
                f"messages[{t}].reasoning_content: the chat template drops this from the "
                "trained turn, so training on it would silently lose it; remove it"
            )


def _paths(m: Message) -> list[str]:
    """The fields of an assistant message a template should write."""
    paths = []
    if m.thinking and m.thinking.strip():
        paths.append("reasoning_content")
    if m.text.strip():
        paths.append("content")
    for k, call in enumerate(m.tool_calls):
        paths.append(f"tool_calls[{k}].function.name")
        if call.arguments.strip() not in ("", "{}"):
            paths.append(f"tool_calls[{k}].function.arguments")
    return paths


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n
