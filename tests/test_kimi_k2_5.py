"""Kimi-K2.5 against Moonshot's template on the shared corpus, cross-checked with
tml-renderers 0.2.1, and the format's own behaviour.

The oracle is Moonshot's ``chat_template.jinja`` (``../shared/templates``, see
``tests/oracle.py``) rendered by transformers' ``apply_chat_template`` after the deep sort
of ``tools``, with K2-Thinking's tokenizer (the same vocabulary). The template declares
tools as the tokenizer's ``tools_ts_str`` when given (the TypeScript-style declaration:
tinker-cookbook 0.6.1's copy of the encoder wrote the expected ones in
``tests/data/kimi_k2_5_tool_declarations.json``), else as compact JSON. tml-renderers'
``KimiK25`` renderers (JSON declaration) are the cross-check, and the only reference for
``preserve_thinking=True``, which is not a variable of Moonshot's template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from renderers import (
    Message,
    Renderer,
    Termination,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    get_renderer,
)
from renderers.kimi_k2_5_tools import typescript_declaration
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.oracle import deep_sort_dict, kimi_template_text, official_kimi_template
from tests.tml_oracle import (
    CONFIGS,
    OracleConfig,
    decode,
    documented_ids,
    expected_example,
    our_items,
    parsed_items,
    prompt_ids,
    template_ids,
    without_reasoning,
)

MODEL = "moonshotai/Kimi-K2.5"
K25 = [c for c in CONFIGS if c.name == "kimi_k2.5"]
CASES = [pytest.param(c, conv, id=f"{c!r}-{conv.id}") for c in K25 for conv in CORPUS]
ANSWERED = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in K25
    for conv in CORPUS
    if conv.messages[-1]["role"] == "assistant"
]
"""The conversations that end with an answer: a supervised example trains it."""


def renderer(config: OracleConfig | None = None, **options: Any) -> Renderer:
    base = dict(config.options) if config else {}
    return get_renderer("kimi_k2.5", tokenizer_for(MODEL), **{**base, **options})


def _messages(config: OracleConfig, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return messages if config.reasoning else without_reasoning(messages)


# -- Moonshot's template ----------------------------------------------------------------------

THINKING_TOKENIZER = "moonshotai/Kimi-K2-Thinking"
"""The transformers tokenizer that renders and encodes the template (K2.5's vocabulary is
K2-Thinking's: tests/test_token_table.py)."""

OFFICIAL = [c for c in K25 if "preserve_thinking" not in c.options]
"""The option sets Moonshot's template has: thinking on and off (JSON declaration)."""


def official_text(
    config: OracleConfig,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    add_generation_prompt: bool,
    tools_ts_str: str | None = None,
) -> str:
    kwargs: dict[str, Any] = {} if config.options.get("thinking", True) else {"thinking": False}
    if tools_ts_str is not None:
        kwargs["tools_ts_str"] = tools_ts_str
    return kimi_template_text(
        tokenizer_for(THINKING_TOKENIZER),
        official_kimi_template(MODEL),
        messages,
        tools,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )


def official_ids(text: str) -> list[int]:
    ids: list[int] = tokenizer_for(THINKING_TOKENIZER).encode(text, add_special_tokens=False)
    return ids


def _sampled(config: OracleConfig, message: dict[str, Any]) -> str:
    """An assistant message as the model samples it after the generation prompt
    (``...<think>``, or ``<think></think>`` with thinking off): the template's "suffix"
    form without its opening."""
    content = message.get("content") or ""
    parts = content if isinstance(content, list) else []
    if parts:
        content = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    text = content
    if config.options.get("thinking", True):
        reasoning = message.get("reasoning_content") or "".join(
            p["thinking"] for p in parts if p.get("type") == "thinking"
        )
        text = f"{reasoning}</think>{content}"
    if message.get("tool_calls"):
        text += "<|tool_calls_section_begin|>"
        for tc in message["tool_calls"]:
            args = tc["function"]["arguments"]
            args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            text += (
                f"<|tool_call_begin|>{tc['id']}<|tool_call_argument_begin|>{args}<|tool_call_end|>"
            )
        text += "<|tool_calls_section_end|>"
    return text + "<|im_end|>"


def _plain_with_reasoning(message: dict[str, Any]) -> bool:
    reasoning = message.get("reasoning_content") or any(
        p.get("type") == "thinking" and p.get("thinking")
        for p in (message["content"] if isinstance(message.get("content"), list) else [])
    )
    return message["role"] == "assistant" and not message.get("tool_calls") and bool(reasoning)


TEMPLATE_CASES = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in OFFICIAL
    for conv in CORPUS
    if "adversarial" not in conv.tags
]


@pytest.mark.parametrize(("config", "conversation"), TEMPLATE_CASES)
def test_generation_prompts_equal_moonshots_template(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        expected = official_ids(official_text(config, messages, conversation.tools, True))
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(
    ("config", "conversation"),
    [p for p in TEMPLATE_CASES if p.values[1].messages[-1]["role"] == "assistant"],
)
def test_supervised_examples_equal_moonshots_template(
    config: OracleConfig, conversation: Conversation
) -> None:
    """The trained turn renders after its generation prompt as sampled: the template's
    rendering of the whole conversation, except (documented) where the template writes
    a final plain answer with reasoning as history, dropping that reasoning."""
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    tools = conversation.tools
    prompt = official_ids(official_text(config, messages[:-1], tools, True))
    tail = official_ids(_sampled(config, messages[-1]))
    example = r.build_supervised_example(messages, tools=tools)
    assert example.tokens.tolist() == prompt + tail
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * len(tail)
    whole = official_ids(official_text(config, messages, tools, False))
    assert (whole == prompt + tail) != _plain_with_reasoning(messages[-1])


@pytest.mark.parametrize(("config", "conversation"), CASES)
def test_generation_prompts_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        expected = prompt_ids(config, messages, conversation.tools)
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_supervised_examples_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    """The trained turn renders after its generation prompt, reasoning kept (where the
    template would rewrite a final plain answer as history)."""
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    tokens, weights = expected_example(
        config, tokenizer_for(MODEL), messages, conversation.tools, lambda text: text
    )
    example = r.build_supervised_example(messages, tools=conversation.tools)
    assert example.tokens.tolist() == tokens
    assert example.weights.tolist() == weights


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_parses_of_trained_turns_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    example = r.build_supervised_example(messages, tools=conversation.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    if not result.message.parts:  # the oracle raises on a message without content
        assert conversation.id == "empty_assistant"
        return
    # Call names are read from the call ids (the corpus's "c1": no "functions.NAME").
    assert our_items(result.message) == parsed_items(
        config, messages[:-1], conversation.tools, completion
    )


# -- where the renderer follows Moonshot's template rather than tml-renderers -------------


def test_headers_name_a_named_message_as_the_template_does() -> None:
    messages = [{"role": "user", "content": "Hi", "name": "ada"}]
    r = renderer()
    text = r.decode(r.build_generation_prompt(messages))
    assert text.startswith("<|im_user|>ada<|im_middle|>Hi<|im_end|>")
    assert text == official_text(K25[0], messages, None, True)
    oracle = decode(tokenizer_for(MODEL), prompt_ids(K25[0], messages, None))
    assert oracle.startswith("<|im_user|>user<|im_middle|>Hi<|im_end|>")  # tml-renderers


# -- the format -----------------------------------------------------------------------------


def test_history_up_to_the_last_plain_answer_loses_its_reasoning() -> None:
    call = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "", "reasoning_content": "r2", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": "ok"},
    ]
    r = renderer()
    text = r.decode(r.build_generation_prompt(messages))
    assert "<think></think>a1<|im_end|>" in text and "<think>r2</think>" in text
    assert text.endswith(
        "## Return of functions.f:0\nok<|im_end|><|im_assistant|>assistant<|im_middle|><think>"
    )
    kept = r.decode(r.build_generation_prompt(messages, preserve_thinking=True))
    assert "<think>r1</think>a1<|im_end|>" in kept
    off = r.decode(r.build_generation_prompt(messages, thinking=False))
    assert "r1" not in off and "r2" not in off and off.endswith("<think></think>")


def test_the_trained_final_answer_keeps_its_reasoning_after_its_generation_prompt() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
    ]
    r = renderer()
    example = r.build_supervised_example(messages)
    prompt = r.build_generation_prompt(messages[:1])
    assert example.tokens.tolist()[: len(prompt)] == prompt
    assert r.decode(example.tokens[example.weights > 0].tolist()) == "r</think>a<|im_end|>"
    with pytest.raises(ValueError, match=r"^messages\[1\]: kimi_k2\.5 with thinking=False"):
        r.build_supervised_example(messages, thinking=False)


def test_calls_and_results_need_their_ids() -> None:
    r = renderer()
    no_id = Message("assistant", [ToolCallPart("f", "{}")])
    with pytest.raises(ValueError, match=r"^messages\[1\]: kimi_k2\.5 writes each tool call's id"):
        r.build_supervised_example([{"role": "user", "content": "q"}, no_id])
    result = {"role": "tool", "content": "ok"}
    with pytest.raises(ValueError, match=r"^messages\[1\]: kimi_k2\.5 writes the id"):
        r.build_generation_prompt([{"role": "user", "content": "q"}, result])


def test_tools_are_declared_as_compact_sorted_json_on_request() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": "é"}}}]
    r = renderer(tool_declaration="json")
    text = r.decode(r.build_generation_prompt([{"role": "user", "content": "q"}], tools=tools))
    assert text.startswith(
        '<|im_system|>tool_declare<|im_middle|>[{"function":{"name":"f","parameters":'
        '{"a":"é","b":1}},"type":"function"}]<|im_end|><|im_user|>user'
    )


# -- tools declared as the model repository's tokenizer declares them ----------------------

DECLARATIONS = json.loads(
    (Path(__file__).parent / "data" / "kimi_k2_5_tool_declarations.json").read_text("utf-8")
)["cases"]
"""Tool lists and their TypeScript-style declarations as the tokenizer's encoder writes
them (tinker-cookbook 0.6.1's copy of it; ``null``: it falls back to JSON)."""


@pytest.mark.parametrize("case", DECLARATIONS, ids=lambda c: c["case"])
def test_tools_are_declared_in_typescript_as_the_tokenizer_declares_them(
    case: dict[str, Any],
) -> None:
    tools = case["tools"]
    assert typescript_declaration(tools) == case["declaration"]
    declaration = case["declaration"] or json.dumps(
        tools, ensure_ascii=False, separators=(",", ":")
    )
    expected = template_ids(
        tokenizer_for(MODEL),
        f"<|im_system|>tool_declare<|im_middle|>{declaration}<|im_end|>"
        "<|im_user|>user<|im_middle|>q<|im_end|><|im_assistant|>assistant<|im_middle|><think>",
    )
    assert renderer().build_generation_prompt([{"role": "user", "content": "q"}], tools=tools) == (
        expected
    )


def _typescript(text: str) -> str:
    """The oracle's rendering with its JSON tool declaration written as the tokenizer
    writes it."""
    head = "<|im_system|>tool_declare<|im_middle|>"
    if not text.startswith(head):
        return text
    end = text.index("<|im_end|>")
    tools = json.loads(text[len(head) : end])
    (declaration,) = [c["declaration"] for c in DECLARATIONS if c["tools"] == tools]
    return head + declaration + text[end:]


TOOLS_CASES = [pytest.param(conv, id=conv.id) for conv in CORPUS if conv.tools]


@pytest.mark.parametrize("conversation", TOOLS_CASES)
def test_corpus_renders_as_the_oracle_with_the_tokenizers_declaration(
    conversation: Conversation,
) -> None:
    """Default options: every generation prompt and supervised example of a conversation
    with tools is the oracle's with the TypeScript-style declaration instead of its JSON."""
    r = renderer()
    tokenizer = tokenizer_for(MODEL)
    config = K25[0]
    for prompt in prompts_of(conversation):
        expected = documented_ids(
            tokenizer, prompt_ids(config, prompt, conversation.tools), _typescript
        )
        assert r.build_generation_prompt(prompt, tools=conversation.tools) == expected
    if conversation.messages[-1]["role"] == "assistant":
        tokens, weights = expected_example(
            config, tokenizer, conversation.messages, conversation.tools, _typescript
        )
        example = r.build_supervised_example(conversation.messages, tools=conversation.tools)
        assert example.tokens.tolist() == tokens
        assert example.weights.tolist() == weights


@pytest.mark.parametrize("conversation", TOOLS_CASES)
def test_default_prompts_equal_moonshots_template_given_the_tokenizers_declaration(
    conversation: Conversation,
) -> None:
    """Default options: the template renders the tokenizer's TypeScript-style declaration
    passed as ``tools_ts_str`` (the expected declarations: tinker-cookbook's encoder)."""
    sorted_tools = deep_sort_dict(conversation.tools)
    (declaration,) = [c["declaration"] for c in DECLARATIONS if c["tools"] == sorted_tools]
    assert declaration is not None
    r = renderer()
    for prompt in prompts_of(conversation):
        text = official_text(K25[0], prompt, conversation.tools, True, tools_ts_str=declaration)
        assert r.build_generation_prompt(prompt, tools=conversation.tools) == official_ids(text)


def test_the_parser_starts_inside_the_reasoning_the_prompt_opened() -> None:
    r = renderer()
    ids = [*r.table.encode("plan"), r.table.control_id("</think>"), *r.table.encode("done")]
    ids.append(r.table.control_id("<|im_end|>"))
    assert r.parse_response(ids).message.parts == (ThinkingPart("plan"), TextPart("done"))
    off = r.parse_response(ids, thinking=False)
    assert off.message.parts == (TextPart("plan</think>done"),)  # kept, not dropped
    assert off.termination is Termination.MALFORMED  # </think> without a think block
