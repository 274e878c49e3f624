"""The agent loop's events over the splitter (renderers.text.thought_stream): properties
over any chunking; the documents' own examples are in ``test_text_seeds.py``."""

from __future__ import annotations

import re
from datetime import datetime
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers.core.messages import TextPart, ThinkingPart
from renderers.text import (
    ContentCompleteEvent,
    ContentDeltaEvent,
    Thought,
    ThoughtStream,
    ThoughtStreamEvent,
    iter_thought_events,
    split_reasoning,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ID = re.compile(r"thought-(\d+)-[0-9a-z]{9}\Z")

FRAGMENTS = [
    "<thinking>", "</thinking>", "<think>", "</think>", '<thinking thought="t" ',
    'confidence="0.7" ', "thought_type='plan' ", "/>", ">", "<", "<thi", " ", "\n\n", "a",
    "word ", "é",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=25).map("".join)


def chunked(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def feed_all(stream: ThoughtStream, chunks: list[str]) -> list[list]:
    """The events of each chunk, then those of finish()."""
    return [stream.feed(c) for c in chunks] + [stream.finish()]


@given(texts, st.sampled_from(["tidy", "keep"]), st.data())
@SETTINGS
def test_events_carry_the_parts_for_any_chunking(text, whitespace, data):
    chunks = chunked(text, data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    per_chunk = feed_all(ThoughtStream("auto", whitespace=whitespace), chunks)
    events = [e for batch in per_chunk for e in batch]
    parts = split_reasoning(text, "auto", whitespace=whitespace)
    content = "".join(p.text for p in parts if type(p) is TextPart)
    # content: the deltas join to the clean content, which content-complete carries
    assert "".join(e.delta for e in events if type(e) is ContentDeltaEvent) == content
    assert events[-1] == ContentCompleteEvent(content, events[-1].timestamp)
    assert [type(e) for e in events].count(ContentCompleteEvent) == 1
    # thoughts: one per thinking part with text, in order, typed, numbered from 0
    thoughts = [e for e in events if type(e) is ThoughtStreamEvent]
    expected = [p for p in parts if type(p) is ThinkingPart and p.text]
    assert [e.content for e in thoughts] == [p.text for p in expected]
    assert [e.thought for e in thoughts] == [Thought.of(p) for p in expected]
    assert [e.index for e in thoughts] == list(range(len(thoughts)))
    assert all(ID.match(e.thought_id) for e in thoughts)
    assert len({e.thought_id for e in thoughts}) == len(thoughts)
    # per chunk: its thoughts, then at most one delta numbered by the chunk
    for k, batch in enumerate(per_chunk):
        kinds = [e.kind for e in batch if e.kind != "content-complete"]
        assert kinds == sorted(kinds, key=lambda kind: kind != "thought-stream")
        assert kinds.count("content-delta") <= 1
        assert all(e.index == k for e in batch if type(e) is ContentDeltaEvent)


def test_timestamps_and_ids_come_from_the_clock():
    stream = ThoughtStream("thinking", clock=lambda: 1736105600.5, task_id="t", context_id="c")
    (thought, delta, complete) = stream.feed("<thinking>x</thinking>y") + stream.finish()
    assert thought.timestamp == delta.timestamp == complete.timestamp == "2025-01-05T19:33:20.500Z"
    assert datetime.fromisoformat(thought.timestamp).timestamp() == 1736105600.5
    assert ID.match(thought.thought_id)[1] == "1736105600500"  # type: ignore[index]
    assert thought.task_id == delta.task_id == complete.task_id == "t"
    assert thought.to_dict()["contextId"] == delta.to_dict()["contextId"] == "c"
    assert "taskId" not in ThoughtStream().finish()[0].to_dict()


def test_a_cut_off_thought_is_a_thought_marked_incomplete():
    events = list(iter_thought_events(["Answer. <thinking>still going"], "thinking"))
    (thought,) = [e for e in events if type(e) is ThoughtStreamEvent]
    assert thought.content == "still going"
    assert thought.to_dict()["metadata"] == {
        "verbosity": "normal",
        "confidence": 0.5,
        "incomplete": True,
    }
    assert [e for e in events if type(e) is ThoughtStreamEvent and not e.content] == []


def test_thought_type_and_verbosity_are_chosen_from_the_documents_values():
    (event, _) = list(
        iter_thought_events(["<think>plan it</think>"], thought_type="planning", verbosity="brief")
    )
    assert (event.thought_type, event.verbosity) == ("planning", "brief")
    with pytest.raises(ValueError, match="thought_type: expected one of planning, reasoning"):
        ThoughtStream(thought_type="musing")
    with pytest.raises(ValueError, match="verbosity: expected one of brief, normal, detailed"):
        ThoughtStream(verbosity="loud")
