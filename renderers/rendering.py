"""The renderer contract every model family implements, and helpers formats share.

A format module subclasses :class:`Renderer`: it writes a conversation with the core's
:class:`~renderers.core.writer.TokenWriter` (``_render``) and parses completions with a
:class:`~renderers.core.engine.StreamParser` (``_new_parser``); loss weights, options,
rollouts and caller checks are handled here once for every format.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar

import numpy as np

from renderers.core.engine import StreamParser
from renderers.core.loading import TokenizerSource, load_tokenizer, source_of
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    coerce_messages,
)
from renderers.core.options import options_from_text, with_options
from renderers.core.packaged_tokenizers import packaged_tokenizer
from renderers.core.result import ParseResult
from renderers.core.scanning import sampled_text_ids
from renderers.core.tokens import TokenTable, token_table
from renderers.core.tools import normalize_tools
from renderers.core.writer import TokenWriter
from renderers.rollout import ExtensionProperty, Rollout
from renderers.supervised_example import SupervisedExample
from renderers.turn_examples import split_examples
from renderers.view.model import MessageMarkers

__all__ = [
    "BaseRenderer",
    "Renderer",
    "TrainOn",
    "checked_arguments",
    "checked_prefill",
    "joined_text_parts",
    "plain_text",
    "section_closing",
    "selected_messages",
]


class TrainOn(StrEnum):
    """Which messages of a supervised example are trained (a message's own ``weight``
    overrides the mode for that message)."""

    LAST_ASSISTANT = "last_assistant"
    """What the model samples for the last assistant message (body and stop token)."""
    LAST_TURN = "last_turn"
    """What the model samples for the last whole assistant turn: the last assistant
    message and the assistant messages of the run of assistant and tool messages it ends
    (tool calls, then the final answer). Any other message (user, system, developer)
    ends the run."""
    LAST_ASSISTANT_TURN = "last_assistant_turn"
    """What the model samples for every assistant message after the last user message
    before the last assistant message (tool calls, then the final answer): tinker-cookbook's
    ``LAST_ASSISTANT_TURN`` (v0.5.5, ``renderers/base.py``; its Kimi-K2 renderer draws the
    line elsewhere). Equal to :attr:`LAST_TURN` unless a system or developer message stands
    between those assistant messages (this mode trains across it, ``last_turn`` stops
    there); a conversation without a user message trains every assistant message."""
    ALL_ASSISTANT = "all_assistant"
    """What the model samples for every assistant message."""
    ALL = "all"
    """Every token."""


class BaseRenderer:
    """The contract every model family implements: options, the format's two hooks
    (:meth:`_render` writes a conversation, :meth:`_new_parser` reads a completion),
    generation prompts and parsing. :class:`Renderer` builds training examples and
    multi-turn rollouts on it, and is what model families subclass.

    Subclasses define ``name``, ``default_model``, an ``Options`` frozen dataclass, the
    message ``roles`` the format knows and ``stop_token_ids``. Per-call options override
    the options given at construction.
    """

    name: ClassVar[str]
    default_model: ClassVar[str]
    Options: ClassVar[type[Any]]
    roles: ClassVar[tuple[str, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "default_model" in vars(cls) and "model_ids" not in vars(cls):
            cls.model_ids = (cls.default_model,)

    model_ids: ClassVar[tuple[str, ...]] = ()
    """Hub model ids this renderer answers to in :func:`renderers.get_renderer` (the
    default model first)."""

    tokenizer_source: ClassVar[str | None] = None
    """Where the default tokenizer loads from when not from the default model's hub files:
    a ``"module:Class"`` source (a tokenizer the publisher ships in a Python package:
    Llama's in ``llama-models``, Mistral's in ``mistral-common``, see
    :mod:`renderers.core.packaged_tokenizers`; or one whose hub files are not available
    here, such as tml-renderers' ``Nemotron3Tokenizer``); ``None``: the default model's."""

    message_markers: ClassVar[MessageMarkers] = MessageMarkers()
    """The control tokens that begin the format's messages: token views draw message
    boundaries from them, on any ids of the format (see :mod:`renderers.view`)."""

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        if tokenizer is None:
            tokenizer = load_tokenizer(self.tokenizer_source or self.default_model)
        tokenizer = packaged_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.table: TokenTable = token_table(tokenizer)
        self.options = self._with_options(self.Options(), options)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by class, options and tokenizer source (a model id), not by value, so
        renderers travel cheaply to worker processes; a process that already holds the
        tokenizer gets the renderer back from a per-process cache. A tokenizer that
        :func:`~renderers.load_tokenizer` did not load is pickled with it."""
        source = source_of(self.tokenizer)
        return (_restore, (type(self), source or self.tokenizer, self.options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(options={self.options!r})"

    def changed_options(self) -> dict[str, Any]:
        """The options that differ from the format's defaults."""
        defaults = self.Options()
        return {
            f.name: getattr(self.options, f.name)
            for f in dataclasses.fields(self.options)
            if getattr(self.options, f.name) != getattr(defaults, f.name)
        }

    # -- public API ---------------------------------------------------------------------

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """The ids a sampler should stop on."""
        raise NotImplementedError

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """The stop tokens as text, for servers that take ``stop`` strings rather than
        ids (in the order of :attr:`stop_token_ids`). Such a server must return control
        tokens as text (vLLM: ``skip_special_tokens=False``), and it usually leaves the
        matched stop string out of its output: pass ``finish_reason="stop"`` to
        :meth:`Rollout.add_completion` then."""
        return tuple(self.table.decode([t]) for t in self.stop_token_ids)

    def build_generation_prompt(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        prefill: str | None = None,
        **options: Any,
    ) -> list[int]:
        """Token ids of the conversation followed by the assistant generation prompt,
        identical to the official template's ``add_generation_prompt=True`` rendering.

        ``prefill``: text the model is forced to start its turn with, written after the
        generation prompt as ordinary text (control-token spellings stay text), tokenized
        with the prompt's text as the template's text is. It starts the part the turn
        starts with: the reasoning where thinking is on (after the think opener the prompt
        or the format writes), else the answer; each format's module says where. Parse the
        completion with the same ``prefill`` (:meth:`parse_response`) to get a message that
        includes it."""
        writer = self._write(messages, tools, options, add_generation_prompt=True, prefill=prefill)
        return writer.ids()

    def parse_response(self, token_ids: Sequence[int] | np.ndarray, **options: Any) -> ParseResult:
        """Parse the sampled completion (the ids after the generation prompt): a list, a 1-D
        NumPy array, or a 1-D tensor NumPy reads (PyTorch on the CPU).

        ``prefill=text``: the prompt ended with this prefill (see
        :meth:`build_generation_prompt`): the message starts with it, as if the model had
        sampled it; spans count from the completion's first id."""
        return self.stream_parser(_events=False, **options).parse(token_ids)

    def parse_text(self, text: str, **options: Any) -> ParseResult:
        """Parse a completion given as text (e.g. an API's raw completion): control-token
        spellings in it are the model's control tokens, so think blocks, tool calls and
        stop tokens parse as if the ids had been sampled. Spans are ids of that encoding."""
        if not isinstance(text, str):
            raise TypeError(f"text: expected a string, got {type(text).__name__}")
        return self.parse_response(sampled_text_ids(self.table, text), **options)

    def stream_parser(self, **options: Any) -> StreamParser:
        """An incremental parser: ``feed(ids) -> events``, ``finish() -> ParseResult``.

        Feeding the ids in any split gives the same result as :meth:`parse_response`
        (``prefill`` too: the events of the prefill's text come with the first feed).
        """
        events = options.pop("_events", True)
        prefill = checked_prefill(options.pop("prefill", None))
        chosen = self._with_options(self.options, options)
        parser = self._new_parser(chosen, events)
        if prefill:
            parser.read_before(self._prefill_ids(prefill, chosen))
        return parser

    def decode(self, token_ids: Sequence[int] | np.ndarray) -> str:
        """Decode ids to text (control tokens spelled out), for display and debugging."""
        return self.table.decode(token_ids)

    # -- prefill ------------------------------------------------------------------------

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        """Write ``prefill`` after the generation prompt: ordinary text, joined to the
        prompt's last text (formats whose prefill opens a part override this)."""
        w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        """What a parser reads before the completion for ``prefill``: what
        :meth:`_write_prefill` writes, as the model would have sampled it."""
        return self.table.encode(prefill)

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
        return with_options(base, overrides, self.name)

    @classmethod
    def options_from_text(cls, pairs: Mapping[str, str]) -> dict[str, Any]:
        """Typed option values from ``KEY=VALUE`` text (the command line's ``--option``)."""
        return options_from_text(cls.Options, pairs, cls.name)

    def _check_roles(self, msgs: Sequence[Message]) -> None:
        for i, m in enumerate(msgs):
            if m.role not in self.roles:
                raise ValueError(
                    f"messages[{i}].role: unknown role {m.role!r} for {self.name} "
                    f"(expected one of {', '.join(self.roles)})"
                )

    def _write(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
        add_generation_prompt: bool,
        trained: Collection[int] = (),
        prefill: str | None = None,
    ) -> TokenWriter:
        msgs = (
            messages
            if isinstance(messages, list) and all(isinstance(m, Message) for m in messages)
            else coerce_messages(messages)
        )
        self._check_roles(msgs)
        prefill = checked_prefill(prefill)
        tool_list = normalize_tools(tools)
        writer = TokenWriter(self.table, trained)
        chosen = self._with_options(self.options, options)
        self._render(writer, msgs, tool_list, chosen, add_generation_prompt)
        if prefill:
            self._write_prefill(writer, prefill, chosen)
        return writer


class Renderer(BaseRenderer):
    """A format's renderer: prompts and parsing (:class:`BaseRenderer`), supervised
    examples with loss weights, and multi-turn rollouts that keep the sampled ids.

    Multi-turn hooks a format overrides where its history differs from a re-rendering:
    :meth:`_parse_after_prompt`, :meth:`_close_turn`, :meth:`_dropped_stop`,
    :meth:`_continuation_context`, :meth:`_continuation`.
    """

    # -- supervised examples ------------------------------------------------------------

    def build_supervised_example(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        train_on: TrainOn | str | Collection[str] = TrainOn.LAST_ASSISTANT,
        *,
        train_end_of_turn: bool = True,
        attribution: bool = False,
        **options: Any,
    ) -> SupervisedExample:
        """Tokens of the whole conversation (as the official template renders it) and loss
        weights.

        ``train_on`` is a :class:`TrainOn` mode or a collection of roles (every message of
        those roles is trained). The untrained prefix of the first trained turn is its
        generation prompt (or this is a ``ValueError``, or the format's module docstring
        says when not), except for a turn a later user message follows: the conversation
        is written whole, that turn and those before it in their history form, which is
        not what the model samples where the format's history does not extend
        (:meth:`build_supervised_examples` trains every turn as sampled). A trained
        turn's reasoning the format cannot write is refused or dropped (option
        ``reasoning``); a token holding trained and untrained text is a ``ValueError``.

        A trained assistant message gets weight 1 on the tokens
        the model samples for it, including the token that ends it (unless
        ``train_end_of_turn=False``); a trained message of another role on all of its
        tokens. A message's own ``weight`` (``Message.weight``; ``weight``, ``train`` or
        ``trainable`` in a dict) replaces the mode's choice for it. ``attribution=True``
        also fills ``message_indices``: the message each token belongs to (-1 outside
        any message).
        """
        msgs = coerce_messages(messages)
        self._check_roles(msgs)  # before train_on's checks: the caller's first mistake
        weights, whole, outside = _message_weights(msgs, train_on, self.roles)
        return self._example(
            msgs,
            tools,
            weights,
            whole,
            outside,
            train_end_of_turn=train_end_of_turn,
            attribution=attribution,
            options=options,
        )

    def build_supervised_examples(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        train_on: TrainOn | str | Collection[str] = TrainOn.LAST_ASSISTANT,
        *,
        train_end_of_turn: bool = True,
        attribution: bool = False,
        **options: Any,
    ) -> list[SupervisedExample]:
        """The examples that train every trained turn exactly as the model samples it, in
        conversation order; arguments as :meth:`build_supervised_example`.

        One example, :meth:`build_supervised_example`'s, when every trained assistant turn
        is written in the whole conversation as the model samples it: its untrained prefix
        is the turn's generation prompt and its trained tokens run to its stop token, as
        in the conversation cut after the turn (the turn's *reference*). Where the format's
        history does not extend (Qwen3's history turns lose the think block the prompt
        ends with, reasoning the template drops before a later user message, Harmony's
        ``<|end|>`` after an earlier answer, ...: :attr:`extension_property`), the
        conversation becomes several examples: each turn in the longest conversation
        (the whole one, or one cut after a turn) that writes it as its reference does, so
        turns that extend together share an example, and a turn that extends into none
        is its reference alone. Nothing is refused or dropped for being history; a turn
        that cannot be trained even as the last one is refused as by the singular method.

        Each trained turn is trained once: ``example.turns`` lists the turns of each
        example and ``example.num_messages`` the messages it renders (a cut conversation
        ends with its last turn). Other trained messages (other roles, a message's own
        weight) and, with ``train_on="all"``, the template text are trained once, in the
        example of the whole conversation.
        """
        msgs = coerce_messages(messages)
        self._check_roles(msgs)
        weights, whole, outside = _message_weights(msgs, train_on, self.roles)
        turns = [i for i, w in enumerate(weights) if w and msgs[i].role == "assistant"]
        others = outside > 0 or any(
            w and msgs[i].role != "assistant" for i, w in enumerate(weights)
        )

        def build(cut: int, trained: Sequence[int], with_others: bool) -> SupervisedExample:
            chosen = [
                w if i in trained or (with_others and msgs[i].role != "assistant") else 0.0
                for i, w in enumerate(weights[:cut])
            ]
            return self._example(
                msgs[:cut],
                tools,
                chosen,
                whole[:cut],
                outside if with_others else 0.0,
                train_end_of_turn=train_end_of_turn,
                attribution=attribution,
                options=options,
            )

        def rendered(cut: int) -> list[int]:
            return self._rendered_ids(msgs[:cut], tools, options)

        return split_examples(len(msgs), turns, others, build, rendered)

    def _example(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        message_weights: Sequence[float],
        whole: Sequence[bool],
        outside: float,
        *,
        train_end_of_turn: bool,
        attribution: bool,
        options: Mapping[str, Any],
    ) -> SupervisedExample:
        """The example of ``msgs`` with each message's weight: on what the model samples of
        it, or on all of its tokens where ``whole`` says so; ``outside`` on template text
        outside any message."""
        trained = [i for i, weight in enumerate(message_weights) if weight]
        writer = self._write(msgs, tools, options, add_generation_prompt=False, trained=trained)
        pieces = writer.piece_weights(
            message_weights, whole, outside=outside, end_token=train_end_of_turn
        )
        tokens, weights, indices = writer.ids_and_weights(
            pieces, attribution=attribution, loss_weights=True
        )
        return SupervisedExample(
            tokens,
            weights,
            self.name,
            self.table,
            indices,
            markers=self.message_markers,
            turns=tuple(i for i in trained if msgs[i].role == "assistant"),
            num_messages=len(msgs),
        )

    def _rendered_ids(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
    ) -> list[int]:
        """The ids of ``msgs`` with nothing trained (no generation prompt)."""
        return self._write(msgs, tools, options, add_generation_prompt=False).ids()

    # -- multi-turn rollouts ------------------------------------------------------------

    def rollout(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        max_length: int | None = None,
        max_response_length: int | None = None,
        max_turns: int | None = None,
        prefill: str | None = None,
        **options: Any,
    ) -> Rollout:
        """Start a multi-turn episode that keeps the exact sampled ids, their logprobs and
        the span of every turn (see :class:`Rollout`). ``max_length`` bounds the whole
        episode, ``max_response_length`` the tokens after the initial prompt and
        ``max_turns`` the number of completions (see :meth:`Rollout.max_tokens` and
        :attr:`Rollout.done`); ``prefill`` ends the first prompt (see
        :meth:`build_generation_prompt`)."""
        return Rollout(
            self,
            messages,
            tools,
            max_length=max_length,
            max_response_length=max_response_length,
            max_turns=max_turns,
            prefill=prefill,
            **options,
        )

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

    def _dropped_stop(self, result: ParseResult, completion_ids: Sequence[int]) -> list[int]:
        """The ids that end a turn the sampler stopped without returning its stop token, as
        the model ends it (an export's last turn, which no history form follows): the
        closing of :meth:`_close_turn` unless the format's history spells it otherwise."""
        return self._close_turn(result, completion_ids)[1]

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
        prefill: str | None = None,
    ) -> list[int]:
        """Ids the template writes after the end token of the last (sampled) message of
        ``history``: template text, ``new_messages`` and the generation prompt (then
        ``prefill``)."""
        writer = self._write(
            [*history, *new_messages], tools, options, add_generation_prompt=True, prefill=prefill
        )
        return writer.ids_after(len(history) - 1)


def checked_prefill(prefill: Any) -> str | None:
    """The ``prefill`` a caller gave (``None`` or text; a ``TypeError`` otherwise)."""
    if prefill is not None and not isinstance(prefill, str):
        raise TypeError(f"prefill: expected text (a str) or None, got {type(prefill).__name__}")
    return prefill


_RESTORED: dict[tuple[type[Renderer], TokenizerSource, Any], Renderer] = {}


def _restore(cls: type[Renderer], source: Any, options: Any) -> Renderer:
    """A renderer from its pickled form (see :meth:`Renderer.__reduce__`)."""
    values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    if not isinstance(source, tuple):  # a tokenizer pickled by value
        return cls(source, **values)
    key = (cls, source, options)
    renderer = _RESTORED.get(key)
    if renderer is None:
        renderer = _RESTORED.setdefault(key, cls(load_tokenizer(*source), **values))
    return renderer


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


def joined_text_parts(parts: Sequence[Part]) -> list[Part]:
    """``parts`` with each run of adjacent text parts as one: for formats whose template
    has one content string, text split across parts is that text (it is stripped whole)."""
    out: list[Part] = []
    for part in parts:
        if type(part) is TextPart and out and type(out[-1]) is TextPart:
            out[-1] = TextPart(out[-1].text + part.text)
        else:
            out.append(part)
    return out


def checked_arguments(part: ToolCallPart, message_index: int) -> str:
    """The arguments text of a tool call about to be rendered, which every supported
    format embeds as JSON; a caller error names the message and the call otherwise."""
    if part.arguments in _VALID_JSON:
        return part.arguments
    try:
        json.loads(part.arguments)
    except ValueError as exc:
        raise ValueError(
            f"messages[{message_index}]: arguments of tool call {part.name!r} are not valid "
            f"JSON ({exc}): {part.arguments[:60]!r}"
        ) from None
    if len(part.arguments) <= 4096:
        if len(_VALID_JSON) >= 4096:
            _VALID_JSON.clear()
        _VALID_JSON.add(part.arguments)
    return part.arguments


# Arguments texts known to be valid JSON (a history's calls are checked at every render).
_VALID_JSON: set[str] = set()


def selected_messages(
    messages: list[Message], train_on: TrainOn | str | Collection[str], roles: Sequence[str]
) -> list[bool] | None:
    """Which messages ``train_on`` trains (``None``: every token, :attr:`TrainOn.ALL`)."""
    if isinstance(train_on, str):
        try:
            mode = TrainOn(train_on)
        except ValueError:
            choices = ", ".join(repr(t.value) for t in TrainOn)
            raise ValueError(
                f"train_on: expected one of {choices} or a collection of roles, got {train_on!r}"
            ) from None
        if mode is TrainOn.ALL:
            return None
        assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
        if not assistants and all(m.weight is None for m in messages):
            raise ValueError(
                f"train_on={mode.value!r}: the conversation has no assistant message to train on"
            )
        if mode is TrainOn.LAST_ASSISTANT:
            chosen = set(assistants[-1:])
        elif not assistants:  # only messages with their own weight are trained
            chosen = set()
        elif mode is TrainOn.LAST_TURN:
            start = assistants[-1]
            while start > 0 and messages[start - 1].role in ("assistant", "tool"):
                start -= 1
            chosen = {i for i in assistants if i >= start}
        elif mode is TrainOn.LAST_ASSISTANT_TURN:
            start = assistants[-1]
            while start > 0 and messages[start - 1].role != "user":
                start -= 1
            chosen = {i for i in assistants if i >= start}
        else:
            chosen = set(assistants)
        return [i in chosen for i in range(len(messages))]
    wanted = set(train_on)
    unknown = sorted(wanted - set(roles))
    if unknown or not wanted:
        raise ValueError(
            f"train_on: unknown role(s) {', '.join(map(repr, unknown)) or '(none given)'} "
            f"(expected {', '.join(roles)})"
        )
    return [m.role in wanted for m in messages]


def _message_weights(
    msgs: list[Message], train_on: TrainOn | str | Collection[str], roles: Sequence[str]
) -> tuple[list[float], list[bool], float]:
    """Each message's weight under ``train_on`` (its own ``weight`` first), whether it is
    trained whole (every message under ``"all"``, messages of other roles than assistant
    otherwise), and the weight of template text outside any message."""
    selected = selected_messages(msgs, train_on, roles)
    everything = selected is None
    chosen = selected if selected is not None else [True] * len(msgs)
    weights = [m.weight if m.weight is not None else float(chosen[i]) for i, m in enumerate(msgs)]
    if not everything and not any(weights):
        raise ValueError(f"train_on={_train_on_label(train_on)}: no message is trained")
    whole = [everything or m.role != "assistant" for m in msgs]
    return weights, whole, 1.0 if everything else 0.0


def _train_on_label(train_on: TrainOn | str | Collection[str]) -> str:
    if isinstance(train_on, str):
        return repr(str(train_on))
    return ",".join(sorted(train_on))
