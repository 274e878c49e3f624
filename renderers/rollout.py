"""Multi-turn rollouts without retokenization drift, with what an RL trainer needs.

In multi-turn RL the next prompt must hold the tokens the model actually sampled, not a
re-rendering of its parsed message: re-rendering drifts (BPE merges differ, reasoning is
stripped from history, JSON is re-serialized, Harmony moves ``to=``). A :class:`Rollout`
keeps the exact ids of an episode: each prompt, each sampled completion byte for byte,
the tokens that close a turn which stopped without its stop token, and the new messages
(tool results, user turns) rendered as the template renders them after that turn.

Aligned with those ids it keeps the sampler's per-token logprobs, the loss weights, and
the span of every turn (:class:`Turn`); it says when the episode is over and why
(:class:`DoneReason`) and how many tokens the next turn may sample. Training stacks take
it in their own shapes through :mod:`renderers.rl_exports`; :meth:`Rollout.to_dict` is
its plain (JSON) form, and a pickled rollout is small (the renderer pickles by name,
options and tokenizer source; ids, weights and logprobs as packed arrays).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

import numpy as np

from renderers.core.messages import Message, ToolCallPart, UnparsedToolCallPart, coerce_messages
from renderers.core.result import ParseIssue, ParseResult, Termination
from renderers.core.tokens import TokenTable, id_list, int_ids
from renderers.view import MessageMarkers, TokenView, supervised_view

__all__ = [
    "DoneReason",
    "ExtensionProperty",
    "Rollout",
    "RolloutLimits",
    "Transcript",
    "Turn",
    "TurnKind",
    "TurnRenderer",
    "rollout_from_dict",
    "rollout_to_dict",
]

DICT_VERSION = 1
"""Version of the plain form written by :meth:`Rollout.to_dict`."""


class TurnRenderer(Protocol):
    """What a rollout needs of a renderer (:class:`renderers.Renderer` implements it): the
    format's hooks for rendering a conversation and continuing it after a sampled turn."""

    table: TokenTable

    @property
    def name(self) -> str: ...

    @property
    def message_markers(self) -> MessageMarkers: ...

    def changed_options(self) -> dict[str, Any]: ...

    def build_generation_prompt(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        prefill: str | None = None,
        **options: Any,
    ) -> list[int]: ...

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult: ...

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]: ...

    def _dropped_stop(self, result: ParseResult, completion_ids: Sequence[int]) -> list[int]: ...

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]: ...

    def _continuation(
        self,
        history: list[Message],
        new_messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
        prefill: str | None = None,
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


class TurnKind(StrEnum):
    """What a span of a rollout's tokens is."""

    PROMPT = "prompt"
    """The initial prompt (rendered from the first messages, or given to ``resume``)."""
    COMPLETION = "completion"
    """One sampled completion as kept (the ids after its stop token are not kept)."""
    MESSAGES = "messages"
    """What follows a completion and is not sampled: the ids that close the turn where
    the sample did not (a dropped stop token, the closers of a cut-off block), the new
    messages (tool results, user turns) and the next generation prompt."""


@dataclass(frozen=True, slots=True)
class Turn:
    """A ``[start, end)`` span of :attr:`Rollout.tokens` and what it holds."""

    kind: TurnKind
    start: int
    end: int


class DoneReason(StrEnum):
    """Why an episode is over (:attr:`Rollout.done_reason`)."""

    NO_TOOL_CALL = "no_tool_call"
    """The last completion ended its turn (at a stop token, or the sampler reported a
    stop) without calling a tool: the model's answer, nothing for the environment to run.
    A call that could not be parsed counts as a call (the environment should answer it)."""
    END_OF_SEQUENCE = "end_of_sequence"
    """The last completion ended at the tokenizer's end-of-sequence token, which ends the
    sequence rather than the turn (``Termination.EOS``), whatever the turn holds."""
    LENGTH = "length"
    """Out of budget: the last completion was cut off (no stop token and no stop reported
    by the sampler), or the episode has no room left for another token (``max_length`` /
    ``max_response_length``)."""
    MAX_TURNS = "max_turns"
    """``max_turns`` completions were sampled."""


@dataclass(slots=True)
class Transcript:
    """An episode's ids in order, each with its loss weight (1 where the model sampled it)
    and the sampler's logprob (NaN where nothing was sampled), and the turns covering them.
    """

    ids: list[int]
    weights: list[bool]
    logprobs: list[float]
    turns: list[Turn]

    @classmethod
    def of_prompt(cls, prompt_ids: Sequence[int]) -> Transcript:
        ids = list(prompt_ids)
        n = len(ids)
        return cls(ids, [False] * n, [math.nan] * n, [Turn(TurnKind.PROMPT, 0, n)])

    @property
    def prompt_length(self) -> int:
        return self.turns[0].end

    @property
    def response_length(self) -> int:
        """The ids after the initial prompt."""
        return len(self.ids) - self.turns[0].end

    def add(self, kind: TurnKind, ids: list[int], logprobs: list[float] | None = None) -> None:
        """Append a turn: a completion's ids (sampled: weight 1) or ids nobody sampled."""
        start = len(self.ids)
        self.ids += ids
        self.weights += [kind is TurnKind.COMPLETION] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [math.nan] * len(ids)
        self.turns.append(Turn(kind, start, start + len(ids)))

    def replace(self, position: int, token_id: int) -> None:
        """The format's history writes ``token_id`` where the model sampled another id: the
        sampled id's logprob stays, its weight goes (nothing sampled the new id)."""
        self.ids[position] = token_id
        self.weights[position] = False

    def to_plain(self, with_logprobs: bool) -> dict[str, Any]:
        """``tokens``, ``weights`` (0/1), ``logprobs`` (``null`` per position where
        nothing was sampled, or as a whole without logprobs) and ``turns``."""
        return {
            "tokens": list(self.ids),
            "weights": [int(w) for w in self.weights],
            "logprobs": (
                [None if math.isnan(x) else x for x in self.logprobs] if with_logprobs else None
            ),
            "turns": [{"kind": t.kind.value, "start": t.start, "end": t.end} for t in self.turns],
        }

    @classmethod
    def from_plain(cls, data: Mapping[str, Any], table: TokenTable) -> Transcript:
        tokens = [int(t) for t in data["tokens"]]
        weights = [bool(w) for w in data["weights"]]
        logprobs = data["logprobs"]
        if len(weights) != len(tokens) or (logprobs is not None and len(logprobs) != len(tokens)):
            raise ValueError("tokens, weights and logprobs: expected equal lengths")
        table.check_ids(tokens)
        values = [math.nan if x is None else float(x) for x in logprobs or [None] * len(tokens)]
        turns = [Turn(TurnKind(t["kind"]), int(t["start"]), int(t["end"])) for t in data["turns"]]
        return cls(tokens, weights, values, turns)

    def __getstate__(self) -> tuple[Any, ...]:
        return (
            np.asarray(self.ids, dtype=np.int32),
            np.asarray(self.weights, dtype=np.bool_),
            np.asarray(self.logprobs, dtype=np.float32),
            [(t.kind.value, t.start, t.end) for t in self.turns],
        )

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        ids, weights, logprobs, turns = state
        self.ids = ids.tolist()
        self.weights = weights.tolist()
        self.logprobs = logprobs.tolist()
        self.turns = [Turn(TurnKind(k), s, e) for k, s, e in turns]


class Prefill(NamedTuple):
    """The prefill ending the prompt that awaits its completion: its ``text``, and the
    prompt's ids from ``start`` on without it (``base``: what the completion's parse
    state is read from)."""

    text: str
    start: int
    base: list[int]


@dataclass(frozen=True, slots=True)
class RolloutLimits:
    """An episode's budget: ``max_length`` ids in all (prompt included, the model's
    context), ``max_response_length`` after the initial prompt (verl's
    ``response_length``), ``max_turns`` completions; ``None`` is no limit."""

    max_length: int | None = None
    max_response_length: int | None = None
    max_turns: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_length", "max_response_length", "max_turns"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"{name}: expected a positive integer or None, got {value!r}")

    def room(self, transcript: Transcript) -> list[int]:
        """What each length limit leaves for the next completion."""
        return [
            limit - used
            for limit, used in (
                (self.max_length, len(transcript.ids)),
                (self.max_response_length, transcript.response_length),
            )
            if limit is not None
        ]

    def full(self, transcript: Transcript) -> bool:
        """Whether no room is left for another token."""
        return any(r <= 0 for r in self.room(transcript))

    def turns_reached(self, completions: int) -> bool:
        return self.max_turns is not None and completions >= self.max_turns

    def next_budget(self, per_turn: int | None, transcript: Transcript, completions: int) -> int:
        """``per_turn`` capped by the room left (see :meth:`Rollout.max_tokens`)."""
        if per_turn is not None and (type(per_turn) is not int or per_turn < 1):
            raise ValueError(f"per_turn: expected a positive integer or None, got {per_turn!r}")
        self.check_room("max_tokens()", transcript, completions)
        bounds = [*([] if per_turn is None else [per_turn]), *self.room(transcript)]
        if not bounds:
            raise ValueError(
                "max_tokens(): no budget to bound the next turn: pass per_turn, or give the "
                "rollout max_length or max_response_length"
            )
        return min(bounds)

    def check_room(self, what: str, transcript: Transcript, completions: int) -> None:
        """Refuse to sample an episode that is over: ``max_turns`` reached, or no room."""
        if self.turns_reached(completions):
            raise RuntimeError(
                f"{what}: the episode is over: it already has max_turns={self.max_turns} "
                "completions (check rollout.done before sampling)"
            )
        if self.full(transcript):
            pairs = (
                ("max_length", self.max_length),
                ("max_response_length", self.max_response_length),
            )
            limits = ", ".join(f"{name}={value}" for name, value in pairs if value is not None)
            raise RuntimeError(
                f"{what}: the episode is over: no room left for another token ({limits}; "
                f"{len(transcript.ids)} tokens, {transcript.response_length} after the "
                "prompt; check rollout.done before sampling)"
            )


_FINISH_REASONS = ("stop", "length")
_CALL_PARTS = (ToolCallPart, UnparsedToolCallPart)


class Rollout:
    """One multi-turn episode as the exact token ids the model saw and sampled.

    >>> rollout = renderer.rollout(messages, tools=tools, max_length=8192)
    >>> while not rollout.done:     # before each sample: new messages may fill the budget
    ...     ids, logprobs = sample(rollout.prompt_ids, max_tokens=rollout.max_tokens(1024))
    ...     result = rollout.add_completion(ids, logprobs)     # parsed message
    ...     if not rollout.done:
    ...         rollout.add_messages(tool_results)               # the next prompt
    >>> rollout.tokens, rollout.weights, rollout.logprobs        # aligned, one per token

    Tokens after a completion's stop token are not part of the turn and are not kept
    (nor their logprobs). The budget is :class:`RolloutLimits` (``max_length``,
    ``max_response_length``, ``max_turns``).

    ``prefill`` (here, and in :meth:`add_messages` for a later turn) ends the prompt with
    text the model is forced to start with (see :meth:`Renderer.build_generation_prompt`):
    its ids are prompt ids (weight 0), and the turn's parsed message starts with it.
    """

    _prefill: Prefill | None  # the prompt awaiting a completion ends with it

    def __init__(
        self,
        renderer: TurnRenderer,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        max_length: int | None = None,
        max_response_length: int | None = None,
        max_turns: int | None = None,
        prefill: str | None = None,
        **options: Any,
    ) -> None:
        limits = RolloutLimits(max_length, max_response_length, max_turns)
        conversation = coerce_messages(messages)
        ids = renderer.build_generation_prompt(conversation, tools, prefill=prefill, **options)
        self._start(renderer, conversation, ids, tools, options, limits)
        if prefill:
            base = renderer.build_generation_prompt(conversation, tools, **options)
            self._prefill = Prefill(prefill, 0, base)

    def _start(
        self,
        renderer: TurnRenderer,
        messages: list[Message],
        prompt_ids: Sequence[int],
        tools: Sequence[Mapping[str, Any]] | None,
        options: dict[str, Any],
        limits: RolloutLimits,
    ) -> None:
        self.renderer = renderer
        self.tools = tools
        self.options = options
        self.limits = limits
        self.messages: list[Message] = messages
        self.results: list[ParseResult] = []
        self._record = Transcript.of_prompt(prompt_ids)
        self._ended: list[bool] = []  # per completion: it ended its turn (not cut off)
        self._with_logprobs: bool | None = None  # whether completions came with logprobs
        self._awaiting_completion = True
        self._prefill = None

    @classmethod
    def resume(
        cls,
        renderer: TurnRenderer,
        prompt_ids: Sequence[int],
        tools: Sequence[Mapping[str, Any]] | None = None,
        messages: Iterable[Message | Mapping[str, Any]] | None = None,
        *,
        max_length: int | None = None,
        max_response_length: int | None = None,
        max_turns: int | None = None,
        **options: Any,
    ) -> Rollout:
        """A rollout whose current prompt is ``prompt_ids`` (rendered or kept elsewhere).

        ``messages`` is the conversation the prompt was rendered from; without it the
        renderer infers the little context its format needs from the ids.
        """
        listed = id_list(prompt_ids)
        renderer.table.check_ids(listed)
        prompt = int_ids(listed)
        conversation = (
            coerce_messages(messages)
            if messages is not None
            else renderer._continuation_context(prompt, options)
        )
        limits = RolloutLimits(max_length, max_response_length, max_turns)
        rollout = cls.__new__(cls)
        rollout._start(renderer, conversation, prompt, tools, options, limits)
        return rollout

    # -- sampling ---------------------------------------------------------------------

    @property
    def prompt_ids(self) -> list[int]:
        """The ids to sample the next completion from."""
        self._check_awaiting("prompt_ids")
        return list(self._record.ids)

    def max_tokens(self, per_turn: int | None = None) -> int:
        """The most tokens the next completion may sample (a sampler's ``max_tokens``):
        ``per_turn`` capped by what is left of ``max_length`` and ``max_response_length``;
        at least 1. An episode that is over (:attr:`done`: no room left, or ``max_turns``
        reached) has no next completion: then this raises, so that no sampler is ever asked
        for 0 tokens (vLLM refuses them) or, worse, for an unbounded turn."""
        self._check_awaiting("max_tokens()")
        return self.limits.next_budget(per_turn, self._record, len(self.results))

    def add_completion(
        self,
        completion_ids: Sequence[int] | np.ndarray,
        logprobs: Sequence[float] | np.ndarray | None = None,
        *,
        finish_reason: str | None = None,
    ) -> ParseResult:
        """Append a sampled completion exactly as sampled; returns its parse.

        ``logprobs`` holds the sampler's logprob of each sampled id (one per id; give them
        for every completion of an episode or for none). ``finish_reason`` is the
        sampler's (OpenAI / vLLM spelling): ``"stop"`` when it stopped at a stop token or
        string it did not return, ``"length"`` when it ran out of tokens; without it, a
        completion without a stop token counts as cut off. Refused once the episode is
        over while it waits for a completion (no room left, or ``max_turns`` reached): a
        sample taken then is outside the budget.
        """
        self._check_awaiting("add_completion()", twice=True)
        self.limits.check_room("add_completion()", self._record, len(self.results))
        ids = id_list(completion_ids)
        given = _logprob_list(logprobs, len(ids), len(self.results), self._with_logprobs)
        self._with_logprobs = logprobs is not None
        if finish_reason is not None and finish_reason not in _FINISH_REASONS:
            raise ValueError(
                f"finish_reason: expected 'stop', 'length' or None, got {finish_reason!r}"
            )
        if (prefill := self._prefill) is None:
            result = self.renderer._parse_after_prompt(self._record.ids, ids, self.options)
        else:
            options = {**self.options, "prefill": prefill.text}
            prompt = self._record.ids[: prefill.start] + prefill.base
            result = self.renderer._parse_after_prompt(prompt, ids, options)
            self._prefill = None
        ids = int_ids(ids)  # (checked by the parse)
        kept = len(ids) - len(result.trailing_ids) if result.stop_token_id is not None else len(ids)
        self._record.add(TurnKind.COMPLETION, ids[:kept], None if given is None else given[:kept])
        self._ended.append(result.stop_token_id is not None or finish_reason == "stop")
        self.messages.append(result.message)
        self.results.append(result)
        self._awaiting_completion = False
        return result

    def add_messages(
        self,
        new_messages: Iterable[Message | Mapping[str, Any]],
        *,
        prefill: str | None = None,
    ) -> list[int]:
        """Close the sampled turn as the format's history does (the stop token when the
        sampler dropped it, closers of a turn cut off inside a block), then append the new
        messages and the generation prompt as the template renders them (then ``prefill``,
        the text the next turn is forced to start with); returns the next prompt ids.

        Where the format's history replaces a sampled token (gpt-oss ends a final answer
        with ``<|end|>`` where the model sampled ``<|return|>``), the history token takes
        the sampled token's position: that position keeps the sampled token's logprob
        (so the completion's logprobs stay one per sampled token, and their sum is the
        sequence's) but gets weight 0, since the token trained on there is not the one
        sampled and an importance ratio over it would compare two different tokens.
        """
        self._check_awaiting("add_messages()", awaiting=False)
        new = coerce_messages(new_messages)
        record = self._record
        completion = record.turns[-1]
        replaced, closing = self.renderer._close_turn(
            self.results[-1], record.ids[completion.start : completion.end]
        )
        if replaced > min(len(closing), completion.end - completion.start):
            raise RuntimeError(f"{self.renderer.name}: the format replaced more ids than it gave")
        for k in range(replaced):
            record.replace(completion.end - replaced + k, closing[k])
        suffix = self.renderer._continuation(
            self.messages, new, self.tools, self.options, prefill=prefill
        )
        if prefill:
            base = self.renderer._continuation(self.messages, new, self.tools, self.options)
            self._prefill = Prefill(prefill, len(record.ids), [*closing[replaced:], *base])
        record.add(TurnKind.MESSAGES, [*closing[replaced:], *suffix])
        self.messages += new
        self._awaiting_completion = True
        return list(record.ids)

    def _check_awaiting(self, what: str, *, awaiting: bool = True, twice: bool = False) -> None:
        if awaiting and not self._awaiting_completion:
            if twice:
                raise RuntimeError(f"{what} called twice: add the next messages first")
            raise RuntimeError(f"{what}: the rollout waits for new messages (add_messages)")
        if not awaiting and self._awaiting_completion:
            raise RuntimeError(f"{what} before add_completion(): sample the prompt first")

    # -- the episode --------------------------------------------------------------------

    @property
    def tokens(self) -> np.ndarray:
        """Every id of the episode so far (prompts, completions, template tokens)."""
        return np.asarray(self._record.ids, dtype=np.int64)

    @property
    def weights(self) -> np.ndarray:
        """Loss weights: 1 where the token is the one the model sampled there, 0 on prompt,
        tool-result and template ids (and where the format replaced a sampled token)."""
        return np.asarray(self._record.weights, dtype=np.float32)

    @property
    def logprobs(self) -> np.ndarray:
        """The sampler's logprob of the token sampled at each position (float32), NaN
        where nothing was sampled (prompt, messages, template ids) or no logprobs were
        given: a position nobody sampled has no logprob, and NaN keeps it from passing
        for a certain token (0.0) in a sum. Exports write 0.0 there, as the stacks do."""
        return np.asarray(self._record.logprobs, dtype=np.float32)

    @property
    def has_logprobs(self) -> bool:
        """Whether the completions came with logprobs."""
        return bool(self._with_logprobs)

    def closing_ids(self) -> list[int]:
        """The ids that end the last completion's turn as the model ends it, when the
        sampler stopped without returning them (``finish_reason="stop"`` and no stop token
        kept): closers of a block left open, then the stop token; ``[]`` when the last
        completion kept its stop token or was cut off. Exports append them with weight 0
        (nothing sampled them), so that the exported turn is closed as the stacks expect."""
        if not self.results or not self._ended[-1] or self.results[-1].stop_token_id is not None:
            return []
        turn = next(t for t in reversed(self._record.turns) if t.kind is TurnKind.COMPLETION)
        ids = self._record.ids[turn.start : turn.end]
        return self.renderer._dropped_stop(self.results[-1], ids)

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The spans of the initial prompt, of each completion and of each block of
        inserted messages, in order; together they cover :attr:`tokens`."""
        return tuple(self._record.turns)

    @property
    def done_reason(self) -> DoneReason | None:
        """Why the episode is over, or ``None`` while it goes on (see :class:`DoneReason`;
        a cut-off completion or the end-of-sequence token wins over max turns, which wins
        over the budget). The caller may still continue an episode that is done, for
        example with a user turn after an answer."""
        if not self._awaiting_completion:
            result = self.results[-1]
            if not self._ended[-1]:
                return DoneReason.LENGTH
            if result.termination is Termination.EOS:
                return DoneReason.END_OF_SEQUENCE
            if not any(type(p) in _CALL_PARTS for p in result.message.parts):
                return DoneReason.NO_TOOL_CALL
        if self.limits.turns_reached(len(self.results)):
            return DoneReason.MAX_TURNS
        if self.limits.full(self._record):
            return DoneReason.LENGTH
        return None

    @property
    def done(self) -> bool:
        """Whether the episode is over (:attr:`done_reason` says why)."""
        return self.done_reason is not None

    # -- plain form and pickling --------------------------------------------------------

    def view(self, title: str = "") -> TokenView:
        """The episode for a person (:mod:`renderers.view`): every token with its weight, a
        header per message, each completion's parts outlined and its issues marked; print
        it, ``to_html()`` it, or let a notebook show it."""
        starts = [t.start for t in self._record.turns if t.kind is TurnKind.COMPLETION]
        return supervised_view(
            self.tokens,
            self.weights,
            self.renderer,
            title,
            completions=list(zip(starts, self.results, strict=True)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The rollout as plain, JSON-serialisable data (see :func:`rollout_to_dict`)."""
        return rollout_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], renderer: TurnRenderer) -> Rollout:
        """A rollout from :meth:`to_dict` output (see :func:`rollout_from_dict`)."""
        return rollout_from_dict(data, renderer)


def rollout_to_dict(rollout: Rollout) -> dict[str, Any]:
    """``rollout`` as plain, JSON-serialisable data (:func:`rollout_from_dict` reads it back).

    Keys: ``version``; ``renderer`` (its name) and ``renderer_options`` (those that
    differ from the format's defaults); ``options`` (per-rollout options); ``tools``;
    ``limits`` (``max_length``, ``max_response_length``, ``max_turns``); ``messages``
    (lossless message dicts, sampled ones included); ``tokens``; ``weights`` (0/1);
    ``logprobs`` (a float per token, ``null`` where nothing was sampled; ``null`` as a
    whole without logprobs); ``turns`` (``kind``, ``start``, ``end``); ``completions``
    (per completion: the index of its message, ``termination``, ``stop_token_id``,
    ``trailing_ids``, ``issues``, part ``spans`` and whether it ``ended`` its turn);
    ``awaiting_completion``; ``prefill`` (the prefill ending the prompt that awaits its
    completion: ``text``, and ``start`` and ``ids``, the prompt's ids from ``start`` on
    without it; ``null`` without one); and, for readers, ``done_reason`` (or ``null``).
    """
    indices = _completion_message_indices(rollout.messages, rollout.results)
    return {
        "version": DICT_VERSION,
        "renderer": rollout.renderer.name,
        "renderer_options": {k: _plain(v) for k, v in rollout.renderer.changed_options().items()},
        "options": {k: _plain(v) for k, v in rollout.options.items()},
        "tools": None if rollout.tools is None else [dict(t) for t in rollout.tools],
        "limits": {
            "max_length": rollout.limits.max_length,
            "max_response_length": rollout.limits.max_response_length,
            "max_turns": rollout.limits.max_turns,
        },
        "messages": [m.to_dict() for m in rollout.messages],
        **rollout._record.to_plain(bool(rollout._with_logprobs)),
        "completions": [
            {
                "message_index": index,
                "termination": r.termination.value,
                "stop_token_id": r.stop_token_id,
                "trailing_ids": list(r.trailing_ids),
                "issues": [{"position": i.position, "message": i.message} for i in r.issues],
                "spans": [list(s) for s in r.spans],
                "ended": ended,
            }
            for r, ended, index in zip(rollout.results, rollout._ended, indices, strict=True)
        ],
        "awaiting_completion": rollout._awaiting_completion,
        "prefill": None
        if (prefill := rollout._prefill) is None
        else {"text": prefill.text, "start": prefill.start, "ids": list(prefill.base)},
        "done_reason": None if rollout.done_reason is None else rollout.done_reason.value,
    }


def _completion_message_indices(messages: list[Message], results: list[ParseResult]) -> list[int]:
    """The index in ``messages`` of each completion's parsed message (found in
    order, by identity: the parsed messages are the objects the results hold)."""
    indices: list[int] = []
    position = 0
    for result in results:
        while messages[position] is not result.message:
            position += 1
        indices.append(position)
        position += 1
    return indices


def rollout_from_dict(data: Mapping[str, Any], renderer: TurnRenderer) -> Rollout:
    """A rollout from :func:`rollout_to_dict` output, continued with ``renderer`` (the one
    named in ``data``: its name is checked)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"rollout: expected a mapping, got {type(data).__name__}")
    if data.get("version") != DICT_VERSION:
        raise ValueError(f"version: expected {DICT_VERSION}, got {data.get('version')!r}")
    if data.get("renderer") != renderer.name:
        raise ValueError(
            f"renderer: the rollout was made with {data.get('renderer')!r}, not {renderer.name!r}"
        )
    record = Transcript.from_plain(data, renderer.table)
    messages = coerce_messages(data["messages"])
    limits = RolloutLimits(**data["limits"])
    rollout = Rollout.__new__(Rollout)
    rollout._start(renderer, messages, [], data["tools"], dict(data["options"]), limits)
    rollout._record = record
    completions = data["completions"]
    rollout.results = [
        ParseResult(
            message=messages[c["message_index"]],
            termination=Termination(c["termination"]),
            spans=tuple((int(s), int(e)) for s, e in c["spans"]),
            stop_token_id=c["stop_token_id"],
            trailing_ids=tuple(c["trailing_ids"]),
            trailing_text=renderer.table.decode(c["trailing_ids"]),
            issues=tuple(ParseIssue(i["position"], i["message"]) for i in c["issues"]),
        )
        for c in completions
    ]
    rollout._ended = [bool(c["ended"]) for c in completions]
    rollout._with_logprobs = None if not completions else data["logprobs"] is not None
    rollout._awaiting_completion = bool(data["awaiting_completion"])
    prefill = data.get("prefill")  # (absent from dicts written before prefills)
    if prefill is not None:
        ids = [int(t) for t in prefill["ids"]]
        renderer.table.check_ids(ids)
        rollout._prefill = Prefill(str(prefill["text"]), int(prefill["start"]), ids)
    return rollout


def _logprob_list(
    logprobs: Sequence[float] | np.ndarray | None, count: int, index: int, earlier: bool | None
) -> list[float] | None:
    """Completion ``index``'s logprobs, one float per sampled id (or ``None``), or a
    ``ValueError``; ``earlier``: whether the completions before it came with logprobs."""
    if earlier is not None and earlier != (logprobs is not None):
        raise ValueError(
            f"logprobs: completion {index} comes {'without' if logprobs is None else 'with'}"
            f" logprobs but earlier completions {'had' if earlier else 'had none'}; give them "
            "for every completion of an episode or for none"
        )
    if logprobs is None:
        return None
    values = np.asarray(logprobs, dtype=np.float32)
    if values.ndim != 1 or len(values) != count:
        raise ValueError(
            f"logprobs: expected one per sampled id ({count}), got shape {values.shape}"
        )
    checked: list[float] = values.tolist()
    return checked


def _plain(value: Any) -> Any:
    """An option value as JSON-serialisable data (dates as ISO text, tuples as lists)."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
