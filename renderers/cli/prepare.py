"""``renderers prepare``: conversations in, a tokenized training set out (see
:mod:`renderers.prepare` for the column layout)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from renderers.cli.common import (
    UsageError,
    add_model_argument,
    add_option_argument,
    check_output_path,
    cli_advice,
)
from renderers.cli.models import renderer_from_args
from renderers.prepare.outputs import DEFAULT_MAX_REJECT_FRACTION, READERS
from renderers.prepare.shapes import DEFAULT_ROLES, ROLE_TARGETS, SHAPES
from renderers.rendering import Renderer, TrainOn

if TYPE_CHECKING:
    from renderers.prepare import PrepareConfig, PrepareStats

__all__ = ["add_parser", "summary"]


def add_parser(sub: Any) -> None:
    prepare = sub.add_parser(
        "prepare",
        help="tokenize a dataset of conversations for training",
        description="Render every conversation of INPUT (JSONL, JSON, Parquet, a folder of "
        "them, or a Hugging Face dataset; OpenAI messages, ShareGPT conversations or "
        "LLaMA-Factory messages, detected per file) with MODEL's chat format and write one "
        "training row per conversation (or per group of its turns, see --split-turns) to "
        "OUTPUT (.parquet; .arrow, an Arrow IPC stream as datasets writes it; .feather, an "
        "Arrow IPC file; or .jsonl): input_ids, labels (-100 where untrained), loss_mask, "
        "num_tokens, num_trained_tokens, row_id, example_index. The output "
        "appears only when the run succeeds; a run that writes no row, or whose failed rows "
        "exceed --max-reject-fraction, fails (exit 1).",
        epilog="role names: "
        + ", ".join(f"{name}={role}" for name, role in DEFAULT_ROLES.items())
        + " (extend with --role NAME=ROLE)",
    )
    prepare.add_argument("input", help="a file, a folder of files, or a dataset name/path")
    add_model_argument(prepare)
    prepare.add_argument("--output", "-o", required=True, type=Path, help="the output file")
    add_option_argument(prepare)
    choices = ", ".join(t.value for t in TrainOn)
    prepare.add_argument(
        "--train-on",
        default=TrainOn.LAST_ASSISTANT.value,
        help=f"{choices}, or comma-separated roles such as assistant,tool (default: "
        "last_assistant); a message's own weight/train field overrides it",
    )
    prepare.add_argument(
        "--split-turns",
        choices=("auto", "never"),
        default="auto",
        help="auto (default): a conversation whose trained turns the format does not write "
        "as the model samples them in one example (history it writes otherwise than the "
        "turn's generation prompt) becomes one row per group of turns, each the "
        "conversation cut after its turns, with an example_index column; never: one row "
        "per conversation, refused where a turn cannot be trained in it",
    )
    prepare.add_argument(
        "--no-train-end-of-turn",
        dest="train_end_of_turn",
        action="store_false",
        help="do not train the token that ends each trained assistant message",
    )
    prepare.add_argument("--max-length", type=int, help="longest row in tokens")
    prepare.add_argument(
        "--overflow",
        choices=("error", "drop", "truncate"),
        default="error",
        help="a row longer than --max-length: a row error, dropped (listed in the rejects "
        "file) or truncated (default: error)",
    )
    prepare.add_argument(
        "--pack",
        type=int,
        metavar="LENGTH",
        help="pack consecutive rows into rows of at most LENGTH tokens (position_ids, seq_lens)",
    )
    prepare.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a row that fails: stop, or skip it to the rejects file (default: raise)",
    )
    prepare.add_argument(
        "--rejects",
        type=Path,
        help="where skipped rows are listed (default: OUTPUT with .rejects.jsonl)",
    )
    prepare.add_argument(
        "--num-proc",
        type=int,
        default=1,
        help="processes that map rows: this one and N-1 forked workers (default 1)",
    )
    prepare.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="rows per work unit (default: 256, or 64 with --num-proc above 1, so that "
        "workers finish together)",
    )
    prepare.add_argument(
        "--format",
        choices=("auto", *SHAPES),
        default="auto",
        help="the shape of the rows (default: auto, each file's from its first row): openai "
        "(messages with role/content), sharegpt (conversations of from/value, row-level "
        "system and tools), llamafactory (messages whose content is a list of type/value "
        "parts)",
    )
    prepare.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME=ROLE",
        help="map a role name of the data to a role (repeatable): ROLE is one of "
        + ", ".join(ROLE_TARGETS)
        + "; the known names are listed below",
    )
    prepare.add_argument(
        "--messages-column", help="column of the messages (default: messages, else conversations)"
    )
    prepare.add_argument("--tools-column", help="column of the tools (default: tools)")
    prepare.add_argument(
        "--system-column", help="column of a ShareGPT row's system prompt (default: system)"
    )
    prepare.add_argument("--id-column", help="column of row ids (default: row position)")
    prepare.add_argument(
        "--arrow-structs",
        choices=("refuse", "accept"),
        default="refuse",
        help="tool-call arguments or tools stored as Arrow structs (Parquet, saved datasets) "
        "come back with keys reordered and integers as floats: refuse them (default) or "
        "render them as stored",
    )
    prepare.add_argument(
        "--max-reject-fraction",
        type=float,
        default=DEFAULT_MAX_REJECT_FRACTION,
        metavar="FRACTION",
        help="fail (no output) when more than this fraction of the rows fail; rows dropped "
        f"by --overflow drop do not count (default: {DEFAULT_MAX_REJECT_FRACTION}; 1 never "
        "fails, but a run that writes no row always does)",
    )
    prepare.add_argument("--split", default="train", help="split of a dataset input")
    prepare.add_argument("--weights", action="store_true", help="add a float32 weights column")
    prepare.add_argument(
        "--assistant-masks", action="store_true", help="add TRL's assistant_masks column"
    )
    prepare.add_argument(
        "--shifted", action="store_true", help="add next-token target_ids and target_mask"
    )
    prepare.add_argument(
        "--attribution", action="store_true", help="add message_indices (message of each token)"
    )
    prepare.add_argument("--stats", type=Path, help="write the run's statistics as JSON here")
    prepare.add_argument("--quiet", "-q", action="store_true", help="no progress, no summary")
    prepare.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the data extra (pyarrow) is optional for the other subcommands.
    from renderers.prepare import ConversationMapper, open_source, run_prepare
    from renderers.prepare.job import default_batch_size, output_format

    config = _config(args)
    check_output_path(args.output, "--output")
    try:
        output_format(args.output)  # an unknown extension fails before any work
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.num_proc < 1:
        raise UsageError("--num-proc must be at least 1")
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    if args.pack is not None and args.pack < 2:
        raise UsageError(f"--pack must be at least 2 tokens, got {args.pack}")
    if args.pack is not None and config.max_length is not None and config.max_length > args.pack:
        raise UsageError(f"--max-length {config.max_length} is longer than --pack {args.pack}")
    if not 0 <= args.max_reject_fraction <= 1:
        raise UsageError(
            f"--max-reject-fraction must be between 0 and 1, got {args.max_reject_fraction}"
        )
    rejects = args.rejects or args.output.with_name(args.output.stem + ".rejects.jsonl")
    check_output_path(rejects, "--rejects")
    if args.stats is not None:
        check_output_path(args.stats, "--stats")
    source = open_source(args.input, args.split)
    renderer = renderer_from_args(args)
    _check_train_on(config.train_on, renderer)
    _check_columns(args, source)
    mapper = ConversationMapper(renderer, config)
    progress = None
    if not args.quiet and sys.stderr.isatty():
        tqdm = _tqdm()
        progress = _progress_bar(tqdm)
    stats = run_prepare(
        source,
        args.output,
        mapper,
        num_proc=args.num_proc,
        batch_size=args.batch_size or default_batch_size(args.num_proc),
        pack_length=args.pack,
        rejects=rejects,
        progress=progress,
        max_reject_fraction=args.max_reject_fraction,
        describe=cli_advice,
    )
    if args.stats is not None:
        args.stats.write_text(stats.to_json() + "\n", encoding="utf-8")
    if not args.quiet:
        sys.stderr.write(summary(stats))
    return 0


def _config(args: argparse.Namespace) -> PrepareConfig:
    from renderers.prepare import PrepareConfig

    train_on: str | tuple[str, ...] = args.train_on
    if args.train_on not in {t.value for t in TrainOn}:
        train_on = tuple(r.strip() for r in args.train_on.split(",") if r.strip())
    max_length = args.max_length if args.max_length is not None else args.pack
    roles: dict[str, str] = {}
    for pair in args.role:
        name, sep, role = pair.partition("=")
        if not sep or not name.strip() or role.strip() not in ROLE_TARGETS:
            raise UsageError(
                f"--role expects NAME=ROLE with ROLE one of {', '.join(ROLE_TARGETS)}, got {pair!r}"
            )
        roles[name.strip()] = role.strip()
    try:
        return PrepareConfig(
            train_on=train_on,
            train_end_of_turn=args.train_end_of_turn,
            max_length=max_length,
            overflow=args.overflow,
            on_error=args.on_error,
            shape=args.format,
            roles=roles,
            messages_column=args.messages_column,
            tools_column=args.tools_column or "tools",
            system_column=args.system_column or "system",
            id_column=args.id_column,
            arrow_structs=args.arrow_structs,
            weights=args.weights,
            assistant_masks=args.assistant_masks,
            shifted=args.shifted,
            attribution=args.attribution,
            split_turns=args.split_turns,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_train_on(train_on: str | tuple[str, ...], renderer: Renderer) -> None:
    """A --train-on value that is neither a mode nor roles of the format, before any row."""
    if isinstance(train_on, str):
        return
    unknown = [role for role in train_on if role not in renderer.roles]
    if unknown or not train_on:
        modes = ", ".join(t.value for t in TrainOn)
        raise UsageError(
            f"--train-on: {', '.join(map(repr, unknown)) or 'no value'} is neither a mode "
            f"({modes}) nor a role of {renderer.name} ({', '.join(renderer.roles)}; "
            "comma-separated)"
        )


def _check_columns(args: argparse.Namespace, source: Any) -> None:
    """Columns named on the command line that the input's first row does not have."""
    first = source.first_row()
    if first is None or not hasattr(first[1], "keys"):
        return
    name, row = first
    for option, column in (
        ("--messages-column", args.messages_column),
        ("--tools-column", args.tools_column),
        ("--system-column", args.system_column),
        ("--id-column", args.id_column),
    ):
        if column is not None and column not in row:
            fields = ", ".join(map(str, row)) or "none"
            raise UsageError(
                f"{option} {column}: {name} has no such column (its first row has: {fields})"
            )


def _tqdm() -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _progress_bar(tqdm: Any) -> Any:
    if tqdm is None:
        return None

    def start(total: int | None) -> Any:
        return tqdm(total=total, unit=" conv", dynamic_ncols=True, file=sys.stderr)

    return start


def summary(stats: PrepareStats) -> str:
    """The one-screen report of a run."""
    split = "" if stats.split_turns == "auto" else f", split_turns={stats.split_turns}"
    lines = [f"renderers prepare: {stats.model}, train_on={stats.train_on}{split}"]
    shapes = sorted(set(stats.shapes.values()))
    shown = f" ({', '.join(shapes)})" if shapes else ""
    lines.append(f"  input     {stats.input}: {stats.rows_read:,} rows{shown}")
    written = f"{stats.rows_written:,} rows"
    if stats.packed_rows is not None:
        written += f" packed into {stats.packed_rows:,} rows of <= {stats.pack_length} tokens"
    reader = READERS.get(stats.output_format, stats.output_format)
    lines.append(f"  output    {stats.output}: {written} ({reader})")
    if stats.max_length is not None:
        policy = {
            "error": "longer rows are errors",
            "drop": "longer rows dropped",
            "truncate": "longer rows truncated",
        }[stats.overflow]
        detail = f"max_length {stats.max_length:,} ({policy})"
        if stats.rows_truncated:
            detail += f": {stats.rows_truncated:,} truncated"
        lines.append(f"  length    {detail}")
    if stats.rows_rejected or stats.rejects:
        kinds = ", ".join(f"{n:,} {kind}" for kind, n in sorted(stats.errors_by_kind.items()))
        where = f" -> {stats.rejects}" if stats.rejects else ""
        lines.append(
            f"  rejected  {stats.rows_rejected:,} rows" + (f" ({kinds})" if kinds else "") + where
        )
    if stats.rows_split:
        lines.append(
            f"  split     {stats.rows_split:,} rows into {stats.split_examples:,} examples "
            "(turns the format does not extend; --split-turns never keeps one per row)"
        )
    share = stats.trained_tokens / stats.tokens if stats.tokens else 0.0
    lines.append(f"  tokens    {stats.tokens:,} (trained {stats.trained_tokens:,}, {share:.1%})")
    if stats.rows_without_trained_tokens:
        lines.append(f"  warning   {stats.rows_without_trained_tokens:,} rows train no token")
    lines.append(
        f"  time      {stats.seconds:.1f} s: {stats.conversations_per_second:,.0f} "
        f"conversations/s, {stats.tokens_per_second:,.0f} tokens/s "
        f"({stats.num_proc} process{'es' if stats.num_proc > 1 else ''})"
    )
    return "\n".join(lines) + "\n"
