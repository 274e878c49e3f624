"""Qwen3.5 and Qwen3.8 against their oracle (tml-renderers 0.2.1, the official templates
not being available offline) on the shared corpus, and the format's own behaviour.

Where the renderer follows the templates rather than the oracle (documented in
``renderers/qwen3_5.py``), the expected ids are the oracle's with exactly those differences
applied to its text (:func:`qwen_template_text`).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from renderers import (
    Message,
    Renderer,
    Termination,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    get_renderer,
)
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, TOOLS, Conversation, prompts_of
from tests.one_shot import parsed_both_ways
from tests.oracle import server_messages, template_text, trl_template
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

QWEN = [c for c in CONFIGS if c.name in ("qwen3.5", "qwen3.8")]
CASES = [pytest.param(c, conv, id=f"{c!r}-{conv.id}") for c in QWEN for conv in CORPUS]
ANSWERED = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in QWEN
    for conv in CORPUS
    if conv.messages[-1]["role"] == "assistant"
]
"""The conversations that end with an answer: a supervised example trains it."""


def renderer(config: OracleConfig) -> Renderer:
    return get_renderer(config.name, tokenizer_for(config.model_id), **config.options)


def _tojson(value: str) -> str:
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    if isinstance(decoded, (dict, list)):
        return json.dumps(decoded, ensure_ascii=False)
    return value


def qwen_template_text(text: str) -> str:
    """The oracle's text as the templates write it: a blank line (not a newline) between
    a message's text and its first call, nested argument values as ``tojson`` (default
    separators; the oracle writes them compact), nothing after the tool block for an
    empty system message (the templates' ``{%- if content %}``; the oracle writes the
    blank line before it), and no newline before the first call of a message whose text
    is only whitespace (the templates trim it to nothing; the oracle writes the newline)."""
    text = text.replace("</IMPORTANT>\n\n<|im_end|>", "</IMPORTANT><|im_end|>")
    text = text.replace("</think>\n\n\n<tool_call>", "</think>\n\n<tool_call>")
    text = re.sub(r"(?<!<\|im_start\|>assistant)(?<=[^>\n])\n<tool_call>", "\n\n<tool_call>", text)
    return re.sub(
        r"(<parameter=[^>\n]*>\n)(.*?)(\n</parameter>)",
        lambda m: m[1] + _tojson(m[2]) + m[3],
        text,
        flags=re.DOTALL,
    )


def _messages(config: OracleConfig, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return messages if config.reasoning else without_reasoning(messages)


def _late_system(messages: list[dict[str, Any]]) -> bool:
    return any(m["role"] == "system" for m in messages[1:])


LATE_SYSTEM = r"\.role: a system message after the first is an error in qwen3\.[58]'s template"


@pytest.mark.parametrize(("config", "conversation"), CASES)
def test_generation_prompts_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    tokenizer = tokenizer_for(config.model_id)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        if _late_system(messages):
            with pytest.raises(ValueError, match=LATE_SYSTEM):
                r.build_generation_prompt(messages, tools=conversation.tools)
            continue
        oracle = prompt_ids(config, messages, conversation.tools)
        expected = documented_ids(tokenizer, oracle, qwen_template_text)
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_supervised_examples_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    """Tokens and weights; the template's "⏎" after the last ``<|im_end|>`` (untrained)
    is where the oracle stops at the stop token."""
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    if _late_system(messages):
        with pytest.raises(ValueError, match=LATE_SYSTEM):
            r.build_supervised_example(messages, tools=conversation.tools)
        return
    tokens, weights = expected_example(
        config,
        tokenizer_for(config.model_id),
        messages,
        conversation.tools,
        qwen_template_text,
        trailing="\n",
    )
    example = r.build_supervised_example(messages, tools=conversation.tools)
    assert example.tokens.tolist() == tokens
    assert example.weights.tolist() == weights


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_parses_of_trained_turns_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    """Our parse of the sampled tokens of the last answer equals the oracle's (text and
    reasoning stripped, calls by name and decoded arguments)."""
    messages = _messages(config, conversation.messages)
    if _late_system(messages):  # an error (see test_a_system_message_after_the_first...)
        messages = [messages[0], *(m for m in messages[1:] if m["role"] != "system")]
    r = renderer(config)
    example = r.build_supervised_example(messages, tools=conversation.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    if not result.message.parts:  # the oracle raises on a message without content
        assert conversation.id == "empty_assistant"
        return
    assert our_items(result.message) == parsed_items(
        config, messages[:-1], conversation.tools, completion
    )


# -- the documented differences from the oracle -------------------------------------------


@pytest.mark.parametrize("config", QWEN, ids=repr)
@pytest.mark.parametrize("system", ["", "  \n"], ids=["empty", "blank"])
@pytest.mark.parametrize("tools", [None, TOOLS], ids=["no-tools", "tools"])
def test_an_empty_system_message_renders_as_the_oracle(
    config: OracleConfig, system: str, tools: Any
) -> None:
    """An empty system message alone is an empty turn in Qwen3.5's template and nothing
    in Qwen3.8's; after the tool block it adds nothing (the corpus's system messages all
    have text)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]
    oracle = prompt_ids(config, messages, tools)
    expected = documented_ids(tokenizer_for(config.model_id), oracle, qwen_template_text)
    assert renderer(config).build_generation_prompt(messages, tools=tools) == expected


def test_text_and_first_call_are_a_blank_line_apart_as_in_the_template() -> None:
    config = QWEN[0]
    conversation = next(c for c in CORPUS if c.id == "tool_call_with_text")
    r = renderer(config)
    example = r.build_supervised_example(conversation.messages, tools=TOOLS)
    text = r.decode(example.tokens.tolist())
    assert "Let me check.\n\n<tool_call>" in text
    oracle = decode(
        tokenizer_for(config.model_id), prompt_ids(config, conversation.messages, TOOLS)
    )
    assert "Let me check.\n<tool_call>" in oracle


@pytest.mark.parametrize("name", ["qwen3.5", "qwen3.8"])
def test_argument_values_are_written_as_each_template_writes_them(name: str) -> None:
    """Strings as is; nested values as ``tojson``; scalars as Python prints them in
    Qwen3.5 (``|string``) and as JSON in Qwen3.8 (``|tojson``)."""
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    arguments = {"s": "multi\nline ", "b": True, "n": None, "x": 1.5, "d": {"k": ["é", 1]}}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]
    text = r.decode(r.build_supervised_example(messages).tokens.tolist())
    scalars = ("True", "None") if name == "qwen3.5" else ("true", "null")
    body = (
        "<tool_call>\n<function=f>\n<parameter=s>\nmulti\nline \n</parameter>\n"
        f"<parameter=b>\n{scalars[0]}\n</parameter>\n<parameter=n>\n{scalars[1]}\n</parameter>\n"
        '<parameter=x>\n1.5\n</parameter>\n<parameter=d>\n{"k": ["é", 1]}\n</parameter>\n'
        "</function>\n</tool_call><|im_end|>"
    )
    assert body in text


def test_a_system_message_after_the_first_is_an_error_as_in_the_template() -> None:
    r = renderer(QWEN[0])
    messages = [{"role": "user", "content": "Hi"}, {"role": "system", "content": "Late."}]
    with pytest.raises(ValueError, match=r"^messages\[1\]\.role: a system message after the first"):
        r.build_generation_prompt(messages)


def test_qwen35_reads_inline_reasoning_like_the_template_and_qwen38_does_not() -> None:
    answer = {"role": "assistant", "content": "<think>\nPlan.\n</think>\n\n  Done. "}
    messages = [{"role": "user", "content": "Go"}, answer]
    q35 = get_renderer("qwen3.5", tokenizer_for("Qwen/Qwen3.5-27B"))
    q38 = get_renderer("qwen3.8", tokenizer_for("Qwen/Qwen3.8-27B"), reasoning_effort="medium")
    text35 = q35.decode(q35.build_supervised_example(messages).tokens.tolist())
    assert text35.endswith("assistant\n<think>\nPlan.\n</think>\n\nDone.<|im_end|>\n")
    text38 = q38.decode(q38.build_supervised_example(messages).tokens.tolist())
    assert text38.endswith(
        "assistant\n<think>\n\n</think>\n\n<think>\nPlan.\n</think>\n\n  Done.<|im_end|>\n"
    )


def test_preserved_history_is_written_with_the_templates_newlines() -> None:
    """The Qwen3.6+ templates' ``preserve_thinking`` block; the oracle's Qwen3.5 writes
    history reasoning without the newlines (``<think>r</think>``)."""
    r = get_renderer("qwen3.5", tokenizer_for("Qwen/Qwen3.5-27B"), preserve_thinking=True)
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
    ]
    text = r.decode(r.build_generation_prompt(messages))
    assert "<|im_start|>assistant\n<think>\nr1\n</think>\n\na1<|im_end|>\n" in text


# -- the format --------------------------------------------------------------------------


def test_generation_prompt_opens_the_think_block_and_the_parser_starts_inside_it() -> None:
    r = renderer(QWEN[0])
    prompt = r.build_generation_prompt([{"role": "user", "content": "Hi"}])
    assert r.decode(prompt).endswith("<|im_start|>assistant\n<think>\n")
    completion = [*r.table.encode("Plan.\n"), r.think_end, *r.table.encode("\n\nHello"), r.im_end]
    result = r.parse_response(completion)
    assert result.message.parts == (ThinkingPart("Plan."), TextPart("Hello"))
    off = r.parse_response([*r.table.encode("Hello"), r.im_end], enable_thinking=False)
    assert off.message.content == "Hello"


def test_thinking_off_refuses_reasoning_of_the_trained_turn_unless_dropped() -> None:
    r = get_renderer("qwen3.5", tokenizer_for("Qwen/Qwen3.5-27B"), enable_thinking=False)
    messages = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A", "reasoning_content": "R"},
    ]
    with pytest.raises(ValueError, match=r"^messages\[1\]: qwen3.5 with enable_thinking=False"):
        r.build_supervised_example(messages)
    dropped = r.build_supervised_example(messages, reasoning="drop")
    plain = r.build_supervised_example(without_reasoning(messages))
    assert dropped.tokens.tolist() == plain.tokens.tolist()
    prompt = r.build_generation_prompt(messages[:1])
    assert dropped.tokens.tolist()[: len(prompt)] == prompt


@pytest.mark.parametrize(
    ("effort", "instruction"),
    [("xhigh", "Reasoning effort is set to xhigh."), ("low", "Reasoning effort is set to low.")],
)
def test_qwen38_effort_starts_the_system_turn(effort: str, instruction: str) -> None:
    r = get_renderer("qwen3.8", tokenizer_for("Qwen/Qwen3.8-27B"), reasoning_effort=effort)
    messages = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}]
    text = r.decode(r.build_generation_prompt(messages))
    assert text.startswith("<|im_start|>system\n" + instruction)
    assert text.endswith(
        ".\n\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    )
    medium = r.decode(r.build_generation_prompt(messages, reasoning_effort="medium"))
    assert medium.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    off = r.decode(r.build_generation_prompt(messages, enable_thinking=False))
    assert "Reasoning effort" not in off


def test_a_call_drafted_inside_the_reasoning_stays_reasoning() -> None:
    r = renderer(QWEN[0])
    body = "\n<function=f>\n</function>\n"
    completion = [
        *r.table.encode("Maybe "),
        r.tool_call,
        *r.table.encode(body),
        r.tool_call_end,
        r.think_end,
        *r.table.encode("\n\nNo call."),
        r.im_end,
    ]
    result = r.parse_response(completion)
    assert result.message.parts == (
        ThinkingPart("Maybe <tool_call>" + body + "</tool_call>"),
        TextPart("No call."),
    )
    # Reported (issue 13): a drafted call is not a call, which an agent loop wants to know.
    assert result.termination is Termination.MALFORMED
    assert [i.position for i in result.issues] == [len(r.table.encode("Maybe "))]


def test_control_tokens_out_of_place_are_kept_as_text_with_an_issue() -> None:
    r = renderer(QWEN[0])
    completion = [r.think_end, *r.table.encode("\n\nA "), r.tool_call_end]
    completion += [*r.table.encode(" B"), r.im_end]
    result = r.parse_response(completion, enable_thinking=False)
    assert result.message.content == "</think>\n\nA </tool_call> B"
    assert result.termination is Termination.MALFORMED
    assert [i.position for i in result.issues] == [0, completion.index(r.tool_call_end)]


def test_a_marker_sampled_inside_a_call_cuts_the_call_and_is_read_after_it() -> None:
    r = renderer(QWEN[0])
    body = "\n<function=f>\n<parameter=a>\n1"
    head = [r.think_end, *r.table.encode("\n\n"), r.tool_call, *r.table.encode(body)]
    completion = [*head, r.think_end, *r.table.encode(" x"), r.im_end]
    for fed in (False, True):
        if fed:  # token by token, as a stream
            parser = r.stream_parser(_events=False)
            for t in completion:
                parser.feed([t])
            result = parser.finish()
        else:
            result = r.parse_response(completion)
        assert result.message.parts == (
            UnparsedToolCallPart(body, "cut off before </tool_call>", name="f", incomplete=True),
            TextPart("</think> x"),
        )
        cut = len(head)
        assert [i.position for i in result.issues] == [cut, cut]
        assert [i.message for i in result.issues] == [
            "</think> inside a tool call (the call is cut there)",
            "</think> without an open think block (kept as text)",
        ]


def test_a_nested_think_marker_is_reasoning_without_an_issue() -> None:
    r = renderer(QWEN[0])
    completion = [*r.table.encode("a "), r.think, *r.table.encode(" b\n"), r.think_end]
    completion += [*r.table.encode("\n\nc"), r.im_end]
    result = r.parse_response(completion)
    assert result.message.parts == (ThinkingPart("a <think> b"), TextPart("c"))
    assert result.termination is Termination.STOP and not result.issues


def test_xml_calls_parse_into_json_arguments_as_sampled() -> None:
    r = renderer(QWEN[0])
    body = (
        "\n<function=get-weather.v2>\n<parameter=city>\nParis\n</parameter>\n"
        '<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{"a":[1,2]}\n</parameter>\n'
        "<parameter=flag>\nTrue\n</parameter>\n</function>\n"
    )
    completion = [r.think_end, *r.table.encode("\n\n"), r.tool_call, *r.table.encode(body)]
    completion += [r.tool_call_end, r.im_end]
    call = r.parse_response(completion).message.parts[0]
    assert call == ToolCallPart(
        "get-weather.v2", '{"city": "Paris", "days": 3, "opts": {"a":[1,2]}, "flag": "True"}'
    )


def test_a_quoted_value_reads_back_as_the_string_it_spells() -> None:
    """Strings are written raw, so a value sampled as ``"x"`` is that text, quotes included
    (and renders back to it), and an empty key is a key."""
    r = renderer(QWEN[0])
    body = '\n<function=f>\n<parameter=s>\n"x"\n</parameter>\n<parameter=>\n1\n</parameter>\n'
    body += "</function>\n"
    completion = [r.think_end, *r.table.encode("\n\n"), r.tool_call, *r.table.encode(body)]
    completion += [r.tool_call_end, r.im_end]
    call = r.parse_response(completion).message.parts[0]
    assert call == ToolCallPart("f", '{"s": "\\"x\\"", "": 1}')
    rendered = r.build_supervised_example(
        [{"role": "user", "content": "q"}, Message("assistant", [call])]
    )
    assert r.parse_response(rendered.tokens[rendered.weights > 0].tolist()).message.parts == (call,)


@pytest.mark.parametrize(
    "body",
    [
        "\n<function=f>\n<parameter=a>\n1\n</function>\n",  # parameter not closed
        '\n{"name": "f", "arguments": {}}\n',  # Qwen3's JSON calls are not this format
        "\n<function=>\n</function>\n",
        "\n<function=f>\nstray text\n</function>\n",
    ],
)
def test_a_call_off_the_grammar_is_kept_verbatim(body: str) -> None:
    r = renderer(QWEN[0])
    completion = [r.think_end, r.tool_call, *r.table.encode(body), r.tool_call_end, r.im_end]
    part = r.parse_response(completion).message.parts[0]
    assert isinstance(part, UnparsedToolCallPart) and part.raw == body
    rendered = r.build_supervised_example(
        [{"role": "user", "content": "q"}, Message("assistant", [part])]
    )
    assert r.parse_response(rendered.tokens[rendered.weights > 0].tolist()).message.parts == (part,)


def test_arguments_that_are_not_an_object_are_an_error_naming_the_call() -> None:
    r = renderer(QWEN[0])
    messages = [
        {"role": "user", "content": "q"},
        Message("assistant", [ToolCallPart("f", "[1, 2]")]),
    ]
    with pytest.raises(
        ValueError, match=r"^messages\[1\]: arguments of tool call 'f' must be a JSON object"
    ):
        r.build_supervised_example(messages)


def test_a_trained_empty_think_block_is_sampled_after_the_prompts_newline() -> None:
    """The prompt ends "<think>⏎"; the trained turn's "⏎</think>" is encoded on its own
    (the template's text encoded whole would merge the two newlines)."""
    r = renderer(QWEN[0])
    messages = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    example = r.build_supervised_example(messages)
    prompt = r.build_generation_prompt(messages[:1])
    tokens = example.tokens.tolist()
    assert tokens[: len(prompt)] == prompt
    assert tokens[len(prompt) :] == [
        *r.table.encode("\n"),
        r.think_end,
        *r.table.encode("\n\nA"),
        r.im_end,
        *r.table.encode("\n"),
    ]


@pytest.mark.parametrize(
    "config", [c for c in QWEN if dict(c.options).get("enable_thinking", True)], ids=repr
)
@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_completions_parse_on_the_one_shot_path_as_fed(
    config: OracleConfig, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completions of about 1k tokens (reasoning, text, three calls, one of them off the
    grammar when malformed, cut off when truncated) take the one-shot path, which must
    give what feeding the ids gives."""
    from renderers.bench.workloads import completions
    from renderers.core.grammars import TaggedParser

    r = renderer(config)
    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    parsed, fed, one_shot = parsed_both_ways(r, TaggedParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.parts) >= 5


@pytest.mark.parametrize("ending", ["", "\n", "\n\n", "\n\n\n"], ids=repr)
def test_separators_around_every_marker_parse_in_one_shot_as_fed(
    ending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each region ending in part or all of the separator its closing marker strips, and
    the next starting with part or all of the one its opening marker strips: the one-shot
    path strips each once, as the assembler does across writes."""
    from renderers.core.grammars import TaggedParser

    r = renderer(QWEN[0])
    filler = r.table.encode(" lorem ipsum dolor" * 4)
    call = r.table.encode("\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n")
    for tail in ([], [r.im_end]):
        ids = [*filler, *r.table.encode(ending), r.think_end]
        ids += [*r.table.encode(ending), *filler, *r.table.encode(ending), r.tool_call, *call]
        ids += [r.tool_call_end, *r.table.encode(ending), *filler, *r.table.encode(ending)]
        ids += [r.think, *r.table.encode(ending), *filler, *r.table.encode(ending), r.think_end]
        ids += [*r.table.encode(ending), *tail]
        parsed, fed, one_shot = parsed_both_ways(r, TaggedParser, ids, monkeypatch)
        assert parsed == fed
        assert one_shot


# -- arguments as servers render them (the official templates, via TRL's copies) -----------

OFFICIAL = {"qwen3.5": "qwen3_5_think", "qwen3.8": "qwen3_8"}
"""The official templates (TRL's byte-exact copies: ``trl/chat_templates/README.md``)."""

ODD = (
    '{"a":{"x":1,"y":[true,null,"\\u00fc"]},"b":1e1,"c":true,"d":null,"f":"s\\n",'
    '"g":1E20,"h":3,"i":-0.0,"j":2.50,"k":[]}'
)
"""Arguments as JSON text no template writes: compact, escaped, exponents, trailing zeros."""


def official_text(name: str, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    return template_text(trl_template(OFFICIAL[name]), messages, **kwargs)


def official_ids(name: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    return template_ids(tokenizer_for("Qwen/Qwen3.5-27B"), official_text(name, messages, **kwargs))


def compact_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with each call's arguments as compact, ASCII-escaped JSON text."""
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls") or []:
            arguments = c["function"]["arguments"]
            value = json.loads(arguments) if isinstance(arguments, str) else arguments
            c["function"]["arguments"] = json.dumps(value, separators=(",", ":"))
    return out


CALLS = [
    pytest.param(name, conv, id=f"{name}-{conv.id}")
    for name in OFFICIAL
    for conv in CORPUS
    if any(m.get("tool_calls") for m in conv.messages) and not _late_system(conv.messages)
]


def test_the_corpus_has_calls_to_render() -> None:
    assert len(CALLS) >= 16


@pytest.mark.parametrize(("name", "conversation"), CALLS)
def test_json_text_arguments_render_as_the_template_writes_the_parsed_value(
    name: str, conversation: Conversation
) -> None:
    """Prompts with calls in their history: the official template applied to the
    conversation as a server hands it over (arguments parsed), for arguments given as
    compact JSON text."""
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    messages = compact_arguments(conversation.messages)
    for prompt in prompts_of(Conversation(conversation.id, messages, conversation.tools)):
        expected = official_ids(
            name, server_messages(prompt), tools=conversation.tools, add_generation_prompt=True
        )
        assert r.build_generation_prompt(prompt, conversation.tools) == expected


def _odd_call(arguments: str) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_odd_json_text_arguments_render_as_the_template_writes_the_parsed_value(
    name: str,
) -> None:
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    messages = _odd_call(ODD)
    expected = official_ids(name, server_messages(messages), add_generation_prompt=True)
    assert r.build_generation_prompt(messages) == expected
    text = r.decode(expected)
    assert (
        "<parameter=b>\n10.0\n</parameter>" in text and '{"x": 1, "y": [true, null, "ü"]}' in text
    )
    # The trained turn: the template's text after the generation prompt, encoded apart.
    example = r.build_supervised_example(messages[:2])
    prompt = official_text(name, server_messages(messages[:1]), add_generation_prompt=True)
    full = official_text(name, server_messages(messages[:2]))
    assert full.startswith(prompt)
    tokenizer = tokenizer_for("Qwen/Qwen3.5-27B")
    completion = template_ids(tokenizer, full[len(prompt) :].rstrip("\n"))
    assert example.tokens.tolist() == template_ids(tokenizer, prompt) + completion + [198]
    assert example.weights.tolist() == [0.0] * (len(example.tokens) - len(completion) - 1) + [
        1.0
    ] * len(completion) + [0.0]


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_verbatim_arguments_write_each_value_as_given(name: str) -> None:
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"), verbatim_arguments=True)
    text = r.decode(r.build_generation_prompt(_odd_call(ODD)))
    python = name == "qwen3.5"
    for key, value in [
        ("a", '{"x":1,"y":[true,null,"\\u00fc"]}'),
        ("b", "1e1"),
        ("c", "True" if python else "true"),
        ("d", "None" if python else "null"),
        ("f", "s\n"),
        ("g", "1E20"),
        ("i", "-0.0"),
        ("j", "2.50"),
    ]:
        assert f"<parameter={key}>\n{value}\n</parameter>" in text, key
    # Arguments already in the template's form render the same either way.
    plain = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    canonical = _odd_call(json.dumps({"a": {"x": 1}, "b": 10.0, "s": "é"}, ensure_ascii=False))
    assert r.build_generation_prompt(canonical) == plain.build_generation_prompt(canonical)


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_empty_arguments_render_as_a_call_without_parameters(name: str) -> None:
    """``arguments: ""``: Qwen3.8's template writes no parameter for it; Qwen3.5's fails
    on it (``|items`` of a string) and a server hands it ``{}``: no parameter either."""
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    messages = _odd_call("")
    if name == "qwen3.8":
        expected = official_ids(name, messages, add_generation_prompt=True)
    else:
        with pytest.raises(TypeError, match="Can only get item pairs from a mapping"):
            official_text(name, messages, add_generation_prompt=True)
        expected = official_ids(name, server_messages(messages), add_generation_prompt=True)
    assert r.build_generation_prompt(messages) == expected
    assert "<function=f>\n</function>" in r.decode(expected)
    assert r.build_generation_prompt(messages, verbatim_arguments=True) == expected


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_a_trained_call_parses_back_to_the_values_it_was_given(name: str) -> None:
    """What a model trained on a re-serialised call samples parses to the same values."""
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"))
    arguments = '{"a":{"x":1,"y":[true,null]},"b":1e1,"g":1E20,"h":3,"s":"t"}'
    example = r.build_supervised_example(_odd_call(arguments)[:2])
    completion = example.tokens[example.weights > 0].tolist()
    (call,) = r.parse_response(completion).message.tool_calls
    assert call.parsed_arguments() == json.loads(arguments)


@pytest.mark.parametrize("name", list(OFFICIAL))
def test_an_untrained_last_turn_keeps_its_reasoning_with_thinking_off(name: str) -> None:
    """Reasoning of a turn that is not trained is written as the template writes it, even
    where thinking is off and the turn is last (trained, it would be refused)."""
    r = get_renderer(name, tokenizer_for("Qwen/Qwen3.5-27B"), enable_thinking=False)
    messages = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A", "reasoning_content": "R"},
    ]
    example = r.build_supervised_example(messages, train_on=("user",))
    assert example.tokens.tolist() == official_ids(name, messages, enable_thinking=False)
    assert "<think>\nR\n</think>\n\nA<|im_end|>" in r.decode(example.tokens.tolist())
