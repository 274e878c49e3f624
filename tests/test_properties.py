"""Property tests for every renderer: round trip, prompt/example consistency, streaming
equals batch, and fuzzed completions that never crash and never lose content.

Each renderer is described by a :class:`Spec`: how to build it, which assistant messages
its format can express, and the canonical form a parse gives back (the format's own
normalization, e.g. Qwen3's tokenizer applies NFC and its template strips newlines around
reasoning).
"""

from __future__ import annotations

import pickle
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from renderers import (
    Message,
    ParseResult,
    Renderer,
    Termination,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    get_renderer,
)
from tests import strategies
from tests.conftest import tokenizer_for

# Counts of examples each property ran, printed at the end of the session (-s or -rA).
EXAMPLE_COUNTS: dict[str, int] = {}


def count(name: str) -> None:
    EXAMPLE_COUNTS[name] = EXAMPLE_COUNTS.get(name, 0) + 1


class Spec:
    """A renderer under test: how to build it and what its format can express."""

    def __init__(
        self,
        name: str,
        model_id: str,
        options: tuple[tuple[str, Any], ...],
        messages: st.SearchStrategy[Message],
        canonical: Callable[[Message], Message],
        content_check: Callable[[Renderer, list[int], ParseResult], None],
    ) -> None:
        self.name = name
        self.model_id = model_id
        self.options = options
        self.messages = messages
        self.canonical = canonical
        self.content_check = content_check

    def renderer(self) -> Renderer:
        return _renderer(self.name, self.model_id, self.options)

    def __repr__(self) -> str:
        return self.name + "".join(f"-{k}={v}" for k, v in self.options)


_RENDERERS: dict[Any, Renderer] = {}


def _renderer(name: str, model_id: str, options: tuple[tuple[str, Any], ...]) -> Renderer:
    key = (name, options)
    if key not in _RENDERERS:
        _RENDERERS[key] = get_renderer(name, tokenizer_for(model_id), **dict(options))
    return _RENDERERS[key]


# -- Qwen3 ------------------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def qwen3_canonical(m: Message) -> Message:
    """What Qwen3 gives back: NFC text (its tokenizer's normalizer); reasoning without the
    newlines the template strips around it; text right after a think block (including the
    template's empty one before a leading text) without leading newlines; empty thinking
    dropped; no tool-call ids (the format has none). Like the template, an assistant
    message without reasoning whose text contains ``</think>`` carries inline reasoning."""
    parts = list(m.parts)
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    if not any(isinstance(p, ThinkingPart) for p in parts) and "</think>" in text:
        # The template's convention, transcribed from its Jinja source.
        reasoning = text.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        rest = text.split("</think>")[-1].lstrip("\n")
        others = [p for p in parts if not isinstance(p, TextPart)]
        parts = [ThinkingPart(reasoning), TextPart(rest), *others]
    out: list[Any] = []
    previous: str | None = "thinking"  # the last turn always opens with a think block
    for p in parts:
        if isinstance(p, ThinkingPart):
            t = _nfc(p.text).strip("\n")
            if t:
                out.append(ThinkingPart(t))
            previous = "thinking"
        elif isinstance(p, TextPart):
            t = _nfc(p.text)
            if previous == "thinking":
                t = t.lstrip("\n")
            if t and previous == "text":
                out[-1] = TextPart(out[-1].text + t)
            elif t:
                out.append(TextPart(t))
                previous = "text"
        elif isinstance(p, ToolCallPart):
            out.append(ToolCallPart(p.name, _nfc(p.arguments)))
            previous = "tool"
        else:
            assert isinstance(p, UnparsedToolCallPart)
            out.append(UnparsedToolCallPart(_nfc(p.raw), "?"))
            previous = "tool"
    return Message("assistant", out)


def _decode_nonstructural(r: Renderer, ids: list[int], structural: frozenset[int]) -> str:
    return r.table.decode([t for t in ids if t not in structural])


def qwen3_content_check(r: Renderer, ids: list[int], result: ParseResult) -> None:
    """Every ordinary token before the end is in a part's span or is a bare separator;
    each part's text is what its span holds, minus newline separators."""
    structural = r.stream_parser()._structural
    end = len(ids) - len(result.trailing_ids) - (result.stop_token_id is not None)
    covered = [False] * end
    for part, (start, stop) in zip(result.message.parts, result.spans, strict=True):
        for k in range(start, min(stop, end)):
            covered[k] = True
        source = _decode_nonstructural(r, ids[start:stop], structural)
        if isinstance(part, (TextPart, ThinkingPart)):
            assert part.text in source
            assert set(source.replace(part.text, "", 1)) <= {"\n"}
        elif isinstance(part, ToolCallPart):
            assert part.arguments in source
        else:
            assert isinstance(part, UnparsedToolCallPart)
            assert part.raw == source
    for k in range(end):
        if not covered[k] and ids[k] not in structural:
            assert r.table.decode([ids[k]]).strip("\n") == "", (k, ids[k])


QWEN3_MESSAGES = strategies.assistant_messages()

SPECS = [
    Spec("qwen3", "Qwen/Qwen3-8B", (), QWEN3_MESSAGES, qwen3_canonical, qwen3_content_check),
    Spec(
        "qwen3",
        "Qwen/Qwen3-8B",
        (("enable_thinking", False),),
        QWEN3_MESSAGES,
        qwen3_canonical,
        qwen3_content_check,
    ),
]

spec_param = pytest.mark.parametrize("spec", SPECS, ids=repr)


def canonical_unparsed(m: Message) -> Message:
    """Unparsed parts compare on their raw text only (the error text is the parser's)."""
    return Message(
        m.role,
        [
            UnparsedToolCallPart(p.raw, "?") if isinstance(p, UnparsedToolCallPart) else p
            for p in m.parts
        ],
    )


# -- properties -------------------------------------------------------------------------


def completion_of(r: Renderer, message: Message) -> list[int]:
    example = r.build_supervised_example([{"role": "user", "content": "Go."}, message])
    ids: list[int] = example.tokens[example.weights > 0].tolist()
    return ids


@spec_param
@given(data=st.data())
def test_render_then_parse_gives_the_message_back(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    message = data.draw(spec.messages)
    result = r.parse_response(completion_of(r, message))
    assert canonical_unparsed(result.message) == spec.canonical(message)
    assert result.termination is Termination.STOP
    count(f"round trip [{spec!r}]")


@spec_param
@given(conversation=strategies.conversations())
def test_supervised_prefix_equals_generation_prompt(
    spec: Spec, conversation: list[dict[str, Any]]
) -> None:
    r = spec.renderer()
    last = max(i for i, m in enumerate(conversation) if m["role"] in ("user", "tool"))
    messages = [
        *conversation[: last + 1],
        {"role": "assistant", "content": "Final answer.", "reasoning_content": "Because."},
    ]
    if dict(spec.options).get("enable_thinking") is False:
        messages[-1].pop("reasoning_content")
    example = r.build_supervised_example(messages)
    first = int(example.weights.argmax())
    assert example.weights[first] == 1
    assert example.tokens[:first].tolist() == r.build_generation_prompt(messages[:-1])
    count(f"prompt consistency [{spec!r}]")


@spec_param
@given(data=st.data())
def test_streaming_equals_batch_for_random_splits(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    ids = completion_of(r, data.draw(spec.messages))
    ids = ids[: data.draw(st.integers(0, len(ids)))]  # also cut-off completions
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=8)))
    parser = r.stream_parser()
    previous = 0
    for cut in [*cuts, len(ids)]:
        parser.feed(ids[previous:cut])
        previous = cut
    assert parser.finish() == r.parse_response(ids)
    count(f"streaming == batch [{spec!r}]")


def _token_soup(r: Renderer) -> st.SearchStrategy[list[int]]:
    table = r.table
    controls = sorted(table.control_ids)
    structural = sorted(r.stream_parser()._structural)
    ordinary = st.integers(0, table.vocab_size - 1).filter(lambda t: table.valid[t])
    pieces = st.one_of(
        st.sampled_from(structural).map(lambda t: [t]),
        st.sampled_from(controls).map(lambda t: [t]),
        ordinary.map(lambda t: [t]),
        strategies.text.map(table.encode),
    )
    return st.lists(pieces, max_size=30).map(lambda chunks: [t for c in chunks for t in c])


@spec_param
@given(data=st.data())
def test_random_token_ids_never_crash_and_lose_no_content(spec: Spec, data: st.DataObject) -> None:
    r = spec.renderer()
    ids = data.draw(_token_soup(r))
    result = r.parse_response(ids)
    assert isinstance(result.termination, Termination)
    spec.content_check(r, ids, result)
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    count(f"fuzz [{spec!r}]")


# -- sharing between threads and processes ------------------------------------------------


@spec_param
def test_renderer_can_be_pickled(spec: Spec) -> None:
    r = spec.renderer()
    conversation = [{"role": "user", "content": "Pickle me 🥒"}]
    clone = pickle.loads(pickle.dumps(r))
    assert clone.build_generation_prompt(conversation) == r.build_generation_prompt(conversation)
    ids = completion_of(r, Message("assistant", "Sure."))
    assert clone.parse_response(ids) == r.parse_response(ids)
    table = pickle.loads(pickle.dumps(r.table))
    assert table.encode("<|im_end|> text") == r.table.encode("<|im_end|> text")


@spec_param
def test_renderer_is_safe_to_share_between_threads(spec: Spec) -> None:
    r = spec.renderer()
    messages = [
        Message("assistant", [ThinkingPart(f"thought {k}"), TextPart(f"answer {k} " * k)])
        for k in range(16)
    ]
    expected = [r.parse_response(completion_of(r, m)) for m in messages]
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for round_ in range(20):
                k = (offset + round_) % len(messages)
                ids = completion_of(r, messages[k])
                assert r.parse_response(ids) == expected[k]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_report_example_counts() -> None:
    """Runs last in this module: shows how many examples each property ran."""
    for name, n in sorted(EXAMPLE_COUNTS.items()):
        print(f"{n:6d}  {name}")
    assert EXAMPLE_COUNTS
