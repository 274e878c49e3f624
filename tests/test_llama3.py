"""Llama 3.1/3.2/3.3: parity with the official template and Meta's encoder, parsing, streaming.

Expected ids come from the official template (``llama3_1.jinja``/``llama3_2.jinja`` as TRL
keeps them) rendered by transformers' ``render_jinja_template`` and tokenized by the
tokenizer Meta ships in ``llama-models``, and from Meta's own encoder
(``llama_models.llama3.chat_format.ChatFormat``).
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from renderers import (
    Termination,
    TextPart,
    ToolCallPart,
    TrainOn,
    UnparsedToolCallPart,
    get_renderer,
)
from renderers.core.messages import coerce_messages
from renderers.llama3 import Llama3Renderer
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.oracle import server_messages, template_text, trl_template
from tests.training import supervised_or_dropped

pytest.importorskip("llama_models", reason="llama-models (the llama extra) ships the tokenizer")

# What the format cannot write (the template raises for several calls; it drops the text
# of a call turn) or deliberately writes otherwise (control tokens spelt in text).
UNWRITABLE = {"adversarial", "parallel"}
PARITY = [c for c in CORPUS if not (c.tags & UNWRITABLE)]
TRAINABLE = [c for c in PARITY if "text_and_calls" not in c.tags]
BOS = "<|begin_of_text|>"


def meta_tokenizer_instance() -> Any:
    """Meta's tokenizer object (``llama_models.llama3.tokenizer.Tokenizer``), shared."""
    from llama_models.llama3.tokenizer import Tokenizer

    return Tokenizer.get_instance()


@pytest.fixture(scope="module")
def meta_tokenizer() -> Any:
    return meta_tokenizer_instance()


@pytest.fixture(scope="module")
def llama3(meta_tokenizer: Any) -> Llama3Renderer:
    renderer = get_renderer("llama3", meta_tokenizer)
    assert isinstance(renderer, Llama3Renderer)
    return renderer


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a server hands it to the template: arguments parsed, list
    content joined (the template would write a list's repr)."""
    out = server_messages(messages)
    for m in out:
        if isinstance(m.get("content"), list):
            texts = [p.get("text", "") for p in m["content"] if p.get("type") == "text"]
            m["content"] = "".join(texts)
        if m.get("content") is None:
            m["content"] = ""
    return out


def template_ids(
    meta_tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: Any,
    gen: bool,
    template: str = "llama3_1",
    **kwargs: Any,
) -> list[int]:
    text = template_text(
        trl_template(template),
        template_input(messages),
        tools,
        add_generation_prompt=gen,
        bos_token=BOS,
        **kwargs,
    )
    ids: list[int] = meta_tokenizer.encode(text, bos=False, eos=False, allowed_special="all")
    return ids


PROMPT_CASES = [
    pytest.param(conv, k, id=f"{conv.id}-{k}")
    for conv in PARITY
    for k in range(len(prompts_of(conv)))
]


@pytest.mark.parametrize("template", ["llama3_1", "llama3_2"])
@pytest.mark.parametrize(("conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_template(
    llama3: Llama3Renderer, meta_tokenizer: Any, conv: Conversation, k: int, template: str
) -> None:
    messages = prompts_of(conv)[k]
    date = {"date_string": "26 Jul 2024"}
    expected = template_ids(meta_tokenizer, messages, conv.tools, True, template, **date)
    got = llama3.build_generation_prompt(messages, tools=conv.tools)
    assert got == expected, llama3.decode(got)


@pytest.mark.parametrize("conv", [c for c in PARITY if c.tools], ids=repr)
def test_tools_in_the_system_turn_match_template(
    llama3: Llama3Renderer, meta_tokenizer: Any, conv: Conversation
) -> None:
    messages = prompts_of(conv)[0]
    kwargs = {"tools_in_user_message": False, "date_string": "1 Jan 2025"}
    expected = template_ids(meta_tokenizer, messages, conv.tools, True, **kwargs)
    assert llama3.build_generation_prompt(messages, tools=conv.tools, **kwargs) == expected


def test_corpus_is_large_enough() -> None:
    assert len(PARITY) >= 38 and len(TRAINABLE) >= 36


@pytest.mark.parametrize("conv", TRAINABLE, ids=repr)
def test_supervised_tokens_match_template(
    llama3: Llama3Renderer, meta_tokenizer: Any, conv: Conversation
) -> None:
    expected = template_ids(meta_tokenizer, conv.messages, conv.tools, False)
    for train_on in TrainOn:
        if train_on is not TrainOn.ALL and not any(m["role"] == "assistant" for m in conv.messages):
            continue
        example, _ = supervised_or_dropped(
            llama3, conv.messages, tools=conv.tools, train_on=train_on
        )
        assert example.tokens.tolist() == expected


@pytest.mark.parametrize(
    "conv", [c for c in TRAINABLE if c.messages[-1]["role"] == "assistant"], ids=repr
)
def test_trained_turn_follows_its_generation_prompt_and_ends_at_eot(
    llama3: Llama3Renderer, conv: Conversation
) -> None:
    example, _ = supervised_or_dropped(llama3, conv.messages, tools=conv.tools)
    tokens, weights = example.tokens.tolist(), example.weights.tolist()
    first = weights.index(1.0)
    prompt = llama3.build_generation_prompt(conv.messages[:-1], tools=conv.tools)
    assert tokens[:first] == prompt
    assert tokens[-1] == llama3.eot and weights[-1] == 1.0
    assert all(w == 1.0 for w in weights[first:])


# -- Meta's encoder ---------------------------------------------------------------------


def _meta_messages(conv_messages: list[dict[str, Any]], date: str) -> list[Any]:
    """The conversation as Meta's encoder takes it: the system text as the template writes
    it (the encoder writes messages as given), texts trimmed as the template trims them."""
    from llama_models.datatypes import RawMessage

    header = f"Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
    messages = template_input(conv_messages)
    system = ""
    if messages and messages[0]["role"] == "system":
        system = messages.pop(0)["content"].strip()
    out = [RawMessage(role="system", content=header + system)]
    for m in messages:
        role = "tool" if m["role"] == "tool" else m["role"]
        out.append(RawMessage(role=role, content=m["content"].strip()))
    return out


# Conversations Meta's encoder writes as the template does: no tools (it writes calls as
# {"type": "function", ...} and tool results raw, where the template writes JSON strings).
META = [c for c in PARITY if not c.tools]


@pytest.mark.parametrize("conv", META, ids=repr)
def test_generation_prompts_match_meta_encoder(
    llama3: Llama3Renderer, meta_tokenizer: Any, conv: Conversation
) -> None:
    from llama_models.llama3.chat_format import ChatFormat

    encoder = ChatFormat(meta_tokenizer)
    for messages in prompts_of(conv):
        expected = encoder.encode_dialog_prompt(_meta_messages(messages, "26 Jul 2024")).tokens
        assert llama3.build_generation_prompt(messages) == expected


def test_meta_encoder_writes_calls_with_a_type_key(meta_tokenizer: Any) -> None:
    """The documented difference: Meta's encoder writes a custom tool call as
    ``{"type": "function", "name": ..., "parameters": ...}``; the template (which this
    renderer follows) without ``type``. The parser reads both."""
    from llama_models.datatypes import RawMessage, StopReason, ToolCall, ToolPromptFormat
    from llama_models.llama3.chat_format import ChatFormat

    call = ToolCall(call_id="c1", tool_name="get_weather", arguments={"city": "Paris"})
    message = RawMessage(
        role="assistant", content="", tool_calls=[call], stop_reason=StopReason.end_of_turn
    )
    ids, _ = ChatFormat(meta_tokenizer).encode_message(message, ToolPromptFormat.json)
    text = meta_tokenizer.decode(ids)
    assert '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}' in text


# -- parsing --------------------------------------------------------------------------------


def _ids(llama3: Llama3Renderer, *pieces: str) -> list[int]:
    """Control tokens given by name, other pieces encoded as text."""
    ids: list[int] = []
    for piece in pieces:
        if piece.startswith("<|") and piece.endswith("|>"):
            ids.append(llama3.table.control_id(piece))
        else:
            ids += llama3.table.encode(piece)
    return ids


def _stream(llama3: Llama3Renderer, ids: list[int], size: int) -> Any:
    parser = llama3.stream_parser()
    for k in range(0, len(ids), size):
        parser.feed(ids[k : k + size])
    return parser.finish()


@pytest.mark.parametrize(
    "conv", [c for c in TRAINABLE if c.messages[-1]["role"] == "assistant"], ids=repr
)
def test_trained_turn_parses_back_and_streams_alike(
    llama3: Llama3Renderer, conv: Conversation
) -> None:
    example, _ = supervised_or_dropped(llama3, conv.messages, tools=conv.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = llama3.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    last = coerce_messages(template_input(conv.messages)[-1:])[0]
    calls = [p for p in last.parts if isinstance(p, ToolCallPart)]
    if calls:
        arguments = json.dumps(json.loads(calls[0].arguments), ensure_ascii=False)
        assert result.message.parts == (ToolCallPart(calls[0].name, arguments),)
    else:
        text = last.text.strip()
        assert result.message.parts == ((TextPart(text),) if text else ())
    for size in (1, 2, 7):
        assert _stream(llama3, completion, size) == result


@pytest.mark.parametrize(
    ("pieces", "expected", "stop"),
    [
        (
            ['{"name": "f", "parameters": {"a": 1}}', "<|eot_id|>"],
            [ToolCallPart("f", '{"a": 1}')],
            "<|eot_id|>",
        ),
        (
            ["<|python_tag|>", '{"name": "f", "parameters": {"a": 1}}', "<|eom_id|>"],
            [ToolCallPart("f", '{"a": 1}')],
            "<|eom_id|>",
        ),
        (
            [
                "<|python_tag|>",
                '{\n    "type": "function",\n    "name": "f",\n    "parameters": {"n": "10"}\n}',
                "<|eom_id|>",
            ],
            [ToolCallPart("f", '{"n": "10"}')],
            "<|eom_id|>",
        ),
        (
            [
                '[{"name": "f", "parameters": {}}, {"name": "g", "arguments": {"b": 2}}]',
                "<|eot_id|>",
            ],
            [ToolCallPart("f", "{}"), ToolCallPart("g", '{"b": 2}')],
            "<|eot_id|>",
        ),
        (["{not json} said I", "<|eot_id|>"], [TextPart("{not json} said I")], "<|eot_id|>"),
    ],
)
def test_completions_parse_to_calls_or_text(
    llama3: Llama3Renderer, pieces: list[str], expected: list[Any], stop: str
) -> None:
    ids = _ids(llama3, *pieces)
    result = llama3.parse_response(ids)
    assert list(result.message.parts) == expected
    assert result.stop_token_id == llama3.table.control_id(stop)
    assert result.termination is Termination.STOP and not result.issues
    for size in (1, 3):
        assert _stream(llama3, ids, size) == result


def test_a_python_tag_body_that_is_no_json_call_is_kept_as_an_unparsed_call(
    llama3: Llama3Renderer,
) -> None:
    code = "import math\nprint(math.sqrt(2))"
    result = llama3.parse_response(_ids(llama3, "<|python_tag|>", code, "<|eom_id|>"))
    (part,) = result.message.parts
    assert isinstance(part, UnparsedToolCallPart) and part.raw == code
    assert result.termination is Termination.MALFORMED


def test_a_cut_off_call_keeps_its_text(llama3: Llama3Renderer) -> None:
    ids = _ids(llama3, "<|python_tag|>", '{"name": "f", "param')
    result = llama3.parse_response(ids)
    (part,) = result.message.parts
    assert isinstance(part, UnparsedToolCallPart) and part.raw == '{"name": "f", "param'
    assert result.termination is Termination.LENGTH
    text = _ids(llama3, '{"name": "f", "param')
    assert llama3.parse_response(text).message.text == '{"name": "f", "param'


def test_a_header_before_the_stop_token_ends_the_message(llama3: Llama3Renderer) -> None:
    ids = _ids(llama3, "Hi", "<|start_header_id|>", "user", "<|end_header_id|>")
    result = llama3.parse_response(ids)
    assert result.message.text == "Hi" and result.termination is Termination.MALFORMED


# -- caller errors ------------------------------------------------------------------------------


def test_two_calls_in_one_message_are_refused_naming_the_message(llama3: Llama3Renderer) -> None:
    conv = next(c for c in CORPUS if c.id == "tool_call_parallel")
    with pytest.raises(ValueError, match=r"messages\[1\]: llama3 writes one tool call"):
        llama3.build_supervised_example(conv.messages, tools=conv.tools)


def test_a_trained_call_with_text_is_refused_and_untrained_text_dropped_as_template(
    llama3: Llama3Renderer, meta_tokenizer: Any
) -> None:
    conv = next(c for c in CORPUS if c.id == "tool_call_with_text")
    with pytest.raises(ValueError, match=r"messages\[1\]: llama3's template writes a tool-call"):
        llama3.build_supervised_example(conv.messages, tools=conv.tools)
    history = [*conv.messages, {"role": "tool", "content": "sunny"}]
    expected = template_ids(meta_tokenizer, history, conv.tools, True)
    assert llama3.build_generation_prompt(history, tools=conv.tools) == expected


def test_tools_without_a_user_message_are_refused(llama3: Llama3Renderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]: llama3 with tools"):
        llama3.build_generation_prompt(
            [{"role": "system", "content": "s"}], tools=[{"name": "f", "parameters": {}}]
        )


# -- tokenizers --------------------------------------------------------------------------------


def test_the_packaged_tokenizer_loads_without_the_hub_and_pickles_by_name() -> None:
    renderer = get_renderer("meta-llama/Llama-3.3-70B-Instruct")
    assert renderer.name == "llama3"
    again = pickle.loads(pickle.dumps(renderer))
    assert again.tokenizer is renderer.tokenizer
    messages = [{"role": "user", "content": "Hi"}]
    assert again.build_generation_prompt(messages) == renderer.build_generation_prompt(messages)


def test_the_packaged_tokenizer_encodes_as_meta_and_never_spells_control_tokens(
    llama3: Llama3Renderer, meta_tokenizer: Any
) -> None:
    text = "Hello wörld 🤖 <|eot_id|>  \n\n x"
    assert llama3.table.encode(text) == meta_tokenizer.encode(text, bos=False, eos=False)
    assert llama3.table.decode(llama3.table.encode(text)) == text
