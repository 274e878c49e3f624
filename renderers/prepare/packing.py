"""Packing: consecutive prepared rows joined into rows of at most ``length`` tokens.

Rows are packed in input order, next-fit: a packed row takes rows until the next one
would not fit. Each packed row says where its conversations start (``seq_lens``) and
restarts ``position_ids`` at 0 for each, which is what varlen attention kernels (flash
attention, TRL's padding-free collator) need to keep conversations apart. No label
crosses a boundary: a conversation's first token is never a target (its label is -100),
and shifted targets end each conversation with -100.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from renderers.prepare.mapper import pa, pc

__all__ = ["TOKEN_COLUMNS", "Packer", "pack_table"]

TOKEN_COLUMNS = (
    "input_ids",
    "labels",
    "loss_mask",
    "weights",
    "assistant_masks",
    "target_ids",
    "target_mask",
    "target_weights",
    "message_indices",
)
"""The per-token list columns a packed row concatenates."""

_ROW_COLUMNS = ("num_tokens", "num_trained_tokens")


def pack_table(table: Any, length: int) -> Any:
    """``table`` (prepared rows without errors) packed into rows of at most ``length``
    tokens; see the module docs and :mod:`renderers.prepare` for the columns."""
    packer = Packer(length)
    return _concat([*packer.add(table), *packer.finish()], table)


class Packer:
    """Packs a stream of prepared tables, keeping the last packed row open until the next
    table shows whether more fits."""

    def __init__(self, length: int) -> None:
        if length < 2:
            raise ValueError(f"pack length: expected at least 2 tokens, got {length}")
        self.length = length
        self._open: Any = None  # rows of the packed row still being filled

    def add(self, table: Any) -> Iterator[Any]:
        """Packed tables complete so far."""
        if "error" in table.column_names:  # rows a mapper skipped have no tokens to pack
            table = table.filter(pc.is_null(table.column("error")))
            table = table.drop_columns(["error", "error_message_index"])
        if self._open is not None and self._open.num_rows:
            table = pa.concat_tables([self._open, table.select(self._open.column_names)])
        lengths = table.column("num_tokens").to_numpy()
        too_long = np.flatnonzero(lengths > self.length)
        if len(too_long):
            k = int(too_long[0])
            raise ValueError(
                f"row {table.column('row_id')[k].as_py()}: {int(lengths[k])} tokens do not fit "
                f"in packed rows of {self.length} (set max_length to at most the pack length)"
            )
        groups = _next_fit(lengths, self.length)
        if not len(groups):
            self._open = table
            return
        last_start = int(np.flatnonzero(groups == groups[-1])[0])
        self._open = table.slice(last_start)
        if last_start:
            yield _packed(table.slice(0, last_start), groups[:last_start])

    def finish(self) -> Iterator[Any]:
        """The last packed row."""
        if self._open is not None and self._open.num_rows:
            yield _packed(self._open, np.zeros(self._open.num_rows, dtype=np.int64))
        self._open = None


def _next_fit(lengths: np.ndarray, length: int) -> np.ndarray:
    """The packed row of each row (0, 0, 1, 2, 2, ...), filled in order."""
    groups = np.empty(len(lengths), dtype=np.int64)
    group = 0
    used = 0
    for k, n in enumerate(lengths.tolist()):
        if used + n > length and used:
            group += 1
            used = 0
        used += n
        groups[k] = group
    return groups


def _packed(table: Any, groups: np.ndarray) -> Any:
    lengths = table.column("num_tokens").to_numpy().astype(np.int64)
    starts = np.flatnonzero(np.diff(groups, prepend=-1))  # the first row of each group
    rows_per_group = np.diff(np.r_[starts, len(groups)])
    row_offsets = np.r_[0, np.cumsum(rows_per_group)].astype(np.int32)
    token_offsets = np.r_[0, np.cumsum(lengths)][row_offsets].astype(np.int32)
    row_offsets_pa = pa.array(row_offsets, pa.int32())
    token_offsets_pa = pa.array(token_offsets, pa.int32())
    columns: dict[str, Any] = {
        "row_ids": pa.ListArray.from_arrays(row_offsets_pa, table.column("row_id").combine_chunks())
    }
    if "example_index" in table.column_names:
        columns["example_indices"] = pa.ListArray.from_arrays(
            row_offsets_pa, table.column("example_index").combine_chunks()
        )
    for name in TOKEN_COLUMNS:
        if name in table.column_names:
            values = table.column(name).combine_chunks().flatten()
            columns[name] = pa.ListArray.from_arrays(token_offsets_pa, values)
    total = int(lengths.sum())
    segment_starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    columns["position_ids"] = pa.ListArray.from_arrays(
        token_offsets_pa, pa.array((np.arange(total) - segment_starts).astype(np.int32))
    )
    columns["seq_lens"] = pa.ListArray.from_arrays(
        row_offsets_pa, pa.array(lengths.astype(np.int32))
    )
    for name in _ROW_COLUMNS:
        per_row = table.column(name).to_numpy().astype(np.int64)
        sums = np.add.reduceat(per_row, row_offsets[:-1]) if len(per_row) else per_row
        columns[name] = pa.array(sums.astype(np.int32))
    return pa.table(columns)


def _concat(tables: Iterable[Any], like: Any) -> Any:
    tables = list(tables)
    if tables:
        return pa.concat_tables(tables)
    return _packed(like.slice(0, 0), np.zeros(0, dtype=np.int64))
