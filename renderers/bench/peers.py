"""Peer libraries, timed on the same inputs when they are installed (never needed by tests).

Peers (each optional: a peer that cannot be imported adds no rows and no error)::

    pip install openai-harmony                     # gpt-oss parse (also in the test extra)
    pip install tml-renderers torch                # it imports torch without declaring it
    pip install --no-deps tinker-cookbook==0.6.1   # see below
    pip install tinker pillow                      # what its renderers import

(``torch`` CPU-only: ``pip install torch --index-url https://download.pytorch.org/whl/cpu``.)
``tinker-cookbook`` 0.6.1 declares ``tml-renderers>=0.4.1``, which is not published (0.2.1
is the latest); only its ``kimi_k31_pro`` and ``tml_v0`` renderers import ``tml_renderers``,
so the renderers benchmarked here work when it is installed without dependencies.
0.5.x pins ``transformers<=5.5.4``.

Which peer renderer stands for which of ours (with our options for the same format):

- ``qwen3``: tml ``Qwen3()``; cookbook ``qwen3``.
- ``qwen3_instruct_2507``, ``qwen3_vl`` (text): tml ``Qwen3.instruct()``,
  ``Qwen3.vision_instruct()``; ``qwen2.5`` and ``qwen3_thinking_2507``: none.
- ``deepseek_v3`` (ours with ``fix_tool_format=True``: the peer writes the format the
  template means, not its defects): tml ``DeepSeekV3()``; the cookbook has no V3 renderer
  (its ``deepseekv3`` is the V3.1 format).
- ``deepseek_v3.1``: tml ``DeepSeekV31()``, cookbook ``deepseekv3`` (conversation without
  reasoning: the template drops it, tml rejects it); and with ``thinking=True,
  keep_thinking=True``: tml ``DeepSeekV31.thinking()``, cookbook ``deepseekv3_thinking``.
- ``kimi_k2`` (K2-Instruct): none. Both peers' ``KimiK2`` write K2-*Thinking*'s
  ``<think></think>``, reserved tokens in K2-Instruct's vocabulary.
- ``kimi_k2_thinking``: tml ``KimiK2()``; cookbook ``kimi_k2``.
- ``gpt_oss``: tml ``GptOss(current_date=...)``; cookbook ``GptOssRenderer(tokenizer,
  use_system_prompt=True, reasoning_effort="medium", current_date=...)``.
- ``qwen3.5``, ``qwen3.8``, ``deepseek_v4``, ``deepseek_v4.1`` (default options),
  ``kimi_k2.5`` (``tool_declaration="json"``, as the peer declares tools): tml
  ``Qwen35()``, ``Qwen38()``, ``DeepSeekV4()``, ``DeepSeekV41()``, ``KimiK25()``, the
  oracle these formats are verified against (their tokenizers: ``--tokenizer
  NAME=tml_renderers.tokenizers:...``).
- ``kimi_k2.6`` (``tool_declaration="json"``): tml ``KimiK25()`` (K2.6 is K2.5's format
  and vocabulary); ``deepseek_r1``: tml ``DeepSeekR1()``, without tool declarations (R1's
  template ignores ``tools``). tml keeps the reasoning of history call turns that R1's
  template drops, so the rendering rows show where they differ and are not timed.
- ``nemotron3`` and ``nemotron3_super`` (default options: Super's ``low_effort`` off is
  Nano's format), ``nemotron3_ultra``: tml ``Nemotron3()``, ``Nemotron3.ultra()``;
  ``glm5.2``: tml ``Glm52()``; ``glm5.3``, ``glm5.3_flash`` (default options keep the
  history's reasoning): tml ``Glm53.preserve_thinking_history()``,
  ``Glm53Flash.preserve_thinking_history()``. Their tokenizers are tml's
  (``Nemotron3Tokenizer``, ``GlmTokenizer``), the renderers' ``tokenizer_source``, which
  the benchmark loads as ``get_renderer`` does.

A new pair is one entry of ``_MATCHES`` (tml renderers are named ``Class()`` or
``Class.constructor()`` of ``tml_renderers.renderers``, cookbook ones by their
``get_renderer`` name). Nothing is timed before the outputs agree; a disagreement is a row
that says where.

- **Parse**: the suite's complete completion goes through our ``parse_response`` and the
  peer's parser (``parser.parse_tokens`` of the parser ``render_for_completion`` returns
  for the workload's prompt; cookbook ``parse_response``). Both results are normalised to a
  list of items: reasoning and text (adjacent pieces of the same kind concatenated, then
  stripped of surrounding whitespace, empty ones dropped: peers keep the newlines the
  formats put around tool calls as text, we strip them as separators) and tool calls
  ``(name, arguments as decoded JSON, in key order)`` (tml-renderers splits arguments
  into JSON-encoded values per key, the cookbook keeps the raw text). The cookbook's
  message keeps tool calls apart from its content, so for it the calls are compared after
  the content on both sides (their position among the text is not compared). Where the
  completion disagrees or the peer fails, the comparison is repeated on a completion of the
  same length in the order every format writes (reasoning, text, tool calls): GLM-5's,
  whose turn ends at its calls, where tml reads the workload's later ``<think>`` as text.
- **Render**: the suite's 10-turn conversation with tools (the same per-format adaptation)
  is converted to the peer's message types once, outside the timing, and rendered with
  ``render_for_completion`` / ``render_for_sft`` (cookbook ``build_generation_prompt`` /
  ``build_supervised_example``), timed without flattening the peer's span objects to ids:
  both choices favour the peer. Token ids must be identical, but for the peer ending a
  supervised example at the last stop token where the template writes untrained tokens
  after it (Qwen3's final ``\\n``) and the differences our modules document: the input
  avoids those it can, on both sides (Nemotron-3's system and user text without
  surrounding whitespace, which tml trims; GLM-5's tool schemas with ``properties``
  sorted, as tml sorts them); the others are undone on the peer's ids before they are
  compared, and the row says so (tml's Nemotron-3 writes no newline between ``</think>``
  and ``<tool_call>``; GLM-5's last supervised token is tml's ``<|endoftext|>`` where ours
  is the role token the model samples next, ``<|user|>`` here). For the SFT row every
  assistant message but the last gets loss weight 0 on the peer side (tml-renderers
  otherwise returns one example per assistant turn), matching our default
  ``train_on="last_assistant"``; whether the loss weights agree is shown but does not gate
  the timing. Our time is with a cold text cache (warm in the notes).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from renderers import (
    Message,
    Renderer,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    get_renderer,
)
from renderers.bench.measure import median_seconds, paired_median_seconds
from renderers.bench.workloads import TOOLS, assistant_message, complete_ids, sized_ids

TML = "tml-renderers"
COOKBOOK = "tinker-cookbook"

# The prompt the workload's completions are sampled after (benchmarks.workloads).
_PROMPT: list[dict[str, Any]] = [{"role": "user", "content": "Investigate the module and report."}]

Item = tuple[Any, ...]


# --------------------------------------------------------------------------- rows


def parse_rows(renderer: Renderer, ids: list[int], repeats: int) -> list[Any]:
    """Rows comparing our ``parse_response`` with every installed peer on ``ids`` (the
    suite's complete completion for ``renderer``)."""
    from renderers.bench.measure import Row

    rows: list[Row] = []
    if renderer.name == "gpt_oss":
        row = _openai_harmony(renderer, ids, repeats)
        if row is not None:
            rows.append(row)
    for match in _matches(renderer.name):
        adapter = _adapter(match.library)
        if adapter is None:
            continue
        ours = _ours(renderer, match)
        own_ids = ours.options == renderer.options
        completion = ids if own_ids else _completion(ours, len(ids), canonical=False)
        row = _parse_row(ours, match, adapter, completion, repeats, "")
        rows.append(row)
        if not row.extra.get("outputs_agree"):
            canonical = _completion(ours, len(ids), canonical=True)
            rows.append(
                _parse_row(
                    ours,
                    match,
                    adapter,
                    canonical,
                    repeats,
                    "canonical order: reasoning, text, calls",
                )
            )
    return rows


def render_rows(renderer: Renderer, messages: list[dict[str, Any]], repeats: int) -> list[Any]:
    """Rows comparing ``build_generation_prompt`` / ``build_supervised_example`` on the
    suite's 10-turn conversation (``messages``, tools ``TOOLS``) with every installed peer."""
    rows: list[Any] = []
    for match in _matches(renderer.name):
        adapter = _adapter(match.library)
        if adapter is None:
            continue
        ours = _ours(renderer, match)
        convo = messages if match.reasoning else _without_reasoning(messages)
        tools = TOOLS if match.tools else None
        if match.adapted is not None:
            convo, tools = match.adapted((convo, tools))
        rows.append(_prompt_row(ours, match, adapter, convo[:-1], tools, repeats))
        rows.append(_sft_row(ours, match, adapter, convo, tools, repeats))
    return rows


def _parse_row(
    ours: Renderer,
    match: _Match,
    adapter: _Adapter,
    ids: list[int],
    repeats: int,
    note: str,
) -> Any:
    from renderers.bench.measure import Row

    measure = f"parse_response vs {match.library} {match.peer}" + _suffix(match.variant, note)
    extra: dict[str, Any] = {}
    try:
        parse = adapter.parser(ours, match, _PROMPT, TOOLS if match.tools else None)
        theirs = adapter.normalise(parse(ids))
    except Exception as exc:  # the peer rejects this completion
        parse, theirs = None, None
        extra["peer_error"] = _cell(_short(f"{type(exc).__name__}: {exc}"))
    mine = _normalise_ours(ours.parse_response(ids).message.parts, adapter.calls_apart)
    agree = theirs is not None and mine == theirs
    extra = {"outputs_agree": agree, **extra}
    if theirs is not None and not agree:
        extra["first_difference"] = _cell(_first_item_difference(mine, theirs))
    t_ours, t_peer = _timed(
        functools.partial(ours.parse_response, ids),
        functools.partial(parse, ids) if agree and parse is not None else None,
        repeats,
    )
    return Row(
        ours.name,
        measure,
        len(ids),
        t_ours,
        f"{adapter.label} {adapter.parse_call}" if agree else "",
        t_peer,
        extra,
    )


def _prompt_row(
    ours: Renderer,
    match: _Match,
    adapter: _Adapter,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    repeats: int,
) -> Any:
    def mine() -> list[int]:
        return ours.build_generation_prompt(messages, tools=tools)

    ids = mine()
    peer: Callable[[], Any] | None = None
    try:
        peer = adapter.prompt(ours, match, messages, tools)
        theirs, _, undone = _undone(ours, match, adapter.prompt_ids(peer()), [])
        agree, note = _compare_ids(ours, match, ids, None, theirs)
        note += undone
    except Exception as exc:
        agree, note = False, _cell(_short(f"peer error {type(exc).__name__}: {exc}"))
    label = "build_generation_prompt"
    return _render_row(ours, match, adapter, label, mine, len(ids), peer, agree, note, {}, repeats)


def _sft_row(
    ours: Renderer,
    match: _Match,
    adapter: _Adapter,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    repeats: int,
) -> Any:
    def mine() -> Any:
        return ours.build_supervised_example(messages, tools=tools)

    example = mine()
    ids: list[int] = example.tokens.tolist()
    weights: list[float] = example.weights.tolist()
    peer: Callable[[], Any] | None = None
    extra: dict[str, Any] = {}
    try:
        peer = adapter.sft(ours, match, messages, tools)
        theirs, their_weights, examples = adapter.sft_ids_weights(peer())
        theirs, their_weights, undone = _undone(ours, match, theirs, their_weights)
        agree, note = _compare_ids(ours, match, ids, weights, theirs)
        note += undone
        if agree:
            n = len(theirs)
            extra["weights_agree"] = [float(w) for w in their_weights[:n]] == weights[:n]
        if examples != 1:
            extra["peer_examples"] = examples
    except Exception as exc:
        agree, note = False, _cell(_short(f"peer error {type(exc).__name__}: {exc}"))
    label = "build_supervised_example"
    return _render_row(
        ours, match, adapter, label, mine, len(ids), peer, agree, note, extra, repeats
    )


def _render_row(
    ours: Renderer,
    match: _Match,
    adapter: _Adapter,
    label: str,
    mine: Callable[[], Any],
    tokens: int,
    peer: Callable[[], Any] | None,
    agree: bool,
    note: str,
    extra: dict[str, Any],
    repeats: int,
) -> Any:
    from renderers.bench.measure import Row

    def mine_cold() -> Any:
        ours.table.clear_cache()
        return mine()

    t_warm = median_seconds(mine, repeats=repeats)
    t_cold, t_peer = _timed(mine_cold, peer if agree else None, repeats)
    call = adapter.prompt_call if label == "build_generation_prompt" else adapter.sft_call
    return Row(
        ours.name,
        f"{label} vs {match.library} {match.peer}" + _suffix(match.variant, "10 turns, tools"),
        tokens,
        t_cold,
        f"{adapter.label} {call}" if agree else "",
        t_peer,
        {"tokens_agree": agree, "comparison": note, **extra, "ours_warm_us": t_warm * 1e6},
    )


# --------------------------------------------------------------------------- matching


Workload = tuple[list[dict[str, Any]], list[dict[str, Any]] | None]
"""A conversation and its tools."""
Undo = Callable[[Renderer, list[int], list[float]], tuple[list[int], list[float]]]
"""A peer's ids and loss weights (empty for a prompt) with a documented difference undone."""


@dataclasses.dataclass(frozen=True)
class _Match:
    """A peer renderer that writes the same format as one of ours."""

    library: str
    peer: str
    """How the peer renderer is made (shown in the table); the adapter builds it: tml
    ``Class()`` or ``Class.constructor()``, the cookbook's renderer name."""
    ours: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Our options for the same format (on top of the suite's)."""
    variant: str = ""
    tools: bool = True
    """False: the format has no tool declarations (the DeepSeek templates ignore ``tools``)."""
    reasoning: bool = True
    """False: reasoning is removed from the conversation (the template drops it anyway and
    tml-renderers' non-thinking DeepSeek-V3.1 rejects it)."""
    adapted: Callable[[Workload], Workload] | None = None
    """The rendering workload as both sides get it, where the peer differs from the format
    by a documented difference that an input can avoid (:func:`_sorted_properties`,
    :func:`_trimmed`)."""
    undone: Undo | None = None
    """The peer's rendered ids and loss weights (if any) with a documented difference that
    no input avoids undone (:func:`_newline_before_calls`), before they are compared."""
    peer_end: str = ""
    """The token the peer ends a supervised example with where the format writes another
    (documented; the rest must be identical): GLM-5's ``<|endoftext|>``."""


def _sorted_properties(workload: Workload) -> Workload:
    """The tools with each schema's ``properties`` in key order: tml-renderers sorts them
    for GLM-5, which writes them in the given order (renderers/glm5.py)."""
    messages, tools = workload
    out = []
    for tool in tools or []:
        parameters = dict(tool["function"].get("parameters", {}))
        if "properties" in parameters:
            parameters["properties"] = dict(sorted(parameters["properties"].items()))
        out.append({**tool, "function": {**tool["function"], "parameters": parameters}})
    return messages, out if tools is not None else None


def _trimmed(workload: Workload) -> Workload:
    """System and user text without surrounding whitespace: tml-renderers trims it for
    Nemotron-3, whose templates write it as given (renderers/nemotron3.py)."""
    messages, tools = workload
    out = [
        {**m, "content": m["content"].strip()}
        if m["role"] in ("system", "user") and isinstance(m.get("content"), str)
        else m
        for m in messages
    ]
    return out, tools


def _newline_before_calls(
    renderer: Renderer, ids: list[int], weights: list[float]
) -> tuple[list[int], list[float]]:
    """``ids`` with a newline between ``</think>`` and ``<tool_call>`` (weighted as the
    call), where tml-renderers writes none for Nemotron-3 and the templates write one
    (renderers/nemotron3.py)."""
    think_end, call = (renderer.table.control_id(t) for t in ("</think>", "<tool_call>"))
    newline = renderer.table.encode("\n")
    out: list[int] = []
    out_weights: list[float] = []
    for k, token in enumerate(ids):
        if token == call and k and ids[k - 1] == think_end:
            out += newline
            out_weights += [weights[k]] * len(newline) if weights else []
        out.append(token)
        out_weights += [weights[k]] if weights else []
    return out, out_weights


_THINKING_V31 = {"thinking": True, "keep_thinking": True}
_NEMOTRON3: dict[str, Any] = {"adapted": _trimmed, "undone": _newline_before_calls}
_GLM5: dict[str, Any] = {"adapted": _sorted_properties, "peer_end": "<|endoftext|>"}

_MATCHES: dict[str, list[_Match]] = {
    "qwen3": [_Match(TML, "Qwen3()"), _Match(COOKBOOK, "qwen3")],
    "deepseek_v3": [
        _Match(TML, "DeepSeekV3()", {"fix_tool_format": True}, "fix_tool_format", tools=False)
    ],
    "deepseek_v3.1": [
        _Match(TML, "DeepSeekV31()", tools=False, reasoning=False),
        _Match(TML, "DeepSeekV31.thinking()", _THINKING_V31, "thinking", tools=False),
        _Match(COOKBOOK, "deepseekv3", tools=False, reasoning=False),
        _Match(COOKBOOK, "deepseekv3_thinking", _THINKING_V31, "thinking", tools=False),
    ],
    "kimi_k2_thinking": [_Match(TML, "KimiK2()"), _Match(COOKBOOK, "kimi_k2")],
    "qwen3_instruct_2507": [_Match(TML, "Qwen3.instruct()", reasoning=False)],
    "qwen3_vl": [_Match(TML, "Qwen3.vision_instruct()", reasoning=False)],
    "qwen3.5": [_Match(TML, "Qwen35()")],
    "qwen3.8": [_Match(TML, "Qwen38()")],
    "deepseek_v4": [_Match(TML, "DeepSeekV4()")],
    "deepseek_v4.1": [_Match(TML, "DeepSeekV41()")],
    "kimi_k2.5": [_Match(TML, "KimiK25()", {"tool_declaration": "json"}, "tool_declaration=json")],
    "kimi_k2.6": [_Match(TML, "KimiK25()", {"tool_declaration": "json"}, "tool_declaration=json")],
    "deepseek_r1": [_Match(TML, "DeepSeekR1()", tools=False)],
    "gpt_oss": [_Match(TML, "GptOss(current_date=…)"), _Match(COOKBOOK, "gpt_oss (medium)")],
    "nemotron3": [_Match(TML, "Nemotron3()", **_NEMOTRON3)],
    "nemotron3_super": [_Match(TML, "Nemotron3()", **_NEMOTRON3)],
    "nemotron3_ultra": [_Match(TML, "Nemotron3.ultra()", **_NEMOTRON3)],
    "glm5.2": [_Match(TML, "Glm52()", **_GLM5)],
    "glm5.3": [_Match(TML, "Glm53.preserve_thinking_history()", **_GLM5)],
    "glm5.3_flash": [_Match(TML, "Glm53Flash.preserve_thinking_history()", **_GLM5)],
}


def _matches(name: str) -> list[_Match]:
    return _MATCHES.get(name, [])


def _ours(renderer: Renderer, match: _Match) -> Renderer:
    """Our renderer with the match's options on top of ``renderer``'s."""
    if not match.ours:
        return renderer
    options = dataclasses.replace(renderer.options, **match.ours)
    return get_renderer(renderer.name, renderer.tokenizer, **dataclasses.asdict(options))


def _suffix(*notes: str) -> str:
    notes = tuple(n for n in notes if n)
    return f" ({'; '.join(notes)})" if notes else ""


# --------------------------------------------------------------------------- workloads


def _completion(renderer: Renderer, n_tokens: int, *, canonical: bool) -> list[int]:
    """A complete completion of about ``n_tokens`` for ``renderer``: the workload's message
    (``canonical=False``) or its parts regrouped as reasoning, text, tool calls."""
    if not canonical:
        return complete_ids(renderer, n_tokens)
    return sized_ids(
        renderer, n_tokens, lambda target: _canonical(assistant_message(renderer, target))
    )


def _canonical(message: Message) -> Message:
    parts = message.parts
    thinking = "\n".join(p.text for p in parts if isinstance(p, ThinkingPart))
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    calls = [p for p in parts if isinstance(p, (ToolCallPart, UnparsedToolCallPart))]
    out: list[Any] = [ThinkingPart(thinking)] if thinking else []
    out += [TextPart(text)] if text else []
    return Message("assistant", [*out, *calls])


def _without_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _last_assistant(messages: Sequence[Mapping[str, Any]]) -> int:
    return max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)


# --------------------------------------------------------------------------- normalising


def _decoded(arguments: str) -> Any:
    try:
        value = json.loads(arguments)
    except ValueError:
        return ("raw", arguments)
    return tuple(value.items()) if isinstance(value, dict) else value


def _normalised(items: list[Item], calls_apart: bool) -> list[Item]:
    """Merge adjacent reasoning/text of the same kind, strip them, drop empty ones (and
    with ``calls_apart`` move tool calls after the content, keeping their order)."""
    if calls_apart:
        items = [i for i in items if i[0] != "call"] + [i for i in items if i[0] == "call"]
    merged: list[Item] = []
    for item in items:
        if merged and item[0] in ("text", "thinking") and merged[-1][0] == item[0]:
            merged[-1] = (item[0], merged[-1][1] + item[1])
        else:
            merged.append(item)
    out: list[Item] = []
    for item in merged:
        if item[0] in ("text", "thinking"):
            text = item[1].strip()
            if text:
                out.append((item[0], text))
        else:
            out.append(item)
    return out


def _normalise_ours(parts: Sequence[Any], calls_apart: bool) -> list[Item]:
    items: list[Item] = []
    for p in parts:
        if isinstance(p, ThinkingPart):
            items.append(("thinking", p.text))
        elif isinstance(p, TextPart):
            items.append(("text", p.text))
        elif isinstance(p, ToolCallPart):
            items.append(("call", p.name, _decoded(p.arguments)))
        else:
            items.append(("unparsed", getattr(p, "raw", repr(p))))
    return _normalised(items, calls_apart)


def _first_item_difference(ours: list[Item], theirs: list[Item]) -> str:
    for k in range(max(len(ours), len(theirs))):
        a = ours[k] if k < len(ours) else None
        b = theirs[k] if k < len(theirs) else None
        if a != b:
            if a is not None and b is not None and a[0] == b[0] and a[0] in ("text", "thinking"):
                x, y = a[1], b[1]
                c = next(
                    (i for i in range(min(len(x), len(y))) if x[i] != y[i]), min(len(x), len(y))
                )
                return (
                    f"item {k} ({a[0]}, {len(x)} chars ours, {len(y)} peer) differs at char {c}: "
                    f"ours {x[max(0, c - 16) : c + 16]!r}, peer {y[max(0, c - 16) : c + 16]!r}"
                )
            return f"item {k}: ours {_describe(a)}, peer {_describe(b)}"
    return "none"


def _describe(item: Item | None) -> str:
    if item is None:
        return "nothing"
    if item[0] in ("text", "thinking"):
        text = item[1]
        return f"{item[0]} {text[:24]!r}…{text[-24:]!r} ({len(text)} chars)"
    return _short(repr(item), 80)


def _undone(
    renderer: Renderer, match: _Match, ids: list[int], weights: list[float]
) -> tuple[list[int], list[float], str]:
    """The peer's ids and weights with the match's documented difference undone, and a
    note saying so (empty when nothing changed)."""
    if match.undone is None:
        return ids, weights, ""
    fixed, fixed_weights = match.undone(renderer, ids, weights)
    if fixed == ids:
        return ids, weights, ""
    return fixed, fixed_weights, f" (once the peer's documented {match.undone.__name__} is undone)"


def _compare_ids(
    renderer: Renderer,
    match: _Match,
    ours: list[int],
    weights: list[float] | None,
    theirs: list[int],
) -> tuple[bool, str]:
    """Whether the peer's ids (with the match's documented differences undone by
    :func:`_undone`) agree with ours, and how (or where they first differ)."""
    if ours == theirs:
        return True, "identical"
    n = len(theirs)
    if weights is not None and n < len(ours) and ours[:n] == theirs and not any(weights[n:]):
        tail = renderer.table.decode(ours[n:])
        return True, f"identical; the peer omits the untrained trailing {tail!r}"
    if (
        weights is not None
        and match.peer_end
        and n == len(ours)
        and ours[:-1] == theirs[:-1]
        and renderer.table.decode(theirs[-1:]) == match.peer_end
    ):
        end = renderer.table.decode(ours[-1:])
        return True, f"identical but the last token: ours {end!r}, the peer {match.peer_end!r}"
    k = next((i for i in range(min(len(ours), n)) if ours[i] != theirs[i]), min(len(ours), n))

    def text(ids: list[int]) -> str:
        decoded = renderer.table.decode(ids)
        return repr(decoded if len(decoded) <= 40 else decoded[:39] + "…")

    return False, _cell(
        f"differ at token {k} ({len(ours)} ours, {n} peer): after {text(ours[max(0, k - 4) : k])} "
        f"ours {text(ours[k : k + 8])}, peer {text(theirs[k : k + 8])}"
    )


def _short(text: str, limit: int = 100) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(text: str) -> str:
    """``text`` made safe for a Markdown table cell."""
    return text.replace("|", "\\|")


# --------------------------------------------------------------------------- adapters


class _Adapter:
    """What the rows need from a peer library."""

    label = ""
    calls_apart = False
    parse_call = ""
    prompt_call = ""
    sft_call = ""

    def parser(
        self, ours: Renderer, match: _Match, prompt: list[dict[str, Any]], tools: Any
    ) -> Callable[[list[int]], Any]:
        raise NotImplementedError

    def normalise(self, parsed: Any) -> list[Item]:
        raise NotImplementedError

    def prompt(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        raise NotImplementedError

    def prompt_ids(self, rendered: Any) -> list[int]:
        raise NotImplementedError

    def sft(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        raise NotImplementedError

    def sft_ids_weights(self, rendered: Any) -> tuple[list[int], list[float], int]:
        raise NotImplementedError


class _Tml(_Adapter):
    """tml-renderers: native renderers with their own message types (``chat.Message``, one
    content item each; ``InvokeTool`` with per-key JSON-encoded ``ToolArg`` values)."""

    parse_call = "parser.parse_tokens"
    prompt_call = "render_for_completion"
    sft_call = "render_for_sft"

    def __init__(self) -> None:
        self.R = importlib.import_module("tml_renderers.renderers")
        self.chat = importlib.import_module("tml_renderers.chat")
        self.label = f"{TML} {importlib.metadata.version(TML)}"
        self._peers: dict[tuple[str, str], Any] = {}

    def _peer(self, ours: Renderer, match: _Match) -> Any:
        date = str(getattr(ours.options, "date", None) or "")
        key = (match.peer, date)
        if key not in self._peers:
            self._peers[key] = _make_tml(self.R, match.peer, date)
        return self._peers[key]

    def _messages(
        self, messages: Sequence[Mapping[str, Any]], tools: Any, *, last_only: bool = False
    ) -> list[Any]:
        chat = self.chat
        out: list[Any] = []
        if tools:
            specs = [
                chat.ToolSpecJson(
                    "function",
                    t["function"]["name"],
                    t["function"].get("description", ""),
                    t["function"].get("parameters", {}),
                )
                for t in tools
            ]
            out.append(
                chat.Message(chat.ToolDeclareJson(specs), chat.Author(chat.AuthorKind.System))
            )
        last = _last_assistant(messages)
        untrained = chat.MessageMetadata(training_metadata=chat.TrainingMetadata(0.0, False))
        for i, m in enumerate(messages):
            items = chat.OpenAIMessage.from_oss_dict(_oss_dict(m)).to_messages()
            if last_only and m["role"] == "assistant" and i != last:
                items = [item.copy(message_metadata=untrained) for item in items]
            out += items
        return out

    def parser(
        self, ours: Renderer, match: _Match, prompt: list[dict[str, Any]], tools: Any
    ) -> Callable[[list[int]], Any]:
        _, parser = self._peer(ours, match).render_for_completion(self._messages(prompt, tools))
        parse: Callable[[list[int]], Any] = parser.parse_tokens
        return parse

    def normalise(self, parsed: Any) -> list[Item]:
        chat = self.chat
        items: list[Item] = []
        for m in parsed:
            c = m.content
            if isinstance(c, chat.Thinking):
                items.append(("thinking", c.text))
            elif isinstance(c, chat.Text):
                items.append(("text", c.text))
            elif isinstance(c, chat.InvokeTool):
                args = tuple((a.name, _decoded_value(a.value)) for a in c.args)
                items.append(("call", c.name, args))
            elif not isinstance(c, chat.ModelEndSampling):
                items.append(("other", repr(c)))
        return _normalised(items, calls_apart=False)

    def prompt(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        peer, converted = self._peer(ours, match), self._messages(messages, tools)
        return lambda: peer.render_for_completion(converted)

    def prompt_ids(self, rendered: Any) -> list[int]:
        return [t for span in rendered[0] for t in span.span.tokens]

    def sft(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        peer, converted = self._peer(ours, match), self._messages(messages, tools, last_only=True)
        return lambda: peer.render_for_sft(converted)

    def sft_ids_weights(self, rendered: Any) -> tuple[list[int], list[float], int]:
        example = rendered[-1]
        ids = [t for span in example.input_token_spans for t in span.span.tokens]
        return ids, list(example.per_token_loss_weight_unshifted), len(rendered)


def _make_tml(R: Any, peer: str, date: str) -> Any:
    """The tml-renderers renderer a match names ``Class()`` or ``Class.constructor()`` (in
    ``tml_renderers.renderers``), or ``GptOss`` with the renderer's date."""
    if peer == "GptOss(current_date=…)":
        return R.GptOss(current_date=date or None)
    cls, _, constructor = peer.removesuffix("()").partition(".")
    make = getattr(getattr(R, cls), constructor) if constructor else getattr(R, cls)
    return make()


def _decoded_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return ("raw", value)


def _oss_dict(m: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message dict as tml-renderers' ``from_oss_dict`` reads it (reasoning as a
    ``thinking`` content part, arguments as JSON text)."""
    d: dict[str, Any] = {"role": m["role"]}
    content, reasoning = m.get("content"), m.get("reasoning_content")
    if reasoning:
        parts = [{"type": "thinking", "thinking": reasoning}]
        d["content"] = parts + ([{"type": "text", "text": content}] if content else [])
    else:
        d["content"] = content if content is not None else ""
    if m.get("tool_calls"):
        d["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": _arguments_text(c["function"]["arguments"]),
                },
            }
            for c in m["tool_calls"]
        ]
    for key in ("tool_call_id", "name"):
        if key in m:
            d[key] = m[key]
    return d


class _Cookbook(_Adapter):
    """tinker-cookbook: Python renderers over the Hugging Face tokenizer (ours is passed in),
    messages as dicts with ``ToolCall`` objects; tool calls are kept apart from content."""

    calls_apart = True
    parse_call = "parse_response"
    prompt_call = "build_generation_prompt"
    sft_call = "build_supervised_example"

    def __init__(self) -> None:
        self.renderers = importlib.import_module("tinker_cookbook.renderers")
        self.base = importlib.import_module("tinker_cookbook.renderers.base")
        self.gpt_oss = importlib.import_module("tinker_cookbook.renderers.gpt_oss")
        self.label = f"{COOKBOOK} {importlib.metadata.version(COOKBOOK)}"
        self._peers: dict[tuple[str, int, str], Any] = {}

    def _peer(self, ours: Renderer, match: _Match) -> Any:
        date = str(getattr(ours.options, "date", None) or "")
        key = (match.peer, id(ours.tokenizer), date)
        if key not in self._peers:
            if match.peer.startswith("gpt_oss"):
                effort = getattr(ours.options, "reasoning_effort", "medium")
                self._peers[key] = self.gpt_oss.GptOssRenderer(
                    ours.tokenizer,
                    use_system_prompt=True,
                    reasoning_effort=effort,
                    current_date=date or None,
                )
            else:
                self._peers[key] = self.renderers.get_renderer(match.peer, ours.tokenizer)
        return self._peers[key]

    def _messages(self, peer: Any, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[Any]:
        ToolCall = self.base.ToolCall
        out: list[Any] = []
        if tools and not any(m["role"] == "system" for m in messages):
            out += peer.create_conversation_prefix_with_tools([t["function"] for t in tools])
        for m in messages:
            if m["role"] == "system" and tools:
                specs = [t["function"] for t in tools]
                out += peer.create_conversation_prefix_with_tools(specs, m.get("content") or "")
                continue
            content, reasoning = m.get("content"), m.get("reasoning_content")
            d: dict[str, Any] = {"role": m["role"], "content": content or ""}
            if reasoning:
                parts = [{"type": "thinking", "thinking": reasoning}]
                d["content"] = parts + ([{"type": "text", "text": content}] if content else [])
            if m.get("tool_calls"):
                d["tool_calls"] = [
                    ToolCall(
                        id=c.get("id"),
                        function=ToolCall.FunctionBody(
                            name=c["function"]["name"],
                            arguments=_arguments_text(c["function"]["arguments"]),
                        ),
                    )
                    for c in m["tool_calls"]
                ]
            for key in ("tool_call_id", "name"):
                if key in m:
                    d[key] = m[key]
            out.append(d)
        return out

    def parser(
        self, ours: Renderer, match: _Match, prompt: list[dict[str, Any]], tools: Any
    ) -> Callable[[list[int]], Any]:
        parse: Callable[[list[int]], Any] = self._peer(ours, match).parse_response
        return parse

    def normalise(self, parsed: Any) -> list[Item]:
        message, _termination = parsed
        items: list[Item] = []
        content = message.get("content")
        if isinstance(content, str):
            items.append(("text", content))
        else:
            for part in content or []:
                if part.get("type") == "thinking":
                    items.append(("thinking", part["thinking"]))
                elif part.get("type") == "text":
                    items.append(("text", part["text"]))
                else:
                    items.append(("other", repr(part)))
        for call in message.get("tool_calls") or []:
            items.append(("call", call.function.name, _decoded(call.function.arguments)))
        for bad in message.get("unparsed_tool_calls") or []:
            items.append(("unparsed", bad.raw_text))
        return _normalised(items, calls_apart=True)

    def prompt(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        peer = self._peer(ours, match)
        converted = self._messages(peer, messages, tools)
        return lambda: peer.build_generation_prompt(converted)

    def prompt_ids(self, rendered: Any) -> list[int]:
        ids: list[int] = rendered.to_ints()
        return ids

    def sft(
        self, ours: Renderer, match: _Match, messages: list[dict[str, Any]], tools: Any
    ) -> Callable[[], Any]:
        peer = self._peer(ours, match)
        converted = self._messages(peer, messages, tools)
        return lambda: peer.build_supervised_example(converted)

    def sft_ids_weights(self, rendered: Any) -> tuple[list[int], list[float], int]:
        model_input, weights = rendered
        return list(model_input.to_ints()), [float(w) for w in weights.tolist()], 1


@functools.cache
def _adapter(library: str) -> _Adapter | None:
    """The adapter of an installed peer library, ``None`` when it cannot be imported."""
    try:
        return _Tml() if library == TML else _Cookbook()
    except Exception:  # not installed, or installed without what it needs
        return None


# --------------------------------------------------------------------------- harmony


def _openai_harmony(renderer: Renderer, ids: list[int], repeats: int) -> Any:
    from renderers.bench.measure import Row

    try:
        from openai_harmony import HarmonyEncodingName, Role, load_harmony_encoding
    except ImportError:
        return None
    try:
        encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception as exc:  # offline without TIKTOKEN_ENCODINGS_BASE
        return Row(
            renderer.name,
            "openai-harmony parse (unavailable)",
            len(ids),
            0.0,
            extra={"error": str(exc)},
        )

    def peer() -> Any:
        return encoding.parse_messages_from_completion_tokens(ids, Role.ASSISTANT)

    try:
        messages = peer()
    except Exception as exc:
        return Row(
            renderer.name, "openai-harmony parse (failed)", len(ids), 0.0, extra={"error": str(exc)}
        )
    ours = renderer.parse_response(ids).message.parts
    peer_texts = ["".join(c.text for c in m.content) for m in messages]
    our_texts = [p.text for p in ours if isinstance(p, (TextPart, ThinkingPart))]
    agree = peer_texts == our_texts
    t_ours, t_peer = _timed(lambda: renderer.parse_response(ids), peer if agree else None, repeats)
    return Row(
        renderer.name,
        "parse_response vs openai-harmony",
        len(ids),
        t_ours,
        "openai-harmony parse_messages_from_completion_tokens" if agree else "",
        t_peer,
        {"outputs_agree": agree},
    )


def _timed(
    ours: Callable[[], Any], peer: Callable[[], Any] | None, repeats: int
) -> tuple[float, float | None]:
    """Our median time and the peer's (timed in turn with ours), if there is a peer."""
    if peer is None:
        return median_seconds(ours, repeats=repeats), None
    t_ours, t_peer = paired_median_seconds([ours, peer], repeats=repeats)
    return t_ours, t_peer
