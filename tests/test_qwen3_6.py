"""Qwen3.6 against its official template (``qwen3_6.jinja``, TRL's byte-exact copy, rendered
in transformers' sandbox and tokenized with tml-renderers' ``Qwen35Tokenizer``, the
vocabulary Qwen3.6 shares with Qwen3.5) on the shared corpus, with tml-renderers' ``Qwen35``
parser (the same grammar; tml has no Qwen3.6 renderer) as the second oracle for parses.

The documented difference applied to the template's text: a trained (or final) turn is
encoded after the generation prompt's ``<think>⏎`` on its own, as the model samples it.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest

from renderers import Termination, TextPart, ThinkingPart, ToolCallPart, get_renderer
from renderers.qwen3_5 import Qwen36Renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.oracle import server_messages, template_text, trl_template

SOURCE = "tml_renderers.tokenizers:Qwen35Tokenizer"
# Control-token spellings in message text (our text stays text); a thinking content part
# (the template raises "Unexpected item type in content"; reasoning_last is its dict form).
EXCLUDED = {"special_looking_text", "reasoning_as_parts"}
CORPUS_USED = [c for c in CORPUS if c.id not in EXCLUDED]
ANSWERED = [c for c in CORPUS_USED if c.messages[-1]["role"] == "assistant"]
CONFIGS = [{}, {"enable_thinking": False}, {"preserve_thinking": True}]
OPENED = "<|im_start|>assistant\n<think>\n"


def _label(options: dict[str, Any]) -> str:
    return "qwen3.6" + "".join(f"-{k}={v}" for k, v in options.items())


config_param = pytest.mark.parametrize("options", CONFIGS, ids=_label)


def tokenizer() -> Any:
    return tokenizer_for(SOURCE)


def renderer(options: dict[str, Any]) -> Qwen36Renderer:
    r = get_renderer("qwen3.6", tokenizer(), **options)
    assert isinstance(r, Qwen36Renderer)
    return r


def official_text(
    options: dict[str, Any], messages: list[dict[str, Any]], tools: Any, gen: bool
) -> str:
    """The template applied to the conversation as a server hands it over."""
    return template_text(
        trl_template("qwen3_6"),
        server_messages(messages),
        tools,
        add_generation_prompt=gen,
        **options,
    )


def template_ids(text: str) -> list[int]:
    from tests.tml_oracle import template_ids as ids

    return ids(tokenizer(), text)


def _late_system(messages: list[dict[str, Any]]) -> bool:
    return any(m["role"] == "system" for m in messages[1:])


def _thinking(options: dict[str, Any]) -> bool:
    return bool(options.get("enable_thinking", True))


def _reasoning(message: dict[str, Any]) -> str:
    return str(message.get("reasoning_content") or "").strip()


@config_param
@pytest.mark.parametrize("conversation", CORPUS_USED, ids=repr)
def test_generation_prompts_equal_the_official_template(
    options: dict[str, Any], conversation: Conversation
) -> None:
    r = renderer(options)
    for prompt in prompts_of(conversation):
        if _late_system(prompt):  # an error in both
            with pytest.raises(Exception, match="System message must be at the beginning"):
                official_text(options, prompt, conversation.tools, True)
            with pytest.raises(ValueError, match=r"^messages\[1\]\.role: a system message"):
                r.build_generation_prompt(prompt, conversation.tools)
            continue
        expected = template_ids(official_text(options, prompt, conversation.tools, True))
        assert r.build_generation_prompt(prompt, conversation.tools) == expected


@config_param
@pytest.mark.parametrize(
    "conversation", [c for c in CORPUS_USED if not _late_system(c.messages)], ids=repr
)
def test_whole_untrained_conversations_equal_the_official_template(
    options: dict[str, Any], conversation: Conversation
) -> None:
    """Every turn as the template writes it (reasoning included, thinking on or off); a
    final answer after ``<think>⏎`` is encoded on its own, as sampled (documented)."""
    msgs, tools = conversation.messages, conversation.tools
    text = official_text(options, msgs, tools, False)
    cut = text.rindex(OPENED) + len(OPENED) if msgs[-1]["role"] == "assistant" else 0
    if not (_thinking(options) or _reasoning(msgs[-1])):
        cut = 0  # the prompt closes an empty think block: the text is encoded whole
    expected = template_ids(text[:cut]) + template_ids(text[cut:])
    example = renderer(options).build_supervised_example(msgs, tools, train_on=("user",))
    assert example.tokens.tolist() == expected


def _trainable(options: dict[str, Any], conversation: Conversation) -> bool:
    """With thinking off, a trained turn's reasoning is refused (reasoning='error')."""
    return _thinking(options) or not _reasoning(conversation.messages[-1])


@config_param
@pytest.mark.parametrize("conversation", ANSWERED, ids=repr)
def test_supervised_examples_equal_the_official_template(
    options: dict[str, Any], conversation: Conversation
) -> None:
    """The untrained prefix is the template's generation prompt; the trained tokens are the
    template's rendering of the last turn after it (encoded on their own, as sampled) up to
    ``<|im_end|>``; the template's ``⏎`` after it is untrained."""
    r = renderer(options)
    msgs, tools = conversation.messages, conversation.tools
    if _late_system(msgs) or not _trainable(options, conversation):
        with pytest.raises(ValueError, match=r"^messages\[\d+\]"):
            r.build_supervised_example(msgs, tools)
        return
    prompt_text = official_text(options, msgs[:-1], tools, True)
    full = official_text(options, msgs, tools, False)
    assert full.startswith(prompt_text) and full.endswith("<|im_end|>\n")
    prompt = template_ids(prompt_text)
    trained = template_ids(full[len(prompt_text) : -1])
    example = r.build_supervised_example(msgs, tools)
    assert example.tokens.tolist() == [*prompt, *trained, *template_ids("\n")]
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * len(trained) + [0.0]


def _expected_parts(message: dict[str, Any], thinking: bool) -> list[Any]:
    """The message as the format carries it: reasoning and text trimmed (the template's
    ``|trim``) in NFC (the tokenizer's normalisation), calls with the arguments a server
    hands the template."""
    parts: list[Any] = []
    if thinking and _reasoning(message):
        parts.append(ThinkingPart(unicodedata.normalize("NFC", _reasoning(message))))
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p["text"] for p in content if p.get("type") == "text")
    if (content or "").strip():
        parts.append(TextPart(unicodedata.normalize("NFC", content.strip())))
    for c in server_messages([message])[0].get("tool_calls") or []:
        arguments = json.dumps(c["function"]["arguments"], ensure_ascii=False)
        parts.append(ToolCallPart(c["function"]["name"], arguments))
    return parts


def _completion(r: Qwen36Renderer, msgs: list[dict[str, Any]], tools: Any) -> list[int]:
    """The trained tokens of the last turn, up to and including ``<|im_end|>``."""
    example = r.build_supervised_example(msgs, tools)
    weights = example.weights.tolist()
    return example.tokens.tolist()[weights.index(1.0) : len(weights) - 1]


TRAINED = [
    pytest.param(o, c, id=f"{_label(o)}-{c.id}")
    for o in CONFIGS
    for c in ANSWERED
    if _trainable(o, c) and not _late_system(c.messages)
]


@pytest.mark.parametrize(("options", "conversation"), TRAINED)
def test_trained_turns_parse_back_to_the_message_streaming_as_in_one_shot(
    options: dict[str, Any], conversation: Conversation
) -> None:
    r = renderer(options)
    msgs, tools = conversation.messages, conversation.tools
    completion = _completion(r, msgs, tools)
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    got = [
        ToolCallPart(p.name, p.arguments) if isinstance(p, ToolCallPart) else p
        for p in result.message.parts
    ]
    assert got == _expected_parts(msgs[-1], _thinking(options))
    for cut in range(0, len(completion) + 1, max(1, len(completion) // 40)):
        parser = r.stream_parser()
        parser.feed(completion[:cut])
        parser.feed(completion[cut:])
        assert parser.finish() == result, cut


def test_tml_renderers_qwen35_parser_reads_every_trained_turn_as_we_do() -> None:
    """tml's ``Qwen35`` parser (the same grammar) after the same generation prompt reads
    each trained completion of the corpus into the same reasoning, text and calls: all 60
    with thinking on (30 per option set; tml refuses the 2 without content)."""
    pytest.importorskip("tml_renderers")
    from tml_renderers import renderers as tml

    from tests.tml_oracle import OracleConfig, our_items, parsed_items

    oracle = OracleConfig("qwen3.6", SOURCE, {}, lambda: tml.Qwen35(), "tml-Qwen35-for-qwen3.6")
    compared = 0
    for options, conversation in (p.values for p in TRAINED):
        assert isinstance(options, dict) and isinstance(conversation, Conversation)
        if not _thinking(options):
            continue  # tml's disable_thinking() prompt differs; its parser is the same
        r = renderer(options)
        msgs, tools = conversation.messages, conversation.tools
        ours = our_items(r.parse_response(_completion(r, msgs, tools)).message)
        if not ours:
            continue
        assert parsed_items(oracle, msgs[:-1], tools, _completion(r, msgs, tools)) == ours
        compared += 1
    assert compared == 60


# -- what Qwen3.6's template changed from Qwen3.5's ------------------------------------------


def _call_turn(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]


def test_scalar_arguments_are_json_as_the_template_writes_them_and_parse_back() -> None:
    """``tojson`` for every non-string value (Qwen3.5 writes ``True``/``None``)."""
    r = renderer({})
    arguments = {"s": "x", "b": True, "f": False, "n": None, "x": 1.5, "i": 3, "d": {"k": [1]}}
    msgs = _call_turn(arguments)
    text = official_text({}, msgs, None, False)
    for key, value in [("b", "true"), ("f", "false"), ("n", "null"), ("x", "1.5")]:
        assert f"<parameter={key}>\n{value}\n</parameter>" in text
    example = r.build_supervised_example(msgs)
    assert r.decode(example.tokens.tolist()) == text
    (call,) = r.parse_response(_completion(r, msgs, None)).message.tool_calls
    assert call.parsed_arguments() == arguments
    qwen35 = get_renderer("qwen3.5", tokenizer())
    assert "<parameter=b>\nTrue\n" in qwen35.decode(qwen35.build_generation_prompt(msgs))


def test_preserve_thinking_keeps_history_reasoning_as_the_template_does() -> None:
    msgs = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
    ]
    for options in ({}, {"preserve_thinking": True}):
        got = renderer(options).build_generation_prompt(msgs)
        assert got == template_ids(official_text(options, msgs, None, True))
    text = renderer({"preserve_thinking": True}).decode(got)
    assert "<|im_start|>assistant\n<think>\nr1\n</think>\n\na1<|im_end|>" in text


def test_a_history_turn_trains_only_with_preserve_thinking() -> None:
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "reasoning_content": "r"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    with pytest.raises(ValueError, match=r"^messages\[1\]: qwen3.6 writes a turn before"):
        renderer({}).build_supervised_example(msgs, train_on="all_assistant")
    r = renderer({"preserve_thinking": True})
    example = r.build_supervised_example(msgs, train_on="all_assistant")
    tokens, weights = example.tokens.tolist(), example.weights.tolist()
    prompt = r.build_generation_prompt(msgs[:1])
    assert tokens[: len(prompt)] == prompt and weights[len(prompt)] == 1.0


def test_inline_reasoning_is_read_as_the_template_reads_it() -> None:
    msgs = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "<think>\nPlan.\n</think>\n\nDone. "},
    ]
    r = renderer({})
    assert r.decode(r.build_supervised_example(msgs).tokens.tolist()) == official_text(
        {}, msgs, None, False
    )
    assert r.parse_response(_completion(r, msgs, None)).message.parts == (
        ThinkingPart("Plan."),
        TextPart("Done."),
    )


def test_every_qwen36_model_id_gets_the_qwen36_renderer() -> None:
    for model_id in Qwen36Renderer.model_ids:
        r = get_renderer(model_id, tokenizer())
        assert r.name == "qwen3.6" and isinstance(r, Qwen36Renderer)
