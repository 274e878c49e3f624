"""Harmony completions as message parts: the grammar record and its parser.

A completion is sampled after ``<|start|>assistant`` and read by the one Harmony state
machine (:class:`harmony.parser.HarmonyMachine`), for a whole completion and for one fed
in pieces alike; a sink turns each message into a part, in sampled order:

- ``analysis`` -> ``ThinkingPart``; ``final`` -> ``TextPart``; ``commentary`` without a
  recipient (a preamble) -> ``TextPart(channel="commentary")``. A part keeps its channel
  only when it is not its kind's default (so a plain answer parses to a ``str``);
- a message to ``functions.NAME`` -> ``ToolCallPart(NAME, raw arguments, channel,
  content_type)``, the content type as sampled (``json`` or ``<|constrain|>json``); a
  built-in recipient (``browser.search``, ``python``, ``container.*``) names the call in
  full. Arguments that should be JSON and are not, and calls cut off before ``<|call|>``,
  are ``UnparsedToolCallPart``;
- header words that are none of its fields are kept as text before the body (reported);
- a message of another role ends the assistant's message where its header began: its ids
  and all after them are trailing.

``<|return|>`` and ``<|call|>`` stop sampling; ``<|endoftext|>`` ends the sequence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harmony.messages import CHANNELS, HarmonyTokens
from harmony.parser import HarmonyMachine, Header
from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, Event
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import Part, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseResult
from renderers.core.scanning import StructuralIds, structural_ids
from renderers.core.tokens import TokenTable, int_ids
from renderers.core.writer import TokenWriter

__all__ = [
    "HarmonyGrammar",
    "HarmonyPartsParser",
    "closing_ids",
    "harmony_grammar",
    "prefill_ids",
    "recipient_of",
    "tool_name_of",
    "write_prefill",
]

_BUILTIN_PREFIXES = ("browser.", "container.")


@dataclass(frozen=True, slots=True)
class HarmonyGrammar:
    """What a Harmony parser reads: the control ids, the author whose header the
    completion starts in, and the channels it knows (any other is kept, reported)."""

    tokens: HarmonyTokens
    role: str = "assistant"
    valid_channels: tuple[str, ...] | None = CHANNELS
    _ids: dict[TokenTable, StructuralIds] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    """Per table: the structural tables its parsers read, made once (:meth:`ids_in`)."""

    def ids_in(self, table: TokenTable) -> StructuralIds:
        """The ids a parser of this grammar reacts to over ``table`` (every control token;
        the stops and the end of sequence), with their tables: made at the first parser."""
        found = self._ids.get(table)
        if found is None:
            structural = tuple(sorted(table.control_ids))
            found = self._ids[table] = structural_ids(table, structural, self.stop, self.eos)
        return found

    @property
    def stop(self) -> tuple[int, int]:
        """The ids that stop sampling: ``<|return|>`` (an answer), ``<|call|>`` (a call)."""
        return self.tokens.return_, self.tokens.call

    @property
    def eos(self) -> tuple[int]:
        return (self.tokens.end_of_text,)

    @property
    def stop_ids(self) -> tuple[int, ...]:
        return (*self.stop, *self.eos)


def harmony_grammar(table: TokenTable) -> HarmonyGrammar:
    """The Harmony grammar of ``table`` (``KeyError`` if it lacks a Harmony token)."""
    return HarmonyGrammar(HarmonyTokens.of(table))


def tool_name_of(recipient: str) -> str:
    """The tool-call name for a recipient (``functions.x`` -> ``x``; built-ins kept)."""
    return recipient[10:] if recipient.startswith("functions.") else recipient


def recipient_of(name: str) -> str:
    """The recipient a tool call by ``name`` is addressed to (the inverse)."""
    if name == "python" or name.startswith(_BUILTIN_PREFIXES):
        return name
    return "functions." + name


def closing_ids(grammar: HarmonyGrammar, result: ParseResult) -> tuple[int, list[int]]:
    """How history continues a parsed completion: how many of its last ids it replaces
    (a final answer's ``<|return|>`` or ``<|endoftext|>`` is written ``<|end|>``) and the
    ids it closes the turn with (``<|call|>`` after a cut-off call, else ``<|end|>``)."""
    tk = grammar.tokens
    if result.stop_token_id in (tk.return_, tk.end_of_text):
        return 1, [tk.end]
    if result.stop_token_id == tk.call:
        return 0, []
    last = result.message.parts[-1] if result.message.parts else None
    if type(last) is UnparsedToolCallPart and last.incomplete:
        return 0, [tk.call]
    return 0, [tk.end]


def write_prefill(w: TokenWriter, grammar: HarmonyGrammar, prefill: str, channel: str) -> None:
    """A prefill after the prompt's ``<|start|>assistant``:
    ``<|channel|>{channel}<|message|>{prefill}`` (the message the completion continues)."""
    w.control(grammar.tokens.channel)
    w.text(channel)
    w.control(grammar.tokens.message)
    w.text(prefill)


def prefill_ids(
    table: TokenTable, grammar: HarmonyGrammar, prefill: str, channel: str
) -> list[int]:
    """The ids :func:`write_prefill` writes (what the parser reads before the completion)."""
    tk = grammar.tokens
    return [tk.channel, *table.encode(channel), tk.message, *table.encode(prefill)]


def _expects_json(header: Header) -> bool:
    content_type = header.content_type
    if content_type is None:
        return header.recipient is not None and header.recipient.startswith("functions.")
    return "json" in content_type


class _PartSink:
    """Maps Harmony messages to message parts through the parser's PartAssembler."""

    __slots__ = ("_close", "_header", "_open", "_parser", "body")

    def __init__(self, parser: HarmonyPartsParser) -> None:
        self._parser = parser
        asm = parser.asm
        self._open, self._close, self.body = asm.open, asm.close, asm.write
        self._header: Header | None = None

    def begin(self, header: Header) -> None:
        if header.role != "assistant":
            self._parser.cut(header)
            return
        self._header = header
        start = header.start
        if header.stray:
            # Words the header has no place for: text the model sampled, kept (reported)
            # in text parts spanning their header segments, before the body.
            start = header.body_start
            ends = [at for at, _ in header.stray[1:]] + [start]
            for (at, text), end in zip(header.stray, ends, strict=True):
                self._open(TEXT, at)
                self.body(text)
                self._close(end)
        channel = header.channel
        if header.recipient is not None:
            self._open(TOOL_CALL, start, channel=channel)
        elif channel == "analysis":
            self._open(THINKING, start)
        else:
            self._open(TEXT, start, channel=None if channel == "final" else channel)

    def close(self, end: int, end_token: str | None, truncated: bool) -> None:
        self._close(end, incomplete=truncated, build=self._tool_call)

    def _tool_call(self, segments: list[str], incomplete: bool) -> Part:
        header = self._header
        assert header is not None and header.recipient is not None
        raw = segments[0]
        name = tool_name_of(header.recipient)
        channel = None if header.channel == "commentary" else header.channel
        if incomplete:
            return UnparsedToolCallPart(
                raw, "cut off before <|call|>", name=name, channel=channel, incomplete=True
            )
        if _expects_json(header):
            try:
                json.loads(raw)
            except ValueError as exc:
                return UnparsedToolCallPart(
                    raw, f"invalid JSON arguments: {exc}", name=name, channel=channel, arguments=raw
                )
        return ToolCallPart(name, raw, channel=channel, content_type=header.content_type)


class HarmonyPartsParser(StreamParser):
    """A Harmony completion (see the module): the state machine with a sink that builds
    parts. The grammar record is all it reads of the format."""

    def __init__(self, grammar: HarmonyGrammar, table: TokenTable, events: bool) -> None:
        super().__init__(table, ids=grammar.ids_in(table), events=events)
        self.machine = HarmonyMachine(
            grammar.tokens,
            _PartSink(self),
            role=grammar.role,
            strict=False,
            report=self._issue,
            spell=table.control_text,
            valid_channels=grammar.valid_channels,
        )
        self._on_token = self.machine.token  # type: ignore[method-assign,assignment]
        self._on_text = self.machine.text  # type: ignore[method-assign]
        # The ids of the chunk being fed, and of a header that began in an earlier chunk:
        # a header turning out to be another role's moves its ids to the trailing ids.
        self._chunk: Sequence[int] | np.ndarray[Any, Any] = ()
        self._chunk_base = 0
        self._stash: list[int] = []

    def _writes_through(self) -> tuple[bool, None]:
        return self.machine.in_body, None  # body text goes straight to the part

    def _feed(self, token_ids: Sequence[int] | np.ndarray[Any, Any]) -> list[Event]:
        # Not on the one-token hot path, which takes ordinary text inside a body only:
        # a header can neither begin nor continue there.
        self._chunk, self._chunk_base = token_ids, self._pos
        events = super()._feed(token_ids)
        self._keep_header_ids()
        return events

    def _keep_header_ids(self) -> None:
        """After a chunk: the ids of a header still open, for :meth:`cut`."""
        if self.machine.in_header and not self._done:
            start, base = self.machine.header_start, self._chunk_base
            if start >= base:
                self._stash = _as_list(self._chunk[start - base :])
            else:
                self._stash += _as_list(self._chunk)

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """A whole completion read by the same steps as fed ids (the machine's ``text`` and
        ``token``, the engine's structural-token step for the end), over its runs decoded
        at once: a driver, no second grammar. It walks the runs as the engine walks a fed
        chunk, without the per-run decoding calls; an engine-wide one-shot driver of the
        format hooks would make it unnecessary."""
        self._chunk, self._chunk_base = runs.ids, 0  # for cut()
        on_text, on_token = self.machine.text, self.machine.token
        ends = self._stop_ids | self._eos_ids
        texts, cuts = runs.texts, runs.cuts
        for j, t in enumerate(runs.tokens):
            if texts[j]:
                on_text(texts[j])
            if t in ends:
                self._pos = cuts[j]
                self._structural_token(t)  # the engine's own end of a message
            else:
                on_token(t, cuts[j])
                if not self._done:
                    continue
                self._trailing.append(t)  # another role's message: it trails
            self._keep_trailing(runs.ids[cuts[j] + 1 :])
            break
        else:
            if texts[-1]:
                on_text(texts[-1])
            self._keep_header_ids()
        self._pos = runs.count
        return self.finish()

    def _on_end(self, pos: int, stopped: bool) -> None:
        if not stopped:
            # finish(): every fed id is in the stash already if a header is open.
            self._chunk, self._chunk_base = (), pos
        self.machine.end(pos, self._stop_id if stopped else None)

    def cut(self, header: Header) -> None:
        """End the assistant's message where ``header``'s message (another role's) began;
        its ids become trailing ids."""
        start, base, at = header.start, self._chunk_base, self.machine.at
        self._issue(
            start, f"a {header.role} message in the completion: the assistant's message ends here"
        )
        if start >= base:
            ids = _as_list(self._chunk[start - base : at - base])
        else:
            ids = self._stash + _as_list(self._chunk[: at - base])
        self._trailing += int_ids(ids)  # (the caller's own items: any integers)
        self._done = True
        self.machine.halt()


def _as_list(ids: Sequence[int] | np.ndarray[Any, Any]) -> list[int]:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
