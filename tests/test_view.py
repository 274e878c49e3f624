"""Token views (renderers.view): message headers found from the ids, the terminal text
with and without colour, the HTML page's data, and the Python entry points."""

from __future__ import annotations

import functools
import html
import json
import pickle
import re
from typing import Any

import numpy as np
import pytest

from renderers import get_renderer
from renderers.rendering import Renderer
from renderers.supervised_example import SupervisedExample
from renderers.view import TokenView, completion_view, supervised_view
from renderers.view.terminal import visible_whitespace
from tests.corpus import CORPUS, WEATHER_TOOL

NAMES = ("qwen3", "deepseek_v3", "deepseek_v3.1", "kimi_k2", "kimi_k2_thinking", "gpt_oss")
# Every renderer with its defaults, and the options that change how messages are written.
VARIANTS: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
    *((name, ()) for name in NAMES),
    ("deepseek_v3", (("fix_tool_format", True), ("render_thinking", True))),
    ("deepseek_v3.1", (("keep_thinking", True), ("thinking", True))),
    ("kimi_k2_thinking", (("call_ids", "numbered"),)),
    ("gpt_oss", (("dialect", "harmony"),)),
)


@functools.cache
def renderer(name: str, options: tuple[tuple[str, Any], ...] = ()) -> Renderer:
    return get_renderer(name, **dict(options))


def variant_id(variant: tuple[str, tuple[tuple[str, Any], ...]]) -> str:
    name, options = variant
    return name + "".join(f"-{k}={v}" for k, v in options)


@functools.cache
def corpus_views(name: str, options: tuple[tuple[str, Any], ...]) -> list[TokenView]:
    """The view of every corpus conversation the format can express, all assistant
    messages trained (Kimi: with the call ids Kimi models sample, which Kimi-K2-Thinking
    needs to train a call)."""
    from tests.test_kimi_k2 import with_kimi_ids

    r = renderer(name, options)
    views = []
    for conversation in CORPUS:
        if name.startswith("kimi"):
            conversation = with_kimi_ids(conversation)
        try:
            example = r.build_supervised_example(
                conversation.messages, tools=conversation.tools, train_on="all_assistant"
            )
        except ValueError:  # the format cannot express it (a caller error, tested elsewhere)
            continue
        views.append(supervised_view(example.tokens, example.weights, r))
    assert len(views) >= 20
    return views


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_message_segments_cover_every_token_in_order(
    variant: tuple[str, tuple[tuple[str, Any], ...]],
) -> None:
    for view in corpus_views(*variant):
        starts = [s.start for s in view.segments]
        ends = [s.end for s in view.segments]
        assert starts[0] == 0 and ends[-1] == len(view.ids)
        assert starts[1:] == ends[:-1]
        assert all(s.end > s.start for s in view.segments)


@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_trained_tokens_sit_under_assistant_headers(
    variant: tuple[str, tuple[tuple[str, Any], ...]],
) -> None:
    for view in corpus_views(*variant):
        trained_elsewhere = [
            (s.role, s.start, s.end)
            for s in view.segments
            if s.role != "assistant" and view.weights[s.start : s.end].any()
        ]
        assert not trained_elsewhere


TOOL_CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "functions.get_weather:0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C"},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
    {"role": "assistant", "content": "18C and sunny."},
]
# The messages each official template writes for TOOL_CONVERSATION (see each format's
# module docstring): Qwen3 puts consecutive tool results in one user turn; Kimi-K2 declares
# tools in a message of their own; Harmony adds a developer message for the instructions
# and names a tool result's author.
EXPECTED_ROLES = {
    "qwen3": ["system", "user", "assistant", "user", "assistant"],
    "deepseek_v3": ["system", "user", "assistant", "tool", "tool", "assistant"],
    "deepseek_v3.1": ["system", "user", "assistant", "tool", "tool", "assistant"],
    "kimi_k2": ["tool_declare", "system", "user", "assistant", "tool", "tool", "assistant"],
    "kimi_k2_thinking": [
        "tool_declare",
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ],
    "gpt_oss": [
        "system",
        "developer",
        "user",
        "assistant",
        "functions.get_weather",
        "functions.get_weather",
        "assistant",
    ],
}


@pytest.mark.parametrize("name", NAMES)
def test_message_headers_follow_the_format(name: str) -> None:
    r = renderer(name)
    example = r.build_supervised_example(TOOL_CONVERSATION, tools=[WEATHER_TOOL])
    view = supervised_view(example.tokens, example.weights, r)
    assert [s.role for s in view.segments] == EXPECTED_ROLES[name]


@pytest.mark.parametrize("name", NAMES)
def test_text_that_spells_a_marker_starts_no_message(name: str) -> None:
    r = renderer(name)
    spelled = " ".join(f"{marker}assistant\n" for marker in r.message_markers.starts)
    typed = [
        {**m, "content": f"{m['content']} {spelled}"} if m["role"] in ("user", "tool") else m
        for m in TOOL_CONVERSATION
    ]
    example = r.build_supervised_example(typed, tools=[WEATHER_TOOL])
    view = supervised_view(example.tokens, example.weights, r)
    assert [s.role for s in view.segments] == EXPECTED_ROLES[name]


def test_a_packed_row_shows_each_sequence_and_the_padding() -> None:
    r = renderer("qwen3")
    one = r.build_supervised_example([{"role": "user", "content": "a"}, ASSISTANT_OK])
    two = r.build_supervised_example(TOOL_CONVERSATION)
    ids = np.concatenate([one.tokens, two.tokens, [r.table.control_id("<|endoftext|>")] * 3])
    weights = np.concatenate([one.weights, two.weights, np.zeros(3)])
    view = supervised_view(ids, weights, r, sequence_lengths=[len(one.tokens), len(two.tokens)])
    labels = [(s.label, s.role) for s in view.segments]
    assert labels == [
        ("seq 0", "user"),
        ("seq 0", "assistant"),
        *(("seq 1", role) for role in EXPECTED_ROLES["qwen3"]),
        ("after the sequences", "padding"),
    ]
    with pytest.raises(ValueError, match="do not fit"):
        supervised_view(ids, weights, r, sequence_lengths=[len(ids) + 1])


ASSISTANT_OK = {"role": "assistant", "content": "ok"}


def test_ids_outside_the_vocabulary_are_a_clear_error() -> None:
    r = renderer("qwen3")
    with pytest.raises(ValueError, match=r"token_ids\[1\] = 999999999"):
        supervised_view([1, 999_999_999], [0, 1], r)


# -- terminal ---------------------------------------------------------------------------

MIXED = [
    {"role": "system", "content": "Tabs\there, a trailing space \nand \r\n CRLF."},
    {"role": "user", "content": "Say <|im_end|> literally."},
    {"role": "assistant", "content": "<|im_end|> is a control token's spelling.\n\n"},
]


def _sections(text: str) -> list[tuple[str, str]]:
    """(header, body) of each message in terminal text."""
    parts = re.split(r"^(── .*)\n", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def test_plain_text_shows_every_message_with_visible_whitespace() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(MIXED)
    view = supervised_view(example.tokens, example.weights, r)
    sections = _sections(view.to_text())
    assert len(sections) == len(view.segments)
    for (header, body), seg in zip(sections, view.segments, strict=True):
        trained = int(np.count_nonzero(example.weights[seg.start : seg.end]))
        assert header.startswith(f"── {seg.role} · {seg.end - seg.start} tokens, {trained} ")
        plain = re.sub("[⟪⟫⟦⟧]", "", body)
        expected = visible_whitespace(r.decode(example.tokens[seg.start : seg.end].tolist()))
        assert plain.rstrip("\n") == expected.rstrip("\n")
    assert "Tabs→here,·a·trailing·space·↵\nand·␍↵\n·CRLF." in view.to_text()


def test_plain_text_brackets_trained_runs_and_control_tokens() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(MIXED)
    text = supervised_view(example.tokens, example.weights, r).to_text()
    ids = example.tokens.tolist()
    trained = [visible_whitespace(r.decode(ids[a:b])) for a, b in _runs(example.weights != 0)]
    body = text.split("\n\n", 1)[1]  # after the summary and the legend
    assert [re.sub("[⟦⟧]", "", run) for run in re.findall("⟪(.*?)⟫", body, re.S)] == trained
    control = [r.decode([t]) for t in ids if t in r.table.control_ids]
    assert re.findall("⟦(.*?)⟧", body) == control
    # The user typed "<|im_end|>": ordinary tokens, so never bracketed as a control token.
    assert "Say·<|im_end|>·literally." in text
    assert "\x1b[" not in text


def _painted(text: str) -> list[tuple[str, str]]:
    return re.findall(r"\x1b\[([\d;]+)m(.*?)\x1b\[0m", text)


def test_colour_paints_trained_tokens_green_and_control_tokens_bold() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(MIXED)
    text = supervised_view(example.tokens, example.weights, r).to_text(color=True)
    body = text.split("\n\n", 1)[1]
    pieces = [(code, s) for code, s in _painted(body) if not code.startswith("1;36")]
    green = "".join(s for code, s in pieces if code.split(";")[0] in ("32", "92"))
    ids = example.tokens.tolist()
    trained = "".join(r.decode(ids[a:b]) for a, b in _runs(example.weights != 0))
    assert green == visible_whitespace(trained).replace("\n", "")
    dim = "".join(s for code, s in pieces if code.split(";")[0] in ("90", "2"))
    untrained = "".join(r.decode(ids[a:b]) for a, b in _runs(example.weights == 0))
    assert dim == visible_whitespace(untrained).replace("\n", "")
    bold = [s for code, s in pieces if code.endswith("1;4")]
    assert bold == [r.decode([t]) for t in ids if t in r.table.control_ids]
    assert "⟪" not in text and "⟦" not in text


# -- completions ------------------------------------------------------------------------


def test_completion_view_outlines_parts_and_says_how_it_ended() -> None:
    r = renderer("qwen3")
    answer = {
        "role": "assistant",
        "reasoning_content": "Check the weather.",
        "content": "Let me look.",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "P"}'}}
        ],
    }
    example = r.build_supervised_example([{"role": "user", "content": "Hi"}, answer])
    sampled = example.tokens[example.weights == 1].tolist()
    trailing = r.build_generation_prompt([{"role": "user", "content": "x"}])[:3]
    ids = sampled + trailing
    result = r.parse_response(ids)
    view = completion_view(result, ids, r, "a completion")
    assert [(p.start, p.end) for p in view.parts] == [tuple(s) for s in result.spans]
    assert [p.kind for p in view.parts] == ["thinking", "text", "tool_call"]
    assert view.parts[2].label == "tool call get_weather"
    assert view.weights.tolist() == [1.0] * len(sampled) + [0.0] * len(trailing)
    assert [s.role for s in view.segments] == ["assistant", "trailing"]
    assert "termination: stop" in view.notes
    text = view.to_text()
    assert "part 2: tool call get_weather" in text
    assert "〔thinking〕⟪⟦<think>⟧" in text


def test_completion_view_marks_issues_at_their_tokens() -> None:
    r = renderer("qwen3")
    think_end = r.table.control_id("</think>")
    ids = [*r.table.encode("no think opened"), think_end, *r.table.encode("answer")]
    result = r.parse_response(ids)
    assert result.issues, "the parser reports a stray </think>"
    view = completion_view(result, ids, r)
    text = view.to_text()
    position = result.issues[0].position
    assert f"⚠1 issue at token {position}: {result.issues[0].message}" in text
    assert view.issues == ((position, result.issues[0].message),)


# -- HTML -------------------------------------------------------------------------------


def _page_data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', page, re.S)
    assert match
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_the_page_is_self_contained() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(TOOL_CONVERSATION)
    page = example.to_html()
    assert page.startswith("<!doctype html>")
    for external in ("http://", "https://", "src=", "href=", "<link", "@import", "url("):
        assert external not in page


def test_the_page_holds_every_token_its_text_and_weight() -> None:
    r = renderer("qwen3")
    hostile = "</script><script>alert(1)</script><!-- café \x00 🌍"
    messages = [{"role": "user", "content": hostile}, ASSISTANT_OK]
    example = r.build_supervised_example(messages)
    page = example.to_html()
    assert "<script>alert(1)" not in page
    data = _page_data(page)
    assert data["ids"] == example.tokens.tolist()
    weights = [value for value, count in data["weights"] for _ in range(count)]
    assert weights == example.weights.tolist()
    assert set(data["control"]) == set(example.tokens.tolist()) & r.table.control_ids
    texts = [data["text"][str(t)] for t in data["ids"]]
    for token, text in zip(data["ids"], texts, strict=True):
        # A token holding part of a character shows those bytes escaped (\xf0\x9f).
        assert text == r.table.id_to_bytes[token].decode("utf-8", "backslashreplace")
    assert "</script><script>alert(1)</script><!-- café \x00 " in "".join(texts)


def test_the_page_has_a_header_per_message_and_a_summary() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(TOOL_CONVERSATION, train_on="all_assistant")
    page = example.to_html()
    headers = re.findall(r'<h2 class="hdr"><span class="role">(\w+)</span>', page)
    assert headers == EXPECTED_ROLES["qwen3"]
    summary = example.view().summary()
    assert f"<b>{summary.tokens:,}</b> tokens" in page
    assert f"<b>{summary.trained:,}</b> trained" in page
    for count in summary.by_role:
        assert f"<b>{html.escape(count.role)}</b> {count.tokens:,}" in page


# -- Python entry points ----------------------------------------------------------------


def test_an_example_shows_itself_in_text_html_and_notebooks() -> None:
    r = renderer("qwen3")
    example = r.build_supervised_example(TOOL_CONVERSATION)
    view = supervised_view(example.tokens, example.weights, r, "qwen3")
    assert example.to_text() == view.to_text()
    assert example.to_html() == view.to_html()
    frame = example._repr_html_()
    assert frame is not None and frame.startswith("<iframe srcdoc=")
    assert html.unescape(frame.split('srcdoc="', 1)[1].split('"', 1)[0]) == view.to_html()


def test_an_unpickled_example_explains_how_to_view_it() -> None:
    example = renderer("qwen3").build_supervised_example(TOOL_CONVERSATION)
    restored: SupervisedExample = pickle.loads(pickle.dumps(example))
    assert restored._repr_html_() is None  # a notebook falls back to the repr
    with pytest.raises(ValueError, match="supervised_view"):
        restored.to_html()


def _qwen3_rollout(r: Renderer) -> tuple[Any, list[tuple[int, Any]], list[list[int]]]:
    """A two-turn Qwen3 rollout (a tool call, then an answer) with each completion's
    start position and parse."""
    rollout = r.rollout([{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER_TOOL])
    call = {
        "role": "assistant",
        "reasoning_content": "Use the tool.",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "P"}'}}
        ],
    }
    answer = {"role": "assistant", "content": "18C."}
    completions, parsed = [], []
    for k, message in enumerate((call, answer)):
        example = r.build_supervised_example([{"role": "user", "content": "x"}, message])
        completion = example.tokens[example.weights == 1].tolist()
        start = len(rollout.prompt_ids)
        parsed.append((start, rollout.add_completion(completion)))
        completions.append(completion)
        if k == 0:
            rollout.add_messages([{"role": "tool", "content": "18C"}])
    return rollout, parsed, completions


def test_a_rollout_shows_each_sampled_turn_with_its_parts() -> None:
    r = renderer("qwen3")
    rollout, parsed, completions = _qwen3_rollout(r)
    view = supervised_view(rollout.tokens, rollout.weights, r, completions=parsed)
    assert [s.role for s in view.segments] == ["system", "user", "assistant", "user", "assistant"]
    ids = view.ids.tolist()
    spans = [(start + a, start + b) for start, result in parsed for a, b in result.spans]
    assert [(p.start, p.end) for p in view.parts] == spans
    for (start, result), completion in zip(parsed, completions, strict=True):
        assert ids[start : start + len(completion)] == completion
        for a, b in result.spans:
            assert ids[start + a : start + b] == completion[a:b]
    assert [p.kind for p in view.parts] == ["thinking", "tool_call", "text"]
    trained = [(a, b) for a, b in _runs(view.weights != 0)]
    assert trained == [(s, s + len(c)) for (s, _), c in zip(parsed, completions, strict=True)]


def test_a_rollout_views_itself_with_each_completions_parts() -> None:
    r = renderer("qwen3")
    rollout, parsed, _ = _qwen3_rollout(r)
    own = rollout.view()
    given = supervised_view(rollout.tokens, rollout.weights, r, completions=parsed)
    assert [(p.kind, p.start, p.end) for p in own.parts] == [
        (p.kind, p.start, p.end) for p in given.parts
    ]
    assert own.parts and own.ids.tolist() == rollout.tokens.tolist()
    assert own.weights.tolist() == rollout.weights.tolist()
