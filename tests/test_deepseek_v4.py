"""DeepSeek-V4 against its oracle (tml-renderers 0.2.1, the official encoder not being
available offline) on the shared corpus, and the format's own behaviour.

Where the renderer follows the reference encoder rather than the oracle (documented in
``renderers/deepseek_v4.py``), the tests below say so and assert the difference exactly.
"""

from __future__ import annotations

import copy
import json
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
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.one_shot import parsed_both_ways
from tests.tml_oracle import (
    CONFIGS,
    OracleConfig,
    decode,
    expected_example,
    our_items,
    parsed_items,
    prompt_ids,
    template_ids,
    without_reasoning,
)

MODEL = "deepseek-ai/DeepSeek-V4-Pro"
V4 = [c for c in CONFIGS if c.name == "deepseek_v4"]
CASES = [pytest.param(c, conv, id=f"{c!r}-{conv.id}") for c in V4 for conv in CORPUS]
ANSWERED = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in V4
    for conv in CORPUS
    if conv.messages[-1]["role"] == "assistant"
]
"""The conversations that end with an answer: a supervised example trains it."""

DSML = "｜DSML｜"


def renderer(config: OracleConfig | None = None, **options: Any) -> Renderer:
    base = dict(config.options) if config else {}
    return get_renderer("deepseek_v4", tokenizer_for(MODEL), **{**base, **options})


def _messages(config: OracleConfig, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return messages if config.reasoning else without_reasoning(messages)


def _same(text: str) -> str:
    return text


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
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    tokens, weights = expected_example(
        config, tokenizer_for(MODEL), messages, conversation.tools, _same
    )
    if conversation.id == "system_second_position" and not config.reasoning:
        # In chat mode the answer follows the system text without a transition token: we
        # tokenize the encoder's text whole (".Hello" is one token); the oracle encodes the
        # answer apart. That token holds untrained system text, so the turn cannot be
        # trained (issue 13: a trained token never holds untrained text).
        tokenizer = tokenizer_for(MODEL)
        text = decode(tokenizer, tokens)
        whole = r.build_supervised_example(messages, tools=conversation.tools, train_on="all")
        assert whole.tokens.tolist() == template_ids(tokenizer, text)
        with pytest.raises(ValueError, match=r"^messages\[2\]: the token '\.H' holds text"):
            r.build_supervised_example(messages, tools=conversation.tools)
        return
    example = r.build_supervised_example(messages, tools=conversation.tools)
    assert example.tokens.tolist() == tokens
    assert example.weights.tolist() == weights


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_parses_of_trained_turns_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    if conversation.id == "system_second_position" and not config.reasoning:
        return  # not trainable (see test_supervised_examples_equal_the_oracle)
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


# -- where the reference encoder and the oracle differ ------------------------------------


def test_consecutive_user_messages_are_one_turn_a_blank_line_apart_as_in_the_encoder() -> None:
    config = V4[0]
    messages = [{"role": "user", "content": "First."}, {"role": "user", "content": "Second."}]
    oracle = decode(tokenizer_for(MODEL), prompt_ids(config, messages, None))
    assert "<｜User｜>First.Second.<｜Assistant｜>" in oracle
    expected = template_ids(
        tokenizer_for(MODEL), oracle.replace("First.Second.", "First.\n\nSecond.")
    )
    assert renderer(config).build_generation_prompt(messages) == expected


def test_tool_results_follow_the_order_of_the_calls_as_in_the_encoder() -> None:
    calls = [
        {"id": id_, "type": "function", "function": {"name": "f", "arguments": {"x": id_}}}
        for id_ in ("a", "b")
    ]
    messages = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "b", "content": "result b"},
        {"role": "tool", "tool_call_id": "a", "content": "result a"},
    ]
    r = renderer()
    text = r.decode(r.build_generation_prompt(messages))
    assert text.endswith(
        "<｜User｜><tool_result>result a</tool_result>\n\n<tool_result>result b</tool_result>"
        "<｜Assistant｜><think>"
    )
    oracle = decode(tokenizer_for(MODEL), prompt_ids(V4[0], messages, None))
    assert oracle.endswith(
        "result b</tool_result>\n\n<tool_result>result a</tool_result><｜Assistant｜><think>"
    )
    # Results that do not all name a distinct call keep the given order.
    messages[3] = {"role": "tool", "content": "result a"}
    text = r.decode(r.build_generation_prompt(messages))
    assert "result b</tool_result>\n\n<tool_result>result a" in text


# -- the format -----------------------------------------------------------------------------


def test_history_reasoning_is_dropped_without_tools_and_kept_with_them() -> None:
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
    ]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    r = renderer()
    plain = r.decode(r.build_generation_prompt(messages))
    assert plain.endswith(
        "<｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜><｜User｜>q2<｜Assistant｜><think>"
    )
    kept = r.decode(r.build_generation_prompt(messages, tools=tools))
    assert "<｜User｜>q1<｜Assistant｜><think>r1</think>a1<｜end▁of▁sentence｜>" in kept
    assert "<think>r1</think>" in r.decode(r.build_generation_prompt(messages, drop_thinking=False))


def test_effort_instruction_starts_the_conversation_in_thinking_mode_only() -> None:
    messages = [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"}]
    r = renderer(reasoning_effort="high")
    text = r.decode(r.build_generation_prompt(messages))
    assert text.startswith("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum")
    assert "ensure absolutely no assumption is left unchecked.\n\nSys.<｜User｜>Hi" in text
    chat = r.decode(r.build_generation_prompt(messages, thinking_mode="chat"))
    assert chat == "<｜begin▁of▁sentence｜>Sys.<｜User｜>Hi<｜Assistant｜></think>"
    with pytest.raises(ValueError, match=r"reasoning_effort: expected one of 'low', 'high', 'max'"):
        renderer(reasoning_effort="medium")


def test_chat_mode_refuses_reasoning_of_the_trained_turn_unless_dropped() -> None:
    r = renderer(thinking_mode="chat")
    messages = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A", "reasoning_content": "R"},
    ]
    with pytest.raises(ValueError, match=r"^messages\[1\]: deepseek_v4 in chat mode cannot write"):
        r.build_supervised_example(messages)
    dropped = r.build_supervised_example(messages, reasoning="drop")
    assert r.decode(dropped.tokens.tolist()).endswith(
        "<｜Assistant｜></think>A<｜end▁of▁sentence｜>"
    )


def test_calls_are_dsml_invokes_with_string_flags() -> None:
    r = renderer()
    arguments = '{"city": "Paris", "days": 3, "opts": {"a": [1, 2]}, "flag": true, "none": null}'
    messages = [
        {"role": "user", "content": "q"},
        Message("assistant", [TextPart("Checking."), ToolCallPart("weather", arguments)]),
    ]
    text = r.decode(r.build_supervised_example(messages).tokens.tolist())
    assert text.endswith(
        f'</think>Checking.\n\n<{DSML}tool_calls>\n<{DSML}invoke name="weather">\n'
        f'<{DSML}parameter name="city" string="true">Paris</{DSML}parameter>\n'
        f'<{DSML}parameter name="days" string="false">3</{DSML}parameter>\n'
        f'<{DSML}parameter name="opts" string="false">{{"a": [1, 2]}}</{DSML}parameter>\n'
        f'<{DSML}parameter name="flag" string="false">true</{DSML}parameter>\n'
        f'<{DSML}parameter name="none" string="false">null</{DSML}parameter>\n'
        f"</{DSML}invoke>\n</{DSML}tool_calls><｜end▁of▁sentence｜>"
    )


def pieces(r: Renderer, text: str) -> list[int]:
    """``text`` as sampled: ``｜DSML｜``, ``<think>`` and ``</think>`` as their tokens."""
    out: list[int] = []
    for k, piece in enumerate(text.split(DSML)):
        if k:
            out.append(r.table.control_id(DSML))
        for j, chunk in enumerate(piece.split("</think>")):
            if j:
                out.append(r.table.control_id("</think>"))
            out += r.table.encode(chunk)
    return out


def test_a_call_drafted_inside_the_reasoning_stays_reasoning() -> None:
    r = renderer()
    draft = f'maybe <{DSML}invoke name="f">\n</{DSML}invoke>'
    ids = [*pieces(r, draft + "</think>Answer."), r.table.control_id("<｜end▁of▁sentence｜>")]
    result = r.parse_response(ids)
    assert result.message.parts == (ThinkingPart(draft), TextPart("Answer."))
    assert result.termination is Termination.STOP


def test_an_invoke_off_the_grammar_is_kept_verbatim_and_renders_back() -> None:
    r = renderer()
    raw = (
        f'<{DSML}invoke name="f">\n<{DSML}parameter name="n" string="false">not json'
        f"</{DSML}parameter>\n</{DSML}invoke>"
    )
    text = f"</think>\n\n<{DSML}tool_calls>\n{raw}\n</{DSML}tool_calls>"
    ids = [*pieces(r, text), r.table.control_id("<｜end▁of▁sentence｜>")]
    part = r.parse_response(ids).message.parts[0]
    assert isinstance(part, UnparsedToolCallPart) and part.raw == raw and part.name == "f"
    example = r.build_supervised_example(
        [{"role": "user", "content": "q"}, Message("assistant", [part])]
    )
    assert example.tokens[example.weights > 0].tolist() == ids


def test_text_that_is_not_a_tag_is_kept_with_an_issue() -> None:
    r = renderer(thinking_mode="chat")
    ids = [*pieces(r, f"a <{DSML}nonsense> b"), r.table.control_id("<｜end▁of▁sentence｜>")]
    result = r.parse_response(ids)
    assert result.message.content == f"a <{DSML}nonsense> b"
    assert result.termination is Termination.MALFORMED


def test_a_turn_cut_off_in_a_section_is_closed_for_the_next_prompt() -> None:
    r = renderer()
    prompt = r.build_generation_prompt([{"role": "user", "content": "q"}])
    opened = f'<{DSML}tool_calls>\n<{DSML}invoke name="f">\n<{DSML}parameter name="a" '
    cut = pieces(r, f'</think>\n\n{opened}string="true">x')
    rollout = r.rollout([{"role": "user", "content": "q"}])
    result = rollout.add_completion(cut)
    assert result.termination is Termination.LENGTH
    assert isinstance(result.message.parts[-1], UnparsedToolCallPart)
    after = rollout.add_messages([{"role": "user", "content": "go on"}])
    text = r.decode(after[len(prompt) + len(cut) :])
    closing = f"</{DSML}invoke>\n</{DSML}tool_calls><｜end▁of▁sentence｜>"
    assert text == closing + "<｜User｜>go on<｜Assistant｜><think>"


@pytest.mark.parametrize("extra", [-1, 0, 1, 80], ids=lambda n: f"limit{n:+d}")
def test_a_tag_longer_than_the_limit_is_text_however_the_ids_are_fed(extra: int) -> None:
    """A tag name (the bytes between ｜DSML｜ and ">") of at most 1024 bytes is read as a
    tag, a longer one is text with an issue: whether its bytes come in one feed (as
    ``parse_response`` reads them) or a token at a time."""
    from renderers.core.dsml import _MAX_TAG

    r = renderer(thinking_mode="chat")
    tag = 'invoke name=""'
    name = "x" * (_MAX_TAG + extra - len(tag))
    text = (
        f'Hi\n\n<{DSML}tool_calls>\n<{DSML}invoke name="{name}">\n</{DSML}invoke>\n'
        f"</{DSML}tool_calls>"
    )
    ids = [*pieces(r, text), r.table.control_id("<｜end▁of▁sentence｜>")]
    whole = r.parse_response(ids)
    for size in (1, 3):
        parser = r.stream_parser()
        for k in range(0, len(ids), size):
            parser.feed(ids[k : k + size])
        assert parser.finish() == whole, size
    if extra <= 0:
        assert whole.message.parts[1] == ToolCallPart(name, "{}")
        assert whole.termination is Termination.STOP
    else:
        assert not whole.message.tool_calls
        assert f'<{DSML}invoke name="{name}">' in whole.message.text
        assert whole.termination is Termination.MALFORMED


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_completions_parse_on_the_one_shot_path_as_fed(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completions of about 1k tokens (reasoning, text, a section of three invokes, JSON
    text between two of them when malformed, cut off when truncated) take the one-shot
    path, which must give what feeding the ids gives."""
    from renderers.bench.workloads import completions
    from renderers.core.dsml import DSMLParser

    r = renderer()
    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    parsed, fed, one_shot = parsed_both_ways(r, DSMLParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.parts) >= 5


@pytest.mark.parametrize("thinking_mode", ["thinking", "chat"])
def test_a_grammar_record_pickles_and_parses_the_same_after(thinking_mode: str) -> None:
    """The grammar record travels (to a worker process) by its fields: what it derives for
    its parser is rebuilt on the other side, and parses the same."""
    import pickle

    from renderers.core.dsml import DSMLParser
    from renderers.core.scanning import sampled_text_ids

    r = renderer(thinking_mode=thinking_mode)
    grammar = r.grammar(r.options)
    copy_ = pickle.loads(pickle.dumps(grammar))
    assert copy_ == grammar
    text = f"a</think>b\n\n<{DSML}tool_calls>\n{_INVOKE}\n</{DSML}tool_calls>"
    ids = sampled_text_ids(r.table, text)
    parsed = DSMLParser(r.table, copy_, False).parse(ids)
    assert parsed == r.parse_response(ids)
    assert ToolCallPart("f", '{"a": 1}') in parsed.message.parts


_INVOKE = (
    f'<{DSML}invoke name="f">\n<{DSML}parameter name="a" string="false">1</{DSML}parameter>\n'
    f"</{DSML}invoke>"
)


@pytest.mark.parametrize("lead", ["Answer", "Answer\n", "Answer\n\n", "Answer\n\n\n", ""])
@pytest.mark.parametrize(
    "gap",
    ["\n", "", "\n \t\x0b\x0c\r\n", "\n stray text\n", "\u00a0\n", "\nstray", " é\n\n"],
    ids=repr,
)
def test_sections_parse_in_one_shot_as_fed(
    lead: str, gap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text before a section ending in newlines or not, and what stands between invokes
    (whitespace is structure, anything else a text part with an issue): the one-shot
    path gives the general path's parts, spans and issues, also cut off after each
    token past the first 48."""
    from renderers.core.dsml import DSMLParser

    r = renderer()
    reasoning = [*r.table.encode(" lorem ipsum dolor" * 12), r.think_end]
    section = f"<{DSML}tool_calls>{gap}{_INVOKE}{gap}{_INVOKE}{gap}</{DSML}tool_calls>"
    ids = [*reasoning, *pieces(r, lead + section + "Done."), r.think]
    ids += [*r.table.encode("more"), r.think_end, *r.table.encode("End."), r.eos]
    parsed, fed, one_shot = parsed_both_ways(r, DSMLParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.tool_calls) == 2
    assert bool(fed.issues) == bool(gap.strip(" \t\n\r\x0b\x0c"))
    for cut in range(49, len(ids)):
        parsed, fed, _ = parsed_both_ways(r, DSMLParser, ids[:cut], monkeypatch)
        assert parsed == fed, cut


# -- arguments as the encoder renders them ---------------------------------------------------
#
# The reference encoder's ``encode_arguments_to_dsml`` (``encoding/encoding_dsv4.py`` of the
# DeepSeek-V4 model repositories; read in the copy at
# sfxnz/DeepSeek-V4-Flash-Vision-Exp-vLLM-2x-DGX-Spark e901c06d1fd33eb9f7ce5c4d4710f32dc8d42224)
# parses the arguments text (``json.loads``, falling back to ``{"arguments": text}`` for
# text it refuses) and writes each string value as is (``string="true"``) and any other as
# ``to_json`` (``json.dumps(value, ensure_ascii=False)``, ``string="false"``).


def _tojson_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call's arguments as ``to_json`` of the parsed value (what the encoder writes)."""
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls") or []:
            arguments = c["function"]["arguments"]
            value = json.loads(arguments) if isinstance(arguments, str) else arguments
            c["function"]["arguments"] = json.dumps(value, ensure_ascii=False)
    return out


def _compact_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = _tojson_arguments(messages)
    for m in out:
        for c in m.get("tool_calls") or []:
            value = json.loads(c["function"]["arguments"])
            c["function"]["arguments"] = json.dumps(value, separators=(",", ":"))
    return out


WITH_CALLS = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in V4
    for conv in CORPUS
    if any(m.get("tool_calls") for m in conv.messages)
]


@pytest.mark.parametrize(("config", "conversation"), WITH_CALLS)
def test_json_text_arguments_render_as_the_encoder_writes_the_parsed_value(
    config: OracleConfig, conversation: Conversation
) -> None:
    """Compact, ASCII-escaped arguments text: the oracle's prompt for the same arguments
    written as the encoder writes them."""
    r = renderer(config)
    given = _compact_arguments(_messages(config, conversation.messages))
    written = _tojson_arguments(given)
    for prompt, oracle in zip(
        prompts_of(Conversation(conversation.id, given)),
        prompts_of(Conversation(conversation.id, written)),
        strict=True,
    ):
        expected = prompt_ids(config, oracle, conversation.tools)
        assert r.build_generation_prompt(prompt, tools=conversation.tools) == expected


def _call_turn(arguments: str) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]


def _parameters(text: str) -> str:
    return text[text.index(f"<{DSML}invoke") : text.index(f"</{DSML}invoke>")]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            '{"a":{"x":1,"y":[true,null,"\\u00fc"]},"b":1e1,"s":"v\\n","g":1E20,"k":[]}',
            f'<{DSML}invoke name="f">\n'
            f'<{DSML}parameter name="a" string="false">{{"x": 1, "y": [true, null, "ü"]}}'
            f"</{DSML}parameter>\n"
            f'<{DSML}parameter name="b" string="false">10.0</{DSML}parameter>\n'
            f'<{DSML}parameter name="s" string="true">v\n</{DSML}parameter>\n'
            f'<{DSML}parameter name="g" string="false">1e+20</{DSML}parameter>\n'
            f'<{DSML}parameter name="k" string="false">[]</{DSML}parameter>\n',
        ),
        (
            "",  # json.loads refuses it: the encoder's fallback
            f'<{DSML}invoke name="f">\n'
            f'<{DSML}parameter name="arguments" string="true"></{DSML}parameter>\n',
        ),
        (
            '{"a": 1, "a": 2}',
            f'<{DSML}invoke name="f">\n'
            f'<{DSML}parameter name="a" string="false">2</{DSML}parameter>\n',
        ),
    ],
    ids=["odd", "empty", "repeated-key"],
)
def test_arguments_are_written_as_the_encoder_writes_them(arguments: str, expected: str) -> None:
    r = renderer()
    for ids in (
        r.build_generation_prompt([*_call_turn(arguments), {"role": "user", "content": "ok"}]),
        r.build_supervised_example(_call_turn(arguments)).tokens.tolist(),
    ):
        assert _parameters(r.decode(ids)) == expected


def test_verbatim_arguments_write_each_value_as_given() -> None:
    r = renderer(verbatim_arguments=True)
    text = r.decode(r.build_supervised_example(_call_turn('{"a":{"x":1},"b":1e1}')).tokens.tolist())
    assert f'string="false">{{"x":1}}</{DSML}parameter>' in text
    assert f'string="false">1e1</{DSML}parameter>' in text
    empty = r.decode(r.build_supervised_example(_call_turn("")).tokens.tolist())
    assert f'<{DSML}parameter name="arguments" string="true"></{DSML}parameter>' in empty


def test_a_trained_call_parses_back_to_the_values_it_was_given() -> None:
    r = renderer()
    arguments = '{"a":{"x":1,"y":[true,null]},"b":1e1,"s":"t","n":null}'
    example = r.build_supervised_example(_call_turn(arguments))
    (call,) = r.parse_response(example.tokens[example.weights > 0].tolist()).message.tool_calls
    assert call.parsed_arguments() == json.loads(arguments)


# -- degenerate inputs -------------------------------------------------------------------------


def test_degenerate_inputs_render_as_the_encoder_reads_them() -> None:
    """``content: None`` is ``content or ""`` and ``tool_calls: []`` falsy in the encoder
    (hand-written encoder text below); a ``None`` tool result is an empty one (the encoder
    would format it as the text ``None``)."""
    r = renderer()
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    user, again = {"role": "user", "content": "q"}, {"role": "user", "content": "again"}
    head = "<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜></think>"
    tail = "<｜User｜>again<｜Assistant｜><think>"
    tokenizer = tokenizer_for(MODEL)
    for assistant, text in [
        ({"role": "assistant", "content": None}, ""),
        ({"role": "assistant", "content": None, "tool_calls": []}, ""),
        ({"role": "assistant", "content": "Sunny.", "tool_calls": []}, "Sunny."),
    ]:
        expected = template_ids(tokenizer, f"{head}{text}<｜end▁of▁sentence｜>{tail}")
        assert r.build_generation_prompt([user, assistant, again]) == expected
    result = {"role": "tool", "tool_call_id": "c", "content": None}
    messages = [user, {"role": "assistant", "content": None, "tool_calls": [call]}, result]
    text = r.decode(r.build_generation_prompt(messages))
    assert text.endswith("<｜User｜><tool_result></tool_result><｜Assistant｜><think>")
