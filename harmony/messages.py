"""Harmony messages, the structured contents of system and developer messages, and the
format's control tokens.

A Harmony message is ``<|start|>{author}[ to={recipient}][<|channel|>{channel}][ {content
type}]<|message|>{body}{end}``. The author is a role (``system``, ``developer``, ``user``,
``assistant``) or, for tool output, the tool's name (``functions.get_weather``) whose role
is ``tool``. The end token is ``<|end|>``, ``<|call|>`` for an assistant message addressed
to a tool, and ``<|return|>`` for the final answer the model ends its turn with.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harmony.tools import ToolNamespace, render_namespaces
from renderers.core.tokens import TokenTable

__all__ = [
    "CHANNELS",
    "CONSTRAIN",
    "DEFAULT_IDENTITY",
    "DEFAULT_KNOWLEDGE_CUTOFF",
    "REASONING_EFFORTS",
    "ROLES",
    "DeveloperContent",
    "HarmonyMessage",
    "HarmonyTokens",
    "SystemContent",
]

ROLES = ("system", "developer", "user", "assistant", "tool")
CONSTRAIN = "<|constrain|>"
"""The control token that starts a constrained content type (``<|constrain|>json``)."""
CHANNELS = ("analysis", "commentary", "final")
REASONING_EFFORTS = ("low", "medium", "high")
DEFAULT_IDENTITY = "You are ChatGPT, a large language model trained by OpenAI."
DEFAULT_KNOWLEDGE_CUTOFF = "2024-06"
_FUNCTIONS_SENTENCE = "\nCalls to these tools must go to the commentary channel: 'functions'."


@dataclass(frozen=True, slots=True)
class SystemContent:
    """The system message: who the model is, when, how hard it thinks, its channels and
    built-in tools. ``None`` fields are left out of the text; ``valid_channels=None`` or
    empty leaves out the channel section (as openai-harmony does for an empty list)."""

    model_identity: str | None = DEFAULT_IDENTITY
    reasoning_effort: str | None = "medium"
    knowledge_cutoff: str | None = DEFAULT_KNOWLEDGE_CUTOFF
    conversation_start_date: str | None = None
    valid_channels: tuple[str, ...] | None = CHANNELS
    channel_required: bool = True
    tools: tuple[ToolNamespace, ...] = ()

    def render(self, has_function_tools: bool = False) -> str:
        """The message text. ``has_function_tools`` (the conversation declares a
        ``functions`` namespace) adds the sentence sending tool calls to ``commentary``."""
        head = []
        if self.model_identity is not None:
            head.append(self.model_identity)
        if self.knowledge_cutoff is not None:
            head.append(f"Knowledge cutoff: {self.knowledge_cutoff}")
        if self.conversation_start_date is not None:
            head.append(f"Current date: {self.conversation_start_date}")
        sections = ["\n".join(head)] if head else []
        if self.reasoning_effort is not None:
            sections.append(f"Reasoning: {self.reasoning_effort.lower()}")
        if self.tools:
            sections.append("# Tools\n\n" + render_namespaces(self.tools))
        if self.valid_channels:
            channels = f"# Valid channels: {', '.join(self.valid_channels)}."
            if self.channel_required:
                channels += " Channel must be included for every message."
            if has_function_tools:
                channels += _FUNCTIONS_SENTENCE
            sections.append(channels)
        return "\n\n".join(sections)

    def with_required_channels(self, channels: Sequence[str]) -> SystemContent:
        """This content with ``channels`` as the valid channels, each message required to
        name one (openai-harmony's ``SystemContent.with_required_channels``): the line
        ``# Valid channels: analysis, final. Channel must be included for every message.``;
        no channel line for an empty list."""
        if isinstance(channels, str):
            raise TypeError("channels: expected a sequence of channel names, got a string")
        return replace(self, valid_channels=tuple(channels), channel_required=True)


@dataclass(frozen=True, slots=True)
class DeveloperContent:
    """The developer message: instructions (what chat APIs call the system prompt) and the
    function tools."""

    instructions: str | None = None
    tools: tuple[ToolNamespace, ...] = ()

    def render(self) -> str:
        """The message text (``# Instructions`` and ``# Tools`` sections)."""
        sections = []
        if self.instructions is not None:
            sections.append("# Instructions\n\n" + self.instructions)
        if self.tools:
            sections.append("# Tools\n\n" + render_namespaces(self.tools))
        return "\n\n".join(sections)

    @property
    def has_function_tools(self) -> bool:
        return any(ns.name == "functions" for ns in self.tools)


@dataclass(frozen=True, slots=True)
class HarmonyMessage:
    """One Harmony message.

    ``role`` is one of :data:`ROLES`; ``name`` is the author's name (a tool's name such as
    ``functions.get_weather`` for tool output). ``content_type`` is the header's content
    type as written, the constraint marker included (``"<|constrain|>json"``), the way
    openai-harmony represents it. Parsed messages also carry ``span`` (``[start, end)``
    token range, markers included), ``end`` (``"end"``, ``"return"`` or ``"call"``: the
    token that closed the message, ``None`` if none did) and ``truncated`` (the tokens ran
    out inside the body).
    """

    role: str
    content: str | SystemContent | DeveloperContent = ""
    name: str | None = None
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None
    span: tuple[int, int] | None = None
    end: str | None = None
    truncated: bool = False

    @property
    def author(self) -> str:
        """The author as the header spells it (``assistant``, ``functions.x``)."""
        if self.role == "tool":
            return self.name or "tool"
        return f"{self.role}:{self.name}" if self.name else self.role

    @property
    def text(self) -> str:
        """The body text (system and developer contents rendered)."""
        content = self.content
        return content if isinstance(content, str) else content.render()


@dataclass(frozen=True, slots=True)
class HarmonyTokens:
    """The ids of Harmony's control tokens in one tokenizer (o200k_harmony)."""

    start: int
    channel: int
    message: int
    constrain: int
    end: int
    return_: int
    call: int
    end_of_text: int

    @property
    def ends(self) -> dict[int, str]:
        """End-token id -> ``"end"``, ``"return"`` or ``"call"``."""
        return {self.end: "end", self.return_: "return", self.call: "call"}

    @classmethod
    def of(cls, table: TokenTable) -> HarmonyTokens:
        """The ids in ``table`` (cached; ``KeyError`` if it lacks a Harmony token)."""
        cached = _TOKENS.get(table)
        if cached is None:
            c = table.control_id
            cached = cls(
                start=c("<|start|>"),
                channel=c("<|channel|>"),
                message=c("<|message|>"),
                constrain=c(CONSTRAIN),
                end=c("<|end|>"),
                return_=c("<|return|>"),
                call=c("<|call|>"),
                end_of_text=c("<|endoftext|>"),
            )
            _TOKENS[table] = cached
        return cached


_TOKENS: weakref.WeakKeyDictionary[TokenTable, HarmonyTokens] = weakref.WeakKeyDictionary()
