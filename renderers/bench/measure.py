"""Timing and memory measurement (medians of repeated runs after warm-up) and the row a
measurement becomes in the report."""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Row:
    """One measured quantity with its baseline from the same run."""

    model: str
    measure: str
    tokens: int
    seconds: float
    baseline: str = ""
    baseline_seconds: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if not self.baseline_seconds:
            return None
        return self.seconds / self.baseline_seconds

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = self.ratio
        return out


def median_seconds(
    fn: Callable[[], Any], *, repeats: int = 7, warmup: int = 2, min_total: float = 0.3
) -> float:
    """Median wall time of ``fn()`` over at least ``repeats`` runs (more for fast functions,
    until ``min_total`` seconds were measured), after ``warmup`` untimed runs."""
    return paired_median_seconds([fn], repeats=repeats, warmup=warmup, min_total=min_total)[0]


def paired_median_seconds(
    fns: Sequence[Callable[[], Any]],
    *,
    repeats: int = 7,
    warmup: int = 2,
    min_total: float = 0.3,
) -> list[float]:
    """Median wall time of each of ``fns``, timed in turn within every round, so a slow
    spell of a shared machine hits ours and the baseline alike and their ratio holds."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    total = 0.0
    gc.collect()
    while len(times[0]) < repeats or (total < min_total and len(times[0]) < 200):
        for fn, samples in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            samples.append(elapsed)
            total += elapsed
    return [statistics.median(samples) for samples in times]


def peak_memory_bytes(fn: Callable[[], Any]) -> int:
    """Peak memory allocated by Python while ``fn()`` runs (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


class Progress:
    """One line per step on stderr, so a long run shows where it is."""

    def __init__(self, total: int, quiet: bool = False) -> None:
        self.total = total
        self.done = 0
        self.quiet = quiet
        self.start = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.quiet:
            elapsed = time.perf_counter() - self.start
            print(
                f"[{self.done}/{self.total} {elapsed:6.1f}s] {label}", file=sys.stderr, flush=True
            )
