"""The worked examples of the seed documents (``../shared/seeds``, see its README), as tests.

Each input and output is copied from its document, whose file and section each test names
(documents ``000_…`` to ``003_…``; the token-level plan ``004_…`` is in
``test_seed_plan_004.py``). Where a document shows only an output (a display, an event),
the input is the smallest text that gives it and is marked *constructed*. Every example is
checked in batch and streamed at every split point (and one character at a time), and
:func:`test_every_example_is_copied_from_its_document` checks that the copied strings are
in the documents, when they are at hand.

Where a document's convention differs from our default, the test names the style or
option that gives the document's behaviour (``whitespace="keep"``, ``tool_calls=True``,
the ``blocks`` and ``agent`` displays, :class:`~renderers.text.ThoughtStream`).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from renderers.cli.think import (
    DISPLAYS,
    THOUGHT_ICONS,
    AgentDisplay,
    BlocksDisplay,
    Display,
    split_and_show,
)
from renderers.core.assembly import TextDelta
from renderers.core.messages import TextPart, ThinkingPart, UnparsedToolCallPart
from renderers.text import (
    ContentCompleteEvent,
    ContentDeltaEvent,
    ReasoningSplitter,
    Thought,
    ThoughtStream,
    ThoughtStreamEvent,
    split_reasoning,
    split_reasoning_openai,
)
from renderers.text.thought_stream import THOUGHT_TYPES, VERBOSITIES

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
DOCUMENTS = {
    "000": "000_45ae05f3edc51881.txt",  # SelfAI think-tag parsing
    "001": "001_457d40aa108d518f.txt",  # an agent loop's thought extraction
    "002": "002_86d1beafb0e9fe0e.txt",  # thought-stream extraction, three formats
    "003": "003_5f47c0b103c0d7ff.txt",  # a reasoning parser with per-model detectors
}
COPIED: list[tuple[str, str]] = []  # (document, a string copied from it)


def copied(document: str, text: str) -> str:
    """``text``, recorded as copied verbatim from ``document``."""
    COPIED.append((document, text))
    return text


def seed_text(document: str) -> str:
    """A document's text, its double-encoded characters repaired (the seeds README)."""
    text = (SEEDS / DOCUMENTS[document]).read_text(encoding="utf-8")
    if document == "000":  # UTF-8 read as cp1254, its 0xAD lost: 💭 is "ğŸ’"
        text = text.replace("ğŸ’", "💭")
    if document == "001":  # UTF-8 read as Mac Roman
        text = text.encode("mac_roman").decode("utf-8")
    return text


def parts_at_every_split(text: str, style: str, **options: object) -> list:
    """The parts of ``text`` in batch, checked equal when streamed cut at each position
    and one character at a time."""
    parts = split_reasoning(text, style, **options)  # type: ignore[arg-type]
    for cuts in [*([k] for k in range(len(text) + 1)), list(range(len(text)))]:
        splitter = ReasoningSplitter(style, **options)  # type: ignore[arg-type]
        prev = 0
        for cut in [*cuts, len(text)]:
            splitter.feed(text[prev:cut])
            prev = cut
        splitter.finish()
        assert list(splitter.parts) == parts, cuts
    return parts


def clean_and_thinks(parts: list) -> tuple[str, list[str]]:
    """``parse_think_tags``'s pair: the clean content and the thinking texts."""
    clean = "".join(p.text for p in parts if type(p) is TextPart)
    return clean, [p.text for p in parts if type(p) is ThinkingPart]


# == 000: SelfAI think-tag parsing ========================================================

# "## Implementation / #### parse_think_tags" and "## Testing": (input, clean, thinks)
PARSE_THINK_TAGS = [
    (
        copied("000", "Let me <think>analyzing...</think> answer this. <think>considering</think> Done."),  # noqa: E501
        copied("000", "Let me answer this. Done."),
        ["analyzing...", "considering"],
    ),
    (  # Test Case 1: Basic Parsing
        copied("000", "Answer: <think>reasoning</think> Final answer."),
        copied("000", "Answer: Final answer."),
        ["reasoning"],
    ),
    (  # Test Case 2: Multiple Think Tags
        copied("000", "<think>A</think> Text <think>B</think> More <think>C</think>"),
        copied("000", "Text More"),
        ["A", "B", "C"],
    ),
    (  # Test Case 4: No Think Tags
        copied("000", "Just normal text here."),
        "Just normal text here.",
        [],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("response", "clean", "thinks"), PARSE_THINK_TAGS)
def test_000_parse_think_tags_examples(response: str, clean: str, thinks: list[str]) -> None:
    """000, parse_think_tags and Test Cases 1, 2, 4: removal cleans up the spacing it
    creates (our default, ``whitespace="tidy"``)."""
    assert clean_and_thinks(parts_at_every_split(response, "think")) == (clean, thinks)


def test_000_multiline_think_tags() -> None:
    """000, Test Case 3: Multiline Think Tags (the document's assertions)."""
    response = copied("000", "\n<think>\nStep 1: Analyze\nStep 2: Plan\n</think>\nFinal output.\n")
    clean, thinks = clean_and_thinks(parts_at_every_split(response, "think"))
    assert "Step 1" in thinks[0]
    assert "Step 2" in thinks[0]
    assert "Final output." in clean


def test_000_case_insensitive() -> None:
    """000, Test Case 5: Case Insensitive."""
    response = copied("000", "<Think>A</Think> <THINK>B</THINK> <think>C</think>")
    assert clean_and_thinks(parts_at_every_split(response, "think"))[1] == ["A", "B", "C"]


def test_000_flow_diagram() -> None:
    """000, Architecture / Flow Diagram: the raw response (its box lines joined by
    spaces) gives the two think tags and the clean content of the diagram."""
    lines = [
        copied("000", '"Let me analyze <think>checking requirements...</think>'),
        copied("000", "this problem. <think>considering options</think> Here's"),
        copied("000", 'my solution."'),
    ]
    response = " ".join(lines)[1:-1]
    parts = parts_at_every_split(response, "think")
    assert clean_and_thinks(parts) == (
        "Let me analyze this problem. Here's my solution.",
        ["checking requirements...", "considering options"],
    )


def test_000_only_think_tags_in_the_think_style() -> None:
    """000, Troubleshooting: the parser handles only ``<think>`` (case-insensitive); other
    formats such as ``<thinking>`` stay in the output (``"auto"`` reads both)."""
    text = "<thinking>x</thinking>y"
    assert split_reasoning(text, "think") == [TextPart(text)]
    assert split_reasoning(text, "auto") == [ThinkingPart("x"), TextPart("y")]


@pytest.mark.parametrize(
    ("chunks", "kept", "tidy"),
    [
        (  # parse_think_tags_streaming, Example
            [copied("000", "Let me <thi"), copied("000", "nk>analyzing</think> answer")],
            "Let me  answer",
            "Let me answer",
        ),
        (  # Technical Details / Streaming Buffer Management
            [copied("000", "text <thi"), copied("000", "nk>content</think> more")],
            "text  more",
            "text more",
        ),
    ],
)
def test_000_streaming_buffer(chunks: list[str], kept: str, tidy: str) -> None:
    """000, parse_think_tags_streaming: a tag split across chunks is held, the text before
    it is safe to display as is (``whitespace="keep"``: "Let me " after the first chunk),
    and the think tag comes out complete."""
    splitter = ReasoningSplitter("think", whitespace="keep")
    first = splitter.feed(chunks[0])
    assert "".join(e.text for e in first if type(e) is TextDelta) == chunks[0][:-4]
    assert splitter.held == len("<thi")
    splitter.feed(chunks[1])
    splitter.finish()
    thinks = [chunks[1][3 : chunks[1].index("</think>")]]
    assert clean_and_thinks(list(splitter.parts)) == (kept, thinks)
    assert clean_and_thinks(parts_at_every_split("".join(chunks), "think")) == (tidy, thinks)


def run_display(
    text: str, display: type[Display], *, style: str = "think", color: bool = False
) -> tuple[str, str]:
    """(stdout, stderr) of ``renderers think --display ...`` on ``text``, checked the same
    when the text arrives cut at any position."""
    results = set()
    for cut in range(len(text) + 1):
        out, err = io.StringIO(), io.StringIO()
        split_and_show(
            [text[:cut], text[cut:]], ReasoningSplitter(style), display(err, out, color, False)
        )
        results.add((out.getvalue(), re.sub(r"\x1b\[[0-9;]*m", "", err.getvalue())))
    assert len(results) == 1, results
    out, err = io.StringIO(), io.StringIO()
    split_and_show([text], ReasoningSplitter(style), display(err, out, color, False))
    return out.getvalue(), err.getvalue()


# 000, Usage Examples: (section, raw response, what the user sees of the thinking,
# what goes on: the content)
SELFAI_EXAMPLES = [
    (
        "Example 1: Normal Chat with Think Tags",
        copied("000", """<think>
Need to explain this clearly.
Should cover:
- Blocking vs non-blocking
- Use cases
- Performance implications
</think>

The main difference between async and sync code is how they handle waiting for operations to complete.

<think>
Good start. Now explain blocking.
</think>

Synchronous code blocks execution while waiting, while asynchronous code can continue with other work."""),  # noqa: E501
        copied("000", """💭 [Thinking 1]
  Need to explain this clearly.
  Should cover:
  - Blocking vs non-blocking
  - Use cases
  - Performance implications

💭 [Thinking 2]
  Good start. Now explain blocking.

"""),
        copied("000", """The main difference between async and sync code is how they handle waiting for operations to complete.

Synchronous code blocks execution while waiting, while asynchronous code can continue with other work."""),  # noqa: E501
    ),
    (
        "Example 2: Planning with Think Tags",
        copied("000", """<think>
This requires multiple components:
1. API endpoints
2. Auth middleware
3. Database models
4. Tests
Let me create parallel subtasks.
</think>

{
  "subtasks": [
    {
      "id": "S1",
      "title": "Design API endpoints",
      ...
    },
    ...
  ]
}"""),
        copied("000", """💭 [Thinking 1]
  This requires multiple components:
  1. API endpoints
  2. Auth middleware
  3. Database models
  4. Tests
  Let me create parallel subtasks.

"""),
        None,  # the JSON plan as written: "clean for parsing"
    ),
    (
        "Example 3: Merge with Think Tags",
        copied("000", """<think>
S1 analyzed requirements
S2 designed architecture
S3 implemented tests
Need to combine these coherently.
</think>

Based on the analysis from S1, we implemented the architecture from S2, verified by tests from S3. The final solution provides..."""),  # noqa: E501
        copied("000", """💭 [Thinking 1]
  S1 analyzed requirements
  S2 designed architecture
  S3 implemented tests
  Need to combine these coherently.

"""),
        copied("000", "Based on the analysis from S1, we implemented the architecture from S2, verified by tests from S3. The final solution provides..."),  # noqa: E501
    ),
]  # fmt: skip


@pytest.mark.parametrize(("section", "raw", "seen", "clean"), SELFAI_EXAMPLES)
def test_000_usage_examples(section: str, raw: str, seen: str, clean: str | None) -> None:
    """000, Usage Examples: the thinking as the user sees it (``--display blocks``) and
    the clean content that goes to memory, tools and plans (stdout)."""
    out, err = run_display(raw, BlocksDisplay)
    assert err == seen, section
    assert out == (raw[raw.index("{") :] if clean is None else clean), section


def test_000_display_format() -> None:
    """000, UI Display / Display Format: numbered 💭 headers, two-space indented lines, a
    blank line after each block ("Extra line after all thinks"). Input constructed."""
    shown = copied("000", """💭 [Thinking 1]
  analyzing the requirements...
  checking constraints...

💭 [Thinking 2]
  considering option A vs B""")  # fmt: skip
    text = (
        "<think>analyzing the requirements...\nchecking constraints...</think>"
        "<think>considering option A vs B</think>"
    )
    assert run_display(text, BlocksDisplay) == ("", shown + "\n\n")


def test_000_display_colours() -> None:
    """000, UI Display / Features: a blue header, cyan text, only when colour is on."""
    text = "<think>one\ntwo</think>Answer"
    assert run_display(text, BlocksDisplay, color=True) == (
        "Answer",
        "\x1b[34m💭 [Thinking 1]\x1b[0m\n\x1b[36m  one\x1b[0m\n\x1b[36m  two\x1b[0m\n\n",
    )
    assert "\x1b[" not in run_display(text, BlocksDisplay, color=False)[1]


# == 001: an agent loop's thought extraction ==============================================


def agent_events(chunks: list[str], **options: object) -> list[list]:
    """The events of each chunk (then of the end) from a :class:`ThoughtStream` of the
    ``thinking`` style (the loop's ``<thinking>`` regex)."""
    stream = ThoughtStream("thinking", clock=lambda: 1736105600.0, **options)  # type: ignore[arg-type]
    return [stream.feed(c) for c in chunks] + [stream.finish()]


THOUGHT_STREAM_EVENT = [  # Event Types: interface ThoughtStreamEvent
    copied("001", field)
    for field in (
        "kind: 'thought-stream';", "contextId: string;", "taskId: string;",
        "thoughtId: string;", "thoughtType: ThoughtType;", "verbosity: ThoughtVerbosity;",
        "content: string;", "index: number;", "timestamp: string;",
    )
]  # fmt: skip


def test_001_thought_events_carry_type_id_timestamp_verbosity() -> None:
    """001, Event Emission and Event Types: a thought event per ``<thinking>`` block, of
    type ``reasoning`` and verbosity ``normal`` by default, a unique
    ``thought-{timestamp}-{random}`` id, a sequential index, a timestamp; the interface's
    fields by the document's names. Input constructed."""
    events = [
        e
        for batch in agent_events(["<thinking>a</thinking>x<thinking>b</thinking>"])
        for e in batch
    ]
    thoughts = [e for e in events if type(e) is ThoughtStreamEvent]
    assert [(t.content, t.index, t.thought_type, t.verbosity) for t in thoughts] == [
        ("a", 0, "reasoning", "normal"),
        ("b", 1, "reasoning", "normal"),
    ]
    assert all(re.fullmatch(r"thought-1736105600000-[0-9a-z]+", t.thought_id) for t in thoughts)
    assert thoughts[0].thought_id != thoughts[1].thought_id
    event = ThoughtStream(task_id="t", context_id="c").feed("<thinking>a</thinking>")[0].to_dict()
    for field in THOUGHT_STREAM_EVENT:
        assert field.split(":")[0] in event, field
    assert event["kind"] == "thought-stream"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", event["timestamp"])


DOCUMENTED_TYPES = [copied("001", f"  | '{name}'")[5:-1] for name in THOUGHT_TYPES]
copied("001", "export type ThoughtVerbosity = 'brief' | 'normal' | 'detailed';")


def test_001_thought_types_and_verbosities() -> None:
    """001, Event Types: ``ThoughtType`` and ``ThoughtVerbosity``."""
    assert THOUGHT_TYPES == (
        "planning", "reasoning", "reflection", "decision", "observation", "strategy"
    )  # fmt: skip
    assert VERBOSITIES == ("brief", "normal", "detailed")


def test_001_streaming_content_delta() -> None:
    """001, Testing 1: thoughts are taken out of streaming chunks and emitted as events;
    the tags are gone from content-delta and content-complete. Input constructed."""
    chunks = ["Let me <thin", "king>check</thinking> answer.", " Done"]
    per_chunk = agent_events(chunks)
    events = [e for batch in per_chunk for e in batch]
    assert [e.content for e in events if type(e) is ThoughtStreamEvent] == ["check"]
    deltas = [e.delta for e in events if type(e) is ContentDeltaEvent]
    assert "".join(deltas) == "Let me answer. Done"
    assert all("<" not in d and ">" not in d for d in deltas)
    assert events[-1] == ContentCompleteEvent("Let me answer. Done", events[-1].timestamp)


def test_001_multiple_thinking_tags_and_none() -> None:
    """001, Testing 2 and 3: each thought its own event with sequential indexing; content
    without thinking tags passes through unchanged, with no thought event. Inputs
    constructed."""
    (batch, _) = agent_events(["<thinking>one</thinking>A <thinking>two</thinking>B"])
    assert [(e.kind, getattr(e, "index", None)) for e in batch] == [
        ("thought-stream", 0), ("thought-stream", 1), ("content-delta", 0)
    ]  # fmt: skip
    plain = "Plain answer, no tags.\n"
    events = [e for batch in agent_events([plain]) for e in batch]
    assert not [e for e in events if type(e) is ThoughtStreamEvent]
    assert "".join(e.delta for e in events if type(e) is ContentDeltaEvent) == plain
    assert events[-1] == ContentCompleteEvent(plain, events[-1].timestamp)


AGENT_SHOWN = copied(
    "001", "🧠 reasoning: I need to analyze this carefully\nThe answer is 42\n📦 Content completed"
)
ICONS = [copied("001", f"  - {icon} {name}") for name, icon in THOUGHT_ICONS.items()]
copied("001", "  - 💭 (default)")


def test_001_display_example() -> None:
    """001, User Experience: the thought inline before the answer, and the completion
    (``--display agent``, stdout and stderr on one terminal). Input constructed."""
    shown = AGENT_SHOWN
    text = "<thinking>I need to analyze this carefully</thinking>The answer is 42"
    for cut in range(len(text) + 1):
        terminal = io.StringIO()
        split_and_show(
            [text[:cut], text[cut:]],
            ReasoningSplitter("thinking"),
            AgentDisplay(terminal, terminal, False, True),
        )
        assert terminal.getvalue() == shown + "\n", cut


def test_001_display_icons() -> None:
    """001, User Experience: an icon per thought type (💭 for others)."""
    assert len(ICONS) == 6 and set(THOUGHT_ICONS) == set(THOUGHT_TYPES)
    assert set(DISPLAYS) == {"numbered", "blocks", "agent"}


# == 002: thought-stream extraction in three formats =====================================

FORMATS = [
    (  # Format 1: Content Between Tags
        copied("002", "Let me analyze this. <thinking>I need to verify the calculation first</thinking> The answer is 42."),  # noqa: E501
        copied("002", "I need to verify the calculation first"),
        None,
        None,
        copied("002", "Let me analyze this.  The answer is 42."),
    ),
    (  # Format 2: Attributes with Closing Tag
        copied("002", 'Let me analyze this. <thinking thought_id="date_calculation_failure" thought="It seems there is still an issue with the date calculation. The datetime function may not be available either. I will need to use a different approach or inform the user." thought_type="reflection" confidence="0.7"></thinking> I apologize, but I am unable to calculate dates.'),  # noqa: E501
        copied("002", "It seems there is still an issue with the date calculation"),
        copied("002", '`thoughtType`: `"reflection"`') and "reflection",
        0.7,
        copied("002", "Let me analyze this.  I apologize, but I am unable to calculate dates."),
    ),
    (  # Format 3: Self-Closing Tag with Attributes
        copied("002", 'Analyzing... <thinking thought="Need to verify the calculation" thought_type="verification" confidence="0.9" /> The result is correct.'),  # noqa: E501
        copied("002", "Need to verify the calculation"),
        copied("002", '`thoughtType`: `"verification"`') and "verification",
        0.9,
        copied("002", "Analyzing...  The result is correct."),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "thought", "kind", "confidence", "content"), FORMATS)
@pytest.mark.parametrize("style", ["thinking", "auto"])
def test_002_formats(
    text: str, thought: str, kind: str | None, confidence: float | None, content: str, style: str
) -> None:
    """002, Supported Formats 1-3: the thought, its metadata typed, and the content with
    the text on both sides of the tag kept exactly (``whitespace="keep"``)."""
    parts = parts_at_every_split(text, style, whitespace="keep")
    assert [type(p) for p in parts] == [TextPart, ThinkingPart, TextPart]
    assert clean_and_thinks(parts)[0] == content
    typed = Thought.of(parts[1])
    assert typed.text.startswith(thought) and typed.text in text  # 2: the document abbreviates
    assert typed.thought_type == kind
    assert typed.confidence == (0.5 if confidence is None else confidence)
    (event,) = [
        e for e in ThoughtStream(style, whitespace="keep").feed(text) if e.kind == "thought-stream"
    ]
    metadata = event.to_dict()["metadata"]  # type: ignore[union-attr]
    assert (metadata.get("thoughtType"), metadata["confidence"]) == (kind, typed.confidence)
    assert metadata["confidence"] == (0.5 if confidence is None else confidence)
    assert split_reasoning(text, style)[0] == TextPart(content.split("  ")[0])  # ours: tidy


copied("002", "| `confidence` | Confidence level of the thought | `number` | `0.5` |")
copied(
    "002",
    '| `thought_type` | Type of thought (e.g., "reflection", "verification") | `string` | - |',
)
copied("002", "Additional attributes like `thought_id` are ignored but don't break parsing.")


def test_002_metadata_defaults() -> None:
    """002, Metadata Extraction: ``confidence`` is a number, 0.5 when absent;
    ``thought_type`` has no default; ``thought_id`` is ignored without breaking parsing.
    Inputs constructed."""
    (part,) = split_reasoning('<thinking thought="x" thought_id="t-1"/>', "thinking")
    assert Thought.of(part) == Thought("x", None, 0.5, attributes=(("thought_id", "t-1"),))
    assert Thought.of(part).to_dict() == {
        "thought": "x",
        "confidence": 0.5,
        "attributes": {"thought_id": "t-1"},
    }
    (event,) = ThoughtStream("thinking").feed('<thinking thought="x" thought_id="t-1"/>')
    assert event.thought_id.startswith("thought-")  # type: ignore[union-attr]  # not the attribute


for line in (
    "kind: 'thought-stream',", "thoughtType: 'reasoning',  // Always 'reasoning' for now",
    "thought: string,", "verbosity: 'normal',", "thoughtType?: string,", "confidence?: number,",
):  # fmt: skip
    copied("002", line)


def test_002_event_output() -> None:
    """002, Event Output: every format emits ``kind: 'thought-stream'``, ``thoughtType:
    'reasoning'``, the ``thought`` and ``metadata`` with ``verbosity: 'normal'``, the
    attribute's ``thoughtType`` and ``confidence`` (formats 2 and 3)."""
    (text, thought, kind, confidence, _) = FORMATS[1]
    (event,) = [
        e
        for e in ThoughtStream("thinking", task_id="t", context_id="c").feed(text)
        if type(e) is ThoughtStreamEvent
    ]
    data = event.to_dict()
    assert (data["kind"], data["taskId"], data["contextId"], data["thoughtType"]) == (
        "thought-stream",
        "t",
        "c",
        "reasoning",
    )
    assert data["thought"] == data["content"] and data["thought"].startswith(thought)
    assert data["metadata"] == {
        "verbosity": "normal",
        "thoughtType": kind,
        "confidence": confidence,
        "attributes": {"thought_id": "date_calculation_failure"},  # as written, uninterpreted
    }


def deltas_of(snapshots: list[str]) -> list[str]:
    """The streaming section's chunks are the content so far: the text each one adds."""
    return [b[len(a) :] for a, b in zip(["", *snapshots], snapshots, strict=False)]


@pytest.mark.parametrize(
    ("section", "snapshots", "expected"),
    [
        (
            "Complete Tag in Single Chunk",
            [copied("002", "Text <thinking>thought</thinking> more")],
            [["thought", "Text  more"]],
        ),
        (
            "Tag Split Across Chunks",
            [copied("002", "Text <thinking>thou"),
             copied("002", "Text <thinking>thought</thinking>"),
             copied("002", "Text <thinking>thought</thinking> more")],
            [["Text "], ["thought"], [" more"]],
        ),
        (
            "Partial Tag Detection",
            [copied("002", "Text <think"), copied("002", "Text <thinking>thought</thinking>")],
            [["Text "], ["thought"]],
        ),
    ],
)  # fmt: skip
def test_002_streaming_behavior(
    section: str, snapshots: list[str], expected: list[list[str]]
) -> None:
    """002, Streaming Behavior: per chunk, the thought events then the content delta
    (thoughts as their text, deltas as theirs); ``whitespace="keep"``."""
    per_chunk = ThoughtStream("thinking", whitespace="keep")
    got = []
    for chunk in deltas_of(snapshots):
        got.append(
            [e.content if type(e) is ThoughtStreamEvent else e.delta for e in per_chunk.feed(chunk)]
        )  # type: ignore[union-attr]
    assert got == expected, section


PARTIAL_TAGS = (
    copied(
        "002",
        "Partial tags detected: `<`, `<t`, `<th`, `<thi`, `<thin`, `<think`, `<thinki`, `<thinkin`",
    )
    .split(": ")[1]
    .replace("`", "")
    .split(", ")
)


@pytest.mark.parametrize("partial", PARTIAL_TAGS)
def test_002_partial_tags_are_held(partial: str) -> None:
    """002, Streaming Behavior / Partial Tag Detection: each partial tag is held, the
    text before it emitted."""
    for style in ("thinking", "auto"):
        splitter = ReasoningSplitter(style, whitespace="keep")
        events = splitter.feed("Text " + partial)
        assert "".join(e.text for e in events if type(e) is TextDelta) == "Text "
        assert splitter.held == len(partial)


# == 003: a reasoning parser with per-model detectors =====================================


FORMAT_003 = copied(
    "003", "<think>reasoning content here</think>actual response<tool_call>...</tool_call>"
)
copied("003", '"content": "actual response",           # Clean content only')
copied("003", '"content": "The answer is 4.",')
copied("003", '"reasoning_content": "Let me calculate: 2 + 2 = 4"')


def test_003_format() -> None:
    """003, Format: reasoning and tool-call tags are removed from the content, the
    reasoning separated and the tool call parsed (``tool_calls=True``; the document's
    call body ``...`` is not JSON, so the call is kept verbatim as not parsed)."""
    text = FORMAT_003
    parts = parts_at_every_split(text, "qwen3", tool_calls=True)
    assert parts[:2] == [ThinkingPart("reasoning content here"), TextPart("actual response")]
    assert type(parts[2]) is UnparsedToolCallPart and parts[2].raw == "..."
    fields = split_reasoning_openai(text, "qwen3", tool_calls=True)
    assert (fields["content"], fields["reasoning_content"]) == (
        "actual response",
        "reasoning content here",
    )
    assert fields["tool_calls"] == [
        {"type": "function", "function": {"name": "", "arguments": "..."}}
    ]
    call = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    fields = split_reasoning_openai(
        text.replace("<tool_call>...</tool_call>", call), "qwen3", tool_calls=True
    )
    assert fields["content"] == "actual response"
    assert fields["tool_calls"] == [
        {"type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    assert (
        "<tool_call>" in split_reasoning_openai(text, "qwen3")["content"]
    )  # ours: kept by default


def test_003_basic_example() -> None:
    """003, Basic Example: ``content`` and ``reasoning_content``. Input constructed."""
    text = "<think>Let me calculate: 2 + 2 = 4</think>The answer is 4."
    for style in ("qwen3", "think_tag", "deepseek_r1"):
        parts_at_every_split(text, style)
        assert split_reasoning_openai(text, style) == {
            "content": "The answer is 4.",
            "reasoning_content": "Let me calculate: 2 + 2 = 4",
        }


DETECTORS = [
    copied("003", f"| `{name}` |")[3:-3] for name in ("think_tag", "qwen3", "deepseek_r1", "kimi")
]


@pytest.mark.parametrize(
    ("detector", "text", "reasoning", "content"),
    [
        ("think_tag", "<think>r</think>a", "r", "a"),
        ("qwen3", "<think>r</think>a", "r", "a"),
        ("qwen3", "a", None, "a"),
        ("deepseek_r1", "<think>r</think>a", "r", "a"),  # (<think>)?...</think>
        ("deepseek_r1", "r</think>a", "r", "a"),  # force reasoning: until </think>
        ("kimi", "◁think▷r◁/think▷a", "r", "a"),
    ],
)
def test_003_detectors(detector: str, text: str, reasoning: str | None, content: str) -> None:
    """003, Supported Detector Types: each detector's format as a style of that name, in
    batch and streaming (Streaming Usage). Inputs constructed."""
    assert detector in DETECTORS
    parts_at_every_split(text, detector)
    assert split_reasoning_openai(text, detector) == {
        "content": content,
        "reasoning_content": reasoning,
    }
    splitter = ReasoningSplitter(detector)
    kinds: dict[int, str] = {}
    pieces: dict[str, str] = {"thinking": "", "text": ""}
    for ch in [*text, None]:
        for event in splitter.finish() if ch is None else splitter.feed(ch):
            if type(event) is TextDelta:
                pieces[kinds[event.index]] += event.text
            elif hasattr(event, "kind"):
                kinds[event.index] = event.kind  # type: ignore[union-attr]
    assert pieces == {"thinking": reasoning or "", "text": content}


# == the copies ===========================================================================


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed documents are not at ../shared/seeds")
def test_every_example_is_copied_from_its_document() -> None:
    texts = {document: seed_text(document) for document in DOCUMENTS}
    missing = [(document, text) for document, text in COPIED if text not in texts[document]]
    assert not missing
    assert len(COPIED) > 40
