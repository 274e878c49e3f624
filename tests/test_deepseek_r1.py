"""DeepSeek-R1 against its official template on the shared corpus, cross-checked with
tml-renderers 0.2.1, and the format's own behaviour.

The oracle: R1's chat template (``tests/data/deepseek_r1_chat_template.jinja``, the
``chat_template`` of ``deepseek-ai/DeepSeek-R1``'s ``tokenizer_config.json`` transcribed
from two public copies; the hub cache has no R1) rendered by jinja2's
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)``, the environment
transformers uses, and tokenized with tml-renderers' ``DeepSeekR1Tokenizer`` (control-token
spellings as the control tokens, the rest with its ``encode_ordinary``). Agreement counts
and the differences from tml-renderers: :mod:`renderers.deepseek_r1`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jinja2.sandbox
import pytest

from renderers import Message, Renderer, Termination, TextPart, ThinkingPart, get_renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.test_deepseek_v3 import template_input
from tests.tml_oracle import (
    OracleConfig,
    decode,
    our_items,
    parsed_items,
    prompt_ids,
    template_ids,
)

MODEL = "deepseek-ai/DeepSeek-R1"
BOS = "<｜begin▁of▁sentence｜>"
TEMPLATE = Path(__file__).parent / "data" / "deepseek_r1_chat_template.jinja"
USED = [c for c in CORPUS if "adversarial" not in c.tags and c.id != "special_looking_text"]
"""The corpus but the conversations whose text spells ``<think>``: R1's tokenizer would
make those control tokens; the renderer writes message text as ordinary text."""


def _tml() -> Any:
    from tml_renderers import renderers as tml

    return tml.DeepSeekR1()


TML = OracleConfig("deepseek_r1", MODEL, {}, _tml, "DeepSeekR1()")


@functools.cache
def renderer(**options: Any) -> Renderer:
    return get_renderer("deepseek_r1", tokenizer_for(MODEL), **options)


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TEMPLATE.read_text("utf-8"))


def official_text(messages: list[dict[str, Any]], gen: bool) -> str:
    return _template().render(
        messages=template_input(messages), bos_token=BOS, add_generation_prompt=gen
    )


def ids(text: str) -> list[int]:
    return template_ids(tokenizer_for(MODEL), text)


def sampled_text(message: dict[str, Any], after_tools: bool) -> str:
    """The trained turn as the model samples it after the generation prompt."""
    content = message.get("content") or ""
    parts = content if isinstance(content, list) else []
    if parts:
        content = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    reasoning = message.get("reasoning_content") or "".join(
        p["thinking"] for p in parts if p.get("type") == "thinking"
    )
    text = content if after_tools else f"{reasoning}</think>{content}"
    if message.get("tool_calls"):
        calls = []
        for c in message["tool_calls"]:
            args = c["function"]["arguments"]
            args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            calls.append(
                f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{c['function']['name']}\n"
                f"```json\n{args}\n```<｜tool▁call▁end｜>"
            )
        text += "<｜tool▁calls▁begin｜>" + "\n".join(calls) + "<｜tool▁calls▁end｜>"
    return text + "<｜end▁of▁sentence｜>"


PROMPTS = [pytest.param(c, id=c.id) for c in USED]
ANSWERED = [pytest.param(c, id=c.id) for c in USED if c.messages[-1]["role"] == "assistant"]


def test_the_corpus_is_the_shared_one() -> None:
    assert len(USED) >= 30 and len(ANSWERED) >= 20


@pytest.mark.parametrize("conversation", PROMPTS)
def test_generation_prompts_equal_the_official_template(conversation: Conversation) -> None:
    r = renderer()
    for prompt in prompts_of(conversation):
        expected = ids(official_text(prompt, True))
        assert r.build_generation_prompt(prompt, tools=conversation.tools) == expected


@pytest.mark.parametrize("conversation", ANSWERED)
def test_supervised_examples_are_the_template_prompt_then_the_sampled_turn(
    conversation: Conversation,
) -> None:
    """The untrained prefix is the template's generation prompt; the trained turn is what
    the model samples after it (reasoning kept, ``</think>`` closing the opened block)."""
    r = renderer()
    messages = conversation.messages
    after_tools = messages[-2]["role"] == "tool"
    if after_tools and (messages[-1].get("reasoning_content") or "").strip():
        with pytest.raises(ValueError, match=r"^messages\[\d+\]: deepseek_r1 cannot write"):
            r.build_supervised_example(messages, tools=conversation.tools)
        return
    prompt = ids(official_text(messages[:-1], True))
    tail = ids(sampled_text(messages[-1], after_tools))
    example = r.build_supervised_example(messages, tools=conversation.tools)
    assert example.tokens.tolist() == prompt + tail
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * len(tail)


@pytest.mark.parametrize("conversation", ANSWERED)
def test_history_turns_render_as_the_template_writes_them(conversation: Conversation) -> None:
    """A conversation followed by a user message renders every assistant turn as the
    template does (reasoning dropped, text after the last ``</think>``, tool-call quirks)."""
    messages = [*conversation.messages, {"role": "user", "content": "next"}]
    assert renderer().build_generation_prompt(messages) == ids(official_text(messages, True))


@pytest.mark.parametrize("conversation", ANSWERED)
def test_trained_turns_parse_back_streaming_as_in_one_shot_and_as_the_oracle(
    conversation: Conversation,
) -> None:
    r = renderer()
    messages = conversation.messages
    if messages[-2]["role"] == "tool":
        return  # tml-renderers opens a think block after tool outputs; the template none
    example = r.build_supervised_example(messages, tools=conversation.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    for cut in range(0, len(completion) + 1, max(1, len(completion) // 20)):
        parser = r.stream_parser()
        parser.feed(completion[:cut])
        parser.feed(completion[cut:])
        assert parser.finish() == result, cut
    expected = Message.from_dict(messages[-1])
    assert our_items(result.message) == our_items(expected)
    if result.message.parts:  # tml-renderers raises on a message without content
        assert our_items(result.message) == parsed_items(TML, messages[:-1], None, completion)


def test_tml_renderers_agrees_on_prompts_without_tools_but_where_documented() -> None:
    """tml-renderers writes a mid-conversation system message in place; elsewhere its
    prompts of conversations without tool messages equal the template's."""
    agree = differ = 0
    for conversation in USED:
        for prompt in prompts_of(conversation):
            if any(m["role"] == "tool" for m in prompt):
                continue
            if prompt_ids(TML, prompt, None) == ids(official_text(prompt, True)):
                agree += 1
            else:
                differ += 1
                assert conversation.id == "system_second_position"
    assert (agree, differ) == (49, 1)


# -- the format -----------------------------------------------------------------------------


def test_the_generation_prompt_opens_a_think_block_except_after_tool_outputs() -> None:
    r = renderer()
    text = r.decode(r.build_generation_prompt([{"role": "user", "content": "q"}]))
    assert text == f"{BOS}<｜User｜>q<｜Assistant｜><think>\n"
    prompt = r.build_generation_prompt([{"role": "user", "content": "q"}])
    assert prompt[-2] == r.table.control_id("<think>")  # a token of R1's tokenizer


def test_the_parser_starts_inside_the_reasoning_the_prompt_opened() -> None:
    r = renderer()
    ids_ = [*r.table.encode("plan"), r.table.control_id("</think>"), *r.table.encode("done")]
    ids_.append(r.table.control_id("<｜end▁of▁sentence｜>"))
    assert r.parse_response(ids_).message.parts == (ThinkingPart("plan"), TextPart("done"))
    off = r.parse_response(ids_, starts_in_reasoning=False)
    assert off.message.parts == (TextPart("plan</think>done"),)  # kept, not dropped
    assert off.termination is Termination.MALFORMED


def test_history_answers_lose_text_up_to_their_last_think_end() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>a</think>b</think>answer"},
        {"role": "user", "content": "q2"},
    ]
    r = renderer()
    text = r.decode(r.build_generation_prompt(messages))
    assert "<｜Assistant｜>answer<｜end▁of▁sentence｜>" in text
    assert r.build_generation_prompt(messages) == ids(official_text(messages, True))


def test_a_trained_history_turn_with_reasoning_is_an_error_unless_dropped() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "RSN"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "b"},
    ]
    r = renderer()
    with pytest.raises(ValueError, match=r"^messages\[1\]: deepseek_r1 cannot write"):
        r.build_supervised_example(messages, train_on="all_assistant")
    example = r.build_supervised_example(messages, train_on="all_assistant", reasoning="drop")
    assert "RSN" not in r.decode(example.tokens.tolist())


def test_a_later_tool_call_turn_whose_text_the_template_drops_cannot_be_trained() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "1"},
        {"role": "assistant", "content": "again", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    r = renderer()
    with pytest.raises(ValueError, match=r"^messages\[3\]: deepseek_r1's template drops"):
        r.build_supervised_example(messages, train_on="all_assistant")
    fixed = r.decode(r.build_generation_prompt(messages[:5], fix_tool_format=True))
    assert fixed.endswith(
        "<｜tool▁outputs▁end｜>again<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
        "<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        "<｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>2"
        "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
    )
    assert r.build_generation_prompt(messages[:5]) == ids(official_text(messages[:5], True))


def test_rollouts_parse_after_tool_outputs_without_a_think_block() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "1"},
    ]
    r = renderer()
    prompt = r.build_generation_prompt(messages)
    assert decode(tokenizer_for(MODEL), prompt).endswith("<｜tool▁outputs▁end｜>")
    completion = [*r.table.encode("It is 1."), r.table.control_id("<｜end▁of▁sentence｜>")]
    result = r._parse_after_prompt(prompt, completion, {})
    assert result.message.parts == (TextPart("It is 1."),)
    assert result.termination is Termination.STOP


def test_reasoning_that_starts_with_a_newline_is_sampled_apart_from_the_prompts() -> None:
    """The prompt's ``<think>\\n`` ends with a ``\\n`` the reasoning's own newline would
    merge with if the text were tokenized whole: the trained turn is encoded apart."""
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "\nplan"},
    ]
    r = renderer()
    example = r.build_supervised_example(messages)
    prompt = r.build_generation_prompt(messages[:1])
    assert example.tokens.tolist()[: len(prompt)] == prompt
    completion = example.tokens[example.weights > 0].tolist()
    assert r.parse_response(completion).message.parts == (ThinkingPart("\nplan"), TextPart("a"))
