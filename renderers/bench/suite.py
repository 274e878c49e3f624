"""The benchmark suite: parsing, streaming, scaling, rendering and memory, each measured
against a baseline timed in the same run (the tokenizer's own decode, the official chat
template through ``apply_chat_template``, or a peer library when installed)."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from renderers import Renderer, get_renderer
from renderers.bench import peers
from renderers.bench.measure import Progress, Row, paired_median_seconds, peak_memory_bytes
from renderers.bench.startup import MODES, startup_rows
from renderers.bench.workloads import TOOLS, complete_ids, completions, ten_turn_conversation
from renderers.core.tools import deep_sort


@dataclass
class Config:
    models: list[str]
    lengths: list[int]
    feeds: list[int]
    repeats: int
    memory_tokens: int
    quiet: bool = False
    today: str = field(default_factory=lambda: _dt.date.today().isoformat())
    tokenizers: dict[str, Any] = field(default_factory=dict)
    """Tokenizer objects by renderer name, where not the default model's."""
    startup_repeats: int = 3
    """Fresh processes per start-up measure (each loads its tokenizer: seconds each)."""
    startup_modes: tuple[str, ...] = MODES


def _template_ids(
    renderer: Renderer, messages: list[dict[str, Any]], gen: bool
) -> tuple[list[int], str] | None:
    """The official template's ids and how they were made: ``apply_chat_template(tokenize=
    True)``, or, where transformers cannot render the template (5.23+ drops ``content: None``;
    its immutable sandbox refuses llama.cpp's edited Kimi templates, which a hub cache may
    hold as ``chat_template.jinja``), the same template rendered with jinja2 and tokenized
    by the tokenizer. ``None`` if neither works."""
    tok = renderer.tokenizer
    # Upstream Kimi deep-sorts the keys of the tools before templating.
    tools = deep_sort(TOOLS) if renderer.name.startswith("kimi") else TOOLS
    if renderer.name.startswith("deepseek"):
        messages = _string_arguments(messages)  # the template concatenates them
    try:
        out = tok.apply_chat_template(
            messages, tools=tools, tokenize=True, add_generation_prompt=gen
        )
        ids = out["input_ids"] if hasattr(out, "keys") else out
        return list(ids), "apply_chat_template(tokenize=True)"
    except Exception:
        pass
    try:
        text = _jinja_template(tok.chat_template).render(
            messages=messages,
            tools=tools,
            add_generation_prompt=gen,
            bos_token=tok.bos_token or "",
            eos_token=tok.eos_token or "",
        )
    except Exception:
        return None
    return list(tok.encode(text, add_special_tokens=False)), "template via jinja2 + encode"


def _string_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    import json

    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.dumps(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ]
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


@functools.cache
def _jinja_template(source: str) -> Any:
    import json

    import jinja2.sandbox

    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    env.globals["strftime_now"] = lambda fmt: _dt.datetime.now().strftime(fmt)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def run(config: Config) -> list[Row]:
    rows: list[Row] = []
    steps = len(config.models) * (len(config.lengths) * (2 + len(config.feeds)) + 5)
    progress = Progress(steps, config.quiet)
    for name in config.models:
        options = _bench_options(name, config)
        renderer = get_renderer(name, config.tokenizers.get(name), **options)
        progress.step(f"{name}: start-up in fresh processes")
        rows += startup_rows(
            renderer, options, repeats=config.startup_repeats, modes=config.startup_modes
        )
        decode = renderer.tokenizer.decode
        # nominal length -> (seconds, actual tokens)
        parse_by_length: dict[int, tuple[float, int]] = {}
        stream_by_length: dict[int, tuple[float, int]] = {}
        for n in config.lengths:
            workload = completions(renderer, n)
            complete = workload[0].ids
            progress.step(f"{name}: parse {len(complete)} tokens")
            for completion in workload:
                ids = completion.ids
                expected_text = decode(ids)
                assert expected_text  # the baseline works on these ids
                t_parse, t_decode = paired_median_seconds(
                    [
                        functools.partial(renderer.parse_response, ids),
                        functools.partial(decode, ids),
                    ],
                    repeats=config.repeats,
                )
                result = renderer.parse_response(ids)
                rows.append(
                    Row(
                        name,
                        f"parse_response ({completion.kind})",
                        len(ids),
                        t_parse,
                        "tokenizer.decode",
                        t_decode,
                        {
                            "termination": result.termination.value,
                            "parts": len(result.message.parts),
                        },
                    )
                )
                if completion.kind == "complete":
                    parse_by_length[n] = (t_parse, len(ids))
            progress.step(f"{name}: peers at {len(complete)} tokens")
            for peer_row in peers.parse_rows(renderer, complete, config.repeats):
                rows.append(peer_row)
            for feed in config.feeds:
                progress.step(f"{name}: stream {len(complete)} tokens, {feed}-token feeds")
                t_stream, t_decode = paired_median_seconds(
                    [_streamer(renderer, complete, feed), functools.partial(decode, complete)],
                    repeats=config.repeats,
                )
                rows.append(
                    Row(
                        name,
                        f"stream, {feed}-token feeds",
                        len(complete),
                        t_stream,
                        "tokenizer.decode",
                        t_decode,
                        {"us_per_token": t_stream / len(complete) * 1e6},
                    )
                )
                if feed == 1:
                    stream_by_length[n] = (t_stream, len(complete))
        if len(config.lengths) >= 2:
            small, large = sorted(config.lengths)[-2:]
            for label, by_length in (
                ("stream, 1-token feeds", stream_by_length),
                ("parse_response", parse_by_length),
            ):
                if small in by_length and large in by_length:
                    (t_large, n_large), (t_small, n_small) = by_length[large], by_length[small]
                    token_ratio = n_large / n_small
                    rows.append(
                        Row(
                            name,
                            f"scaling {_k(large)} / {_k(small)} ({label})",
                            n_large,
                            t_large,
                            f"{_k(small)} ({n_small} tokens)",
                            t_small,
                            {
                                "token_ratio": token_ratio,
                                "per_token_cost_ratio": t_large / t_small / token_ratio,
                            },
                        )
                    )
        progress.step(f"{name}: rendering a 10-turn conversation with tools")
        rows += _render_rows(renderer, config)
        progress.step(f"{name}: peak memory at {config.memory_tokens} tokens")
        rows += _memory_rows(renderer, config)
        progress.step(f"{name}: {config.memory_tokens} ids after the stop token")
        rows += _trailing_rows(renderer, config)
        progress.step(f"{name}: done")
    return rows


def _k(tokens: int) -> str:
    return f"{tokens // 1000}k" if tokens >= 1000 and tokens % 1000 == 0 else str(tokens)


def _streamer(renderer: Renderer, ids: list[int], feed: int) -> Callable[[], None]:
    """A function streaming ``ids`` through a new parser in ``feed``-token chunks."""
    chunks = [ids[k : k + feed] for k in range(0, len(ids), feed)]

    def stream() -> None:
        parser = renderer.stream_parser()
        feed_ = parser.feed
        for chunk in chunks:
            feed_(chunk)
        parser.finish()

    return stream


def _bench_options(name: str, config: Config) -> dict[str, Any]:
    """Options under which each format expresses the workload: gpt-oss with today's date
    (the template's clock), DeepSeek-V3 R1-style with its tool-call defects corrected,
    DeepSeek-V3.1 in thinking mode keeping the trained turn's reasoning."""
    if name == "gpt_oss":
        return {"date": config.today}
    if name == "deepseek_v3":
        return {"render_thinking": True, "fix_tool_format": True}
    if name == "deepseek_v3.1":  # thinking mode: the completion starts inside reasoning
        return {"thinking": True, "keep_thinking": True}
    return {}


# Formats whose default rendering cannot express the conversation's reasoning (a caller
# error; their templates drop it): they render it without reasoning, token-identically.
_NO_REASONING = ("kimi_k2", "deepseek_v3", "deepseek_v3.1", "qwen3_instruct_2507", "qwen3_vl")


def _render_rows(renderer: Renderer, config: Config) -> list[Row]:
    """Rendering with default options (plus a fixed date), compared with the template."""
    options: dict[str, Any] = {"date": config.today} if renderer.name == "gpt_oss" else {}
    renderer = get_renderer(renderer.name, renderer.tokenizer, **options)
    renderer.table.fast_encoding  # noqa: B018  (steady state: the lazily built encoder is built)
    messages = ten_turn_conversation(reasoning=renderer.name not in _NO_REASONING)
    prompt_messages = messages[:-1]
    rows = []
    for label, gen, target in (
        ("build_generation_prompt", True, prompt_messages),
        ("build_supervised_example", False, messages),
    ):

        def ours(target: list[dict[str, Any]] = target, gen: bool = gen) -> list[int]:
            if gen:
                return renderer.build_generation_prompt(target, tools=TOOLS)
            ids: list[int] = renderer.build_supervised_example(target, tools=TOOLS).tokens.tolist()
            return ids

        def ours_cold(ours: Any = ours) -> list[int]:
            renderer.table.clear_cache()
            ids: list[int] = ours()
            return ids

        expected = _template_ids(renderer, target, gen)
        ours_ids = ours()
        identical = expected[0] == ours_ids if expected is not None else None
        baseline, t_template = "", None
        fns: list[Callable[[], Any]] = [ours_cold, ours]
        if expected is not None:
            baseline = expected[1]
            fns.append(functools.partial(_template_ids, renderer, target, gen))
        times = paired_median_seconds(fns, repeats=config.repeats)
        if expected is not None:
            t_template = times[2]
        for variant, t_ours in (("cold text cache", times[0]), ("warm", times[1])):
            rows.append(
                Row(
                    renderer.name,
                    f"{label} (10 turns, tools; {variant})",
                    len(ours_ids),
                    t_ours,
                    baseline,
                    t_template,
                    {"identical_tokens": identical},
                )
            )
    rows += peers.render_rows(renderer, messages, config.repeats)
    rows += _template_rows(renderer, messages, config)
    return rows


def _template_rows(renderer: Renderer, messages: list[dict[str, Any]], config: Config) -> list[Row]:
    """The template renderer (the model's own chat template through placeholders) on the
    same conversation, timed in turn with the specialised renderer: the cost of the
    template path. Where the template breaks the untrained-prefix invariant on the last
    turn (gpt-oss drops earlier analysis), the example is built with ``train_on="all"``.
    None where the tokenizer has no chat template (tml-renderers' tokenizers) or is another
    model's stand-in (the Qwen line reads Qwen3-8B's vocabulary: its template is Qwen3's)."""
    source = type(renderer).tokenizer_source
    if not getattr(renderer.tokenizer, "chat_template", None) or (
        source is not None and source not in type(renderer).model_ids
    ):
        return []
    generic = get_renderer(
        renderer.name,
        renderer.tokenizer,
        generic=True,
        sort_tool_keys=renderer.name.startswith("kimi"),
    )
    rows = []
    for label, gen in (("build_generation_prompt", True), ("build_supervised_example", False)):
        target = messages[:-1] if gen else messages
        extra: dict[str, Any] = {}
        train_on = "last_assistant"
        if not gen:
            try:
                generic.build_supervised_example(target, tools=TOOLS)
            except ValueError as exc:
                train_on = "all"
                extra["train_on"] = f"all (last_assistant refused: {str(exc)[:60]}...)"

        def run(
            r: Renderer,
            target: list[dict[str, Any]] = target,
            gen: bool = gen,
            train_on: str = train_on,
        ) -> list[int]:
            if gen:
                return r.build_generation_prompt(target, tools=TOOLS)
            ids: list[int] = r.build_supervised_example(
                target, tools=TOOLS, train_on=train_on
            ).tokens.tolist()
            return ids

        ours = run(generic)
        extra["identical_tokens"] = ours == run(renderer)
        t_generic, t_specialised = paired_median_seconds(
            [functools.partial(run, generic), functools.partial(run, renderer)],
            repeats=config.repeats,
        )
        rows.append(
            Row(
                renderer.name,
                f"template renderer: {label} (10 turns, tools)",
                len(ours),
                t_generic,
                f"{renderer.name} renderer",
                t_specialised,
                extra,
            )
        )
    return rows


def _memory_rows(renderer: Renderer, config: Config) -> list[Row]:
    """Peak memory of parse_response at the configured length and at 10x it: bounded
    memory means the ratio stays near 10 (linear, no quadratic copies)."""
    rows = []
    peaks: list[tuple[int, int]] = []  # (actual tokens, peak bytes)
    for n in (config.memory_tokens, config.memory_tokens * 10):
        ids = complete_ids(renderer, n)
        arr = np.asarray(ids)
        peak = peak_memory_bytes(functools.partial(renderer.parse_response, arr))
        peaks.append((len(ids), peak))
        # The baseline is the decoded text as Python holds it (what ``tokenizer.decode``
        # returns): text with any character beyond U+FFFF takes 4 bytes per character, so
        # the strings a parse must return are near 4x their UTF-8 size alone.
        text = renderer.table.decode(ids)
        rows.append(
            Row(
                renderer.name,
                "peak memory of parse_response (MiB)",
                len(ids),
                peak / 2**20,
                "decoded text, as a str (MiB)",
                sys.getsizeof(text) / 2**20,
                {
                    "bytes_per_token": peak / len(ids),
                    "text_utf8_mib": len(text.encode("utf-8")) / 2**20,
                    "ratio_to_utf8": peak / len(text.encode("utf-8")),
                },
            )
        )
    (n_small, small), (n_large, large) = peaks
    rows.append(
        Row(
            renderer.name,
            "peak memory growth (MiB, 10x tokens)",
            n_large,
            large / 2**20,
            f"{n_small} tokens (MiB)",
            small / 2**20,
            {"token_ratio": n_large / n_small},
        )
    )
    return rows


def _trailing_rows(renderer: Renderer, config: Config) -> list[Row]:
    """A completion that runs on past its stop token (a server that does not stop there),
    as a list of ids (what servers return): the tail is checked and kept, not decoded,
    unless ``trailing_text`` is read. Against the same parse with it read."""
    message = completions(renderer, 1000)[0].ids
    tail = complete_ids(renderer, config.memory_tokens)
    ids = message + tail
    result = renderer.parse_response(ids)
    assert len(result.trailing_ids) == len(tail)  # the message ends at its stop token
    t_unread, t_read = paired_median_seconds(
        [
            functools.partial(renderer.parse_response, ids),
            lambda: renderer.parse_response(ids).trailing_text,
        ],
        repeats=config.repeats,
    )
    return [
        Row(
            renderer.name,
            "parse_response, the ids after the stop not read (1k message + tail)",
            len(ids),
            t_unread,
            "the same, trailing_text read",
            t_read,
            {
                "tail_ids": len(tail),
                "unread_ns_per_id": t_unread / len(ids) * 1e9,
                "read_ns_per_id": t_read / len(ids) * 1e9,
            },
        )
    ]


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    import platform

    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {}
    for module in ("renderers", "tokenizers", "transformers", "numpy"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:
            versions[module] = "?"
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **versions,
    }
