"""The tagged grammar's separators that no model module of the package writes in this
combination, but a template the template renderer reads may: text after the last call
longer than the separator before a call (``after_calls``), and a think block closed
without the padding it opened with (``think_end_padding``). Each is checked on both
parse paths (one-shot, and fed one id at a time with events) on Qwen3's real tokens."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from renderers import ParseResult, TextPart, ThinkingPart, ToolCallPart
from renderers.core.assembly import PartFinished, TextDelta
from renderers.core.grammars import TaggedParser, TagGrammar
from renderers.qwen3 import Qwen3Renderer, grammar
from tests.one_shot import parsed_both_ways

CALL = '\n{"name": "f", "arguments": {"a": 1}}\n'
WORDS = ("lorem ipsum dolor sit amet " * 10).strip()
"""Text long enough (with a call) for a parse to take the one-shot path."""


@pytest.fixture(scope="module")
def qwen3(qwen3_tokenizer: Any) -> Qwen3Renderer:
    return Qwen3Renderer(qwen3_tokenizer)


def _ids(r: Qwen3Renderer, *pieces: str | int) -> list[int]:
    """Text pieces encoded, control ids as they are."""
    out: list[int] = []
    for piece in pieces:
        out += r.table.encode(piece) if isinstance(piece, str) else [piece]
    return out


def _both_ways(
    r: Qwen3Renderer,
    g: TagGrammar,
    ids: Sequence[int],
    mp: pytest.MonkeyPatch,
    one_shot_path: bool = True,
    **kw: Any,
) -> ParseResult:
    """The parse of ``ids`` by a parser of ``g`` (on the one-shot path when
    ``one_shot_path``), checked against the same ids fed whole and one at a time, whose
    events must spell each finished part's text."""

    class Parsed(TaggedParser):
        pass

    def parser(_events: bool = True) -> Parsed:
        return Parsed(g, r.table, _events, **kw)

    fed = parser()
    events = [e for t in ids for e in fed.feed([t])]
    streamed = fed.finish()
    events += fed.final_events
    for e in events:
        if isinstance(e, PartFinished) and type(e.part) in (TextPart, ThinkingPart):
            deltas = "".join(
                d.text for d in events if isinstance(d, TextDelta) and d.index == e.index
            )
            assert deltas == e.part.text  # type: ignore[union-attr]
    with mp.context() as m:
        m.setattr(r, "stream_parser", parser)
        m.setattr(r, "parse_response", lambda ids: parser(False).parse(ids))
        parsed, fed_whole, one_shot = parsed_both_ways(r, Parsed, ids, mp)
    assert parsed == fed_whole == streamed
    assert one_shot == one_shot_path
    return parsed


@pytest.mark.parametrize("before_call", ["", "\n"], ids=repr)
def test_what_follows_the_last_call_goes_only_when_the_stop_token_comes(
    qwen3: Qwen3Renderer, before_call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = dataclasses.replace(grammar(qwen3.table), before_call=before_call, after_calls="\n\n")
    call = (qwen3.tool_call, CALL, qwen3.tool_call_end)
    stopped = _both_ways(qwen3, g, _ids(qwen3, WORDS, *call, "\n\n", qwen3.im_end), monkeypatch)
    assert stopped.message.parts == (TextPart(WORDS), ToolCallPart("f", '{"a": 1}'))
    cut = _both_ways(qwen3, g, _ids(qwen3, WORDS, *call, "\n\n"), monkeypatch)
    assert cut.message.parts[1:] == (ToolCallPart("f", '{"a": 1}'), TextPart("\n\n", None, True))
    # Text after a call keeps what only looks like the separator, and text is not after a call.
    more = _both_ways(
        qwen3, g, _ids(qwen3, *call, "\n\n" + WORDS + "\n\n", qwen3.im_end), monkeypatch
    )
    assert more.message.parts == (ToolCallPart("f", '{"a": 1}'), TextPart("\n\n" + WORDS))
    plain = _both_ways(qwen3, g, _ids(qwen3, WORDS + "\n\n", qwen3.im_end), monkeypatch)
    assert plain.message.parts == (TextPart(WORDS + "\n\n"),)


@pytest.mark.parametrize("opens_reasoning", [False, True])
def test_a_think_block_closed_without_padding_keeps_its_last_newline(
    qwen3: Qwen3Renderer, opens_reasoning: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = dataclasses.replace(grammar(qwen3.table), think_end_padding="")
    opening = () if opens_reasoning else (qwen3.think,)
    ids = _ids(qwen3, *opening, "\n" + WORDS + "\n", qwen3.think_end, "\n\nok", qwen3.im_end)
    parsed = _both_ways(
        qwen3, g, ids, monkeypatch, opens_reasoning=opens_reasoning, reasoning_prefix="\n"
    )
    assert parsed.message.parts == (ThinkingPart(WORDS + "\n"), TextPart("ok"))
    assert not parsed.issues
    # A call ending the reasoning (drafted calls read as the server does) strips no newline.
    call = (qwen3.tool_call, CALL, qwen3.tool_call_end, qwen3.think_end)
    ids = _ids(qwen3, *opening, "\n" + WORDS + "\n", *call, qwen3.im_end)
    parsed = _both_ways(
        qwen3,
        g,
        ids,
        monkeypatch,
        False,  # a call ending the reasoning is read on the general path
        opens_reasoning=opens_reasoning,
        reasoning_prefix="\n",
        calls_end_reasoning=True,
    )
    assert parsed.message.parts == (ThinkingPart(WORDS + "\n"), ToolCallPart("f", '{"a": 1}'))
    assert not parsed.issues


def test_a_call_without_a_closing_tag_runs_to_the_stop_token(
    qwen3: Qwen3Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grammar with a call token and no ``call_end`` (Llama 3's ``<|python_tag|>``):
    the stop token ends the call, complete and without an issue; cut off, it is
    incomplete."""
    g = dataclasses.replace(grammar(qwen3.table), call_end=None)
    ids = _ids(qwen3, WORDS, qwen3.tool_call, CALL, qwen3.im_end)
    stopped = _both_ways(qwen3, g, ids, monkeypatch)
    assert stopped.message.parts == (TextPart(WORDS), ToolCallPart("f", '{"a": 1}'))
    assert not stopped.issues
    cut = _both_ways(qwen3, g, ids[:-1], monkeypatch)
    assert cut.message.parts[0] == TextPart(WORDS)
    assert cut.message.parts[1].incomplete  # type: ignore[union-attr]
