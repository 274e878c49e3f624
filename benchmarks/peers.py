"""Peer libraries, timed on the same ids when they are installed (never needed by tests).

Outputs are checked to agree with ours before anything is timed; a peer that disagrees is
reported, not timed.
"""

from __future__ import annotations

from typing import Any

from benchmarks.measure import median_seconds
from renderers import Renderer, TextPart, ThinkingPart


def parse_rows(renderer: Renderer, ids: list[int], repeats: int) -> list[Any]:
    from benchmarks.suite import Row

    rows: list[Row] = []
    if renderer.name == "gpt_oss":
        row = _openai_harmony(renderer, ids, repeats)
        if row is not None:
            rows.append(row)
    return rows


def _openai_harmony(renderer: Renderer, ids: list[int], repeats: int) -> Any:
    from benchmarks.suite import Row

    try:
        from openai_harmony import HarmonyEncodingName, Role, load_harmony_encoding
    except ImportError:
        return None
    try:
        encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception as exc:  # offline without TIKTOKEN_ENCODINGS_BASE
        return Row(
            renderer.name,
            "openai-harmony parse (unavailable)",
            len(ids),
            0.0,
            extra={"error": str(exc)},
        )

    def peer() -> Any:
        return encoding.parse_messages_from_completion_tokens(ids, Role.ASSISTANT)

    try:
        messages = peer()
    except Exception as exc:
        return Row(
            renderer.name, "openai-harmony parse (failed)", len(ids), 0.0, extra={"error": str(exc)}
        )
    ours = renderer.parse_response(ids).message.parts
    peer_texts = ["".join(c.text for c in m.content) for m in messages]
    our_texts = [p.text for p in ours if isinstance(p, (TextPart, ThinkingPart))]
    agree = peer_texts == our_texts
    t_ours = median_seconds(lambda: renderer.parse_response(ids), repeats=repeats)
    t_peer = median_seconds(peer, repeats=repeats) if agree else None
    return Row(
        renderer.name,
        "parse_response vs openai-harmony",
        len(ids),
        t_ours,
        "openai-harmony parse_messages_from_completion_tokens" if agree else "",
        t_peer,
        {"outputs_agree": agree},
    )
