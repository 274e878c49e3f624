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
calls the template drops. A trained turn whose reasoning the template does not write
follows the ``reasoning`` option of every renderer (refused, or dropped with ``"drop"``).

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
from renderers.core.messages import Message, ThinkingPart, UnparsedToolCallPart, coerce_messages
from renderers.core.options import DraftedCalls, Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.tools import deep_sort
from renderers.core.writer import TokenWriter
from renderers.gpt_oss import GptOssRenderer
from renderers.rendering import Renderer, TrainOn, checked_prefill, selected_messages
from renderers.rollout import ExtensionProperty
from renderers.supervised_example import SupervisedExample
from renderers.template.environment import (
    TemplateError,
    compile_template,
    template_variables,
)
from renderers.template.inputs import template_messages, template_value
from renderers.template.parsers import SpecParsing
from renderers.template.placeholders import (
    MarkerClash,
    Marks,
    Rendering,
    TemplateDifference,
    marker_base,
    private_use,
    read_rendering,
)
from renderers.template.spec import PROBE_CALL_ONLY, PROBE_TOOL, PROBE_USER, FormatSpec, infer_spec
from renderers.template.weights import (
    Owners,
    check_written,
    common_prefix,
    owners_of,
    turn_span,
)

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
        templates = _templates(chat_template or getattr(tokenizer, "chat_template", None))
        if not templates:
            raise ValueError(
                f"{self.model_id or 'the tokenizer'} has no chat template (neither "
                "chat_template.jinja nor tokenizer_config.json's chat_template); pass "
                "chat_template=..."
            )
        self._templates = templates
        self._custom_template = chat_template
        for text in templates.values():
            compile_template(text)  # a syntax error is the caller's to know now
        self._variables = frozenset().union(*map(template_variables, templates.values()))
        self._template_characters = frozenset(private_use("".join(templates.values())))
        self.sort_tool_keys = sort_tool_keys
        special = getattr(tokenizer, "special_tokens_map", None) or {}
        self._special = {k: v for k, v in special.items() if isinstance(v, (str, list))}
        super().__init__(tokenizer, **options)
        self._none_content = self._needs_none_content()
        self._given_spec = spec
        if spec is None:
            eos = [e for e in (self._special.get("eos_token"),) if isinstance(e, str)]
            eos += _generation_config_eos(self.model_id, self.table.control_text)
            inferred, notes = infer_spec(
                self._probe, self.table, "\n".join(templates.values()), eos
            )
            self.spec: FormatSpec | None = inferred
            self.spec_origin = "inferred from the template and the vocabulary"
            self.spec_notes: tuple[str, ...] = notes
        else:
            self.spec = spec
            self.spec_origin = "given"
            self.spec_notes = ()
        self._parsing = (
            SpecParsing(self.spec, tokenizer, self.table) if self.spec is not None else None
        )
        self._openings: dict[str, tuple[bool, str]] = {}

    def __repr__(self) -> str:
        return f"TemplateRenderer(model_id={self.model_id!r}, options={self.changed_options()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        source = source_of(self.tokenizer)
        return (
            _restore,
            (
                source or self.tokenizer,
                self._custom_template,
                self._given_spec,
                self.sort_tool_keys,
                self.options,
            ),
        )

    @property
    def option_names(self) -> tuple[str, ...]:
        """The template's variables a caller can set as options (``enable_thinking``...):
        what it reads, besides the conversation and the tokenizer's special tokens."""
        return tuple(sorted((self._variables - _RESERVED - set(self._special)) | _LIBRARY_OPTIONS))

    def changed_options(self) -> dict[str, Any]:
        changed = dict(self.options.kwargs)
        if self.options.reasoning != "error":
            changed["reasoning"] = self.options.reasoning
        if self.options.drafted_calls != "reasoning":
            changed["drafted_calls"] = self.options.drafted_calls
        return changed

    # -- options ------------------------------------------------------------------------

    def _with_options(self, base: Any, overrides: Mapping[str, Any]) -> Any:
        if not overrides:
            return base
        unknown = sorted(k for k in overrides if k not in self.option_names)
        if unknown:
            known = ", ".join(self.option_names) or "none"
            raise TypeError(
                f"template: unknown option(s) {', '.join(map(repr, unknown))} (the chat "
                f"template reads: {known})"
            )
        merged = dict(base.kwargs)
        merged.update(overrides)
        reasoning = merged.pop("reasoning", base.reasoning)
        if reasoning not in ("error", "drop"):
            raise TypeError(
                f"template: option reasoning: expected 'error' or 'drop', got {reasoning!r}"
            )
        drafted = merged.pop("drafted_calls", base.drafted_calls)
        if drafted not in ("reasoning", "call"):
            raise TypeError(
                f"template: option drafted_calls: expected 'reasoning' or 'call', got {drafted!r}"
            )
        return TemplateOptions(tuple(sorted(merged.items())), reasoning, drafted)

    @classmethod
    def options_from_text(cls, pairs: Mapping[str, str]) -> dict[str, Any]:
        """Option values from ``KEY=VALUE`` text: JSON (``true``, ``3``, ``"x"``, ``[...]``)
        where the text is JSON, else the text itself."""
        out: dict[str, Any] = {}
        for key, text in pairs.items():
            try:
                out[key] = json.loads(text)
            except ValueError:
                out[key] = text
        return out

    # -- rendering ----------------------------------------------------------------------

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        if self._parsing is None:
            return ()
        return self._parsing.stop_ids

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
        rendering = self._rendering(coerce_messages(messages), tools, chosen.kwargs, True)
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
        msgs = coerce_messages(messages)
        rendering = self._rendering(msgs, tools, kwargs, add_generation_prompt)
        found = rendering.differences
        if rendering.protected:
            raw = self._raw_text(msgs, tools, kwargs, add_generation_prompt)
            if raw != rendering.text:
                why = _first_difference(raw, rendering.text)
                found += (TemplateDifference(None, why, "template logic"),)
        return found

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
        msgs = self._template_mode(messages, train_on, train_end_of_turn, attribution)
        chosen = self._with_options(self.options, options)
        selected = selected_messages(msgs, train_on, self.roles)
        if selected is None:  # train_on="all"
            kwargs = chosen.kwargs
            msgs, rendering, owners = self._without_lost_reasoning(
                msgs, range(len(msgs)), tools, chosen
            )
            if msgs and msgs[-1].role == "assistant":
                self._check_written(msgs, len(msgs) - 1, tools, kwargs, rendering, owners)
            ids = rendering.writer(self.table).ids()
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
        msgs = self._template_mode(messages, train_on, train_end_of_turn, attribution)
        if train_on == TrainOn.ALL.value:
            return [self.build_supervised_example(msgs, tools, train_on, **options)]
        return super().build_supervised_examples(msgs, tools, train_on, **options)

    def _template_mode(
        self,
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
        msgs = coerce_messages(messages)
        if any(m.weight is not None for m in msgs):
            raise ValueError(
                "the template renderer does not support per-message weights (weight, train "
                "or trainable fields; a specialised renderer does)"
            )
        return msgs

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
        # What build_supervised_examples asks for: assistant turns, weight 1 (the modes'
        # weights; _template_mode refused everything else).
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
        return self._ids(msgs, tools, self._with_options(self.options, options).kwargs, False)

    def _without_lost_reasoning(
        self,
        msgs: list[Message],
        trained: Iterable[int],
        tools: Sequence[Mapping[str, Any]] | None,
        chosen: TemplateOptions,
    ) -> tuple[list[Message], Rendering, Owners | None]:
        """The conversation's attributed rendering once the reasoning the template does
        not write for the ``trained`` turns is refused, or dropped (``reasoning="drop"``)."""
        kwargs = chosen.kwargs
        rendering, owners = self._attributed(msgs, tools, kwargs, False)
        lost = self._reasoning_lost(msgs, trained, tools, kwargs, rendering, owners)
        if lost:
            if chosen.reasoning == "error":
                raise reasoning_error(
                    "the chat template", lost[0], "the template drops it from this turn"
                )
            msgs = [
                Message(m.role, [p for p in m.parts if type(p) is not ThinkingPart], m.name)
                if i in lost
                else m
                for i, m in enumerate(msgs)
            ]
            rendering, owners = self._attributed(msgs, tools, kwargs, False)
        return msgs, rendering, owners

    def _turns_example(
        self,
        msgs: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        trained: list[int],
        chosen: TemplateOptions,
    ) -> SupervisedExample:
        """The example training the assistant turns ``trained``: each from its generation
        prompt through its stop token."""
        if not trained:
            raise ValueError("train_on: no message is trained")
        kwargs = chosen.kwargs
        msgs, rendering, owners = self._without_lost_reasoning(msgs, trained, tools, chosen)
        tokens = np.asarray(rendering.writer(self.table).ids(), dtype=np.int64)
        ids = tokens.tolist()
        weights = np.zeros(len(ids), dtype=np.float32)
        last = trained[-1]
        for t in trained:
            start, end = self._turn_span(msgs, t, tools, kwargs, ids, owners, strict=t == last)
            weights[start:end] = 1.0
        if last == len(msgs) - 1:
            self._check_written(msgs, last, tools, kwargs, rendering, owners)
        return SupervisedExample(
            tokens,
            weights,
            self.name,
            self.table,
            turns=tuple(trained),
            num_messages=len(msgs),
        )

    # -- the template ---------------------------------------------------------------------

    def _template(self, tools: Sequence[Mapping[str, Any]] | None) -> str:
        """The template ``apply_chat_template`` would use (named templates: ``tool_use``
        when there are tools, else ``default``)."""
        templates = self._templates
        if len(templates) == 1:
            return next(iter(templates.values()))
        if tools and "tool_use" in templates:
            return templates["tool_use"]
        return templates.get("default") or next(iter(templates.values()))

    def _text(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
        marks: Marks,
        *,
        none_content: bool | None = None,
    ) -> str:
        """The template's output for the conversation (with ``marks``' placeholders)."""
        if tools is not None:
            if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
                raise ValueError("tools: expected a list of tool definitions (dicts)")
            for i, tool in enumerate(tools):
                if not isinstance(tool, Mapping):
                    raise ValueError(f"tools[{i}]: expected a dict, got {type(tool).__name__}")
            if self.sort_tool_keys:
                tools = deep_sort(tools)
        empty = none_content if none_content is not None else self._none_content
        inputs = template_messages(messages, marks, none_content=empty)
        variables: dict[str, Any] = dict(self._special)
        variables.update((k, template_value(v, marks, k)) for k, v in kwargs)
        try:
            return compile_template(self._template(tools)).render(
                messages=inputs,
                tools=template_value(list(tools), marks, "tools") if tools is not None else None,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **variables,
            )
        except (TemplateError, TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
            raise ValueError(f"the chat template failed: {type(exc).__name__}: {exc}") from None

    def _rendering(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
        *,
        attribute: bool = False,
    ) -> Rendering:
        """The template's output read back through placeholders (``attribute``: with
        attribution markers), in a marker range no caller text holds."""
        avoid = set(self._template_characters)
        while True:
            marks = Marks(self.table, attribute=attribute, base=marker_base(avoid))
            try:
                output = self._text(messages, tools, kwargs, add_generation_prompt, marks)
            except MarkerClash as clash:
                avoid |= clash.characters
                continue
            return read_rendering(self.table, output, marks)

    def _raw_text(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> str:
        """The template's output without placeholders (what transformers renders)."""
        marks = Marks(self.table, raw=True)
        return self._text(messages, tools, kwargs, add_generation_prompt, marks)

    def _ids(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> list[int]:
        rendering = self._rendering(messages, tools, kwargs, add_generation_prompt)
        return rendering.writer(self.table).ids()

    def _probe(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> Rendering:
        """An attributed rendering with the default options (for spec inference)."""
        return self._rendering(messages, tools, (), add_generation_prompt, attribute=True)

    def _needs_none_content(self) -> bool:
        """Whether a tool-calling message without text must have ``content: None`` rather
        than no ``content`` (the DeepSeek templates test ``content is none``; transformers
        5.23 and later drop ``None`` and they fail)."""
        probe = [PROBE_USER, PROBE_CALL_ONLY]
        marks = Marks(self.table, raw=True)
        try:
            self._text(probe, [PROBE_TOOL], (), False, marks, none_content=False)
        except ValueError:
            try:
                self._text(probe, [PROBE_TOOL], (), False, marks, none_content=True)
            except ValueError:
                return False
            return True
        return False

    # -- supervised weights ---------------------------------------------------------------

    def _attributed(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> tuple[Rendering, Owners | None]:
        """The conversation's rendering and which message each token holds text of; no
        owners when the attribution markers change what the template renders."""
        gen = add_generation_prompt
        attributed = self._rendering(messages, tools, kwargs, gen, attribute=True)
        # The attribution markers must not change what the template renders: compare with
        # the rendering without them (the unmarked one when nothing needed protection).
        if attributed.protected:
            plain = self._rendering(messages, tools, kwargs, gen)
            if attributed.text != plain.text:
                return plain, None
        elif attributed.text != self._raw_text(messages, tools, kwargs, gen):
            return self._rendering(messages, tools, kwargs, gen), None
        owners = owners_of(attributed, self.table, len(messages))
        return attributed, owners

    def _turn_span(
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
            return self._ids(part, tools, kwargs, gen)

        stops = frozenset(self.stop_token_ids)
        return turn_span(render, self.table, stops, messages, t, ids, owners, strict=strict)

    def _reasoning_lost(
        self,
        messages: list[Message],
        trained: Iterable[int],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        rendering: Rendering,
        owners: Owners | None,
    ) -> list[int]:
        """The trained assistant turns whose reasoning the template does not write (the
        ``reasoning`` rule refuses or drops it). Without attribution (or for reasoning of
        whitespace only), a turn's reasoning is lost when a probe reasoning there renders
        the same text as none."""
        lost = []
        for t in trained:
            m = messages[t]
            # Newlines only: no reasoning (templates strip them from reasoning they write).
            if m.role != "assistant" or not (m.thinking and m.thinking.strip("\n")):
                continue
            if owners is not None and m.thinking.strip():
                if "reasoning_content" in rendering.written(t):
                    continue
            else:  # whitespace-only text is not attributed: probe whether the turn's
                # reasoning is written at all (the template may strip what it writes)
                rest = [p for p in m.parts if type(p) is not ThinkingPart]
                plain = Message(m.role, rest, m.name)
                probe = Message(m.role, [ThinkingPart("x"), *rest], m.name)
                before, after = messages[:t], messages[t + 1 :]
                if self._raw_text([*before, probe, *after], tools, kwargs, False) != (
                    self._raw_text([*before, plain, *after], tools, kwargs, False)
                ):
                    continue
            lost.append(t)
        return lost

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
            return self._raw_text(part, tools, kwargs, False)

        check_written(messages, t, rendering if owners is not None else None, raw)

    # -- parsing --------------------------------------------------------------------------

    def _reasoning_start(self, ids: Sequence[int]) -> tuple[bool, str]:
        """Whether a completion after the prompt ``ids`` starts inside reasoning, and the
        padding the prompt did not write yet."""
        assert self._parsing is not None and self.spec is not None
        if self.spec.prompt_opens_reasoning is not None:
            return self.spec.prompt_opens_reasoning, ""
        think = self._parsing.think
        if think is None:
            return False, ""
        k = len(ids)
        written = ""
        while k > 0 and ids[k - 1] != think:
            text = self.table.id_to_str[ids[k - 1]]
            if text is None or text.strip() or ids[k - 1] in self.table.control_ids:
                return False, ""
            written = text + written
            k -= 1
        if k == 0:
            return False, ""
        return True, self.spec.think_padding.removeprefix(written)

    def _opening(self, options: TemplateOptions) -> tuple[bool, str]:
        key = repr(options.kwargs)  # values may be lists (unhashable)
        cached = self._openings.get(key)
        if cached is None:
            prompt = self._ids([PROBE_USER], None, options.kwargs, True)
            cached = self._openings[key] = self._reasoning_start(prompt)
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
        parser = self._parsing.parser(
            False,
            *self._reasoning_start(prompt_ids),
            calls_end_reasoning=chosen.drafted_calls == "call",
        )
        if prefill:
            parser.read_before(self._prefill_ids(prefill, chosen))
        parser.feed(completion_ids)
        return parser.finish()

    def _write_prefill(self, w: TokenWriter, prefill: str, options: Any) -> None:
        delegate = self._parsing.delegate if self._parsing is not None else None
        if isinstance(delegate, GptOssRenderer):  # after the prompt's <|start|>assistant
            delegate._write_prefill(w, prefill, delegate.options)
        else:
            w.text(prefill)

    def _prefill_ids(self, prefill: str, options: Any) -> list[int]:
        delegate = self._parsing.delegate if self._parsing is not None else None
        if isinstance(delegate, GptOssRenderer):
            return delegate._prefill_ids(prefill, delegate.options)
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
        if self._parsing is not None and self._parsing.delegate is not None:
            return self._parsing.delegate._close_turn(result, completion_ids)
        if result.stop_token_id is not None:
            return 0, []
        closing: list[int] = []
        last = result.message.parts[-1] if result.message.parts else None
        grammar = self._parsing.grammar if self._parsing is not None else None
        if grammar is not None and last is not None and getattr(last, "incomplete", False):
            if type(last) is ThinkingPart and grammar.think_end is not None:
                closing.append(grammar.think_end)
            elif type(last) is UnparsedToolCallPart and grammar.call_end is not None:
                closing.append(grammar.call_end)
        return 0, [*closing, *self.stop_token_ids[:1]]

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
        rendering, owners = self._attributed(messages, tools, kwargs, True)
        ids = rendering.writer(self.table).ids()
        t = len(history) - 1
        _, end = self._turn_span(messages, t, tools, kwargs, ids, owners, strict=False)
        if not prefill:
            return ids[end:]
        # The prefill joins the prompt's last text, as build_generation_prompt writes it.
        full = self.build_generation_prompt(messages, tools, prefill=prefill, **options)
        assert full[:end] == ids[:end], "a prefill changed the ids before the prompt"
        return full[end:]


def _templates(value: Any) -> dict[str, str]:
    """A tokenizer's chat template(s) by name (one template is ``default``)."""
    if isinstance(value, str):
        return {"default": value} if value.strip() else {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items() if isinstance(v, str)}
    if isinstance(value, list):  # tokenizer_config.json's [{"name", "template"}]
        return {
            str(t["name"]): t["template"]
            for t in value
            if isinstance(t, Mapping) and isinstance(t.get("template"), str)
        }
    return {}


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


def _first_difference(a: str, b: str) -> str:
    k = common_prefix(a, b)
    return f"at character {k}: raw {a[k : k + 30]!r}, ours {b[k : k + 30]!r}"


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
