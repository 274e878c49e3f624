"""The benchmark's peer rows (renderers/bench/peers.py): for the families tml-renderers also
writes, our output and tml's must agree before anything is timed, once the inputs avoid
and the comparison undoes exactly the differences our modules document. Expected outputs
are tml-renderers' own; times are produced but never asserted."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from renderers import get_renderer
from renderers.bench import peers
from renderers.bench.workloads import TOOLS, complete_ids, ten_turn_conversation
from tests.conftest import tokenizer_for

pytest.importorskip("tml_renderers")

import torch  # noqa: F401  (tml-renderers needs PyTorch loaded first)

SOURCES = {
    "nemotron3": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "nemotron3_super": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "nemotron3_ultra": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "glm5.2": "tml_renderers.tokenizers:GlmTokenizer",
    "glm5.3": "tml_renderers.tokenizers:GlmTokenizer",
    "glm5.3_flash": "tml_renderers.tokenizers:GlmTokenizer",
}


@pytest.fixture(autouse=True)
def run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each timed function runs once (the rows' agreement is under test, not the times)."""

    def once(fns: list[Callable[[], Any]], **_: Any) -> list[float]:
        times = []
        for fn in fns:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return times

    monkeypatch.setattr(peers, "paired_median_seconds", once)
    monkeypatch.setattr(peers, "median_seconds", lambda fn, **kw: once([fn])[0])


def renderer(name: str) -> Any:
    return get_renderer(name, tokenizer_for(SOURCES[name]))


@pytest.mark.parametrize("name", SOURCES)
def test_rendering_rows_agree_with_tml_renderers_token_for_token(name: str) -> None:
    """The 10-turn conversation with tools: prompt and supervised example identical to
    tml's (its documented differences avoided or undone), loss weights too."""
    rows = peers.render_rows(renderer(name), ten_turn_conversation(), repeats=1)
    assert [r.measure.split(" vs ")[0] for r in rows] == [
        "build_generation_prompt",
        "build_supervised_example",
    ]
    for row in rows:
        assert row.extra["tokens_agree"], row.extra["comparison"]
        assert row.baseline_seconds is not None  # timed only because they agree
    assert rows[1].extra["weights_agree"]


@pytest.mark.parametrize("name", SOURCES)
def test_parse_rows_agree_with_tml_renderers(name: str) -> None:
    """The completion parses to the same reasoning, text and calls as tml's parser reads
    it: as sampled (Nemotron-3), or in the order every format writes (GLM-5, where tml
    reads a think block after the calls as text)."""
    r = renderer(name)
    rows = peers.parse_rows(r, complete_ids(r, 300), repeats=1)
    assert rows[-1].extra["outputs_agree"], rows[-1].extra
    assert len(rows) == (1 if name.startswith("nemotron3") else 2)


def test_newline_before_calls_is_written_only_between_think_end_and_a_call() -> None:
    r = renderer("nemotron3")
    control = r.table.control_id
    ids = [control("</think>"), control("<tool_call>"), control("<think>"), control("<tool_call>")]
    fixed, weights = peers._newline_before_calls(r, ids, [0.0, 1.0, 0.0, 0.0])
    newline = r.table.encode("\n")
    assert fixed == [ids[0], *newline, *ids[1:]]
    assert weights == [0.0, *[1.0] * len(newline), 1.0, 0.0, 0.0]
    assert peers._newline_before_calls(r, ids, []) == (fixed, [])


def test_only_the_documented_last_token_may_differ_in_a_supervised_example() -> None:
    r = renderer("glm5.3")
    match = peers._MATCHES["glm5.3"][0]
    ours = r.build_supervised_example(ten_turn_conversation(), tools=TOOLS)
    ids, weights = ours.tokens.tolist(), ours.weights.tolist()
    control = r.table.control_id

    def agree(theirs: list[int], weights: list[float] | None = weights) -> bool:
        return peers._compare_ids(r, match, ids, weights, theirs)[0]

    assert ids[-1] == control("<|user|>")
    assert agree([*ids[:-1], control("<|endoftext|>")])
    assert not agree([*ids[:-1], control("<|observation|>")])
    assert not agree([*ids[:-1], control("<|endoftext|>")], None)  # a prompt: no tolerance
    assert not agree([*ids[:-2], control("<|system|>"), control("<|endoftext|>")])


def test_sorted_properties_and_trimmed_text_change_only_what_tml_changes() -> None:
    messages = [{"role": "system", "content": " s "}, {"role": "user", "content": "u\n"}]
    messages += [{"role": "assistant", "content": " a "}, {"role": "tool", "content": " t "}]
    trimmed, tools = peers._trimmed((messages, TOOLS))
    assert [m["content"] for m in trimmed] == ["s", "u", " a ", " t "] and tools is TOOLS
    same, sorted_tools = peers._sorted_properties((messages, TOOLS))
    assert same is messages and sorted_tools is not None
    assert list(sorted_tools[0]["function"]["parameters"]["properties"]) == ["limit", "query"]
    assert list(TOOLS[0]["function"]["parameters"]["properties"]) == ["query", "limit"]
    assert sorted_tools[1] == TOOLS[1]
