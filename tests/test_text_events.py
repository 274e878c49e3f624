"""Parts and their events, alone (renderers.text.events)."""

from __future__ import annotations

from renderers.core.assembly import PartFinished, PartStarted, TextDelta
from renderers.core.messages import TextPart, ThinkingPart, ToolCallPart
from renderers.text.events import PartStream


def test_writing_another_kind_finishes_the_open_part():
    out = PartStream()
    out.write("text", "Hi")
    out.write("text", " there")
    out.write("thinking", "hmm")
    assert out.kind == "thinking"
    out.finish(attributes=(("thought_type", "plan"),))
    assert out.kind is None
    assert out.parts == [
        TextPart("Hi there"),
        ThinkingPart("hmm", attributes=(("thought_type", "plan"),)),
    ]
    assert out.take_events() == [
        PartStarted(0, "text"),
        TextDelta(0, "Hi"),
        TextDelta(0, " there"),
        PartFinished(0, TextPart("Hi there")),
        PartStarted(1, "thinking"),
        TextDelta(1, "hmm"),
        PartFinished(1, ThinkingPart("hmm", attributes=(("thought_type", "plan"),))),
    ]
    assert out.take_events() == []


def test_an_empty_part_can_be_started_and_finished_incomplete():
    out = PartStream()
    out.write("text", "A")
    out.start("thinking")
    out.finish(incomplete=True)
    assert out.parts == [TextPart("A"), ThinkingPart("", incomplete=True)]
    assert [type(e).__name__ for e in out.take_events()] == [
        "PartStarted", "TextDelta", "PartFinished", "PartStarted", "PartFinished"
    ]  # fmt: skip


def test_a_tool_call_is_added_whole_after_the_open_part():
    out = PartStream()
    out.write("text", "A")
    out.add(ToolCallPart("f", "{}"))
    assert out.kind is None
    assert out.parts == [TextPart("A"), ToolCallPart("f", "{}")]
    assert out.take_events() == [
        PartStarted(0, "text"),
        TextDelta(0, "A"),
        PartFinished(0, TextPart("A")),
        PartStarted(1, "tool_call"),
        PartFinished(1, ToolCallPart("f", "{}")),
    ]
