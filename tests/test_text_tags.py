"""Finding tags in text that may stop mid-tag, alone (renderers.text.tags)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers.text.styles import KIMI, STYLES, THINK, THINK_KIMI_K2, THINKING_TAG, TagStyle
from renderers.text.tags import MATCH, MORE, NO, Tag, compile_styles

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
AUTO = STYLES["auto"]  # THINK, THINKING_TAG, KIMI


@pytest.mark.parametrize(
    ("buf", "eof", "expected"),
    [
        ("<think>", False, MATCH),
        ("x<THINK>y", False, NO),  # at position 0
        ("<thi", False, MORE),
        ("<thi", True, NO),  # the text ended: a prefix is not a tag
        ("<thx", False, NO),
        ("", False, MORE),
    ],
)
def test_tag_at_a_position_is_there_undecided_or_not(buf, eof, expected):
    assert Tag("<think>", case_sensitive=False).at(buf, 0, eof) == expected


def test_tag_case_follows_the_style():
    assert Tag("<think>", case_sensitive=False).at("<THINK>", 0, False) == MATCH
    assert Tag("<think>", case_sensitive=True).at("<THINK>", 0, False) == NO


def test_hold_from_finds_the_longest_tag_prefix_ending_the_buffer():
    tag = Tag("</think>", case_sensitive=False)
    assert tag.hold_from("abc</th", 0) == 3
    assert tag.hold_from("abc<", 0) == 3
    assert tag.hold_from("abc</thx", 0) == 8
    assert tag.hold_from("abc</th", 5) == 7  # nothing before ``start`` is held


def test_openers_come_first_and_a_closer_without_a_block_is_reported_as_such():
    tags = compile_styles(AUTO)
    assert tags.match_at("<think>", 0, eof=False) == (MATCH, 0, 7)
    assert tags.match_at("</think>", 0, eof=False) == (MATCH, -1, 8)
    assert tags.match_at("◁think▷", 0, eof=False) == (MATCH, 2, 7)
    # "<think" could still be <think> (the first style) or <thinking
    assert tags.match_at("<think", 0, eof=False)[:2] == (MORE, 0)
    assert tags.match_at("<thinki", 0, eof=False)[:2] == (MORE, 1)


@pytest.mark.parametrize(
    ("buf", "eof", "expected"),
    [
        ("<thinking ", False, (MATCH, 0, 9)),  # an attribute tag: up to its name
        ("<thinking>", False, (MATCH, 0, 9)),
        ("<thinking/", False, (MATCH, 0, 9)),
        ("<thinking", False, (MORE, 0, 9)),
        ("<thinking", True, (NO, -1, 1)),
        ("<thinkingcap>", False, (NO, -1, 1)),
        ("<thinker>", False, (NO, -1, 1)),
    ],
)
def test_an_attribute_tag_name_must_end_at_whitespace_or_the_tag_end(buf, eof, expected):
    assert compile_styles((THINKING_TAG,)).match_at(buf, 0, eof) == expected


def test_a_block_ends_at_its_closer_or_at_an_implicit_end_that_stays():
    tags = compile_styles((THINK_KIMI_K2,))
    section = "<|tool_calls_section_begin|>"
    assert tags.find_end(0, "r</think>a", 0) == (1, 9)  # resume after the closer
    assert tags.find_end(0, "r" + section + "x", 0) == (1, 1)  # resume at the marker
    assert tags.find_end(0, "r" + section.upper() + "</think>", 0) == (1, 1)  # first wins
    assert tags.find_end(0, "r", 0) is None
    assert tags.hold_end(0, "r<|tool_calls_sec", 0) == 1
    assert tags.hold_end(0, "r</thi", 0) == 1
    assert tags.hold_end(0, "r<|x", 0) == 4


def test_compiled_styles_are_shared():
    assert compile_styles(AUTO) is compile_styles(AUTO)
    assert compile_styles((THINK, KIMI)).forced == -1
    assert compile_styles(STYLES["forced"]).forced == 0


def test_implicit_ends_are_checked_like_tags():
    with pytest.raises(ValueError, match=r"implicit_close\[0\]: a tag cannot start with"):
        TagStyle("<a>", "</a>", implicit_close=(" <b>",))


@given(st.text(alphabet="<>/thinkgTHIN◁▷ x", max_size=20), st.integers(0, 19))
@SETTINGS
def test_the_answer_at_a_position_never_depends_on_where_the_text_stops(text, i):
    """A verdict on a prefix is "undecided" or the verdict on the whole text."""
    if i >= len(text):
        return
    tags = compile_styles(AUTO)
    final = tags.match_at(text, i, eof=True)
    for cut in range(i + 1, len(text) + 1):
        partial = tags.match_at(text[:cut], i, eof=cut == len(text))
        if partial[0] != MORE:
            assert partial == final, cut
