"""Tool definitions in every shape users have render like the OpenAI chat shape through the
official templates; tools and messages read back from Parquet render like their JSON."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from renderers import get_renderer
from renderers.core.tools import normalize_tools, without_nulls
from renderers.prepare import ConversationMapper
from tests.conftest import tokenizer_for
from tests.oracle import hf_template_ids

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": WEATHER_SCHEMA,
    },
}
SHAPES = {
    "openai": OPENAI,
    "flat": {"name": "get_weather", "description": "Current weather", "parameters": WEATHER_SCHEMA},
    "responses": {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather",
        "parameters": WEATHER_SCHEMA,
    },
    "anthropic": {
        "name": "get_weather",
        "description": "Current weather",
        "input_schema": WEATHER_SCHEMA,
        "cache_control": {"type": "ephemeral"},
    },
    "mcp": {
        "name": "get_weather",
        "title": "Weather",
        "description": "Current weather",
        "inputSchema": WEATHER_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    "json_text": json.dumps(OPENAI),
}
CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "content": "18 C"},
    {"role": "assistant", "content": "It is 18 C."},
]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_tool_shape_renders_like_the_openai_shape_in_the_qwen3_template(shape: str) -> None:
    qwen3 = get_renderer("Qwen/Qwen3-8B")
    expected = hf_template_ids(
        tokenizer_for("Qwen/Qwen3-8B"), CONVERSATION, [OPENAI], add_generation_prompt=False
    )
    example = qwen3.build_supervised_example(CONVERSATION, [SHAPES[shape]])
    assert example.tokens.tolist() == expected


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("shape", SHAPES)
def test_every_tool_shape_renders_like_the_openai_shape_in_the_gpt_oss_template(
    shape: str,
) -> None:
    gpt_oss = get_renderer("openai/gpt-oss-20b", date="2025-06-28")  # the fixed clock's date
    messages = CONVERSATION[:1]
    expected = hf_template_ids(
        tokenizer_for("openai/gpt-oss-20b"), messages, [OPENAI], add_generation_prompt=True
    )
    assert gpt_oss.build_generation_prompt(messages, [SHAPES[shape]]) == expected


@pytest.mark.parametrize("model", ["moonshotai/Kimi-K2-Instruct", "deepseek-ai/DeepSeek-V3.1"])
def test_every_tool_shape_renders_the_same_in_other_formats(model: str) -> None:
    renderer = get_renderer(model)
    expected = renderer.build_generation_prompt(CONVERSATION[:1], [OPENAI])
    for shape in SHAPES.values():
        assert renderer.build_generation_prompt(CONVERSATION[:1], [shape]) == expected


def test_tool_errors_name_the_tool_and_field() -> None:
    with pytest.raises(ValueError, match=r"^tools\[1\]\.name: expected a non-empty string"):
        normalize_tools([OPENAI, {"description": "no name"}])
    with pytest.raises(ValueError, match=r"^tools\[0\]\.type: 'web_search' is not a function"):
        get_renderer("openai/gpt-oss-20b").build_generation_prompt(
            CONVERSATION[:1], [{"type": "web_search", "name": "search"}]
        )
    with pytest.raises(ValueError, match=r"^tools: not valid JSON"):
        normalize_tools("[{")
    with pytest.raises(ValueError, match=r"^tools\[0\]\.function: expected a dict"):
        normalize_tools([{"type": "function", "function": "f"}])


def test_built_in_tools_are_kept_as_given_for_the_template_to_render() -> None:
    built_in = {"type": "retrieval"}
    assert normalize_tools([OPENAI, built_in]) == [OPENAI, built_in]
    qwen3 = get_renderer("Qwen/Qwen3-8B")
    tokenizer = tokenizer_for("Qwen/Qwen3-8B")
    expected = hf_template_ids(
        tokenizer, CONVERSATION[:1], [OPENAI, built_in], add_generation_prompt=True
    )
    assert qwen3.build_generation_prompt(CONVERSATION[:1], [OPENAI, built_in]) == expected


def test_without_nulls_drops_null_keys_and_keeps_unchanged_objects() -> None:
    value = {"a": 1, "b": None, "c": [{"d": None, "e": [None, 2]}], "f": {"g": 3}}
    assert without_nulls(value) == {"a": 1, "c": [{"e": [None, 2]}], "f": {"g": 3}}
    clean = {"a": [1, {"b": 2}]}
    assert without_nulls(clean) is clean


# -- a real Parquet round trip ------------------------------------------------------------


def _with_dict_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


# Arguments as objects in every row (Arrow cannot mix them with JSON text in one column).
ROWS: list[dict[str, Any]] = [
    {
        "messages": _with_dict_arguments(CONVERSATION),
        "tools": [SHAPES["anthropic"], SHAPES["flat"]],
    },
    {
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Search for cats"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "I should search.",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "search", "arguments": {"query": "cats", "limit": 3}},
                    }
                ],
            },
            {"role": "tool", "content": "3 results"},
            {"role": "assistant", "content": "Found 3."},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "description": "Search the web",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "query": {"type": "string"},
                            "limit": {"type": "integer", "minimum": 1},
                        },
                        "required": ["query"],
                    },
                },
            }
        ],
    },
    {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet back."},
        ],
        "tools": None,
    },
]


def _as_openai(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The row as the template accepts it: OpenAI-shaped tools, arguments as JSON text."""
    messages = copy.deepcopy(row["messages"])
    for m in messages:
        for call in m.get("tool_calls") or []:
            if not isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    return messages, normalize_tools(row["tools"])


@pytest.mark.parametrize("reader", ["pyarrow", "datasets"])
def test_rows_read_back_from_parquet_render_like_their_json(reader: str, tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    if reader == "datasets":
        import datasets

        batch = datasets.Dataset.from_parquet(str(path))[:]
    else:
        batch = pq.read_table(path).to_pydict()
    # Arrow gave every tool every key of every tool, filled with null.
    assert batch["tools"][0][0]["function"] is None
    # Such objects are refused by default (their keys may have been reordered); these
    # rows' keys never conflict, so rendered as stored, without the nulls, they are exact.
    with pytest.raises(ValueError, match="come back from Arrow structs"):
        ConversationMapper("Qwen/Qwen3-8B", train_on="all_assistant")(batch)
    # One row per conversation (not one per turn), to compare with the whole rendering.
    mapper = ConversationMapper(
        "Qwen/Qwen3-8B", train_on="all_assistant", arrow_structs="accept", split_turns="never"
    )
    table = mapper(batch)
    tok = tokenizer_for("Qwen/Qwen3-8B")
    for k, row in enumerate(ROWS):
        messages, tools = _as_openai(row)
        expected = hf_template_ids(tok, messages, tools, add_generation_prompt=False)
        assert table.column("input_ids")[k].as_py() == expected, k
