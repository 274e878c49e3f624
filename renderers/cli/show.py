"""``renderers show``: see what is trained, token by token, in the terminal or a browser."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from renderers.cli.common import (
    Style,
    UsageError,
    add_model_argument,
    add_option_argument,
    check_output_path,
    load_json,
    read_text,
)
from renderers.cli.models import renderer_from_args
from renderers.cli.parse import parse_ids
from renderers.cli.render import split_conversation
from renderers.rendering import Renderer, TrainOn
from renderers.rollout import Rollout
from renderers.view import TokenView, completion_view, supervised_view

__all__ = ["add_parser"]

_TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc")
_IGNORED = -100  # the label of an untrained token (PyTorch's cross-entropy ignore_index)


def add_parser(sub: Any) -> None:
    show = sub.add_parser(
        "show",
        help="show what is trained, token by token, in the terminal or as an HTML page",
        description="Show a training example token by token: trained tokens in green, "
        "untrained dim, control tokens marked, a header per message, whitespace and "
        "newlines visible (plain markers instead of colours when not on a terminal or when "
        "NO_COLOR is set). INPUT is a conversation (JSON list of messages, or "
        '{"messages": [...], "tools": [...]}), rendered as a supervised example; a row of a '
        "dataset `renderers prepare` wrote (input_ids with weights, loss_mask or labels; "
        "Parquet, Arrow, JSONL or a JSON list, picked with --row; packed rows split at "
        "seq_lens); a rollout saved with Rollout.to_dict() (each completion's parts "
        'outlined); or {"tokens", "weights"}, as `renderers render --supervised` prints '
        "them. With --parse, INPUT holds sampled token ids: their "
        "parsed parts, spans, termination and issues. Use - for stdin.",
    )
    show.add_argument("input", nargs="?", default="-", help="input file (default: stdin)")
    add_model_argument(show)
    show.add_argument("--tools", help="JSON file with a list of tool definitions")
    show.add_argument(
        "--train-on",
        choices=[t.value for t in TrainOn],
        help="which tokens of a conversation are trained (default: last_assistant)",
    )
    show.add_argument(
        "--row", type=int, metavar="N", help="show row N (from 0) of a table or JSONL file"
    )
    show.add_argument(
        "--parse",
        action="store_true",
        help="INPUT is a sampled completion (token ids): show its parts, their token spans, "
        "how it ended and any issues",
    )
    show.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page to FILE (- for stdout) instead of text",
    )
    show.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text (default: auto, on a terminal unless NO_COLOR is set)",
    )
    add_option_argument(show)
    show.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.row is not None and args.row < 0:
        raise UsageError(f"--row must be 0 or more, got {args.row}")
    if args.html not in (None, "-"):
        check_output_path(args.html, "--html")
    renderer = renderer_from_args(args)
    view = _completion(args, renderer) if args.parse else _example(args, renderer)
    if args.html is None:
        color = {"always": True, "never": False}.get(args.color)
        out.write(view.to_text(color=Style(out, color).enabled))
    elif args.html == "-":
        out.write(view.to_html())
    else:
        Path(args.html).write_text(view.to_html(), encoding="utf-8")
        summary = view.summary()
        print(
            f"renderers show: wrote {args.html} ({summary.tokens} tokens, "
            f"{summary.trained} trained)",
            file=sys.stderr,
        )
    return 0


def _title(args: argparse.Namespace, renderer: Renderer) -> str:
    source = "stdin" if args.input == "-" else Path(args.input).name
    row = f" · row {args.row}" if args.row is not None else ""
    return f"{renderer.name} · {source}{row}"


def _completion(args: argparse.Namespace, renderer: Renderer) -> TokenView:
    if args.row is not None or args.train_on or args.tools:
        raise UsageError("--parse reads token ids: --row, --train-on and --tools do not apply")
    ids = parse_ids(read_text(args.input))
    result = renderer.parse_response(ids)
    return completion_view(result, ids, renderer, _title(args, renderer))


def _example(args: argparse.Namespace, renderer: Renderer) -> TokenView:
    record = _read_record(args.input, args.row)
    source = "stdin" if args.input == "-" else args.input
    where = f"{source} row {args.row}" if args.row is not None else source
    title = _title(args, renderer)
    if isinstance(record, Mapping) and {"turns", "completions", "renderer"} <= record.keys():
        return Rollout.from_dict(record, renderer).view(title)  # Rollout.to_dict() output
    if isinstance(record, list) or (isinstance(record, Mapping) and "messages" in record):
        messages, tools = split_conversation(record)
        if args.tools:
            tools = load_json(read_text(args.tools), args.tools)
        train_on = args.train_on or TrainOn.LAST_ASSISTANT.value
        example = renderer.build_supervised_example(messages, tools=tools, train_on=train_on)
        return supervised_view(example.tokens, example.weights, renderer, title)
    if args.train_on or args.tools:
        raise UsageError(
            f"{where} holds token ids, not a conversation: --train-on and --tools do not apply"
        )
    if isinstance(record, Mapping):
        if record.get("error") is not None:
            raise ValueError(f"{where} was rejected by prepare: {record['error']}")
        if "input_ids" in record:
            ids = _int_list(record["input_ids"], "input_ids", where)
            return supervised_view(
                ids, _row_weights(record, ids, where), renderer, title, _sequence_lengths(record)
            )
        if "tokens" in record and "weights" in record:
            ids = _int_list(record["tokens"], "tokens", where)
            return supervised_view(
                ids, _float_list(record["weights"], "weights", where), renderer, title
            )
    keys = ", ".join(map(str, record)) if isinstance(record, Mapping) else type(record).__name__
    raise ValueError(
        f"{where}: expected a conversation (messages), a prepared row (input_ids with labels "
        f"or loss_mask) or tokens with weights; got {keys}"
    )


def _read_record(path: str, row: int | None) -> Any:
    """The JSON document in ``path``, or row ``row`` of a table, JSONL or JSON list."""
    if path != "-" and Path(path).suffix.lower() in _TABLE_SUFFIXES:
        return _table_row(path, 0 if row is None else row)
    text = read_text(path)
    name = "stdin" if path == "-" else path
    if path.endswith(".jsonl") or (row is not None and not text.lstrip().startswith("[")):
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        k = 0 if row is None else row
        if k >= len(lines):
            raise ValueError(f"{name}: row {k} does not exist (it has {len(lines)} rows)")
        number, line = lines[k]
        return load_json(line, f"{name} row {k} (line {number})")
    data = load_json(text, name)
    if row is None:
        return data
    if not isinstance(data, list) or (data and isinstance(data[0], Mapping) and "role" in data[0]):
        raise ValueError(f"{name}: --row needs a list of rows (a JSON list or JSONL file)")
    if row >= len(data):
        raise ValueError(f"{name}: row {row} does not exist (it has {len(data)} rows)")
    return data[row]


def _table_row(path: str, row: int) -> dict[str, Any]:
    """Row ``row`` of a Parquet or Arrow file, reading only the row group that holds it."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(
            f"{path}: reading Parquet and Arrow files needs pyarrow "
            "(pip install 'exact-renderers[data]')"
        ) from None
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    try:
        if path.lower().endswith(".parquet"):
            table = _parquet_row(pq.ParquetFile(path), row, path)
        else:
            table = _arrow_table(pa, path)
            if row >= table.num_rows:
                raise ValueError(f"{path}: row {row} does not exist (it has {table.num_rows} rows)")
            table = table.slice(row, 1)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{path}: cannot read it as a table ({exc})") from None
    record: dict[str, Any] = table.to_pylist()[0]
    return record


def _parquet_row(file: Any, row: int, path: str) -> Any:
    total = file.metadata.num_rows
    if row >= total:
        raise ValueError(f"{path}: row {row} does not exist (it has {total} rows)")
    first = 0
    for group in range(file.num_row_groups):
        rows = file.metadata.row_group(group).num_rows
        if row < first + rows:
            return file.read_row_group(group).slice(row - first, 1)
        first += rows
    raise AssertionError("unreachable: the row groups hold every row")


def _arrow_table(pa: Any, path: str) -> Any:
    """An Arrow IPC file, or stream (what ``datasets`` writes), memory-mapped."""
    source = pa.memory_map(path)
    try:
        return pa.ipc.open_file(source).read_all()
    except pa.ArrowInvalid:
        source.seek(0)
        return pa.ipc.open_stream(source).read_all()


def _row_weights(record: Mapping[str, Any], ids: list[int], where: str) -> list[float]:
    """A prepared row's loss weights: ``weights`` or ``loss_mask`` where given, else
    ``labels`` other than -100."""
    for column in ("weights", "loss_mask"):
        if record.get(column) is not None:
            weights = _float_list(record[column], column, where)
            break
    else:
        if record.get("labels") is None:
            raise ValueError(f"{where}: input_ids without labels, loss_mask or weights")
        labels = _int_list(record["labels"], "labels", where)
        weights = [0.0 if label == _IGNORED else 1.0 for label in labels]
        column = "labels"
    if len(weights) != len(ids):
        raise ValueError(f"{where}: {column} has {len(weights)} values for {len(ids)} input_ids")
    return weights


def _sequence_lengths(record: Mapping[str, Any]) -> list[int] | None:
    """The lengths of the conversations packed in a row (``seq_lens``), if it is packed."""
    lengths = record.get("seq_lens")
    return None if lengths is None else _int_list(lengths, "seq_lens", "the row")


def _int_list(value: Any, column: str, where: str) -> list[int]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{where}: {column} must be a list of integers")
    return value


def _float_list(value: Any, column: str, where: str) -> list[float]:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(v, (int, float)) for v in value):
        raise ValueError(f"{where}: {column} must be a list of numbers")
    return [float(v) for v in value]
