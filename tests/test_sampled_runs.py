"""Nothing trained after a stop (issue 31, item 4), over every renderer and the corpus.

In every example :meth:`~renderers.Renderer.build_supervised_examples` gives, each trained
run (a maximal run of tokens with a weight) is a completion the model samples: parsed by
the renderer itself from the state its untrained prefix implies
(``Renderer._parse_after_prompt``, what a rollout uses), it ends exactly at its last token,
a stop token (so the token after a trained stop is never trained), and its parts are
those of the message it came from (the format's canonical form of it, from
tests/test_properties.py). A message whose calls the model samples one completion each
(gpt-oss) is several runs, whose parts together are the message's.

The one documented exception: DeepSeek-V3 in template parity (``fix_tool_format=False``)
never closes a single tool call's section, so that turn's run ends at
``<｜tool▁call▁end｜>`` without a stop token; asserted exactly, and ``fix_tool_format=True``
is held to the rule.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from renderers import Message, Termination, ToolCallPart, UnparsedToolCallPart
from renderers.core.messages import Part, coerce_messages
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, SYS, TOOLS, call, result
from tests.test_properties import (
    SPECS,
    canonical_unparsed,
    qwen3_canonical,
    qwen3_no_thinking_canonical,
)

QUESTION = {"role": "user", "content": "Weather in Lyon and Paris?"}
PARALLEL = {
    "role": "assistant",
    "content": "",
    "reasoning_content": "Two cities, two calls.",
    "tool_calls": [
        call("get_weather", {"city": "Lyon"}, "c1"),
        call("get_weather", {"city": "Paris"}, "c2"),
        call("search", {"query": "forecast"}, "c3"),
    ],
}
# Multi-turn conversations the corpus lacks: three parallel calls, several exchanges with
# reasoning and calls, plain multi-turn chat.
EXTRA: list[tuple[str, list[dict[str, Any]], Any]] = [
    (
        "three_parallel_calls_then_answer",
        [
            SYS,
            QUESTION,
            PARALLEL,
            result("c1", "21 C", "get_weather"),
            result("c2", "18 C", "get_weather"),
            result("c3", "sunny", "search"),
            {"role": "assistant", "content": "21 C and 18 C, sunny.", "reasoning_content": "Sum."},
            {"role": "user", "content": "Thanks! And tomorrow?"},
            {"role": "assistant", "content": "Same.", "reasoning_content": "No change."},
        ],
        TOOLS,
    ),
    (
        "three_parallel_calls_without_reasoning",
        [
            QUESTION,
            {k: v for k, v in PARALLEL.items() if k != "reasoning_content"},
            result("c1", "21 C", "get_weather"),
            result("c2", "18 C", "get_weather"),
            result("c3", "sunny", "search"),
            {"role": "assistant", "content": "21 C and 18 C, sunny."},
        ],
        TOOLS,
    ),
    (
        "plain_chat",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "How are you?"},
            {"role": "assistant", "content": "Fine, thanks."},
            {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": "Goodbye."},
        ],
        None,
    ),
]
CONVERSATIONS = [(c.id, c.messages, c.tools) for c in CORPUS] + EXTRA

Canonical = Callable[[Message], Message | None]
"""The canonical form of a message (tests/test_properties.py) after the earlier messages."""


def _with_kimi_ids(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls with ids as Kimi models sample them, ``functions.NAME:IDX`` (Kimi-K2-Thinking
    and K2.5/K2.6 write the caller's id where the name would be: see ``with_kimi_ids``)."""
    out = copy.deepcopy(conversation)
    renamed: dict[Any, str] = {}
    for m in out:
        for k, c in enumerate(m.get("tool_calls") or []):
            renamed[c.get("id")] = c["id"] = f"functions.{c['function']['name']}:{k}"
        if m["role"] == "tool" and m.get("tool_call_id") in renamed:
            m["tool_call_id"] = renamed[m["tool_call_id"]]
    return out


def _template(options: dict[str, Any]) -> Renderer:
    return TemplateRenderer(tokenizer_for("Qwen/Qwen3-8B"), **options)


VARIANTS: list[tuple[str, Callable[[], Renderer], Canonical]] = [
    (
        repr(spec),
        spec.renderer,
        spec.canonical,
    )
    for spec in SPECS
] + [
    ("template-qwen3", lambda: _template({}), qwen3_canonical),
    (
        "template-qwen3-enable_thinking=False",
        lambda: _template({"enable_thinking": False}),
        qwen3_no_thinking_canonical,
    ),
]
_BUILT: dict[str, Renderer] = {}


def _renderer(label: str, make: Callable[[], Renderer]) -> Renderer:
    if label not in _BUILT:
        _BUILT[label] = make()
    return _BUILT[label]


def trained_runs(weights: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each maximal run of tokens with a weight."""
    trained = np.concatenate([[False], weights > 0, [False]])
    edges = np.flatnonzero(np.diff(trained.astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _without_ids(parts: list[Part]) -> list[Part]:
    """Tool-call ids aside (formats that write them number calls across the conversation,
    which the canonical forms of a lone message do not)."""
    return [
        ToolCallPart(p.name, p.arguments, channel=p.channel, content_type=p.content_type)
        if type(p) is ToolCallPart
        else p
        for p in parts
    ]


def _per_completion(message: Message) -> list[Message]:
    """``message`` as the completions that sample it when the model stops at each call:
    the parts up to and including each call, then the rest."""
    out: list[Message] = []
    current: list[Part] = []
    for part in message.parts:
        current.append(part)
        if type(part) in (ToolCallPart, UnparsedToolCallPart):
            out.append(Message("assistant", current))
            current = []
    if current:
        out.append(Message("assistant", current))
    return out


def _v3_unclosed_call(label: str, r: Renderer, ids: list[int]) -> bool:
    """The documented DeepSeek-V3 template defect: a run ending at the call end marker."""
    return label == "deepseek_v3" and ids[-1] == r.table.control_id("<｜tool▁call▁end｜>")


@pytest.mark.parametrize(("label", "make", "canonical"), VARIANTS, ids=[v[0] for v in VARIANTS])
@pytest.mark.usefixtures("fixed_clock")
def test_every_trained_run_is_a_completion_that_ends_at_its_stop_token(
    label: str, make: Callable[[], Renderer], canonical: Canonical
) -> None:
    r = _renderer(label, make)
    options = r.changed_options()
    stops = set(r.stop_token_ids)
    attributed = not isinstance(r, TemplateRenderer)
    runs_checked = messages_checked = 0
    for name, conversation, tools in CONVERSATIONS:
        if label.startswith(("kimi_k2.5", "kimi_k2.6", "kimi_k2_thinking")):
            conversation = _with_kimi_ids(conversation)
        for train_on in ("all_assistant", "last_assistant_turn"):
            try:
                examples = r.build_supervised_examples(
                    conversation, tools, train_on=train_on, attribution=attributed
                )
            except ValueError as exc:
                assert "\n" not in str(exc), exc  # a refusal of the turn itself, one line
                continue
            msgs = coerce_messages(conversation)
            for example in examples:
                ids = example.tokens.tolist()
                runs = trained_runs(example.weights)
                if attributed:
                    assert example.message_indices is not None
                    owners = [int(example.message_indices[s]) for s, _ in runs]
                else:  # one run per turn, in order
                    owners = list(example.turns)
                    assert len(runs) == len(owners), (name, label)
                parsed: dict[int, list[Part]] = {}
                for (start, end), turn in zip(runs, owners, strict=True):
                    run = ids[start:end]
                    where = (name, train_on, turn, r.decode(run))
                    assert not stops & set(run[:-1]), where  # nothing after a trained stop
                    found = r._parse_after_prompt(ids[:start], run, options)
                    runs_checked += 1
                    if _v3_unclosed_call(label, r, run):
                        assert found.termination is Termination.LENGTH, where
                    else:
                        assert run[-1] in stops, where
                        assert found.termination is Termination.STOP, (where, found.issues)
                        assert found.stop_token_id == run[-1] and not found.trailing_ids, where
                    parsed.setdefault(turn, []).extend(found.message.parts)
                for turn, parts in parsed.items():
                    # Several runs: one completion per call (gpt-oss stops at each).
                    pieces = [msgs[turn]]
                    if owners.count(turn) > 1:
                        pieces = _per_completion(msgs[turn])
                    expected = [canonical(piece) for piece in pieces]
                    if any(e is None for e in expected):
                        continue  # a message the format documentedly cannot express
                    want = [p for e in expected if e is not None for p in e.parts]
                    got = canonical_unparsed(Message("assistant", parts)).parts
                    assert _without_ids(list(got)) == _without_ids(want), (name, train_on, turn)
                    messages_checked += 1
    assert runs_checked >= 40 and messages_checked >= 30, (runs_checked, messages_checked)
