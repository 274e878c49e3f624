"""Reading conversations: JSONL, JSON, Parquet, a folder of them, or a Hugging Face
dataset, in batches that keep input order and each row's position."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from renderers.prepare.mapper import ConversationMapper, RowResult, missing_extra, pa, pq

__all__ = ["Batch", "Source", "open_source"]

_SUFFIXES = (".jsonl", ".json", ".parquet")


Detect = Callable[[str, Any], str | None]
"""The shape of a file's rows, from the file's name and its first row."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Consecutive input rows: raw JSONL lines, parsed JSON objects, or an Arrow table.
    ``start`` is the position of the first row in the whole input; ``shape`` the shape
    of the file they come from (``None``: each row's own); ``lines`` the line number of
    each JSONL row in ``file``."""

    start: int
    kind: str  # "lines", "objects" or "arrow"
    rows: Any
    shape: str | None = None
    file: str = ""
    lines: tuple[int, ...] = ()

    def prepare(self, mapper: ConversationMapper) -> Any:
        """The prepared table of these rows (runs in a worker process)."""
        if self.kind == "arrow":
            indices = range(self.start, self.start + self.rows.num_rows)
            return mapper(self.rows, indices, shape=self.shape)
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
                    where = f"{self.file} line {self.lines[k]}: " if self.lines else ""
                    results.append(mapper.row_error(position, f"{where}not valid JSON ({exc})"))
                    continue
            row_id = position
            if config.id_column is not None and isinstance(row, dict):
                row_id = row.get(config.id_column, position)
            row_ids.append(row_id)
            if not isinstance(row, dict):
                results.append(
                    mapper.row_error(row_id, f"expected a JSON object, got {type(row).__name__}")
                )
            else:
                results.append(mapper.row(row_id, row, False, self.shape))
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

    def first_row(self) -> tuple[str, Any] | None:
        """The name of the first file (or the dataset) and its first row, read alone
        (``None`` for an empty input; a JSONL line that is not JSON is skipped)."""
        if self.dataset is not None:
            return (self.name, self.dataset[0]) if len(self.dataset) else None
        for path in self.files:
            row = _first_row(path)
            if row is not None:
                return path.name, row
        return None

    def batches(self, batch_size: int, detect: Detect | None = None) -> Iterator[Batch]:
        """The input in batches of ``batch_size`` rows; ``detect`` gives each file's
        shape from its first row (carried by its batches)."""
        start = 0
        if self.dataset is not None:
            shape = None
            if detect is not None and len(self.dataset):
                shape = detect(self.name, self.dataset[0])
            arrow = self.dataset.with_format("arrow")
            for table in arrow.iter(batch_size=batch_size):
                yield Batch(start, "arrow", table, shape, self.name)
                start += table.num_rows
            return
        for path in self.files:
            shape = None
            if detect is not None:
                first = _first_row(path)
                shape = detect(path.name, first) if first is not None else None
            for batch in _file_batches(path, batch_size, start, shape):
                yield batch
                start += len(batch.rows) if batch.kind != "arrow" else batch.rows.num_rows


def _first_row(path: Path) -> Any:
    if path.suffix == ".parquet":
        for record_batch in pq.ParquetFile(path).iter_batches(batch_size=1):
            if record_batch.num_rows:
                return record_batch.slice(0, 1).to_pylist()[0]
        return None
    if path.suffix == ".jsonl":
        with path.open("rb") as f:
            for line in f:
                if line.strip():
                    try:
                        return json.loads(line)
                    except ValueError:
                        continue
        return None
    data = _json_file(path)
    return data[0] if data else None


def _json_file(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_bytes())
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(
            f"{path}: expected a JSON list of conversations, got {type(data).__name__}"
        )
    return data


def _file_batches(path: Path, batch_size: int, start: int, shape: str | None) -> Iterator[Batch]:
    name = path.name
    if path.suffix == ".parquet":
        parquet = pq.ParquetFile(path)
        for record_batch in parquet.iter_batches(batch_size=batch_size):
            yield Batch(start, "arrow", pa.Table.from_batches([record_batch]), shape, name)
            start += record_batch.num_rows
    elif path.suffix == ".jsonl":
        lines: list[bytes] = []
        numbers: list[int] = []
        with path.open("rb") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                lines.append(line)
                numbers.append(number)
                if len(lines) == batch_size:
                    yield Batch(start, "lines", lines, shape, name, tuple(numbers))
                    start += len(lines)
                    lines, numbers = [], []
        if lines:
            yield Batch(start, "lines", lines, shape, name, tuple(numbers))
    else:
        data = _json_file(path)
        for k in range(0, len(data), batch_size):
            yield Batch(start + k, "objects", data[k : k + batch_size], shape, name)


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
