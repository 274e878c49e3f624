"""Llama 4: parity with the official template and Meta's encoder, parsing, streaming.

Expected ids come from the official template (the ``chat_template`` transformers ships
with ``Llama4Processor``, read from the installed transformers without importing it)
rendered by transformers' ``render_jinja_template`` and tokenized by the tokenizer Meta
ships in ``llama-models``, and from Meta's own encoder
(``llama_models.llama4.chat_format.ChatFormat``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pickle
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from renderers import Termination, TextPart, ToolCallPart, TrainOn, get_renderer
from renderers.core.messages import Part, coerce_messages
from renderers.llama4 import Llama4Renderer
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.oracle import server_messages, template_text
from tests.training import supervised_or_dropped

pytest.importorskip("llama_models", reason="llama-models (the llama extra) ships the tokenizer")

# Control tokens spelt in text are deliberately written as text.
PARITY = [c for c in CORPUS if "adversarial" not in c.tags]
BOS = "<|begin_of_text|>"


def official_template() -> str:
    """The ``chat_template`` constant of transformers' ``processing_llama4.py`` (importing
    it takes the processor's image stack; reading the constant does not)."""
    found = importlib.util.find_spec("transformers")
    if found is None or found.origin is None:
        pytest.skip("transformers ships Llama 4's template")
    path = Path(found.origin).parent / "models" / "llama4" / "processing_llama4.py"
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "chat_template":
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise AssertionError(f"no chat_template in {path}")


def meta_chat_format() -> Any:
    """``llama_models.llama4.chat_format``: it imports torch, torchvision and PIL for
    images, which its text path never uses and this environment does not install; they
    are placeholders while it imports, removed after (with the modules that saw them)."""

    class Placeholder(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return Placeholder(f"{self.__name__}.{name}")

    names = ["torch", "torchvision", "torchvision.transforms"]
    names += ["torchvision.transforms.functional", "PIL", "PIL.Image", "PIL.ImageFile"]
    added = [n for n in names if importlib.util.find_spec(n.split(".")[0]) is None]
    for n in added:
        sys.modules[n] = Placeholder(n)
    try:
        module = importlib.import_module("llama_models.llama4.chat_format")
    finally:
        for n in added:
            sys.modules.pop(n, None)
        if added:
            for n in ("chat_format", "preprocess", "datatypes"):
                sys.modules.pop(f"llama_models.llama4.{n}", None)
    return module


@pytest.fixture(scope="module")
def meta_tokenizer() -> Any:
    from llama_models.llama4.tokenizer import Tokenizer

    return Tokenizer.get_instance()


@pytest.fixture(scope="module")
def encoder(meta_tokenizer: Any) -> Any:
    return meta_chat_format().ChatFormat(meta_tokenizer)


@pytest.fixture(scope="module")
def template() -> str:
    return official_template()


@pytest.fixture(scope="module")
def llama4(meta_tokenizer: Any) -> Llama4Renderer:
    renderer = get_renderer("llama4", meta_tokenizer)
    assert isinstance(renderer, Llama4Renderer)
    return renderer


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a server hands it to the template: arguments parsed, list
    content joined (the template writes only the first part of a system message), no
    ``None`` content (the template iterates it)."""
    out = server_messages(messages)
    for m in out:
        if isinstance(m.get("content"), list):
            texts = [p.get("text", "") for p in m["content"] if p.get("type") == "text"]
            m["content"] = "".join(texts)
        if m.get("content") is None:
            m["content"] = ""
    return out


def template_ids(
    template: str,
    meta_tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: Any,
    gen: bool,
    **kwargs: Any,
) -> list[int]:
    text = template_text(
        template,
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


@pytest.mark.parametrize(("conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_template(
    llama4: Llama4Renderer, template: str, meta_tokenizer: Any, conv: Conversation, k: int
) -> None:
    messages = prompts_of(conv)[k]
    expected = template_ids(template, meta_tokenizer, messages, conv.tools, True)
    got = llama4.build_generation_prompt(messages, tools=conv.tools)
    assert got == expected, llama4.decode(got)


@pytest.mark.parametrize("conv", [c for c in PARITY if c.tools], ids=repr)
def test_tools_in_the_system_turn_match_template(
    llama4: Llama4Renderer, template: str, meta_tokenizer: Any, conv: Conversation
) -> None:
    messages = prompts_of(conv)[0]
    if messages[0]["role"] != "system":
        messages = [{"role": "system", "content": "You call tools."}, *messages]
    kwargs = {"tools_in_user_message": False}
    expected = template_ids(template, meta_tokenizer, messages, conv.tools, True, **kwargs)
    assert llama4.build_generation_prompt(messages, tools=conv.tools, **kwargs) == expected


def test_corpus_is_large_enough() -> None:
    assert len(PARITY) >= 43


@pytest.mark.parametrize("conv", PARITY, ids=repr)
def test_supervised_tokens_match_template(
    llama4: Llama4Renderer, template: str, meta_tokenizer: Any, conv: Conversation
) -> None:
    expected = template_ids(template, meta_tokenizer, conv.messages, conv.tools, False)
    for train_on in TrainOn:
        if train_on is not TrainOn.ALL and not any(m["role"] == "assistant" for m in conv.messages):
            continue
        example, _ = supervised_or_dropped(
            llama4, conv.messages, tools=conv.tools, train_on=train_on
        )
        assert example.tokens.tolist() == expected


LAST_ASSISTANT = [c for c in PARITY if c.messages[-1]["role"] == "assistant"]


@pytest.mark.parametrize("conv", LAST_ASSISTANT, ids=repr)
def test_trained_turn_follows_its_generation_prompt_and_ends_at_eot(
    llama4: Llama4Renderer, conv: Conversation
) -> None:
    example, _ = supervised_or_dropped(llama4, conv.messages, tools=conv.tools)
    tokens, weights = example.tokens.tolist(), example.weights.tolist()
    first = weights.index(1.0)
    prompt = llama4.build_generation_prompt(conv.messages[:-1], tools=conv.tools)
    assert tokens[:first] == prompt
    assert tokens[-1] == llama4.eot and weights[-1] == 1.0
    assert all(w == 1.0 for w in weights[first:])


# -- Meta's encoder ---------------------------------------------------------------------


def _meta_messages(conv_messages: list[dict[str, Any]]) -> list[Any]:
    """The conversation as Meta's encoder takes it (it writes messages as given): the
    system text trimmed as the template trims it."""
    from llama_models.datatypes import RawMessage

    out = []
    for k, m in enumerate(template_input(conv_messages)):
        content = m["content"].strip() if k == 0 and m["role"] == "system" else m["content"]
        out.append(RawMessage(role=m["role"], content=content))
    return out


# Conversations Meta's encoder writes as the template does: no tools (it writes calls bare
# and ends call turns and results with <|eom|>, results raw).
META = [c for c in PARITY if not c.tools]


@pytest.mark.parametrize("conv", META, ids=repr)
def test_generation_prompts_match_meta_encoder(
    llama4: Llama4Renderer, encoder: Any, conv: Conversation
) -> None:
    for messages in prompts_of(conv):
        expected = encoder.encode_dialog_prompt(_meta_messages(messages)).tokens
        assert llama4.build_generation_prompt(messages) == expected


def _call_messages() -> list[tuple[str, dict[str, Any]]]:
    """Every assistant message of the corpus with tool calls, by conversation id."""
    return [
        (c.id, m)
        for c in PARITY
        for m in server_messages(c.messages)
        if m["role"] == "assistant" and m.get("tool_calls")
    ]


def _shape(parts: Any) -> list[Any]:
    """Parts as comparable values: text, and calls with their arguments as objects."""
    out: list[Any] = []
    for p in parts:
        if isinstance(p, ToolCallPart):
            out.append(("call", p.name, json.loads(p.arguments)))
        elif isinstance(p, TextPart) and p.text:
            out.append(("text", p.text))
    return out


def _meta_calls(message: dict[str, Any], tool_format: str) -> list[Any] | None:
    """The message's calls as Meta's ``ToolCall`` values, or None where Meta's encoder
    cannot write them in ``tool_format``: a name that is no Python name has no pythonic
    spelling, and ``ToolCall`` holds arguments nested one level at most."""
    from llama_models.datatypes import ToolCall
    from pydantic import ValidationError

    names = [c["function"]["name"] for c in message["tool_calls"]]
    if tool_format == "python_list" and not all(n.replace(".", "_").isidentifier() for n in names):
        return None
    try:
        return [
            ToolCall(
                call_id=str(k),
                tool_name=c["function"]["name"],
                arguments=c["function"]["arguments"],
            )
            for k, c in enumerate(message["tool_calls"])
        ]
    except ValidationError:
        return None


META_UNWRITABLE = {
    ("tool_call_nested_args", "json"),
    ("tool_call_nested_args", "python_list"),
    ("tool_name_with_punctuation", "python_list"),
}
"""The corpus call turns Meta's encoder cannot write (:func:`_meta_calls`)."""

META_CASES = [
    (conv_id, message, tool_format)
    for tool_format in ("json", "python_list")
    for conv_id, message in _call_messages()
    if (conv_id, tool_format) not in META_UNWRITABLE
]


def test_meta_encoder_cannot_write_exactly_the_documented_call_turns() -> None:
    unwritable = {
        (conv_id, tool_format)
        for tool_format in ("json", "python_list")
        for conv_id, message in _call_messages()
        if _meta_calls(message, tool_format) is None
    }
    assert unwritable == META_UNWRITABLE


@pytest.mark.parametrize(
    ("conv_id", "message", "tool_format"), META_CASES, ids=[f"{c}-{f}" for c, _, f in META_CASES]
)
def test_meta_encoders_call_turns_parse_to_their_calls(
    llama4: Llama4Renderer, encoder: Any, conv_id: str, message: dict[str, Any], tool_format: str
) -> None:
    """Meta's encoder writes calls bare (``{"type": "function", ...}`` or the pythonic
    list, each call on its own, back to back) and ends the turn with ``<|eom|>``: the
    parser reads each call of both."""
    from llama_models.datatypes import RawMessage, StopReason, ToolPromptFormat

    calls = _meta_calls(message, tool_format)
    assert calls is not None
    raw = RawMessage(
        role="assistant", content="", tool_calls=calls, stop_reason=StopReason.end_of_turn
    )
    ids, _ = encoder.encode_message(raw, ToolPromptFormat(tool_format))
    header = len(encoder._encode_header("assistant"))
    completion = ids[header:]
    result = llama4.parse_response(completion)
    expected = [("call", c.tool_name, c.arguments) for c in calls]
    assert _shape(result.message.parts) == expected
    assert result.stop_token_id == llama4.eom and not result.issues


# -- parsing --------------------------------------------------------------------------------


def _ids(llama4: Llama4Renderer, *pieces: str) -> list[int]:
    """Control tokens given by name, other pieces encoded as text."""
    ids: list[int] = []
    for piece in pieces:
        if piece.startswith("<|") and piece.endswith("|>"):
            ids.append(llama4.table.control_id(piece))
        else:
            ids += llama4.table.encode(piece)
    return ids


def _stream(llama4: Llama4Renderer, ids: list[int], size: int) -> Any:
    parser = llama4.stream_parser()
    for k in range(0, len(ids), size):
        parser.feed(ids[k : k + size])
    return parser.finish()


def _expected_parts(message: dict[str, Any]) -> list[Any]:
    """What a trained turn parses back to: its text (as written, the pair around it
    dropped) then its calls."""
    (m,) = coerce_messages(template_input([message]))
    parts: list[Part] = [p for p in m.parts if isinstance(p, (TextPart, ToolCallPart))]
    return _shape(parts)


@pytest.mark.parametrize("conv", LAST_ASSISTANT, ids=repr)
def test_trained_turn_parses_back_and_streams_alike(
    llama4: Llama4Renderer, conv: Conversation
) -> None:
    example, _ = supervised_or_dropped(llama4, conv.messages, tools=conv.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = llama4.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    assert _shape(result.message.parts) == _expected_parts(conv.messages[-1])
    for size in (1, 2, 7):
        assert _stream(llama4, completion, size) == result


@pytest.mark.parametrize(
    ("pieces", "expected", "stop"),
    [
        (
            [
                "<|python_start|>",
                "<|python_end|>",
                '{"name": "f", "parameters": {"a": 1}}',
                "<|eot|>",
            ],
            [ToolCallPart("f", '{"a": 1}')],
            "<|eot|>",
        ),
        (
            ['{"name": "f", "parameters": {}}{"name": "g", "parameters": {"b": [1]}}', "<|eot|>"],
            [ToolCallPart("f", "{}"), ToolCallPart("g", '{"b": [1]}')],
            "<|eot|>",
        ),
        (
            [
                "<|python_start|>",
                "Checking.",
                "<|python_end|>",
                '{"name": "f", "parameters": {}}',
                "<|eot|>",
            ],
            [TextPart("Checking."), ToolCallPart("f", "{}")],
            "<|eot|>",
        ),
        (
            ['[get_weather(city="Paris", days=2, exact=True, unit=None), now()]', "<|eot|>"],
            [
                ToolCallPart(
                    "get_weather", '{"city": "Paris", "days": 2, "exact": true, "unit": null}'
                ),
                ToolCallPart("now", "{}"),
            ],
            "<|eot|>",
        ),
        (
            ["<|python_start|>", '[f(a="x")]', "<|python_end|>", "<|eom|>"],
            [ToolCallPart("f", '{"a": "x"}')],
            "<|eom|>",
        ),
        (
            ['{"type": "function", "name": "f", "parameters": {"n": "10"}}', "<|eom|>"],
            [ToolCallPart("f", '{"n": "10"}')],
            "<|eom|>",
        ),
        (["[1, 2] and [f(x)]", "<|eot|>"], [TextPart("[1, 2] and [f(x)]")], "<|eot|>"),
        (["[f(1)]", "<|eot|>"], [TextPart("[f(1)]")], "<|eot|>"),
        (['{"name": "f"} said I', "<|eot|>"], [TextPart('{"name": "f"} said I')], "<|eot|>"),
    ],
)
def test_completions_parse_to_calls_or_text(
    llama4: Llama4Renderer, pieces: list[str], expected: list[Any], stop: str
) -> None:
    ids = _ids(llama4, *pieces)
    result = llama4.parse_response(ids)
    assert list(result.message.parts) == expected
    assert result.stop_token_id == llama4.table.control_id(stop)
    assert result.termination is Termination.STOP and not result.issues
    for size in (1, 3):
        assert _stream(llama4, ids, size) == result


def test_a_cut_off_call_keeps_its_text(llama4: Llama4Renderer) -> None:
    ids = _ids(llama4, "<|python_start|>", "<|python_end|>", '{"name": "f", "param')
    result = llama4.parse_response(ids)
    assert result.message.text == '{"name": "f", "param'
    assert result.termination is Termination.LENGTH


def test_a_header_before_the_stop_token_ends_the_message(llama4: Llama4Renderer) -> None:
    ids = _ids(llama4, "Hi", "<|header_start|>", "user", "<|header_end|>")
    result = llama4.parse_response(ids)
    assert result.message.text == "Hi" and result.termination is Termination.MALFORMED


# -- caller errors ------------------------------------------------------------------------------


def test_tools_without_a_user_message_are_refused(llama4: Llama4Renderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]: llama4 with tools"):
        llama4.build_generation_prompt(
            [{"role": "system", "content": "s"}], tools=[{"name": "f", "parameters": {}}]
        )


def test_trained_reasoning_is_refused_naming_the_message(llama4: Llama4Renderer) -> None:
    conv = next(c for c in CORPUS if c.id == "reasoning_last")
    with pytest.raises(ValueError, match=r"messages\[1\].*llama4"):
        llama4.build_supervised_example(conv.messages)


# -- tokenizers --------------------------------------------------------------------------------


def test_the_packaged_tokenizer_loads_without_the_hub_and_pickles_by_name() -> None:
    renderer = get_renderer("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert renderer.name == "llama4"
    again = pickle.loads(pickle.dumps(renderer))
    assert again.tokenizer is renderer.tokenizer
    messages = [{"role": "user", "content": "Hi"}]
    assert again.build_generation_prompt(messages) == renderer.build_generation_prompt(messages)


def test_the_packaged_tokenizer_encodes_as_meta_and_never_spells_control_tokens(
    llama4: Llama4Renderer, meta_tokenizer: Any
) -> None:
    text = "Hello wörld 🤖 <|eot|>  \n\n x"
    assert llama4.table.encode(text) == meta_tokenizer.encode(text, bos=False, eos=False)
    assert llama4.table.decode(llama4.table.encode(text)) == text
