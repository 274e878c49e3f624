"""Reading a ``<thinking …>`` opening tag as it arrives, alone
(renderers.text.attribute_tag)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers.text.attribute_tag import (
    BODY,
    CLOSED,
    CUT_OFF,
    NEED_MORE,
    NOT_A_TAG,
    AttributeTag,
)
from renderers.text.styles import THINKING_TAG

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAME = "<thinking"


def read(rest: str, cuts: list[int] = (), eof: bool = True):  # type: ignore[assignment]
    """Read the tag after its name in pieces: (statuses, final position, thought, tag)."""
    tag = AttributeTag(THINKING_TAG, 0, NAME)
    statuses = []
    thought: list[str | None] = []
    buf = ""
    pos = 0
    offset = len(NAME)  # of buf[0] in the text
    bounds = [*sorted(cuts), len(rest)]
    start = 0
    for k, cut in enumerate(bounds):
        offset += pos
        buf, pos = buf[pos:] + rest[start:cut], 0
        start = cut
        status, pos = tag.read(buf, pos, offset, eof and k == len(bounds) - 1)
        statuses.append(status)
        thought += tag.take_thought()
        if status != NEED_MORE:
            break
    return statuses, pos, thought, tag


def test_a_whole_tag_gives_its_attributes_and_streams_its_thought():
    statuses, pos, thought, tag = read(' thought="a &amp; b" thought_type=plan x>body')
    assert statuses == [BODY] and pos == len(' thought="a &amp; b" thought_type=plan x>')
    assert "".join(t for t in thought if t) == "a & b" and thought[-1] is None
    assert tag.attributes == [("thought_type", "plan"), ("x", "")]
    assert tag.committed and tag.held == 0


def test_a_self_closing_tag_ends_the_block():
    statuses, _, thought, tag = read(' thought="t" />rest')
    assert statuses == [CLOSED] and thought == ["t", None] and tag.attributes == []


@pytest.mark.parametrize("rest", [" about it, ok", " a=> b", " / b>", "cap"])
def test_prose_is_not_a_tag_and_gives_back_what_was_read(rest):
    statuses, pos, thought, tag = read(rest)
    assert statuses[-1] == NOT_A_TAG and not tag.committed and thought == []
    assert (tag.raw + rest[pos:]).startswith(NAME)
    assert NAME + rest == tag.raw + rest[pos:]  # nothing lost for the rescan


def test_an_unquoted_thought_waits_for_the_commit():
    _, _, thought, _ = read(" thought=short>")
    assert thought == ["short", None]


def test_a_committed_tag_skips_and_reports_malformed_syntax_once():
    statuses, _, _, tag = read(' x="1" ,,, y="2">')
    assert statuses == [BODY]
    assert tag.attributes == [("x", "1"), ("y", "2")]
    assert [i.position for i in tag.issues] == [len(NAME) + len(' x="1" ')]


def test_text_ending_inside_a_committed_tag_keeps_what_was_read():
    statuses, _, thought, tag = read(' thought_type="plan" thought="half')
    assert statuses == [CUT_OFF]
    assert tag.attributes == [("thought_type", "plan")] and thought == ["half", None]


def test_held_counts_the_undecided_tag_and_an_unfinished_reference():
    tag = AttributeTag(THINKING_TAG, 0, NAME)
    assert tag.read(" x=1 y", 0, 9, eof=False) == (NEED_MORE, 6)
    assert tag.held == len(NAME + " x=1 y")
    tag = AttributeTag(THINKING_TAG, 0, NAME)
    tag.read(' thought="a &am', 0, 9, eof=False)
    assert tag.take_thought() == ["a "] and tag.held == len("&am")


@given(
    st.sampled_from(
        [
            ' thought="x &quot;y&quot; z" t=1 ok>',
            " Confidence=0.9 hidden THOUGHT=short/>",
            ' a=\'1\' thought="two\nlines" b="&#x3C;">',
            ' x="1" ,, thought="t">',
        ]
    ),
    st.data(),
)
@SETTINGS
def test_pieces_give_the_same_tag_as_the_whole(rest, data):
    whole = read(rest)
    cuts = data.draw(st.lists(st.integers(0, len(rest)), max_size=6))
    pieces = read(rest, cuts)
    assert pieces[0][-1] == whole[0][-1]
    assert pieces[3].attributes == whole[3].attributes
    assert "".join(t for t in pieces[2] if t) == "".join(t for t in whole[2] if t)
    assert pieces[3].issues == whole[3].issues
