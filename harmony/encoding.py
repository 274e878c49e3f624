"""Harmony over one tokenizer: render messages to token ids and parse ids to messages.

Rendering writes each message as control tokens (known ids) and text; only text is
encoded, so the ids equal openai-harmony's for ordinary text. Message text is always
encoded as ordinary text: a body that spells ``<|end|>`` gets those characters, never the
control token (openai-harmony encodes such text as the control token; we do not, on
purpose). The one control token a header field may hold is the ``<|constrain|>`` that
starts a content type such as ``<|constrain|>json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from harmony.messages import CHANNELS, CONSTRAIN, DeveloperContent, HarmonyMessage, HarmonyTokens
from harmony.parser import HarmonyParseResult, HarmonyStreamParser
from renderers.core.loading import load_tokenizer
from renderers.core.tokens import TokenTable, token_table
from renderers.core.writer import TokenWriter

__all__ = ["GPT_OSS_MODEL", "HarmonyEncoding", "drop_analysis", "has_function_tools"]

GPT_OSS_MODEL = "openai/gpt-oss-20b"
_CACHED_FROM = 256  # TokenTable.encode caches shorter texts itself


def drop_analysis(messages: Sequence[HarmonyMessage]) -> list[HarmonyMessage]:
    """openai-harmony's rule for earlier chain of thought (``auto_drop_analysis``): when
    the last assistant message is a final answer, analysis messages before the first
    final message are dropped; otherwise (a turn still calling tools) all are kept."""
    last_assistant = next((m for m in reversed(messages) if m.role == "assistant"), None)
    if last_assistant is None or last_assistant.channel != "final":
        return list(messages)
    first_final = next((i for i, m in enumerate(messages) if m.channel == "final"), len(messages))
    return [m for i, m in enumerate(messages) if not (i < first_final and m.channel == "analysis")]


def has_function_tools(messages: Sequence[HarmonyMessage]) -> bool:
    """Whether a developer message declares the ``functions`` namespace."""
    return any(
        isinstance(m.content, DeveloperContent) and m.content.has_function_tools for m in messages
    )


class _Prefix(NamedTuple):
    """A header's ids (``<|start|>`` to ``<|message|>``): whole, and split after the author
    (``<|start|>`` and the author are not sampled after a generation prompt); no split
    (``rest`` is ``None``) where a token holds the author's end and the recipient's start."""

    whole: tuple[int, ...]
    head: tuple[int, ...]
    rest: tuple[int, ...] | None


class HarmonyEncoding:
    """Rendering and parsing of Harmony with the o200k_harmony tokenizer (gpt-oss's,
    loaded by default)."""

    def __init__(self, tokenizer: Any = None) -> None:
        if isinstance(tokenizer, TokenTable):
            self.table = tokenizer
        else:
            self.table = token_table(
                tokenizer if tokenizer is not None else load_tokenizer(GPT_OSS_MODEL)
            )
        self.tokens = tk = HarmonyTokens.of(self.table)
        self._end_ids = {"end": tk.end, "return": tk.return_, "call": tk.call}
        self._constant_ids: dict[str, list[int]] = {}
        self._prefixes: dict[tuple[str, str | None, str | None, str | None], _Prefix] = {}

    # -- rendering -------------------------------------------------------------------------

    def write_message(
        self,
        w: TokenWriter,
        m: HarmonyMessage,
        *,
        end: str | None = None,
        has_function_tools: bool = False,
        msg: int = -1,
        sampled: bool = False,
        start_sampled: bool = False,
        end_sampled: bool | None = None,
    ) -> None:
        """Write one message. ``end`` is ``"end"``, ``"return"`` or ``"call"`` (default:
        ``<|call|>`` for an assistant message to a recipient, else ``<|end|>``).

        For loss weights, ``msg`` is the index of the conversation message this belongs to,
        ``start_sampled`` says whether ``<|start|>`` and the author were sampled (they are
        not after a generation prompt), ``sampled`` covers the rest of the header and the
        body, ``end_sampled`` the end token (default: as ``sampled``).
        """
        content = m.content
        if isinstance(content, str):
            body = content
        elif isinstance(content, DeveloperContent):
            body = content.render()
        else:
            body = content.render(has_function_tools)
        self.write_parts(
            w,
            m.role,
            m.author,
            body,
            m.channel,
            m.recipient,
            m.content_type,
            end,
            msg,
            sampled,
            start_sampled,
            end_sampled,
        )

    def write_parts(
        self,
        w: TokenWriter,
        role: str,
        author: str,
        body: str,
        channel: str | None = None,
        recipient: str | None = None,
        content_type: str | None = None,
        end: str | None = None,
        msg: int = -1,
        sampled: bool = False,
        start_sampled: bool = False,
        end_sampled: bool | None = None,
    ) -> None:
        """:meth:`write_message` of a message given by its fields (``author`` as the header
        spells it, ``body`` its text): what renderers call, building no message object."""
        if channel is not None or content_type is None:
            prefix = self._prefixes.get((author, channel, recipient, content_type))
            if prefix is None:
                prefix = self._prefix(author, channel, recipient, content_type)
            if start_sampled == sampled:
                w.encoded(prefix.whole, msg, sampled)
            elif prefix.rest is not None:
                w.encoded(prefix.head, msg, start_sampled)
                w.encoded(prefix.rest, msg, sampled)
            else:
                self._write_header(
                    w, author, channel, recipient, content_type, msg, sampled, start_sampled
                )
        else:
            self._write_header(
                w, author, channel, recipient, content_type, msg, sampled, start_sampled
            )
        if role in ("system", "developer") and len(body) > _CACHED_FROM:
            # System and developer bodies repeat across conversations (tool declarations
            # run to kilobytes): their ids are cached. A body sits between <|message|> and
            # the end token, so it is encoded on its own either way.
            w.encoded(self._body_ids(body), msg, sampled)
        else:
            w.text(body, msg, sampled)
        if end is None:
            end = "call" if role == "assistant" and recipient is not None else "end"
        w.control(self._end_ids[end], msg, sampled if end_sampled is None else end_sampled)

    def _write_header(
        self,
        w: TokenWriter,
        author: str,
        channel: str | None,
        recipient: str | None,
        content_type: str | None,
        msg: int,
        sampled: bool,
        start_sampled: bool,
    ) -> None:
        """``<|start|>`` to ``<|message|>`` piece by piece, for the shapes no cached prefix
        covers: a content type without a channel (one text run from the author on), and an
        author and recipient of two weights in one run (the writer splits its tokens)."""
        tk = self.tokens
        w.control(tk.start, msg, start_sampled)
        w.text(author, msg, start_sampled)
        if recipient is not None:
            w.text(" to=" + recipient, msg, sampled)
        if channel is not None:
            w.control(tk.channel, msg, sampled)
            w.text(channel, msg, sampled)
        if content_type is not None:
            w.text(" ", msg, sampled)
            if content_type.startswith(CONSTRAIN):
                w.control(tk.constrain, msg, sampled)
                w.text(content_type[len(CONSTRAIN) :], msg, sampled)
            else:
                w.text(content_type, msg, sampled)
        w.control(tk.message, msg, sampled)

    def _prefix(
        self, author: str, channel: str | None, recipient: str | None, content_type: str | None
    ) -> _Prefix:
        """The ids from ``<|start|>`` to ``<|message|>`` of a header with a channel (or no
        content type), cached: every text run in it stands between control tokens, so it
        is encoded on its own."""
        tk, encode = self.tokens, self.table.encode
        author_ids = encode(author)
        run = author_ids if recipient is None else encode(author + " to=" + recipient)
        # A run whose first tokens are the author's splits there: no token holds both.
        n = len(author_ids)
        split = run[:n] == author_ids
        tail: list[int] = []
        if channel is not None:
            tail.append(tk.channel)
            if content_type is None:
                tail += encode(channel)
            elif content_type.startswith(CONSTRAIN):
                tail += encode(channel + " ")
                tail.append(tk.constrain)
                tail += encode(content_type[len(CONSTRAIN) :])
            else:
                tail += encode(channel + " " + content_type)
        tail.append(tk.message)
        prefix = _Prefix(
            (tk.start, *run, *tail),
            (tk.start, *run[:n]),
            (*run[n:], *tail) if split else None,
        )
        if len(self._prefixes) >= 4096:
            self._prefixes.clear()
        self._prefixes[(author, channel, recipient, content_type)] = prefix
        return prefix

    def _body_ids(self, body: str) -> list[int]:
        ids = self._constant_ids.get(body)
        if ids is None:
            if len(self._constant_ids) >= 256:
                self._constant_ids.clear()
            ids = self._constant_ids[body] = self.table.encode(body)
        return ids

    def write_generation_prompt(self, w: TokenWriter, role: str = "assistant") -> None:
        """``<|start|>{role}``: where the model's sampling starts."""
        w.control(self.tokens.start)
        w.text(role)

    def render(self, message: HarmonyMessage, *, has_function_tools: bool = False) -> list[int]:
        """The ids of one message."""
        w = TokenWriter(self.table)
        self.write_message(w, message, has_function_tools=has_function_tools)
        return w.ids()

    def render_conversation(
        self,
        messages: Sequence[HarmonyMessage],
        *,
        next_role: str | None = None,
        training: bool = False,
    ) -> list[int]:
        """The ids of a conversation, all messages as given (apply :func:`drop_analysis`
        first for openai-harmony's default). ``next_role`` appends ``<|start|>{role}``;
        ``training`` ends a last final assistant message with ``<|return|>``."""
        w = TokenWriter(self.table)
        functions = has_function_tools(messages)
        last = len(messages) - 1
        for i, m in enumerate(messages):
            end = None
            if training and i == last and m.role == "assistant" and m.channel == "final":
                end = "return"
            self.write_message(w, m, end=end, has_function_tools=functions)
        if next_role is not None:
            self.write_generation_prompt(w, next_role)
        return w.ids()

    # -- parsing ---------------------------------------------------------------------------

    def stream_parser(
        self,
        *,
        role: str | None = None,
        strict: bool = False,
        valid_channels: Sequence[str] | None = CHANNELS,
        events: bool = True,
    ) -> HarmonyStreamParser:
        """An incremental parser (see :class:`HarmonyStreamParser`)."""
        return HarmonyStreamParser(
            self.table, role=role, strict=strict, valid_channels=valid_channels, events=events
        )

    def parse(
        self,
        token_ids: Sequence[int] | np.ndarray[Any, Any],
        *,
        role: str | None = None,
        strict: bool = False,
        valid_channels: Sequence[str] | None = CHANNELS,
    ) -> HarmonyParseResult:
        """Parse ids into messages. ``role="assistant"`` for a completion sampled after
        ``<|start|>assistant``; ``None`` when the ids start at ``<|start|>``."""
        parser = self.stream_parser(
            role=role, strict=strict, valid_channels=valid_channels, events=False
        )
        parser.feed(token_ids)
        return parser.finish()
