"""Datasets in the shapes they are published in: ShareGPT (glaive, xLAM, ToolACE,
OpenHermes style rows), LLaMA-Factory's v1 messages and OpenAI messages, read into the
message model exactly: the same messages, hence the same ids, as the OpenAI conversation
each row stands for (written by hand beside it, rendered by the official template)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from renderers import Message, get_renderer
from renderers.core.messages import coerce_messages
from renderers.core.tools import normalize_tools
from renderers.prepare import DEFAULT_ROLES, ShapeError, detect_shape, read_conversation
from tests import strategies
from tests.conftest import tokenizer_for
from tests.corpus import TOOLS
from tests.oracle import hf_template_ids

DATA = Path(__file__).parent / "data"


def _jsonl(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


SHAREGPT = _jsonl("sharegpt_tools.jsonl")
SHAREGPT_AS_OPENAI = _jsonl("sharegpt_tools.openai.jsonl")


@pytest.fixture(scope="module")
def qwen3() -> Any:
    return get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"))


def _dicts(messages: Any) -> list[dict[str, Any]]:
    return [m.to_dict() for m in coerce_messages(messages)]


# -- ShareGPT -------------------------------------------------------------------------------


@pytest.mark.parametrize("k", range(len(SHAREGPT)))
def test_sharegpt_rows_read_as_the_openai_conversation_they_stand_for(k: int, qwen3: Any) -> None:
    row, expected = SHAREGPT[k], SHAREGPT_AS_OPENAI[k]
    conversation = read_conversation(row)
    assert conversation.shape == "sharegpt"
    assert _dicts(conversation.messages) == _dicts(expected["messages"])
    assert normalize_tools(conversation.tools) == expected["tools"]
    # The official template renders the OpenAI conversation to the same ids.
    example = qwen3.build_supervised_example(conversation.messages, conversation.tools)
    official = hf_template_ids(
        tokenizer_for("Qwen/Qwen3-8B"),
        expected["messages"],
        expected["tools"],
        add_generation_prompt=False,
    )
    assert example.tokens.tolist() == official


def test_parallel_calls_stay_one_assistant_message_and_results_take_their_names() -> None:
    xlam = read_conversation(SHAREGPT[1])
    calls = xlam.messages[2]
    assert (calls.role, [c.name for c in calls.tool_calls]) == (
        "assistant",
        ["get_current_weather", "get_local_time"],
    )
    assert [(m.role, m.name) for m in xlam.messages[3:5]] == [
        ("tool", "get_current_weather"),
        ("tool", "get_local_time"),
    ]
    assert xlam.messages[0] == Message("system", SHAREGPT[1]["system"])
    assert xlam.sources[:3] == ("system", "conversations[0]", "conversations[1]")
    consecutive = read_conversation(SHAREGPT[2])
    assert len(consecutive.messages[1].tool_calls) == 2
    assert consecutive.sources[1] == "conversations[1..2]"


def test_a_call_id_given_in_the_data_reaches_its_result() -> None:
    row = {
        "conversations": [
            {"from": "human", "value": "Hi"},
            {"from": "function_call", "value": '{"name": "f", "arguments": {}, "id": "call_7"}'},
            {"from": "observation", "value": "done"},
            {"from": "gpt", "value": "Done."},
        ]
    }
    messages = read_conversation(row).messages
    assert messages[1].tool_calls[0].id == "call_7"
    assert (messages[2].tool_call_id, messages[2].name) == ("call_7", "f")


def test_role_names_map_by_the_table_and_the_table_extends() -> None:
    assert DEFAULT_ROLES["human"] == "user" and DEFAULT_ROLES["observation"] == "tool"
    row = {
        "conversations": [
            {"from": "human", "value": "Hi"},
            {"from": "robot", "value": "Beep."},
        ]
    }
    with pytest.raises(
        ShapeError, match=r"^conversations\[1\]\.from: unknown role 'robot'.*--role"
    ):
        read_conversation(row)
    messages = read_conversation(row, roles={"robot": "assistant"}).messages
    assert [m.role for m in messages] == ["user", "assistant"]
    with pytest.raises(ValueError, match="expected one of system, developer, user"):
        read_conversation(row, roles={"robot": "android"})
    # The OpenAI shape maps names too (Gemini's "model", OpenAI's legacy "function").
    legacy = read_conversation(
        {
            "messages": [
                {"role": "user", "content": "Hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "f", "arguments": "{}"},
                },
                {"role": "function", "name": "f", "content": "ok"},
                {"role": "model", "content": "Done."},
            ]
        }
    ).messages
    assert [m.role for m in legacy] == ["user", "assistant", "tool", "assistant"]
    assert legacy[1].tool_calls[0].name == "f"


# -- LLaMA-Factory v1 -----------------------------------------------------------------------

WEATHER = {
    "name": "get_current_weather",
    "description": "Weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
LLAMAFACTORY = {
    "messages": [
        {"role": "system", "content": [{"type": "text", "value": "Be brief."}], "loss_weight": 0.0},
        {
            "role": "user",
            "content": [{"type": "text", "value": "Weather in Lyon?"}],
            "loss_weight": 0.0,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "value": "Checking."},
                {
                    "type": "tool_call",
                    "value": '{"name": "get_current_weather", "arguments": {"city": "Lyon"}}',
                },
            ],
            "loss_weight": 1.0,
        },
        {
            "role": "tool",
            "content": [{"type": "text", "value": '{"temperature": 21}'}],
            "loss_weight": 0.0,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "value": "21 degrees: warm enough."},
                {"type": "text", "value": "It is 21 °C in Lyon."},
            ],
            "loss_weight": 1.0,
        },
    ],
    "tools": json.dumps([WEATHER]),
}
LLAMAFACTORY_AS_OPENAI = [
    {"role": "system", "content": "Be brief.", "weight": 0.0},
    {"role": "user", "content": "Weather in Lyon?", "weight": 0.0},
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_current_weather", "arguments": '{"city": "Lyon"}'},
            }
        ],
        "weight": 1.0,
    },
    {
        "role": "tool",
        "name": "get_current_weather",
        "content": '{"temperature": 21}',
        "weight": 0.0,
    },
    {
        "role": "assistant",
        "content": "It is 21 °C in Lyon.",
        "reasoning_content": "21 degrees: warm enough.",
        "weight": 1.0,
    },
]


def test_llamafactory_messages_read_as_their_openai_conversation(qwen3: Any) -> None:
    conversation = read_conversation(LLAMAFACTORY)
    assert conversation.shape == "llamafactory"
    assert _dicts(conversation.messages) == _dicts(LLAMAFACTORY_AS_OPENAI)
    tools = [{"type": "function", "function": WEATHER}]
    assert normalize_tools(conversation.tools) == tools
    example = qwen3.build_supervised_example(conversation.messages, conversation.tools)
    official = hf_template_ids(
        tokenizer_for("Qwen/Qwen3-8B"), LLAMAFACTORY_AS_OPENAI, tools, add_generation_prompt=False
    )
    assert example.tokens.tolist() == official
    # loss_weight is the message's weight: both assistant turns are trained.
    assert [m.weight for m in conversation.messages] == [0.0, 0.0, 1.0, 0.0, 1.0]
    attributed = qwen3.build_supervised_example(
        conversation.messages, conversation.tools, attribution=True
    )
    assert set(attributed.message_indices[attributed.weights > 0].tolist()) == {2, 4}


def test_media_parts_are_refused_naming_the_part() -> None:
    row = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "value": "Look:"},
                    {"type": "image_url", "value": "a.png"},
                ],
            }
        ]
    }
    with pytest.raises(ShapeError, match=r"^messages\[0\]\.content\[1\]\.type: 'image_url'"):
        read_conversation(row)


# -- detection and errors -------------------------------------------------------------------


def test_detection_tells_the_shapes_apart() -> None:
    assert detect_shape(SHAREGPT[0]) == "sharegpt"
    assert detect_shape(LLAMAFACTORY) == "llamafactory"
    assert detect_shape(SHAREGPT_AS_OPENAI[0]) == "openai"
    # OpenAI content parts have "text", LLaMA-Factory's "value".
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}
    assert detect_shape(parts) == "openai"
    # Messages as JSON text (the safe way through Arrow) are read the same.
    assert read_conversation(
        {"conversations": json.dumps(SHAREGPT[0]["conversations"])}
    ).messages == (read_conversation(SHAREGPT[0]).messages)


@pytest.mark.parametrize(
    ("row", "error"),
    [
        (
            {"text": "Hello"},
            r"^fits no known shape \(tried openai, sharegpt, llamafactory\): no messages or "
            r"conversations field \(fields: text\)$",
        ),
        (
            {"messages": [{"speaker": "A", "text": "Hi"}]},
            r"^fits no known shape: openai and llamafactory need messages\[0\]\.role, sharegpt "
            r"messages\[0\]\.from \(its fields: speaker, text\)$",
        ),
        ({"conversations": "not json"}, r"^conversations: not valid JSON"),
        ({"messages": 3}, r"^messages: expected a list of messages, got int$"),
        (
            {"conversations": [{"from": "function_call", "value": "{'name': 'f'}"}]},
            r"^conversations\[0\]\.value: not valid JSON for a tool call",
        ),
        (
            {"conversations": [{"from": "function_call", "value": '{"name": "f"}'}]},
            r"^conversations\[0\]\.value\.arguments: missing$",
        ),
        (
            {"conversations": [{"from": "gpt", "value": None}]},
            r"^conversations\[0\]\.value: expected a string, got NoneType$",
        ),
        (
            {"conversations": [{"from": "system", "value": "A"}], "system": "B"},
            r"^conversations\[0\]: a system message, and the row's system field differs",
        ),
    ],
)
def test_rows_that_do_not_fit_name_the_shapes_tried_and_the_field(row: Any, error: str) -> None:
    with pytest.raises(ShapeError, match=error):
        read_conversation(row)


def test_a_forced_shape_reads_or_names_the_field_that_does_not_fit() -> None:
    with pytest.raises(ShapeError, match=r"^conversations\[0\]\.from: missing \(it has role"):
        read_conversation({"conversations": [{"role": "user", "content": "Hi"}]}, "sharegpt")
    forced = read_conversation(SHAREGPT[0], "sharegpt")
    assert forced.messages == read_conversation(SHAREGPT[0]).messages


def test_null_and_nan_mean_absent_in_every_field() -> None:
    nan = float("nan")
    row = {
        "conversations": [{"from": "human", "value": "Hi", "weight": nan}],
        "system": nan,
        "tools": nan,
    }
    conversation = read_conversation(row)
    assert conversation.messages == (Message("user", "Hi"),)
    assert conversation.tools is None
    for nothing in (None, "", "null"):  # tools as JSON text of nothing, too
        assert read_conversation({**row, "tools": nothing}).tools is None


# -- the property: any conversation, written in each shape, reads back the same ------------


def _arguments(text: str, as_object: bool) -> Any:
    return json.loads(text) if as_object else text


def to_sharegpt(
    messages: list[dict[str, Any]], *, system_field: bool, split_calls: bool, as_objects: bool
) -> dict[str, Any]:
    """``messages`` written as ShareGPT entries (system prompt in the row or as an entry,
    parallel calls as one list or as consecutive entries, arguments as objects or text)."""
    row: dict[str, Any] = {"tools": json.dumps(TOOLS)}
    entries: list[dict[str, Any]] = []
    for k, m in enumerate(messages):
        role = m["role"]
        if role == "system" and k == 0 and system_field and m["content"]:
            row["system"] = m["content"]  # (an empty one means none: it stays an entry)
        elif role in ("system", "user"):
            entries.append(
                {"from": "system" if role == "system" else "human", "value": m["content"]}
            )
        elif role == "tool":
            entries.append({"from": "observation", "value": m["content"]})
        else:
            calls = [
                {
                    "name": c["function"]["name"],
                    "arguments": _arguments(c["function"]["arguments"], as_objects),
                    "id": c["id"],
                }
                for c in m.get("tool_calls", [])
            ]
            if m["content"] or not calls:
                entries.append({"from": "gpt", "value": m["content"]})
            if split_calls:
                entries.extend({"from": "function_call", "value": json.dumps(c)} for c in calls)
            elif calls:
                value = calls[0] if len(calls) == 1 else calls
                entries.append({"from": "function_call", "value": json.dumps(value)})
    row["conversations"] = entries
    return row


def to_llamafactory(messages: list[dict[str, Any]], as_objects: bool) -> dict[str, Any]:
    """``messages`` as LLaMA-Factory v1 messages of typed parts."""
    out = []
    for m in messages:
        parts = []
        if m.get("reasoning_content"):
            parts.append({"type": "reasoning", "value": m["reasoning_content"]})
        if m["content"]:
            parts.append({"type": "text", "value": m["content"]})
        for c in m.get("tool_calls", []):
            call = {
                "name": c["function"]["name"],
                "arguments": _arguments(c["function"]["arguments"], as_objects),
                "id": c["id"],
            }
            parts.append({"type": "tool_call", "value": json.dumps(call, ensure_ascii=False)})
        out.append({"role": m["role"], "content": parts})
    return {"messages": out, "tools": json.dumps(TOOLS)}


PROPERTY_RENDERERS = [("qwen3", "Qwen/Qwen3-8B"), ("deepseek_v3.1", "deepseek-ai/DeepSeek-V3.1")]


def _outcome(renderer: Any, messages: Any, tools: Any) -> Any:
    try:
        example = renderer.build_supervised_example(messages, tools)
    except ValueError as exc:
        return str(exc)
    return example.tokens.tolist(), example.weights.tolist()


@pytest.fixture(scope="module")
def property_renderers() -> list[Any]:
    return [get_renderer(name, tokenizer_for(model)) for name, model in PROPERTY_RENDERERS]


@given(
    strategies.conversations(reasoning=False),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_any_conversation_written_as_sharegpt_reads_back_and_renders_the_same(
    property_renderers: list[Any],
    messages: list[dict[str, Any]],
    system_field: bool,
    split_calls: bool,
    as_objects: bool,
) -> None:
    row = to_sharegpt(
        messages, system_field=system_field, split_calls=split_calls, as_objects=as_objects
    )
    conversation = read_conversation(json.loads(json.dumps(row)))
    assert conversation.shape == "sharegpt"
    assert list(conversation.messages) == coerce_messages(messages)
    for renderer in property_renderers:
        assert _outcome(renderer, conversation.messages, conversation.tools) == _outcome(
            renderer, messages, TOOLS
        )


@given(strategies.conversations(), st.booleans())
def test_any_conversation_written_as_llamafactory_or_openai_reads_back_the_same(
    property_renderers: list[Any], messages: list[dict[str, Any]], as_objects: bool
) -> None:
    expected = coerce_messages(messages)
    for row in (to_llamafactory(messages, as_objects), {"messages": messages, "tools": TOOLS}):
        conversation = read_conversation(json.loads(json.dumps(row)))
        assert list(conversation.messages) == expected
        for renderer in property_renderers:
            assert _outcome(renderer, conversation.messages, conversation.tools) == _outcome(
                renderer, messages, TOOLS
            )
