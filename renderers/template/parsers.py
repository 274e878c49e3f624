"""Parsing by a :class:`~renderers.template.spec.FormatSpec`, with the existing parsers:
:class:`~renderers.core.grammars.TaggedParser` (or its bare-JSON variant) for think blocks
and tool calls in tags, the section grammar (:mod:`renderers.core.sections`) for DeepSeek's
and Kimi's tool-call sections, and :class:`~harmony.parts.HarmonyPartsParser` for Harmony's
grammar: grammar records built from the spec, never a model module."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harmony.parts import (
    HarmonyGrammar,
    HarmonyPartsParser,
    closing_ids,
    harmony_grammar,
    prefill_ids,
    write_prefill,
)
from renderers.core.engine import StreamParser
from renderers.core.grammars import (
    BareJsonParser,
    TaggedParser,
    TagGrammar,
    json_call_builder,
    xml_call_builder,
)
from renderers.core.result import ParseResult
from renderers.core.sections import (
    SectionGrammar,
    TextThink,
    fenced_json_call,
    id_json_call,
    name_json_call,
    section_parser,
)
from renderers.core.tokens import TokenTable
from renderers.core.writer import TokenWriter
from renderers.rendering import section_closing
from renderers.template.spec import TAGGED, FormatSpec

__all__ = ["SpecParsing"]


class SpecParsing:
    """A spec resolved against a tokenizer's vocabulary: the parser it runs, its stop ids,
    its think token; the grammar is one record: tags (``grammar``), Harmony (``harmony``) or
    tool-call sections (``sections``, DeepSeek's and Kimi's)."""

    def __init__(self, spec: FormatSpec, table: TokenTable) -> None:
        self.table = table
        self.spec = spec

        def ids(names: Sequence[str], what: str) -> tuple[int, ...]:
            out = []
            for name in names:
                token = table.control_tokens.get(name)
                if token is None:
                    raise ValueError(
                        f"spec.{what}: {name!r} is not a control token of the tokenizer"
                    )
                out.append(token)
            return tuple(out)

        think = ids(spec.think, "think") if spec.think else (None, None)
        self.think = think[0]
        self.sections: SectionFormat | None = None
        self.grammar: TagGrammar | None = None
        self.harmony: HarmonyGrammar | None = None
        syntax = spec.tool_calls
        if syntax == "harmony":
            try:
                self.harmony = harmony_grammar(table)
            except KeyError as exc:
                raise ValueError(f"spec.tool_calls='harmony': {exc.args[0]}") from None
            self.stop_ids = self.harmony.stop_ids
            return
        if syntax in ("deepseek_v3", "deepseek_v3.1", "kimi"):
            self.sections = _section_format(syntax, think, table)
            self.stop_ids = self.sections.stop_token_ids
            return
        calls: tuple[int | None, int | None] = (None, None)
        build = None
        if syntax in TAGGED:
            assert spec.call_tags is not None
            calls = ids(spec.call_tags, "call_tags")  # type: ignore[assignment]
            if syntax == "json_in_tags":
                build = json_call_builder(spec.call_tags[1])
            else:
                build = xml_call_builder(spec.call_tags[1], python_scalars=spec.python_scalars)
        stop = ids(spec.stop, "stop")
        eos = ids(spec.eos, "eos")
        self.stop_ids = (*stop, *eos)
        self.grammar = TagGrammar(
            stop=stop,
            eos=eos,
            ends_message=ids(spec.ends_message, "ends_message"),
            think=think[0],
            think_end=think[1],
            call=calls[0],
            call_end=calls[1],
            build_call=build,
            think_padding=spec.think_padding,
            think_end_padding=spec.think_end_padding,
            after_think=spec.after_think,
            before_call=spec.before_call,
            after_calls=spec.after_calls,
        )
        self._bare = syntax == "bare_json"

    def reasoning_start(self, ids: Sequence[int]) -> tuple[bool, str]:
        """Whether a completion after the prompt ``ids`` starts inside reasoning, and the
        padding the prompt did not write yet."""
        if self.spec.prompt_opens_reasoning is not None:
            return self.spec.prompt_opens_reasoning, ""
        think = self.think
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

    def close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        """How history ends a sampled turn (see :meth:`Renderer._close_turn`)."""
        if self.harmony is not None:
            return closing_ids(self.harmony, result)
        if self.sections is not None:
            return self.sections._close_turn(result, completion_ids)
        if self.grammar is None:
            return 0, [] if result.stop_token_id is not None else [*self.stop_ids[:1]]
        return 0, self.grammar.closing(result, self.stop_ids[:1])

    def write_prefill(self, w: TokenWriter, prefill: str) -> None:
        """A Harmony prefill starts the reasoning after ``<|start|>assistant``; any other
        is ordinary text after the prompt."""
        if self.harmony is not None:
            write_prefill(w, self.harmony, prefill, "analysis")
        else:
            w.text(prefill)

    def prefill_ids(self, prefill: str) -> list[int]:
        if self.harmony is not None:
            return prefill_ids(self.table, self.harmony, prefill, "analysis")
        return self.table.encode(prefill)

    def parse_after(
        self,
        prompt_ids: Sequence[int],
        completion_ids: list[int],
        before: list[int],
        calls_end_reasoning: bool,
    ) -> ParseResult:
        """A completion sampled after ``prompt_ids`` (``before``: a prefill's ids)."""
        opens, prefix = self.reasoning_start(prompt_ids)
        parser = self.parser(False, opens, prefix, calls_end_reasoning=calls_end_reasoning)
        if before:
            parser.read_before(before)
        parser.feed(completion_ids)
        return parser.finish()

    def parser(
        self, events: bool, opens_reasoning: bool, prefix: str, *, calls_end_reasoning: bool = False
    ) -> StreamParser:
        """A parser for a completion that starts inside reasoning when ``opens_reasoning``
        (``prefix``: padding the prompt did not write, removed from the reasoning);
        ``calls_end_reasoning``: a call tag inside open reasoning ends it (tag grammars)."""
        if self.harmony is not None:
            if calls_end_reasoning:
                raise ValueError(
                    "drafted_calls='call' reads Qwen3-style calls in tags; this template's "
                    "calls follow the Harmony grammar, whose parser keeps a call drafted in "
                    "reasoning as reasoning"
                )
            return HarmonyPartsParser(self.harmony, self.table, events)
        if self.sections is not None:
            if calls_end_reasoning:
                raise ValueError(
                    "drafted_calls='call' reads Qwen3-style calls in tags; this template's "
                    f"calls follow the {self.sections.name} grammar, whose parser keeps a "
                    "call drafted in reasoning as reasoning"
                )
            return self.sections.parser(self.table, events, opens_reasoning)
        assert self.grammar is not None
        cls = BareJsonParser if self._bare else TaggedParser
        return cls(
            self.grammar,
            self.table,
            events,
            opens_reasoning=opens_reasoning,
            reasoning_prefix=prefix,
            calls_end_reasoning=calls_end_reasoning,
        )


@dataclass(frozen=True, slots=True)
class SectionFormat:
    """A section grammar read for a template (DeepSeek's, Kimi's tool-call sections): what
    the template renderer asks of the format's renderer (its name, stop ids, its parser,
    how a cut-off turn is closed)."""

    name: str
    grammar: SectionGrammar
    think_close: tuple[int, ...]
    """The ids that close open reasoning."""
    opens_reasoning: bool
    """Whether a completion may start inside reasoning (its think block is tokens)."""

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (*self.grammar.stop, *self.grammar.eos)

    def parser(self, table: TokenTable, events: bool, opens_reasoning: bool) -> StreamParser:
        opens = opens_reasoning and self.opens_reasoning
        return section_parser(self.grammar, table, events, opens_reasoning=opens)

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        g = self.grammar
        closing = section_closing(
            result,
            completion_ids,
            think_end=self.think_close,
            call_end=g.call[1],
            section_begin=g.section[0],
            section_end=g.section[1],
            stop=g.stop[0],
        )
        return 0, closing


# The markers of the section formats, as their tokenizers spell them.
_DEEPSEEK_TURNS = (
    "<｜begin▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁outputs▁end｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
)
_DEEPSEEK = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
)
_KIMI = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_end|>",
)
_KIMI_TEXT = ("<|tool_call_section_begin|>", "<|tool_call_section_end|>")


def _section_format(syntax: str, think: tuple[int | None, ...], table: TokenTable) -> SectionFormat:
    """The section grammar of ``syntax`` (DeepSeek-V3, V3.1 or Kimi-K2) in ``table``,
    as the specialised renderers parse it; ``think``: the spec's think tokens."""

    def ids(*names: str) -> tuple[int, ...]:
        try:
            return tuple(table.control_id(name) for name in names)
        except KeyError as exc:
            raise ValueError(f"spec.tool_calls={syntax!r}: {exc.args[0]}") from None

    think_ids = (think[0], think[1]) if think[0] is not None and think[1] is not None else None
    if syntax == "kimi":
        begin, end, call, call_end = ids(*_KIMI)
        (argument,) = ids("<|tool_call_argument_begin|>")
        grammar = SectionGrammar(
            stop=ids("<|im_end|>"),
            eos=ids("[EOS]"),
            ends_message=ids("<|im_user|>", "<|im_assistant|>", "<|im_system|>"),
            section=(begin, end),
            call=(call, call_end),
            separator=argument,
            build_call=id_json_call("<|tool_call_argument_begin|>", _KIMI[3]),
            think=think_ids,
            drafted_calls=False,
            one_separator=True,
            report_section_text=True,
            text_sections=_KIMI_TEXT,
        )
        name = "kimi_k2_thinking" if think_ids else "kimi_k2"
        think_close = (think_ids[1],) if think_ids else ()
        return SectionFormat(name, grammar, think_close, think_ids is not None)
    begin, end, call, call_end = ids(*_DEEPSEEK)
    (sep,) = ids("<｜tool▁sep｜>")
    common: dict[str, Any] = dict(
        stop=ids("<｜end▁of▁sentence｜>"),
        eos=(),
        ends_message=ids(*_DEEPSEEK_TURNS),
        section=(begin, end),
        call=(call, call_end),
        separator=sep,
    )
    if syntax == "deepseek_v3":
        build = fenced_json_call("<｜tool▁sep｜>", _DEEPSEEK[3])
        text_think = TextThink()
        grammar = SectionGrammar(**common, build_call=build, after_call="\n", text_think=text_think)
        close = text_think.before_close + text_think.close + text_think.after_close
        return SectionFormat(syntax, grammar, tuple(table.encode(close)), False)
    think_open, think_end = think_ids or ids("<think>", "</think>")
    build = name_json_call("<｜tool▁sep｜>", _DEEPSEEK[3])
    grammar = SectionGrammar(**common, build_call=build, think=(think_open, think_end))
    return SectionFormat(syntax, grammar, (think_end,), True)
