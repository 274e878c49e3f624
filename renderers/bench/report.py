"""Results as a Markdown table, a JSON file and a PNG chart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _fmt_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def markdown(rows: Sequence[Any], machine: dict[str, str], config: Any) -> str:
    lines = [
        "# renderers benchmark",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()),
        "",
        f"Medians of at least {config.repeats} runs after warm-up; ours and its baseline are "
        "timed in turn in every round. Ratio = ours / baseline (below 1 means faster than the "
        "baseline).",
        "",
        "| model | measure | tokens | ours | baseline | baseline time | ratio | notes |",
        "|---|---|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        memory = "MiB" in r.measure
        ours = f"{r.seconds:.1f} MiB" if memory else _fmt_seconds(r.seconds)
        base = ""
        if r.baseline_seconds is not None:
            base = f"{r.baseline_seconds:.1f} MiB" if memory else _fmt_seconds(r.baseline_seconds)
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else ""
        notes = ", ".join(
            f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.extra.items()
        )
        cells = [r.model, r.measure, str(r.tokens), ours, r.baseline, base, ratio, notes]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write(rows: Sequence[Any], machine: dict[str, str], config: Any, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    written = []
    md = output / "results.md"
    md.write_text(markdown(rows, machine, config), encoding="utf-8")
    written.append(md)
    raw = output / "results.json"
    raw.write_text(
        json.dumps({"machine": machine, "rows": [r.to_json() for r in rows]}, indent=2),
        encoding="utf-8",
    )
    written.append(raw)
    chart = _chart(rows, output / "throughput.png")
    if chart is not None:
        written.append(chart)
    return written


def _chart(rows: Sequence[Any], path: Path) -> Path | None:
    """Tokens per second of parse_response, 1-token streaming and tokenizer.decode, per
    model and length (needs matplotlib: ``pip install -e '.[bench]'``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    series: dict[str, dict[str, float]] = {}
    for r in rows:
        key = f"{r.model}\n{r.tokens // 1000}k" if r.tokens >= 1000 else f"{r.model}\n{r.tokens}"
        if r.measure == "parse_response (complete)":
            series.setdefault("parse_response", {})[key] = r.tokens / r.seconds
            series.setdefault("tokenizer.decode", {})[key] = r.tokens / r.baseline_seconds
        elif r.measure == "stream, 1-token feeds":
            series.setdefault("stream (1-token feeds)", {})[key] = r.tokens / r.seconds
    if not series:
        return None
    labels = list(next(iter(series.values())).keys())
    fig, ax = plt.subplots(figsize=(max(8, len(labels) * 0.9), 5))
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series.items()):
        xs = [i + k * width for i in range(len(labels))]
        ax.bar(xs, [values.get(label, 0) for label in labels], width, label=name)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("tokens / second (log)")
    ax.set_title("Parsing throughput by model and completion length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
