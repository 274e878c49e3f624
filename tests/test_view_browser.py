"""The HTML token view as a person sees it: opened in headless Chromium, screenshotted,
hovered. Skipped (only these tests) where Chromium is not installed; `.ci/run` installs
Debian's package."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from renderers import get_renderer
from renderers.rendering import Renderer
from renderers.view import TokenView, completion_view, supervised_view
from tests.chromium import Browser, find_chromium, png_pixels
from tests.test_view import TOOL_CONVERSATION

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,  # see pyproject.toml: left out of the quick subset
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium is not installed (Debian: apt-get install chromium; "
        ".ci/run installs it), so the HTML page cannot be opened in a browser",
    ),
]

TRAINED = (187, 247, 208)  # --trained in page.css
RENDERED = "document.documentElement.dataset.rendered === 'all'"
# Screenshots go here when set, for a person to look at (they are always checked).
SCREENSHOTS = os.environ.get("RENDERERS_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    b = Browser(CHROMIUM, 1280, 900)
    yield b
    b.close()


@pytest.fixture(scope="module")
def qwen3() -> Renderer:
    return get_renderer("qwen3")


def _display(text: str) -> str:
    """How the page spells a token: newlines and tabs visible, other control characters
    as Unicode control pictures."""
    out = []
    for c in text:
        if c == "\n":
            out.append("↵\n")
        elif c == "\t":
            out.append("→")
        elif c == "\x7f":
            out.append("␡")
        elif ord(c) < 0x20:
            out.append(chr(0x2400 + ord(c)))
        else:
            out.append(c)
    return "".join(out)


def _open(browser: Browser, view: TokenView, path: Path) -> None:
    path.write_text(view.to_html(), encoding="utf-8")
    browser.open(path)
    browser.wait_for(RENDERED)


def _keep(png: bytes, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        (Path(SCREENSHOTS) / name).write_bytes(png)


def _share(pixels: list[list[tuple[int, int, int]]], color: tuple[int, int, int]) -> float:
    flat = [p for row in pixels for p in row]
    return sum(all(abs(a - b) <= 2 for a, b in zip(p, color, strict=True)) for p in flat) / len(
        flat
    )


def _rect(browser: Browser, i: int) -> dict[str, float]:
    """The on-screen box of token ``i`` (scrolled into view first)."""
    box: dict[str, float] = browser.evaluate(
        f"""(() => {{
        const s = document.querySelector('main .t[data-i="{i}"]');
        s.scrollIntoView({{block: 'center'}});
        const r = s.getBoundingClientRect();
        return {{x: r.x, y: r.y, width: r.width, height: r.height}};
    }})()"""
    )
    return box


CONVERSATION = [
    {"role": "system", "content": "You are a concise travel assistant.\tBe exact."},
    *TOOL_CONVERSATION[1:5],
    {
        "role": "assistant",
        "reasoning_content": "Both tools agree.",
        "content": "18C and sunny in Paris — no umbrella needed. ☀️\n",
    },
]


def test_the_page_shows_every_token_coloured_by_its_weight(
    browser: Browser, qwen3: Renderer, tmp_path: Path
) -> None:
    example = qwen3.build_supervised_example(CONVERSATION, train_on="all_assistant")
    view = supervised_view(example.tokens, example.weights, qwen3, "qwen3 · travel")
    _open(browser, view, tmp_path / "example.html")
    screenshot = browser.screenshot()
    _keep(screenshot, "example.png")
    assert len(png_pixels(screenshot)) == browser.height

    spans: list[list[Any]] = browser.evaluate(
        """Array.from(document.querySelectorAll('main .t')).map(s =>
            [Number(s.dataset.i), s.textContent, getComputedStyle(s).backgroundColor])"""
    )
    ids = example.tokens.tolist()
    assert len(spans) == len(ids)
    assert [i for i, _, _ in spans] == list(range(len(ids)))
    expected = [
        _display(qwen3.table.id_to_bytes[t].decode("utf-8", "backslashreplace")) for t in ids
    ]
    assert [text for _, text, _ in spans] == expected
    trained = f"rgb({TRAINED[0]}, {TRAINED[1]}, {TRAINED[2]})"
    for (i, _, background), weight in zip(spans, example.weights.tolist(), strict=True):
        assert (background == trained) == (weight != 0), f"token {i}: {background}"

    headers = browser.evaluate(
        "Array.from(document.querySelectorAll('section.seg')).map(s => s.dataset.role)"
    )
    assert headers == [s.role for s in view.segments]
    bar = browser.evaluate("document.querySelector('header.bar').innerText")
    summary = view.summary()
    assert f"{summary.tokens} tokens" in bar and f"{summary.trained} trained" in bar

    # On screen: a trained token is painted in the trained colour, an untrained one not.
    first_trained = int(np.flatnonzero(example.weights)[0])
    pixels = png_pixels(browser.screenshot(_rect(browser, first_trained)))
    assert _share(pixels, TRAINED) > 0.3
    pixels = png_pixels(browser.screenshot(_rect(browser, 1)))  # "system", untrained
    assert _share(pixels, TRAINED) < 0.02


def test_hovering_a_token_shows_its_id_text_and_weight(
    browser: Browser, qwen3: Renderer, tmp_path: Path
) -> None:
    example = qwen3.build_supervised_example(CONVERSATION)
    view = supervised_view(example.tokens, example.weights, qwen3)
    _open(browser, view, tmp_path / "hover.html")
    for i in (int(np.flatnonzero(example.weights)[-1]), 3):
        box = _rect(browser, i)
        browser.hover(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        tip = browser.evaluate(
            """(() => { const t = document.getElementById('tip');
                const r = t.getBoundingClientRect();
                return {hidden: t.hidden, text: t.innerText, w: r.width, h: r.height}; })()"""
        )
        token = int(example.tokens[i])
        assert not tip["hidden"] and tip["w"] > 50 and tip["h"] > 30
        assert f"token {i} of {len(example.tokens)}" in tip["text"]
        assert f"id {token}" in tip["text"]
        assert json.dumps(qwen3.decode([token])) in tip["text"]
        weight = float(example.weights[i])
        assert f"weight {weight:g}" in tip["text"]
        assert ("not trained" in tip["text"]) == (weight == 0)
    _keep(browser.screenshot(), "hover.png")


def test_the_page_outlines_the_parts_of_a_completion(
    browser: Browser, qwen3: Renderer, tmp_path: Path
) -> None:
    answer = {
        "role": "assistant",
        "reasoning_content": "The user wants the weather; call the tool.",
        "content": "Checking.",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    example = qwen3.build_supervised_example([{"role": "user", "content": "Paris?"}, answer])
    ids = example.tokens[example.weights == 1].tolist()
    result = qwen3.parse_response(ids)
    view = completion_view(result, ids, qwen3, "qwen3 · completion")
    _open(browser, view, tmp_path / "completion.html")
    _keep(browser.screenshot(), "completion.png")
    parts = browser.evaluate(
        """Array.from(document.querySelectorAll('main .t.ps')).map(s => [
            Number(s.dataset.i), getComputedStyle(s, '::before').content,
            getComputedStyle(s).borderTopColor])"""
    )
    assert [i for i, _, _ in parts] == [start for start, _ in result.spans]
    assert [label for _, label, _ in parts] == [json.dumps(p.label) for p in view.parts]
    colours = {
        "thinking": "rgb(168, 85, 247)",
        "text": "rgb(2, 132, 199)",
        "tool_call": "rgb(234, 88, 12)",
    }
    for (_, _, border), part in zip(parts, view.parts, strict=True):
        assert border == colours[part.kind]
    members = browser.evaluate(
        "Array.from(document.querySelectorAll('main .t.p')).map(s => Number(s.dataset.i))"
    )
    assert members == [i for start, end in result.spans for i in range(start, end)]
    chips = browser.evaluate("document.querySelector('header.bar').innerText")
    assert "termination: stop" in chips and "tool call get_weather" in chips


def _long_conversation(tokens: int, r: Renderer) -> list[dict[str, Any]]:
    """A conversation of about ``tokens`` tokens: many turns of paragraphs and code."""
    paragraph = (
        "The quick brown fox jumps over the lazy dog; naïve café owners sip crème brûlée.\n"
        "```python\ndef add(a, b):\n\treturn a + b  # tabs and spaces\n```\n"
    )
    per = len(r.table.encode(paragraph))
    turns = max(1, tokens // (per * 40))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Summarize."}]
    for k in range(turns):
        messages.append({"role": "user", "content": f"Part {k}:\n" + paragraph * 20})
        messages.append({"role": "assistant", "content": paragraph * 20})
    return messages


def test_a_page_of_100k_tokens_opens_at_once_and_draws_every_token(
    browser: Browser, qwen3: Renderer, tmp_path: Path
) -> None:
    example = qwen3.build_supervised_example(
        _long_conversation(100_000, qwen3), train_on="all_assistant"
    )
    n = len(example.tokens)
    assert n >= 95_000
    view = supervised_view(example.tokens, example.weights, qwen3, "qwen3 · 100k tokens")
    path = tmp_path / "large.html"
    start = time.perf_counter()
    path.write_text(view.to_html(), encoding="utf-8")
    written = time.perf_counter() - start
    loaded = browser.open(path)
    drawn = browser.wait_for(RENDERED, timeout=300)
    timings = browser.evaluate(
        "[Number(document.documentElement.dataset.firstPaintMs), "
        "Number(document.documentElement.dataset.renderedMs)]"
    )
    _keep(browser.screenshot(), "large.png")
    count = browser.evaluate("document.querySelectorAll('main .t').length")
    assert count == n
    trained = browser.evaluate("document.querySelectorAll('main .t.tr').length")
    assert trained == example.num_trained
    print(
        f"\n{n} tokens: page written in {written:.2f} s ({path.stat().st_size / 1e6:.1f} MB); "
        f"load event after {loaded:.2f} s; first tokens drawn at {timings[0]:.0f} ms, every "
        f"token at {timings[1]:.0f} ms after navigation ({drawn:.2f} s more after load)"
    )
