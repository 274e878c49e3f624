"""Reading conversations: JSONL, JSON, Parquet, a folder of them, or a Hugging Face
dataset, in batches that keep input order and each row's position."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from renderers.prepare.mapper import ConversationMapper, RowResult, missing_extra, pa, pq

__all__ = ["Batch", "Source", "open_source"]

_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True, slots=True)
class Batch:
    """Consecutive input rows: raw JSONL lines, parsed JSON objects, or an Arrow table.
    ``start`` is the position of the first row in the whole input."""

    start: int
    kind: str  # "lines", "objects" or "arrow"
    rows: Any

    def prepare(self, mapper: ConversationMapper) -> Any:
        """The prepared table of these rows (runs in a worker process)."""
        if self.kind == "arrow":
            return mapper(self.rows, range(self.start, self.start + self.rows.num_rows))
        config = mapper.config
        row_ids: list[Any] = []
        results: list[RowResult] = []
        for k, row in enumerate(self.rows):
            position = self.start + k
            if self.kind == "lines":
                try:
                    row = json.loads(row)
                except ValueError as exc:
                    row_ids.append(position)
                    results.append(mapper.row_error(position, f"not valid JSON ({exc})"))
                    continue
            row_id = position
            if config.id_column is not None and isinstance(row, dict):
                row_id = row.get(config.id_column, position)
            row_ids.append(row_id)
            if not isinstance(row, dict):
                results.append(
                    mapper.row_error(row_id, f"expected a JSON object, got {type(row).__name__}")
                )
            elif config.messages_column not in row:
                results.append(mapper.row_error(row_id, f"no {config.messages_column!r} field"))
            else:
                messages = row[config.messages_column]
                results.append(mapper.row(row_id, messages, row.get(config.tools_column), False))
        return mapper.table(row_ids, results)


@dataclass(frozen=True, slots=True)
class Source:
    """An input: its files (or dataset), how many rows it holds when known."""

    name: str
    files: tuple[Path, ...]
    dataset: Any = None  # a datasets.Dataset

    def count_rows(self) -> int | None:
        if self.dataset is not None:
            return len(self.dataset)
        total = 0
        for path in self.files:
            if path.suffix == ".parquet":
                total += pq.ParquetFile(path).metadata.num_rows
            elif path.suffix == ".jsonl":
                with path.open("rb") as f:
                    total += sum(1 for line in f if line.strip())
            else:
                return None
        return total

    def batches(self, batch_size: int) -> Iterator[Batch]:
        start = 0
        if self.dataset is not None:
            arrow = self.dataset.with_format("arrow")
            for table in arrow.iter(batch_size=batch_size):
                yield Batch(start, "arrow", table)
                start += table.num_rows
            return
        for path in self.files:
            for batch in _file_batches(path, batch_size, start):
                yield batch
                start += len(batch.rows) if batch.kind != "arrow" else batch.rows.num_rows


def _file_batches(path: Path, batch_size: int, start: int) -> Iterator[Batch]:
    if path.suffix == ".parquet":
        parquet = pq.ParquetFile(path)
        for record_batch in parquet.iter_batches(batch_size=batch_size):
            yield Batch(start, "arrow", pa.Table.from_batches([record_batch]))
            start += record_batch.num_rows
    elif path.suffix == ".jsonl":
        lines: list[bytes] = []
        with path.open("rb") as f:
            for line in f:
                if not line.strip():
                    continue
                lines.append(line)
                if len(lines) == batch_size:
                    yield Batch(start, "lines", lines)
                    start += len(lines)
                    lines = []
        if lines:
            yield Batch(start, "lines", lines)
    else:
        try:
            data = json.loads(path.read_bytes())
        except ValueError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, list):
            raise ValueError(
                f"{path}: expected a JSON list of conversations, got {type(data).__name__}"
            )
        for k in range(0, len(data), batch_size):
            yield Batch(start + k, "objects", data[k : k + batch_size])


def open_source(spec: str, split: str = "train") -> Source:
    """The input named by ``spec``: a file, a folder of files, a dataset saved with
    ``save_to_disk``, or a Hugging Face dataset name (with ``split``)."""
    path = Path(spec)
    if path.is_file():
        if path.suffix not in _SUFFIXES:
            raise ValueError(f"{spec}: unknown input format (expected .jsonl, .json or .parquet)")
        return Source(spec, (path,))
    if path.is_dir():
        if (path / "dataset_info.json").exists() or (path / "state.json").exists():
            datasets = _datasets()
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                loaded = loaded[split]
            return Source(spec, (), loaded)
        files = tuple(sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file()))
        if not files:
            raise ValueError(f"{spec}: no .jsonl, .json or .parquet files in this folder")
        return Source(spec, files)
    datasets = _datasets()
    try:
        loaded = datasets.load_dataset(spec, split=split)
    except Exception as exc:  # datasets raises many kinds for a name it cannot resolve
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(
            f"{spec}: no such file or folder, and not a loadable dataset ({first})"
        ) from None
    return Source(spec, (), loaded)


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise missing_extra("datasets") from None
    return datasets
