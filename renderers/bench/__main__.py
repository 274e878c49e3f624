"""``renderers bench`` (or ``python -m renderers.bench``): run the benchmark suite and write
the results."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from renderers.bench import report, suite
from renderers.core.loading import TokenizerUnavailableError, load_tokenizer
from renderers.registry import renderer_class, renderer_names


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--suite"] and argv[1:2] == ["prepare"]:
        from renderers.bench import prepare

        return prepare.main(argv[2:])
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="renderers bench",
        description="Measure parsing, streaming and rendering throughput of every renderer "
        "against baselines timed in the same run (tokenizer.decode, apply_chat_template, "
        "peer libraries when installed). Writes results.md, results.json and throughput.png. "
        "`renderers bench --suite prepare [--help]` runs the dataset-preparation benchmark.",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        default=Path("bench-results"),
        help="directory for results (default: ./bench-results)",
    )
    parser.add_argument(
        "--models",
        default=",".join(renderer_names()),
        help="comma-separated renderer names (default: all)",
    )
    parser.add_argument(
        "--lengths", default="1000,10000,100000", help="completion lengths in tokens"
    )
    parser.add_argument("--feeds", default="1,4,16", help="streaming feed sizes in tokens")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per measure (median)")
    parser.add_argument(
        "--memory-tokens", type=int, default=100_000, help="completion length for peak memory"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small lengths and few repeats (a smoke test)"
    )
    parser.add_argument(
        "--tokenizer",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="the tokenizer of renderer NAME, instead of its default model's: a hub id, a "
        "local directory or MODULE:CLASS (e.g. qwen3.5=tml_renderers.tokenizers:"
        "Qwen35Tokenizer); repeatable",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(renderer_names()))
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    sources: dict[str, str] = {}
    for pair in args.tokenizer:
        name, sep, source = pair.partition("=")
        if not sep or name.strip() not in renderer_names():
            parser.error(f"--tokenizer expects NAME=SOURCE with a renderer NAME, got {pair!r}")
        sources[name.strip()] = source.strip()
    tokenizers = {}
    for name in list(models):
        try:
            cls = renderer_class(name)
            source = sources.get(name) or cls.tokenizer_source or cls.default_model
            tokenizers[name] = load_tokenizer(source)
        except TokenizerUnavailableError as exc:
            models.remove(name)
            print(f"renderers bench: skipping {name}: {exc}", file=sys.stderr)
    try:
        lengths = [int(x) for x in args.lengths.split(",")]
        feeds = [int(x) for x in args.feeds.split(",")]
    except ValueError:
        parser.error("--lengths and --feeds take comma-separated integers")
    if args.quick:
        lengths, feeds, repeats, memory = [500, 2000], [1, 16], 3, 2000
    else:
        repeats, memory = args.repeats, args.memory_tokens
    config = suite.Config(
        models, lengths, feeds, repeats, memory, quiet=args.quiet, tokenizers=tokenizers
    )
    if args.quick:  # one fresh process per model, the get_renderer path only
        config.startup_repeats, config.startup_modes = 1, ("get_renderer",)
    machine = suite.machine()
    rows = suite.run(config)
    for path in report.write(rows, machine, config, args.output):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
