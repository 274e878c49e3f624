"""Exact chat-template rendering and token-level parsing for LLM training.

Quick use::

    import renderers
    r = renderers.get_renderer("Qwen/Qwen3-8B")
    prompt_ids = r.build_generation_prompt(messages, tools=tools)
    result = r.parse_response(sampled_ids)
    result.message.parts  # ThinkingPart / TextPart / ToolCallPart, in sampled order
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from renderers.core.assembly import Event, PartFinished, PartStarted, TextDelta
from renderers.core.engine import StreamParser
from renderers.core.loading import load_tokenizer
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.result import ParseIssue, ParseResult, Termination
from renderers.core.tokens import TokenTable, token_table
from renderers.rendering import Renderer, TrainOn
from renderers.supervised_example import SupervisedExample

if TYPE_CHECKING:
    from renderers.registry import get_renderer, renderer_names

__all__ = [
    "Event",
    "Message",
    "ParseIssue",
    "ParseResult",
    "Part",
    "PartFinished",
    "PartStarted",
    "Renderer",
    "StreamParser",
    "SupervisedExample",
    "Termination",
    "TextDelta",
    "TextPart",
    "ThinkingPart",
    "TokenTable",
    "ToolCallPart",
    "TrainOn",
    "UnparsedToolCallPart",
    "get_renderer",
    "load_tokenizer",
    "renderer_names",
    "token_table",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The registry imports every model module, and gpt_oss imports harmony, which builds on
    # renderers.core: imported here eagerly, ``import harmony`` first would reach a
    # half-initialised harmony through this __init__.
    if name in ("get_renderer", "renderer_names"):
        from renderers import registry

        value = getattr(registry, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'renderers' has no attribute {name!r}")
