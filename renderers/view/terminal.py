"""A token view as terminal text: trained tokens in green, untrained dim, control tokens
bold and underlined, a header per message, whitespace made visible.

Without colour (not a terminal, ``NO_COLOR``) the same facts are plain markers:
``⟪…⟫`` around trained runs and ``⟦…⟧`` around control tokens.
"""

from __future__ import annotations

import numpy as np

from renderers.view.model import Segment, Summary, ViewData, token_text

__all__ = ["terminal_text", "visible_whitespace"]

_TRAINED = ("32", "92")  # alternating shades show where one token ends and the next begins
_UNTRAINED = ("90", "2")
_CONTROL = "1;4"
_TRAINED_OPEN, _TRAINED_CLOSE = "⟪", "⟫"
_CONTROL_OPEN, _CONTROL_CLOSE = "⟦", "⟧"

_VISIBLE = {ord(" "): "·", ord("\n"): "↵\n", ord("\t"): "→", 0x7F: "␡"}
_VISIBLE.update({c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)})


def visible_whitespace(text: str) -> str:
    """``text`` with spaces as ``·``, newlines as ``↵`` (then a line break), tabs as ``→``
    and other control characters as their Unicode control pictures (``␍``)."""
    return text.translate(_VISIBLE)


def terminal_text(view: ViewData, color: bool = False) -> str:
    """The whole view: a summary, the parts and issues of a completion, a legend, then
    every message under its header, token by token."""
    head = [*_summary_lines(view, color), _legend(color)]
    control = view.is_control()
    trained = view.weights != 0
    opening: dict[int, list[str]] = {}  # labels written before token i
    closing: dict[int, list[str]] = {}  # labels written after token i
    for p in view.parts:
        opening.setdefault(p.start, []).append(_paint(f"〔{p.label}〕", "7", color))
        after = closing if p.end > p.start else opening
        after.setdefault(p.end - 1 if p.end > p.start else p.start, []).append(
            _paint(f"〔/{p.kind}〕", "7", color)
        )
    for k, (pos, _) in enumerate(view.issues):
        closing.setdefault(pos, []).append(_paint(f"⚠{k + 1}", "1;31", color))
    table = view.table
    blocks = ["\n".join(head) + "\n"]
    for n, seg in enumerate(view.segments):
        body: list[str] = [_header(seg, trained, color), "\n"]
        in_run = False
        last = n == len(view.segments) - 1
        for i in range(seg.start, seg.end + 1 if last else seg.end):
            body += opening.get(i, ())
            if i == seg.end:  # labels of empty parts at the very end
                break
            text = visible_whitespace(token_text(table, int(view.ids[i])))
            if color:
                code = (_TRAINED if trained[i] else _UNTRAINED)[i % 2]
                body.append(_paint(text, f"{code};{_CONTROL}" if control[i] else code, True))
            else:
                if trained[i] != in_run:
                    body.append(_TRAINED_OPEN if trained[i] else _TRAINED_CLOSE)
                    in_run = bool(trained[i])
                body.append(f"{_CONTROL_OPEN}{text}{_CONTROL_CLOSE}" if control[i] else text)
            body += closing.get(i, ())
        if in_run:
            body.append(_TRAINED_CLOSE)
        text = "".join(body)
        blocks.append(text if text.endswith("\n") else text + "\n")
    return "\n".join(blocks)


def _paint(text: str, code: str, color: bool) -> str:
    if not color:
        return text
    # Colour each line on its own so a pager (less -R) never carries it across lines.
    return "\n".join(f"\x1b[{code}m{line}\x1b[0m" if line else "" for line in text.split("\n"))


def _summary_lines(view: ViewData, color: bool) -> list[str]:
    summary = view.summary()
    lines = [_paint(view.title, "1", color)] if view.title else []
    lines.append(_counts(summary))
    lines += view.notes
    for k, part in enumerate(view.parts):
        state = ", cut off" if part.incomplete else ""
        lines.append(f"part {k}: {part.label} ({_span(part.start, part.end)}{state})")
    for k, (pos, message) in enumerate(view.issues):
        lines.append(_paint(f"⚠{k + 1} issue at token {pos}: {message}", "31", color))
    return lines


def _counts(summary: Summary) -> str:
    share = f" ({100 * summary.trained / summary.tokens:.1f}%)" if summary.tokens else ""
    roles = " · ".join(
        f"{r.role} {r.tokens}" + (f" ({r.trained} trained)" if r.trained else "")
        for r in summary.by_role
    )
    return f"{summary.tokens} tokens, {summary.trained} trained{share} · {roles}"


def _legend(color: bool) -> str:
    if color:
        keys = [
            _paint("trained", _TRAINED[0], True),
            _paint("untrained", _UNTRAINED[0], True),
            _paint("control token", _CONTROL, True),
        ]
    else:
        keys = [
            f"{_TRAINED_OPEN}trained{_TRAINED_CLOSE}",
            f"{_CONTROL_OPEN}control token{_CONTROL_CLOSE}",
        ]
    return "legend: " + "  ".join(keys) + "  ↵ newline  · space  → tab"


def _header(seg: Segment, trained: np.ndarray, color: bool) -> str:
    n = seg.end - seg.start
    t = int(np.count_nonzero(trained[seg.start : seg.end]))
    where = f"{seg.label} · " if seg.label else ""
    text = f"── {seg.role} · {where}{n} tokens, {t} trained · {_span(seg.start, seg.end)} ──"
    return _paint(text, "1;36", color)


def _span(start: int, end: int) -> str:
    """Token positions ``[start, end)`` as people count them: first to last."""
    if end - start == 1:
        return f"token {start}"
    return f"tokens {start}–{end - 1}" if end > start else f"no tokens (at {start})"
