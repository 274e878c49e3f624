"""The Harmony format (gpt-oss): token-level channel parser and message rendering.

A conversation is a sequence of messages::

    <|start|>{author}[ to={recipient}]<|channel|>{channel}[ {content type}]<|message|>{body}{end}

- author: ``system``, ``developer``, ``user``, ``assistant``, or a tool's name
  (``functions.get_weather``, ``browser.search``) for tool output;
- channel (assistant messages): ``analysis`` (chain of thought), ``commentary`` (tool
  calls and preambles), ``final`` (the answer);
- recipient: ``functions.NAME`` or a built-in tool (``browser.search``, ``python``) for a
  tool call; ``assistant`` for tool output;
- content type: ``json``, ``<|constrain|>json``, ``code``...;
- end: ``<|end|>``; ``<|call|>`` ends a tool call and ``<|return|>`` the final answer, and
  both stop sampling. History stores a final answer with ``<|end|>``.

The system message holds the model identity, knowledge cutoff, current date, reasoning
effort, valid channels and built-in tools (:class:`SystemContent`); the developer message
holds instructions and function tools as a TypeScript namespace (:class:`DeveloperContent`,
:mod:`harmony.tools`). Earlier chain of thought is dropped once a turn ended in a final
answer (:func:`drop_analysis`).

Entry points: :class:`HarmonyEncoding` (``render_conversation``, ``parse``,
``stream_parser``), :class:`HarmonyMachine`, the state machine every Harmony parser runs,
and :class:`HarmonyGrammar` with :class:`HarmonyPartsParser`, which read a completion
into message parts (the gpt-oss renderer's parser, and a Harmony chat template's).
"""

from __future__ import annotations

from harmony.encoding import GPT_OSS_MODEL, HarmonyEncoding, drop_analysis, has_function_tools
from harmony.messages import (
    CHANNELS,
    DEFAULT_IDENTITY,
    DEFAULT_KNOWLEDGE_CUTOFF,
    REASONING_EFFORTS,
    ROLES,
    DeveloperContent,
    HarmonyMessage,
    HarmonyTokens,
    SystemContent,
)
from harmony.parser import (
    ContentDelta,
    HarmonyError,
    HarmonyEvent,
    HarmonyMachine,
    HarmonyParseResult,
    HarmonyStreamParser,
    Header,
    MessageFinished,
    MessageSink,
    MessageStarted,
)
from harmony.parts import (
    HarmonyGrammar,
    HarmonyPartsParser,
    closing_ids,
    harmony_grammar,
    recipient_of,
    tool_name_of,
)
from harmony.tools import (
    BROWSER,
    PYTHON,
    ToolDescription,
    ToolNamespace,
    functions_namespace,
    render_namespace,
    render_namespaces,
    typescript_type,
)

__all__ = [
    "BROWSER",
    "CHANNELS",
    "DEFAULT_IDENTITY",
    "DEFAULT_KNOWLEDGE_CUTOFF",
    "GPT_OSS_MODEL",
    "PYTHON",
    "REASONING_EFFORTS",
    "ROLES",
    "ContentDelta",
    "DeveloperContent",
    "HarmonyEncoding",
    "HarmonyError",
    "HarmonyEvent",
    "HarmonyGrammar",
    "HarmonyMachine",
    "HarmonyMessage",
    "HarmonyParseResult",
    "HarmonyPartsParser",
    "HarmonyStreamParser",
    "HarmonyTokens",
    "Header",
    "MessageFinished",
    "MessageSink",
    "MessageStarted",
    "SystemContent",
    "ToolDescription",
    "ToolNamespace",
    "closing_ids",
    "drop_analysis",
    "functions_namespace",
    "harmony_grammar",
    "has_function_tools",
    "recipient_of",
    "render_namespace",
    "render_namespaces",
    "tool_name_of",
    "typescript_type",
]
