"""The ``renderers prepare`` job: read, map in parallel processes (order kept), pack,
write atomically, list rejected rows, count everything."""

from __future__ import annotations

import contextlib
import gc
import json
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from renderers.prepare.mapper import ConversationMapper, pa, pc, pq
from renderers.prepare.outputs import (
    DEFAULT_MAX_REJECT_FRACTION,
    OUTPUT_FORMATS,
    READERS,
    output_format,
)
from renderers.prepare.packing import Packer
from renderers.prepare.sources import Batch, Detect, Source

__all__ = [
    "DEFAULT_MAX_REJECT_FRACTION",
    "OUTPUT_FORMATS",
    "READERS",
    "PrepareStats",
    "RejectedRowsError",
    "default_batch_size",
    "output_format",
    "run_prepare",
]


class RejectedRowsError(ValueError):
    """A run that wrote no row (an empty input, or every row rejected), or rejected more
    rows than it may: no output is written;
    the rejects file, when asked for, lists them."""


@dataclass
class PrepareStats:
    """What a prepare run did (``--stats`` writes it as JSON)."""

    model: str
    input: str
    output: str
    output_format: str
    train_on: str
    max_length: int | None
    overflow: str
    pack_length: int | None
    num_proc: int
    split_turns: str = "auto"
    rows_read: int = 0
    rows_written: int = 0  # one per example: a split row writes several
    rows_rejected: int = 0
    rows_dropped_too_long: int = 0
    rows_truncated: int = 0
    rows_without_trained_tokens: int = 0
    rows_split: int = 0  # rows written as several examples (split_turns="auto")
    split_examples: int = 0  # the examples those rows became
    packed_rows: int | None = None
    tokens: int = 0
    trained_tokens: int = 0
    seconds: float = 0.0
    conversations_per_second: float = 0.0
    tokens_per_second: float = 0.0
    peak_worker_rss_mib: float = 0.0  # of the largest process that mapped rows
    rejects: str | None = None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    first_error: str | None = None  # "row ID: error" of the first rejected row
    shapes: dict[str, str] = field(default_factory=dict)  # each file's shape

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def default_batch_size(num_proc: int) -> int:
    """Rows per work unit: 256, or 64 with several processes (the last units of a run are
    where workers wait for each other; smaller units keep that wait short)."""
    return 256 if num_proc <= 1 else 64


def run_prepare(
    source: Source,
    output: Path,
    mapper: ConversationMapper,
    *,
    num_proc: int = 1,
    batch_size: int | None = None,
    pack_length: int | None = None,
    rejects: Path | None = None,
    progress: Callable[[int | None], Any] | None = None,
    max_reject_fraction: float | None = DEFAULT_MAX_REJECT_FRACTION,
    describe: Callable[[str], str] | None = None,
) -> PrepareStats:
    """Prepare ``source`` into ``output``; rows the mapper skips go to ``rejects`` (JSONL:
    row id, message index, error). Output files appear only when the run succeeds.
    ``num_proc`` processes map rows: this one and ``num_proc - 1`` forked workers;
    ``batch_size`` rows are one work unit (default: :func:`default_batch_size`).

    The run fails (:class:`RejectedRowsError`, no output; the rejects file is kept) when
    no row was written (an empty input, or every row rejected), or when more than
    ``max_reject_fraction`` of the rows failed (``None``: any share). ``describe``
    rewrites error texts for the rejects file (the command line gives its own spelling of
    the advice in them)."""
    config = mapper.config
    stats = PrepareStats(
        model=mapper.renderer.name,
        input=source.name,
        output=str(output),
        output_format=output_format(output),
        train_on=(
            config.train_on if isinstance(config.train_on, str) else ",".join(config.train_on)
        ),
        max_length=config.max_length,
        overflow=config.overflow,
        pack_length=pack_length,
        num_proc=num_proc,
        split_turns=config.split_turns,
    )
    if pack_length is not None:
        stats.packed_rows = 0
    mapper.warm_up()  # one-time set-up here, so forked workers inherit it
    started = time.perf_counter()
    bar = progress(source.count_rows()) if progress is not None else None
    packer = Packer(pack_length) if pack_length is not None else None
    skipping = config.on_error == "skip" or (
        config.max_length is not None and config.overflow == "drop"
    )
    writer = _AtomicTable(output, stats.output_format)
    reject_file = _AtomicText(rejects) if rejects is not None and skipping else None

    def detect(name: str, row: Any) -> str | None:
        shape = mapper.detect(row)
        stats.shapes[name] = shape or "unknown"
        return shape

    try:
        size = batch_size or default_batch_size(num_proc)
        for table, rss in _mapped(source, mapper, num_proc, size, detect):
            stats.peak_worker_rss_mib = max(stats.peak_worker_rss_mib, rss)
            read = stats.rows_read
            good = _account(table, stats, reject_file, describe)
            if bar is not None:
                bar.update(stats.rows_read - read)
            if packer is None:
                writer.write(good)
                continue
            for packed in packer.add(good):
                writer.write(packed)
                stats.packed_rows = (stats.packed_rows or 0) + packed.num_rows
        if packer is not None:
            for packed in packer.finish():
                writer.write(packed)
                stats.packed_rows = (stats.packed_rows or 0) + packed.num_rows
        if reject_file is not None:
            reject_file.commit()
            stats.rejects = str(rejects)
        _check_rejects(stats, max_reject_fraction)
        writer.commit()
    finally:
        writer.abort()
        if reject_file is not None:
            reject_file.abort()
        if bar is not None:
            bar.close()
    stats.seconds = time.perf_counter() - started
    if stats.seconds > 0:
        stats.conversations_per_second = stats.rows_written / stats.seconds
        stats.tokens_per_second = stats.tokens / stats.seconds
    return stats


def _check_rejects(stats: PrepareStats, max_fraction: float | None) -> None:
    """Fail a run that wrote no row (from no input, or with every row rejected), or
    rejected too many of them: a script must not take an empty training set for one."""
    where = f"; all listed in {stats.rejects}" if stats.rejects else ""
    first = f" (first: {stats.first_error})" if stats.first_error else ""
    if not stats.rows_read:
        raise RejectedRowsError(f"no row written: {stats.input} holds no rows")
    if not stats.rows_written:
        raise RejectedRowsError(
            f"no row written: all {stats.rows_read:,} rows were rejected{first}{where}"
        )
    failed = stats.errors_by_kind.get("error", 0)
    if max_fraction is not None and stats.rows_read and failed > max_fraction * stats.rows_read:
        raise RejectedRowsError(
            f"{failed:,} of {stats.rows_read:,} rows failed ({failed / stats.rows_read:.1%}, "
            f"more than max_reject_fraction={max_fraction:g}){first}{where}"
        )


def _account(
    table: Any,
    stats: PrepareStats,
    rejects: _AtomicText | None,
    describe: Callable[[str], str] | None = None,
) -> Any:
    """Count a mapped table, list its rejected rows, return its good rows."""
    errors = table.column("error")
    if "example_index" in table.column_names:  # a row split into examples: several rows
        index = table.column("example_index")
        stats.rows_read += pc.sum(pc.equal(index, 0)).as_py() or 0
        split = pc.sum(pc.equal(index, 1)).as_py() or 0
        stats.rows_split += split
        stats.split_examples += split + (pc.sum(pc.greater(index, 0)).as_py() or 0)
    else:
        stats.rows_read += table.num_rows
    failed = pc.is_valid(errors)
    n_failed = pc.sum(failed).as_py() or 0
    if n_failed:
        bad = table.filter(failed).select(["row_id", "error_message_index", "error"])
        for row in bad.to_pylist():
            error = row["error"]
            if describe is not None:
                error = describe(error)
            if stats.first_error is None:
                stats.first_error = f"row {row['row_id']}: {error}"
            kind = "too long" if error.startswith("dropped: ") else "error"
            stats.errors_by_kind[kind] = stats.errors_by_kind.get(kind, 0) + 1
            if kind == "too long":
                stats.rows_dropped_too_long += 1
            if rejects is not None:
                rejects.write(
                    json.dumps(
                        {
                            "row_id": row["row_id"],
                            "message_index": row["error_message_index"],
                            "error": error,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
        stats.rows_rejected += n_failed
        table = table.filter(pc.invert(failed))
    good = table.drop_columns(["error", "error_message_index"])
    stats.rows_written += good.num_rows
    stats.tokens += pc.sum(good.column("num_tokens")).as_py() or 0
    stats.trained_tokens += pc.sum(good.column("num_trained_tokens")).as_py() or 0
    stats.rows_without_trained_tokens += (
        pc.sum(pc.equal(good.column("num_trained_tokens"), 0)).as_py() or 0
    )
    if "untruncated_num_tokens" in good.column_names:
        truncated = pc.greater(good.column("untruncated_num_tokens"), good.column("num_tokens"))
        stats.rows_truncated += pc.sum(truncated).as_py() or 0
    return good


# -- parallel mapping, order kept ----------------------------------------------------------

_WORKER_MAPPER: ConversationMapper | None = None
_WORKER_SPOOL: str | None = None


def _init_worker(mapper: ConversationMapper, spool: str | None) -> None:
    global _WORKER_MAPPER, _WORKER_SPOOL
    _WORKER_MAPPER, _WORKER_SPOOL = mapper, spool
    # A terminal's Ctrl-C reaches the whole process group: the main process stops the
    # run (and the workers); a worker would only report its own interruption.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass(frozen=True, slots=True)
class _Spooled:
    """A worker's table left as an Arrow IPC file in the spool folder."""

    path: str


def _work(batch: Batch) -> tuple[Any, float]:
    """Map ``batch`` in a worker. The table goes back as a file in the spool folder: sent
    through the pool's pipe, its megabytes are read in 64 KiB pieces by a thread of the
    main process that needs the GIL for each, and the worker waited a few to tens of
    milliseconds per batch for that. A table the spool cannot take (full) goes through
    the pipe."""
    assert _WORKER_MAPPER is not None
    table, rss = _prepared(batch, _WORKER_MAPPER)
    if _WORKER_SPOOL is None:
        return table, rss
    path = os.path.join(_WORKER_SPOOL, f"{batch.start}.arrow")
    try:
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return table, rss
    return _Spooled(path), rss


def _prepared(batch: Batch, mapper: ConversationMapper) -> tuple[Any, float]:
    """The batch's table and the peak resident memory of this process so far (MiB)."""
    table = batch.prepare(mapper)
    return table, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _mapped(
    source: Source,
    mapper: ConversationMapper,
    num_proc: int,
    batch_size: int,
    detect: Detect | None = None,
) -> Iterator[tuple[Any, float]]:
    """Prepared batches in input order, mapped by this process and ``num_proc - 1``
    forked workers."""
    batches = source.batches(batch_size, detect)
    if num_proc <= 1:
        for batch in batches:
            yield _prepared(batch, mapper)
        return
    # The tokenizer is loaded in this process already; forked workers share it. Objects
    # made so far leave the garbage collector's view, so that collections in the workers
    # do not touch (and copy) every page they share with this process.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    gc.freeze()
    method = "fork" if sys.platform == "linux" else "spawn"
    context = multiprocessing.get_context(method)
    workers = num_proc - 1
    with (
        _spool_folder() as spool,
        context.Pool(workers, initializer=_init_worker, initargs=(mapper, spool)) as pool,
    ):
        yield from _shared(batches, mapper, pool, queued=4 * workers)


def _spool_folder() -> contextlib.AbstractContextManager[str | None]:
    """A folder for the workers' tables (in shared memory where there is one), removed
    with what is left in it; none where a mapped file cannot be unlinked (Windows)."""
    if os.name != "posix":
        return contextlib.nullcontext(None)
    shared_memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix="renderers-prepare-", dir=shared_memory)


def _shared(
    batches: Iterator[Batch], mapper: ConversationMapper, pool: Any, queued: int
) -> Iterator[tuple[Any, float]]:
    """Map ``batches`` in order, sending each to ``pool`` while it has fewer than ``queued``
    batches unfinished and mapping it here otherwise.

    This process writes the output too; mapping here whenever the workers are busy gives
    it work for the time the writing leaves, instead of a third process competing for the
    cores, and saves shipping those rows to a worker and back. Four batches queued per
    worker keep it busy while this process maps a batch and writes (with two, it ran
    out of work every few batches for 20-50 ms)."""
    pending: deque[Any] = deque()  # AsyncResult, or a (table, rss) mapped here
    in_pool = 0
    for batch in batches:
        if in_pool < queued:
            pending.append(pool.apply_async(_work, (batch,)))
        else:
            pending.append(_prepared(batch, mapper))
        while pending and (isinstance(pending[0], tuple) or pending[0].ready()):
            yield _result(pending.popleft())
        in_pool = sum(1 for item in pending if not isinstance(item, tuple) and not item.ready())
    while pending:
        yield _result(pending.popleft())


def _result(item: Any) -> tuple[Any, float]:
    if isinstance(item, tuple):
        return item
    table, rss = item.get()
    if isinstance(table, _Spooled):
        # Mapped, not copied; the file's memory is freed with the table once written.
        path = table.path
        table = pa.ipc.open_file(pa.memory_map(path)).read_all()
        os.unlink(path)
    return table, rss


# -- atomic outputs -------------------------------------------------------------------------


class _Atomic:
    """A file written under a temporary name beside its target and renamed into place on
    :meth:`commit`; :meth:`abort` (after a failure or interruption) removes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.committed = False

    def _close(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        self._close()
        os.replace(self.temporary, self.path)
        self.committed = True

    def abort(self) -> None:
        if self.committed:
            return
        try:
            self._close()
        finally:
            self.temporary.unlink(missing_ok=True)


class _AtomicText(_Atomic):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._file = self.temporary.open("w", encoding="utf-8")

    def write(self, text: str) -> None:
        self._file.write(text)

    def _close(self) -> None:
        self._file.close()


class _AtomicTable(_Atomic):
    """Parquet, Arrow IPC stream (``.arrow``: what ``datasets.Dataset.from_file`` reads),
    Arrow IPC file (``.feather``) or JSONL."""

    def __init__(self, path: Path, fmt: str) -> None:
        super().__init__(path)
        self.format = fmt
        self._writer: Any = None
        self._sink: Any = None
        self._schema: Any = None
        self._text = self.temporary.open("w", encoding="utf-8") if fmt == "jsonl" else None

    def write(self, table: Any) -> None:
        if self._text is not None:
            for row in table.to_pylist():
                self._text.write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        if self._writer is None:
            self._schema = table.schema
            if self.format == "parquet":
                # Token ids barely repeat within a page: dictionary encoding only costs
                # time (2.4x the write, for a file 16% smaller). zstd writes faster than
                # the default snappy and a third of its size (7.0M tokens: 0.34 s and
                # 6.6 MiB, against 0.39 s and 20.7 MiB).
                self._writer = pq.ParquetWriter(
                    self.temporary, self._schema, use_dictionary=False, compression="zstd"
                )
            else:
                self._sink = pa.OSFile(str(self.temporary), "wb")
                new = pa.ipc.new_file if self.format == "feather" else pa.ipc.new_stream
                self._writer = new(self._sink, self._schema)
        elif table.schema != self._schema:
            table = table.cast(self._schema)
        self._writer.write_table(table)

    def _close(self) -> None:
        if self._text is not None:
            self._text.close()
        elif self._writer is not None:
            self._writer.close()
            self._writer = None
            if self._sink is not None:
                self._sink.close()
