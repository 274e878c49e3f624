"""tml-renderers as the oracle of the 2026 families (Qwen3.5/3.8, DeepSeek-V4/V4.1, Kimi-K2.5),
whose official templates are not in the hub cache.

Conversations (OpenAI dicts) are converted to tml-renderers' message types the way its own
``OpenAIMessage.from_oss_dict`` reads them; prompts, supervised examples and parses come
from its native renderers. Expected ids come from here, never from the code under test;
where a renderer documentedly differs from the oracle, :func:`template_ids` encodes the
documented text with the oracle's tokenizer (control tokens by their text, everything else
with its ``encode_ordinary``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch  # noqa: F401  (tml-renderers needs PyTorch loaded first)
from tml_renderers import chat
from tml_renderers import renderers as tml

from renderers.core.messages import Message


@dataclass(frozen=True)
class OracleConfig:
    """One of our option sets and the oracle renderer that writes the same format."""

    name: str  # our renderer
    model_id: str
    options: Mapping[str, Any]
    make: Callable[[], Any]
    label: str
    reasoning: bool = True
    """False: the oracle refuses reasoning for this option set (thinking off); the
    conversations are compared without it."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return self.label


_PEERS: dict[str, Any] = {}


def peer(config: OracleConfig) -> Any:
    """The oracle renderer of ``config`` (built once)."""
    if config.label not in _PEERS:
        _PEERS[config.label] = config.make()
    return _PEERS[config.label]


def without_reasoning(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with its reasoning removed (``reasoning_content`` and thinking
    parts of list content)."""
    out = []
    for m in messages:
        d = {k: v for k, v in m.items() if k != "reasoning_content"}
        if isinstance(d.get("content"), list):
            d["content"] = [p for p in d["content"] if p.get("type") != "thinking"]
        out.append(d)
    return out


def _joined(m: Mapping[str, Any]) -> dict[str, Any]:
    """List-of-text content as one string: the templates join the parts; the oracle's
    converter would make one message per part (and trim each)."""
    d = dict(m)
    content = d.get("content")
    if isinstance(content, list) and all(p.get("type") == "text" for p in content):
        d["content"] = "".join(p["text"] for p in content)
    return d


def _oss_dict(m: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message as ``from_oss_dict`` reads it: reasoning as a thinking content
    part, arguments as JSON text."""
    m = _joined(m)
    d: dict[str, Any] = {"role": m["role"]}
    content, reasoning = m.get("content"), m.get("reasoning_content")
    if reasoning:
        parts: list[dict[str, Any]] = [{"type": "thinking", "thinking": reasoning}]
        d["content"] = parts + ([{"type": "text", "text": content}] if content else [])
    else:
        d["content"] = content if content is not None else ""
    if m.get("tool_calls"):
        d["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"]
                    if isinstance(c["function"]["arguments"], str)
                    else json.dumps(c["function"]["arguments"], ensure_ascii=False),
                },
            }
            for c in m["tool_calls"]
        ]
    for key in ("tool_call_id", "name"):
        if key in m:
            d[key] = m[key]
    return d


def tml_messages(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    train_last_only: bool = False,
) -> list[Any]:
    """The conversation as tml-renderers messages (tools as a declaration first);
    ``train_last_only``: every assistant message but the last gets loss weight 0."""
    out: list[Any] = []
    if tools:
        specs = [
            chat.ToolSpecJson(
                "function",
                t["function"]["name"],
                t["function"].get("description", ""),
                t["function"].get("parameters", {}),
            )
            for t in tools
        ]
        out.append(chat.Message(chat.ToolDeclareJson(specs), chat.Author(chat.AuthorKind.System)))
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    untrained = chat.MessageMetadata(training_metadata=chat.TrainingMetadata(0.0, False))
    for i, m in enumerate(messages):
        items = chat.OpenAIMessage.from_oss_dict(_oss_dict(m)).to_messages()
        if train_last_only and m["role"] == "assistant" and i != last:
            items = [item.copy(message_metadata=untrained) for item in items]
        out += items
    return out


def _ids(spans: Sequence[Any]) -> list[int]:
    return [t for span in spans for t in span.span.tokens]


def prompt_ids(
    config: OracleConfig,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
) -> list[int]:
    spans, _ = peer(config).render_for_completion(tml_messages(messages, tools))
    return _ids(spans)


def supervised_ids(
    config: OracleConfig,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[int], list[float]]:
    """Tokens and weights of the oracle's example trained on the last assistant message."""
    example = peer(config).render_for_sft(tml_messages(messages, tools, train_last_only=True))[-1]
    return _ids(example.input_token_spans), list(example.per_token_loss_weight_unshifted)


Item = tuple[Any, ...]


def parsed_items(
    config: OracleConfig,
    prompt: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    completion: Sequence[int],
) -> list[Item]:
    """The oracle's parse of ``completion`` sampled after ``prompt``, as comparable items:
    reasoning and text (stripped, empty ones dropped) and calls ``(name, arguments)``."""
    _, parser = peer(config).render_for_completion(tml_messages(prompt, tools))
    items: list[Item] = []
    for m in parser.parse_tokens(list(completion)):
        c = m.content
        if isinstance(c, chat.Thinking):
            items.append(("thinking", c.text))
        elif isinstance(c, chat.Text):
            items.append(("text", c.text))
        elif isinstance(c, chat.InvokeTool):
            items.append(("call", c.name, {a.name: json.loads(a.value) for a in c.args}))
        elif not isinstance(c, chat.ModelEndSampling):
            items.append(("other", repr(c)))
    return normalised(items)


def our_items(message: Message) -> list[Item]:
    """Our parse as the same comparable items."""
    from renderers import TextPart, ThinkingPart, ToolCallPart

    items: list[Item] = []
    for p in message.parts:
        if isinstance(p, ThinkingPart):
            items.append(("thinking", p.text))
        elif isinstance(p, TextPart):
            items.append(("text", p.text))
        elif isinstance(p, ToolCallPart):
            items.append(("call", p.name, json.loads(p.arguments)))
        else:
            items.append(("other", repr(p)))
    return normalised(items)


def normalised(items: list[Item]) -> list[Item]:
    out: list[Item] = []
    for item in items:
        if item[0] in ("text", "thinking"):
            text = item[1].strip()
            if not text:
                continue
            item = (item[0], text)
        out.append(item)
    return out


def template_ids(tokenizer: Any, text: str) -> list[int]:
    """``text`` as a template's text is tokenized: control-token spellings are control
    tokens, the text between them ordinary text (the oracle tokenizer's own encoder)."""
    control: dict[str, int] = {}
    for name in tokenizer.special_tokens():
        i = tokenizer.encode_special(name)
        control[tokenizer.decode_bytes([i]).decode()] = i
    pattern = "(" + "|".join(map(re.escape, sorted(control, key=len, reverse=True))) + ")"
    ids: list[int] = []
    for k, piece in enumerate(re.split(pattern, text)):
        if k % 2:
            ids.append(control[piece])
        elif piece:
            ids += tokenizer.encode_ordinary(piece)
    return ids


def documented_ids(tokenizer: Any, ids: list[int], documented: Callable[[str], str]) -> list[int]:
    """The oracle's ids with the documented differences applied to their text (the ids
    themselves when nothing changes)."""
    text = decode(tokenizer, ids)
    fixed = documented(text)
    return ids if fixed == text else template_ids(tokenizer, fixed)


def expected_example(
    config: OracleConfig,
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    documented: Callable[[str], str],
    trailing: str = "",
) -> tuple[list[int], list[float]]:
    """The oracle's supervised example (trained on the last assistant message) with the
    documented differences: applied to the untrained prefix and the trained completion
    apart (both sides encode them apart), then ``trailing`` untrained template text."""
    ids, weights = supervised_ids(config, messages, tools)
    first = weights.index(1.0)
    assert weights == [0.0] * first + [1.0] * (len(ids) - first)
    prefix = documented_ids(tokenizer, ids[:first], documented)
    completion = documented_ids(tokenizer, ids[first:], documented)
    tail = tokenizer.encode_ordinary(trailing) if trailing else []
    tokens = prefix + completion + tail
    return tokens, [0.0] * len(prefix) + [1.0] * len(completion) + [0.0] * len(tail)


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return str(tokenizer.decode_bytes(list(ids)).decode("utf-8"))


CONFIGS = [
    OracleConfig("qwen3.5", "Qwen/Qwen3.5-27B", {}, lambda: tml.Qwen35(), "qwen3.5"),
    OracleConfig(
        "qwen3.5",
        "Qwen/Qwen3.5-27B",
        {"enable_thinking": False},
        lambda: tml.Qwen35.disable_thinking(),
        "qwen3.5-enable_thinking=False",
        reasoning=False,
    ),
    OracleConfig("qwen3.8", "Qwen/Qwen3.8-27B", {}, lambda: tml.Qwen38(), "qwen3.8"),
    OracleConfig(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        {"reasoning_effort": "low"},
        lambda: tml.Qwen38.low(),
        "qwen3.8-reasoning_effort=low",
    ),
    OracleConfig(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        {"reasoning_effort": "medium", "preserve_thinking": False},
        lambda: tml.Qwen38(reasoning_effort="medium", strip_thinking_from_history=True),
        "qwen3.8-reasoning_effort=medium-preserve_thinking=False",
    ),
    OracleConfig(
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        {"enable_thinking": False},
        lambda: tml.Qwen38.disable_thinking(),
        "qwen3.8-enable_thinking=False",
        reasoning=False,
    ),
    OracleConfig(
        "deepseek_v4", "deepseek-ai/DeepSeek-V4-Pro", {}, lambda: tml.DeepSeekV4(), "deepseek_v4"
    ),
    OracleConfig(
        "deepseek_v4",
        "deepseek-ai/DeepSeek-V4-Pro",
        {"reasoning_effort": "max"},
        lambda: tml.DeepSeekV4(reasoning_effort="max"),
        "deepseek_v4-reasoning_effort=max",
    ),
    OracleConfig(
        "deepseek_v4",
        "deepseek-ai/DeepSeek-V4-Pro",
        {"thinking_mode": "chat"},
        lambda: tml.DeepSeekV4.chat(),
        "deepseek_v4-thinking_mode=chat",
        reasoning=False,
    ),
    OracleConfig(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        {},
        lambda: tml.DeepSeekV41(),
        "deepseek_v4.1",
    ),
    OracleConfig(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        {"reasoning_effort": "max"},
        lambda: tml.DeepSeekV41(reasoning_effort="max"),
        "deepseek_v4.1-reasoning_effort=max",
    ),
    OracleConfig(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        {"reasoning_effort": 33},
        lambda: tml.DeepSeekV41(reasoning_effort=33),
        "deepseek_v4.1-reasoning_effort=33",
    ),
    OracleConfig(
        "deepseek_v4.1",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        {"thinking_mode": "chat"},
        lambda: tml.DeepSeekV41.chat(),
        "deepseek_v4.1-thinking_mode=chat",
        reasoning=False,
    ),
    # tml-renderers declares Kimi-K2.5's tools as JSON (tool_declaration="json"); the
    # default, TypeScript-style declaration is checked in tests/test_kimi_k2_5.py.
    OracleConfig(
        "kimi_k2.5",
        "moonshotai/Kimi-K2.5",
        {"tool_declaration": "json"},
        lambda: tml.KimiK25(),
        "kimi_k2.5-tool_declaration=json",
    ),
    OracleConfig(
        "kimi_k2.5",
        "moonshotai/Kimi-K2.5",
        {"tool_declaration": "json", "preserve_thinking": True},
        lambda: tml.KimiK25(strip_thinking_from_history=False),
        "kimi_k2.5-tool_declaration=json-preserve_thinking=True",
    ),
    OracleConfig(
        "kimi_k2.5",
        "moonshotai/Kimi-K2.5",
        {"tool_declaration": "json", "thinking": False},
        lambda: tml.KimiK25.disable_thinking(),
        "kimi_k2.5-tool_declaration=json-thinking=False",
        reasoning=False,
    ),
    # GLM-5.x (tests/test_glm5.py has its own option sets; these serve the shared tests).
    OracleConfig("glm5.2", "zai-org/GLM-5.2", {}, lambda: tml.Glm52(), "glm5.2"),
    OracleConfig(
        "glm5.3",
        "zai-org/GLM-5.3",
        {"clear_thinking": True},
        lambda: tml.Glm53(),
        "glm5.3-clear_thinking=True",
    ),
    OracleConfig(
        "glm5.3_flash",
        "zai-org/GLM-5.3-Flash",
        {"clear_thinking": True},
        lambda: tml.Glm53Flash(),
        "glm5.3_flash-clear_thinking=True",
    ),
]
