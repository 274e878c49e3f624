"""Tests of text-level reasoning splitting (renderers.text).

Expected results are written by hand, or come from a small independent reference
implementation of the documented rules (``reference_split``: regex search over the whole
text, then the whitespace rule applied gap by gap), never from the code under
test. Streaming is checked against batch at every split point and at random multi-splits.
"""

from __future__ import annotations

import html
import random
import re
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from renderers.core.assembly import PartFinished, PartStarted, TextDelta
from renderers.core.messages import TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.text import (
    KIMI,
    STYLES,
    THINK,
    THINKING_TAG,
    TOOL_CALL_TAG,
    ReasoningSplitter,
    TagStyle,
    Thought,
    confidence,
    decode_entities,
    iter_split,
    openai_fields,
    resolve_style,
    split_reasoning,
    split_reasoning_openai,
    thought_type,
    thoughts,
)

WS = " \t\r\n"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def T(text: str) -> TextPart:
    return TextPart(text)


def R(text: str, incomplete: bool = False, **attrs: str) -> ThinkingPart:
    return ThinkingPart(text, incomplete=incomplete, attributes=tuple(attrs.items()))


def content(parts: list[TextPart | ThinkingPart]) -> str:
    return "".join(p.text for p in parts if type(p) is TextPart)


def stream(
    text: str, style: object, cuts: list[int], whitespace: str = "tidy"
) -> tuple[list, tuple, list]:
    """Feed ``text`` cut at ``cuts``; returns (parts, issues, events)."""
    splitter = ReasoningSplitter(style, whitespace=whitespace)  # type: ignore[arg-type]
    events = []
    prev = 0
    for cut in [*sorted(cuts), len(text)]:
        events += splitter.feed(text[prev:cut])
        prev = cut
    events += splitter.finish()
    return list(splitter.parts), splitter.issues, events


def batch(text: str, style: object, whitespace: str = "tidy") -> tuple[list, tuple]:
    splitter = ReasoningSplitter(style, whitespace=whitespace)  # type: ignore[arg-type]
    splitter.feed(text)
    splitter.finish()
    return list(splitter.parts), splitter.issues


def check_events(events: list, parts: list) -> None:
    """Events describe the parts: started in order, deltas joining to each part's text,
    finished with the final part, one part open at a time."""
    open_index = None
    deltas: dict[int, list[str]] = {}
    finished = []
    for ev in events:
        if type(ev) is PartStarted:
            assert open_index is None
            assert ev.index == len(finished)
            kinds = {ThinkingPart: "thinking", TextPart: "text"}
            assert ev.kind == kinds.get(type(parts[ev.index]), "tool_call")
            open_index = ev.index
            deltas[ev.index] = []
        elif type(ev) is TextDelta:
            assert ev.index == open_index and ev.text
            deltas[ev.index].append(ev.text)
        else:
            assert type(ev) is PartFinished and ev.index == open_index
            finished.append(ev.part)
            open_index = None
    assert open_index is None
    assert finished == parts
    for i, part in enumerate(parts):
        assert "".join(deltas[i]) == getattr(part, "text", "")  # a tool call comes whole


# -- an independent reference for plain (attribute-free) styles ---------------------------


def gap(runs: list[str], at_start: bool, at_end: bool) -> str:
    """What remains of the whitespace around removed blocks (the documented rule).

    ``runs`` are the whitespace before the first block, between blocks and after the last;
    ``at_start``/``at_end``: no content before / after the gap.
    """
    if at_start or at_end:
        return ""
    breaks = [r.count("\n") for r in runs]
    if max(breaks) == 0:
        return next((r for r in runs if r), "")
    widest = runs[breaks.index(max(breaks))]
    last = runs[-1]
    return widest[: widest.rindex("\n") + 1] + last[last.rfind("\n") + 1 :]


def reference_split(
    text: str,
    pairs: list[tuple[str, str]],
    forced: bool = False,
    implicit: tuple[str, ...] = (),
    keep: bool = False,
) -> tuple[list, list[int]]:
    """Plain styles, case-insensitive, by whole-text search (ASCII/◁ tags only);
    ``implicit`` markers also end a block and stay in the text. ``keep``: the content is
    the text between blocks exactly (``whitespace="keep"``)."""
    low = text.lower()
    pairs = [(o.lower(), c.lower()) for o, c in pairs]
    implicit = tuple(t.lower() for t in implicit)
    segments: list[tuple[str, str, bool]] = []  # ("text", s, _) / ("block", body, complete)
    strays: list[int] = []
    pos = 0

    def block(start: int, close: str) -> int:
        ends = [(low.find(t, start), t != close, t) for t in (close, *implicit)]
        ends = [e for e in ends if e[0] >= 0]
        if not ends:
            segments.append(("block", text[start:], False))
            return len(text)
        end, stays, tag = min(ends)
        segments.append(("block", text[start:end], True))
        return end if stays else end + len(tag)

    if forced:
        if not text:
            return [], []
        lead = len(text) - len(text.lstrip(WS))
        start = lead + len(pairs[0][0]) if low.startswith(pairs[0][0], lead) else 0
        pos = block(start, pairs[0][1])
    while pos < len(text):
        hits = [(low.find(o, pos), k) for k, (o, _) in enumerate(pairs)]
        hits = [h for h in hits if h[0] >= 0]
        i, k = min(hits) if hits else (len(text), -1)
        seg = text[pos:i]
        j = 0
        while True:  # stray closers: leftmost, first in order at a position
            found = [(low.find(c, pos + j, i), c) for _, c in pairs]
            found = [f for f in found if f[0] >= 0]
            if not found:
                break
            at, c = min(found)
            strays.append(at)
            j = at - pos + len(c)
        segments.append(("text", seg, True))
        if k < 0:
            break
        pos = block(i + len(pairs[k][0]), pairs[k][1])
    if keep:
        return _kept_parts(segments), strays
    # content and blocks in order; whitespace next to blocks is collected into gaps
    items: list = []  # str (content without whitespace at block sides) or ThinkingPart
    runs: list[str] | None = None  # the open gap's whitespace runs
    seen_content = False
    pending = ""  # trailing whitespace of the content, not yet known to touch a block
    for kind, s, complete in segments:
        if kind == "block":
            thinking = s.strip(WS)
            if runs is None:
                runs = [pending, ""]  # the run before the block, and the one after it
            else:
                runs.append("")
            pending = ""
            if thinking or not complete:
                items.append(ThinkingPart(thinking, incomplete=not complete))
            continue
        core = s.strip(WS)
        if not core:
            if runs is None:
                pending += s
            else:
                runs[-1] += s
            continue
        lead = s[: len(s) - len(s.lstrip(WS))]
        if runs is not None:
            runs[-1] += lead
            items.append(gap(runs, not seen_content, False))
            runs = None
        else:
            items.append(pending + lead)
        pending = s[len(s.rstrip(WS)) :]
        items.append(core)
        seen_content = True
    if runs is None:
        items.append(pending)
    parts: list = []
    current: list[str] = []
    for item in items:
        if type(item) is str:
            current.append(item)
            continue
        if "".join(current):
            parts.append(TextPart("".join(current)))
        current = []
        parts.append(item)
    if "".join(current):
        parts.append(TextPart("".join(current)))
    return parts, strays


def _kept_parts(segments: list[tuple[str, str, bool]]) -> list:
    """Parts of ``segments`` when the content is kept exactly: text between blocks
    without a part joins into one text part."""
    parts: list = []
    current = ""
    for kind, s, complete in segments:
        if kind == "text":
            current += s
            continue
        thinking = s.strip(WS)
        if thinking or not complete:
            if current:
                parts.append(TextPart(current))
            current = ""
            parts.append(ThinkingPart(thinking, incomplete=not complete))
    if current:
        parts.append(TextPart(current))
    return parts


KIMI_K2_SECTION = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
SERVER_NAMES = ["deepseek_r1", "qwen3", "qwen3_thinking", "kimi_k2"]
PLAIN_REFERENCE = {
    "think": ([("<think>", "</think>")], False, ()),
    "kimi": ([("◁think▷", "◁/think▷")], False, ()),
    "forced": ([("<think>", "</think>")], True, ()),
    ("<r>", "</r>"): ([("<r>", "</r>")], False, ()),
    # auto, on texts that never spell "<thinking"
    "auto": ([("<think>", "</think>"), ("◁think▷", "◁/think▷")], False, ()),
    # the inference servers' names
    "deepseek_r1": ([("<think>", "</think>")], True, ()),
    "qwen3": ([("<think>", "</think>")], False, ()),
    "qwen3_thinking": ([("<think>", "</think>")], True, ()),
    "kimi_k2": ([("<think>", "</think>")], False, KIMI_K2_SECTION),
}

FRAGMENTS = [
    "<think>", "</think>", "<THINK>", "</Think>", "◁think▷", "◁/think▷", "◁THINK▷",
    "<r>", "</r>", "<R>", "<", "</", "<th", "<thi", "</thin", "think", ">", "◁", "▷", "/",
    " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "a", "bc", "word ", "é", "日本", "x\n",
    "<|tool_calls_section_begin|>", "<|TOOL_CALL_SECTION_BEGIN|>", "<|tool_calls_sec", "<|",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


# -- hand-written expectations ------------------------------------------------------------

GOLDEN = [
    # (style, text, parts)
    ("think", "<think>\nI reason.\n</think>\n\nAnswer.", [R("I reason."), T("Answer.")]),
    ("think", "<think>\n\n</think>\n\nAnswer.", [T("Answer.")]),  # Qwen3 non-thinking
    ("think", "A <think></think> B", [T("A B")]),  # an empty block does not split the text
    (
        "think",
        "<think>one\ntwo</think>\n\n<THINK>three</Think>\n\nAnswer",
        [R("one\ntwo"), R("three"), T("Answer")],
    ),
    ("think", "<think>\n\n  multi\nline  \n\n</think>", [R("multi\nline")]),
    ("think", "Hello <think>abc", [T("Hello"), R("abc", incomplete=True)]),
    ("think", "Hello <think>", [T("Hello"), R("", incomplete=True)]),
    ("think", "Hello <think", [T("Hello <think")]),  # a cut-off tag is content
    ("think", "<think>a</thinking>b</think>c", [R("a</thinking>b"), T("c")]),
    ("think", "<think>a<think>b</think>c", [R("a<think>b"), T("c")]),  # no nesting
    ("think", "x < y and <thinker> or <THINKS>", [T("x < y and <thinker> or <THINKS>")]),
    ("kimi", "◁think▷\nr\n◁/think▷\n\nA", [R("r"), T("A")]),
    ("kimi", "◁THINK▷r◁/Think▷A", [R("r"), T("A")]),
    ("kimi", "<think>r</think>A", [T("<think>r</think>A")]),
    ("forced", "r1 reasoning\n</think>\n\nAnswer", [R("r1 reasoning"), T("Answer")]),
    ("forced", "<think>\nr\n</think>\n\nAnswer", [R("r"), T("Answer")]),
    ("forced", "\n  <THINK>r</think>A", [R("r"), T("A")]),
    ("forced", "a <think> b </think> c", [R("a <think> b"), T("c")]),
    ("forced", "r</think>A<think>b</think>C", [R("r"), T("A"), R("b"), T("C")]),
    ("forced", "still thinking", [R("still thinking", incomplete=True)]),
    ("forced", "  ", [R("", incomplete=True)]),
    ("forced", "", []),
    ("auto", "", []),
    ("auto", "Just text.\n", [T("Just text.\n")]),
    (
        "auto",
        "<think>a</think>B◁think▷c◁/think▷D<thinking thought='e'/>F",
        [R("a"), T("B"), R("c"), T("D"), R("e"), T("F")],
    ),
    (("<reasoning>", "</reasoning>"), "<REASONING>r</Reasoning>A", [R("r"), T("A")]),
    (
        TagStyle("<reasoning>", "</reasoning>", case_sensitive=True),
        "<REASONING>r</REASONING> <reasoning>s</reasoning>A",
        [T("<REASONING>r</REASONING>"), R("s"), T(" A")],
    ),
    ("auto", "a <thinking x=1 <think>r</think> b", [T("a <thinking x=1"), R("r"), T(" b")]),
    ([THINK, KIMI], "◁think▷a◁/think▷<think>b</think>C", [R("a"), R("b"), T("C")]),
    (
        TagStyle("<plan", "</plan>", attributes=True),
        '<plan step="1">do it</plan>done',
        [R("do it", step="1"), T("done")],
    ),
]


@pytest.mark.parametrize(("style", "text", "expected"), GOLDEN)
def test_split_matches_hand_written_parts(style, text, expected):
    assert split_reasoning(text, style) == expected


ATTRIBUTE_GOLDEN = [
    (
        '<thinking thought="Check the units." thought_type="verification" '
        'confidence="0.7"></thinking>The answer is 42.',
        [
            R("Check the units.", thought_type="verification", confidence="0.7"),
            T("The answer is 42."),
        ],
    ),
    (
        '<thinking thought="Plan first" thought_type="planning" />\nThen act.',
        [R("Plan first", thought_type="planning"), T("Then act.")],
    ),
    (  # entities, single quotes, quotes and tag characters inside values
        "<thinking thought='it&#39;s &quot;a &lt;b&gt; &amp; c&quot; &#x1F600; &hellip;'/>",
        [R('it\'s "a <b> & c" 😀 …')],
    ),
    (
        '<thinking thought="x > y /> z\nnext line" note="a=b"/>',
        [R("x > y /> z\nnext line", note="a=b")],
    ),
    (  # references without ';', unknown names and non-characters are kept verbatim
        '<thinking thought="&amp &bogus; &#0; & x;"/>',
        [R("&amp &bogus; &#0; & x;")],
    ),
    (  # unquoted and bare attributes, unknown ones kept in order, names as written
        "<THINKING Confidence=0.9 z=1 data-id=x.y hidden THOUGHT=short>body</Thinking>",
        [R("short\n\nbody", Confidence="0.9", z="1", **{"data-id": "x.y"}, hidden="")],
    ),
    (
        '<thinking z="1" thought="t" a="2" thought="again"/>',
        [R("t", z="1", a="2", thought="again")],
    ),
    ("<thinking>body</thinking>x", [R("body"), T("x")]),
    ("<thinking></thinking>x", [T("x")]),
    ("<thinking/>x", [T("x")]),
    (
        '<thinking thought="  padded  ">\n  body \n</thinking>',
        [R("padded\n\nbody")],
    ),
    (  # cut off inside a committed tag: what was read, unterminated
        '<thinking thought_type="plan" thought="half',
        [R("half", incomplete=True, thought_type="plan")],
    ),
    ('A <thinking thought="t">body', [T("A"), R("t\n\nbody", incomplete=True)]),
    # prose and non-tags stay content
    ("I'm <thinking about it, really.", [T("I'm <thinking about it, really.")]),
    ("I'm <thinking about", [T("I'm <thinking about")]),
    ("a <thinkingcap> b", [T("a <thinkingcap> b")]),
    ("a <thinking a=> b", [T("a <thinking a=> b")]),
    ("a <thinking / b>", [T("a <thinking / b>")]),
    (
        'Intro\n\n<thinking thought="t"/>\n\nAnswer',
        [T("Intro"), R("t"), T("\n\nAnswer")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), ATTRIBUTE_GOLDEN)
def test_thinking_element_attributes(text, expected):
    assert split_reasoning(text, "thinking") == expected
    assert split_reasoning(text, "auto") == expected


def test_malformed_attributes_after_commit_are_skipped_and_reported():
    text = '<thinking thought="a" ,,, x="1">body</thinking>'
    splitter = ReasoningSplitter("thinking")
    splitter.feed(text)
    splitter.finish()
    assert splitter.parts == (R("a\n\nbody", x="1"),)
    assert [i.position for i in splitter.issues] == [text.index(",")]
    assert "malformed" in splitter.issues[0].message


JUNCTIONS = [
    # (text, content) with "<think>x</think>" blocks removed
    ("Hello <think>x</think> world", "Hello world"),
    ("Hello<think>x</think> world", "Hello world"),
    ("Hello <think>x</think>world", "Hello world"),
    ("Hello<think>x</think>world", "Helloworld"),
    ("a\t<think>x</think>\tb", "a\tb"),
    ("<think>x</think>\n\nAnswer", "Answer"),
    ("<think>x</think>  Answer", "Answer"),
    ("Para1.\n\n<think>x</think>\n\nPara2.", "Para1.\n\nPara2."),
    ("Para1.\n<think>x</think>\n\nPara2.", "Para1.\n\nPara2."),
    ("Para1.\n\n<think>x</think>\nPara2.", "Para1.\n\nPara2."),
    ("Para1.\n<think>x</think>\nPara2.", "Para1.\nPara2."),
    ("Para1.<think>x</think>\n\nPara2.", "Para1.\n\nPara2."),
    ("Para1.\n\n<think>x</think>\n\n\n\nPara2.", "Para1.\n\n\n\nPara2."),
    ("Answer.\n\n<think>x</think>", "Answer."),
    ("Answer.\n\n<think>x</think>\n", "Answer."),
    ("Answer. <think>x</think> ", "Answer."),
    ("A\n\n<think>x</think>\n    code", "A\n\n    code"),
    ("A\n<think>x</think>\n\n    code", "A\n\n    code"),
    ("Line1\n<think>x</think>  - item", "Line1\n  - item"),
    ("A <think>x</think>\nB", "A\nB"),
    ("A\r\n\r\n<think>x</think>\r\n\r\nB", "A\r\n\r\nB"),
    ("A\r\n<think>x</think>\r\n\r\nB", "A\r\n\r\nB"),
    ("<think>a</think>\n\n<think>b</think>\n\nAnswer", "Answer"),
    ("A\n\n<think>a</think>\n\n<think>b</think>\n\nB", "A\n\nB"),
    ("A <think>a</think> <think>b</think> B", "A B"),
    ("A\n<think>a</think>\n  <think>b</think>\nB", "A\nB"),
    ("A<think>a</think>\n<think>b</think>\nB", "A\nB"),
    ("  <think>x</think>\n\nAnswer", "Answer"),
    ("  \n", "  \n"),
]


@pytest.mark.parametrize(("text", "expected"), JUNCTIONS)
def test_removal_leaves_natural_text(text, expected):
    assert content(split_reasoning(text, "think")) == expected


@given(st.text())
@SETTINGS
def test_text_without_tags_is_unchanged(text):
    low = text.lower()
    assume(not any(t in low for t in ("<think", "</think", "◁think▷", "◁/think▷")))
    for style in ("auto", "think", "kimi", "thinking"):
        expected = [TextPart(text)] if text else []
        assert split_reasoning(text, style) == expected


@given(texts, st.sampled_from(list(PLAIN_REFERENCE)), st.sampled_from(["tidy", "keep"]))
@SETTINGS
def test_batch_equals_reference_for_plain_styles(text, style, whitespace):
    assume("<thinking" not in text.lower())
    pairs, forced, implicit = PLAIN_REFERENCE[style]
    parts, issues = batch(text, style, whitespace)
    expected, strays = reference_split(text, pairs, forced, implicit, whitespace == "keep")
    assert parts == expected
    assert [i.position for i in issues if "closing tag" in i.message] == strays


# -- streaming ----------------------------------------------------------------------------

SAMPLES = [
    ("auto", "<think>\nI reason.\n</think>\n\nAnswer."),
    ("auto", "Para1.\n<think>x</think>\n\n  Para2 <think>y</think> end\r\n"),
    ("auto", "A\n<think>a</think>\n  <think>b</think>\nB <thi <think <th"),
    ("auto", "Hi ◁think▷k◁/think▷ there ◁/think▷ <think>cut"),
    ("auto", 'x <thinking thought="a &amp; b &#x1F600;" t=1/>\n\ny'),
    ("auto", "I'm <thinking about it, ok? <thinking> body </thinking>\n\nend"),
    ("auto", '<thinking thought="t" ,, a=\'&lt;\'>body</thinking>tail <thinking x="cut'),
    ("auto", "stray </think> and </THINKING> and ◁/think▷"),
    ("thinking", "<thinking confidence=0.9 hidden thought=s>b</thinking><thinking a=1"),
    ("forced", "\n<think>r</think>\n\nA<think>b</think>"),
    ("forced", "reasoning only </thin"),
    ("forced", "<thi"),
    ("kimi", "◁think▷\nr\n◁/think▷\n\nA◁thi"),
    (("<r>", "</r>"), "a<r>b</r> c <R>d"),
    ("kimi_k2", "a <think>r <|tool_calls_sec</think> b <THINK>s\n<|TOOL_CALLS_SECTION_BEGIN|>x"),
    ("kimi_k2", "<think>r<|tool_call_section_begin|> <think>s</think>\n\n<|tool_calls_sect"),
    ("deepseek_r1", "  <think>r</think>\n\nA <think>b"),
    ("qwen3", "r</think>a <think>b</think>\n"),
]


@pytest.mark.parametrize("whitespace", ["tidy", "keep"])
@pytest.mark.parametrize(("style", "text"), SAMPLES)
def test_streaming_equals_batch_at_every_split_point(style, text, whitespace):
    parts, issues = batch(text, style, whitespace)
    for cut in range(len(text) + 1):
        got_parts, got_issues, events = stream(text, style, [cut], whitespace)
        assert got_parts == parts, cut
        assert got_issues == issues, cut
        check_events(events, parts)
    got_parts, got_issues, events = stream(text, style, list(range(len(text))), whitespace)
    assert (got_parts, got_issues) == (parts, issues)
    check_events(events, parts)


attribute_fragments = st.sampled_from(
    [
        "<thinking", " thought=", '"', "'", "t", "&amp;", "&#10;", "&", "#", ";", "=",
        " x", "/", ">", "/>", "</thinking>", " ", "\n", "a b", "<think>", "</think>",
        ",", "◁think▷", "◁/think▷", "<",
    ]
)  # fmt: skip


@given(
    st.one_of(texts, st.lists(attribute_fragments, max_size=25).map("".join), st.text()),
    st.sampled_from(
        ["auto", "think", "thinking", "kimi", "forced", ("<r>", "</r>"), *SERVER_NAMES]
    ),
    st.sampled_from(["tidy", "keep"]),
    st.data(),
)
@SETTINGS
def test_streaming_equals_batch_at_random_splits(text, style, whitespace, data):
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    parts, issues = batch(text, style, whitespace)
    got_parts, got_issues, events = stream(text, style, cuts, whitespace)
    assert got_parts == parts
    assert got_issues == issues
    check_events(events, parts)


TAGS = ["<think>", "</think>", "◁think▷", "◁/think▷", "</thinking>", "<thinking"]


@given(texts)
@SETTINGS
def test_content_is_emitted_unless_it_may_start_a_tag(text):
    """Fed one character at a time, content lags the input only by a tag prefix."""
    low = text.lower()
    assume(not any(t in low for t in TAGS))
    splitter = ReasoningSplitter("auto")
    emitted = ""
    for i, ch in enumerate(text):
        emitted += "".join(e.text for e in splitter.feed(ch) if type(e) is TextDelta)
        prefix = low[: i + 1]
        held = max((k for t in TAGS for k in range(1, len(t)) if prefix.endswith(t[:k])), default=0)
        assert emitted == text[: i + 1 - held].rstrip(WS)  # whitespace waits for a block
        assert splitter.held == held


@given(texts)
@SETTINGS
def test_kept_content_is_emitted_unless_it_may_start_a_tag(text):
    """With ``whitespace="keep"`` content lags the input only by a tag prefix: the
    whitespace before a tag that is still arriving is out already."""
    low = text.lower()
    assume(not any(t in low for t in TAGS))
    splitter = ReasoningSplitter("auto", whitespace="keep")
    emitted = ""
    for i, ch in enumerate(text):
        emitted += "".join(e.text for e in splitter.feed(ch) if type(e) is TextDelta)
        prefix = low[: i + 1]
        held = max((k for t in TAGS for k in range(1, len(t)) if prefix.endswith(t[:k])), default=0)
        assert emitted == text[: i + 1 - held]
        assert splitter.held == held


BLOCKS = {  # a block of each style, as a regex over the whole text (no forced style)
    "think": r"<think>.*?(?:</think>|\Z)",
    "kimi": r"◁think▷.*?(?:◁/think▷|\Z)",
    "auto": r"<think>.*?(?:</think>|\Z)|◁think▷.*?(?:◁/think▷|\Z)",
    "kimi_k2": r"<think>.*?(?:</think>|(?=<\|tool_calls?_section_begin\|>)|\Z)",
}


@given(texts, st.sampled_from(list(BLOCKS)))
@SETTINGS
def test_kept_content_is_the_text_with_the_blocks_cut_out(text, style):
    """``whitespace="keep"``: the content is the text with each block (tags and body)
    cut out and nothing else changed."""
    assume("<thinking" not in text.lower())
    parts = split_reasoning(text, style, whitespace="keep")
    assert content(parts) == re.sub(BLOCKS[style], "", text, flags=re.S | re.I)


def test_thought_attribute_streams_before_the_tag_closes():
    splitter = ReasoningSplitter("auto")
    events = []
    for ch in 'Intro <thinking thought="long &amp; careful':
        events += splitter.feed(ch)
    deltas = [(e.index, e.text) for e in events if type(e) is TextDelta]
    assert "".join(t for i, t in deltas if i == 0) == "Intro"
    assert "".join(t for i, t in deltas if i == 1) == "long & careful"
    assert [e.kind for e in events if type(e) is PartStarted] == ["text", "thinking"]
    events = splitter.feed(' thought"/>') + splitter.finish()
    assert splitter.parts == (T("Intro"), R("long & careful thought"))


def test_undecided_thinking_tag_is_held_then_released_as_content():
    splitter = ReasoningSplitter("auto")
    assert splitter.feed("so <thinking about") == [PartStarted(0, "text"), TextDelta(0, "so")]
    assert splitter.held == len("<thinking about")
    events = splitter.feed(" it,")
    assert "".join(e.text for e in events if type(e) is TextDelta) == " <thinking about it,"
    assert splitter.held == 0


# -- API ----------------------------------------------------------------------------------


def test_openai_fields():
    parts = split_reasoning("<think>a</think>\n\nAnswer <think>b</think>")
    assert openai_fields(parts) == {"content": "Answer", "reasoning_content": "a\n\nb"}
    assert split_reasoning_openai("plain") == {"content": "plain", "reasoning_content": None}
    assert split_reasoning_openai("r</think>A", "forced") == {
        "content": "A",
        "reasoning_content": "r",
    }
    assert split_reasoning_openai("<thinking/>A") == {"content": "A", "reasoning_content": None}


def test_iter_split_events_end_with_finish():
    events = list(iter_split(["<thi", "nk>r</th", "ink>A"]))
    assert events == [
        PartStarted(0, "thinking"),
        TextDelta(0, "r"),
        PartFinished(0, R("r")),
        PartStarted(1, "text"),
        TextDelta(1, "A"),
        PartFinished(1, T("A")),
    ]


def test_issues_report_unterminated_blocks_and_stray_closers():
    splitter = ReasoningSplitter("auto")
    splitter.feed("a</think>b<think>c")
    splitter.finish()
    assert [i.position for i in splitter.issues] == [1, 18]
    assert "forced" in splitter.issues[0].message
    assert "ended inside" in splitter.issues[1].message


def test_style_names_and_errors():
    assert resolve_style("AUTO") == STYLES["auto"]
    assert resolve_style(THINKING_TAG) == (THINKING_TAG,)
    assert resolve_style(("<a>", "</a>")) == (TagStyle("<a>", "</a>"),)
    with pytest.raises(ValueError, match=r"unknown style 'xml'.*auto, think, thinking"):
        resolve_style("xml")
    with pytest.raises(ValueError, match="expected a style name"):
        resolve_style(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most one style can be forced"):
        resolve_style([STYLES["forced"][0], TagStyle("<b>", "</b>", forced=True)])
    with pytest.raises(ValueError, match="open: expected a non-empty string"):
        TagStyle("", "</a>")
    with pytest.raises(ValueError, match="close: a tag cannot start with whitespace"):
        TagStyle("<a>", " </a>")
    with pytest.raises(ValueError, match="open: an attribute style needs"):
        TagStyle("<a>", "</a>", attributes=True)
    with pytest.raises(ValueError, match="cannot be forced"):
        TagStyle("<a", "</a>", attributes=True, forced=True)
    with pytest.raises(ValueError, match="tool_call: a tool-call style has no attributes"):
        TagStyle("<call>", "</call>", forced=True, tool_call=True)
    assert resolve_style("think_tag") == resolve_style("think")  # the parser document's name


def test_feed_rejects_misuse():
    splitter = ReasoningSplitter()
    with pytest.raises(TypeError, match="expected str, got bytes"):
        splitter.feed(b"x")  # type: ignore[arg-type]
    splitter.finish()
    with pytest.raises(RuntimeError):
        splitter.feed("x")
    with pytest.raises(RuntimeError):
        splitter.finish()


@given(st.text(alphabet="&#xX0123456789abcdefABlmpqugt;; ", max_size=40), st.data())
@SETTINGS
def test_entity_decoding_agrees_with_the_stdlib_on_terminated_references(value, data):
    """Our decoder equals html.unescape except that it keeps references without ';'."""
    expected = re.sub(
        r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});",
        lambda m: m.group(0) if _bad_reference(m.group(0)) else html.unescape(m.group(0)),
        value,
    )
    assert decode_entities(value) == expected
    cuts = data.draw(st.lists(st.integers(0, len(value)), max_size=5))
    text = f'<thinking thought="{value.replace(chr(34), "")}"/>'
    assert stream(text, "thinking", cuts)[0] == batch(text, "thinking")[0]


def _bad_reference(ref: str) -> bool:
    if ref[1] != "#":
        return ref[1:] not in html.entities.html5
    cp = int(ref[3:-1], 16) if ref[2] in "xX" else int(ref[2:-1])
    return cp == 0 or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["thought_type", "confidence", "x", "data-id", "ns:a", "Z"]),
            st.text(alphabet="ab <>/&\"'\n◁é=", max_size=12),
            st.sampled_from(['"', "'", ""]),
        ),
        max_size=4,
    ),
    st.none() | st.text(alphabet="ab &<>\"'\n", max_size=12),
    st.none() | st.text(alphabet="ab &>\n", max_size=12),
    st.sampled_from(["", "Intro: ", "Intro\n\n", "Intro"]),
    st.sampled_from(["", "Answer", "\n\nAnswer", " answer"]),
    st.data(),
)
@SETTINGS
def test_generated_thinking_elements(attrs, thought, body, before, after, data):
    """Elements built from known values parse back to those values."""
    written = []
    for name, value, quote in attrs:
        if quote == "" and not re.fullmatch(r"[a-z0-9.é]+", value):
            quote = '"'
        written.append(f"{name}={quote}{html.escape(value) if quote else value}{quote}")
    if thought is not None:
        written.insert(len(written) // 2, f'thought="{html.escape(thought)}"')
    opening = "<thinking" + "".join(" " + w for w in written)
    element = opening + ("/>" if body is None else f">{body}</thinking>")
    text = before + element + after
    texts_ = [s.strip(WS) for s in (thought or "", body or "")]
    expected_attrs = tuple((n, v) for n, v, _ in attrs)
    reasoning = "\n\n".join(t for t in texts_ if t)
    lead, rest = before.rstrip(WS), after.lstrip(WS)
    separator = gap([before[len(lead) :], after[: len(after) - len(rest)]], not lead, not rest)
    if reasoning:
        expected = [
            *([T(lead)] if lead else []),
            ThinkingPart(reasoning, attributes=expected_attrs),
        ]
        if rest:
            expected.append(T(separator + rest))
    else:
        expected = [T(lead + separator + rest)] if lead or rest else []
    assert split_reasoning(text, "thinking") == expected
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    assert stream(text, "auto", cuts)[0] == expected


# -- scaling ------------------------------------------------------------------------------


def _document(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    pieces = []
    total = 0
    while total < size:
        piece = rng.choice(
            [
                "Some content with a < sign and <b>tags</b>.\n\n",
                "<think>\nreasoning " + "step " * rng.randint(1, 40) + "\n</think>\n\n",
                '<thinking thought="a &amp; b" thought_type="plan"/>\n',
                "◁think▷kimi◁/think▷ ",
                "x" * rng.randint(1, 80) + " ",
            ]
        )
        pieces.append(piece)
        total += len(piece)
    return "".join(pieces)


def _feed_chars(text: str) -> tuple[float, int]:
    splitter = ReasoningSplitter("auto")
    most_held = 0
    start = time.perf_counter()
    for ch in text:
        splitter.feed(ch)
        most_held = max(most_held, splitter.held)
    splitter.finish()
    return time.perf_counter() - start, most_held


def test_one_character_chunks_scale_linearly_and_hold_little():
    """Structural check (bounded holdback, same parts) plus a printed measurement; no
    timing assertion (the machine is shared)."""
    small, large = _document(50_000), _document(100_000)
    t_small, held_small = _feed_chars(small)
    t_large, held_large = _feed_chars(large)
    # the longest thing held: an undecided opening tag up to its first quote
    bound = len("<thinking thought=")
    assert held_small <= bound and held_large <= bound
    parts, _ = batch(large, "auto")
    assert stream(large, "auto", list(range(0, len(large), 7)))[0] == parts
    print(
        f"\n1-char feed: {len(small)} chars {t_small:.2f}s, {len(large)} chars {t_large:.2f}s "
        f"(ratio {t_large / t_small:.2f}); {t_large / len(large) * 1e6:.2f} µs/char"
    )


def test_long_blocks_and_values_are_not_buffered():
    text = "<think>" + "r" * 20_000 + "</think>" + '<thinking thought="' + "t" * 20_000 + '"/>'
    splitter = ReasoningSplitter("auto")
    for ch in text:
        splitter.feed(ch)
        assert splitter.held <= len("<thinking thought=")
    splitter.finish()
    assert splitter.parts == (R("r" * 20_000), R("t" * 20_000))


# -- whitespace a removed block leaves at the edges of the content ------------------------

EDGES = [
    # (style, text, parts): whitespace between a removed block and the start or the end of
    # the text is removed with the block; text without a block keeps its whitespace
    ("think", "Text <think>x</think>", [T("Text"), R("x")]),
    ("think", "Text\n\n<think>x</think>\n", [T("Text"), R("x")]),
    ("think", "Text <think>x", [T("Text"), R("x", incomplete=True)]),
    ("think", "A <think></think>", [T("A")]),
    ("think", "Answer. <think>a</think> <think>b</think> ", [T("Answer."), R("a"), R("b")]),
    ("think", "  <think>x</think>\n\nAnswer", [R("x"), T("Answer")]),
    ("think", "\n <think></think> \n", []),
    ("think", "  plain  \n", [T("  plain  \n")]),
    ("forced", "r</think>\n\nAnswer.\n\n<think>s</think>\n", [R("r"), T("Answer."), R("s")]),
    ("kimi", "Done. ◁think▷k◁/think▷", [T("Done."), R("k")]),
    ("auto", "\n<thinking thought='t'/>  \n", [R("t")]),
    # between content, the separator is the whitespace run with the most line breaks
    ("think", "Intro. <think>r</think>\n\nThe answer", [T("Intro."), R("r"), T("\n\nThe answer")]),
    ("think", "A <think>x</think>\nB", [T("A"), R("x"), T("\nB")]),
]


@pytest.mark.parametrize(("style", "text", "expected"), EDGES)
def test_removed_blocks_leave_no_whitespace_at_the_edges_of_the_content(style, text, expected):
    assert split_reasoning(text, style) == expected
    for cut in range(len(text) + 1):
        assert stream(text, style, [cut])[0] == expected, cut


# -- <thinking> attributes: the text as written, typed access on request ------------------


@pytest.mark.parametrize(
    "text",
    [
        "<thinking></thinking>x",
        "<thinking> \n\t </thinking>x",
        "<thinking/>x",
        '<thinking thought=" "/>x',
        '<thinking thought="" >\n</thinking>\n\nx',
    ],
)
def test_empty_thinking_element_yields_no_thought(text):
    assert split_reasoning(text) == [T("x")]
    assert split_reasoning_openai(text) == {"content": "x", "reasoning_content": None}


def test_empty_thinking_element_with_attributes_is_reported():
    splitter = ReasoningSplitter("thinking")
    splitter.feed('A <thinking confidence="0.9" thought_type="plan"/> B')
    splitter.finish()
    assert splitter.parts == (T("A B"),)
    assert len(splitter.issues) == 1
    assert "no reasoning text" in splitter.issues[0].message
    assert "confidence" in splitter.issues[0].message


def test_attributes_are_kept_as_written_without_invented_defaults():
    assert split_reasoning('<thinking thought="t" thought_type="plan"/>') == [
        R("t", thought_type="plan")
    ]
    assert split_reasoning("<thinking>body</thinking>") == [R("body")]


def test_known_attributes_have_typed_access():
    (part,) = split_reasoning('<thinking thought="t" Confidence="0.7" thought_type="plan"/>')
    assert part.attribute("confidence") == "0.7"
    assert part.attribute("CONFIDENCE") == "0.7"
    assert part.attribute("missing") is None
    assert confidence(part) == 0.7
    assert thought_type(part) == "plan"
    (bare,) = split_reasoning('<thinking thought="t"/>')
    assert confidence(bare) == 0.5
    assert confidence(bare, default=None) is None
    assert thought_type(bare) is None
    assert ThinkingPart("r").attribute("confidence") is None


@pytest.mark.parametrize("value", ["high", "1.5", "-0.1", "nan", ""])
def test_a_confidence_that_is_not_a_probability_is_reported_and_kept(value):
    """Malformed model output is data: reported, kept as written, read as the default."""
    splitter = ReasoningSplitter("thinking")
    splitter.feed(f'<thinking thought="t" confidence="{value}"/>')
    splitter.finish()
    (part,) = splitter.parts
    assert part.attribute("confidence") == value
    assert len(splitter.issues) == 1 and "confidence" in splitter.issues[0].message
    assert confidence(part) == 0.5
    assert confidence(part, default=None) is None
    assert Thought.of(part) == Thought("t", confidence=0.5, attributes=(("confidence", value),))


def test_the_typed_view_of_a_thought():
    (part,) = split_reasoning(
        '<thinking thought_id="x1" thought="t" Confidence="0.7" thought_type="plan" '
        'confidence="0.1"/>'
    )
    thought = Thought.of(part)
    assert thought == Thought(
        "t", "plan", 0.7, attributes=(("thought_id", "x1"), ("confidence", "0.1"))
    )
    assert thought.to_dict() == {
        "thought": "t",
        "thoughtType": "plan",
        "confidence": 0.7,
        "attributes": {"thought_id": "x1", "confidence": "0.1"},
    }
    (bare,) = thoughts(split_reasoning("A <think>r</think> B <thinking>cut"))[1:]
    assert bare.to_dict() == {"thought": "cut", "confidence": 0.5, "incomplete": True}
    assert thoughts(split_reasoning("<think>r</think>A")) == [Thought("r")]


# -- the reasoning-parser names of vLLM and SGLang ----------------------------------------

SERVER_STYLES = [
    # (style, text, parts): cases from the servers' parser tests, whitespace as they give it
    ("deepseek_r1", "I think this is the answer</think>The final answer is 42.",
     [R("I think this is the answer"), T("The final answer is 42.")]),
    ("deepseek_r1", "<think>I need to think about this.</think>The answer is 42.",
     [R("I need to think about this."), T("The answer is 42.")]),
    ("deepseek-r1", "I need to think about this. The answer is 42.",
     [R("I need to think about this. The answer is 42.", incomplete=True)]),
    ("qwen3", "<think>Let me think about this problem</think>The answer is 42.",
     [R("Let me think about this problem"), T("The answer is 42.")]),
    ("qwen3", "Direct answer without thinking.", [T("Direct answer without thinking.")]),
    ("qwen3", "<think>This is a reasoning section", [R("This is a reasoning section", True)]),
    ("qwen3_thinking", "I need to think about this step by step.</think>The answer is 42.",
     [R("I need to think about this step by step."), T("The answer is 42.")]),
    ("qwen3-thinking", "<think>I need to think about this.</think>The answer is 42.",
     [R("I need to think about this."), T("The answer is 42.")]),
    ("kimi", "◁think▷Let me consider this carefully◁/think▷The answer is 42.",
     [R("Let me consider this carefully"), T("The answer is 42.")]),
    ("kimi", "Direct answer without thinking tokens.",
     [T("Direct answer without thinking tokens.")]),
    ("kimi_k2", "<think>plan</think>Answer", [R("plan"), T("Answer")]),
    ("kimi_k2", "Plain answer.", [T("Plain answer.")]),
    ("kimi_k2", "<think>I will call f.<|tool_calls_section_begin|><|tool_call_begin|>",
     [R("I will call f."), T("<|tool_calls_section_begin|><|tool_call_begin|>")]),
    ("KIMI-K2", "<think>r\n<|tool_calls_section_begin|>x",
     [R("r"), T("<|tool_calls_section_begin|>x")]),
    ("think", "<think>r</think>A", [R("r"), T("A")]),
]  # fmt: skip


@pytest.mark.parametrize(("style", "text", "expected"), SERVER_STYLES)
def test_reasoning_parser_names_of_inference_servers_are_styles(style, text, expected):
    assert split_reasoning(text, style) == expected
    got, _, events = stream(text, style, list(range(len(text))))
    assert got == expected
    check_events(events, expected)


def test_qwen3_text_that_starts_inside_reasoning_points_to_qwen3_thinking():
    splitter = ReasoningSplitter("qwen3")
    splitter.feed("reasoning</think>Answer")
    splitter.finish()
    assert splitter.parts == (T("reasoning</think>Answer"),)
    assert "qwen3_thinking" in splitter.issues[0].message


def test_server_names_resolve_to_the_styles_they_mean():
    assert resolve_style("deepseek_r1") == resolve_style("DeepSeek-R1") == STYLES["forced"]
    assert resolve_style("qwen3") == STYLES["think"]
    assert resolve_style("qwen3-thinking") == STYLES["forced"]
    assert resolve_style("kimi") == STYLES["kimi"]


@pytest.mark.parametrize("name", ["gpt_oss", "gpt-oss", "openai_gptoss"])
def test_gpt_oss_names_explain_that_harmony_needs_the_token_parser(name):
    with pytest.raises(ValueError, match=r"Harmony.*get_renderer\('gpt_oss'\)"):
        resolve_style(name)


# -- tool calls written as text (tool_calls=True) -----------------------------------------

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_tool_calls_stay_in_the_content_unless_asked_for():
    text = "<think>r</think>\n\nLet me check.\n" + CALL
    assert split_reasoning(text, "qwen3") == [R("r"), T("Let me check.\n" + CALL)]
    assert split_reasoning(text, "qwen3", tool_calls=True) == [
        R("r"),
        T("Let me check."),
        ToolCallPart("get_weather", '{"city": "Paris"}'),
    ]


@pytest.mark.parametrize(
    ("text", "expected", "issue"),
    [
        (  # JSON that does not parse: the body verbatim, the reason, an issue
            "A<tool_call>{bad json</tool_call>B",
            [T("A"), "UNPARSED", T("B")],
            "tool call not parsed: invalid JSON",
        ),
        (  # cut off by the end of the text
            'A <tool_call>{"name": "f", "argu',
            [T("A"), "UNPARSED"],
            "cut off before </tool_call>",
        ),
        (  # a closer with no call
            "A </tool_call> B",
            [T("A </tool_call> B")],
            "closing tag '</tool_call>' without an opening tag (kept as text)",
        ),
    ],
)
def test_a_malformed_tool_call_is_data(text, expected, issue):
    splitter = ReasoningSplitter("qwen3", tool_calls=True)
    splitter.feed(text)
    splitter.finish()
    parts = list(splitter.parts)
    assert [p if type(p) is not UnparsedToolCallPart else "UNPARSED" for p in parts] == expected
    for part in parts:
        if type(part) is UnparsedToolCallPart:  # every character of the body is kept
            assert part.raw == text[text.index("<tool_call>") + 11 :].split("</tool_call>")[0]
            assert part.incomplete == ("</tool_call>" not in text)
    (found,) = splitter.issues
    assert issue in found.message and "forced" not in found.message


def test_a_tool_call_inside_reasoning_is_reasoning_text():
    text = "<think>maybe " + CALL + "</think>Answer"
    assert split_reasoning(text, "qwen3", tool_calls=True) == [R("maybe " + CALL), T("Answer")]


def test_tool_call_events_and_openai_fields():
    text = "<think>r</think>actual response" + CALL + "<tool_call>oops</tool_call>"
    events = list(iter_split([text], "qwen3", tool_calls=True))
    assert [e.kind for e in events if type(e) is PartStarted] == [
        "thinking", "text", "tool_call", "tool_call"
    ]  # fmt: skip
    fields = split_reasoning_openai(text, "qwen3", tool_calls=True)
    assert fields == {
        "content": "actual response",
        "reasoning_content": "r",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {"type": "function", "function": {"name": "", "arguments": "oops"}},
        ],
    }
    assert resolve_style("qwen3") == STYLES["qwen3"]  # the option does not change the style
    assert TOOL_CALL_TAG.tool_call and TOOL_CALL_TAG.case_sensitive


call_fragments = st.sampled_from(
    [
        "<tool_call>", "</tool_call>", "<tool_", "</tool", '{"name": "f", ', '"arguments": ',
        '{"a": 1}', "}", "{", "<think>", "</think>", " ", "\n", "x", "<TOOL_CALL>",
    ]
)  # fmt: skip


@given(
    st.lists(call_fragments, max_size=25).map("".join),
    st.sampled_from(["qwen3", "auto", "deepseek_r1"]),
    st.sampled_from(["tidy", "keep"]),
    st.data(),
)
@SETTINGS
def test_tool_calls_stream_as_in_batch_and_lose_nothing(text, style, whitespace, data):
    parts, issues = batch_calls(text, style, whitespace)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    splitter = ReasoningSplitter(style, whitespace=whitespace, tool_calls=True)
    events = []
    prev = 0
    for cut in [*sorted(cuts), len(text)]:
        events += splitter.feed(text[prev:cut])
        prev = cut
    events += splitter.finish()
    assert (list(splitter.parts), splitter.issues) == (parts, issues)
    check_events(events, parts)
    if style != "deepseek_r1" and whitespace == "keep":
        # outside reasoning each call's body is in its part, and the content is the text
        # with the think blocks and the calls cut out (blocks found leftmost first)
        calls = [p for p in parts if isinstance(p, (ToolCallPart, UnparsedToolCallPart))]
        bodies = [m[1] for m in BLOCK_OR_CALL.finditer(text) if m[1] is not None]
        assert len(calls) == len(bodies)
        for call, body in zip(calls, bodies, strict=True):
            if type(call) is UnparsedToolCallPart:
                assert call.raw == body
            else:
                assert call.arguments in body and call.name in body
        assert content(parts) == BLOCK_OR_CALL.sub("", text)


BLOCK_OR_CALL = re.compile(
    r"(?i:<think>)(?s:.*?)(?:(?i:</think>)|\Z)|<tool_call>((?s:.*?))(?:</tool_call>|\Z)"
)


def batch_calls(text: str, style: str, whitespace: str) -> tuple[list, tuple]:
    splitter = ReasoningSplitter(style, whitespace=whitespace, tool_calls=True)  # type: ignore[arg-type]
    splitter.feed(text)
    splitter.finish()
    return list(splitter.parts), splitter.issues
