"""Caller errors get a clear ``ValueError`` naming the message index (or the token
position), for every renderer: unknown roles, tool-call arguments that are not JSON,
reasoning a variant cannot render, tool results without a call where the format needs
one, and invalid token ids given to the parsers (batch and streaming); and the token ids
the parsers take (lists, sequences, any 1-D array NumPy reads).

Decisions per format, from the official templates:

- Tool results without a matching call: Qwen3 and DeepSeek carry no call ids or names in
  their tool-result markup, and the Kimi templates write the result's own
  ``tool_call_id`` (Kimi-K2 with ``call_ids="numbered"`` heads a result with the id of
  the call it answers: there an unanswered id is an error naming the message), so none of
  them needs a match: such results render like the template renders them. gpt-oss
  addresses a result from
  the tool it answers (``<|start|>functions.NAME to=assistant``): its template raises
  without a preceding call; the renderer needs the call or the result's ``name``.
- Reasoning: DeepSeek-V3 (without ``render_thinking=True``) and Kimi-K2-Instruct cannot
  render it at all: silently dropping it would corrupt training data, so it is an error
  naming the message and what to use instead. Templates that drop the reasoning of
  *history* turns by design (Qwen3, DeepSeek-V3.1, Kimi-K2-Thinking) are not errors; but
  where such a template drops the reasoning of the *trained* turn (the last message of a
  supervised example: every DeepSeek-V3.1 turn unless ``thinking=True,
  keep_thinking=True`` keeps it, Kimi-K2-Thinking's last plain answer unless
  ``keep_last_reasoning=True``), that is an error naming the message and the option.
  DeepSeek-V3 with ``render_thinking=True`` writes reasoning R1-style, one block at the
  start of a turn: reasoning after the start is an error naming the part.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from renderers import Message, Renderer, TextPart, ThinkingPart, ToolCallPart, get_renderer
from renderers.rollout import Rollout
from tests.test_properties import SPECS, ArrayLike, Spec

spec_param = pytest.mark.parametrize("spec", SPECS, ids=repr)

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


def assistant_call(arguments: str, name: str = "get_weather") -> dict[str, Any]:
    """A call to ``name`` with the id Kimi samples (Kimi-K2-Thinking writes the id and
    not the name: a trained call needs an id that names its function)."""
    call = {"id": f"functions.{name}:0", "type": "function"}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{**call, "function": {"name": name, "arguments": arguments}}],
    }


def both_builds(r: Renderer, messages: list[Any], **kw: Any) -> None:
    """Render ``messages`` as a generation prompt and as a supervised example."""
    r.build_generation_prompt(messages, **kw)
    if any((m.role if isinstance(m, Message) else m["role"]) == "assistant" for m in messages):
        r.build_supervised_example(messages, **kw)


# -- unknown roles --------------------------------------------------------------------------


@spec_param
@pytest.mark.parametrize("role", ["robot", "function", "", "Assistant"])
def test_unknown_role_names_the_message(spec: Spec, role: str) -> None:
    r = spec.renderer()
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": role, "content": "?"},
    ]
    with pytest.raises(ValueError, match=r"messages\[2\]\.role") as info:
        r.build_generation_prompt(messages)
    assert repr(role) in str(info.value)
    with pytest.raises(ValueError, match=r"messages\[2\]\.role"):
        r.build_supervised_example([*messages, {"role": "assistant", "content": "x"}])


# -- tool-call arguments ---------------------------------------------------------------------

# Formats that write one parameter block per argument (Qwen3.5/3.6/3.8 and Nemotron-3 XML,
# DeepSeek-V4/V4.1 DSML, GLM-5 key/value pairs): arguments must be a JSON object (their
# templates iterate over its items).
PARAMETER_BLOCKS = {
    "qwen3.5",
    "qwen3.6",
    "qwen3.8",
    "deepseek_v4",
    "deepseek_v4.1",
    "nemotron3",
    "nemotron3_super",
    "nemotron3_ultra",
    "glm5.2",
    "glm5.3",
    "glm5.3_flash",
}


NOT_JSON = ["{not json", "", "{'single': 'quotes'}", '{"a": 1} trailing', '{"a": NaN']


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("arguments", NOT_JSON)
def test_tool_call_arguments_that_are_not_json_name_the_message(spec: Spec, arguments: str) -> None:
    r = spec.renderer()
    if arguments == "" and spec.name in PARAMETER_BLOCKS:
        # Their templates (encoder) define it: no parameter (Qwen3.8's template, vLLM's {}
        # for Qwen3.5/3.6, Nemotron-3 and GLM-5), one string argument "arguments" (DeepSeek-V4's
        # encoder).
        r.build_supervised_example([{"role": "user", "content": "q"}, assistant_call("")])
        return
    messages = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "And now?"},
        assistant_call(arguments),
    ]
    with pytest.raises(ValueError, match=r"messages\[3\]: arguments of tool call 'get_weather' "):
        r.build_supervised_example(messages)
    history = [*messages, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    with pytest.raises(ValueError, match=r"messages\[3\]: .*not valid JSON"):
        r.build_generation_prompt(history)


@spec_param
def test_json_arguments_of_any_json_value_and_dicts_render(spec: Spec) -> None:
    """Arguments are JSON text, or a dict/list serialized like the templates' ``tojson``;
    formats writing a block per argument need an object (an error naming the call)."""
    r = spec.renderer()
    for arguments in ('{"city": "Zürich", "n": [1, 2.5, true, null]}', "{}", "[]", "3"):
        messages = [{"role": "user", "content": "Weather?"}, assistant_call(arguments)]
        if spec.name in PARAMETER_BLOCKS and not arguments.startswith("{"):
            with pytest.raises(
                ValueError,
                match=r"^messages\[1\]: arguments of tool call 'get_weather' must be a JSON object",
            ):
                both_builds(r, messages)
            continue
        both_builds(r, messages)
    call = {
        **CALL,
        "id": "functions.f:0",
        "function": {"name": "f", "arguments": {"a": {"b": "é"}}},
    }
    both_builds(r, [{"role": "user", "content": "?"}, {"role": "assistant", "tool_calls": [call]}])


def test_deepseek_v3_tool_name_with_a_newline_names_the_message() -> None:
    """V3 writes ``NAME\\n```json``: a name with a newline cannot be expressed."""
    for spec in (s for s in SPECS if s.name == "deepseek_v3"):
        messages = [{"role": "user", "content": "?"}, assistant_call("{}", "get\nweather")]
        with pytest.raises(ValueError, match=r"messages\[1\]: tool name 'get\\nweather'"):
            spec.renderer().build_supervised_example(messages)


# -- reasoning a variant cannot render -------------------------------------------------------

CANNOT_RENDER_REASONING = {
    ("deepseek_v3", ()): r"render_thinking=True",
    ("kimi_k2", ()): r"kimi_k2_thinking",
    ("kimi_k2", (("call_ids", "numbered"),)): r"kimi_k2_thinking",
    ("llama3", ()): r"the format has no place for reasoning",
    ("llama4", ()): r"the format has no place for reasoning",
    ("mistral", ()): r"this version has no place for reasoning",
    ("mistral_v7", ()): r"this version has no place for reasoning",
    ("qwen2.5", ()): r"the format has no place for reasoning",
    ("qwen3_instruct_2507", ()): r"the format has no place for reasoning",
    ("qwen3_vl", ()): r"the format has no place for reasoning",
}

V31_TRAINED = (
    r": deepseek_v3\.1 cannot write the reasoning of this trained turn \(its template drops "
    r"it; pass thinking=True, keep_thinking=True to train on it\); pass reasoning='drop' to "
    r"leave it out, or remove it$"
)
KIMI_TRAINED = (
    r": kimi_k2_thinking cannot write the reasoning of this trained turn \(its template "
    r"writes <think></think> for every turn up to the conversation's last plain answer; "
    r"keep_last_reasoning=True keeps the last turn's\); pass reasoning='drop' to leave it "
    r"out, or remove it$"
)
R1_LATER = r"\.content\[1\]: deepseek_v3 writes reasoning R1-style, one <think> block"
QWEN_NO_THINKING = (
    r": qwen3\.%s with enable_thinking=False cannot write the reasoning of this trained turn"
)
QWEN3_NO_THINKING = (
    r": qwen3 cannot write the reasoning of this trained turn \(with enable_thinking=False "
    r"the generation prompt closes an empty think block\)"
)
V4_CHAT = r": deepseek_v4 in chat mode cannot write the reasoning of this trained turn"
V41_CHAT = r": deepseek_v4\.1 in chat mode cannot write the reasoning of this trained turn"
K25_NO_THINKING = r": kimi_k2\.5 with thinking=False cannot write the reasoning of this trained"

# Variants that render reasoning, but not in every case below: case -> (the error after
# "messages[INDEX]" for the trained turn, whether a generation prompt with the message as
# history fails too: never, under the one reasoning rule). Every other case renders (or
# drops the reasoning of a history turn, by the template's design) without an error.
RENDERS_REASONING_EXCEPT: dict[tuple[str, Any], dict[str, tuple[str, bool]]] = {
    ("deepseek_v3", (("fix_tool_format", True), ("render_thinking", True))): {
        "between_text": (R1_LATER, False),
    },
    ("qwen3", (("enable_thinking", False),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (QWEN3_NO_THINKING, False)
    ),
    ("deepseek_v3.1", ()): {
        "trained": (V31_TRAINED, False),
        "between_text": (V31_TRAINED, False),
        "before_calls": (V31_TRAINED, False),
    },
    # The trained turn is a plain answer, the conversation's last: history to the template.
    ("kimi_k2_thinking", ()): dict.fromkeys(("trained", "between_text"), (KIMI_TRAINED, False)),
    ("kimi_k2_thinking", (("call_ids", "numbered"),)): dict.fromkeys(
        ("trained", "between_text"), (KIMI_TRAINED, False)
    ),
    # Thinking off: the generation prompt closes an empty think block, so the trained
    # turn cannot carry reasoning (history turns drop theirs by the template's design).
    ("qwen3.5", (("enable_thinking", False),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (QWEN_NO_THINKING % "5", False)
    ),
    ("qwen3.6", (("enable_thinking", False),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (QWEN_NO_THINKING % "6", False)
    ),
    ("qwen3.8", (("enable_thinking", False), ("preserve_thinking", False))): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (QWEN_NO_THINKING % "8", False)
    ),
    ("deepseek_v4", (("thinking_mode", "chat"),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (V4_CHAT, False)
    ),
    ("deepseek_v4.1", (("thinking_mode", "chat"),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (V41_CHAT, False)
    ),
    ("kimi_k2.5", (("thinking", False),)): dict.fromkeys(
        ("trained", "between_text", "before_calls"), (K25_NO_THINKING, False)
    ),
}


@spec_param
def test_reasoning_the_variant_cannot_render_is_an_error(spec: Spec) -> None:
    r = spec.renderer()
    hint = CANNOT_RENDER_REASONING.get((spec.name, spec.options))
    assert (hint is None) == spec.thinking  # the spec table and this one agree
    exceptions = RENDERS_REASONING_EXCEPT.get((spec.name, spec.options), {})
    assert hint is None or not exceptions
    last = {"role": "assistant", "content": "Yes.", "reasoning_content": "17 is prime."}
    history = [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisors."},
        {"role": "user", "content": "And 21?"},
    ]
    parts = Message("assistant", [TextPart("a"), ThinkingPart("because"), TextPart("b")])
    calls = {**assistant_call('{"city": "Oslo"}'), "reasoning_content": "Need the weather."}
    cases: dict[str, tuple[list[Any], int]] = {
        "trained": ([*history[:1], last], 1),  # the trained turn (a plain answer)
        "history": (history, 1),  # a history turn
        "between_text": (
            [*history[:1], {"role": "assistant", "content": "Yes."}, history[2], parts],
            3,
        ),  # a thinking part between text parts
        "before_calls": ([*history[:1], calls], 1),  # reasoning before a tool call
    }
    assert set(exceptions) <= set(cases)
    for case, (messages, index) in cases.items():
        # The one reasoning rule: reasoning of turns that are not trained is rendered as
        # the template does, never an error (generation prompts included).
        prompt = [*messages, {"role": "user", "content": "more"}]
        r.build_generation_prompt(prompt)
        r.build_supervised_example([*prompt, {"role": "assistant", "content": "No."}])
        if case == "history":
            continue  # trained history turns: tests/test_reasoning_policy.py
        if hint is None and case not in exceptions:
            r.build_supervised_example(messages)  # the trained turn's reasoning is written
            continue
        # Only the trained turn, whose reasoning the format cannot write: an error naming
        # the message and the option, and trained without it with reasoning="drop".
        error = exceptions[case][0] if hint is None else rf": .*{hint}"
        with pytest.raises(ValueError, match=rf"^messages\[{index}\]{error}") as raised:
            r.build_supervised_example(messages)
        assert "reasoning='drop'" in str(raised.value)
        r.build_supervised_example(messages, reasoning="drop")


@spec_param
def test_empty_reasoning_is_not_an_error(spec: Spec) -> None:
    """Nothing is lost when the reasoning is empty."""
    r = spec.renderer()
    both_builds(
        r,
        [
            {"role": "user", "content": "Hi"},
            Message("assistant", [ThinkingPart(""), TextPart("Hello")]),
            {"role": "user", "content": "Bye"},
            {"role": "assistant", "content": "Bye", "reasoning_content": ""},
        ],
    )


@spec_param
@pytest.mark.parametrize("role", ["system", "user", "tool"])
def test_reasoning_or_calls_in_other_roles_name_the_part(spec: Spec, role: str) -> None:
    r = spec.renderer()
    for part in (ThinkingPart("hmm"), ToolCallPart("f", "{}")):
        messages = [
            {"role": "user", "content": "Hi"},
            assistant_call("{}", "f"),
            Message(role, [TextPart("x"), part]),
        ]
        # (gpt-oss: a system message after the first is an error of its own)
        with pytest.raises(ValueError, match=r"messages\[2\]\.(content\[1\]|role: a system)"):
            r.build_generation_prompt(messages)


# -- tool results without a matching call ---------------------------------------------------


NEEDS_MATCHING_CALL = {"gpt_oss"}


def _numbered(spec: Spec) -> bool:
    """Kimi-K2 with ``call_ids="numbered"``: a result is headed with its call's id."""
    return dict(spec.options).get("call_ids") == "numbered"


@spec_param
def test_tool_result_without_a_call_is_an_error_where_the_format_needs_one(spec: Spec) -> None:
    r = spec.renderer()
    messages: list[Any] = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me think."},
        {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
    ]
    if _numbered(spec):
        unanswered = r"^messages\[2\]: tool_call_id 'call_9' names no earlier tool call"
        with pytest.raises(ValueError, match=unanswered):
            r.build_generation_prompt(messages)
        return
    if spec.name not in NEEDS_MATCHING_CALL:
        assert "sunny" in r.decode(r.build_generation_prompt(messages))
        return
    with pytest.raises(ValueError, match=r"messages\[2\]: a tool result without"):
        r.build_generation_prompt(messages)
    with pytest.raises(ValueError, match=r"messages\[2\]: a tool result without"):
        r.build_supervised_example([*messages, {"role": "assistant", "content": "Sunny."}])


@spec_param
def test_tool_result_without_a_call_renders_as_the_template_does(spec: Spec) -> None:
    """No template but gpt-oss's needs a matching call (see the module docs): the Kimi
    templates head a result with its own ``tool_call_id`` (K2-Instruct's follows it with a
    literal backslash-n); gpt-oss names it after the result's ``name``. (Kimi-K2 with
    ``call_ids="numbered"`` needs the call: see the test above.)"""
    if _numbered(spec):
        return
    r = spec.renderer()
    messages: list[Any] = [
        {"role": "user", "content": "Weather?"},
        {"role": "tool", "tool_call_id": "call_9", "name": "get_weather", "content": "sunny"},
    ]
    text = r.decode(r.build_generation_prompt(messages))
    assert "sunny" in text
    newline = "\\n" if spec.name == "kimi_k2" else "\n"
    if spec.name.startswith("kimi"):
        assert f"## Return of call_9{newline}sunny" in text
    # More results than calls: the extra one too.
    messages = [
        {"role": "user", "content": "Weather?"},
        assistant_call('{"city": "Oslo"}'),
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "rainy"},
    ]
    text = r.decode(r.build_generation_prompt(messages))
    assert "sunny" in text and "rainy" in text
    if spec.name.startswith("kimi"):
        assert f"## Return of functions.get_weather:0{newline}sunny" in text
        assert f"## Return of call_2{newline}rainy" in text


# -- invalid token ids ----------------------------------------------------------------------

BAD_IDS = [-1, -(2**63) - 1, 2**63, 2**64, 10**30]


def _good_ids(r: Renderer, n: int) -> list[int]:
    ids = r.table.encode("Some ordinary text, 日本語 and 🎉. " * 20)
    assert len(ids) >= n
    return ids[:n]


@spec_param
@pytest.mark.parametrize("bad", ["vocab_size", *BAD_IDS])
def test_invalid_token_ids_name_the_position(spec: Spec, bad: Any) -> None:
    r = spec.renderer()
    bad_id = r.table.vocab_size if bad == "vocab_size" else bad
    message = re.escape(f" = {bad_id} is not a token id")
    good = _good_ids(r, 100)
    # batch: a short and a long list (two code paths), and a NumPy array where it fits
    for n, k in ((5, 2), (100, 61)):
        ids = [*good[:k], bad_id, *good[k:n]]
        with pytest.raises(ValueError, match=rf"token_ids\[{k}\]{message}"):
            r.parse_response(ids)
        if -(2**63) <= bad_id < 2**63:
            with pytest.raises(ValueError, match=rf"token_ids\[{k}\]{message}"):
                r.parse_response(np.asarray(ids, dtype=np.int64))
    # streaming: the position counts the ids fed before
    for chunk in (3, 70):
        parser = r.stream_parser()
        parser.feed(good[:10])
        with pytest.raises(ValueError, match=rf"token_ids\[{10 + chunk - 1}\]{message}"):
            parser.feed([*good[10 : 10 + chunk - 1], bad_id])
    # after the stop token (trailing ids are checked too)
    for chunk in (3, 70):
        parser = r.stream_parser()
        parser.feed([*good[:4], r.stop_token_ids[0]])
        with pytest.raises(ValueError, match=rf"token_ids\[{5 + chunk - 1}\]{message}"):
            parser.feed([*good[: chunk - 1], bad_id])


@spec_param
def test_a_uint64_array_beyond_int64_names_the_position(spec: Spec) -> None:
    r = spec.renderer()
    ids = np.asarray([*_good_ids(r, 60), 2**64 - 1], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"token_ids\[60\] = 18446744073709551615"):
        r.parse_response(ids)


@spec_param
def test_non_integer_token_ids_name_the_position(spec: Spec) -> None:
    r = spec.renderer()
    good = _good_ids(r, 60)
    # A bool is an int in Python: both paths read True as id 1, alike.
    for k, n in ((2, 5), (55, 60)):
        with_bool = r.parse_response([*good[:k], True, *good[k:n]])
        assert with_bool == r.parse_response([*good[:k], 1, *good[k:n]])
    for bad in (1.5, 2.0, "3", None):
        for k, n in ((2, 5), (55, 60)):  # the short and the long path
            with pytest.raises(ValueError, match=rf"token_ids\[{k}\] = .* is not an integer"):
                r.parse_response([*good[:k], bad, *good[k:n]])
        parser = r.stream_parser()
        parser.feed(good[:5])
        with pytest.raises(ValueError, match=r"token_ids\[6\] = .* is not an integer"):
            parser.feed([good[5], bad])
    with pytest.raises(ValueError, match=r"token_ids\[0\] = 1.0 is not an integer"):
        r.parse_response(np.asarray([1.0, 2.0]))


@spec_param
def test_token_ids_of_another_shape_or_text_are_refused_saying_so(spec: Spec) -> None:
    r = spec.renderer()
    good = _good_ids(r, 60)
    shape = r"token_ids: expected a 1-D sequence of token ids, got an array of shape"
    for n in (5, 60):  # the short and the long path
        for array in (np.asarray([good[:n]]), ArrayLike([good[:n]])):
            with pytest.raises(ValueError, match=rf"{shape} \(1, {n}\)$"):
                r.parse_response(array)
            with pytest.raises(ValueError, match=rf"{shape} \(1, {n}\)$"):
                r.stream_parser().feed(array)
    with pytest.raises(ValueError, match=rf"{shape} \(\)$"):
        r.parse_response(ArrayLike(good[0]))
    for text in ("Hello", b"Hello"):
        with pytest.raises(ValueError, match=r"got (str|bytes) \(parse_text parses"):
            r.parse_response(text)


@spec_param
def test_token_ids_in_any_array_type_parse_and_stream_as_the_list(spec: Spec) -> None:
    """What ``generate`` returns (a PyTorch tensor) or any array NumPy reads is taken as
    the ids it holds: parsing, streaming, decoding and a rollout see the list's."""
    r = spec.renderer()
    ids = [*_good_ids(r, 80), r.stop_token_ids[0], *_good_ids(r, 3)]
    expected = r.parse_response(ids)
    for dtype in (np.int32, np.int64, np.uint32):
        for n in (5, len(ids)):  # the short and the long path
            assert r.parse_response(ArrayLike(ids[:n], dtype)) == r.parse_response(ids[:n])
        parser = r.stream_parser()
        for k in range(0, len(ids), 7):
            parser.feed(ArrayLike(ids[k : k + 7], dtype))
        assert parser.finish() == expected
    assert r.decode(ArrayLike(ids)) == r.decode(ids)
    rollout = r.rollout([{"role": "user", "content": "Hi"}])
    result = rollout.add_completion(ArrayLike(ids), ArrayLike([-0.5] * len(ids), np.float32))
    assert result == expected
    assert rollout.tokens[-81:].tolist() == ids[:81]


@spec_param
def test_token_ids_given_as_integers_of_any_kind_come_back_as_python_ints(spec: Spec) -> None:
    """A list of NumPy integers or of 0-d integer arrays (``list(tensor)``), or an object
    array of them, parses like the list of ints, on the short and the long path alike,
    and what a result or a rollout gives back is Python ints (JSON-serialisable)."""
    r = spec.renderer()
    ids = [*_good_ids(r, 80), r.stop_token_ids[0], *_good_ids(r, 40)]
    for n in (3, 10, 81, 82, len(ids)):  # tails of none, a few and many ids
        given = [*ids[: n - 1], r.stop_token_ids[0], *ids[n:]] if n < 81 else ids[:n]
        expected = r.parse_response(given)
        for kind in (
            [np.int64(t) for t in given],
            [np.array(t, dtype=np.int32) for t in given],
            np.array([np.uint16(t) if t < 2**16 else t for t in given], dtype=object),
        ):
            result = r.parse_response(kind)
            assert result == expected
            assert all(type(t) is int for t in result.trailing_ids)
            json.dumps(list(result.trailing_ids))
            parser = r.stream_parser()
            for k in range(0, len(kind), 5):
                parser.feed(kind[k : k + 5])
            streamed = parser.finish()
            assert streamed == expected
            assert all(type(t) is int for t in streamed.trailing_ids)
    messages = [{"role": "user", "content": "Hi"}]
    prompt = r.build_generation_prompt(messages)
    rollout = Rollout.resume(r, [np.array(t) for t in prompt], messages=messages)
    assert rollout.prompt_ids == prompt
    assert all(type(t) is int for t in rollout.prompt_ids)
    rollout.add_completion([np.int64(t) for t in ids])
    after = rollout.add_messages([{"role": "user", "content": "More?"}])
    assert all(type(t) is int for t in after)
    assert all(type(t) is int for t in rollout.prompt_ids)
    # (the stop token after them is the format's history token: gpt-oss writes <|end|>)
    assert rollout.prompt_ids[len(prompt) : len(prompt) + 80] == ids[:80]


def test_token_ids_as_a_pytorch_tensor_parse_as_the_list() -> None:
    torch = pytest.importorskip("torch")  # the integration extra (CI installs it)
    r = SPECS[0].renderer()
    ids = [*_good_ids(r, 80), r.stop_token_ids[0]]
    assert r.parse_response(torch.tensor(ids)) == r.parse_response(ids)
    assert r.parse_response(torch.tensor(ids, dtype=torch.int32)[:5]) == r.parse_response(ids[:5])
    with pytest.raises(ValueError, match=r"token_ids: cannot read a Tensor as an array \("):
        r.parse_response(torch.tensor(ids, dtype=torch.bfloat16))


@pytest.mark.parametrize("name", ['say "hi"', "two\nlines", "back\\slash"])
def test_qwen3_tool_names_that_need_json_escaping_are_rejected(name: str) -> None:
    r = next(s for s in SPECS if s.name == "qwen3").renderer()
    call = {"type": "function", "function": {"name": name, "arguments": "{}"}}
    with pytest.raises(ValueError, match=r"messages\[1\]: tool name .* needs JSON escaping"):
        r.build_generation_prompt(
            [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]}]
        )


@pytest.mark.parametrize("name", ["a b", " lead", "tab\tname"])
def test_gpt_oss_tool_names_with_whitespace_are_rejected(name: str) -> None:
    r = next(s for s in SPECS if s.name == "gpt_oss").renderer()
    call = {"type": "function", "function": {"name": name, "arguments": "{}"}}
    with pytest.raises(ValueError, match=r"messages\[1\]: tool name .* Harmony recipient"):
        r.build_generation_prompt(
            [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]}]
        )


def test_deepseek_v3_reasoning_after_the_start_of_a_turn_is_rejected() -> None:
    r = next(s for s in SPECS if s.name == "deepseek_v3").renderer()
    message = Message("assistant", [TextPart("a"), ThinkingPart("later"), TextPart("b")])
    with pytest.raises(ValueError, match=r"messages\[1\]\.content\[1\]: .* R1-style"):
        r.build_supervised_example(
            [{"role": "user", "content": "x"}, message], render_thinking=True
        )


def test_get_renderer_given_a_tokenizer_first_says_to_pass_it_second(
    qwen3_tokenizer: Any,
) -> None:
    with pytest.raises(
        TypeError,
        match=r"got a \w+Tokenizer\w*; pass the tokenizer second: "
        r"get_renderer\('Qwen/Qwen3-8B', tokenizer\)$",
    ):
        get_renderer(qwen3_tokenizer)
    for other in (None, 3):
        with pytest.raises(TypeError, match=r"expected a renderer name or a model id, got \w+$"):
            get_renderer(other)  # type: ignore[arg-type]
    assert get_renderer("qwen3", qwen3_tokenizer).tokenizer is qwen3_tokenizer
