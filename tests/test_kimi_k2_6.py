"""Kimi-K2.6: K2.5's format with K2.6's tokenizer (tml-renderers 0.2.1's
``KimiK26Tokenizer``), against Moonshot's K2.5 template and tml-renderers' ``KimiK25``.

K2.6's own template is not available here (see :class:`renderers.kimi_k2_5.KimiK26Renderer`
for why K2.5's is its oracle): Moonshot's K2.5 ``chat_template.jinja`` is rendered by
transformers (thinking on and off) and encoded with the K2.6 tokenizer (control-token
spellings as control tokens, the rest with its ``encode_ordinary``); tml-renderers'
``KimiK25`` renderers (JSON tool declaration) give prompts, supervised examples and
parses, ``preserve_thinking=True`` included (tinker-cookbook 0.6.1's K2.6
``preserve_thinking=true`` variant is K2.5's renderer keeping the reasoning of history).

Agreement over the shared corpus (44 conversations, 62 generation prompts, 34 ending in
an answer): the template, thinking on and off, the corpus but its adversarial entry: 122 of
122 generation prompts and 66 of 66 supervised examples (the trained turn as sampled after
its prompt); tml-renderers, ``KimiK25()``, ``strip_thinking_from_history=False`` and
``disable_thinking()``: 186 of 186 generation prompts, 102 of 102 supervised examples and
every parse of a trained turn with content.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from renderers import Renderer, Termination, get_renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.test_kimi_k2_5 import K25, OFFICIAL, _messages, _sampled, official_text
from tests.tml_oracle import (
    OracleConfig,
    expected_example,
    our_items,
    parsed_items,
    prompt_ids,
    template_ids,
)

MODEL = "moonshotai/Kimi-K2.6"


@functools.cache
def renderer(**options: Any) -> Renderer:
    return get_renderer("kimi_k2.6", tokenizer_for(MODEL), **options)


def _renderer(config: OracleConfig) -> Renderer:
    return renderer(**config.options)


def ids(text: str) -> list[int]:
    return template_ids(tokenizer_for(MODEL), text)


def test_k26s_tokenizer_is_k25s() -> None:
    """The same control tokens at the same ids, and every id decodes to the same bytes."""
    k25, k26 = tokenizer_for("moonshotai/Kimi-K2.5"), tokenizer_for(MODEL)
    assert k26.special_tokens() == k25.special_tokens()
    assert all(k26.encode_special(n) == k25.encode_special(n) for n in k25.special_tokens())
    vocabulary = 163_840
    assert k26.decode_bytes(list(range(vocabulary))) == k25.decode_bytes(list(range(vocabulary)))
    assert renderer().table.control_id("<think>") == 163606


TEMPLATE_CASES = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in OFFICIAL
    for conv in CORPUS
    if "adversarial" not in conv.tags
]


@pytest.mark.parametrize(("config", "conversation"), TEMPLATE_CASES)
def test_generation_prompts_equal_moonshots_k25_template(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = _renderer(config)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        expected = ids(official_text(config, messages, conversation.tools, True))
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(
    ("config", "conversation"),
    [p for p in TEMPLATE_CASES if p.values[1].messages[-1]["role"] == "assistant"],
)
def test_supervised_examples_equal_the_template_prompt_then_the_sampled_turn(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = _renderer(config)
    messages = _messages(config, conversation.messages)
    tools = conversation.tools
    prompt = ids(official_text(config, messages[:-1], tools, True))
    tail = ids(_sampled(config, messages[-1]))
    example = r.build_supervised_example(messages, tools=tools)
    assert example.tokens.tolist() == prompt + tail
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * len(tail)


CASES = [pytest.param(c, conv, id=f"{c!r}-{conv.id}") for c in K25 for conv in CORPUS]
ANSWERED = [p for p in CASES if p.values[1].messages[-1]["role"] == "assistant"]


@pytest.mark.parametrize(("config", "conversation"), CASES)
def test_generation_prompts_equal_tml_renderers_kimi_k25(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = _renderer(config)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        expected = prompt_ids(config, messages, conversation.tools)
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_supervised_examples_and_parses_equal_tml_renderers_kimi_k25(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = _renderer(config)
    messages = _messages(config, conversation.messages)
    tools = conversation.tools
    tokens, weights = expected_example(
        config, tokenizer_for(MODEL), messages, tools, lambda text: text
    )
    example = r.build_supervised_example(messages, tools=tools)
    assert example.tokens.tolist() == tokens
    assert example.weights.tolist() == weights
    completion = example.tokens[example.weights > 0].tolist()
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    for cut in range(0, len(completion) + 1, max(1, len(completion) // 20)):
        parser = r.stream_parser()
        parser.feed(completion[:cut])
        parser.feed(completion[cut:])
        assert parser.finish() == result, cut
    if result.message.parts:  # the oracle raises on a message without content
        assert our_items(result.message) == parsed_items(config, messages[:-1], tools, completion)


def test_preserve_thinking_keeps_the_reasoning_of_history() -> None:
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
    ]
    kept = renderer(preserve_thinking=True)
    assert "<think>r1</think>a1<|im_end|>" in kept.decode(kept.build_generation_prompt(messages))
    default = renderer()
    assert "<think></think>a1<|im_end|>" in default.decode(
        default.build_generation_prompt(messages)
    )


def test_errors_name_kimi_k26() -> None:
    with pytest.raises(ValueError, match=r"^messages\[1\]: kimi_k2\.6 writes the id"):
        renderer().build_generation_prompt(
            [{"role": "user", "content": "q"}, {"role": "tool", "content": "ok"}]
        )
