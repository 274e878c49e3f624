"""Tool-call grammars that several formats share, run by the parsing engine.

- **Calls in paired tags** (:class:`TaggedParser`): text, think blocks and tool calls
  between paired control tokens, in any order. The body of a call is JSON
  ``{"name": ..., "arguments": ...}`` as Qwen3 and Hermes write it
  (:func:`json_call_builder`), or function/parameter XML as Qwen3-Coder writes it
  (:func:`xml_call_builder`)::

      <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>

- **Bare JSON calls** (:class:`BareJsonParser`): a message that is nothing but a JSON object
  ``{"name": ..., "arguments"|"parameters": {...}}`` (or a JSON list of them) is a tool
  call, as Llama 3.1 writes them; any other message is text.

Reasoning ends only at its closing marker: a call drafted inside open reasoning stays
reasoning text (reported as an issue), and a control token out of place is kept as text
with an issue, so no sampled character is lost. A parser made with ``calls_end_reasoning``
reads such a call as inference servers' Qwen3 parsers do instead (see
:class:`TaggedParser`).

A :class:`TagGrammar` holds the token ids and the separators a template writes around
parts (Qwen3: ``<think>\\n...\\n</think>\\n\\n``, ``\\n`` before a call), which the parser
removes so a parsed message renders back to the same ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from renderers.core.assembly import (
    TEXT,
    THINKING,
    TOOL_CALL,
    ToolCallBuilder,
    json_object_members,
    without_prefix,
)
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import Part, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseResult
from renderers.core.scanning import MarkerScanner
from renderers.core.tokens import TokenTable

__all__ = [
    "BareJsonParser",
    "TagGrammar",
    "TaggedParser",
    "bare_json_calls",
    "glm_call_builder",
    "json_call_builder",
    "xml_call_builder",
]


@dataclass(frozen=True, slots=True)
class TagGrammar:
    """The tokens and separators of a format whose completions hold text, think blocks and
    tool calls between paired control tokens (``None``: the format has no such part).

    ``ends_message`` are tokens that begin another turn: sampled before a stop token, they
    end the message as malformed. ``build_call`` turns a call's raw body into a part; a
    grammar with ``call`` and no ``call_end`` reads a call up to the stop token (Llama 3's
    ``<|python_tag|>`` ... ``<|eom_id|>``).
    """

    stop: tuple[int, ...]
    eos: tuple[int, ...] = ()
    ends_message: tuple[int, ...] = ()
    think: int | None = None
    think_end: int | None = None
    call: int | None = None
    call_end: int | None = None
    build_call: ToolCallBuilder | None = None
    think_padding: str = ""
    """Written inside a think block on both sides (Qwen3: ``"\\n"``)."""
    think_end_padding: str | None = None
    """Written before the think block's closing marker where it is not ``think_padding``
    (Nemotron-3 Ultra: ``""``, after ``<think>\\n``)."""
    after_think: str = ""
    """Written between a think block and the text after it (Qwen3: ``"\\n\\n"``)."""
    before_call: str = ""
    """Written before a call's opening tag after text or another call (Qwen3: ``"\\n"``)."""
    after_calls: str = ""
    """Written after the last call, before the stop token (Nemotron-3: ``"\\n"``)."""

    _structural: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = (self.think, self.think_end, self.call, self.call_end, *self.ends_message)
        object.__setattr__(self, "_structural", tuple(t for t in ids if t is not None))

    def structural(self) -> tuple[int, ...]:
        """The ids the parser reacts to (besides stop and end-of-sequence ids)."""
        return self._structural

    @property
    def closing_padding(self) -> str:
        """What is written before the think block's closing marker."""
        return self.think_padding if self.think_end_padding is None else self.think_end_padding

    @property
    def after_call_holdback(self) -> str:
        """The tail held back in text after a call: it may be the separator before the
        next call, or what follows the last one."""
        longer = len(self.after_calls) > len(self.before_call)
        return self.after_calls if longer else self.before_call


class TaggedParser(StreamParser):
    """Completions of a :class:`TagGrammar`: text, think blocks and tool calls in any order.

    ``opens_reasoning``: the generation prompt ended with the think marker, so the
    completion starts inside the reasoning; ``reasoning_prefix`` is the padding the prompt
    did not write yet (removed from the start of the reasoning).

    ``calls_end_reasoning``: a call opened inside open reasoning ends the reasoning there
    and is a call (vLLM's Qwen3 parser: ``<tool_call>`` is an implicit end of reasoning);
    the think block's own closing marker, sampled later, is dropped from the text around
    it, as vLLM drops it from the content (no issue for either).
    """

    def __init__(
        self,
        grammar: TagGrammar,
        table: TokenTable,
        events: bool,
        *,
        opens_reasoning: bool = False,
        reasoning_prefix: str = "",
        calls_end_reasoning: bool = False,
    ) -> None:
        super().__init__(
            table,
            structural=grammar.structural(),
            stop_ids=grammar.stop,
            eos_ids=grammar.eos,
            events=events,
        )
        self._g = grammar
        self._name = table.control_text
        self._opens_reasoning = opens_reasoning
        self._reasoning_prefix = reasoning_prefix
        self._calls_end_reasoning = calls_end_reasoning
        self._ended_by_call = False  # a call ended the open reasoning; its end may follow
        self._after_call = False  # the open text follows a call (its tail may be after_calls)
        asm = self.asm
        self._on_text = asm.write  # type: ignore[method-assign]
        if opens_reasoning:
            asm.open(
                THINKING,
                0,
                strip_prefix=reasoning_prefix,
                holdback=grammar.closing_padding,
                explicit=True,
            )
        else:
            asm.open(TEXT, 0, holdback=grammar.before_call)

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return True, None  # text goes to the assembler as it comes

    def _build(self, segments: list[str], incomplete: bool) -> Part:
        build = self._g.build_call
        assert build is not None, "a tool-call region needs the grammar's call builder"
        return build(segments, incomplete)

    def _on_token(self, token_id: int, pos: int) -> None:
        g = self._g
        asm = self.asm
        kind = asm.kind
        name = self._name  # a token's spelling, for issues only
        if kind == THINKING and token_id in (g.call, g.call_end):
            if token_id == g.call and self._calls_end_reasoning:
                asm.close(pos, strip_suffix=g.closing_padding)
                asm.open(TOOL_CALL, pos)
                self._ended_by_call = True
                return
            self._drafted_call(token_id, pos)
            return
        if token_id == g.think_end and kind == TEXT and self._ended_by_call:
            # The end of the think block a call ended: the server drops it from the text.
            self._ended_by_call = False
            return
        if token_id == g.think:
            self._ended_by_call = False
            if kind == THINKING:
                self._keep_as_text(
                    token_id, pos, f"{name(token_id)} inside an open think block (kept as text)"
                )
                return
            if kind == TOOL_CALL:
                self._issue(pos, f"{name(token_id)} inside a tool call (the call is cut there)")
                asm.close(pos, incomplete=True, build=self._build)
            else:
                asm.close(pos)
            self._after_call = False
            asm.open(
                THINKING,
                pos,
                strip_prefix=g.think_padding,
                holdback=g.closing_padding,
                explicit=True,
            )
        elif token_id == g.think_end:
            if kind != THINKING:
                self._keep_as_text(
                    token_id, pos, f"{name(token_id)} without an open think block (kept as text)"
                )
                return
            asm.close(pos + 1, strip_suffix=g.closing_padding)
            self._after_call = False
            asm.open(TEXT, pos + 1, strip_prefix=g.after_think, holdback=g.before_call)
        elif token_id == g.call:
            if kind == TOOL_CALL:
                self._issue(pos, f"{name(token_id)} inside a tool call (the call is cut there)")
                asm.close(pos, incomplete=True, build=self._build)
            else:
                asm.close(pos, strip_suffix=g.before_call)
            asm.open(TOOL_CALL, pos)
        elif token_id == g.call_end:
            if kind != TOOL_CALL:
                self._keep_as_text(
                    token_id, pos, f"{name(token_id)} without an open tool call (kept as text)"
                )
                return
            asm.close(pos + 1, build=self._build)
            self._after_call = True
            asm.open(TEXT, pos + 1, holdback=g.after_call_holdback)
        else:  # a token that begins another turn
            stop = self._name(g.stop[0]) if g.stop else "a stop token"
            self._issue(pos, f"{name(token_id)} before {stop}: the message ends here")
            self._end_message(pos)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse of a completion whose tags are in order (each think block
        and call closed before the next opens, nothing left open at the stop token): the
        parts :meth:`_on_token` and the assembler make, each region's text being one run
        (its separators stripped once, as the assembler strips them across writes).
        Anything else (an issue to report) takes the general path."""
        g = self._g
        texts = runs.texts
        cuts = runs.cuts
        ends = self._stop_ids | self._eos_ids
        parts: list[Part | None] = []
        spans: list[tuple[int, int]] = []
        if self._opens_reasoning:
            kind, prefix, explicit = THINKING, self._reasoning_prefix, True
        else:
            kind, prefix, explicit = TEXT, "", False
        start = 0
        stop_id = None
        after_call = False
        j = -1
        for j, t in enumerate(runs.tokens):
            pos = cuts[j]
            if t == g.call_end:
                if kind != TOOL_CALL:
                    return None
                parts.append(self._build([texts[j]], False))
                spans.append((start, pos + 1))
                kind, start, prefix, explicit = TEXT, pos + 1, "", False
                after_call = True
                continue
            if kind == TOOL_CALL:
                return None
            text = without_prefix(texts[j], prefix) if prefix else texts[j]
            if t == g.think:
                if kind != TEXT:
                    return None
                if text:
                    parts.append(TextPart(text))
                    spans.append((start, pos))
                kind, start, prefix, explicit = THINKING, pos, g.think_padding, True
                after_call = False
            elif t == g.think_end:
                if kind != THINKING:
                    return None
                text = text.removesuffix(g.closing_padding)
                if text:
                    parts.append(ThinkingPart(text))
                    spans.append((start, pos + 1))
                kind, start, prefix, explicit = TEXT, pos + 1, g.after_think, False
            elif t == g.call:
                if kind != TEXT:
                    return None
                text = text.removesuffix(g.before_call)
                if text:
                    parts.append(TextPart(text))
                    spans.append((start, pos))
                kind, start = TOOL_CALL, pos
            elif t in ends and kind == TEXT:
                if after_call:
                    text = text.removesuffix(g.after_calls)
                if text:
                    parts.append(TextPart(text))
                    spans.append((start, pos))
                stop_id = t
                break
            else:  # stopped inside a think block or a call, or a token of another turn
                return None
        if stop_id is None:  # cut off: what is open is incomplete
            text = texts[j + 1]
            end = runs.count
            if kind == TOOL_CALL:
                parts.append(self._build([text], True))
                spans.append((start, end))
            else:
                text = without_prefix(text, prefix) if prefix else text
                if text or explicit:
                    cut = ThinkingPart if kind == THINKING else TextPart
                    parts.append(cut(text, None, True))
                    spans.append((start, end))
        return self._one_shot_result(runs, parts, spans, None if stop_id is None else j)

    def _on_end(self, pos: int, stopped: bool) -> None:
        asm = self.asm
        if stopped and asm.kind == THINKING:
            self._issue(pos, "the message ended inside an open think block")
        elif stopped and asm.kind == TOOL_CALL and self._g.call_end is not None:
            # (A grammar without ``call_end`` ends a call at the stop token: Llama's
            # ``<|python_tag|>`` call, which ``<|eom_id|>`` ends.)
            close = self._name(self._g.call_end)
            self._issue(pos, f"the message ended inside a tool call (no {close})")
        strip = self._g.after_calls if stopped and asm.kind == TEXT and self._after_call else ""
        asm.close(pos, strip_suffix=strip, incomplete=not stopped, build=self._build)


# -- JSON in tags ----------------------------------------------------------------------------

_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _visible_name(raw: str) -> str | None:
    match = _NAME.search(raw)
    if match is None:
        return None
    try:
        name = json.loads('"' + match.group(1) + '"')
    except ValueError:
        return None
    return name if isinstance(name, str) else None


_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*?)\s*\}\s*\Z', re.S)


def _visible_arguments(raw: str) -> str | None:
    """The text after ``"arguments":`` up to the object's closing brace, as sampled (the
    arguments OpenAI would report for a call whose JSON is invalid)."""
    match = _ARGUMENTS.search(raw)
    return match.group(1) if match else None


# The common spelling, read without the general member scanner: ``{"name": "NAME",
# "KEY": `` with a name and key free of escapes (JSON whitespace only, no control
# characters), then one JSON value and the closing brace.
_CALL_HEAD = re.compile(
    r'[ \t\n\r]*\{[ \t\n\r]*"name"[ \t\n\r]*:[ \t\n\r]*"([^"\\\x00-\x1f]*)"'
    r'[ \t\n\r]*,[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*'
)
_CALL_TAIL = re.compile(r"[ \t\n\r]*\}[ \t\n\r]*\Z")
_VALUE = json.JSONDecoder().raw_decode


def _json_call(raw: str, keys: tuple[str, ...], with_id: bool = False) -> Part:
    """``{"name": NAME, KEY: ARGS}`` (KEY one of ``keys``; ``with_id``: and an optional
    ``"id": ID`` member, Mistral's) -> a tool call whose arguments are the raw JSON text of
    ARGS as sampled."""
    head = _CALL_HEAD.match(raw)
    if head is not None and head.group(2) in keys:
        at = head.end()
        try:
            end = _VALUE(raw, at)[1]
        except ValueError as exc:  # the member scanner fails at the same value, alike
            return _invalid_json_call(raw, exc)
        if _CALL_TAIL.match(raw, end):
            return ToolCallPart(head.group(1), raw[at:end])
    return _scanned_json_call(raw, keys, with_id)


def _invalid_json_call(raw: str, exc: ValueError) -> Part:
    return UnparsedToolCallPart(
        raw, f"invalid JSON: {exc}", name=_visible_name(raw), arguments=_visible_arguments(raw)
    )


def _scanned_json_call(raw: str, keys: tuple[str, ...], with_id: bool = False) -> Part:
    """:func:`_json_call` by the general member scanner (any spelling, and the errors)."""
    try:
        members = json_object_members(raw)
    except ValueError as exc:
        return _invalid_json_call(raw, exc)
    names = [k for k, _, _ in members]
    fields = {k: (v, text) for k, v, text in members}
    key = next((k for k in keys if k in fields), keys[0])
    call_id = fields.get("id", (None, ""))[0] if with_id else None
    if call_id is not None and isinstance(call_id, str):
        names = [k for k in names if k != "id"]
    if sorted(names) != sorted(["name", key]):
        expected = " or ".join(f'{{"name": ..., "{k}": ...}}' for k in keys)
        return UnparsedToolCallPart(
            raw, f"expected {expected}, got keys {names}", name=_visible_name(raw)
        )
    name = fields["name"][0]
    if not isinstance(name, str):
        return UnparsedToolCallPart(raw, "the tool-call name is not a string")
    return ToolCallPart(name, fields[key][1], id=call_id)


def json_call_builder(close: str) -> ToolCallBuilder:
    """Builds a call from ``{"name": ..., "arguments": ...}`` between tags (``close`` is the
    closing tag's spelling, named when a call is cut off)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        if incomplete:
            return UnparsedToolCallPart(
                raw, f"cut off before {close}", name=_visible_name(raw), incomplete=True
            )
        return _json_call(raw, ("arguments",))

    return build


# -- XML function/parameter in tags (Qwen3-Coder) ---------------------------------------------

_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>\n?(.*?)</function>\s*\Z", re.S)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>\s*", re.S)
_OPEN_FUNCTION = re.compile(r"<function=([^>\n]+)>")


_PYTHON_SCALARS = {"True": "true", "False": "false", "None": "null"}


def _parameter_value(text: str, python_scalars: bool = False) -> str:
    """A parameter's JSON text: a JSON number, boolean, null, object or array as written;
    any other text is a string (the format writes strings raw). ``python_scalars``:
    ``True``, ``False`` and ``None`` are the JSON constants (a template writing scalars
    with Python's ``str``)."""
    if python_scalars and text in _PYTHON_SCALARS:
        return _PYTHON_SCALARS[text]
    try:
        value = json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text


def xml_call_builder(close: str, *, python_scalars: bool = False) -> ToolCallBuilder:
    """Builds a call from Qwen3-Coder's XML (``<function=NAME>`` with ``<parameter=KEY>``
    children). Arguments become a JSON object with default separators; values that parse
    as JSON numbers, booleans, null, objects or arrays keep their text, others are strings
    (the format does not say which a value was: ``"42"`` reads back as the number 42).
    ``python_scalars``: ``True``/``False``/``None`` are ``true``/``false``/``null``."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        opened = _OPEN_FUNCTION.search(raw)
        name = opened.group(1) if opened else None
        if incomplete:
            return UnparsedToolCallPart(raw, f"cut off before {close}", name=name, incomplete=True)
        function = _FUNCTION.match(raw)
        if function is None:
            return UnparsedToolCallPart(raw, "expected <function=NAME>...</function>", name=name)
        body = function.group(2)
        members: list[str] = []
        at = len(body) - len(body.lstrip())
        for parameter in _PARAMETER.finditer(body, at):
            if parameter.start() != at:
                break
            key = json.dumps(parameter.group(1), ensure_ascii=False)
            members.append(f"{key}: {_parameter_value(parameter.group(2), python_scalars)}")
            at = parameter.end()
        if body[at:].strip():
            return UnparsedToolCallPart(
                raw, f"unexpected text in the function body: {body[at : at + 40]!r}", name=name
            )
        return ToolCallPart(function.group(1), "{" + ", ".join(members) + "}")

    return build


# -- bare JSON ---------------------------------------------------------------------------------


# -- GLM's key/value calls in tags --------------------------------------------------------------

_GLM_CALL = re.compile(r"\s*([^<>\s][^<>]*?)\s*((?:<arg_key>.*)?)\Z", re.S)
_GLM_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>\s*", re.S)


def glm_call_builder(close: str) -> ToolCallBuilder:
    """Builds a call from GLM's ``NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...``
    (the tags are control tokens, read here by their spelling). Arguments become a JSON
    object with default separators; a value that is JSON other than a string keeps its
    text, any other value is a string (GLM writes strings raw, other values as JSON)."""

    def build(segments: list[str], incomplete: bool) -> Part:
        raw = segments[0]
        head = _GLM_CALL.match(raw)
        name = head.group(1) if head else None
        if incomplete:
            return UnparsedToolCallPart(raw, f"cut off before {close}", name=name, incomplete=True)
        if head is None:
            return UnparsedToolCallPart(raw, "expected NAME<arg_key>...", name=None)
        body = head.group(2)
        members: list[str] = []
        at = 0
        for argument in _GLM_ARGUMENT.finditer(body):
            if argument.start() != at:
                break
            key = json.dumps(argument.group(1), ensure_ascii=False)
            members.append(f"{key}: {_parameter_value(argument.group(2))}")
            at = argument.end()
        if body[at:]:
            return UnparsedToolCallPart(
                raw, f"unexpected text in the call: {body[at : at + 40]!r}", name=name
            )
        return ToolCallPart(head.group(1), "{" + ", ".join(members) + "}")

    return build


# -- bare JSON ---------------------------------------------------------------------------------


def bare_json_calls(text: str) -> list[Part] | None:
    """The tool calls ``text`` is, when it is nothing but a JSON call object
    ``{"name": ..., "arguments"|"parameters": {...}}`` or a JSON list of them; else ``None``."""
    calls = _bare_json_calls(text)
    return None if calls is None else [call for call, _ in calls]


def _bare_json_calls(text: str, with_id: bool = False) -> list[tuple[Part, str]] | None:
    """:func:`bare_json_calls` with each call's JSON text as sampled (``with_id``: calls may
    hold an ``"id"``)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    if stripped[0] == "{":
        call = _json_call(stripped, ("arguments", "parameters"), with_id)
        return [(call, stripped)] if type(call) is ToolCallPart else None
    try:
        items = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(items, list) or not items:
        return None
    calls: list[tuple[Part, str]] = []
    decoder = json.JSONDecoder()
    at = 1
    for _ in items:  # re-read each element's text so arguments stay as written
        while stripped[at] in " \t\r\n,":
            at += 1
        _, end = decoder.raw_decode(stripped, at)
        call = _json_call(stripped[at:end], ("arguments", "parameters"), with_id)
        if type(call) is not ToolCallPart:
            return None
        calls.append((call, stripped[at:end]))
        at = end
    return calls


class BareJsonParser(TaggedParser):
    """Completions whose text may be a bare JSON tool call (see :func:`bare_json_calls`).

    A text region whose first non-whitespace character is ``{`` or ``[`` is held back until
    it ends: then it is the calls it spells or, if it spells none (or was cut off), text.
    Other text streams as it comes. Think blocks work as in :class:`TaggedParser`.

    ``calls_after_call_token`` (Mistral's ``[TOOL_CALLS][{"name": ..., "arguments": ...,
    "id": ...}]``): the grammar's call token opens such a region whatever it holds (calls
    may carry an ``"id"``), and a body that spells no calls is an unparsed call;
    ``text_calls=False``: text regions are only ever text.
    """

    def __init__(
        self,
        grammar: TagGrammar,
        table: TokenTable,
        events: bool,
        *,
        opens_reasoning: bool = False,
        reasoning_prefix: str = "",
        calls_end_reasoning: bool = False,
        calls_after_call_token: bool = False,
        text_calls: bool = True,
    ) -> None:
        super().__init__(
            grammar,
            table,
            events,
            opens_reasoning=opens_reasoning,
            reasoning_prefix=reasoning_prefix,
            calls_end_reasoning=calls_end_reasoning,
        )
        self._write = self.asm.write
        self._on_text = self._text  # type: ignore[method-assign]
        self._held = ""  # the open text region's text while it may be a JSON call
        self._undecided: bool | None = None if text_calls else False
        self._json = self._undecided  # None: undecided until a non-whitespace character
        self._forced = False  # the region follows the call token (calls_after_call_token)
        self._after_call = calls_after_call_token
        self._region_start = 0

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return False, None  # text may be held back as a JSON call

    # Text regions may be calls: the general path (not even split for the one-shot one).
    _parse_runs = StreamParser._parse_runs

    def _text(self, text: str) -> None:
        if self.asm.kind != TEXT or self._json is False:
            self._write(text)
            return
        self._held += text
        if self._json is None:
            body = self._held.lstrip()
            if body:
                self._json = body[0] in "{["
                if not self._json:
                    self._write(self._held)
                    self._held = ""

    def _settle(self, pos: int, stopped: bool) -> None:
        """The open text region ends at ``pos``: its held text is the calls it spells, or
        text."""
        held, self._held, json_like, self._json = self._held, "", self._json, self._undecided
        forced, self._forced = self._forced, False
        calls = _bare_json_calls(held, forced) if json_like and stopped else None
        asm = self.asm
        if calls is None and forced:
            error = "expected a JSON list of calls" if stopped else "cut off before the stop token"
            calls = [(UnparsedToolCallPart(held, error, incomplete=not stopped), held)]
        elif calls is None:
            self._write(held)
            return
        asm.close(pos)
        for call, raw in calls:
            asm.add(call, self._region_start, pos, raw)
        asm.open(TEXT, pos)

    def _on_token(self, token_id: int, pos: int) -> None:
        if self.asm.kind == TEXT:
            self._settle(pos, True)
        if self._after_call and token_id == self._g.call and self.asm.kind == TEXT:
            self.asm.close(pos)
            self.asm.open(TEXT, pos + 1)
            self._forced, self._json, self._region_start = True, True, pos
            return
        super()._on_token(token_id, pos)
        if self.asm.kind == TEXT:
            self._region_start = pos + 1

    def _on_end(self, pos: int, stopped: bool) -> None:
        if self.asm.kind == TEXT:
            self._settle(pos, stopped)
        super()._on_end(pos, stopped)
