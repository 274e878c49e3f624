"""``renderers bench``: the benchmark suite (:mod:`renderers.bench`), shipped with the package."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite",
        description="Measure parsing, streaming and rendering against baselines timed in the "
        "same run; see renderers bench --help.",
        add_help=False,
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from renderers.bench.__main__ import main

    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    return main(bench_args)
