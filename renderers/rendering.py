"""Shared rendering machinery: the token writer, loss weights and the renderer contract.

A renderer writes a conversation as a sequence of pieces: control tokens (known ids) and
text. Adjacent text pieces are joined before encoding, exactly as a chat template's output
is tokenized between control tokens, so the ids equal the template's. Message text is
always encoded as ordinary text; only the template's own constant text may spell control
tokens.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from itertools import accumulate
from typing import Any, ClassVar, NamedTuple

import numpy as np

from renderers.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    coerce_messages,
)
from renderers.parsing import ParseResult, StreamParser
from renderers.rollout import ExtensionProperty, Rollout
from renderers.tokenizer import TokenTable, load_tokenizer, token_table

__all__ = [
    "Renderer",
    "SupervisedExample",
    "TokenWriter",
    "TrainOn",
    "checked_arguments",
    "plain_text",
    "section_closing",
]


class TrainOn(StrEnum):
    """Which tokens of a supervised example get weight 1."""

    LAST_ASSISTANT = "last_assistant"
    """What the model samples for the last assistant message (body and stop token)."""
    ALL_ASSISTANT = "all_assistant"
    """What the model samples for every assistant message."""
    ALL = "all"
    """Every token."""


class SupervisedExample(NamedTuple):
    """Token ids and per-token loss weights (both 1-D NumPy arrays of equal length)."""

    tokens: np.ndarray
    weights: np.ndarray


_NO_MESSAGE = -1


class TokenWriter:
    """Collects a rendering as control tokens and text, then encodes it.

    Each piece records the index of the message it belongs to and whether the model
    samples it (``sampled``: an assistant body and the stop token that ends it), which is
    what loss weights are computed from.
    """

    __slots__ = ("_items", "_msg", "_sampled", "_table")

    def __init__(self, table: TokenTable) -> None:
        self._table = table
        # A control token id, text to encode, or a run of already-encoded ids.
        self._items: list[int | str | tuple[int, ...]] = []
        self._msg: list[int] = []
        self._sampled: list[bool] = []

    def control(self, token_id: int, msg: int = _NO_MESSAGE, sampled: bool = False) -> None:
        """A control token (by id)."""
        self._items.append(token_id)
        self._msg.append(msg)
        self._sampled.append(sampled)

    def text(self, text: str, msg: int = _NO_MESSAGE, sampled: bool = False) -> None:
        """Ordinary text: never becomes a control token, whatever it spells."""
        if text:
            self._items.append(text)
            self._msg.append(msg)
            self._sampled.append(sampled)

    def encoded(self, ids: Sequence[int], msg: int = _NO_MESSAGE, sampled: bool = False) -> None:
        """Text already encoded (e.g. a cached tool declaration); only valid where the text
        stands between control tokens, so it cannot merge with neighbouring text."""
        if ids:
            self._items.append(tuple(ids))
            self._msg.append(msg)
            self._sampled.append(sampled)

    def template(self, text: str, msg: int = _NO_MESSAGE, sampled: bool = False) -> None:
        """Constant text of the template, in which control-token spellings are control
        tokens (as the template's tokenizer call would treat them)."""
        for piece in _split_controls(self._table, text):
            if isinstance(piece, int):
                self.control(piece, msg, sampled)
            else:
                self.text(piece, msg, sampled)

    def ids(self) -> list[int]:
        """The token ids of everything written."""
        out: list[int] = []
        buf: list[str] = []
        encode = self._table.encode
        for item in self._items:
            if type(item) is str:
                buf.append(item)
                continue
            if buf:
                out += encode(buf[0] if len(buf) == 1 else "".join(buf))
                buf.clear()
            if type(item) is int:
                out.append(item)
            else:
                out += item  # type: ignore[arg-type]
        if buf:
            out += encode("".join(buf))
        return out

    def ids_after(self, msg: int) -> list[int]:
        """The ids of everything written after message ``msg``'s last control token (the
        token that ends its turn): template text, later messages, generation prompt."""
        last = max(
            (k for k, m in enumerate(self._msg) if m == msg and type(self._items[k]) is int),
            default=None,
        )
        if last is None:
            raise ValueError(f"message {msg} has no control token to continue after")
        tail = TokenWriter(self._table)
        tail._items = self._items[last + 1 :]
        tail._msg = self._msg[last + 1 :]
        tail._sampled = self._sampled[last + 1 :]
        return tail.ids()

    def ids_and_weights(self, trained: Sequence[bool]) -> SupervisedExample:
        """Ids plus weights: 1 on sampled pieces of messages whose ``trained`` flag is set
        (a message index of -1 means template text outside any message)."""
        items = self._items
        piece_weights = [
            1.0 if s and m >= 0 and trained[m] else 0.0
            for m, s in zip(self._msg, self._sampled, strict=True)
        ]
        encode = self._table.encode
        ids: list[int] = []
        counts: list[int] = []  # run lengths of equal weight, in tokens
        weights: list[float] = []
        k = 0
        n = len(items)
        while k < n:
            item = items[k]
            if type(item) is int:
                ids.append(item)
                counts.append(1)
                weights.append(piece_weights[k])
                k += 1
                continue
            if type(item) is tuple:
                ids += item
                counts.append(len(item))
                weights.append(piece_weights[k])
                k += 1
                continue
            j = k + 1
            while j < n and type(items[j]) is str:
                j += 1
            texts: list[str] = items[k:j]  # type: ignore[assignment]
            segment_weights = piece_weights[k:j]
            first = segment_weights[0]
            if all(w == first for w in segment_weights):
                segment = encode(texts[0] if len(texts) == 1 else "".join(texts))
                ids += segment
                counts.append(len(segment))
                weights.append(first)
            else:
                segment, token_weights = _mixed_segment(self._table, texts, segment_weights)
                ids += segment
                counts += [1] * len(segment)
                weights += token_weights
            k = j
        return SupervisedExample(
            np.asarray(ids, dtype=np.int64),
            np.repeat(np.asarray(weights, dtype=np.float32), counts),
        )


_CONTROL_SPLITTERS: dict[int, re.Pattern[str]] = {}
_SPLIT_CACHE: dict[tuple[int, str], tuple[int | str, ...]] = {}


def _split_controls(table: TokenTable, text: str) -> tuple[int | str, ...]:
    key = (id(table), text)
    cached = _SPLIT_CACHE.get(key)
    if cached is not None:
        return cached
    pattern = _CONTROL_SPLITTERS.get(id(table))
    if pattern is None:
        names = sorted(table.control_tokens, key=len, reverse=True)
        pattern = re.compile("(" + "|".join(map(re.escape, names)) + ")")
        _CONTROL_SPLITTERS[id(table)] = pattern
    pieces: list[int | str] = []
    for k, piece in enumerate(pattern.split(text)):
        if k % 2:
            pieces.append(table.control_tokens[piece])
        elif piece:
            pieces.append(piece)
    result = tuple(pieces)
    if len(_SPLIT_CACHE) > 4096:
        _SPLIT_CACHE.clear()
    _SPLIT_CACHE[key] = result
    return result


class Renderer:
    """The contract every model family implements.

    Subclasses define ``name``, ``default_model``, an ``Options`` frozen dataclass, the
    message ``roles`` the format knows, ``stop_token_ids`` and the two format hooks
    :meth:`_render` and :meth:`_new_parser`. Per-call options override the options given
    at construction.
    """

    name: ClassVar[str]
    default_model: ClassVar[str]
    Options: ClassVar[type[Any]]
    roles: ClassVar[tuple[str, ...]]

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        if tokenizer is None:
            tokenizer = load_tokenizer(self.default_model)
        self.tokenizer = tokenizer
        self.table: TokenTable = token_table(tokenizer)
        self.options = self._with_options(self.Options(), options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(options={self.options!r})"

    # -- public API ---------------------------------------------------------------------

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """The ids a sampler should stop on."""
        raise NotImplementedError

    def build_generation_prompt(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> list[int]:
        """Token ids of the conversation followed by the assistant generation prompt,
        identical to the official template's ``add_generation_prompt=True`` rendering."""
        writer = self._write(messages, tools, options, add_generation_prompt=True)
        return writer.ids()

    def build_supervised_example(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        train_on: TrainOn | str = TrainOn.LAST_ASSISTANT,
        **options: Any,
    ) -> SupervisedExample:
        """Tokens of the whole conversation (as the official template renders it) and loss
        weights: 1 on the tokens the model samples for the trained messages, including the
        token that ends each of them, 0 elsewhere."""
        try:
            mode = TrainOn(train_on)
        except ValueError:
            choices = ", ".join(repr(t.value) for t in TrainOn)
            raise ValueError(f"train_on: expected one of {choices}, got {train_on!r}") from None
        msgs = coerce_messages(messages)
        writer = self._write(msgs, tools, options, add_generation_prompt=False)
        if mode is TrainOn.ALL:
            ids = writer.ids()
            return SupervisedExample(
                np.asarray(ids, dtype=np.int64), np.ones(len(ids), dtype=np.float32)
            )
        assistants = [i for i, m in enumerate(msgs) if m.role == "assistant"]
        if not assistants:
            raise ValueError(
                f"train_on={mode.value!r}: the conversation has no assistant message to train on"
            )
        trained = [False] * len(msgs)
        for i in assistants if mode is TrainOn.ALL_ASSISTANT else assistants[-1:]:
            trained[i] = True
        return writer.ids_and_weights(trained)

    def parse_response(self, token_ids: Sequence[int] | np.ndarray, **options: Any) -> ParseResult:
        """Parse the sampled completion (the ids after the generation prompt)."""
        parser = self.stream_parser(_events=False, **options)
        parser.feed(token_ids)
        return parser.finish()

    def stream_parser(self, **options: Any) -> StreamParser:
        """An incremental parser: ``feed(ids) -> events``, ``finish() -> ParseResult``.

        Feeding the ids in any split gives the same result as :meth:`parse_response`.
        """
        events = options.pop("_events", True)
        return self._new_parser(self._with_options(self.options, options), events)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Decode ids to text (control tokens spelled out), for display and debugging."""
        return self.table.decode(token_ids)

    # -- multi-turn rollouts ------------------------------------------------------------

    def rollout(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> Rollout:
        """Start a multi-turn episode that keeps the exact sampled ids (see :class:`Rollout`)."""
        return Rollout(self, messages, tools, **options)

    def next_turn_prompt(
        self,
        prompt_ids: Sequence[int],
        completion_ids: Sequence[int],
        new_messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        messages: Iterable[Message | Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> list[int]:
        """The prompt for the next turn of a multi-turn episode, without retokenization.

        ``prompt_ids`` and ``completion_ids`` are kept byte for byte (tokens after the
        completion's stop token excepted); when sampling stopped without the stop token
        (the sampler dropped it, or the turn was cut off) the tokens that close the turn
        follow; then ``new_messages`` (tool results, user turns) and the generation prompt,
        rendered as the template renders them after that turn. ``messages``, the
        conversation ``prompt_ids`` was rendered from, makes the continuation exact for
        formats whose rendering depends on earlier turns; without it the renderer infers
        that context from the ids. See :attr:`extension_property` for why re-rendering the
        conversation instead would not give these ids.
        """
        rollout = Rollout.resume(self, prompt_ids, tools, messages, **options)
        rollout.add_completion(completion_ids)
        return rollout.add_messages(new_messages)

    @property
    def extension_property(self) -> ExtensionProperty:
        """Whether re-rendering the whole conversation reproduces earlier prompts plus the
        sampled turns (with the current options), and why not when it does not."""
        raise NotImplementedError

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        """Parse a completion sampled after ``prompt_ids`` (formats whose completions start
        in a state the prompt decides override this)."""
        return self.parse_response(completion_ids, **options)

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        """How to end a sampled turn in the history: how many of its last sampled ids the
        format's history form replaces, and the ids that follow (the stop token when the
        sampler dropped it, closers of a turn cut off inside a block)."""
        if result.stop_token_id is not None:
            return 0, []
        return 0, [self.stop_token_ids[0]]

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        """Messages standing in for the conversation behind ``prompt_ids`` when the caller
        does not give it: enough for the format to render what follows a sampled turn."""
        return [Message("user", "")]

    def _continuation(
        self,
        history: list[Message],
        new_messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
    ) -> list[int]:
        """Ids the template writes after the end token of the last (sampled) message of
        ``history``: template text, ``new_messages`` and the generation prompt."""
        writer = self._write([*history, *new_messages], tools, options, add_generation_prompt=True)
        return writer.ids_after(len(history) - 1)

    # -- format hooks -------------------------------------------------------------------

    def _render(
        self,
        writer: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: Any,
        add_generation_prompt: bool,
    ) -> None:
        raise NotImplementedError

    def _new_parser(self, options: Any, events: bool) -> StreamParser:
        raise NotImplementedError

    # -- plumbing -----------------------------------------------------------------------

    def _with_options(self, base: Any, overrides: Mapping[str, Any]) -> Any:
        if not overrides:
            return base
        known = {f.name for f in dataclasses.fields(base)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(
                f"{self.name}: unknown option(s) {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(sorted(known)) or 'none'})"
            )
        return dataclasses.replace(base, **overrides)

    def _write(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
        add_generation_prompt: bool,
    ) -> TokenWriter:
        msgs = (
            messages
            if isinstance(messages, list) and all(isinstance(m, Message) for m in messages)
            else coerce_messages(messages)
        )
        for i, m in enumerate(msgs):
            if m.role not in self.roles:
                raise ValueError(
                    f"messages[{i}].role: unknown role {m.role!r} for {self.name} "
                    f"(expected one of {', '.join(self.roles)})"
                )
        tool_list = _check_tools(tools)
        writer = TokenWriter(self.table)
        self._render(
            writer,
            msgs,
            tool_list,
            self._with_options(self.options, options),
            add_generation_prompt,
        )
        return writer


def _mixed_segment(
    table: TokenTable, texts: list[str], piece_weights: list[float]
) -> tuple[list[int], list[float]]:
    """The ids of text pieces of different weight, which merge into tokens, and each
    token's weight: a token is trained if any of its bytes belongs to a trained piece."""
    text = "".join(texts)
    ids = table.encode(text)
    id_bytes = table.id_to_bytes
    lengths = [len(id_bytes[t]) for t in ids]
    data = text.encode("utf-8")
    if b"".join(map(id_bytes.__getitem__, ids)) != data:
        # The tokenizer normalized the text: weigh tokens by their character spans.
        ids, offsets = table.encode_with_offsets(text)
        char_weight = np.repeat(piece_weights, [len(t) for t in texts])
        return ids, [float(char_weight[a:b].max()) if b > a else 0.0 for a, b in offsets]
    piece_ends = list(accumulate(len(t.encode("utf-8")) for t in texts))
    weights = []
    p = 0
    start = 0
    for n in lengths:
        end = start + n
        while piece_ends[p] <= start:  # the piece holding the token's first byte
            p += 1
        q = p
        weight = piece_weights[p]
        while piece_ends[q] < end:  # and every later piece it reaches into
            q += 1
            weight = max(weight, piece_weights[q])
        weights.append(weight)
        start = end
    return ids, weights


def section_closing(
    result: ParseResult,
    completion_ids: Sequence[int],
    *,
    think_end: Sequence[int],
    call_end: int,
    section_begin: int,
    section_end: int,
    stop: int,
) -> list[int]:
    """The ids that close a turn cut off in a format with tool-call sections (DeepSeek,
    Kimi): the open reasoning or call, then the open section, then the stop token; none
    when the sample ended at a stop token."""
    if result.stop_token_id is not None:
        return []
    parts = result.message.parts
    last = parts[-1] if parts else None
    closing: list[int] = []
    if type(last) is ThinkingPart and last.incomplete:
        closing += think_end
    elif type(last) is UnparsedToolCallPart and last.incomplete:
        closing.append(call_end)
    opened = max((k for k, t in enumerate(completion_ids) if t == section_begin), default=-1)
    closed = max((k for k, t in enumerate(completion_ids) if t == section_end), default=-1)
    if opened > closed:
        closing.append(section_end)
    closing.append(stop)
    return closing


def plain_text(message: Message, index: int, renderer: str) -> str:
    """The text of a message that can only hold text (system, user, tool) in a format:
    its text parts joined; a thinking part or tool call there is a caller error."""
    if not isinstance(message.content, str):
        for k, part in enumerate(message.content):
            if type(part) is not TextPart:
                raise ValueError(
                    f"messages[{index}].content[{k}]: a {message.role} message can only hold "
                    f"text in {renderer}, got {type(part).__name__}"
                )
    return message.text


def checked_arguments(part: ToolCallPart, message_index: int) -> str:
    """The arguments text of a tool call about to be rendered, which every supported
    format embeds as JSON; a caller error names the message and the call otherwise."""
    try:
        json.loads(part.arguments)
    except ValueError as exc:
        raise ValueError(
            f"messages[{message_index}]: arguments of tool call {part.name!r} are not valid "
            f"JSON ({exc}): {part.arguments[:60]!r}"
        ) from None
    return part.arguments


def _check_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]] | None:
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ValueError("tools: expected a list of tool definitions (dicts)")
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise ValueError(f"tools[{i}]: expected a dict, got {type(tool).__name__}")
    return list(tools)
