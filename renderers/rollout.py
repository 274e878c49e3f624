"""Multi-turn rollouts without retokenization drift.

In multi-turn RL the next prompt must hold the tokens the model actually sampled, not a
re-rendering of its parsed message: re-rendering drifts (BPE merges differ, reasoning is
stripped from history, JSON is re-serialized, Harmony moves ``to=``). A :class:`Rollout`
keeps the exact ids of an episode: each prompt, each sampled completion byte for byte,
the tokens that close a turn which stopped without its stop token, and the new messages
(tool results, user turns) rendered as the template renders them after that turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from renderers.core.messages import Message, coerce_messages
from renderers.core.parsing import ParseResult
from renderers.core.tokens import TokenTable

__all__ = ["ExtensionProperty", "Rollout", "TurnRenderer"]


class TurnRenderer(Protocol):
    """What a rollout needs of a renderer (:class:`renderers.Renderer` implements it): the
    format's hooks for rendering a conversation and continuing it after a sampled turn."""

    table: TokenTable

    def build_generation_prompt(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> list[int]: ...

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult: ...

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]: ...

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]: ...

    def _continuation(
        self,
        history: list[Message],
        new_messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
    ) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class ExtensionProperty:
    """Whether re-rendering a conversation extended by a sampled turn gives the ids of the
    earlier prompt plus that turn (``holds``), and why not when it does not.

    Where it does not hold, re-rendered history is not what the model saw when sampling:
    train on the ids a :class:`Rollout` keeps instead.
    """

    holds: bool
    explanation: str


class Rollout:
    """One multi-turn episode as the exact token ids the model saw and sampled.

    >>> rollout = renderer.rollout(messages, tools=tools)
    >>> completion = sample(rollout.prompt_ids)
    >>> result = rollout.add_completion(completion)        # parsed message
    >>> prompt = rollout.add_messages(tool_results)          # the next prompt
    >>> rollout.tokens, rollout.weights                      # loss mask: 1 on sampled ids

    Tokens after a completion's stop token are not part of the turn and are not kept.
    """

    def __init__(
        self,
        renderer: TurnRenderer,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> None:
        conversation = coerce_messages(messages)
        ids = renderer.build_generation_prompt(conversation, tools, **options)
        self._start(renderer, conversation, ids, tools, options)

    def _start(
        self,
        renderer: TurnRenderer,
        messages: list[Message],
        prompt_ids: Sequence[int],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
    ) -> None:
        self.renderer = renderer
        self.tools = tools
        self.options = options
        self.messages: list[Message] = messages
        self._ids: list[int] = list(prompt_ids)
        self._sampled: list[bool] = [False] * len(self._ids)
        self.results: list[ParseResult] = []
        self._completion: list[int] = []
        self._awaiting_completion = True

    @classmethod
    def resume(
        cls,
        renderer: TurnRenderer,
        prompt_ids: Sequence[int],
        tools: Sequence[Mapping[str, Any]] | None = None,
        messages: Iterable[Message | Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> Rollout:
        """A rollout whose current prompt is ``prompt_ids`` (rendered or kept elsewhere).

        ``messages`` is the conversation the prompt was rendered from; without it the
        renderer infers the little context its format needs from the ids.
        """
        conversation = (
            coerce_messages(messages)
            if messages is not None
            else renderer._continuation_context(prompt_ids, options)
        )
        renderer.table.check_ids(prompt_ids)
        rollout = cls.__new__(cls)
        rollout._start(renderer, conversation, prompt_ids, tools, options)
        return rollout

    @property
    def prompt_ids(self) -> list[int]:
        """The ids to sample the next completion from."""
        if not self._awaiting_completion:
            raise RuntimeError("the rollout waits for new messages (add_messages), not sampling")
        return list(self._ids)

    def add_completion(self, completion_ids: Sequence[int] | np.ndarray) -> ParseResult:
        """Append a sampled completion exactly as sampled; returns its parse."""
        if not self._awaiting_completion:
            raise RuntimeError("add_completion() called twice: add the next messages first")
        ids = (
            completion_ids.tolist()
            if isinstance(completion_ids, np.ndarray)
            else list(completion_ids)
        )
        result = self.renderer._parse_after_prompt(self._ids, ids, self.options)
        kept = len(ids) - len(result.trailing_ids) if result.stop_token_id is not None else len(ids)
        self._ids += ids[:kept]
        self._sampled += [True] * kept
        self._completion = ids[:kept]
        self.messages.append(result.message)
        self.results.append(result)
        self._awaiting_completion = False
        return result

    def add_messages(self, new_messages: Iterable[Message | Mapping[str, Any]]) -> list[int]:
        """Close the sampled turn as the format's history does (the stop token when the
        sampler dropped it, closers of a turn cut off inside a block; gpt-oss ends a final
        answer with ``<|end|>`` where the model sampled ``<|return|>``), then append the new
        messages and the generation prompt as the template renders them; returns the next
        prompt ids."""
        if self._awaiting_completion:
            raise RuntimeError("add_messages() before add_completion(): sample the prompt first")
        new = coerce_messages(new_messages)
        replaced, closing = self.renderer._close_turn(self.results[-1], self._completion)
        if replaced:
            del self._ids[-replaced:]
            del self._sampled[-replaced:]
        suffix = self.renderer._continuation(self.messages, new, self.tools, self.options)
        added = [*closing, *suffix]
        self._ids += added
        self._sampled += [False] * len(added)
        self.messages += new
        self._awaiting_completion = True
        return list(self._ids)

    @property
    def tokens(self) -> np.ndarray:
        """Every id of the episode so far (prompts, completions, template tokens)."""
        return np.asarray(self._ids, dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        """Loss weights: 1 on sampled ids, 0 on prompt, tool-result and template ids."""
        return np.asarray(self._sampled, dtype=np.float32)
