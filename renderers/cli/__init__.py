"""The ``renderers`` command line: one module per subcommand.

Subcommands behave like Unix tools: data on stdout, diagnostics on stderr, exit status 0
on success, 1 on failure, 2 on usage errors, 130 when interrupted. A user mistake is one
line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from renderers import __version__
from renderers.cli import bench, demo, inspect, models, parse, prepare, render, show, think
from renderers.cli.common import Parser, UsageError, cli_advice, describe_os_error

__all__ = ["main"]

_COMMANDS = (demo, render, parse, show, think, prepare, models, inspect, bench)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's parser by name."""
    parser = Parser(
        prog="renderers",
        description="Exact chat-template rendering and token-level parsing for LLM training.",
        epilog="`renderers COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"renderers {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser, dict(sub.choices)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``renderers`` console script."""
    # transformers prints advice about PyTorch on import; this tool never needs PyTorch.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    # Nor its advice about a model repository's tokenizer_config.json (DeepSeek's names a
    # class its files do not match): a user of this tool cannot act on it.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" belongs to the benchmark's own parser (incl. --help).
        argv = ["bench", "--", *argv[1:]]
    parser, commands = build_parser()
    if not argv:  # what the tool does and how to ask for more, not an error
        parser.print_help()
        return 0
    try:
        args = parser.parse_args(argv)
        status: int = args.run(args, sys.stdout)
    except UsageError as exc:
        commands[args.command].error(cli_advice(str(exc)))  # the usage; exits with 2
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error for a Unix filter.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        message = cli_advice(describe_os_error(exc))
        print(f"renderers {args.command}: error: {message}", file=sys.stderr)
        return 1
    except (ValueError, TypeError, ImportError) as exc:
        print(f"renderers {args.command}: error: {cli_advice(str(exc))}", file=sys.stderr)
        return 1
    return status
