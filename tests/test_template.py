"""The template renderer: the raw template's ids (message text as ordinary text, the
places it differs detected), the format spec inferred from templates, templates of other
families written here from their published format descriptions (over Qwen3's tokenizer),
the registry fallback, pickling, and the command line.

Agreement with the specialised renderers on the six cached models is
``tests/test_template_agreement.py``.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2.sandbox
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import renderers
from renderers import Message, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.core.grammars import bare_json_calls, xml_call_builder
from renderers.template import FormatSpec, TemplateRenderer
from tests import strategies
from tests import test_gpt_oss as gpt_oss
from tests import test_qwen3 as qwen3_tests
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, TOOLS, Conversation, call, prompts_of, result
from tests.oracle import hf_template_ids, official_kimi_template
from tests.training import supervised_or_dropped

QWEN3 = "Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def qwen3_generic() -> TemplateRenderer:
    return TemplateRenderer(tokenizer_for(QWEN3))


def ids_of(text: str) -> list[int]:
    """Template text tokenized the way apply_chat_template tokenizes it."""
    ids: list[int] = tokenizer_for(QWEN3).encode(text, add_special_tokens=False)
    return ids


# -- the raw template's ids ------------------------------------------------------------------

PARITY = [c for c in CORPUS if "adversarial" not in c.tags]


@pytest.mark.parametrize("conv", PARITY, ids=repr)
def test_generation_prompts_equal_apply_chat_template(
    qwen3_generic: TemplateRenderer, conv: Conversation
) -> None:
    """Against transformers itself (list content joined, as every renderer writes it)."""
    tok = tokenizer_for(QWEN3)
    for prompt in prompts_of(conv):
        expected = hf_template_ids(
            tok, qwen3_tests.template_input(prompt), conv.tools, add_generation_prompt=True
        )
        assert qwen3_generic.build_generation_prompt(prompt, conv.tools) == expected
        assert qwen3_generic.differences(prompt, conv.tools) == ()


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("conv", gpt_oss.PARITY[:20], ids=repr)
def test_gpt_oss_supervised_tokens_equal_apply_chat_template(conv: Conversation) -> None:
    tok = tokenizer_for("openai/gpt-oss-20b")
    generic = TemplateRenderer(tok)
    expected = hf_template_ids(
        tok, gpt_oss.template_input(conv.messages), conv.tools, add_generation_prompt=False
    )
    # Every turn is trained: reasoning the template drops is refused, then dropped on request.
    example, _ = supervised_or_dropped(generic, conv.messages, conv.tools, train_on="all")
    assert example.tokens.tolist() == expected


def test_control_token_spellings_in_message_text_stay_text_and_are_reported(
    qwen3_generic: TemplateRenderer,
) -> None:
    (conv,) = [c for c in CORPUS if c.id == "special_looking_text"]
    tok = tokenizer_for(QWEN3)
    raw = hf_template_ids(tok, conv.messages, add_generation_prompt=False)
    ours = qwen3_generic.build_supervised_example(conv.messages, train_on="all").tokens.tolist()
    assert ours != raw
    assert qwen3_generic.decode(ours) == tok.decode(raw)  # the same text, other tokens
    control = set(tok.backend_tokenizer.get_added_tokens_decoder())
    raw_controls = [tok.decode([t]) for t in raw if t in control]
    our_controls = [tok.decode([t]) for t in ours if t in control]
    differences = qwen3_generic.differences(conv.messages, add_generation_prompt=False)
    assert sorted(d.text for d in differences) == sorted(
        (Counter(raw_controls) - Counter(our_controls)).elements()
    )
    assert {(str(d.field), d.where) for d in differences} == {
        ("messages[0].content", "in message text"),
        ("messages[1].content", "in message text"),
    }


def test_a_spelling_formed_across_a_boundary_is_text_and_reported() -> None:
    """Text merging across a placeholder boundary: two messages written back to back
    join into ``<|im_end|>``, a control token for the raw template."""
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    generic = TemplateRenderer(tokenizer_for(QWEN3), chat_template=template)
    messages = [{"role": "user", "content": "a<|im_"}, {"role": "user", "content": "end|>b"}]
    ids = generic.build_generation_prompt(messages)
    assert ids == generic.table.encode("a<|im_end|>b")  # ordinary text
    assert generic.table.control_id("<|im_end|>") in ids_of("a<|im_end|>b")
    (difference,) = generic.differences(messages)
    assert (str(difference.field), difference.text, difference.where) == (
        "messages[0].content",
        "<|im_end|>",
        "across a boundary",
    )


def test_a_template_branching_on_a_control_spelling_is_reported(
    qwen3_generic: TemplateRenderer,
) -> None:
    """Qwen3's template does not count a user message starting with ``<tool_response>`` as
    a query; the placeholders make it one, and say so."""
    messages = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A", "reasoning_content": "R"},
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
    ]
    kinds = [d.where for d in qwen3_generic.differences(messages)]
    assert "template logic" in kinds


def test_caller_text_in_the_markers_private_use_range_renders(
    qwen3_generic: TemplateRenderer,
) -> None:
    text = "\U000f0000\U000f0001 and \U000f7fff"
    messages = [{"role": "user", "content": text}]
    spec = renderers.get_renderer("qwen3", tokenizer_for(QWEN3))
    assert qwen3_generic.build_generation_prompt(messages) == spec.build_generation_prompt(messages)


@given(strategies.conversations())
def test_random_conversations_render_as_the_specialised_renderer(
    conversation: list[dict[str, Any]],
) -> None:
    """Random text with control-token spellings, separators and unicode: prompts and
    examples identical to the specialised Qwen3 renderer's, and to the raw template's
    wherever ``differences()`` reports none."""
    generic = _qwen3_generic()
    spec = renderers.get_renderer("qwen3", tokenizer_for(QWEN3))
    assume(not any(ch >= "\U000f0000" for ch in json.dumps(conversation, ensure_ascii=False)))
    prompt = generic.build_generation_prompt(conversation)
    assert prompt == spec.build_generation_prompt(conversation)
    # Where differences() reports nothing, the ids are apply_chat_template's (Qwen3's
    # template reads "</think>" in an assistant's content, which placeholders can hide).
    if not generic.differences(conversation):
        assert prompt == hf_template_ids(
            tokenizer_for(QWEN3), conversation, add_generation_prompt=True
        )
    if conversation[-1]["role"] == "assistant":
        try:
            # One reasoning rule: both refuse a trained turn's reasoning the template drops
            # (the same turn first), and drop it when told to.
            theirs, refused = supervised_or_dropped(spec, conversation, train_on="all_assistant")
        except ValueError as exc:
            # A token holding trained and untrained text: neither renderer trains it.
            if "cannot be trained" not in str(exc):
                raise
            with pytest.raises(ValueError, match="cannot be trained"):
                supervised_or_dropped(generic, conversation, train_on="all_assistant")
            return
        ours, generic_refused = supervised_or_dropped(
            generic, conversation, train_on="all_assistant"
        )
        assert generic_refused == refused
        assert ours.tokens.tolist() == theirs.tokens.tolist()
        assert ours.weights.tolist() == theirs.weights.tolist()


@pytest.mark.parametrize("content", ["</think>", "plan</think>", "<think>a</think>b"])
def test_a_template_cutting_protected_text_is_a_reported_difference(
    qwen3_generic: TemplateRenderer, content: str
) -> None:
    """Qwen3's template splits an assistant's content at "</think>"; the placeholders that
    keep the spelling ordinary text make it render otherwise. differences() says so."""
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": content, "tool_calls": [call("f", {}, "c1")]},
        {"role": "tool", "content": "r"},
    ]
    raw = hf_template_ids(tokenizer_for(QWEN3), messages, add_generation_prompt=True)
    ours = qwen3_generic.build_generation_prompt(messages)
    found = qwen3_generic.differences(messages)
    assert (ours == raw) == (found == ()), found
    if ours != raw:
        assert [d.where for d in found] == ["template logic"]


_GENERIC: dict[str, TemplateRenderer] = {}


def _qwen3_generic() -> TemplateRenderer:
    if "qwen3" not in _GENERIC:
        _GENERIC["qwen3"] = TemplateRenderer(tokenizer_for(QWEN3))
    return _GENERIC["qwen3"]


# -- the untrained prefix and dropped content -------------------------------------------------


def test_a_trained_turn_whose_reasoning_the_template_drops_is_an_error() -> None:
    generic = TemplateRenderer(tokenizer_for("deepseek-ai/DeepSeek-V3.1"))
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add."},
    ]
    with pytest.raises(
        ValueError,
        match=r"^messages\[1\]: the chat template cannot write the reasoning.*"
        r"reasoning='drop'",
    ):
        generic.build_supervised_example(messages)
    without = generic.build_supervised_example(
        [*messages[:1], {"role": "assistant", "content": "4"}]
    )
    assert without.num_trained > 0
    dropped = generic.build_supervised_example(messages, reasoning="drop")
    assert dropped.tokens.tolist() == without.tokens.tolist()
    assert dropped.weights.tolist() == without.weights.tolist()


def test_history_reasoning_of_a_trained_turn_follows_the_one_reasoning_rule() -> None:
    """Qwen3's template drops the reasoning of turns before the last user query: training
    such a turn is refused naming the option, as the Qwen3 renderer does, and
    ``reasoning='drop'`` gives the specialised renderer's tokens and weights."""
    tok = tokenizer_for(QWEN3)
    generic = TemplateRenderer(tok)
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add."},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "Add again."},
    ]
    specialised = renderers.get_renderer("qwen3", tok)
    for r in (generic, specialised):
        with pytest.raises(ValueError, match=r"^messages\[1\]: .*reasoning='drop'"):
            r.build_supervised_example(messages, train_on="all_assistant")
    ours = generic.build_supervised_example(messages, train_on="all_assistant", reasoning="drop")
    theirs = specialised.build_supervised_example(
        messages, train_on="all_assistant", reasoning="drop"
    )
    assert ours.tokens.tolist() == theirs.tokens.tolist()
    assert ours.weights.tolist() == theirs.weights.tolist()
    # Generation prompts never fail on history reasoning.
    assert generic.build_generation_prompt(messages[:3]) == specialised.build_generation_prompt(
        messages[:3]
    )


def test_a_template_that_rerenders_the_history_is_an_error_naming_the_turns() -> None:
    """gpt-oss drops a tool-calling turn's analysis once an answer follows: the untrained
    prefix of the answer would not be its generation prompt."""
    (conv,) = [c for c in CORPUS if c.id == "multi_step_tools"]
    generic = TemplateRenderer(tokenizer_for("openai/gpt-oss-20b"))
    with pytest.raises(ValueError, match=r"^messages\[5\]: .* \(inside messages\[1\]\)"):
        generic.build_supervised_example(conv.messages, conv.tools)


def test_untrained_prefix_is_the_generation_prompt(qwen3_generic: TemplateRenderer) -> None:
    for conv in PARITY:
        if conv.messages[-1]["role"] != "assistant" or len(conv.messages) < 2:
            continue
        example = qwen3_generic.build_supervised_example(conv.messages, conv.tools)
        prompt = qwen3_generic.build_generation_prompt(conv.messages[:-1], conv.tools)
        assert example.tokens[: len(prompt)].tolist() == prompt, conv.id
        assert not example.weights[: len(prompt)].any(), conv.id
        assert example.weights[len(prompt)] == 1, conv.id


def test_options_are_the_templates_keyword_arguments(qwen3_generic: TemplateRenderer) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    off = qwen3_generic.build_generation_prompt(messages, enable_thinking=False)
    assert off == hf_template_ids(
        tokenizer_for(QWEN3), messages, add_generation_prompt=True, enable_thinking=False
    )
    # The template reads enable_thinking; reasoning is the library's rule, every renderer's,
    # and drafted_calls its parsing choice.
    assert qwen3_generic.option_names == ("drafted_calls", "enable_thinking", "reasoning")
    with pytest.raises(TypeError, match=r"option reasoning: expected 'error' or 'drop'"):
        qwen3_generic.build_generation_prompt(messages, reasoning="keep")
    with pytest.raises(TypeError, match=r"option drafted_calls: expected 'reasoning' or 'call'"):
        qwen3_generic.build_generation_prompt(messages, drafted_calls="yes")
    assert TemplateRenderer(tokenizer_for(QWEN3), drafted_calls="call").changed_options() == {
        "drafted_calls": "call"
    }
    with pytest.raises(TypeError, match=r"unknown option\(s\) 'thinking' .*enable_thinking"):
        qwen3_generic.build_generation_prompt(messages, thinking=True)
    r = TemplateRenderer(tokenizer_for(QWEN3), enable_thinking=False)
    assert r.build_generation_prompt(messages) == off
    assert r.changed_options() == {"enable_thinking": False}
    assert TemplateRenderer.options_from_text({"enable_thinking": "false", "x": "low"}) == {
        "enable_thinking": False,
        "x": "low",
    }


# -- spec inference on the six models ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "tool_calls", "think", "stop"),
    [
        (QWEN3, "json_in_tags", ("<think>", "</think>"), ("<|im_end|>",)),
        ("deepseek-ai/DeepSeek-V3", "deepseek_v3", None, ("<｜end▁of▁sentence｜>",)),
        (
            "deepseek-ai/DeepSeek-V3.1",
            "deepseek_v3.1",
            ("<think>", "</think>"),
            ("<｜end▁of▁sentence｜>",),
        ),
        ("moonshotai/Kimi-K2-Instruct", "kimi", None, ("<|im_end|>",)),
        ("moonshotai/Kimi-K2-Thinking", "kimi", ("<think>", "</think>"), ("<|im_end|>",)),
        ("openai/gpt-oss-20b", "harmony", None, ("<|return|>", "<|call|>")),
    ],
)
def test_the_spec_is_inferred_from_template_and_vocabulary(
    model_id: str, tool_calls: str, think: Any, stop: tuple[str, ...]
) -> None:
    generic = TemplateRenderer(tokenizer_for(model_id))
    assert generic.spec is not None
    assert (generic.spec.tool_calls, generic.spec.think, generic.spec.stop) == (
        tool_calls,
        think,
        stop,
    )
    assert generic.spec_origin.startswith("inferred")
    assert any(n.startswith("tool calls") for n in generic.spec_notes)
    spec = renderers.get_renderer(model_id)
    assert set(generic.stop_token_ids) <= set(spec.stop_token_ids)


def test_qwen3_spec_is_the_specialised_grammar(qwen3_generic: TemplateRenderer) -> None:
    """Inferred separators and tokens are Qwen3's; only ``<|endoftext|>`` is missing (it
    comes from generation_config.json, which the offline cache does not hold)."""
    spec = qwen3_generic.spec
    assert spec == FormatSpec(
        tool_calls="json_in_tags",
        call_tags=("<tool_call>", "</tool_call>"),
        think=("<think>", "</think>"),
        stop=("<|im_end|>",),
        ends_message=("<|im_start|>",),
        think_padding="\n",
        after_think="\n\n",
        before_call="\n",
    )


def test_a_given_spec_is_used_and_said(qwen3_generic: TemplateRenderer) -> None:
    assert qwen3_generic.spec is not None
    spec = replace(qwen3_generic.spec, eos=("<|endoftext|>",))
    generic = TemplateRenderer(tokenizer_for(QWEN3), spec=spec)
    assert generic.spec_origin == "given" and generic.spec is spec
    qwen3 = renderers.get_renderer("qwen3", tokenizer_for(QWEN3))
    assert generic.stop_token_ids == qwen3.stop_token_ids
    ids = [*qwen3.table.encode("Hi"), qwen3.end_of_text, *qwen3.table.encode("rest")]
    assert generic.parse_response(ids) == qwen3.parse_response(ids)
    with pytest.raises(ValueError, match=r"spec\.stop: '<\|nope\|>' is not a control token"):
        TemplateRenderer(tokenizer_for(QWEN3), spec=replace(spec, stop=("<|nope|>",)))


@given(st.lists(st.sampled_from(range(151640, 151669)) | st.integers(0, 2000), max_size=40))
def test_random_ids_parse_as_the_specialised_parser_with_the_same_spec(ids: list[int]) -> None:
    """With ``<|endoftext|>`` given (what generation_config.json says), the inferred spec
    parses every id sequence as the Qwen3 renderer does, batch and streaming."""
    base = _qwen3_generic().spec
    assert base is not None
    key = "qwen3-eos"
    if key not in _GENERIC:
        _GENERIC[key] = TemplateRenderer(
            tokenizer_for(QWEN3), spec=replace(base, eos=("<|endoftext|>",))
        )
    generic = _GENERIC[key]
    qwen3 = renderers.get_renderer("qwen3", tokenizer_for(QWEN3))
    batch = generic.parse_response(ids)
    assert batch == qwen3.parse_response(ids)
    parser = generic.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == batch


# -- templates of other families, written here from their published formats -----------------

# ChatML turns with Hermes function calling (NousResearch's Hermes-2-Pro format, also
# Qwen2.5's): tools in <tools></tools>, calls as JSON {"name", "arguments"} in <tool_call>,
# results in <tool_response>.
HERMES = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- 'You are a function calling AI model. You are provided with function signatures "
    "within <tools></tools> XML tags.\\n<tools>\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "{{- '</tools>\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags.<|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls or [] %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + tool_call.function.name + \'", "arguments": \' '
    "+ (tool_call.function.arguments | tojson) + '}\\n</tool_call>' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>tool\\n<tool_response>\\n' + message.content "
    "+ '\\n</tool_response><|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# ChatML turns with Qwen3-Coder's tool calls (its model card): reasoning in <think>,
# each call <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...
# </function>\n</tool_call>, string values raw and others as JSON.
QWEN3_CODER = (
    "{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}"
    "{%- set rest = messages[1:] %}{%- else %}{%- set system = '' %}"
    "{%- set rest = messages %}{%- endif %}"
    "{%- if system or tools %}{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}{{- ('\\n\\n' if system else '') + '# Tools\\n\\nYou have access to the "
    "following functions:\\n\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with:\\n<tool_call>\\n<function="
    "example_function_name>\\n<parameter=example_parameter>\\nvalue\\n</parameter>\\n"
    "</function>\\n</tool_call>' }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in rest %}"
    "{%- if message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.reasoning_content %}{{- '<think>\\n' + "
    "message.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}{%- endif %}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls or [] %}"
    "{{- '\\n<tool_call>\\n<function=' + tool_call.function.name + '>\\n' }}"
    "{%- for name, value in tool_call.function.arguments | items %}"
    "{{- '<parameter=' + name + '>\\n' + (value if value is string else value | tojson) "
    "+ '\\n</parameter>\\n' }}{%- endfor %}"
    "{{- '</function>\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content "
    "+ '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content "
    "+ '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# ChatML turns with Llama 3.1's JSON tool calls (its model card): a call is the whole
# message, {"name": NAME, "parameters": {...}}; results come back in an "ipython" turn.
BARE_JSON = (
    "{%- if tools %}{{- '<|im_start|>system\\nGiven the following functions, respond with "
    "a JSON for a function call with its proper arguments that best answers the given "
    'prompt.\\n\\nRespond in the format {"name": function name, "parameters": dictionary '
    "of argument name and its value}. Do not use variables.\\n\\n' }}"
    "{%- for tool in tools %}{{- tool | tojson + '\\n\\n' }}{%- endfor %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}"
    "{%- set tool_call = message.tool_calls[0].function %}"
    '{{- \'<|im_start|>assistant\\n{"name": "\' + tool_call.name + \'", "parameters": \' '
    "+ (tool_call.arguments | tojson) + '}<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>ipython\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content "
    "+ '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

TEMPLATES = {"hermes": HERMES, "qwen3_coder": QWEN3_CODER, "bare_json": BARE_JSON}


def generic_for(name: str) -> TemplateRenderer:
    key = f"template-{name}"
    if key not in _GENERIC:
        _GENERIC[key] = TemplateRenderer(tokenizer_for(QWEN3), chat_template=TEMPLATES[name])
    return _GENERIC[key]


def raw_render(name: str, messages: list[dict[str, Any]], tools: Any, gen: bool) -> list[int]:
    """The oracle: the template rendered by plain jinja2 (dict arguments, as chat data
    holds them), tokenized by the tokenizer."""
    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    text = env.from_string(TEMPLATES[name]).render(
        messages=messages, tools=tools, add_generation_prompt=gen
    )
    return ids_of(text)


WEATHER_CALL = call("get_weather", {"city": "Paris", "days": 3, "detail": True}, "c1")
EXCHANGES: dict[str, list[list[dict[str, Any]]]] = {
    "hermes": [
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [WEATHER_CALL]},
        ],
        [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [WEATHER_CALL, call("get_weather", {"city": "Rome"}, "c2")],
            },
            result("c1", "sunny"),
            result("c2", "rain"),
            {"role": "assistant", "content": "Sunny in Paris, rain in Rome."},
        ],
    ],
    "qwen3_coder": [
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "reasoning_content": "Use the tool.",
                "content": "Checking.",
                "tool_calls": [WEATHER_CALL],
            },
        ],
        [
            {"role": "user", "content": "Search"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("search", {"query": "a\nb", "limit": 2, "tags": ["x"]}, "s")],
            },
            result("s", "nothing"),
            {"role": "assistant", "content": "Nothing found.", "reasoning_content": "Empty."},
        ],
    ],
    "bare_json": [
        [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
        ],
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! {not a call}"},
        ],
    ],
}
EXPECTED_SPECS = {
    "hermes": ("json_in_tags", ("<tool_call>", "</tool_call>"), None, "\n"),
    "qwen3_coder": ("xml_in_tags", ("<tool_call>", "</tool_call>"), ("<think>", "</think>"), "\n"),
    "bare_json": ("bare_json", None, None, ""),
}
EXCHANGE_CASES = [
    pytest.param(name, messages, id=f"{name}-{k}")
    for name, cases in EXCHANGES.items()
    for k, messages in enumerate(cases)
]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_the_spec_of_a_written_template_is_inferred(name: str) -> None:
    spec = generic_for(name).spec
    assert spec is not None
    assert (spec.tool_calls, spec.call_tags, spec.think, spec.before_call) == EXPECTED_SPECS[name]
    assert spec.stop == ("<|im_end|>",)


@pytest.mark.parametrize(("name", "messages"), EXCHANGE_CASES)
def test_written_templates_render_as_jinja_and_parse_back(
    name: str, messages: list[dict[str, Any]]
) -> None:
    generic = generic_for(name)
    assert generic.build_supervised_example(messages, TOOLS, train_on="all").tokens.tolist() == (
        raw_render(name, messages, TOOLS, False)
    )
    for prompt in prompts_of(Conversation("x", messages)):
        assert generic.build_generation_prompt(prompt, TOOLS) == raw_render(
            name, prompt, TOOLS, True
        )
    example = generic.build_supervised_example(messages, TOOLS)
    prompt = generic.build_generation_prompt(messages[:-1], TOOLS)
    assert example.tokens[: len(prompt)].tolist() == prompt
    tokens = example.tokens.tolist()
    end = tokens.index(generic.table.control_id("<|im_end|>"), len(prompt)) + 1
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * (end - len(prompt)) + [0.0] * (
        len(tokens) - end
    )
    sampled = tokens[len(prompt) : end]
    parsed = generic.parse_response(sampled)
    assert parsed.termination.value == "stop"
    expected = [  # these formats write no call ids
        replace(p, id=None) if isinstance(p, ToolCallPart) else p
        for p in Message.from_dict(messages[-1]).parts
    ]
    assert list(parsed.message.parts) == expected
    for cut in range(len(sampled) + 1):  # streaming equals batch at every split
        parser = generic.stream_parser()
        parser.feed(sampled[:cut])
        parser.feed(sampled[cut:])
        assert parser.finish() == parsed


def test_xml_values_that_read_as_json_become_json(qwen3_generic: TemplateRenderer) -> None:
    build = xml_call_builder("</tool_call>")
    body = (
        "\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\nplain text\n"
        '</parameter>\n<parameter=o>\n{"a": [1, null]}\n</parameter>\n</function>\n'
    )
    assert build([body], False) == ToolCallPart(
        "f", '{"n": 42, "s": "plain text", "o": {"a": [1, null]}}'
    )
    bad = build(["<function=f>\n<parameter=x>\n1\n</parameter>\ntrailing\n</function>"], False)
    assert isinstance(bad, UnparsedToolCallPart) and bad.name == "f"
    cut = build(["\n<function=g>\n<parameter=x>\n1"], True)
    assert cut == UnparsedToolCallPart(
        "\n<function=g>\n<parameter=x>\n1", "cut off before </tool_call>", name="g", incomplete=True
    )
    assert isinstance(build(["no function"], False), UnparsedToolCallPart)


def test_bare_json_calls() -> None:
    assert bare_json_calls(' {"name": "f", "parameters": {"a": 1}} ') == [
        ToolCallPart("f", '{"a": 1}')
    ]
    assert bare_json_calls(
        '[{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": "y"}}]'
    ) == [
        ToolCallPart("f", "{}"),
        ToolCallPart("g", '{"x": "y"}'),
    ]
    for text in ("hello", '{"name": "f"}', "{broken", "[]", '{"a": 1} tail'):
        assert bare_json_calls(text) is None, text


def test_bare_json_text_is_held_until_its_region_ends() -> None:
    generic = generic_for("bare_json")
    table = generic.table
    end = table.control_id("<|im_end|>")
    call_ids = [*table.encode('{"name": "f", "parameters": {"a": 1}}'), end]
    parser = generic.stream_parser()
    events = [e for t in call_ids[:-1] for e in parser.feed([t])]
    assert events == []  # could still be a call
    result_ = parser.finish()  # cut off: not a call, the text is kept
    assert result_.message.parts == (
        TextPart('{"name": "f", "parameters": {"a": 1}}', incomplete=True),
    )
    assert generic.parse_response(call_ids).message.parts == (ToolCallPart("f", '{"a": 1}'),)
    text = [*table.encode("Plain answer"), end]
    assert generic.parse_response(text).message.content == "Plain answer"


def test_the_generation_prompt_can_open_reasoning() -> None:
    """A template whose prompt ends with ``<think>\\n`` (Qwen3-Thinking-2507 style): the
    completion starts inside the reasoning."""
    template = HERMES.replace(
        "{{- '<|im_start|>assistant\\n' }}{%- endif %}",
        "{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}",
    )
    spec = FormatSpec(
        think=("<think>", "</think>"),
        stop=("<|im_end|>",),
        think_padding="\n",
        after_think="\n\n",
    )
    generic = TemplateRenderer(tokenizer_for(QWEN3), chat_template=template, spec=spec)
    table = generic.table
    ids = [
        *table.encode("Reason.\n"),
        table.control_id("</think>"),
        *table.encode("\n\nAnswer."),
        table.control_id("<|im_end|>"),
    ]
    assert generic.parse_response(ids).message.parts == (
        ThinkingPart("Reason."),
        TextPart("Answer."),
    )
    rollout = generic.rollout([{"role": "user", "content": "Q"}])
    assert rollout.add_completion(ids).message.parts == (
        ThinkingPart("Reason."),
        TextPart("Answer."),
    )


# -- registry, pickling, errors ------------------------------------------------------------------


def test_generic_true_forces_the_template_renderer_and_says_so() -> None:
    r = renderers.get_renderer("qwen3", tokenizer_for(QWEN3), generic=True)
    assert isinstance(r, TemplateRenderer) and r.name == "template"
    assert renderers.get_renderer("qwen3", tokenizer_for(QWEN3)).name == "qwen3"


@pytest.fixture(scope="module")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory the registry does not know: Qwen3's tokenizer files (linked
    from the hub cache), the Hermes template and a generation_config.json."""
    from huggingface_hub import hf_hub_download

    directory = tmp_path_factory.mktemp("hermes-model")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        config = Path(hf_hub_download(QWEN3, name))
        if name == "tokenizer_config.json":
            data = json.loads(config.read_text(encoding="utf-8"))
            data.pop("chat_template", None)
            (directory / name).write_text(json.dumps(data), encoding="utf-8")
        else:
            os.symlink(config, directory / name)
    (directory / "chat_template.jinja").write_text(HERMES, encoding="utf-8")
    (directory / "generation_config.json").write_text(
        json.dumps({"eos_token_id": [151645, 151643]}), encoding="utf-8"
    )
    return directory


def test_a_model_without_a_specialised_renderer_gets_the_template_renderer(
    local_model: Path,
) -> None:
    r = renderers.get_renderer(str(local_model))
    assert isinstance(r, TemplateRenderer) and r.model_id == str(local_model)
    assert r.spec is not None and r.spec.eos == ("<|endoftext|>",)  # generation_config.json
    assert r.stop_token_ids == (151645, 151643)
    messages = EXCHANGES["hermes"][1]
    assert r.build_generation_prompt(messages[:-1], TOOLS) == raw_render(
        "hermes", messages[:-1], TOOLS, True
    )
    clone = pickle.loads(pickle.dumps(r))
    assert len(pickle.dumps(r)) < 2000  # by model id, not the tokenizer
    assert clone.build_generation_prompt(messages[:-1], TOOLS) == r.build_generation_prompt(
        messages[:-1], TOOLS
    )


def test_an_unknown_name_without_a_tokenizer_is_a_clear_error() -> None:
    with pytest.raises(
        OSError, match=r"'no-such-renderer' is not a renderer name \(known: .*qwen3"
    ):
        renderers.get_renderer("no-such-renderer")


def test_caller_errors_name_the_message(qwen3_generic: TemplateRenderer) -> None:
    interleaved = Message("assistant", [TextPart("a"), ToolCallPart("f", "{}"), TextPart("b")])
    with pytest.raises(ValueError, match=r"^messages\[1\]\.content\[2\]: a chat template takes"):
        qwen3_generic.build_supervised_example([{"role": "user", "content": "x"}, interleaved])
    with pytest.raises(ValueError, match=r"^messages\[0\]\.role: 'a b' is not a role name"):
        qwen3_generic.build_generation_prompt([{"role": "a b", "content": "x"}])
    with pytest.raises(ValueError, match=r"^tools: expected a list"):
        qwen3_generic.build_generation_prompt([{"role": "user", "content": "x"}], tools={"a": 1})  # type: ignore[arg-type]
    raising = TemplateRenderer(
        tokenizer_for(QWEN3), chat_template="{{ raise_exception('only users here') }}"
    )
    with pytest.raises(
        ValueError, match="the chat template failed: TemplateError: only users here"
    ):
        raising.build_generation_prompt([{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="does not compile"):
        TemplateRenderer(tokenizer_for(QWEN3), chat_template="{% if %}")


# -- the command line -------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``renderers ARGS`` in this process (the subprocess wiring is tested once below)."""
    from renderers.cli import main

    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_inspect_reports_renderer_tokens_spec_and_invariant(
    local_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "renderers.cli", "inspect", "qwen3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["renderer"] == "qwen3"
    assert report["stop_tokens"] == {"<|im_end|>": 151645, "<|endoftext|>": 151643}
    assert "<think>" in report["control_tokens"]
    assert report["template"]["spec"][0] == "tool calls: json_in_tags in <tool_call>…</tool_call>"
    outcomes = report["untrained_prefix"].values()
    assert [set(case) for case in outcomes] == [{"reasoning", "no reasoning"}] * len(outcomes)
    assert {outcome for case in outcomes for outcome in case.values()} == {"yes"}
    status, out, _ = cli(capsys, "inspect", "openai/gpt-oss-20b", "--json")
    assert status == 0
    after_result = json.loads(out)["untrained_prefix"]["an answer after a tool result"]
    assert after_result["reasoning"].startswith("no: messages[3]: the chat template renders")
    assert after_result["no reasoning"] == "yes"
    status, out, _ = cli(capsys, "inspect", str(local_model), "--color", "never")
    assert status == 0
    assert "renderer: renderer template" in out and "tool calls: json_in_tags" in out
    assert "end of sequence: <|endoftext|>" in out


def test_the_cli_says_which_renderer_it_chose(
    local_model: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    conversation = [{"role": "user", "content": "Hi"}]
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(conversation), encoding="utf-8")
    status, out, err = cli(capsys, "render", "--model", str(local_model), str(path))
    assert status == 0
    chosen = f"renderer template ({local_model} chat template; no specialised renderer)"
    assert err.strip() == f"renderers render: {chosen}"
    assert json.loads(out) == raw_render("hermes", conversation, None, True)
    _, _, err = cli(capsys, "render", "--model", "qwen3", "--generic", str(path))
    assert "renderer template" in err and "--generic" in err
    _, _, err = cli(capsys, "render", "--model", "qwen3", str(path))
    assert err == ""  # a specialised renderer is the expected case: nothing to say


# -- rollouts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_id", [QWEN3, "moonshotai/Kimi-K2-Thinking", "deepseek-ai/DeepSeek-V3.1"]
)
def test_rollouts_keep_the_same_ids_as_the_specialised_renderer(model_id: str) -> None:
    """A tool-calling episode: prompt, sampled call, tool result, next prompt, answer.
    (Kimi: Moonshot's template, the hub cache's being llama.cpp's edited copy; the call
    carries the id Kimi samples, which its template writes.)"""
    spec = renderers.get_renderer(model_id, tokenizer_for(model_id))
    kimi = model_id.startswith("moonshotai")
    generic = TemplateRenderer(
        spec.tokenizer,
        chat_template=official_kimi_template(model_id) if kimi else None,
        sort_tool_keys=kimi,
    )
    user = [{"role": "user", "content": "Weather in Paris?"}]
    call_id = "functions.get_weather:0" if kimi else None
    turn = Message(
        "assistant",
        [TextPart("Checking."), ToolCallPart("get_weather", '{"city": "Paris"}', id=call_id)],
    )
    answer = Message("assistant", "Sunny.")
    rollouts = [spec.rollout(user, tools=TOOLS), generic.rollout(user, tools=TOOLS)]
    for rollout in rollouts:
        example = spec.build_supervised_example([*user, turn], tools=TOOLS)
        rollout.add_completion(example.tokens[example.weights > 0].tolist())
        rollout.add_messages([result(call_id or "c1", "sunny", "get_weather")])
        history = [*user, turn, result(call_id or "c1", "sunny", "get_weather"), answer]
        final = spec.build_supervised_example(history, tools=TOOLS)
        rollout.add_completion(final.tokens[final.weights > 0].tolist())
    assert rollouts[1].tokens.tolist() == rollouts[0].tokens.tolist()
    assert rollouts[1].weights.tolist() == rollouts[0].weights.tolist()
    assert [r.message for r in rollouts[1].results] == [r.message for r in rollouts[0].results]


def test_option_values_may_be_lists_and_renderers_pickle_with_their_options() -> None:
    tok = tokenizer_for("openai/gpt-oss-20b")
    generic = TemplateRenderer(tok, builtin_tools=["browser"], reasoning_effort="high")
    prompt = generic.build_generation_prompt([{"role": "user", "content": "Hi"}])
    assert "Reasoning: high" in generic.decode(prompt) and "## browser" in generic.decode(prompt)
    ids = [*generic.table.encode("Done."), generic.table.control_id("<|return|>")]
    assert generic.parse_response(ids).message.content == "Done."
    clone = pickle.loads(pickle.dumps(generic))
    assert clone.changed_options() == {"builtin_tools": ["browser"], "reasoning_effort": "high"}
    assert clone.build_generation_prompt([{"role": "user", "content": "Hi"}]) == prompt


def test_a_token_holding_prompt_and_trained_text_is_never_trained() -> None:
    """Qwen3 writes a history turn's text right after ``assistant\\n``: text " " merges with
    that newline into one token. Neither renderer trains it (the specialised one says so
    from its writer, the template renderer from the turn's boundary)."""
    conversation = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": " ", "tool_calls": [call("A", {}, "call_0")]},
        {"role": "tool", "tool_call_id": "call_0", "content": "r"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a"},
    ]
    spec = renderers.get_renderer("qwen3", tokenizer_for(QWEN3))
    for renderer in (spec, _qwen3_generic()):
        with pytest.raises(ValueError, match=r"^messages\[1\]: the token '\\n \\n' holds"):
            renderer.build_supervised_example(conversation, train_on="all_assistant")
        # Trained alone (last turn only), the conversation is fine.
        renderer.build_supervised_example(conversation)
