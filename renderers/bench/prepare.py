"""The ``prepare`` benchmark: tokenizing a dataset for training, ``renderers prepare``
single-process and with worker processes, against ``apply_chat_template(tokenize=True,
return_assistant_tokens_mask=True)`` with a ``{% generation %}``-tagged version of the
official template, on the same generated conversations (tokens and masks checked equal
on every row first).

The corpus is generated from a seed: conversations with a system prompt or not, tools,
reasoning, tool calls and their results, several turns, and long turns.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from renderers import get_renderer
from renderers.bench.workloads import source_text

__all__ = ["generate_corpus", "main", "qwen3_generation_template", "template_example"]

_TOOL_POOL: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_web",
            "description": "Search the web and return the top results.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "max_results": {"type": "integer", "description": "How many results."},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_python",
            "description": "Run Python code in a sandbox and return stdout.",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The program."}},
                "required": ["code"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                },
                "required": ["path"],
            },
        },
    },
]


def generate_corpus(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` realistic conversations ``{"messages", "tools"}`` from ``seed``: tools in
    about half, reasoning, tool calls with results, 1-4 user turns, some long turns."""
    rng = random.Random(seed)
    text = source_text()

    def passage(lo: int, hi: int) -> str:
        size = int(rng.triangular(lo, hi, lo + (hi - lo) // 5))
        start = rng.randrange(0, len(text) - size)
        return text[start : start + size].strip() or "ok"

    rows = []
    for _ in range(n):
        tools = rng.sample(_TOOL_POOL, rng.randint(1, 3)) if rng.random() < 0.5 else None
        messages: list[dict[str, Any]] = []
        if rng.random() < 0.6:
            messages.append({"role": "system", "content": passage(40, 600)})
        for turn in range(rng.randint(1, 4)):
            messages.append({"role": "user", "content": passage(20, 1500)})
            if tools and rng.random() < 0.6:
                calls = [
                    {
                        "type": "function",
                        "function": {
                            "name": tool["function"]["name"],
                            "arguments": json.dumps({"query": passage(5, 60), "n": k}),
                        },
                    }
                    for k, tool in enumerate(rng.sample(tools, rng.randint(1, len(tools))))
                ]
                messages.append(
                    {
                        "role": "assistant",
                        "content": "",
                        "reasoning_content": passage(50, 800),
                        "tool_calls": calls,
                    }
                )
                for _call in calls:
                    messages.append({"role": "tool", "content": passage(30, 2000)})
            long_turn = rng.random() < 0.1
            answer: dict[str, Any] = {
                "role": "assistant",
                "content": passage(2000, 12000) if long_turn else passage(40, 2500),
            }
            if rng.random() < 0.7:
                answer["reasoning_content"] = passage(50, 1500)
            messages.append(answer)
            del turn
        rows.append({"messages": messages, "tools": tools})
    return rows


# -- the baseline: the official template with generation tags -------------------------------


def qwen3_generation_template(template: str) -> str:
    """Qwen3's official template with ``{% generation %}`` around what the model samples
    for each assistant message (everything after ``<|im_start|>assistant\\n`` up to and
    including ``<|im_end|>``), for ``return_assistant_tokens_mask=True``."""
    header = "'<|im_start|>' + message.role + '\\n'"
    replacements = [
        (
            "{{- " + header[:-1] + "<think>\\n' + reasoning_content.strip('\\n') + "
            "'\\n</think>\\n\\n' + content.lstrip('\\n') }}",
            "{{- " + header + " }}{%- generation %}{{- '<think>\\n' + "
            "reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
            "{%- endgeneration %}",
        ),
        (
            "{{- " + header + " + content }}",
            "{{- " + header + " }}{%- generation %}{{- content }}{%- endgeneration %}",
        ),
        ("{%- if message.tool_calls %}", "{%- generation %}{%- if message.tool_calls %}"),
        (
            "        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n"
            '    {%- elif message.role == "tool" %}',
            "        {%- endif %}{%- endgeneration %}\n"
            "        {%- generation %}{{- '<|im_end|>' }}{%- endgeneration %}{{- '\\n' }}\n"
            '    {%- elif message.role == "tool" %}',
        ),
    ]
    for old, new in replacements:
        if old not in template:
            raise ValueError(f"the Qwen3 template changed: {old!r} not found")
        template = template.replace(old, new)
    return template


GENERATION_TEMPLATES: dict[str, Callable[[str], str]] = {"qwen3": qwen3_generation_template}
"""Generation-tagged versions of official templates, by renderer name."""


def template_example(
    tokenizer: Any, row: dict[str, Any], template: str
) -> tuple[list[int], list[int]]:
    """Token ids and assistant mask from ``apply_chat_template`` with ``template``."""
    out = tokenizer.apply_chat_template(
        row["messages"],
        tools=row.get("tools"),
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    return list(out["input_ids"]), list(out["assistant_masks"])


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    conversations: int
    tokens: int
    seconds: float
    peak_rss_mib: float | None

    @property
    def per_second(self) -> tuple[float, float]:
        return self.conversations / self.seconds, self.tokens / self.seconds


def _check_equal(model: str, rows: list[dict[str, Any]], template: str) -> int:
    """Tokens and masks of ours (all_assistant) and the tagged template agree on every row;
    returns the total token count."""
    renderer = get_renderer(model)
    total = 0
    for k, row in enumerate(rows):
        ids, mask = template_example(renderer.tokenizer, row, template)
        # The template drops history reasoning; training every assistant turn, ours drops it
        # only when told to (the library's one reasoning rule).
        example = renderer.build_supervised_example(
            row["messages"], row["tools"], train_on="all_assistant", reasoning="drop"
        )
        if example.tokens.tolist() != ids or (example.weights > 0).astype(int).tolist() != mask:
            raise AssertionError(f"row {k}: ours and the generation-tagged template differ")
        total += len(ids)
    return total


def _time_template(model: str, rows: list[dict[str, Any]], template: str) -> Result:
    tokenizer = get_renderer(model).tokenizer
    started = time.perf_counter()
    tokens = 0
    for row in rows:
        ids, _ = template_example(tokenizer, row, template)
        tokens += len(ids)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Result("apply_chat_template (1 process)", len(rows), tokens, seconds, peak)


def _time_prepare(model: str, data: Path, num_proc: int, workdir: Path) -> Result:
    """``renderers prepare`` in a fresh process (its own time for the loop, excluding
    start-up; peak RSS of its largest process)."""
    stats = workdir / f"stats-{num_proc}.json"
    command = [
        sys.executable,
        "-m",
        "renderers.cli",
        "prepare",
        "--model",
        model,
        str(data),
        "-o",
        str(workdir / f"out-{num_proc}.parquet"),
        "--train-on",
        "all_assistant",
        "--option",
        "reasoning=drop",
        "--num-proc",
        str(num_proc),
        "--stats",
        str(stats),
        "--quiet",
    ]
    subprocess.run(command, check=True)
    result = json.loads(stats.read_text())
    return Result(
        f"renderers prepare --num-proc {num_proc}",
        result["rows_written"],
        result["tokens"],
        result["seconds"],
        result["peak_worker_rss_mib"],
    )


def _median_ratio(rounds: list[list[Result]], runner: int, baseline: int) -> float:
    """The median over rounds of ``runner``'s throughput over ``baseline``'s in that round."""
    ratios = sorted(
        measured[runner].per_second[0] / measured[baseline].per_second[0] for measured in rounds
    )
    middle = len(ratios) // 2
    return ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2


def _median(runs: list[Result]) -> Result:
    """The run of median time, with the largest peak memory of all runs."""
    ordered = sorted(runs, key=lambda r: r.seconds)
    middle = ordered[len(ordered) // 2]
    peaks = [r.peak_rss_mib for r in runs if r.peak_rss_mib is not None]
    return Result(
        middle.name, middle.conversations, middle.tokens, middle.seconds, max(peaks, default=None)
    )


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="renderers bench --suite prepare", allow_abbrev=False)
    parser.add_argument(
        "--conversations", type=int, default=4000, help="generated conversations (default 4000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated corpus")
    parser.add_argument(
        "--models",
        default="qwen3",
        help=f"comma-separated renderer names with a generation-tagged template "
        f"({', '.join(GENERATION_TEMPLATES)})",
    )
    parser.add_argument(
        "--num-proc", type=int, default=2, help="processes of the parallel run (default 2)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds of template, prepare and prepare --num-proc in turn; each ratio is the "
        "median of the rounds' own ratios (default 5)",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        default=Path("bench-results"),
        help="directory for results (default: ./bench-results)",
    )
    parser.add_argument("--quick", action="store_true", help="100 conversations (a smoke test)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    n = 100 if args.quick else args.conversations
    rows = generate_corpus(n, args.seed)
    lines = [
        "| model | runner | conversations/s | tokens/s | vs template | peak RSS/worker (MiB) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    report: list[dict[str, Any]] = []
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        renderer = get_renderer(model)
        template = GENERATION_TEMPLATES[renderer.name](renderer.tokenizer.chat_template)
        tokens = _check_equal(model, rows, template)
        if not args.quiet:
            print(
                f"{model}: {n} conversations, {tokens:,} tokens, equal on every row",
                file=sys.stderr,
            )
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            data = workdir / "corpus.jsonl"
            with data.open("w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
            # Each round times every runner in turn (the two prepare runs in alternating
            # order), so a slow spell of a shared machine hits all of them; every ratio is
            # the median of the rounds' own ratios, rates are medians over rounds.
            counts = sorted({1, args.num_proc})
            rounds: list[list[Result]] = []
            for k in range(1 if args.quick else args.rounds):
                measured = [_time_template(model, rows, template)]
                order = counts if k % 2 == 0 else counts[::-1]
                timed = {c: _time_prepare(model, data, c, workdir) for c in order}
                measured += [timed[c] for c in counts]
                rounds.append(measured)
            results = [_median(list(runs)) for runs in zip(*rounds, strict=True)]
        for i, r in enumerate(results):
            conv_s, tok_s = r.per_second
            vs_template = _median_ratio(rounds, i, 0)
            peak = f"{r.peak_rss_mib:,.0f}" if r.peak_rss_mib is not None else ""
            lines.append(
                f"| {model} | {r.name} | {conv_s:,.1f} | {tok_s:,.0f} | "
                f"{vs_template:.2f}x | {peak} |"
            )
            report.append(
                {
                    "model": model,
                    **r.__dict__,
                    "conversations_per_second": conv_s,
                    "vs_template": vs_template,
                    "rounds_seconds": [measured[i].seconds for measured in rounds],
                }
            )
        if len(results) > 2:
            scaling = _median_ratio(rounds, 2, 1)
            lines.append(f"| {model} | --num-proc {args.num_proc} vs 1 | | | {scaling:.2f}x | |")
            report.append({"model": model, "name": "scaling", "ratio": scaling})
    args.output.mkdir(parents=True, exist_ok=True)
    table = "\n".join(lines) + "\n"
    (args.output / "prepare.md").write_text(table, encoding="utf-8")
    (args.output / "prepare.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(table if not args.quiet else args.output / "prepare.md")
    return 0
