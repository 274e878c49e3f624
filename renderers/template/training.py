"""Supervised examples from a chat template's structure (the template renderer's training
side): each trained turn from its generation prompt through its stop token, as the model
samples it, and the ``reasoning`` rule for reasoning the template does not write."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from renderers.core.messages import Message, ThinkingPart
from renderers.core.options import Reasoning, reasoning_error
from renderers.template.chat_template import ChatTemplate
from renderers.template.placeholders import Rendering
from renderers.template.weights import Owners, check_written, common_prefix, owners_of, turn_span

__all__ = ["TemplateTurns"]


@dataclass(frozen=True, slots=True)
class TemplateTurns:
    """Trains turns of ``chat``'s conversations: ``stops`` end a turn, ``opens_reasoning``
    says whether a generation prompt ends inside the reasoning it opens, ``reasoning`` is
    the rule for reasoning the template drops (``"error"`` or ``"drop"``)."""

    chat: ChatTemplate
    stops: frozenset[int]
    opens_reasoning: Callable[[list[int]], bool]
    reasoning: Reasoning

    def example(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        trained: list[int],
        kwargs: tuple[tuple[str, Any], ...],
    ) -> tuple[list[Message], np.ndarray, np.ndarray]:
        """The messages as rendered (reasoning dropped under ``"drop"``), the ids, and
        weight 1 on what the model samples for each of the ``trained`` turns."""
        if not trained:
            raise ValueError("train_on: no message is trained")
        msgs, rendering, owners = self.without_lost_reasoning(msgs, trained, tools, kwargs)
        last = trained[-1]
        ids, owners = self._as_sampled(msgs, last, tools, kwargs, rendering, owners)
        weights = np.zeros(len(ids), dtype=np.float32)
        for t in trained:
            start, end = self.turn_span(msgs, t, tools, kwargs, ids, owners, strict=t == last)
            weights[start:end] = 1.0
        if last == len(msgs) - 1:
            self._check_written(msgs, last, tools, kwargs, rendering, owners)
        return msgs, np.asarray(ids, dtype=np.int64), weights

    def whole(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
    ) -> tuple[list[Message], list[int]]:
        """Every message trained (``train_on="all"``): the messages and the ids."""
        msgs, rendering, owners = self.without_lost_reasoning(msgs, range(len(msgs)), tools, kwargs)
        if msgs and msgs[-1].role == "assistant":
            self._check_written(msgs, len(msgs) - 1, tools, kwargs, rendering, owners)
        return msgs, rendering.writer(self.chat.table).ids()

    def without_lost_reasoning(
        self,
        msgs: list[Message],
        trained: Iterable[int],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
    ) -> tuple[list[Message], Rendering, Owners | None]:
        """The conversation's attributed rendering once the reasoning the template does
        not write for the ``trained`` turns is refused, or dropped (``reasoning="drop"``)."""
        rendering, owners = self.chat.attributed(msgs, tools, kwargs, False)
        lost = self.chat.reasoning_lost(msgs, trained, tools, kwargs, rendering, owners)
        if lost:
            if self.reasoning == "error":
                raise reasoning_error(
                    "the chat template", lost[0], "the template drops it from this turn"
                )
            msgs = [
                Message(m.role, [p for p in m.parts if type(p) is not ThinkingPart], m.name)
                if i in lost
                else m
                for i, m in enumerate(msgs)
            ]
            rendering, owners = self.chat.attributed(msgs, tools, kwargs, False)
        return msgs, rendering, owners

    def _as_sampled(
        self,
        msgs: list[Message],
        t: int,
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        rendering: Rendering,
        owners: Owners | None,
    ) -> tuple[list[int], Owners | None]:
        """The rendering's ids (and owners) with the last trained turn ``t`` as the model
        samples it after its generation prompt, where the template's tokens do not extend
        that prompt but its text does: the prompt ends inside a token the turn's text
        shares (Qwen3.5's ``<think>⏎`` then ``⏎</think>`` of an empty think block, one
        ``⏎⏎`` token in the template's text), or the prompt's text goes on with whitespace
        after opening the reasoning where the turn has none (Nemotron-3's prompt
        ``<think>⏎``, its turn ``<think></think>``: the model samples ``</think>`` after
        the prompt). Then the prompt's ids come first and the template's text after the
        point where the two texts part is tokenized on its own. Otherwise the ids are the
        template's (and :func:`weights.turn_span` refuses a prefix that is not the
        prompt)."""
        ids = rendering.writer(self.chat.table).ids()
        prompt = self.chat.ids(msgs[:t], tools, kwargs, True)
        if ids[: len(prompt)] == prompt:
            return ids, owners
        before = self.chat.rendering(msgs[:t], tools, kwargs, True, attribute=owners is not None)
        k = common_prefix(before.text, rendering.text)
        padding = before.text[k:]
        if padding and (padding.strip() or not self.opens_reasoning(prompt)):
            return ids, owners
        tail = rendering.after(self.chat.table, k)
        if tail is None or before.writer(self.chat.table).ids() != prompt:
            return ids, owners
        spliced = prompt + tail.writer(self.chat.table).ids()
        if owners is None:
            return spliced, None
        head = owners_of(before, self.chat.table, t).message
        rest = owners_of(tail, self.chat.table, len(msgs)).message
        return spliced, Owners(np.concatenate([head, rest]))

    def turn_span(
        self,
        messages: list[Message],
        t: int,
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        ids: list[int],
        owners: Owners | None,
        *,
        strict: bool,
    ) -> tuple[int, int]:
        """The tokens the model samples for turn ``t`` (:func:`weights.turn_span`)."""

        def render(part: list[Message], gen: bool) -> list[int]:
            return self.chat.ids(part, tools, kwargs, gen)

        return turn_span(
            render, self.chat.table, self.stops, messages, t, ids, owners, strict=strict
        )

    def _check_written(
        self,
        messages: list[Message],
        t: int,
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        rendering: Rendering,
        owners: Owners | None,
    ) -> None:
        """The trained last turn keeps its content (:func:`weights.check_written`)."""

        def raw(part: list[Message]) -> str:
            return self.chat.raw_text(part, tools, kwargs, False)

        check_written(messages, t, rendering if owners is not None else None, raw)
