"""What a prepare run writes, how each output is read, and when a run writes nothing."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_MAX_REJECT_FRACTION", "OUTPUT_FORMATS", "READERS", "output_format"]

OUTPUT_FORMATS = {
    ".parquet": "parquet",
    ".arrow": "arrow",
    ".feather": "feather",
    ".jsonl": "jsonl",
}
"""Output formats by extension. ``.arrow`` is an Arrow IPC *stream*, the format of
``datasets``' own ``.arrow`` files; ``.feather`` an Arrow IPC *file* (Feather v2)."""

READERS = {
    "parquet": "pyarrow.parquet.read_table, datasets.Dataset.from_parquet",
    "arrow": "Arrow IPC stream: datasets.Dataset.from_file, pyarrow.ipc.open_stream",
    "feather": "Arrow IPC file: pyarrow.feather.read_table, pyarrow.ipc.open_file",
    "jsonl": "one JSON object per line",
}
"""How to read each output format (what a run's summary says)."""

DEFAULT_MAX_REJECT_FRACTION = 0.1
"""A run whose rows fail (errors, not rows dropped for their length) for more than this
fraction of its input fails: a share that high is a wrong option or a wrong file far more
often than bad data."""


def output_format(path: Path) -> str:
    """The output format of ``path`` by its extension."""
    fmt = OUTPUT_FORMATS.get(path.suffix)
    if fmt is None:
        raise ValueError(
            f"{path}: unknown output format (expected {', '.join(OUTPUT_FORMATS)} as extension)"
        )
    return fmt
