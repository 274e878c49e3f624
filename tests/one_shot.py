"""The one-shot parse path (``StreamParser._parse_runs``) seen from the model tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from renderers import ParseResult, Renderer
from renderers.core.engine import StreamParser


def parsed_both_ways(
    r: Renderer, parser_class: type[StreamParser], ids: Sequence[int], mp: pytest.MonkeyPatch
) -> tuple[ParseResult, ParseResult, bool]:
    """``r.parse_response(ids)``, the result of feeding the same ids then finishing (as a
    tuple: never the one-shot path), and whether ``parser_class``'s one-shot path gave
    the first."""
    parser = r.stream_parser(_events=False)
    parser.feed(tuple(ids))
    fed = parser.finish()
    taken: list[bool] = []
    one_shot = parser_class._parse_runs

    def spy(self: StreamParser, runs: Any) -> Any:
        result = one_shot(self, runs)
        taken.append(result is not None)
        return result

    with mp.context() as m:
        m.setattr(parser_class, "_parse_runs", spy)
        parsed = r.parse_response(list(ids))
    return parsed, fed, taken == [True]
