"""A token view as one self-contained HTML page (no network, no external assets).

The page holds a summary bar (tokens, trained tokens, per-role counts, how a completion
ended, its parts and issues), a section per message with a header, and the tokens as
data: a small script draws each token as a span coloured by its weight, block by block,
so a page of 100k tokens opens at once. Hovering a token shows its position, id, exact
text, weight, message and part. Blocks end at line breaks and off-screen blocks skip
layout (``content-visibility``), so drawing never reflows the whole page.
"""

from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path

import numpy as np

from renderers.view.model import Summary, ViewData, token_text

__all__ = ["html_page", "notebook_html"]

_HERE = Path(__file__).parent
_BLOCK_TOKENS = 256  # a block ends at the first line break after this many tokens
_MAX_BLOCK_TOKENS = 2048  # or here, when no line break comes
_LINE_PX = 25.4  # 13px monospace at line-height 1.95: the size of a block not yet laid out
_CHARS_PER_LINE = 110
_ROLE_STYLES = frozenset({"system", "developer", "user", "assistant", "tool", "trailing"})
_FOLD_LINES = 24  # an untrained message longer than this starts folded


@cache
def _asset(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def html_page(view: ViewData) -> str:
    """The page for ``view`` as a string (UTF-8 when written to a file)."""
    ids = view.ids
    unique = np.unique(ids).tolist()
    texts = {t: token_text(view.table, t) for t in unique}
    data = {
        "ids": ids.tolist(),
        "weights": _runs(view.weights),
        "text": {str(t): s for t, s in texts.items()},
        "control": sorted(view.table.control_ids.intersection(unique)),
        "parts": [[p.start, p.end, p.kind, p.label, p.incomplete] for p in view.parts],
        "issues": [list(issue) for issue in view.issues],
    }
    title = f"{view.title} · token view" if view.title else "token view"
    sections = "\n".join(_section(view, k, texts) for k in range(len(view.segments)))
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
{_asset("page.css")}</style>
</head>
<body>
{_summary_bar(view)}
<main>
{sections}
</main>
<div id="tip" hidden></div>
<script type="application/json" id="view-data">{_script_json(data)}</script>
<script>
{_asset("page.js")}</script>
</body>
</html>
"""


def notebook_html(view: ViewData, height: int = 600) -> str:
    """The page in an ``<iframe>``, for a notebook cell: its styles and script stay
    inside the frame."""
    page = html.escape(html_page(view), quote=True)
    return (
        f'<iframe srcdoc="{page}" sandbox="allow-scripts" style="width: 100%; '
        f'height: {height}px; border: 1px solid #e5e7eb; border-radius: 6px"></iframe>'
    )


def _runs(weights: np.ndarray) -> list[list[float]]:
    """Run-length encoding ``[[value, count], ...]`` (weights come in long equal runs)."""
    if not len(weights):
        return []
    change = np.flatnonzero(weights[1:] != weights[:-1]) + 1
    starts = np.concatenate(([0], change))
    counts = np.diff(np.concatenate((starts, [len(weights)])))
    return [[float(weights[s]), int(c)] for s, c in zip(starts, counts, strict=True)]


def _script_json(data: object) -> str:
    # Inside <script>, "</" could end the element and "<!--" open a comment.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def _summary_bar(view: ViewData) -> str:
    summary = view.summary()
    share = 100 * summary.trained / summary.tokens if summary.tokens else 0.0
    stats = [
        f'<span class="stat"><b>{summary.tokens:,}</b> tokens</span>',
        f'<span class="stat trained"><b>{summary.trained:,}</b> trained · {share:.1f}%</span>',
        f'<div class="meter" title="share of trained tokens"><div style="width: {share:.2f}%">'
        "</div></div>",
        *_role_chips(summary),
    ]
    facts = [f'<span class="stat note">{html.escape(note)}</span>' for note in view.notes]
    facts += [
        f'<span class="stat part p-{p.kind}" data-jump="{p.start}" title="tokens '
        f'{p.start}–{p.end - 1}; click to show">{html.escape(p.label)}'
        f"{' (cut off)' if p.incomplete else ''} · {p.end - p.start}</span>"
        for p in view.parts
    ]
    facts += [
        f'<span class="stat issue" data-jump="{pos}">issue {k + 1} at token {pos}: '
        f"{html.escape(message)}</span>"
        for k, (pos, message) in enumerate(view.issues)
    ]
    legend = (
        '<div class="row legend">key: <span class="t tr">trained</span> '
        '<span class="t">not trained</span> <span class="t c">control token</span> '
        "<span>↵ newline · → tab</span> · hover a token for its id and weight · click a "
        "header to fold its message</div>"
    )
    rows = [f'<div class="row">{" ".join(stats)}</div>']
    if facts:
        rows.append(f'<div class="row">{" ".join(facts)}</div>')
    heading = (
        f'{html.escape(view.title)}<span class="kind">token view</span>'
        if view.title
        else "token view"
    )
    return f'<header class="bar">\n<h1>{heading}</h1>\n{chr(10).join(rows)}\n{legend}\n</header>'


def _role_chips(summary: Summary) -> list[str]:
    chips = []
    for r in summary.by_role:
        trained = f" · {r.trained:,} trained" if r.trained else ""
        chips.append(
            f'<span class="stat role {_role_class(r.role)}"><b>{html.escape(r.role)}</b> '
            f"{r.tokens:,}{trained}</span>"
        )
    return chips


def _role_class(role: str) -> str:
    return f"role-{role}" if role in _ROLE_STYLES else "role-other"


def _section(view: ViewData, k: int, texts: dict[int, str]) -> str:
    seg = view.segments[k]
    n = seg.end - seg.start
    trained = int(np.count_nonzero(view.weights[seg.start : seg.end]))
    count = (
        f'{n:,} tokens · <span class="tr">{trained:,} trained</span>'
        if trained
        else (f"{n:,} tokens · none trained")
    )
    label = f'<span class="label">{html.escape(seg.label)}</span>' if seg.label else ""
    sizes = _blocks(view.ids, seg.start, seg.end, texts)
    blocks = "".join(
        f'<div class="blk" data-a="{a}" data-b="{b}" '
        f'style="contain-intrinsic-size: auto {px:.0f}px"></div>'
        for a, b, px in sizes
    )
    folded = not trained and sum(px for _, _, px in sizes) > _FOLD_LINES * _LINE_PX
    return (
        f'<section class="seg {_role_class(seg.role)}{" collapsed" if folded else ""}" '
        f'data-role="{html.escape(seg.role)}" data-label="{html.escape(seg.label)}">\n'
        f'<h2 class="hdr"><span class="role">{html.escape(seg.role)}</span>{label}'
        f'<span class="count">{count}</span>'
        f'<span class="range">{seg.start}–{seg.end - 1}</span></h2>\n'
        f'<div class="body">{blocks}</div>\n</section>'
    )


def _blocks(
    ids: np.ndarray, start: int, end: int, texts: dict[int, str]
) -> list[tuple[int, int, float]]:
    """Token ranges ``[a, b)`` of the blocks of one message, each with an estimate of its
    height; a block ends at a line break so blocks never split a line."""
    blocks: list[tuple[int, int, float]] = []
    a = start
    lines = 0
    chars = 0
    for i in range(start, end):
        text = texts[int(ids[i])]
        breaks = text.count("\n")
        lines += breaks
        chars += len(text)
        size = i + 1 - a
        if (breaks and size >= _BLOCK_TOKENS) or size >= _MAX_BLOCK_TOKENS or i + 1 == end:
            estimate = (lines + chars / _CHARS_PER_LINE + 1) * _LINE_PX
            blocks.append((a, i + 1, estimate))
            a = i + 1
            lines = chars = 0
    return blocks
