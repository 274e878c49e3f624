"""The template renderer: any model with a chat template, with the library's guarantees
where the template's structure allows them.

**Rendering.** The tokenizer's own chat template (``chat_template.jinja`` or the
``chat_template`` of ``tokenizer_config.json``, as transformers loads it) runs in the
sandbox of :mod:`~renderers.template.environment` with the conversation as
``apply_chat_template`` passes it (:mod:`~renderers.template.inputs`). Message text goes
through placeholders (:mod:`~renderers.template.placeholders`) so it is ordinary text:
the ids equal ``apply_chat_template(tokenize=True)`` except where message text spells a
control token, or joins its neighbour into one; :meth:`TemplateRenderer.differences`
reports those places.

**Supervised weights** come from the template's structure
(:mod:`~renderers.template.weights`): a trained turn is what follows its generation prompt
through its stop token; the untrained prefix is the generation prompt, or building the
example is a ``ValueError`` naming the turn, and so is a trained last turn whose text or
calls the template drops. Where the template's text of the turn goes on from the prompt's
text but not token by token, the turn is what the model samples after that prompt, as the
specialised renderers train it: Qwen3.5's prompt ends ``<think>⏎`` and an empty think
block's ``⏎⏎`` would swallow that newline; Nemotron-3's prompt opens ``<think>⏎`` where a
turn without reasoning is written ``<think></think>``
(:class:`~renderers.template.training.TemplateTurns`).
A trained turn whose reasoning the template does not write follows the ``reasoning``
option of every renderer (refused, or dropped with ``"drop"``).

**Parsing** follows a :class:`~renderers.template.spec.FormatSpec`, inferred from the
template and the vocabulary unless given, run by the existing parsers
(:mod:`~renderers.template.parsers`).

**Prefill** follows the generation prompt as the template writes it: it starts the
reasoning exactly when that prompt opens it (a Qwen3-style template with thinking on does
not: there the prefill is text before the model's own ``<think>``; the model's renderer
opens the reasoning first), and a Harmony template's prefill is gpt-oss's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from renderers.core.engine import StreamParser
from renderers.core.loading import TokenizerSource, load_tokenizer, source_of
from renderers.core.messages import Message, ThinkingPart, coerce_messages
from renderers.core.options import DraftedCalls, Reasoning
from renderers.core.result import ParseResult
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, TrainOn, checked_prefill, selected_messages
from renderers.rollout import ExtensionProperty
from renderers.supervised_example import SupervisedExample
from renderers.template.chat_template import ChatTemplate
from renderers.template.parsers import SpecParsing
from renderers.template.placeholders import (
    TemplateDifference,
)
from renderers.template.spec import PROBE_USER, FormatSpec, infer_spec
from renderers.template.training import TemplateTurns

__all__ = ["TemplateOptions", "TemplateRenderer"]

# What apply_chat_template itself passes; not options a caller can set.
_RESERVED = frozenset({"messages", "tools", "documents", "add_generation_prompt"})


@dataclass(frozen=True, slots=True)
class TemplateOptions:
    """The template's keyword options (what ``apply_chat_template`` passes as ``**kwargs``,
    e.g. ``enable_thinking``), as ``(name, value)`` pairs, and the library's ``reasoning``
    rule (:data:`~renderers.core.options.Reasoning`) and ``drafted_calls`` parsing choice,
    which are not passed to the template."""

    kwargs: tuple[tuple[str, Any], ...] = ()
    """The template's own variables as ``(name, value)`` pairs (``enable_thinking``...)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the template does not write (e.g.
    a turn before the last user query for Qwen3's template): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does, so generation prompts never fail on it."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing a grammar of calls in tags (Qwen3-style): a call tag sampled inside open
    reasoning stays reasoning text with an issue (``"reasoning"``) or ends the reasoning
    and is a call, as vLLM's Qwen3 parser reads it (``"call"``; see
    :data:`~renderers.core.options.DraftedCalls`). Other grammars take ``"reasoning"``."""

    def merged(self, overrides: Mapping[str, Any], names: Collection[str]) -> TemplateOptions:
        """These options with ``overrides`` (checked against the option ``names``)."""
        unknown = sorted(k for k in overrides if k not in names)
        if unknown:
            known = ", ".join(names) or "none"
            raise TypeError(
                f"template: unknown option(s) {', '.join(map(repr, unknown))} (the chat "
                f"template reads: {known})"
            )
        merged = dict(self.kwargs)
        merged.update(overrides)
        reasoning = merged.pop("reasoning", self.reasoning)
        if reasoning not in ("error", "drop"):
            raise TypeError(
                f"template: option reasoning: expected 'error' or 'drop', got {reasoning!r}"
            )
        drafted = merged.pop("drafted_calls", self.drafted_calls)
        if drafted not in ("reasoning", "call"):
            raise TypeError(
                f"template: option drafted_calls: expected 'reasoning' or 'call', got {drafted!r}"
            )
        return TemplateOptions(tuple(sorted(merged.items())), reasoning, drafted)

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults, as keyword arguments."""
        changed = dict(self.kwargs)
        if self.reasoning != "error":
            changed["reasoning"] = self.reasoning
        if self.drafted_calls != "reasoning":
            changed["drafted_calls"] = self.drafted_calls
        return changed


_LIBRARY_OPTIONS = frozenset({"reasoning", "drafted_calls"})
"""Options of the library, not of the template (never passed to it)."""


class TemplateRenderer(Renderer):
    """A renderer driven by a model's own chat template (see the module docs).

    ``tokenizer`` (or ``model_id`` to load one) gives the vocabulary and, unless
    ``chat_template`` is given, the template. ``spec`` says how to parse completions
    (inferred from the template when not given: :attr:`spec_origin`, :attr:`spec_notes`).
    ``sort_tool_keys`` sorts the keys of every dict in ``tools`` before templating, as
    Kimi-K2's tokenizer code does around its template. Options are the template's keyword
    arguments (``enable_thinking=False``).
    """

    name = "template"
    Options = TemplateOptions
    roles = ()

    def __init__(
        self,
        tokenizer: Any = None,
        *,
        model_id: str | None = None,
        chat_template: str | None = None,
        spec: FormatSpec | None = None,
        sort_tool_keys: bool = False,
        **options: Any,
    ) -> None:
        if tokenizer is None:
            if model_id is None:
                raise TypeError("TemplateRenderer needs a tokenizer or a model_id")
            tokenizer = load_tokenizer(model_id)
        source = source_of(tokenizer)
        self.model_id: str | None = model_id or (
            source[0] if source else getattr(tokenizer, "name_or_path", None) or None
        )
        self._custom_template = chat_template
        # Before the options, which are the template's variables.
        self._chat = ChatTemplate.of(tokenizer, chat_template, sort_tool_keys, self.model_id)
        super().__init__(tokenizer, **options)
        self._given_spec = spec
        self.spec: FormatSpec | None = spec
        self.spec_origin = "given"
        self.spec_notes: tuple[str, ...] = ()
        if spec is None:
            eos = [e for e in (self._chat.special.get("eos_token"),) if isinstance(e, str)]
            eos += _generation_config_eos(self.model_id, self.table.control_text)
            text = "\n".join(self._chat.templates.values())
            self.spec, self.spec_notes = infer_spec(self._chat.probe, self.table, text, eos)
            self.spec_origin = "inferred from the template and the vocabulary"
        self._parsing = SpecParsing(self.spec, self.table) if self.spec is not None else None
        self._openings: dict[str, tuple[bool, str]] = {}

    def __repr__(self) -> str:
        return f"TemplateRenderer(model_id={self.model_id!r}, options={self.changed_options()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        source = source_of(self.tokenizer) or self.tokenizer
        given = (self._custom_template, self._given_spec, self._chat.sort_tool_keys)
        return (_restore, (source, *given, self.options))

    @property
    def option_names(self) -> tuple[str, ...]:
        """The template's variables a caller can set as options (``enable_thinking``...):
        what it reads, besides the conversation and the tokenizer's special tokens."""
        return tuple(
            sorted((self._chat.variables - _RESERVED - set(self._chat.special)) | _LIBRARY_OPTIONS)
        )

    def changed_options(self) -> dict[str, Any]:
        return TemplateOptions.changed(self.options)

    # -- options ------------------------------------------------------------------------

    def _with_options(self, base: Any, overrides: Mapping[str, Any]) -> Any:
        return base if not overrides else base.merged(overrides, self.option_names)

    @classmethod
    def options_from_text(cls, pairs: Mapping[str, str]) -> dict[str, Any]:
        """Option values from ``KEY=VALUE`` text: JSON (``true``, ``3``, ``"x"``, ``[...]``)
        where the text is JSON, else the text itself."""
        return {key: _json_or_text(text) for key, text in pairs.items()}

    # -- rendering ----------------------------------------------------------------------

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return () if self._parsing is None else self._parsing.stop_ids

    def build_generation_prompt(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        prefill: str | None = None,
        **options: Any,
    ) -> list[int]:
        """The template's generation prompt, message text as ordinary text; ``prefill``
        after it (see :meth:`Renderer.build_generation_prompt`: here the prefill follows
        the prompt as the template writes it, so it starts the reasoning exactly when that
        prompt opens it; a Harmony template's prefill is gpt-oss's)."""
        chosen = self._with_options(self.options, options)
        rendering = self._chat.rendering(_given_messages(messages), tools, chosen.kwargs, True)
        writer = rendering.writer(self.table)
        prefill = checked_prefill(prefill)
        if prefill:
            self._write_prefill(writer, prefill, chosen)
        return writer.ids()

    def differences(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        **options: Any,
    ) -> tuple[TemplateDifference, ...]:
        """Where this rendering's ids differ from tokenizing the raw template's output
        (``apply_chat_template(tokenize=True)``): empty when they are equal."""
        kwargs = self._with_options(self.options, options).kwargs
        return self._chat.differences(
            _given_messages(messages), tools, kwargs, add_generation_prompt
        )

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
        """The template's rendering of the conversation and loss weights from its
        structure (see the module docs). The template path trains by mode
        (:class:`~renderers.TrainOn`); roles, message weights, ``train_end_of_turn=False``
        and ``attribution`` need a specialised renderer (a ``ValueError`` says so)."""
        msgs = _template_mode(messages, train_on, train_end_of_turn, attribution)
        chosen = self._with_options(self.options, options)
        selected = selected_messages(msgs, train_on, self.roles)
        if selected is None:  # train_on="all"
            msgs, ids = self._turns(chosen).whole(msgs, tools, chosen.kwargs)
            return SupervisedExample(
                np.asarray(ids, dtype=np.int64),
                np.ones(len(ids), np.float32),
                self.name,
                self.table,
                num_messages=len(msgs),
            )
        trained = [i for i, chosen_turn in enumerate(selected) if chosen_turn]
        return self._turns_example(msgs, tools, trained, chosen)

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
        """As :meth:`Renderer.build_supervised_examples`, by mode only (see
        :meth:`build_supervised_example`); ``train_on="all"`` trains every token of the
        whole conversation as one example (the template path has no turn to train alone
        under it)."""
        msgs = _template_mode(messages, train_on, train_end_of_turn, attribution)
        if train_on == TrainOn.ALL.value:
            return [self.build_supervised_example(msgs, tools, train_on, **options)]
        return super().build_supervised_examples(msgs, tools, train_on, **options)

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
        # Assistant turns of weight 1 (what the modes give; _template_mode refused others).
        trained = [i for i, weight in enumerate(message_weights) if weight]
        assert outside == 0 and not any(whole[i] for i in trained)
        return self._turns_example(msgs, tools, trained, self._with_options(self.options, options))

    def _check_roles(self, msgs: Sequence[Message]) -> None:
        """Any role: the template decides what it renders."""

    def _rendered_ids(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
    ) -> list[int]:
        return self._chat.ids(msgs, tools, self._with_options(self.options, options).kwargs, False)

    def _turns_example(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        trained: list[int],
        chosen: TemplateOptions,
    ) -> SupervisedExample:
        """The example training the assistant turns ``trained``: each from its generation
        prompt through its stop token."""
        msgs, tokens, weights = self._turns(chosen).example(msgs, tools, trained, chosen.kwargs)
        return SupervisedExample(
            tokens, weights, self.name, self.table, turns=tuple(trained), num_messages=len(msgs)
        )

    def _turns(self, chosen: TemplateOptions) -> TemplateTurns:
        parsing = self._parsing
        opens = (lambda ids: parsing.reasoning_start(ids)[0]) if parsing else (lambda ids: False)
        return TemplateTurns(self._chat, frozenset(self.stop_token_ids), opens, chosen.reasoning)

    # -- parsing --------------------------------------------------------------------------

    def _opening(self, options: TemplateOptions) -> tuple[bool, str]:
        key = repr(options.kwargs)  # values may be lists (unhashable)
        cached = self._openings.get(key)
        if cached is None:
            prompt = self._chat.ids([PROBE_USER], None, options.kwargs, True)
            assert self._parsing is not None
            cached = self._openings[key] = self._parsing.reasoning_start(prompt)
        return cached

    def _new_parser(self, options: TemplateOptions, events: bool) -> StreamParser:
        if self._parsing is None:
            raise ValueError(
                "cannot parse completions: no format spec could be inferred from the chat "
                "template (see spec_notes); pass spec=FormatSpec(...)"
            )
        return self._parsing.parser(
            events, *self._opening(options), calls_end_reasoning=options.drafted_calls == "call"
        )

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        if self._parsing is None:
            raise ValueError("cannot parse completions: pass spec=FormatSpec(...)")
        rest = dict(options)
        prefill = checked_prefill(rest.pop("prefill", None))
        chosen = self._with_options(self.options, rest)
        before = self._prefill_ids(prefill, chosen) if prefill else []
        drafted = chosen.drafted_calls == "call"
        return self._parsing.parse_after(prompt_ids, completion_ids, before, drafted)

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        if self._parsing is not None:
            self._parsing.write_prefill(w, prefill)
        else:
            w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        if self._parsing is not None:
            return self._parsing.prefill_ids(prefill)
        return self.table.encode(prefill)

    # -- multi-turn rollouts ----------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "a template-driven format: re-rendering is not known to reproduce sampled turns "
            "(templates commonly drop reasoning and re-serialize tool calls)",
        )

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        if self._parsing is None:
            return 0, [] if result.stop_token_id is not None else [*self.stop_token_ids[:1]]
        return self._parsing.close_turn(result, completion_ids)

    def _continuation(
        self,
        history: list[Message],
        new_messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        options: Mapping[str, Any],
        prefill: str | None = None,
    ) -> list[int]:
        chosen = self._with_options(self.options, options)
        kwargs = chosen.kwargs
        messages = [*history, *new_messages]
        rendering, owners = self._chat.attributed(messages, tools, kwargs, True)
        ids = rendering.writer(self.table).ids()
        t = len(history) - 1
        _, end = self._turns(chosen).turn_span(
            messages, t, tools, kwargs, ids, owners, strict=False
        )
        if not prefill:
            return ids[end:]
        # The prefill joins the prompt's last text, as build_generation_prompt writes it.
        full = self.build_generation_prompt(messages, tools, prefill=prefill, **options)
        assert full[:end] == ids[:end], "a prefill changed the ids before the prompt"
        return full[end:]


def _template_mode(
    messages: Iterable[Message | Mapping[str, Any]],
    train_on: TrainOn | str | Collection[str],
    train_end_of_turn: bool,
    attribution: bool,
) -> list[Message]:
    """The messages, once the template path's limits are checked: modes only, no
    message weights, every end token trained, no attribution."""
    if not isinstance(train_on, str):
        raise ValueError(
            "train_on: the template renderer trains modes (last_assistant, last_turn, "
            f"last_assistant_turn, all_assistant, all), not roles: got {sorted(train_on)}"
        )
    if not train_end_of_turn or attribution:
        raise ValueError(
            "the template renderer does not support train_end_of_turn=False or "
            "attribution=True (a specialised renderer does)"
        )
    msgs = _given_messages(messages)
    if any(m.weight is not None for m in msgs):
        raise ValueError(
            "the template renderer does not support per-message weights (weight, train "
            "or trainable fields; a specialised renderer does)"
        )
    return msgs


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _given_messages(messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
    """The messages as :func:`coerce_messages` reads them, except that an empty reasoning
    string of an assistant message (``reasoning_content: ""``, or ``thinking: ""``) stays
    an empty thinking part:
    transformers passes it to the template, which may write it (gpt-oss's writes an empty
    analysis message, where it writes none for absent reasoning)."""
    given = list(messages)
    out = coerce_messages(given)
    for i, raw in enumerate(given):
        if (
            not isinstance(raw, Mapping)
            or out[i].role != "assistant"
            or out[i].thinking is not None
        ):
            continue
        reasoning = raw.get("reasoning_content", raw.get("thinking"))
        if reasoning == "" and isinstance(reasoning, str):
            m = out[i]
            parts = [ThinkingPart(""), *m.parts]
            out[i] = Message(m.role, parts, m.name, m.tool_call_id, m.weight)
    return out


def _generation_config_eos(model_id: str | None, spell: Callable[[int], str | None]) -> list[str]:
    """The end-of-sequence tokens of the model's ``generation_config.json`` (from a local
    directory or the hub client; none when it is not there)."""
    if model_id is None:
        return []
    path = Path(model_id) / "generation_config.json"
    if not path.is_file():
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

        try:
            path = Path(hf_hub_download(model_id, "generation_config.json"))
        except (EntryNotFoundError, LocalEntryNotFoundError, OSError, ValueError):
            return []
    try:
        eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    except (OSError, ValueError, AttributeError):
        return []
    ids = eos if isinstance(eos, list) else [eos]
    return [s for t in ids if isinstance(t, int) and (s := spell(t)) is not None]


_RESTORED: dict[tuple[Any, ...], TemplateRenderer] = {}


def _restore(
    source: TokenizerSource | Any,
    chat_template: str | None,
    spec: FormatSpec | None,
    sort_tool_keys: bool,
    options: TemplateOptions,
) -> TemplateRenderer:
    """A template renderer from its pickled form (a model id, not the tokenizer, when
    :func:`~renderers.load_tokenizer` loaded it), cached per process."""
    kwargs = dict(options.kwargs)
    if not isinstance(source, tuple):
        return TemplateRenderer(
            source, chat_template=chat_template, spec=spec, sort_tool_keys=sort_tool_keys, **kwargs
        )
    key = (source, chat_template, spec, sort_tool_keys, repr(options))
    renderer = _RESTORED.get(key)
    if renderer is None:
        renderer = TemplateRenderer(
            load_tokenizer(*source),
            chat_template=chat_template,
            spec=spec,
            sort_tool_keys=sort_tool_keys,
            **kwargs,
        )
        renderer = _RESTORED.setdefault(key, renderer)
    return renderer
