"""The whitespace rules of text-level splitting, alone (renderers.text.whitespace).

Expected results are written by hand or come from a batch reference of the documented
rule written here (``reference_content``), never from the module under test.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers.text.whitespace import (
    WS,
    ContentWhitespace,
    KeptWhitespace,
    ReasoningTrim,
    content_whitespace,
    gap_separator,
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BLOCK = None  # a removed block in a sequence of content pieces


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([" ", " "], " "),
        (["", " "], " "),
        ([" ", ""], " "),
        (["", ""], ""),
        (["\t", "  "], "\t"),  # no line breaks: the first non-empty run
        (["\n\n", "\n\n"], "\n\n"),
        (["\n", "\n\n"], "\n\n"),  # the most line breaks
        (["\n\n", "\n"], "\n\n"),
        ([" ", "\n\n"], "\n\n"),  # a space before the block does not end the line
        (["\n\n", "\n    "], "\n\n    "),  # the next line's indentation
        (["\n", "  "], "\n  "),
        (["\n", "\n  ", "\n"], "\n"),
        ([" \n", "\n"], " \n"),  # ties: the first run, as written
        (["\r\n", "\n"], "\r\n"),
        (["\r\n", "\r\n\r\n"], "\r\n\r\n"),
    ],
)
def test_gap_between_content_keeps_the_widest_separator(runs, expected):
    assert gap_separator(runs) == expected


def reference_content(items: list[str | None]) -> str:
    """The content of a sequence of content pieces and removed blocks, by the rule:
    gaps (blocks and the whitespace around them) at an edge vanish, gaps between
    content leave :func:`gap_separator` of their runs (taken as given: tested above)."""
    tokens: list[str | None] = []  # characters and blocks
    for item in items:
        tokens.extend([BLOCK] if item is None else list(item))
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] is not BLOCK and tokens[i] not in WS:
            out.append(tokens[i])  # type: ignore[arg-type]
            i += 1
            continue
        j = i
        while j < len(tokens) and (tokens[j] is BLOCK or tokens[j] in WS):
            j += 1
        stretch = tokens[i:j]
        if BLOCK not in stretch:
            out.extend(stretch)  # type: ignore[arg-type]
        elif i > 0 and j < len(tokens):
            runs = [""]
            for t in stretch:
                if t is BLOCK:
                    runs.append("")
                else:
                    runs[-1] += t
            out.append(gap_separator(runs))
        i = j
    return "".join(out)


pieces = st.lists(
    st.one_of(st.none(), st.text(alphabet=" \t\r\nab", max_size=6)),
    max_size=14,
)


@given(pieces)
@SETTINGS
def test_streamed_content_follows_the_rule_and_holds_only_trailing_whitespace(items):
    ws = ContentWhitespace()
    emitted = ""
    received = ""
    for item in items:
        if item is None:
            ws.block()
            continue
        emitted += ws.text(item)
        received += item
        # all but the whitespace after the last non-whitespace character is out
        assert ws.held == len(received) - len(received.rstrip(WS))
        assert not emitted or emitted[-1] not in WS
    emitted += ws.finish()
    assert emitted == reference_content(items)


@given(pieces)
@SETTINGS
def test_kept_content_is_emitted_as_it_arrives(items):
    ws = KeptWhitespace()
    emitted = ""
    for item in items:
        if item is None:
            ws.block()
        else:
            assert ws.text(item) == item
            emitted += item
        assert ws.held == 0
    assert ws.finish() == ""
    assert emitted == "".join(i for i in items if i is not None)


def test_whitespace_modes_are_named():
    assert type(content_whitespace("tidy")) is ContentWhitespace
    assert type(content_whitespace("keep")) is KeptWhitespace
    with pytest.raises(ValueError, match="whitespace: expected 'tidy' or 'keep', got 'exact'"):
        content_whitespace("exact")


def test_whitespace_without_blocks_is_content():
    ws = ContentWhitespace()
    assert ws.text("  a ") == "  a"
    assert ws.text("\n") == ""
    assert ws.finish() == " \n"


def test_a_block_at_either_edge_takes_the_whitespace_along():
    ws = ContentWhitespace()
    assert ws.text(" \n") == ""
    ws.block()
    assert ws.text("\n\nAnswer.  ") == "Answer."
    ws.block()
    assert ws.text("\n") == ""
    assert ws.finish() == ""


@given(st.lists(st.text(alphabet=" \n\tab", max_size=8), max_size=4), st.data())
@SETTINGS
def test_reasoning_loses_outer_whitespace_and_segments_join_by_a_blank_line(segments, data):
    trim = ReasoningTrim()
    out = ""
    for segment in segments:
        cuts = sorted(data.draw(st.lists(st.integers(0, len(segment)), max_size=3)))
        for a, b in zip([0, *cuts], [*cuts, len(segment)], strict=True):
            out += trim.write(segment[a:b])
            assert out == out.strip(WS)
        trim.end_segment()
    assert out == "\n\n".join(s.strip(WS) for s in segments if s.strip(WS))
