"""Start-up rows: in a fresh process per measure, the time and memory from "tokenizer
loaded" to "first ``build_generation_prompt`` returned", against the tokenizer load itself.

Two ways a process gets a renderer are measured: ``get_renderer`` on the loaded tokenizer
(a training or RL process), and unpickling a renderer (what a dataset worker does: the
tokenizer is loaded by name, then the renderer is restored). Imports (``renderers`` with
every renderer module, ``transformers``) come before the clock starts, so the baseline is
the tokenizer load alone.

Run as ``python -m renderers.bench.startup MODE NAME SOURCE OPTIONS_JSON`` (the child):
it prints one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import statistics
import subprocess
import sys
import time
from typing import Any

from renderers.bench.measure import Row
from renderers.core.loading import source_of
from renderers.rendering import Renderer

__all__ = ["MODES", "startup_rows"]

MODES = ("get_renderer", "restore")
"""How the child process gets its renderer: ``get_renderer`` or unpickling one."""

_MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France? Answer in one word."},
]


def _rss_mib() -> float | None:
    """This process's resident memory (Linux), ``None`` where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _child(mode: str, name: str, source: str, options: dict[str, Any]) -> dict[str, Any]:
    import renderers
    from renderers.core.loading import load_tokenizer
    from renderers.registry import renderer_classes

    renderer_classes()  # every renderer module imported, as transformers below

    with contextlib.suppress(ImportError):
        import transformers  # noqa: F401  (imported before the clock, like renderers)
    blob = sys.stdin.buffer.read() if mode == "restore" else b""
    rss0 = _rss_mib()
    t0 = time.perf_counter()
    tokenizer = load_tokenizer(source)
    t1 = time.perf_counter()
    rss1 = _rss_mib()
    if mode == "restore":
        renderer = pickle.loads(blob)  # restored by tokenizer source, as in a worker
    else:
        renderer = renderers.get_renderer(name, tokenizer, **options)
    ids = renderer.build_generation_prompt(_MESSAGES)
    t2 = time.perf_counter()
    rss2 = _rss_mib()
    if renderer.tokenizer is not tokenizer or not ids:
        raise RuntimeError(f"{name}: the renderer does not use the loaded tokenizer")
    out: dict[str, Any] = {"load_seconds": t1 - t0, "ready_seconds": t2 - t1}
    if rss0 is not None and rss1 is not None and rss2 is not None:
        out["load_mib"] = rss1 - rss0
        out["ready_mib"] = rss2 - rss1
    return out


def _measure(mode: str, renderer: Renderer, source: str, options: dict[str, Any]) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "renderers.bench.startup",
        mode,
        renderer.name,
        source,
        json.dumps(options),
    ]
    blob = pickle.dumps(renderer) if mode == "restore" else b""
    done = subprocess.run(command, input=blob, check=True, capture_output=True)
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def startup_rows(
    renderer: Renderer, options: dict[str, Any], *, repeats: int, modes: tuple[str, ...]
) -> list[Row]:
    """Start-up rows of ``renderer`` (made with ``options``): medians of ``repeats`` fresh
    processes per mode, time and memory against the tokenizer load. None for a tokenizer
    that was not loaded by name (a child process could not load it)."""
    loaded = source_of(renderer.tokenizer)
    if loaded is None or loaded[1] is not None:
        return []
    source, name = loaded[0], renderer.name
    rows = []
    for mode in modes:
        runs = [_measure(mode, renderer, source, options) for _ in range(repeats)]

        def median(key: str, runs: list[dict[str, Any]] = runs) -> float | None:
            values = [r[key] for r in runs if key in r]
            return statistics.median(values) if values else None

        what = (
            "get_renderer + first build_generation_prompt"
            if mode == "get_renderer"
            else "unpickle renderer + first build_generation_prompt"
        )
        ready, load = median("ready_seconds"), median("load_seconds")
        assert ready is not None and load is not None
        rows.append(
            Row(
                name,
                f"start-up: {what} (fresh process, s)",
                0,
                ready,
                "tokenizer load (s)",
                load,
                {"processes": repeats},
            )
        )
        ready_mib, load_mib = median("ready_mib"), median("load_mib")
        if ready_mib is not None and load_mib is not None:
            rows.append(
                Row(
                    name,
                    f"start-up memory: {what} (RSS MiB beyond the tokenizer)",
                    0,
                    ready_mib,
                    "tokenizer load (RSS MiB)",
                    load_mib,
                    {"processes": repeats},
                )
            )
    return rows


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
