"""Property tests for every renderer: round trip, prompt/example consistency, streaming
equals batch, and fuzzed completions that never crash and never lose content.

Each renderer and option set is described by a :class:`Spec`: which assistant messages its
format can express, the canonical form a parse gives back (the format's documented
normalization: Qwen3's tokenizer applies NFC, separators around parts are stripped, the
templates' inline ``</think>`` convention, call ids the format writes...), the untrained
prefix a supervised example has (the generation prompt, except where a template
documentedly differs: those cases are asserted exactly), the trained turns whose
reasoning the template would drop (the renderer refuses them: the error is asserted
exactly, and the property goes on with the turn as the template renders it), and the
text a parser may strip as format structure (for the no-content-lost check on fuzzed
completions).

Run by hand with many more examples: ``HYPOTHESIS_PROFILE=thorough python -m pytest
tests/test_properties.py -s``; the counts of examples each property ran are printed by
:func:`test_report_example_counts` (``-s``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from renderers import (
    Message,
    ParseResult,
    Renderer,
    Termination,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    get_renderer,
)
from renderers.core.assembly import TextDelta
from renderers.core.engine import StreamParser
from renderers.core.grammars import _json_call, _scanned_json_call
from renderers.core.messages import Part, coerce_messages
from renderers.core.scanning import sampled_text_ids
from renderers.kimi_k2 import tool_name_from_id
from tests import strategies
from tests.conftest import tokenizer_for

# Counts of examples each property ran, printed at the end of the module (-s or -rA).
EXAMPLE_COUNTS: dict[str, int] = {}


def count(name: str) -> None:
    EXAMPLE_COUNTS[name] = EXAMPLE_COUNTS.get(name, 0) + 1


Conversation = list[Mapping[str, Any] | Message]


TextCheck = Callable[[Renderer, list[int], int, list[Part], list[tuple[int, int]]], None]

TrainedReasoning = Callable[[list[Message]], tuple[str, Message] | None]
"""Given a conversation whose last message is the trained turn: ``None`` when the
renderer renders that turn without losing reasoning, else the pattern its ``ValueError``
must match and the turn without the reasoning the template drops (what the template
renders for it either way)."""


@dataclass(frozen=True)
class Layout:
    """What a format's parser may strip from ordinary text as structure, and how it spells
    an unparsed tool call's raw text.

    ``separators`` is a regex alternation of text that is format structure, not content
    (newlines around Qwen3 parts, DeepSeek-R1's text-level ``<think>`` markers, Kimi's
    misspelled section markers); ``segment_markers`` are the control tokens that split a
    tool call's raw text and are spelled out in ``UnparsedToolCallPart.raw``
    (``first_segment_only``: only the first one splits, later ones are ignored markers);
    ``verbatim_names``: tool names (and ids) are written as plain text.
    """

    separators: str | None = None
    segment_markers: tuple[str, ...] = ()
    first_segment_only: bool = False
    verbatim_names: bool = True
    kept_controls: tuple[str, ...] = ()
    """Control tokens the parser keeps as their text where they are out of place (no
    sampled character lost); where they are structure, their text is a separator."""
    call_markers: tuple[str, ...] = ()
    """Kept controls that open and close a tool call: at a call's edges they are its
    markers, elsewhere in it content."""
    arguments_in_span: bool = True
    """False for formats that write each argument in its own markup (XML, DSML): the
    arguments' JSON text is not in the span, each string value is."""
    call_prefix: str = ""
    """The separator written before a tool call's body, not part of an unparsed call's raw
    text (Mistral v7: SentencePiece's space)."""
    text_check: TextCheck | None = None
    """Replaces the separator check of text and thinking parts (formats whose structure
    includes text, like Harmony headers)."""


@dataclass(frozen=True)
class Spec:
    """A renderer under test: how to build it and what its format can express.

    ``canonical(message)`` is what parsing the rendered message gives back, or ``None``
    when the message is not expressible (the parser documentedly reads some of its text
    as structure). ``termination(message)`` is how its rendering ends. ``thinking``: the
    variant can render reasoning (else reasoning is a caller error).
    ``prompt_prefix(renderer, messages, prefix, rest)`` checks the untrained ``prefix`` of
    a supervised example whose last message is the trained turn (``rest``: the tokens from
    the first trained one on) where the format documentedly differs from the generation
    prompt, and says whether this case differs (default: it must equal the prompt).
    ``trained_reasoning``: for option sets whose template drops the reasoning of the
    trained (last) turn, which is then a caller error (see :data:`TrainedReasoning`).
    """

    name: str
    model_id: str
    options: tuple[tuple[str, Any], ...]
    messages: st.SearchStrategy[Message]
    canonical: Callable[[Message], Message | None]
    layout: Layout
    thinking: bool = True
    conversations: st.SearchStrategy[list[dict[str, Any]]] = field(
        default_factory=strategies.conversations
    )
    termination: Callable[[Message], Termination] = lambda m: Termination.STOP
    prompt_prefix: Callable[[Renderer, Conversation, list[int], list[int]], bool] | None = None
    trained_reasoning: TrainedReasoning | None = None
    text_with_calls: bool = True
    """The format writes text beside a tool call (Llama 3: a call turn is the call alone)."""
    leading_line_breaks: bool = True
    """A trained turn's text may open with a line break. False where the generation prompt
    ends in text the line break merges with into one token (Llama 4's ``\n\n`` after the
    header, untrimmed text): the writer refuses such a turn, naming it."""

    def renderer(self) -> Renderer:
        return _renderer(self.name, self.model_id, self.options)

    def __repr__(self) -> str:
        return self.name + "".join(f"-{k}={v}" for k, v in self.options)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # Hypothesis prints failing examples with this


_RENDERERS: dict[Any, Renderer] = {}


def _renderer(name: str, model_id: str, options: tuple[tuple[str, Any], ...]) -> Renderer:
    key = (name, options)
    if key not in _RENDERERS:
        _RENDERERS[key] = get_renderer(name, tokenizer_for(model_id), **dict(options))
    return _RENDERERS[key]


# -- canonical forms: helpers ----------------------------------------------------------------


def _is_call(p: Part) -> bool:
    return type(p) is ToolCallPart or type(p) is UnparsedToolCallPart


def _merge_text(parts: Sequence[Part]) -> list[Part]:
    """Adjacent text parts written one after the other parse back as one part; empty
    text writes nothing."""
    out: list[Part] = []
    for p in parts:
        if type(p) is TextPart:
            if not p.text:
                continue
            if out and type(out[-1]) is TextPart:
                out[-1] = TextPart(out[-1].text + p.text)
                continue
        out.append(p)
    return out


def _has_call(m: Message) -> bool:
    return any(_is_call(p) for p in m.parts)


def _json_ok(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _inline_reasoning(parts: Sequence[Part]) -> list[Part]:
    """DeepSeek-V3.1's template on a plain answer (transcribed from its Jinja source): the
    text up to the first ``</think>`` is reasoning; it follows the message's own reasoning
    (neither is dropped)."""
    text = "".join(p.text for p in parts if type(p) is TextPart)
    if "</think>" not in text:
        return list(parts)
    before, after = text.split("</think>", 1)
    own = "".join(p.text for p in parts if type(p) is ThinkingPart)
    reasoning = own + before.removeprefix("<think>")
    return [ThinkingPart(reasoning), *([TextPart(after)] if after else [])]


def canonical_unparsed(m: Message) -> Message:
    """Unparsed parts compare on their raw text only (the error text is the parser's)."""
    return Message(
        m.role,
        [
            UnparsedToolCallPart(p.raw, "?") if isinstance(p, UnparsedToolCallPart) else p
            for p in m.parts
        ],
    )


def trainable(
    r: Renderer,
    messages: Sequence[Mapping[str, Any] | Message],
    lost: TrainedReasoning | None,
    label: str,
) -> Conversation:
    """``messages`` as a supervised example can be built from them. Where the trained
    (last) turn would silently lose reasoning its template drops, the renderer must refuse
    it with exactly the documented error (asserted), and the conversation goes on with
    the turn as the template renders it (the reasoning removed)."""
    if lost is None:
        return list(messages)
    found = lost(coerce_messages(messages))
    if found is None:
        return list(messages)
    pattern, stripped = found
    with pytest.raises(ValueError, match=pattern):
        r.build_supervised_example(messages)
    count(f"trained turn would lose reasoning: error [{label}]")
    return [*messages[:-1], stripped]


def _previous_role(msgs: Sequence[Message]) -> str | None:
    """The role of the message before the last one, system messages aside (the templates'
    flags ignore them)."""
    roles = [x.role for x in msgs[:-1] if x.role != "system"]
    return roles[-1] if roles else None


# -- Qwen3 ----------------------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _qwen3_inline(parts: Sequence[Part]) -> list[Part]:
    """The template's convention (transcribed from its Jinja source): an assistant message
    without reasoning whose text contains ``</think>`` carries inline reasoning."""
    parts = list(parts)
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    if not any(isinstance(p, ThinkingPart) for p in parts) and "</think>" in text:
        reasoning = text.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        rest = text.split("</think>")[-1].lstrip("\n")
        others = [p for p in parts if not isinstance(p, TextPart)]
        parts = [ThinkingPart(reasoning), TextPart(rest), *others]
    return parts


def qwen3_canonical(m: Message) -> Message:
    """What Qwen3 gives back: NFC text (its tokenizer's normalizer); reasoning without the
    newlines the template strips around it; text right after a think block (including the
    template's empty one before a leading text) without leading newlines; empty thinking
    dropped; no tool-call ids (the format has none). Like the template, an assistant
    message without reasoning whose text contains ``</think>`` carries inline reasoning."""
    out: list[Any] = []
    previous: str | None = "thinking"  # the last turn always opens with a think block
    for p in _qwen3_inline(m.parts):
        if isinstance(p, ThinkingPart):
            t = _nfc(p.text).strip("\n")
            if t:
                out.append(ThinkingPart(t))
            previous = "thinking"
        elif isinstance(p, TextPart):
            t = _nfc(p.text)
            if previous == "thinking":
                t = t.lstrip("\n")
            if t and previous == "text":
                out[-1] = TextPart(out[-1].text + t)
            elif t:
                out.append(TextPart(t))
                previous = "text"
        elif isinstance(p, ToolCallPart):
            out.append(ToolCallPart(p.name, _nfc(p.arguments)))
            previous = "tool"
        else:
            assert isinstance(p, UnparsedToolCallPart)
            out.append(UnparsedToolCallPart(_nfc(p.raw), "?"))
            previous = "tool"
    return Message("assistant", out)


def prompt_equals(r: Renderer, messages: Conversation, prefix: list[int], rest: list[int]) -> bool:
    """The default: the untrained prefix is the generation prompt."""
    assert prefix == r.build_generation_prompt(messages[:-1])
    return False


def qwen3_no_thinking_reasoning(msgs: list[Message]) -> tuple[str, Message] | None:
    """``enable_thinking=False``: the generation prompt ends with an empty think block, so
    reasoning of the trained turn is refused (the one reasoning rule; issue 13 item 4:
    it used to be written after ``<|im_start|>assistant⏎``, a prompt the model never
    sees); without it, the turn follows the prompt's block."""
    i = len(msgs) - 1
    m = msgs[i]
    if m.role != "assistant":
        return None
    parts = _qwen3_inline(m.parts)
    if not any(type(p) is ThinkingPart and p.text.strip("\n") for p in parts):
        return None
    pattern = (
        rf"^messages\[{i}\]: qwen3 cannot write the reasoning of this trained turn \(with "
        r"enable_thinking=False the generation prompt closes an empty think block\)"
    )
    return pattern, Message("assistant", _qwen3_without_reasoning(parts))


def _qwen3_without_reasoning(parts: Sequence[Part]) -> list[Part]:
    """``parts`` without reasoning, read the template's way: removing the thinking parts
    can leave text with ``</think>`` that is inline reasoning in turn."""
    parts = _qwen3_inline(parts)
    while any(type(p) is ThinkingPart and p.text.strip("\n") for p in parts):
        parts = _qwen3_inline([p for p in parts if type(p) is not ThinkingPart])
    return parts


def qwen3_no_thinking_canonical(m: Message) -> Message:
    """What Qwen3 with thinking off gives back: the message without its reasoning (which
    the trained turn cannot carry), as :func:`qwen3_canonical` reads it."""
    return qwen3_canonical(Message("assistant", _qwen3_without_reasoning(m.parts)))


QWEN3 = Layout(
    separators=r"\n",
    verbatim_names=False,  # names are JSON strings
    kept_controls=("<think>", "</think>", "<tool_call>", "</tool_call>"),  # out of place
    call_markers=("<tool_call>", "</tool_call>"),
)


def qwen_instruct_canonical(m: Message) -> Message:
    """What the Qwen line without think blocks (Qwen2.5, Qwen3-2507 Instruct, Qwen3-VL)
    gives back: Qwen3's reading with no think block: NFC text (adjacent parts merged, as
    written), no tool-call ids; ``</think>`` in text is text."""
    out: list[Any] = []
    for p in _merge_text(m.parts):
        if isinstance(p, TextPart):
            out.append(TextPart(_nfc(p.text)))
        elif isinstance(p, ToolCallPart):
            out.append(ToolCallPart(p.name, _nfc(p.arguments)))
        else:
            assert isinstance(p, UnparsedToolCallPart)
            out.append(UnparsedToolCallPart(_nfc(p.raw), "?"))
    return Message("assistant", out)


QWEN_INSTRUCT = Layout(
    separators=r"\n",
    verbatim_names=False,  # names are JSON strings
    kept_controls=("<tool_call>", "</tool_call>"),  # out of place
    call_markers=("<tool_call>", "</tool_call>"),
)

# -- DeepSeek-V3 ----------------------------------------------------------------------------

_R1_OPEN, _R1_CLOSE = "<think>\n", "\n</think>\n\n"


def _r1_reasoning(parts: list[Part]) -> list[Part] | None:
    """DeepSeek-V3's parser reads a completion that starts with the text ``<think>`` as
    R1-style reasoning (documented): ``<think>\\n{reasoning}\\n</think>\\n\\n{answer}``,
    one newline stripped on each side of the reasoning and up to two before the answer.
    ``None`` if the reasoning is never closed before the first tool call (malformed)."""
    if not parts or type(parts[0]) is not TextPart or not parts[0].text.startswith("<think>"):
        return parts
    body = parts[0].text[len("<think>") :]
    if "</think>" not in body:
        return None
    reasoning, rest = body.split("</think>", 1)
    reasoning = reasoning.removeprefix("\n").removesuffix("\n")
    rest = rest[2:] if rest.startswith("\n\n") else rest.removeprefix("\n")
    head: list[Part] = [ThinkingPart(reasoning)] if reasoning else []
    return [*head, *([TextPart(rest)] if rest else []), *parts[1:]]


def _plain_call(p: Part) -> Part:
    if type(p) is ToolCallPart:
        return ToolCallPart(p.name, p.arguments)
    assert type(p) is UnparsedToolCallPart
    # The strategy's raw text starts "{not json": never the "function<sep>NAME" of a call.
    return UnparsedToolCallPart(p.raw, "?")


def leading_reasoning_only(m: Message) -> Message:
    """DeepSeek-V3 writes reasoning R1-style, one block at the start of a turn (later
    reasoning is a caller error): keep a thinking part only there."""
    return Message(
        m.role, [p for k, p in enumerate(m.parts) if k == 0 or type(p) is not ThinkingPart]
    )


def v3_fixed_canonical(m: Message) -> Message | None:
    """``fix_tool_format=True, render_thinking=True``: parts in order; reasoning (only at
    the start, see :func:`leading_reasoning_only`) is written as R1-style text, which the
    parser reads back as reasoning at the very start of the completion; calls carry no
    ids."""
    parts: list[Part] = []
    for p in m.parts:
        if type(p) is ThinkingPart:
            parts.append(TextPart(_R1_OPEN + p.text + _R1_CLOSE))
        elif type(p) is TextPart:
            parts.append(p)
        else:
            parts.append(_plain_call(p))
    out = _r1_reasoning(_merge_text(parts))
    return None if out is None else Message("assistant", out)


def v3_template_canonical(m: Message) -> Message | None:
    """Template parity (documented defects): text first, then the calls; a single call's
    section is never closed, and with several calls the turn ends (``<｜end▁of▁sentence｜>``)
    after the second, so later calls are not part of the parsed message."""
    texts = [p for p in m.parts if type(p) is TextPart]
    calls = [_plain_call(p) for p in m.parts if _is_call(p)]
    out = _r1_reasoning(_merge_text([*texts, *calls[:2]]))
    return None if out is None else Message("assistant", out)


def v3_template_termination(m: Message) -> Termination:
    calls = sum(1 for p in m.parts if _is_call(p))
    return Termination.LENGTH if calls == 1 else Termination.STOP


def v3_template_prefix(
    r: Renderer, messages: Conversation, prefix: list[int], rest: list[int]
) -> bool:
    """Documented template defect: a tool-call turn after an earlier tool-call turn gets no
    header (the template's ``is_first`` flag is never reset), so its untrained prefix is
    the generation prompt without its last token (``<｜Assistant｜>`` after a user message,
    ``<｜tool▁outputs▁end｜>`` after tool outputs), and the end of the user's text may be
    tokenized together with the start of the turn (its text or the ``\\n`` before a call)."""
    msgs = coerce_messages(messages)
    earlier_calls = any(_is_call(p) for x in msgs[:-1] for p in x.parts)
    if not (earlier_calls and any(_is_call(p) for p in msgs[-1].parts)):
        return prompt_equals(r, messages, prefix, rest)
    prompt = r.build_generation_prompt(messages[:-1])
    last_token = "<｜tool▁outputs▁end｜>" if msgs[-2].role == "tool" else "<｜Assistant｜>"
    assert prompt[-1] == r.table.control_id(last_token)
    expected = prompt[:-1]
    # The same control tokens and text as the prompt without its last token; only the
    # tokens of the text that merges with the turn's start may differ.
    control = r.table.control_ids
    assert [t for t in prefix if t in control] == [t for t in expected if t in control]
    assert r.decode(expected).startswith(r.decode(prefix))
    assert r.decode(prefix + rest).startswith(r.decode(expected))
    return True


_DEEPSEEK_CALL_TOKENS = (  # kept as text where out of place (a call drafted while thinking)
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
)
DEEPSEEK_V3 = Layout(
    separators=r"<think>|</think>|\n",
    segment_markers=("<｜tool▁sep｜>",),
    kept_controls=_DEEPSEEK_CALL_TOKENS,
    call_markers=_DEEPSEEK_CALL_TOKENS,
)

# -- DeepSeek-V3.1 --------------------------------------------------------------------------


def _v31_call(p: Part) -> Part:
    if type(p) is ToolCallPart:
        return ToolCallPart(p.name, p.arguments)
    assert type(p) is UnparsedToolCallPart
    # The raw text's <｜tool▁sep｜> spellings are written as the token: NAME<sep>JSON is a call.
    segments = p.raw.split("<｜tool▁sep｜>")
    if len(segments) == 2 and segments[0] and _json_ok(segments[1]):
        return ToolCallPart(segments[0], segments[1])
    return UnparsedToolCallPart(p.raw, "?")


def v31_canonical(m: Message) -> Message:
    """``thinking=False``: reasoning is not rendered; a plain answer's text up to its first
    ``</think>`` is inline reasoning (dropped); runs of calls become sections. (A trained
    turn with reasoning is a caller error, see :func:`v31_trained_reasoning`: this is
    what the template renders, which the turn without its reasoning renders as.)"""
    parts = list(m.parts)
    if not any(_is_call(p) for p in parts):
        parts = _inline_reasoning(parts)
    kept = [_v31_call(p) if _is_call(p) else p for p in parts if type(p) is not ThinkingPart]
    return Message("assistant", _merge_text(kept))


def v31_keep_canonical(m: Message) -> Message:
    """``thinking=True, keep_thinking=True``: the completion starts inside the reasoning
    (a leading thinking part); later thinking parts are ``<think>..</think>`` blocks,
    which also separate the text around them; empty reasoning gives no part."""
    parts = list(m.parts)
    if not any(_is_call(p) for p in parts):
        parts = _inline_reasoning(parts)
    return _opened_reasoning(parts)


def r1_canonical(m: Message) -> Message:
    """DeepSeek-R1: the trained turn as sampled after ``<think>\n``, as V3.1's kept
    turn (:func:`v31_keep_canonical`) but with its text written whole (a ``</think>`` in
    it is ordinary text)."""
    return _opened_reasoning(list(m.parts))


def r1_trained_reasoning(msgs: list[Message]) -> tuple[str, Message] | None:
    """DeepSeek-R1 (documented): the generation prompt after tool outputs opens no think
    block, so a trained turn there cannot keep its reasoning."""
    i = len(msgs) - 1
    m = msgs[i]
    if m.role != "assistant" or _previous_role(msgs) != "tool":
        return None
    if not any(type(p) is ThinkingPart and p.text for p in m.parts):
        return None
    pattern = (
        rf"^messages\[{i}\]: deepseek_r1 cannot write the reasoning of this trained turn "
        r"\(the generation prompt after tool outputs opens no think block\); pass "
        r"reasoning='drop' to leave it out, or remove it$"
    )
    return pattern, Message("assistant", [p for p in m.parts if type(p) is not ThinkingPart])


def _opened_reasoning(parts: list[Part]) -> Message:
    out: list[Part] = []
    if parts and type(parts[0]) is ThinkingPart:
        if parts[0].text:
            out.append(ThinkingPart(parts[0].text))
        parts = parts[1:]
    boundary = True
    for p in parts:
        if type(p) is ThinkingPart:
            if p.text:
                out.append(ThinkingPart(p.text))
            boundary = True
        elif type(p) is TextPart:
            if not p.text:
                continue
            if not boundary and out and type(out[-1]) is TextPart:
                out[-1] = TextPart(out[-1].text + p.text)
            else:
                out.append(TextPart(p.text))
            boundary = False
        else:
            out.append(_v31_call(p))
            boundary = True
    return Message("assistant", out)


def v31_trained_reasoning(*, keep: bool) -> TrainedReasoning:
    """DeepSeek-V3.1 (documented): the template drops the reasoning of every turn; for the
    trained (last) turn that is a caller error unless ``keep`` (``thinking=True,
    keep_thinking=True``) keeps it, which it does right after a user message only. The
    reasoning is the turn's thinking parts, or, for a plain answer that does not follow
    tool outputs and has no thinking part, its text up to the first ``</think>`` (the
    template's inline convention, transcribed from its Jinja source)."""

    def lost(msgs: list[Message]) -> tuple[str, Message] | None:
        i = len(msgs) - 1
        m = msgs[i]
        previous = _previous_role(msgs)
        if m.role != "assistant" or (keep and previous == "user"):
            return None
        after_tools = previous == "tool"
        inline = not after_tools and not _has_call(m)
        parts = _inline_reasoning(m.parts) if inline else list(m.parts)
        if not any(type(p) is ThinkingPart and p.text for p in parts):
            return None
        how = (
            "a turn right after tool outputs has no think block in this format"
            if after_tools
            else "pass thinking=True, keep_thinking=True to train on it"
        )
        pattern = (
            rf"^messages\[{i}\]: deepseek_v3\.1 cannot write the reasoning of this trained "
            rf"turn \(its template drops it; {re.escape(how)}\); pass reasoning='drop' to "
            r"leave it out, or remove it$"
        )
        kept = [p for p in parts if type(p) is not ThinkingPart]
        if inline and "</think>" in m.text:
            # The answer after the inline reasoning, still marked as such: its own text
            # may hold another "</think>" the template keeps.
            kept = [TextPart("</think>" + "".join(p.text for p in kept if type(p) is TextPart))]
        return pattern, Message("assistant", kept, m.name)

    return lost


DEEPSEEK_V31 = Layout(
    segment_markers=("<｜tool▁sep｜>",),
    kept_controls=(*_DEEPSEEK_CALL_TOKENS, "<think>", "</think>"),
    call_markers=_DEEPSEEK_CALL_TOKENS,
)
DEEPSEEK_R1 = Layout(
    separators=r"\n",
    segment_markers=("<｜tool▁sep｜>",),
    kept_controls=(*_DEEPSEEK_CALL_TOKENS, "<think>", "</think>"),
    call_markers=_DEEPSEEK_CALL_TOKENS,
)

# -- Kimi-K2 ----------------------------------------------------------------------------------

_ARGUMENT_MARKER = "<|tool_call_argument_begin|>"


def _kimi_call(p: Part, index: int) -> Part:
    if type(p) is ToolCallPart:
        return ToolCallPart(p.name, p.arguments, id=f"functions.{p.name}:{index}")
    assert type(p) is UnparsedToolCallPart
    # The raw text's first argument marker is written as the token: ID<marker>JSON is a call.
    head, marker, rest = p.raw.partition(_ARGUMENT_MARKER)
    call_id = head.strip()
    name = tool_name_from_id(call_id)
    if marker and name and _json_ok(rest):
        return ToolCallPart(name, rest, id=call_id)
    return UnparsedToolCallPart(p.raw, "?")


def _kimi_canonical(m: Message, *, thinking: bool) -> Message | None:
    """Parts in order (empty text and thinking write nothing); runs of calls become
    sections with ids ``functions.NAME:IDX`` counting the message's calls (the ids
    K2-Instruct's template writes, the ids :func:`with_kimi_ids` gives, and the numbered
    ids of a conversation whose only calls are these). ``None`` when a text or thinking
    part holds the misspelled ``<|tool_call_section_begin|>``, which the parser
    documentedly reads as a marker."""
    parts = [
        p
        for p in m.parts
        if not ((type(p) is TextPart or type(p) is ThinkingPart) and not p.text)
        and (thinking or type(p) is not ThinkingPart)
    ]
    out: list[Part] = []
    index = 0
    for p in parts:
        if _is_call(p):
            out.append(_kimi_call(p, index))
            index += 1
            continue
        if type(p) is TextPart and out and type(out[-1]) is TextPart:
            out[-1] = TextPart(out[-1].text + p.text)
        else:
            out.append(p)
    for p in out:
        if (type(p) is TextPart or type(p) is ThinkingPart) and "<|tool_call_section_begin|>" in (
            p.text
        ):
            return None
    return Message("assistant", out)


def kimi_canonical(m: Message) -> Message | None:
    return _kimi_canonical(m, thinking=False)


def kimi_thinking_canonical(m: Message) -> Message | None:
    """Template behaviour: the conversation's last assistant message without tool calls
    is written with an empty think block (its reasoning is dropped). (As the trained turn
    with reasoning it is a caller error, see :func:`kimi_trained_reasoning`: this is what
    the template renders, which the turn without its reasoning renders as.)"""
    if not any(_is_call(p) for p in m.parts):
        m = Message("assistant", [p for p in m.parts if type(p) is not ThinkingPart])
    return _kimi_canonical(m, thinking=True)


def kimi_thinking_keep_canonical(m: Message) -> Message | None:
    return _kimi_canonical(m, thinking=True)


def kimi_trained_reasoning(msgs: list[Message]) -> tuple[str, Message] | None:
    """Kimi-K2-Thinking without ``keep_last_reasoning`` (documented): the template writes
    ``<think></think>`` for every turn up to the conversation's last assistant message
    without tool calls; when the trained (last) turn is such a message and it has
    reasoning, the renderer refuses it."""
    i = len(msgs) - 1
    m = msgs[i]
    if m.role != "assistant" or _has_call(m):
        return None
    if not any(type(p) is ThinkingPart and p.text for p in m.parts):
        return None
    pattern = rf"^messages\[{i}\]: kimi_k2_thinking cannot write the reasoning of this trained "
    kept = [p for p in m.parts if type(p) is not ThinkingPart]
    return pattern, Message("assistant", kept, m.name)


def kimi_thinking_prefix(
    r: Renderer, messages: Conversation, prefix: list[int], rest: list[int]
) -> bool:
    """Documented template defect: when the trained turn is an assistant message without
    tool calls (so the conversation's last), the template drops the reasoning of every
    assistant turn before it, which the generation prompt showed for the turns after the
    previous plain answer."""
    msgs = coerce_messages(messages)
    plain = not any(_is_call(p) for p in msgs[-1].parts)
    if not plain:
        return prompt_equals(r, messages, prefix, rest)
    stripped = [
        Message(x.role, [p for p in x.parts if type(p) is not ThinkingPart], x.name)
        if x.role == "assistant"
        else x
        for x in msgs[:-1]
    ]
    assert prefix == r.build_generation_prompt(stripped)
    return prefix != r.build_generation_prompt(messages[:-1])


KIMI = Layout(
    # Kimi-K2 also samples its section markers misspelled, as text (see renderers.kimi_k2).
    separators=r"<\|tool_call_section_begin\|>|<\|tool_call_section_end\|>",
    segment_markers=(_ARGUMENT_MARKER,),
    first_segment_only=True,
    kept_controls=(
        "<think>",
        "</think>",
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_end|>",
        _ARGUMENT_MARKER,
    ),
    call_markers=("<|tool_call_begin|>", "<|tool_call_end|>"),
)

# -- gpt-oss (Harmony) -------------------------------------------------------------------------


def _gpt_oss_canonical(m: Message, content_type: str) -> Message:
    """One Harmony message per part: reasoning is ``analysis``; text is ``final`` (its own
    channel when it has one), or ``analysis`` in a message with tool calls (as the
    template writes OpenAI ``content`` next to calls); empty messages give no part. The
    model stops at the first ``<|call|>``: parts after the first call are not part of the
    completion. Calls carry the content type the renderer writes."""
    has_calls = any(_is_call(p) for p in m.parts)
    out: list[Part] = []
    for p in m.parts:
        if type(p) is ThinkingPart:
            if p.text:
                out.append(ThinkingPart(p.text))
        elif type(p) is TextPart:
            channel = p.channel or ("analysis" if has_calls else "final")
            if not p.text:
                continue
            if channel == "analysis":
                out.append(ThinkingPart(p.text))
            else:
                out.append(TextPart(p.text, None if channel == "final" else channel))
        else:
            if type(p) is ToolCallPart:
                out.append(ToolCallPart(p.name, p.arguments, content_type=content_type))
            else:
                assert type(p) is UnparsedToolCallPart
                out.append(UnparsedToolCallPart(p.raw, "?"))
            break
    return Message("assistant", out)


def gpt_oss_canonical(m: Message) -> Message:
    return _gpt_oss_canonical(m, "json")


def gpt_oss_harmony_canonical(m: Message) -> Message:
    return _gpt_oss_canonical(m, "<|constrain|>json")


def gpt_oss_template_prefix(
    r: Renderer, messages: Conversation, prefix: list[int], rest: list[int]
) -> bool:
    """Documented (template dialect, as the template does): once a later final answer
    exists, the analysis of tool-calling turns is dropped, including the text written as
    analysis next to their calls; the generation prompt before that answer shows it."""
    msgs = coerce_messages(messages)
    if any(_is_call(p) for p in msgs[-1].parts):
        return prompt_equals(r, messages, prefix, rest)
    stripped = [
        Message(x.role, [p for p in x.parts if _is_call(p)], x.name, x.tool_call_id)
        if x.role == "assistant" and any(_is_call(p) for p in x.parts)
        else x
        for x in msgs[:-1]
    ]
    assert prefix == r.build_generation_prompt(stripped)
    return prefix != r.build_generation_prompt(messages[:-1])


def gpt_oss_text_check(
    r: Renderer, ids: list[int], end: int, parts: list[Part], spans: list[tuple[int, int]]
) -> None:
    """Harmony headers are text, so the separator check does not apply. Instead: every
    ordinary token of a message body (after ``<|message|>``, up to the next control token)
    is in a part's span, and each part's text is in its span's text."""
    control = r.table.control_ids
    message = r.table.control_id("<|message|>")
    covered = [False] * len(ids)
    for start, stop in spans:
        for k in range(start, min(stop, len(ids))):
            covered[k] = True
    in_body = False
    for k in range(end):
        t = ids[k]
        if t in control:
            in_body = t == message
        elif in_body:
            assert covered[k], (k, r.decode(ids))
    for part, (start, stop) in zip(parts, spans, strict=True):
        if isinstance(part, (TextPart, ThinkingPart)):
            source = _spelled(r, ids[start:stop])
            assert part.text in source


GPT_OSS = Layout(text_check=gpt_oss_text_check)
GPT_OSS_MESSAGES = strategies.assistant_messages(named_unparsed=True)
GPT_OSS_DATE = (("date", "2025-06-01"),)

# -- Qwen3.5 / Qwen3.6 / Qwen3.8 ---------------------------------------------------------------


def _xml_value(value: Any, python_scalars: bool) -> str:
    """The text a Qwen3.5/3.8 parameter holds (documented: the template's writing of the
    parsed value): strings as is, Qwen3.5's other scalars as Python prints them
    (``|string``), other values as ``tojson``."""
    if isinstance(value, str):
        return value
    if python_scalars and not isinstance(value, (dict, list)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _json_or_string(text: str) -> str:
    """How the parsers read a parameter: JSON when it is JSON, else a string."""
    try:
        json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return text


def _xml_call(p: Part, python_scalars: bool) -> Part | None:
    """``<function=NAME>`` with one ``<parameter=KEY>`` block per argument; ``None`` when a
    key or value cannot be read back (a key with ``>`` or a newline, a value holding
    ``</parameter>``)."""
    if type(p) is UnparsedToolCallPart:
        return UnparsedToolCallPart(_nfc(p.raw), "?")
    assert type(p) is ToolCallPart
    members = []
    for key, value in json.loads(p.arguments).items():
        key, text = _nfc(key), _nfc(_xml_value(value, python_scalars))
        if ">" in key or "\n" in key or "</parameter>" in text:
            return None
        members.append(json.dumps(key, ensure_ascii=False) + ": " + _json_or_string(text))
    return ToolCallPart(p.name, "{" + ", ".join(members) + "}")


def qwen35_canonical(*, inline: bool, python_scalars: bool) -> Callable[[Message], Message | None]:
    """Qwen3.5/3.8 (documented): text (each run of adjacent text parts, as one content
    string) and reasoning trimmed, then NFC (the tokenizer's normalizer); the turn's
    leading reasoning is its think block; any think block (empty ones too) and any call
    separates the text around it; calls carry no ids. Qwen3.5 reads reasoning written
    inline in a plain answer (its template's convention)."""

    def canonical(m: Message) -> Message | None:
        parts = _qwen3_inline(m.parts) if inline else list(m.parts)
        out: list[Part] = []
        for p in _joined(parts):
            if type(p) is ThinkingPart:
                t = _nfc(p.text.strip())
                if t:
                    out.append(ThinkingPart(t))
            elif type(p) is TextPart:
                t = _nfc(p.text.strip())
                if t:
                    out.append(TextPart(t))
            else:
                call = _xml_call(p, python_scalars)
                if call is None:
                    return None
                out.append(call)
        return Message("assistant", out)

    return canonical


def qwen35_no_thinking_canonical(
    *, inline: bool, python_scalars: bool
) -> Callable[[Message], Message | None]:
    """``enable_thinking=False``: a turn with reasoning is refused (see
    :func:`qwen35_no_thinking_reasoning`) and renders without it; blank think blocks of a
    turn without reasoning still separate the text around them."""
    canonical = qwen35_canonical(inline=inline, python_scalars=python_scalars)

    def no_thinking(m: Message) -> Message | None:
        # Without its reasoning, text spelling </think> reads as inline reasoning in turn.
        while True:
            parts = _qwen3_inline(m.parts) if inline else list(m.parts)
            if not any(type(p) is ThinkingPart and p.text.strip() for p in parts):
                return canonical(m)
            m = Message("assistant", [p for p in parts if type(p) is not ThinkingPart])

    return no_thinking


def qwen35_no_thinking_reasoning(name: str, *, inline: bool) -> TrainedReasoning:
    """``enable_thinking=False`` (documented): the generation prompt closes an empty think
    block, so reasoning of the trained turn is refused (without it, it renders)."""

    def lost(msgs: list[Message]) -> tuple[str, Message] | None:
        i = len(msgs) - 1
        m = msgs[i]
        if m.role != "assistant":
            return None
        parts = _qwen3_inline(m.parts) if inline else list(m.parts)
        if not any(type(p) is ThinkingPart and p.text.strip() for p in parts):
            return None
        pattern = (
            rf"^messages\[{i}\]: {re.escape(name)} with enable_thinking=False cannot write "
            r"the reasoning of this trained turn"
        )
        kept = Message("assistant", [p for p in parts if type(p) is not ThinkingPart], m.name)
        # Without its reasoning, text spelling </think> reads as inline reasoning in turn.
        again = lost([*msgs[:i], kept])
        return pattern, again[1] if again is not None else kept

    return lost


QWEN35 = Layout(
    separators=r"\n",
    kept_controls=("<think>", "</think>", "<tool_call>", "</tool_call>"),
    call_markers=("<tool_call>", "</tool_call>"),
    arguments_in_span=False,
)

# -- DeepSeek-V4 --------------------------------------------------------------------------------

_DSML = "｜DSML｜"


def _dsml_call(p: Part) -> Part | None:
    """An ``invoke`` with one parameter per argument (string values flagged, the others as
    the encoder's ``to_json`` writes the parsed value); ``None`` when a key cannot be read
    back (a quote or a newline)."""
    if type(p) is UnparsedToolCallPart:
        return UnparsedToolCallPart(p.raw, "?")
    assert type(p) is ToolCallPart
    members = []
    for key, value in json.loads(p.arguments).items():
        if '"' in key or "\n" in key:
            return None
        members.append(
            json.dumps(key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)
        )
    return ToolCallPart(p.name, "{" + ", ".join(members) + "}")


def dsv4_canonical(*, thinking: bool) -> Callable[[Message], Message | None]:
    """DeepSeek-V4 (documented): text and reasoning as written; in thinking mode the
    turn's leading reasoning is the block the prompt opened, later ones ``<think>`` blocks
    (chat mode writes none); a think block or a section separates the text around it."""

    def canonical(m: Message) -> Message | None:
        parts = list(m.parts)
        out: list[Part] = []
        if not thinking:
            parts = [p for p in parts if type(p) is not ThinkingPart]
        boundary = True
        for p in parts:
            if type(p) is ThinkingPart:
                if p.text:
                    out.append(ThinkingPart(p.text))
                boundary = True
            elif type(p) is TextPart:
                if not p.text:
                    continue
                if not boundary and out and type(out[-1]) is TextPart:
                    out[-1] = TextPart(out[-1].text + p.text)
                else:
                    out.append(TextPart(p.text))
                boundary = False
            else:
                call = _dsml_call(p)
                if call is None:
                    return None
                out.append(call)
                boundary = True
        return Message("assistant", out)

    return canonical


def dsv4_chat_reasoning(
    name: str = "deepseek_v4",
) -> Callable[[list[Message]], tuple[str, Message] | None]:
    """Chat mode (documented): reasoning of the trained turn cannot be written."""

    def trained_reasoning(msgs: list[Message]) -> tuple[str, Message] | None:
        i = len(msgs) - 1
        m = msgs[i]
        if m.role != "assistant" or not any(type(p) is ThinkingPart and p.text for p in m.parts):
            return None
        pattern = rf"^messages\[{i}\]: {re.escape(name)} in chat mode cannot write the reasoning"
        return pattern, Message("assistant", [p for p in m.parts if type(p) is not ThinkingPart])

    return trained_reasoning


DSV4 = Layout(
    separators=r"\n|</?|tool_calls>",
    segment_markers=(_DSML,),
    kept_controls=(_DSML, "<think>", "</think>"),
    arguments_in_span=False,
)
# Unparsed calls in DeepSeek-V4's shape: an invoke whose body is not parameter blocks.
DSV4_UNPARSED = strategies.text.map(
    lambda t: f'<{_DSML}invoke name="f">\n{{not json {t}\n</{_DSML}invoke>'
)


# DeepSeek-V4.1: a space after ｜DSML｜ and a "calls" section.
DSV41 = Layout(
    separators=r"\n|</?| calls>",
    segment_markers=(_DSML,),
    kept_controls=(_DSML, "<think>", "</think>"),
    arguments_in_span=False,
)
DSV41_UNPARSED = strategies.text.map(
    lambda t: f'<{_DSML} invoke name="f">\n{{not json {t}\n</{_DSML} invoke>'
)


def dsv4_messages(unparsed: st.SearchStrategy[str] = DSV4_UNPARSED) -> st.SearchStrategy[Message]:
    call = st.one_of(
        strategies.tool_call_parts(any_spelling=True),
        st.builds(UnparsedToolCallPart, unparsed, st.just("?")),
    )
    part = st.one_of(strategies.thinking_parts(), strategies.text_parts(), call)
    return st.lists(part, max_size=6).map(lambda ps: Message("assistant", ps))


# -- Kimi-K2.5 ------------------------------------------------------------------------------------


def with_kimi_ids(m: Message) -> Message:
    """Calls with ids as Kimi models sample them (``functions.NAME:IDX``, IDX counting the
    message's calls): Kimi-K2-Thinking and K2.5 write the caller's ids."""
    out: list[Part] = []
    index = 0
    for p in m.parts:
        if type(p) is ToolCallPart:
            p = ToolCallPart(p.name, p.arguments, id=f"functions.{p.name}:{index}")
        if _is_call(p):
            index += 1
        out.append(p)
    return Message(m.role, out, m.name)


def kimi25_no_thinking_reasoning(msgs: list[Message]) -> tuple[str, Message] | None:
    i = len(msgs) - 1
    m = msgs[i]
    if m.role != "assistant" or not any(type(p) is ThinkingPart and p.text for p in m.parts):
        return None
    pattern = rf"^messages\[{i}\]: kimi_k2\.5 with thinking=False cannot write the reasoning"
    return pattern, Message("assistant", [p for p in m.parts if type(p) is not ThinkingPart])


def _query_last(conversation: list[dict[str, Any]]) -> bool:
    """Qwen3.5/3.8 need a user message that is not only wrapped tool output."""
    users = [m["content"].strip() for m in conversation if m["role"] == "user"]
    wrapped = [u.startswith("<tool_response>") and u.endswith("</tool_response>") for u in users]
    return not all(wrapped)


# -- Nemotron-3 and GLM-5.x --------------------------------------------------------------------


def _documented_value(text: str, python_scalars: bool) -> str:
    """How the Nemotron-3 and GLM parsers read an argument value (documented): ``True``,
    ``False``, ``None`` (Nemotron: the template's Python spelling) as JSON literals, text
    that is JSON other than a string as it is, anything else as a string."""
    if python_scalars and text in ("True", "False", "None"):
        return {"True": "true", "False": "false", "None": "null"}[text]
    try:
        value = json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def nemotron_canonical(m: Message) -> Message | None:
    """Nemotron-3 with thinking on (canonical order: reasoning, text, calls): reasoning as
    given unless blank, the text trimmed at its end, each call's values as the template
    writes them (``|string``) read back; ``None`` where a name, key or value cannot be
    read back (``>`` or a newline in a name or key, ``</parameter>`` in a value)."""
    out: list[Part] = []
    for p in m.parts:
        if type(p) is ThinkingPart:
            if p.text.strip():
                out.append(ThinkingPart(p.text))
        elif type(p) is TextPart:
            if p.text.rstrip():
                out.append(TextPart(p.text.rstrip()))
        elif type(p) is UnparsedToolCallPart:
            out.append(UnparsedToolCallPart(p.raw, "?"))
        else:
            assert type(p) is ToolCallPart
            if not p.name or ">" in p.name or "\n" in p.name:
                return None
            members = []
            for key, value in json.loads(p.arguments).items():
                text = _xml_value(value, True)
                if not key or ">" in key or "\n" in key or "</parameter>" in text:
                    return None
                members.append(
                    json.dumps(key, ensure_ascii=False) + ": " + _documented_value(text, True)
                )
            out.append(ToolCallPart(p.name, "{" + ", ".join(members) + "}"))
    return Message("assistant", out)


_GLM_TAGS = ("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")


def glm_canonical(m: Message) -> Message | None:
    """GLM-5.x (canonical order: reasoning, text, calls): reasoning as given, the text
    stripped, each call's values as the template writes them (strings raw, others
    ``tojson``) read back; ``None`` where a name, key or value cannot be read back (a name
    with surrounding whitespace or ``<``/``>``, a key or value spelling an argument tag)."""
    out: list[Part] = []
    for p in m.parts:
        if type(p) is ThinkingPart:
            if p.text:
                out.append(ThinkingPart(p.text))
        elif type(p) is TextPart:
            if p.text.strip():
                out.append(TextPart(p.text.strip()))
        else:
            assert type(p) is ToolCallPart
            name = p.name
            if not name or name != name.strip() or "<" in name or ">" in name:
                return None
            members = []
            for key, value in json.loads(p.arguments).items():
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if any(tag in key or tag in text for tag in _GLM_TAGS):
                    return None
                members.append(
                    json.dumps(key, ensure_ascii=False) + ": " + _documented_value(text, False)
                )
            out.append(ToolCallPart(name, "{" + ", ".join(members) + "}"))
    return Message("assistant", out)


NEMOTRON = Layout(
    separators=r"\n",
    kept_controls=("<think>", "</think>", "<tool_call>", "</tool_call>"),
    call_markers=("<tool_call>", "</tool_call>"),
    arguments_in_span=False,
)
GLM = Layout(
    kept_controls=("<think>", "</think>", "<tool_call>", "</tool_call>", *_GLM_TAGS),
    call_markers=("<tool_call>", "</tool_call>"),
    arguments_in_span=False,
)
CANONICAL_ORDER = strategies.assistant_messages(interleaved=False, any_spelling=True)
GLM_MESSAGES = strategies.assistant_messages(interleaved=False, unparsed=False, any_spelling=True)


# -- the specs -----------------------------------------------------------------------------

QWEN3_MESSAGES = strategies.assistant_messages()
QWEN35_MESSAGES = strategies.assistant_messages(any_spelling=True)
# -- Llama 3 ---------------------------------------------------------------------------------


def llama3_canonical(m: Message) -> Message | None:
    """What Llama 3 gives back: one tool call (arguments as ``tojson`` writes them), or its
    text trimmed (the template trims). Text that is itself JSON-looking (``{``/``[`` first)
    may read as bare calls: not expressible."""
    calls = [p for p in m.parts if _is_call(p)]
    if calls:
        (call,) = calls
        assert type(call) is ToolCallPart
        arguments = json.dumps(json.loads(call.arguments), ensure_ascii=False)
        return Message("assistant", [ToolCallPart(call.name, arguments)])
    text = m.text.strip()
    if text[:1] in ("{", "["):
        return None
    return Message("assistant", [TextPart(text)] if text else [])


LLAMA3_MESSAGES = st.one_of(
    strategies.text_parts().map(lambda p: Message("assistant", [p])),
    strategies.tool_call_parts().map(lambda p: Message("assistant", [p])),
)
LLAMA3 = Layout(separators=r"\s")
LLAMA3_CONVERSATIONS = strategies.conversations(tools=False, reasoning=False)

# -- Llama 4 ---------------------------------------------------------------------------------


def llama4_canonical(m: Message) -> Message | None:
    """What Llama 4 gives back: its text as written (the template writes a call turn's
    text first, between ``<|python_start|>`` and ``<|python_end|>``), then its calls
    (arguments as ``tojson`` writes them). Text that is itself JSON-looking (``{``/``[``
    first) may read as calls: not expressible."""
    text = "".join(p.text for p in m.parts if type(p) is TextPart)
    if text.strip()[:1] in ("{", "["):
        return None
    parts: list[Part] = [TextPart(text)] if text else []
    for call in (p for p in m.parts if _is_call(p)):
        assert type(call) is ToolCallPart
        arguments = json.dumps(json.loads(call.arguments), ensure_ascii=False)
        parts.append(ToolCallPart(call.name, arguments))
    return Message("assistant", parts)


_LLAMA4_TEXT = strategies.text_parts().filter(lambda p: not re.match(r"\s*[\r\n]", p.text))
"""Text a trained turn can open with: no line break before its first other character (it
would merge with the header's ``\n\n``; see :attr:`Spec.leading_line_breaks`)."""
LLAMA4_MESSAGES = st.one_of(
    _LLAMA4_TEXT.map(lambda p: Message("assistant", [p])),
    st.tuples(
        st.one_of(st.none(), _LLAMA4_TEXT),
        st.lists(strategies.tool_call_parts(), min_size=1, max_size=3),
    ).map(lambda tc: Message("assistant", [*([tc[0]] if tc[0] else []), *tc[1]])),
)

# -- Mistral v3 -------------------------------------------------------------------------------


def mistral_canonical(m: Message, read: Callable[[str], str] = str) -> Message | None:
    """What Mistral gives back: its text without trailing spaces, then its calls (arguments
    as ``json.dumps`` writes them, ids kept), each text as the tokenizer ``read``s it back;
    a message with neither is not writable."""
    text = read(m.text.rstrip(" "))
    calls = [
        ToolCallPart(
            read(p.name), read(json.dumps(json.loads(p.arguments), ensure_ascii=False)), p.id
        )
        for p in m.parts
        if type(p) is ToolCallPart
    ]
    if not text and not calls:
        return None
    return Message("assistant", [*([TextPart(text)] if text else []), *calls])


MISTRAL_MESSAGES = st.one_of(
    strategies.text_parts()
    .filter(lambda p: p.text.rstrip(" "))
    .map(lambda p: Message("assistant", [p])),
    st.lists(strategies.tool_call_parts(with_ids=True), min_size=1, max_size=3).map(
        lambda calls: Message("assistant", calls)
    ),
)
MISTRAL = Layout(separators=r" ")


def _mistral_writable(conversation: list[dict[str, Any]]) -> bool:
    """Assistant turns with text or calls (the encoder refuses others), none right after
    another (a system message between keeps them apart)."""
    roles = [m["role"] for m in conversation]
    return all(
        m["content"] or m.get("tool_calls") for m in conversation if m["role"] == "assistant"
    ) and not any(a == b == "assistant" for a, b in itertools.pairwise(roles))


MISTRAL_CONVERSATIONS = strategies.conversations(tools=False, reasoning=False).filter(
    _mistral_writable
)

# -- Mistral v7 -------------------------------------------------------------------------------


def _sentencepiece_read(text: str) -> str:
    """``text`` as SentencePiece gives it back: a ``▁`` typed in it is a space."""
    return text.replace("\u2581", " ")


def mistral_v7_canonical(m: Message) -> Message | None:
    """What Mistral v7 gives back: v3's reading, SentencePiece reading a ``▁`` as a space."""
    return mistral_canonical(m, _sentencepiece_read)


MISTRAL_V7 = Layout(separators=r" ", call_prefix=" ")
MISTRAL_V7_MESSAGES = (
    st.tuples(strategies.text, st.lists(strategies.tool_call_parts(with_ids=True), max_size=3))
    .filter(lambda tc: tc[0] or tc[1])
    .map(lambda tc: Message("assistant", [*([TextPart(tc[0])] if tc[0] else []), *tc[1]]))
)


NO_REASONING = strategies.conversations(reasoning=False)
QWEN35_CONVERSATIONS = strategies.conversations().filter(_query_last)

SPECS = [
    *(
        Spec(
            name,
            model,
            (),
            CANONICAL_ORDER,
            nemotron_canonical,
            NEMOTRON,
            conversations=QWEN35_CONVERSATIONS,
        )
        for name, model in (
            ("nemotron3", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"),
            ("nemotron3_super", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B"),
            ("nemotron3_ultra", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B"),
        )
    ),
    *(
        Spec(name, model, options, GLM_MESSAGES, glm_canonical, GLM)
        for name, model, options in (
            ("glm5.2", "zai-org/GLM-5.2", ()),
            ("glm5.3", "zai-org/GLM-5.3", ()),
            ("glm5.3_flash", "zai-org/GLM-5.3-Flash", (("clear_thinking", True),)),
        )
    ),
    Spec(
        "mistral",
        "mistralai/Mistral-Nemo-Instruct-2407",
        (),
        MISTRAL_MESSAGES,
        mistral_canonical,
        MISTRAL,
        thinking=False,
        conversations=MISTRAL_CONVERSATIONS,
        text_with_calls=False,
    ),
    Spec(
        "mistral_v7",
        "mistralai/Mistral-Large-Instruct-2411",
        (),
        MISTRAL_V7_MESSAGES,
        mistral_v7_canonical,
        MISTRAL_V7,
        thinking=False,
        conversations=MISTRAL_CONVERSATIONS,
    ),
    Spec(
        "llama3",
        "meta-llama/Llama-3.1-8B-Instruct",
        (),
        LLAMA3_MESSAGES,
        llama3_canonical,
        LLAMA3,
        thinking=False,
        conversations=LLAMA3_CONVERSATIONS,
        text_with_calls=False,
    ),
    Spec(
        "llama4",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        (),
        LLAMA4_MESSAGES,
        llama4_canonical,
        Layout(),
        thinking=False,
        conversations=LLAMA3_CONVERSATIONS,
        leading_line_breaks=False,
    ),
    Spec("qwen3", "Qwen/Qwen3-8B", (), QWEN3_MESSAGES, qwen3_canonical, QWEN3),
    *(
        Spec(
            name,
            "Qwen/Qwen3-8B",
            (),
            strategies.assistant_messages(thinking=False),
            qwen_instruct_canonical,
            QWEN_INSTRUCT,
            thinking=False,
            conversations=NO_REASONING,
        )
        for name in ("qwen2.5", "qwen3_instruct_2507", "qwen3_vl")
    ),
    Spec(
        "qwen3_thinking_2507",
        "Qwen/Qwen3-8B",
        (),
        QWEN3_MESSAGES,
        qwen3_canonical,
        QWEN3,
        conversations=QWEN35_CONVERSATIONS,
    ),
    Spec(
        "qwen3",
        "Qwen/Qwen3-8B",
        (("drafted_calls", "call"),),
        QWEN3_MESSAGES,
        qwen3_canonical,
        QWEN3,
    ),
    Spec(
        "qwen3",
        "Qwen/Qwen3-8B",
        (("enable_thinking", False),),
        QWEN3_MESSAGES,
        qwen3_no_thinking_canonical,
        QWEN3,
        trained_reasoning=qwen3_no_thinking_reasoning,
    ),
    Spec(
        "deepseek_v3",
        "deepseek-ai/DeepSeek-V3",
        (),
        strategies.assistant_messages(interleaved=False, thinking=False),
        v3_template_canonical,
        DEEPSEEK_V3,
        thinking=False,
        conversations=NO_REASONING,
        termination=v3_template_termination,
        prompt_prefix=v3_template_prefix,
    ),
    Spec(
        "deepseek_v3",
        "deepseek-ai/DeepSeek-V3",
        (("fix_tool_format", True), ("render_thinking", True)),
        strategies.assistant_messages().map(leading_reasoning_only),
        v3_fixed_canonical,
        DEEPSEEK_V3,
    ),
    Spec(
        "deepseek_v3.1",
        "deepseek-ai/DeepSeek-V3.1",
        (),
        strategies.assistant_messages(),
        v31_canonical,
        DEEPSEEK_V31,
        trained_reasoning=v31_trained_reasoning(keep=False),
    ),
    Spec(
        "deepseek_v3.1",
        "deepseek-ai/DeepSeek-V3.1",
        (("thinking", True), ("keep_thinking", True)),
        strategies.assistant_messages(),
        v31_keep_canonical,
        DEEPSEEK_V31,
        trained_reasoning=v31_trained_reasoning(keep=True),
    ),
    Spec(
        "deepseek_r1",
        "deepseek-ai/DeepSeek-R1",
        (),
        strategies.assistant_messages(),
        r1_canonical,
        DEEPSEEK_R1,
        trained_reasoning=r1_trained_reasoning,
    ),
    Spec(
        "kimi_k2",
        "moonshotai/Kimi-K2-Instruct",
        (),
        strategies.assistant_messages(thinking=False),
        kimi_canonical,
        KIMI,
        thinking=False,
        conversations=NO_REASONING,
    ),
    Spec(
        "kimi_k2",
        "moonshotai/Kimi-K2-Instruct",
        (("call_ids", "numbered"),),
        strategies.assistant_messages(thinking=False),
        kimi_canonical,
        KIMI,
        thinking=False,
        conversations=NO_REASONING,
    ),
    Spec(
        "kimi_k2_thinking",
        "moonshotai/Kimi-K2-Thinking",
        (),
        strategies.assistant_messages().map(with_kimi_ids),
        kimi_thinking_canonical,
        KIMI,
        prompt_prefix=kimi_thinking_prefix,
        trained_reasoning=kimi_trained_reasoning,
    ),
    Spec(
        "kimi_k2_thinking",
        "moonshotai/Kimi-K2-Thinking",
        (("keep_last_reasoning", True),),
        strategies.assistant_messages().map(with_kimi_ids),
        kimi_thinking_keep_canonical,
        KIMI,
    ),
    Spec(
        "kimi_k2_thinking",
        "moonshotai/Kimi-K2-Thinking",
        (("call_ids", "numbered"),),
        strategies.assistant_messages(),
        kimi_thinking_canonical,
        KIMI,
        prompt_prefix=kimi_thinking_prefix,
        trained_reasoning=kimi_trained_reasoning,
    ),
    Spec(
        "qwen3.5",
        "Qwen/Qwen3.5-27B",
        (),
        QWEN35_MESSAGES,
        qwen35_canonical(inline=True, python_scalars=True),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
    ),
    Spec(
        "qwen3.5",
        "Qwen/Qwen3.5-27B",
        (("enable_thinking", False),),
        QWEN35_MESSAGES,
        qwen35_no_thinking_canonical(inline=True, python_scalars=True),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
        trained_reasoning=qwen35_no_thinking_reasoning("qwen3.5", inline=True),
    ),
    Spec(
        "qwen3.6",
        "Qwen/Qwen3.6-27B",
        (),
        QWEN35_MESSAGES,
        qwen35_canonical(inline=True, python_scalars=False),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
    ),
    Spec(
        "qwen3.6",
        "Qwen/Qwen3.6-27B",
        (("enable_thinking", False),),
        QWEN35_MESSAGES,
        qwen35_no_thinking_canonical(inline=True, python_scalars=False),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
        trained_reasoning=qwen35_no_thinking_reasoning("qwen3.6", inline=True),
    ),
    Spec(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        (),
        QWEN35_MESSAGES,
        qwen35_canonical(inline=False, python_scalars=False),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
    ),
    Spec(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        (("drafted_calls", "call"),),
        QWEN35_MESSAGES,
        qwen35_canonical(inline=False, python_scalars=False),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
    ),
    Spec(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        (("enable_thinking", False), ("preserve_thinking", False)),
        QWEN35_MESSAGES,
        qwen35_no_thinking_canonical(inline=False, python_scalars=False),
        QWEN35,
        conversations=QWEN35_CONVERSATIONS,
        trained_reasoning=qwen35_no_thinking_reasoning("qwen3.8", inline=False),
    ),
    Spec(
        "deepseek_v4",
        "deepseek-ai/DeepSeek-V4-Pro",
        (),
        dsv4_messages(),
        dsv4_canonical(thinking=True),
        DSV4,
    ),
    Spec(
        "deepseek_v4",
        "deepseek-ai/DeepSeek-V4-Pro",
        (("thinking_mode", "chat"),),
        dsv4_messages(),
        dsv4_canonical(thinking=False),
        DSV4,
        trained_reasoning=dsv4_chat_reasoning(),
    ),
    Spec(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        (),
        dsv4_messages(DSV41_UNPARSED),
        dsv4_canonical(thinking=True),
        DSV41,
    ),
    Spec(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        (("thinking_mode", "chat"),),
        dsv4_messages(DSV41_UNPARSED),
        dsv4_canonical(thinking=False),
        DSV41,
        trained_reasoning=dsv4_chat_reasoning("deepseek_v4.1"),
    ),
    Spec(
        "kimi_k2.5",
        "moonshotai/Kimi-K2.5",
        (),
        strategies.assistant_messages().map(with_kimi_ids),
        kimi_thinking_keep_canonical,
        KIMI,
    ),
    Spec(
        "kimi_k2.6",
        "moonshotai/Kimi-K2.6",
        (),
        strategies.assistant_messages().map(with_kimi_ids),
        kimi_thinking_keep_canonical,
        KIMI,
    ),
    Spec(
        "kimi_k2.5",
        "moonshotai/Kimi-K2.5",
        (("thinking", False),),
        strategies.assistant_messages().map(with_kimi_ids),
        kimi_canonical,
        KIMI,
        trained_reasoning=kimi25_no_thinking_reasoning,
    ),
    Spec(
        "gpt_oss",
        "openai/gpt-oss-20b",
        GPT_OSS_DATE,
        GPT_OSS_MESSAGES,
        gpt_oss_canonical,
        GPT_OSS,
        prompt_prefix=gpt_oss_template_prefix,
    ),
    Spec(
        "gpt_oss",
        "openai/gpt-oss-20b",
        (*GPT_OSS_DATE, ("dialect", "harmony")),
        GPT_OSS_MESSAGES,
        gpt_oss_harmony_canonical,
        GPT_OSS,
    ),
]

spec_param = pytest.mark.parametrize("spec", SPECS, ids=repr)


def test_every_registered_renderer_has_a_spec() -> None:
    from renderers.registry import renderer_names

    assert set(renderer_names()) <= {s.name for s in SPECS}


# -- properties -------------------------------------------------------------------------


def completion_of(spec: Spec, r: Renderer, message: Message) -> list[int]:
    """The trained tokens of ``message`` after a user message (without the reasoning its
    template drops, where the renderer refuses to lose it: see :func:`trainable`)."""
    messages = trainable(
        r, [{"role": "user", "content": "Go."}, message], spec.trained_reasoning, repr(spec)
    )
    example = r.build_supervised_example(messages)
    ids: list[int] = example.tokens[example.weights > 0].tolist()
    return ids


@spec_param
@given(data=st.data())
def test_render_then_parse_gives_the_message_back(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    message = data.draw(spec.messages)
    expected = spec.canonical(message)
    assume(expected is not None)
    result = r.parse_response(completion_of(spec, r, message))
    assert canonical_unparsed(result.message) == expected
    termination = spec.termination(message)
    if any(isinstance(p, UnparsedToolCallPart) for p in expected.parts):
        termination = Termination.MALFORMED  # a call that does not parse is an issue
    assert result.termination is termination, result.issues
    count(f"round trip [{spec!r}]")


@pytest.mark.parametrize(
    "spec", [s for s in SPECS if s.layout is not GPT_OSS], ids=repr
)  # (Harmony writes each text part as a message of its own)
@given(data=st.data())
def test_text_split_across_adjacent_parts_renders_as_the_joined_text(
    spec: Spec, data: st.DataObject
) -> None:
    """Where the template has one content string, a message's text split across adjacent
    text parts (an OpenAI content list of text blocks) is that text: its tokens are those
    of the message with each run of text parts joined (the template strips it whole).
    Each text is split around every whitespace character, after an empty part."""
    r = spec.renderer()
    message = data.draw(spec.messages)
    split: list[Any] = []
    for part in message.parts:
        if type(part) is TextPart:
            split += [TextPart(""), *(TextPart(t) for t in re.split(r"(\s)", part.text) if t)]
        else:
            split.append(part)
    assert completion_of(spec, r, Message("assistant", split)) == completion_of(
        spec, r, Message("assistant", _joined(split))
    )


@pytest.mark.parametrize("spec", [s for s in SPECS if s.layout is not GPT_OSS], ids=repr)
@pytest.mark.parametrize("text", ["\n\nab  cd\n\n", " \n ab\n", "\n\n"], ids=repr)
def test_text_split_at_every_character_renders_as_the_joined_text(spec: Spec, text: str) -> None:
    """After reasoning, with a call after it or not: text with newlines and spaces at its
    edges and inside, one character per part, renders as the same text in one part."""
    r = spec.renderer()
    call = ToolCallPart("f", '{"a": 1}', id="functions.f:0")
    if not spec.leading_line_breaks and text.startswith("\n"):
        go = {"role": "user", "content": "Go."}
        with pytest.raises(ValueError, match=r"messages\[1\]: .* cannot be trained"):
            r.build_supervised_example([go, Message("assistant", [TextPart(text)])])
        text = text.lstrip("\n")
    for tail in ([], [call]) if spec.text_with_calls else ([],):
        thinking = [ThinkingPart("x")] if spec.thinking else []
        split = [*thinking, *(TextPart(c) for c in text), *tail]
        joined = [*thinking, TextPart(text), *tail]
        assert completion_of(spec, r, Message("assistant", split)) == completion_of(
            spec, r, Message("assistant", joined)
        )


def _joined(parts: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        if type(part) is TextPart and out and type(out[-1]) is TextPart:
            out[-1] = TextPart(out[-1].text + part.text)
        else:
            out.append(part)
    return out


@spec_param
@given(data=st.data())
def test_supervised_prefix_equals_generation_prompt(spec: Spec, data: st.DataObject) -> None:
    """The tokens before the first trained token of a supervised example are the
    generation prompt of the conversation before the trained turn, which is a random
    assistant message after a random history (except where documented: asserted exactly)."""
    r = spec.renderer()
    conversation = data.draw(spec.conversations)
    last = max(i for i, m in enumerate(conversation) if m["role"] in ("user", "tool"))
    messages: Conversation = [*conversation[: last + 1], data.draw(spec.messages)]
    messages = trainable(r, messages, spec.trained_reasoning, repr(spec))
    if spec.prompt_prefix is v3_template_prefix:
        try:
            example = r.build_supervised_example(messages)
        except ValueError as exc:
            # The documented header-less turn whose start merges with the user's text: a
            # trained token would hold untrained text, so the turn is refused.
            assert "holds text of this trained turn and untrained text" in str(exc), exc
            count(f"prompt consistency [{spec!r}] (refused: merged token)")
            return
    example = r.build_supervised_example(messages)
    first = int(example.weights.argmax())
    assert example.weights[first] == 1
    tokens = example.tokens.tolist()
    weights = example.weights[first:].tolist()
    if spec.layout is GPT_OSS:
        # One completion per call: the <|start|>assistant after each <|call|> of the turn
        # is the next completion's prompt, untrained (issue 31 item 4).
        call, start = r.table.control_id("<|call|>"), r.table.control_id("<|start|>")
        for k in range(first, len(tokens) - 2):
            if tokens[k] == call and tokens[k + 1] == start:
                assert example.weights[k] == 1 and weights[k + 1 - first : k + 3 - first] == [0, 0]
                weights[k + 1 - first : k + 3 - first] = [1.0, 1.0]
    assert weights == sorted(weights, reverse=True)  # trained through the turn's end
    check = spec.prompt_prefix or prompt_equals
    documented = check(r, messages, tokens[:first], tokens[first:])
    count(f"prompt consistency [{spec!r}]")
    if documented:
        count(f"prompt consistency [{spec!r}] (documented exception)")


@given(conversation=strategies.conversations(), final=strategies.assistant_messages())
def test_v31_thinking_history_is_written_as_non_thinking(
    conversation: list[dict[str, Any]], final: Message
) -> None:
    """DeepSeek-V3.1 ``thinking=True`` without ``keep_thinking`` (documented): assistant
    turns are written as the template writes history, ``<｜Assistant｜></think>{answer}``,
    so after a user message the untrained prefix is the prompt with ``</think>`` in place
    of its final ``<think>``; after tool outputs the prompt adds nothing. A trained turn
    with reasoning is refused (``thinking=True`` alone does not keep it)."""
    r = _renderer("deepseek_v3.1", "deepseek-ai/DeepSeek-V3.1", (("thinking", True),))
    last = max(i for i, m in enumerate(conversation) if m["role"] in ("user", "tool"))
    messages: Conversation = [*conversation[: last + 1], final]
    lost = v31_trained_reasoning(keep=False)
    messages = trainable(r, messages, lost, "deepseek_v3.1-thinking=True")
    example = r.build_supervised_example(messages)
    first = int(example.weights.argmax())
    prompt = r.build_generation_prompt(messages[:-1])
    if conversation[last]["role"] == "user":
        think, think_end = r.table.control_id("<think>"), r.table.control_id("</think>")
        assert prompt[-1] == think
        assert example.tokens[:first].tolist() == [*prompt[:-1], think_end]
    else:
        assert example.tokens[:first].tolist() == prompt
    count("prompt consistency [deepseek_v3.1-thinking=True] (documented exception)")


@spec_param
@given(data=st.data())
def test_streaming_equals_batch_for_random_splits(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    ids = completion_of(spec, r, data.draw(spec.messages))
    ids = ids[: data.draw(st.integers(0, len(ids)))]  # also cut-off completions
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=8)))
    parser = r.stream_parser()
    previous = 0
    for cut in [*cuts, len(ids)]:
        parser.feed(ids[previous:cut])
        previous = cut
    assert parser.finish() == r.parse_response(ids)
    count(f"streaming == batch [{spec!r}]")


# -- fuzzing ------------------------------------------------------------------------------


def _structural(r: Renderer) -> frozenset[int]:
    return r.stream_parser()._structural


@st.composite
def _every_structural_token(
    draw: st.DrawFn,
    structural: list[int],
    ends: list[int],
    filler: st.SearchStrategy[list[int]],
) -> list[int]:
    """Every structural token (but the ends) in a random order, random filler between
    them, and maybe an end token."""
    out: list[int] = []
    for t in draw(st.permutations(structural)):
        out += draw(filler)
        out.append(t)
    return out + draw(st.one_of(st.just([]), st.sampled_from(ends).map(lambda t: [t])))


_SOUPS: dict[int, st.SearchStrategy[list[int]]] = {}


def _token_soup(r: Renderer) -> st.SearchStrategy[list[int]]:
    """Random completions: control tokens (the parser's structural ones and any other of
    the model's), random ordinary ids and encoded tricky text, in any order; or every
    structural token of the format in a random order, interleaved with text."""
    soup = _SOUPS.get(id(r))
    if soup is not None:
        return soup
    table = r.table
    controls = sorted(table.control_ids)
    structural = sorted(_structural(r))
    ends = sorted(set(r.stop_token_ids))
    ordinary = st.integers(0, table.vocab_size - 1).filter(lambda t: table.valid[t])
    text = strategies.text.map(table.encode)
    pieces = st.one_of(
        st.sampled_from(structural).map(lambda t: [t]),
        st.sampled_from(controls).map(lambda t: [t]),
        ordinary.map(lambda t: [t]),
        text,
    )
    filler = st.one_of(st.just([]), text, ordinary.map(lambda t: [t]))
    soup = st.one_of(
        st.lists(pieces, max_size=30).map(lambda chunks: [t for c in chunks for t in c]),
        _every_structural_token([t for t in structural if t not in ends], ends, filler),
    )
    _SOUPS[id(r)] = soup
    return soup


def _spelled(r: Renderer, ids: Sequence[int]) -> str:
    """The text of ``ids`` with control tokens spelled out, each run of ordinary tokens
    decoded on its own (as the parser does: it flushes its decoder at every marker)."""
    pieces: list[str] = []
    run: list[int] = []
    for t in ids:
        spelling = r.table.control_text(t)
        if spelling is None:
            run.append(t)
            continue
        if run:
            pieces.append(r.table.decode(run))
            run = []
        pieces.append(spelling)
    if run:
        pieces.append(r.table.decode(run))
    return "".join(pieces)


def _decode_runs(r: Renderer, ids: Sequence[int], skip: Callable[[int], bool]) -> str:
    """The text of ``ids`` without skipped positions, each run between skipped positions
    decoded on its own (as the parser does: it flushes its decoder at every marker)."""
    out: list[str] = []
    run: list[int] = []
    for k, t in enumerate(ids):
        if skip(k):
            if run:
                out.append(r.table.decode(run))
                run = []
        else:
            run.append(t)
    if run:
        out.append(r.table.decode(run))
    return "".join(out)


def _parts_and_spans(
    r: Renderer, ids: list[int]
) -> tuple[ParseResult, list[Part], list[tuple[int, int]]]:
    """The parse result and the parts before a plain-text message merges them (with
    their own spans): content checks need each part's own span."""
    parser: StreamParser = r.stream_parser(_events=False)
    parser.feed(ids)
    result = parser.finish()
    parts = [p for p in parser.asm.parts if p is not None]
    return result, parts, list(parser.asm.spans)


_ASK = [{"role": "user", "content": "?"}]


def _dropped_think_ends(
    spec: Spec, r: Renderer, ids: list[int], parts: list[Part], spans: list[tuple[int, int]]
) -> set[int]:
    """Where ``drafted_calls="call"`` drops a ``</think>``: after a call that ended open
    reasoning (the completion's first part where the prompt opened reasoning, or right
    after unclosed reasoning), the first one met in text (not one that cuts a call: that
    one is text), however many calls and texts come between, unless a ``<think>`` comes
    first (the parser forgets the call then)."""
    if dict(spec.options).get("drafted_calls") != "call":
        return set()
    think_end = r.table.control_id("</think>")
    think = r.table.control_tokens.get("<think>")
    ended = next(
        (
            k
            for k, part in enumerate(parts)
            if _is_call(part)
            and (
                spans[k][0] == 0 and think in r.build_generation_prompt(_ASK)[-2:]
                if k == 0
                else isinstance(parts[k - 1], ThinkingPart)
                and think_end not in ids[spans[k - 1][0] : spans[k][0]]
            )
        ),
        None,
    )
    if ended is None:
        return set()
    for k in range(ended + 1, len(parts)):
        start, stop = spans[k]
        if think is not None and think in ids[spans[k - 1][0] : stop]:
            return set()
        if not isinstance(parts[k], TextPart):
            continue
        cut = _is_call(parts[k - 1]) and getattr(parts[k - 1], "incomplete", False)
        if cut and ids[start] == think_end:  # it cut the call and is read as text
            start += 1
        if think_end in ids[start:stop]:
            return {ids.index(think_end, start, stop)}
    return set()


def check_content(spec: Spec, r: Renderer, ids: list[int]) -> ParseResult:
    """No content lost: every ordinary token before the message's end is in a part or is
    format structure. Text and thinking parts, in order, make up the text outside tool
    calls with only the format's separators between them; a tool call's name, id and
    arguments are in its span, and an unparsed call's raw text is its span's text."""
    result, parts, spans = _parts_and_spans(r, ids)
    assert len(parts) == len(spans)
    assert canonical_unparsed(Message("assistant", parts)) == canonical_unparsed(result.message)
    structural = _structural(r)
    layout = spec.layout
    end = len(ids) - len(result.trailing_ids) - (result.stop_token_id is not None)
    previous = 0
    for start, stop in spans:
        assert 0 <= start <= stop <= end + (result.stop_token_id is not None)
        assert start >= previous - 1  # in order (DeepSeek-V3's text-level </think> token
        previous = stop  # may belong to the reasoning and to the answer after it)
    in_call = [False] * len(ids)
    markers = {r.table.control_id(m): m for m in layout.segment_markers}
    controls = r.table.control_tokens
    kept = {controls[m] for m in layout.kept_controls if m in controls}
    if not layout.first_segment_only:  # else later segment markers are content
        kept -= markers.keys()
    call_markers = {controls[m] for m in layout.call_markers if m in controls}
    for part, (start, stop) in zip(parts, spans, strict=True):
        if not _is_call(part):
            continue
        for k in range(start, stop):
            in_call[k] = True
        span = ids[start : min(stop, end)]
        edges = {0, len(span) - 1}  # the call's own opening and closing markers
        skip = [
            t in structural and (t not in kept or (k in edges and t in call_markers))
            for k, t in enumerate(span)
        ]
        cuts = [k for k, t in enumerate(span) if t in markers]
        if layout.first_segment_only:
            cuts = cuts[:1]
        segments: list[str] = []
        previous = 0
        for cut in [*cuts, len(span)]:
            run = span[previous:cut]
            segments.append(_decode_runs(r, run, lambda j, p=previous, s=skip: s[p + j]))
            if cut < len(span):
                segments.append(markers[span[cut]])
            previous = cut + 1
        source = "".join(segments)
        if isinstance(part, UnparsedToolCallPart):
            prefix = layout.call_prefix
            assert part.raw == (source[len(prefix) :] if source.startswith(prefix) else source)
        else:
            assert isinstance(part, ToolCallPart)
            if layout.arguments_in_span:
                assert part.arguments in source
            else:
                values = json.loads(part.arguments).values()
                assert all(v in source for v in values if isinstance(v, str))
            if layout.verbatim_names:
                assert (part.id or part.name) in source
    if layout.text_check is not None:
        layout.text_check(r, ids, end, parts, spans)
        return result
    # Outside calls, structural tokens are spelled out: each is a marker between parts or,
    # sampled where the format has no place for it, text inside a part (never dropped).
    # The one exception is documented: with drafted_calls="call" a call drafted in open
    # reasoning ends it, and the </think> of that block, met in the text after the call,
    # is dropped as vLLM drops it (tests/test_drafted_calls.py); the text's span holds it.
    dropped = _dropped_think_ends(spec, r, ids, parts, spans)
    pieces: list[str] = []
    run: list[int] = []
    for k in range(end):
        t = ids[k]
        if k in dropped:
            continue
        if in_call[k] or t in structural:
            if run:
                pieces.append(r.table.decode(run))
                run = []
            if not in_call[k]:
                pieces.append(r.table.control_text(t) or "")
        else:
            run.append(t)
    if run:
        pieces.append(r.table.decode(run))
    outside = "".join(pieces)
    texts = [p.text for p in parts if isinstance(p, (TextPart, ThinkingPart)) and p.text]
    separators = [layout.separators] if layout.separators else []
    separators += (re.escape(r.table.control_text(t) or "") for t in sorted(structural))
    gap = f"(?:{'|'.join(separators)})*" if separators else ""
    pattern = gap + gap.join(map(re.escape, texts)) + gap
    assert re.fullmatch(pattern, outside, re.DOTALL), (texts, outside)
    return result


@spec_param
@given(data=st.data())
def test_random_token_ids_never_crash_and_lose_no_content(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    ids = data.draw(_token_soup(r))
    result = check_content(spec, r, ids)
    assert isinstance(result.termination, Termination)
    assert result == r.parse_response(ids)
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=4)))
    parser = r.stream_parser()
    previous = 0
    for cut in [*cuts, len(ids)]:
        parser.feed(ids[previous:cut])
        previous = cut
    assert parser.finish() == result
    count(f"fuzz [{spec!r}]")


@spec_param
@given(data=st.data())
def test_a_one_shot_parse_equals_feeding_the_ids(spec: Spec, data: st.DataObject) -> None:
    """``parse_response`` may read a whole completion on a format's one-shot path
    (``_parse_runs``); it must give what feeding the same ids then finishing gives, for
    rendered completions (the path's own cases) and random soups alike. Text is inserted
    at a random place, to reach past the few ids a one-shot parse leaves to the general
    path; ids go in as a list and as an array."""
    r = spec.renderer()
    if data.draw(st.booleans()):
        ids = completion_of(spec, r, data.draw(spec.messages))
    else:
        ids = data.draw(_token_soup(r))
    at = data.draw(st.integers(0, len(ids)))
    ending = data.draw(st.sampled_from(["", "\n", "\n\n", " "]))
    padding = r.table.encode(data.draw(strategies.text) + " lorem ipsum dolor" * 12 + ending)
    ids = ids[:at] + padding + ids[at:]
    structural = _structural(r)
    marks = [k for k, t in enumerate(ids) if t in structural and k >= 48]
    if marks and data.draw(st.booleans()):  # cut off just after a marker (past 48 ids)
        ids = ids[: data.draw(st.sampled_from(marks)) + 1 + data.draw(st.integers(0, 2))]
    parser = r.stream_parser(_events=False)
    parser.feed(tuple(ids))  # a tuple: never the one-shot path
    expected = parser.finish()
    assert r.parse_response(ids) == expected
    assert r.parse_response(np.array(ids, dtype=np.int64)) == expected
    assert r.parse_response(ArrayLike(ids)) == expected  # a tensor, say
    count(f"one-shot parse == fed [{spec!r}]")


class ArrayLike:
    """Token ids in an array type of another library (a PyTorch or JAX tensor): NumPy
    reads it through ``__array__``; it is no ``Sequence``."""

    def __init__(self, ids: Sequence[int], dtype: Any = np.int32) -> None:
        self._array = np.asarray(ids, dtype=dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._array if dtype is None else self._array.astype(dtype)


@spec_param
def test_text_then_any_marker_cut_off_parses_in_one_shot_as_fed(spec: Spec) -> None:
    """Text long enough for the one-shot path, then each structural token the parser
    knows, then nothing or one more token: what a completion cut off just after a marker
    looks like (an empty open region must still become its part when it is explicit)."""
    r = spec.renderer()
    text = r.table.encode(" lorem ipsum dolor" * 20)
    for t in sorted(_structural(r)):
        for tail in ([], text[:1]):
            ids = [*text, t, *tail]
            parser = r.stream_parser(_events=False)
            parser.feed(tuple(ids))  # a tuple: never the one-shot path
            assert r.parse_response(ids) == parser.finish(), r.table.control_text(t)


_JSON_WS = st.sampled_from(["", " ", "\n", "\t", "  ", "\r\n"])
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _json_call_spellings(draw: st.DrawFn) -> str:
    """Tool-call JSON as models write it and as they get it wrong: any whitespace, key
    order, escapes, extra or missing keys, and cut or damaged text."""
    ascii_only = draw(st.booleans())
    name = json.dumps(
        draw(st.from_regex(r"[a-z_.]{1,8}", fullmatch=True) | st.text(max_size=8)),
        ensure_ascii=ascii_only,
    )
    if draw(st.integers(0, 3)) == 0:  # written unescaped: control characters, quotes, \\
        name = '"' + draw(st.text(st.characters(max_codepoint=0x7F), max_size=6)) + '"'
    value = json.dumps(
        draw(_JSON_VALUES), ensure_ascii=ascii_only, indent=draw(st.sampled_from([None, 2]))
    )
    key = draw(st.sampled_from(["arguments", "arguments", "parameters", "args", "name"]))
    members = [
        f'"name"{draw(_JSON_WS)}:{draw(_JSON_WS)}{name}',
        f'"{key}"{draw(_JSON_WS)}:{draw(_JSON_WS)}{value}',
    ]
    if draw(st.integers(0, 3)) == 0:
        members.reverse()
    if draw(st.integers(0, 4)) == 0:
        members.append(f'"extra": {value}')
    if draw(st.integers(0, 4)) == 0:
        members.pop(0)
    raw = (
        draw(_JSON_WS)
        + "{"
        + draw(_JSON_WS)
        + f"{draw(_JSON_WS)},{draw(_JSON_WS)}".join(members)
        + draw(_JSON_WS)
        + "}"
        + draw(_JSON_WS)
    )
    if draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from(["", "}", "x", '"', "\\", "\x01", " "])) + raw[at:]
        raw = raw[: draw(st.integers(at, len(raw)))]
    return raw


@settings(max_examples=max(600, settings().max_examples))  # cheap; few reach the fast path
@given(
    raw=_json_call_spellings(), keys=st.sampled_from([("arguments",), ("arguments", "parameters")])
)
def test_json_tool_calls_read_on_the_fast_path_equal_the_member_scanner(
    raw: str, keys: tuple[str, ...]
) -> None:
    """Well-formed calls are read by one pattern and one value parse; every spelling must
    give the part (or the error) the general member scanner gives."""
    assert _json_call(raw, keys) == _scanned_json_call(raw, keys)
    count("json tool-call spellings")


_ASCII_TEXT = st.text(
    alphabet=st.one_of(st.characters(min_codepoint=32, max_codepoint=126), st.sampled_from("\n\t")),
    max_size=40,
)


@spec_param
@given(data=st.data())
def test_a_batch_of_markers_and_ascii_text_parses_as_streamed(
    spec: Spec, data: st.DataObject
) -> None:
    """A batch joins its text once and hands each run on as a slice of it (of the decoded
    text when it is all ASCII, else of the bytes): as a list, as an array and fed one token
    at a time, markers between runs of ASCII text (typed marker spellings included) parse
    alike, with every character kept. (The random soups are rarely all ASCII.)"""
    r = spec.renderer()
    structural = sorted(_structural(r))
    pieces = st.one_of(
        st.sampled_from(structural).map(lambda t: [t]), _ASCII_TEXT.map(r.table.encode)
    )
    chunks = data.draw(st.lists(pieces, min_size=10, max_size=60))
    ids = [t for c in chunks for t in c]
    result = check_content(spec, r, ids)
    assert r.parse_response(np.asarray(ids)) == result
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    count(f"ascii batch [{spec!r}]")


@spec_param
@given(data=st.data())
def test_parse_text_reads_a_completion_like_its_ids(spec: Spec, data: st.DataObject) -> None:
    """``parse_text`` of a completion's text (control tokens spelled out, as an API returns
    it) gives what parsing its ids gives, wherever the text encodes back to the same
    control tokens and text (typed control spellings in message text cannot)."""
    r = spec.renderer()
    if data.draw(st.booleans()):
        ids = data.draw(_token_soup(r))
    else:
        ids = completion_of(spec, r, data.draw(spec.messages))
    text = r.decode(ids)
    again = sampled_text_ids(r.table, text)
    controls = r.table.control_ids
    assume([t for t in ids if t in controls] == [t for t in again if t in controls])
    assume(r.decode(again) == text)
    expected = r.parse_response(ids)
    result = r.parse_text(text)
    assert result.message == expected.message
    assert result.termination == expected.termination
    assert result.trailing_text == expected.trailing_text
    assert [i.message for i in result.issues] == [i.message for i in expected.issues]
    count(f"parse_text [{spec!r}]")


@spec_param
@given(data=st.data())
def test_one_token_feeds_give_the_events_of_the_general_path(
    spec: Spec, data: st.DataObject
) -> None:
    """A one-token list takes the streaming hot path (the token's text written into the
    open part by ``feed`` itself); the same token in a tuple takes the general path (runs
    decoded and handed to the format). Every feed returns the same events either way."""
    r = spec.renderer()
    if data.draw(st.booleans()):
        ids = data.draw(_token_soup(r))
    else:
        ids = completion_of(spec, r, data.draw(spec.messages))
    hot, general = r.stream_parser(), r.stream_parser()
    for k, t in enumerate(ids):
        assert hot.feed([t]) == general.feed((t,)), (k, t)
    assert hot.finish() == general.finish()
    assert hot.final_events == general.final_events
    count(f"one-token feeds [{spec!r}]")


@spec_param
@given(data=st.data())
def test_feeds_of_a_few_tokens_give_the_events_of_the_general_path(
    spec: Spec, data: st.DataObject
) -> None:
    """A list of up to 16 ordinary tokens takes the hot path too (their texts joined and
    written at once); the same ids in a tuple take the general path. Every feed returns
    the same events either way."""
    r = spec.renderer()
    if data.draw(st.booleans()):
        ids = data.draw(_token_soup(r))
    else:
        ids = completion_of(spec, r, data.draw(spec.messages))
    sizes = data.draw(st.lists(st.integers(1, 17), min_size=1, max_size=20))
    hot, general = r.stream_parser(), r.stream_parser()
    k = 0
    for size in itertools.cycle(sizes):
        if k >= len(ids):
            break
        chunk = ids[k : k + size]
        assert hot.feed(list(chunk)) == general.feed(tuple(chunk)), (k, chunk)
        k += size
    assert hot.finish() == general.finish()
    assert hot.final_events == general.final_events
    count(f"few-token feeds [{spec!r}]")


def _part_deltas(r: Renderer, ids: list[int], size: int) -> tuple[ParseResult, dict[int, str]]:
    """The result of streaming ``ids`` in chunks of ``size`` and each part's deltas joined."""
    parser = r.stream_parser()
    events: list[Any] = []
    for k in range(0, len(ids), size):
        events += parser.feed(ids[k : k + size])
    result = parser.finish()
    events += parser.final_events
    deltas: dict[int, str] = {}
    for event in events:
        if isinstance(event, TextDelta):
            deltas[event.index] = deltas.get(event.index, "") + event.text
    return result, deltas


@spec_param
@given(data=st.data())
def test_deltas_spell_each_part(spec: Spec, data: st.DataObject) -> None:
    """For every feed size, the deltas of a part concatenate to exactly the text the final
    part carries: a text or thinking part's text, an unparsed call's raw text (separator
    markers included); a parsed call's deltas hold its arguments (and its name or id
    where the format writes them as text)."""
    r = spec.renderer()
    if data.draw(st.booleans()):
        ids = data.draw(_token_soup(r))
    else:
        ids = completion_of(spec, r, data.draw(spec.messages))
    for size in (1, 2, 3, 7, max(1, len(ids))):
        result, deltas = _part_deltas(r, ids, size)
        assert result == r.parse_response(ids)
        parser = r.stream_parser(_events=False)
        parser.feed(ids)
        parser.finish()
        for index, part in enumerate(p for p in parser.asm.parts if p is not None):
            got = deltas.get(index, "")
            if isinstance(part, (TextPart, ThinkingPart)):
                assert got == part.text, (size, index, got, part)
            elif isinstance(part, UnparsedToolCallPart):
                assert got == part.raw, (size, index, got, part)
            else:
                assert isinstance(part, ToolCallPart)
                if spec.layout.arguments_in_span:
                    assert part.arguments in got, (size, index, got, part)
                if spec.layout.verbatim_names and spec.layout.text_check is None:
                    # (Harmony writes the name in the header, not in the call's body)
                    assert (part.id or part.name) in got, (size, index, got, part)
    count(f"deltas spell parts [{spec!r}]")


# -- sharing between threads and processes ------------------------------------------------


def _fixed_messages(spec: Spec, n: int) -> list[Message]:
    out = []
    for k in range(n):
        parts: list[Part] = [ThinkingPart(f"thought {k} 🤔")] if spec.thinking else []
        if spec.text_with_calls or k % 3:
            parts.append(TextPart(f"answer {k} " * k + "日本語"))
        if k % 3 == 0:  # with the id the Kimi formats write (the others ignore it)
            arguments = json.dumps({"k": k, "q": "é"})
            parts.append(ToolCallPart("lookup", arguments, id=f"functions.lookup:{k}"))
        out.append(Message("assistant", parts))
    return out


MODELS = sorted({(s.model_id, s.name) for s in SPECS})
"""One renderer class per model id and name (the Qwen line shares Qwen3-8B's tokenizer)."""
MODEL_IDS = sorted({s.model_id for s in SPECS})
"""One tokenizer per model id (its first spec's renderer)."""


@pytest.mark.parametrize(("model_id", "name"), MODELS, ids=[f"{m}-{n}" for m, n in MODELS])
def test_renderers_can_be_pickled_and_shared_between_threads(model_id: str, name: str) -> None:
    """A renderer survives pickling (data-loader workers) by name, options and tokenizer
    source: small, and in a process that holds the tokenizer it gets the same token table
    back; the unpickled one is used by 8 threads at once: rendering, parsing and streaming
    with every option set of the model's specs give what the original renderer gives."""
    specs = [s for s in SPECS if s.model_id == model_id and s.name == name]
    r = specs[0].renderer()
    data = pickle.dumps(r)
    assert len(data) < 64 * 1024
    clone = pickle.loads(data)
    assert type(clone) is type(r) and clone.options == r.options
    assert clone.table is r.table
    conversation: list[Any] = [{"role": "user", "content": "Pickle me 🥒 <|im_end|>"}]
    work: list[tuple[dict[str, Any], Any, list[int], list[int], ParseResult]] = []
    for spec in specs:
        original = spec.renderer()
        for fixed in _fixed_messages(spec, 6):
            # Without the reasoning the option set's template would drop (an error).
            messages = trainable(
                original, [*conversation, fixed], spec.trained_reasoning, repr(spec)
            )
            message = messages[-1]
            example = original.build_supervised_example(messages)
            tokens, weights = example.tokens.tolist(), example.weights.tolist()
            ids = [t for t, w in zip(tokens, weights, strict=True) if w > 0]
            parsed = original.parse_response(ids)
            work.append((dict(spec.options), message, tokens, weights, parsed))
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def run(offset: int) -> None:
        try:
            barrier.wait()
            for round_ in range(len(work)):
                options, message, tokens, weights, parsed = work[(offset + round_) % len(work)]
                example = clone.build_supervised_example([*conversation, message], **options)
                assert example.tokens.tolist() == tokens
                assert example.weights.tolist() == weights
                ids = [t for t, w in zip(tokens, weights, strict=True) if w > 0]
                assert clone.parse_response(ids, **options) == parsed
                parser = clone.stream_parser(**options)
                for t in ids:
                    parser.feed([t])
                assert parser.finish() == parsed
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    text = "".join(sorted(r.table.control_tokens)) + " text"
    assert clone.table.encode(text) == r.table.encode(text)


def test_report_example_counts() -> None:
    """Runs last in this module: shows how many examples each property ran."""
    for name, n in sorted(EXAMPLE_COUNTS.items()):
        print(f"{n:6d}  {name}")
    assert EXAMPLE_COUNTS


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_trailing_text_is_decoded_when_read_and_results_keep_value_semantics(
    model_id: str,
) -> None:
    """Ids after the stop token are trailing: their text is their decoded text whether
    read before or after comparing, hashing, pickling or replacing the result (the text is
    decoded on first read); the same ids as a list, a NumPy array or fed one at a time give
    equal results."""
    spec = next(s for s in SPECS if s.model_id == model_id)
    r = spec.renderer()
    tail = [*r.table.encode(" after the stop ✨ "), *r.stop_token_ids[:1], 7, 8, 9]
    message = _fixed_messages(spec, 1)[0]
    conversation: list[Any] = [{"role": "user", "content": "hi"}, message]
    messages = trainable(r, conversation, spec.trained_reasoning, repr(spec))
    example = r.build_supervised_example(messages)
    ids = [t for t, w in zip(example.tokens.tolist(), example.weights.tolist(), strict=True) if w]
    ids += tail * 30  # a long tail, so the batch path sees it
    results = [r.parse_response(ids) for _ in range(6)]
    if not results[0].trailing_ids:  # the format's stop is not the tokenizer's
        pytest.skip("no trailing ids for this format")
    start = len(ids) - len(results[0].trailing_ids)
    expected = r.decode(ids[start:])
    assert expected.count(" after the stop ✨ ") >= 29
    a, b, c, d, e = results[:5]
    assert a == b and hash(a) == hash(b)
    assert pickle.loads(pickle.dumps(c)) == a
    assert dataclasses.replace(d, spans=d.spans) == a
    assert f"trailing_text={expected!r}" in repr(e)
    for result in results:
        assert result.trailing_text == expected
    assert r.parse_response(np.asarray(ids)) == a
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == a


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_a_long_tail_after_the_stop_is_read_on_demand_with_value_semantics(
    model_id: str,
) -> None:
    """A tail after the stop token longer than a batch (so the parser keeps it as it came,
    an array as its own copy): ``trailing_ids`` and ``trailing_text`` are the tail's ids
    and text whichever is read first, whether the ids came as a list, an array (changed
    after parsing) or in feeds, and after pickling or comparing an unread result."""
    spec = next(s for s in SPECS if s.model_id == model_id)
    r = spec.renderer()
    stop = r.stop_token_ids[0]
    message = [*r.table.encode(" a short answer"), stop]
    tail = r.table.encode(" after the stop ✨ and more text" * 4000)[:20_000]
    ids = [*message, *tail]
    first = r.parse_response(ids)
    if first.stop_token_id != stop:  # the format reads that token as text
        pytest.skip("the format's stop token is not the tokenizer's first stop id")
    expected_ids, expected_text = tuple(tail), r.decode(tail)
    array = np.asarray(ids)
    results = [first, r.parse_response(array), r.parse_response(ids), r.parse_response(ids)]
    array[len(message) :] = 0  # the caller's array is theirs again
    parser = r.stream_parser()
    for k in range(0, len(ids), 7000):
        parser.feed(ids[k : k + 7000])
    results.append(parser.finish())
    unread = pickle.loads(pickle.dumps(r.parse_response(np.asarray(ids))))
    assert unread == results[3]
    assert results[0].trailing_text == expected_text
    assert results[0].trailing_ids == expected_ids
    for result in results[1:]:
        assert result.trailing_ids == expected_ids
        assert result.trailing_text == expected_text
    assert unread.trailing_ids == expected_ids and unread.trailing_text == expected_text
    # A token that ends the message (another turn's start) trails before the tail.
    text = r.table.encode(" a short answer")
    for t in sorted(_structural(r)):
        ids = [*text, t, *tail]
        for as_given in (ids, np.asarray(ids)):
            result = r.parse_response(as_given)
            if len(result.trailing_ids) == len(tail) + 1:  # the format ended at t
                assert result.trailing_ids == (t, *tail)
                assert result.trailing_text == r.decode([t, *tail])


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_a_long_run_of_text_parses_as_streamed(model_id: str) -> None:
    """A run of text longer than the parser decodes at once (its pieces split multi-byte
    characters) gives, in one batch, as a list or an array, what one-token feeds give, and
    the message keeps every sampled character."""
    spec = next(s for s in SPECS if s.model_id == model_id)
    r = spec.renderer()
    text = "".join(f"line {k}: naïve café 日本語 🎉 ∑ {'x' * (k % 7)}\n" for k in range(4000))
    message = Message("assistant", [TextPart(text.strip())])
    conversation: list[Any] = [{"role": "user", "content": "hi"}, message]
    messages = trainable(r, conversation, spec.trained_reasoning, repr(spec))
    example = r.build_supervised_example(messages)
    ids = [t for t, w in zip(example.tokens.tolist(), example.weights.tolist(), strict=True) if w]
    assert len(r.decode(ids).encode()) > 2 * 65536
    batch = r.parse_response(ids)
    assert r.parse_response(np.asarray(ids)) == batch
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == batch
    texts = [p.text for p in batch.message.parts if isinstance(p, (TextPart, ThinkingPart))]
    assert text.strip() in "".join(texts)


@spec_param
@given(data=st.data())
def test_a_prefill_parses_as_the_ids_it_writes_followed_by_the_completion(
    spec: Spec, data: st.DataObject
) -> None:
    """``prefill=text`` reads what the format writes for it (``_prefill_ids``) before the
    completion: the result of parsing those ids then the completion, with spans and issue
    positions counted from the completion's first id; one shot, token by token and in
    random chunks alike."""
    r = spec.renderer()
    text = data.draw(strategies.text.filter(bool))
    if data.draw(st.booleans()):
        ids = completion_of(spec, r, data.draw(spec.messages))
    else:
        ids = data.draw(_token_soup(r))
    before = r._prefill_ids(text, r.options)
    whole = r.parse_response(before + ids)
    result = r.parse_response(ids, prefill=text)
    k = len(before)
    assert result.message == whole.message
    assert result.termination == whole.termination
    assert (result.stop_token_id, result.trailing_ids) == (whole.stop_token_id, whole.trailing_ids)
    assert result.spans == tuple((max(a - k, 0), max(b - k, 0)) for a, b in whole.spans)
    assert [(max(i.position - k, 0), i.message) for i in whole.issues] == [
        (i.position, i.message) for i in result.issues
    ]
    parser = r.stream_parser(prefill=text)
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=4)))
    parser = r.stream_parser(prefill=text)
    previous = 0
    for cut in [*cuts, len(ids)]:
        parser.feed(ids[previous:cut])
        previous = cut
    assert parser.finish() == result
    count(f"prefill == its ids then the completion [{spec!r}]")
