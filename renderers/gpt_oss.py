r"""gpt-oss (``openai/gpt-oss-20b``): the Harmony format (see :mod:`harmony`).

What the official template renders (``chat_template.jinja``), one message per line::

    <|start|>system<|message|>{identity}\nKnowledge cutoff: 2024-06\nCurrent date: {date}
        \n\nReasoning: {effort}\n\n[# Tools\n\n{browser, python}]# Valid channels: analysis,
        commentary, final. Channel must be included for every message.[\nCalls to these
        tools must go to the commentary channel: 'functions'.]<|end|>
    <|start|>developer<|message|># Instructions\n\n{system prompt}\n\n[# Tools\n\n
        ## functions\n\nnamespace functions {...}]<|end|>
    <|start|>user<|message|>{text}<|end|>
    <|start|>assistant<|channel|>analysis<|message|>{reasoning}<|end|>
    <|start|>assistant to=functions.{name}<|channel|>commentary json<|message|>{args}<|call|>
    <|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{"result"}<|end|>
    <|start|>assistant<|channel|>final<|message|>{text}<|end|>   (<|return|> when trained)
    <|start|>assistant                                          (the generation prompt)

A leading system or developer message becomes the developer ``# Instructions``; function
tools are a TypeScript namespace in the developer message; ``builtin_tools`` (``browser``,
``python``) are declared in the system message. Reasoning (``analysis``) is kept only for
the last message of a supervised example and for tool-calling turns that no later final
answer follows; history answers keep only their ``final`` message. The text of a
tool-calling message (OpenAI ``content``) is written as ``analysis`` too, as the template
does; an answer without a tool call always ends in a ``final`` message (empty if there is
no text). The model samples from ``<|start|>assistant`` on and stops at ``<|return|>``
(final answer) or ``<|call|>`` (tool call), so one completion holds at most one tool call:
the calls of one assistant message are each trained from the ``<|start|>assistant`` after
the previous call (the prompt of the completion that samples it), that header untrained.
``<|end|>`` separates messages within a turn. ``<|endoftext|>`` is the end-of-sequence
token.

Parsing maps Harmony messages to parts in sampled order: ``analysis`` ->
``ThinkingPart``; ``final`` -> ``TextPart`` (a part keeps its ``channel`` only when it is
not the default for its kind, so a plain answer parses to a ``str``);
``commentary`` without a recipient (a preamble) -> ``TextPart(channel="commentary")``;
a message to ``functions.NAME`` -> ``ToolCallPart(NAME, raw arguments, channel,
content_type)`` where ``content_type`` is the header's as sampled (``json`` or
``<|constrain|>json``, openai-harmony's spelling) and is written back as is; a built-in
recipient (``browser.search``, ``python``, ``container.*``) ->
a tool call named with the full recipient, rendered back to that recipient (every other
name is rendered as ``functions.NAME``). Arguments that should be JSON and are not, and
calls cut off by the end of the ids, become ``UnparsedToolCallPart``. Both recipient
positions (before or after ``<|channel|>``) and the malformations :mod:`harmony.parser`
repairs are accepted; a non-assistant message in the completion ends the message there.

Reasoning follows the library's one rule: analysis of untrained turns is rendered as the
template does (dropped before the last answer; in the ``"harmony"`` dialect as
openai-harmony does), and a *trained* turn whose analysis the dialect drops is a
``ValueError`` naming the ``reasoning`` option (``"drop"`` trains it without).

Prefill: ``<|channel|>{prefill_channel}<|message|>{prefill}`` after the generation
prompt's ``<|start|>assistant``: the reasoning by default (``analysis``, which every gpt-oss
turn starts with; ``continue_final_message="reasoning_content"`` writes the same), the
answer with ``prefill_channel="final"`` (as ``continue_final_message="content"``).

Options: ``reasoning_effort`` (low/medium/high), ``date`` (the ``Current date`` line:
``None`` means today's date as the template's ``strftime_now`` writes it; pass a fixed
date for reproducible ids), ``model_identity``, ``knowledge_cutoff``, ``builtin_tools``,
``required_channels`` (the system message's ``# Valid channels`` line, as openai-harmony's
``with_required_channels`` writes it), ``prefill_channel`` and ``dialect``:

- ``"template"`` (default): token-identical to the official Hugging Face template;
- ``"harmony"``: token-identical to openai-harmony's rendering of the same conversation
  (what inference servers built on openai-harmony feed the model). It differs from the
  template where the template deviates from the reference implementation: tool results
  are written raw instead of JSON-quoted, calls carry ``<|constrain|>json`` instead of
  ``json``, the developer message has no trailing blank line, function tools use
  openai-harmony's TypeScript (the template adds a comma after every ``// default:``
  comment, flattens nested objects onto odd lines and fails on non-string ``oneOf``
  defaults), the ``Current date`` line appears only when ``date`` is given, and earlier
  analysis follows openai-harmony's rule (dropped before the first final answer when the
  conversation ends in one). Supervised examples keep the trained message's analysis
  and apply that rule to the history only, so the example extends its generation prompt.

Divergences from both, on purpose:

- several tool calls in one assistant message are rendered as consecutive call messages
  (the template renders only the first and silently drops the rest); tool results are
  matched to calls by ``tool_call_id``, then in call order;
- string tool-call arguments are written once as given, verbatim (the template
  JSON-quotes a string again: ``"{\"city\": ...}"``, which the model never samples; an
  object it writes as ``tojson``, which is what a dict given as arguments becomes);
- message text that spells a control token is encoded as ordinary text;
- list content is rendered as its text parts joined; parts keep their order, and parsed
  channels (``commentary`` preambles, ``analysis``) render back to the same messages;
- ``content: None`` without calls is an empty final answer, ``tool_calls: []`` no calls
  and a ``None`` tool result an empty one (the template fails on each: ``in
  message.content`` of ``None``, ``tool_calls[0]`` of an empty list, ``tojson`` of the
  content transformers 5.23+ drops; transformers 5.0 to 5.22, which pass ``None``
  through, fail on every ``content: None``);
- an empty ``reasoning_content`` renders no analysis message (the template writes an
  empty one); a system or developer message after the first is an error (the template
  drops it silently);
- loss weights: an earlier final answer's ``<|end|>`` gets weight 0, since the model
  samples ``<|return|>`` there.
"""

from __future__ import annotations

import datetime
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeGuard

import numpy as np

from harmony import (
    BROWSER,
    CHANNELS,
    DEFAULT_IDENTITY,
    DEFAULT_KNOWLEDGE_CUTOFF,
    PYTHON,
    REASONING_EFFORTS,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyMachine,
    HarmonyMessage,
    Header,
    SystemContent,
    ToolDescription,
    ToolNamespace,
    drop_analysis,
    functions_namespace,
)
from harmony.parser import PlannedMessage
from renderers.core.assembly import TEXT, THINKING, TOOL_CALL, Event
from renderers.core.engine import BatchRuns, StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.scanning import MarkerScanner
from renderers.core.tokens import int_ids
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["GptOssOptions", "GptOssRenderer"]

_BUILTIN_TOOLS = {"browser": BROWSER, "python": PYTHON}
_BUILTIN_PREFIXES = ("browser.", "container.")
_DIALECTS = ("template", "harmony")


@dataclass(frozen=True, slots=True)
class GptOssOptions:
    """Options of the gpt-oss format (names follow the template's kwargs)."""

    reasoning_effort: str = "medium"
    """``low``, ``medium`` or ``high``: written as ``Reasoning: {effort}``."""
    date: str | datetime.date | None = None
    """The ``Current date`` (``YYYY-MM-DD`` or a date). ``None``: today's date in the
    template dialect (as the template's ``strftime_now``), no date line in the harmony
    dialect."""
    model_identity: str = DEFAULT_IDENTITY
    """The first line of the system message."""
    knowledge_cutoff: str = DEFAULT_KNOWLEDGE_CUTOFF
    """The ``Knowledge cutoff`` line (the template hard-codes ``2024-06``)."""
    builtin_tools: tuple[str, ...] = ()
    """Built-in tools declared in the system message: ``browser`` and/or ``python``."""
    dialect: str = "template"
    """``template``: the official chat template's ids; ``harmony``: openai-harmony's."""
    required_channels: tuple[str, ...] = CHANNELS
    """The channels the system message declares valid and required, in order
    (openai-harmony's ``SystemContent.with_required_channels``): ``("analysis",
    "final")`` writes ``# Valid channels: analysis, final. Channel must be included for
    every message.``; an empty list writes no channel line. The default is the line both
    the template and openai-harmony write; both dialects follow the option. Parsing is
    unchanged: it reads the three Harmony channels (any other is kept, with an issue)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning (analysis) of a trained turn that the template drops (a
    turn before the conversation's last answer): ``"error"`` raises ``ValueError``,
    ``"drop"`` leaves it out. Analysis of untrained turns is rendered as the template
    does."""

    prefill_channel: Literal["analysis", "final"] = "analysis"
    """The channel a ``prefill`` opens after the generation prompt's
    ``<|start|>assistant``: ``analysis`` (reasoning, which every gpt-oss turn starts with)
    or ``final`` (the answer, skipping the reasoning)."""

    def __post_init__(self) -> None:
        # A list given for a list option is kept as a tuple (options are hashable).
        object.__setattr__(self, "required_channels", tuple(self.required_channels))


def _tool_name(recipient: str) -> str:
    """The tool-call name for a recipient (``functions.x`` -> ``x``; built-ins kept)."""
    return recipient[10:] if recipient.startswith("functions.") else recipient


def _recipient(name: str) -> str:
    """The recipient a tool call by ``name`` is addressed to."""
    if name == "python" or name.startswith(_BUILTIN_PREFIXES):
        return name
    return "functions." + name


# -- the template's TypeScript (a port of its Jinja macros) ------------------------------


_TOJSON = json.JSONEncoder(ensure_ascii=False).encode


def _tojson(value: Any) -> str:
    """The template's ``tojson`` filter (transformers': non-ASCII kept, default separators)."""
    return _TOJSON(value)


def _concat(value: Any) -> str:
    """``"..." + value`` in the template: strings as is; the template fails on other values,
    we write them as JSON."""
    return value if isinstance(value, str) else _tojson(value)


_NESTED = "\n" + " " * 16  # the template's indentation leaking into nested object types


def _template_type(spec: Any) -> str:
    """The template's ``render_typescript_type`` macro, quirks included."""
    if not isinstance(spec, Mapping):
        return "any"
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items")
        if items and isinstance(items, Mapping):
            item_kind = items.get("type")
            if item_kind == "string":
                out = "string[]"
            elif item_kind in ("number", "integer"):
                out = "number[]"
            elif item_kind == "boolean":
                out = "boolean[]"
            else:
                inner = _template_type(items)
                out = "any[]" if inner == "object | object" or len(inner) > 50 else inner + "[]"
        else:
            out = "any[]"
        return out + " | null" if spec.get("nullable") else out
    if isinstance(kind, list) and kind:
        return " | ".join(map(str, kind)) if len(kind) > 1 else str(kind[0])
    one_of = spec.get("oneOf")
    if one_of and isinstance(one_of, list):
        # The macro's "has object variants" flag is set inside a loop and never leaves it
        # (Jinja scoping), so every oneOf is written out variant by variant.
        out = ""
        for k, variant in enumerate(one_of):
            out += _template_type(variant)
            if isinstance(variant, Mapping):
                if variant.get("description"):
                    out += "// " + str(variant["description"])
                if "default" in variant:
                    out += " " * 20 + "// default: " + _tojson(variant["default"])
            if k < len(one_of) - 1:
                out += " | \n"
        return out
    if kind == "string":
        enum = spec.get("enum")
        if enum and isinstance(enum, list):
            return '"' + '" | "'.join(map(str, enum)) + '"'
        return "string | null" if spec.get("nullable") else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "object":
        properties = spec.get("properties")
        if not properties or not isinstance(properties, Mapping):
            return "object"
        required = spec.get("required") or []
        fields = [
            name + ("" if name in required else "?") + ": " + _NESTED + _template_type(prop)
            for name, prop in properties.items()
        ]
        return "{\n" + ", ".join(fields) + "}"
    return "any"


def _template_functions(tools: Sequence[ToolDescription]) -> str:
    """The template's ``render_tool_namespace("functions", tools)`` macro."""
    out = "## functions\n\nnamespace functions {\n\n"
    for tool in tools:
        out += "// " + tool.description + "\n" + "type " + tool.name + " = "
        params = tool.parameters
        properties = params.get("properties") if params else None
        if not properties or not isinstance(properties, Mapping):
            out += "() => any;\n\n"
            continue
        assert params is not None
        required = params.get("required") or []
        out += "(_: {\n"
        for name, spec in properties.items():
            spec = spec if isinstance(spec, Mapping) else {}
            if spec.get("description"):
                out += "// " + str(spec["description"]) + "\n"
            out += name + ("" if name in required else "?") + ": " + _template_type(spec)
            if "default" in spec:
                if spec.get("enum"):
                    out += ", // default: " + _concat(spec["default"])
                elif spec.get("oneOf"):
                    out += "// default: " + _concat(spec["default"])
                else:
                    out += ", // default: " + _tojson(spec["default"])
            out += ",\n"
        out += "}) => any;\n\n"
    return out + "} // namespace functions"


# -- conversation -> Harmony messages ------------------------------------------------------


class _Item(NamedTuple):
    """A Harmony message to write (its header fields and body: a tuple, as a conversation
    makes dozens per call), with what loss weights need: the conversation message it comes
    from (the items of one message are adjacent), its end token, and whether the model
    samples that end token (not the ``<|end|>`` history writes after a final answer, where
    the model sampled ``<|return|>``)."""

    role: str
    author: str
    body: str
    channel: str | None
    recipient: str | None
    content_type: str | None
    msg: int
    end: str | None = None
    end_sampled: bool = True

    def message(self) -> HarmonyMessage:
        """The item as a Harmony message."""
        name = self.author if self.role == "tool" else None
        return HarmonyMessage(
            self.role,
            self.body,
            name=name,
            channel=self.channel,
            recipient=self.recipient,
            content_type=self.content_type,
        )


def _is_call(part: Part) -> TypeGuard[ToolCallPart | UnparsedToolCallPart]:
    return type(part) is ToolCallPart or type(part) is UnparsedToolCallPart


class _Conversion:
    """Turns the conversation after the leading system/developer message into Harmony
    messages (one per part: reasoning, preamble, answer, each tool call)."""

    def __init__(
        self,
        messages: list[Message],
        start: int,
        options: GptOssOptions,
        add_generation_prompt: bool,
        trains: Callable[[int], bool] = lambda i: False,
    ) -> None:
        self.messages = messages
        self.trains = trains
        self.refuse_reasoning = options.reasoning == "error"
        self.start = start
        self.template = options.dialect == "template"
        self.add_generation_prompt = add_generation_prompt
        self.items: list[_Item] = []
        self.trained_from = 0  # items[trained_from:] belong to the last assistant message
        self._pending: deque[str] = deque()
        self._by_id: dict[str, str] = {}
        self._last_call: str | None = None
        self._last_answer = -1

    def run(self) -> list[_Item]:
        messages = self.messages
        last = len(messages) - 1
        last_assistant = -1
        for k, m in enumerate(messages):
            if m.role == "assistant":
                last_assistant = k
                # The template drops a tool-calling turn's analysis once a later answer exists.
                if isinstance(m.content, str) or not any(map(_is_call, m.content)):
                    self._last_answer = k
        for i in range(self.start, len(messages)):
            m = messages[i]
            if m.role == "user":
                text = plain_text(m, i, "gpt_oss")
                self.items.append(_Item("user", "user", text, None, None, None, i))
            elif m.role == "tool":
                self._tool_result(m, i)
            elif m.role == "assistant":
                if i == last_assistant:
                    self.trained_from = len(self.items)
                self._assistant(m, i, i == last)
            else:
                raise ValueError(
                    f"messages[{i}].role: a {m.role} message can only come first in gpt_oss "
                    "(it becomes the developer instructions; the template drops later ones)"
                )
        return self.items

    def _tool_result(self, m: Message, i: int) -> None:
        name: str | None = None
        if m.tool_call_id is not None and m.tool_call_id in self._by_id:
            name = self._by_id.pop(m.tool_call_id)
            if name in self._pending:
                self._pending.remove(name)
        elif self._pending:
            name = self._pending.popleft()
        else:
            name = m.name or self._last_call
        if name is None:
            raise ValueError(
                f"messages[{i}]: a tool result without a preceding tool call (gpt_oss names "
                "the result after the call; give the message a name)"
            )
        text = plain_text(m, i, "gpt_oss")
        body = _tojson(text) if self.template else text
        self.items.append(_Item("tool", _recipient(name), body, "commentary", "assistant", None, i))

    def _assistant(self, m: Message, i: int, is_last: bool) -> None:
        if isinstance(m.content, str):  # an answer alone: one final message
            returns = is_last and not self.add_generation_prompt
            end = "return" if returns else None
            item = _Item("assistant", "assistant", m.content, "final", None, None, i, end, returns)
            self.items.append(item)
            return
        parts = list(m.content)
        calls = [p for p in parts if _is_call(p)]
        if calls:
            keep_analysis = not (self.template and self._last_answer > i)
            names = [p.name or "" for p in calls]
            self._pending = deque(names)
            self._by_id = {p.id: n for p, n in zip(calls, names, strict=True) if p.id}
            self._last_call = names[-1]
        else:
            trained = is_last and not self.add_generation_prompt
            keep_analysis = trained or not self.template
            last_part = parts[-1] if parts else None
            if not (type(last_part) is TextPart and last_part.channel in (None, "final")):
                parts.append(TextPart(""))  # a turn without a tool call ends in a final answer
        if not keep_analysis and self.refuse_reasoning and self.trains(i):
            analysis = [
                p
                for p in parts
                if (type(p) is ThinkingPart and p.text)
                or (type(p) is TextPart and p.text and (p.channel or "") == "analysis")
                or (type(p) is TextPart and p.text and calls and p.channel is None)
            ]
            if analysis:
                raise reasoning_error(
                    "gpt_oss", i, "its template drops the analysis of turns before the last answer"
                )
        items = self.items
        first = len(items)
        for k, part in enumerate(parts):
            if type(part) is ThinkingPart:
                if keep_analysis:
                    channel = part.channel or "analysis"
                    items.append(_Item("assistant", "assistant", part.text, channel, None, None, i))
            elif type(part) is TextPart:
                channel = part.channel or ("analysis" if calls else "final")
                if channel != "analysis" or keep_analysis:
                    items.append(_Item("assistant", "assistant", part.text, channel, None, None, i))
            else:
                items.append(self._call(part, i, k))
        if len(items) > first and items[-1].channel == "final":  # the item closing the turn
            returns = not calls and is_last and not self.add_generation_prompt
            items[-1] = _Item(*items[-1][:7], "return" if returns else None, returns)

    def _call(self, part: Part, i: int, k: int) -> _Item:
        if type(part) is ToolCallPart:
            name, body, content_type = part.name, part.arguments, part.content_type
            if content_type is None or content_type.endswith("json"):
                checked_arguments(part, i)
        else:
            assert type(part) is UnparsedToolCallPart
            if part.name is None:
                raise ValueError(
                    f"messages[{i}].content[{k}]: an unparsed tool call without a name cannot "
                    "be rendered in gpt_oss"
                )
            name, body, content_type = part.name, part.raw, None
        if name.split() != [name]:  # empty, or holds whitespace
            raise ValueError(
                f"messages[{i}]: tool name {name!r} cannot be a Harmony recipient "
                "(it must be non-empty and hold no whitespace)"
            )
        if content_type is None:
            content_type = "json" if self.template else "<|constrain|>json"
        channel = part.channel or "commentary"
        return _Item("assistant", "assistant", body, channel, _recipient(name), content_type, i)


class GptOssRenderer(Renderer):
    """Renderer and parser for gpt-oss (Harmony)."""

    name = "gpt_oss"
    default_model = "openai/gpt-oss-20b"
    Options = GptOssOptions
    roles = ("system", "developer", "user", "assistant", "tool")
    message_markers = MessageMarkers(starts={"<|start|>": ""})

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        self.harmony = HarmonyEncoding(self.table)
        self.tokens = self.harmony.tokens
        self._system_bodies: dict[tuple[Any, ...], str] = {}

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        tk = self.tokens
        return (tk.return_, tk.call, tk.end_of_text)

    # -- rendering ----------------------------------------------------------------------

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: GptOssOptions,
        add_generation_prompt: bool,
    ) -> None:
        if options.dialect not in _DIALECTS:
            raise ValueError(
                f"dialect: expected one of {', '.join(_DIALECTS)}, got {options.dialect!r}"
            )
        template = options.dialect == "template"
        functions = functions_namespace(tools) if tools else None
        enc = self.harmony
        enc.write_parts(w, "system", "system", self._system_body(options, functions is not None))
        start = 1 if messages and messages[0].role in ("system", "developer") else 0
        instructions = plain_text(messages[0], 0, "gpt_oss") if start else ""
        if instructions or functions is not None:
            if template:
                text = f"# Instructions\n\n{instructions}\n\n" if instructions else ""
                if functions is not None:
                    text += "# Tools\n\n" + _template_functions(functions.tools)
                developer = HarmonyMessage("developer", text)
            else:
                developer = HarmonyMessage(
                    "developer",
                    DeveloperContent(
                        instructions or None, (functions,) if functions is not None else ()
                    ),
                )
            enc.write_message(w, developer, msg=0 if start else -1)
        conversion = _Conversion(messages, start, options, add_generation_prompt, w.trains)
        items = conversion.run()
        if not template:
            history = len(items) if add_generation_prompt else conversion.trained_from
            kept = _drop_analysis(items, history)
            if options.reasoning == "error" and len(kept) < len(items):
                survivors = {id(it) for it in kept}
                for it in items:
                    if id(it) not in survivors and it.body and w.trains(it.msg):
                        raise reasoning_error(
                            "gpt_oss",
                            it.msg,
                            "openai-harmony drops the analysis of turns before the last "
                            "final answer",
                        )
            items = kept
        write = enc.write_parts
        previous = -1
        stopped = False  # the previous item ended at a stop token (<|call|>, <|return|>)
        for role, author, body, channel, recipient, content_type, i, end, end_sampled in items:
            if role != "assistant":
                write(w, role, author, body, channel, recipient, content_type, msg=i)
            else:
                # The first item of a message starts at the prompt's <|start|>assistant, and
                # so does an item after a call of the same message: the model stopped at
                # <|call|>, and a new completion samples what follows that header.
                write(
                    w,
                    role,
                    author,
                    body,
                    channel,
                    recipient,
                    content_type,
                    end,
                    i,
                    True,
                    i == previous and not stopped,
                    end_sampled,
                )
            previous = i
            stopped = role == "assistant" and (
                end == "return" or (end is None and recipient is not None)
            )
        if add_generation_prompt:
            enc.write_generation_prompt(w)

    def _system_body(self, options: GptOssOptions, has_function_tools: bool) -> str:
        """The system message's text (cached: it depends on a few options only)."""
        template = options.dialect == "template"
        effort = _effort(options.reasoning_effort)
        date = _date(options.date, template)
        builtins = _builtins(options.builtin_tools)
        key = (
            options.model_identity,
            effort,
            options.knowledge_cutoff,
            date,
            tuple(ns.name for ns in builtins),
            has_function_tools,
            options.required_channels,
        )
        body = self._system_bodies.get(key)
        if body is None:
            body = SystemContent(
                model_identity=options.model_identity,
                reasoning_effort=effort,
                knowledge_cutoff=options.knowledge_cutoff,
                conversation_start_date=date,
                valid_channels=options.required_channels,
                tools=builtins,
            ).render(has_function_tools)
            if len(self._system_bodies) >= 64:
                self._system_bodies.clear()
            self._system_bodies[key] = body
        return body

    # -- multi-turn rollouts ------------------------------------------------------------

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "models sample the recipient after the channel (history writes it before)",
            "a final answer sampled with <|return|> is written with <|end|> in history",
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if self.options.dialect == "template":
            reasons.insert(
                0, "analysis of a tool-calling turn is dropped once a final answer follows"
            )
        else:
            reasons.insert(0, "analysis of earlier turns is dropped after a final answer")
        return ExtensionProperty(False, "; ".join(reasons))

    def _close_turn(
        self, result: ParseResult, completion_ids: Sequence[int]
    ) -> tuple[int, list[int]]:
        tk = self.tokens
        if result.stop_token_id in (tk.return_, tk.end_of_text):
            return 1, [tk.end]  # history ends a final answer with <|end|>
        if result.stop_token_id == tk.call:
            return 0, []
        last = result.message.parts[-1] if result.message.parts else None
        if type(last) is UnparsedToolCallPart and last.incomplete:
            return 0, [tk.call]
        return 0, [tk.end]

    def _dropped_stop(self, result: ParseResult, completion_ids: Sequence[int]) -> list[int]:
        # History ends a final answer with <|end|>; the model ends it with <|return|> (a
        # stop token, where <|end|> is not one).
        closing = self._close_turn(result, completion_ids)[1]
        last = result.message.parts[-1] if result.message.parts else None
        final = type(last) is TextPart and last.channel in (None, "final")
        return [self.tokens.return_] if final and closing == [self.tokens.end] else closing

    def _new_parser(self, options: GptOssOptions, events: bool) -> StreamParser:
        return _GptOssParser(self, events)

    # -- prefill ------------------------------------------------------------------------

    def _write_prefill(self, w: TokenWriter, prefill: str, options: GptOssOptions) -> None:
        """``<|channel|>{prefill_channel}<|message|>{prefill}`` after ``<|start|>assistant``."""
        w.control(self.tokens.channel)
        w.text(options.prefill_channel)
        w.control(self.tokens.message)
        w.text(prefill)

    def _prefill_ids(self, prefill: str, options: GptOssOptions) -> list[int]:
        tk = self.tokens
        encode = self.table.encode
        return [tk.channel, *encode(options.prefill_channel), tk.message, *encode(prefill)]


def _effort(effort: str) -> str:
    if effort not in REASONING_EFFORTS:
        raise ValueError(
            f"reasoning_effort: expected one of {', '.join(REASONING_EFFORTS)}, got {effort!r}"
        )
    return effort


def _date(date: str | datetime.date | None, template: bool) -> str | None:
    if date is None:
        return datetime.date.today().strftime("%Y-%m-%d") if template else None
    if isinstance(date, datetime.date):
        return date.strftime("%Y-%m-%d")
    if not isinstance(date, str):
        raise ValueError(f"date: expected a string or a datetime.date, got {type(date).__name__}")
    return date


def _builtins(names: Sequence[str]) -> tuple[ToolNamespace, ...]:
    if isinstance(names, str):
        names = (names,)
    unknown = [n for n in names if n not in _BUILTIN_TOOLS]
    if unknown:
        raise ValueError(
            f"builtin_tools: unknown tool(s) {unknown} (expected browser and/or python)"
        )
    return tuple(_BUILTIN_TOOLS[n] for n in ("browser", "python") if n in names)


def _drop_analysis(items: list[_Item], keep_from: int) -> list[_Item]:
    """openai-harmony's analysis-dropping rule on ``items[:keep_from]`` (the history before
    the trained message; all items for a generation prompt); later items are kept."""
    history = items[:keep_from]
    messages = [it.message() for it in history]
    kept = {id(m) for m in drop_analysis(messages)}
    return [it for it, m in zip(history, messages, strict=True) if id(m) in kept] + items[
        keep_from:
    ]


# -- parsing -----------------------------------------------------------------------------


def _expects_json(header: Header) -> bool:
    content_type = header.content_type
    if content_type is None:
        return header.recipient is not None and header.recipient.startswith("functions.")
    return "json" in content_type


class _PartSink:
    """Maps Harmony messages to message parts through the parser's PartAssembler."""

    __slots__ = ("_asm", "_header", "_parser", "body")

    def __init__(self, parser: _GptOssParser) -> None:
        self._parser = parser
        self._asm = parser.asm
        self._header: Header | None = None
        self.body = parser.asm.write

    def begin(self, header: Header) -> None:
        if header.role != "assistant":
            self._parser.cut(header)
            return
        self._header = header
        start = header.start
        if header.stray:
            # Words the header has no place for: text the model sampled, kept (reported)
            # in text parts spanning their header segments, before the body.
            start = header.body_start
            ends = [at for at, _ in header.stray[1:]] + [start]
            for (at, text), end in zip(header.stray, ends, strict=True):
                self._asm.open(TEXT, at)
                self._asm.write(text)
                self._asm.close(end)
        # A part keeps its channel only when it is not its kind's default (analysis for
        # thinking, final for text, commentary for calls), so a plain answer is a ``str``.
        if header.recipient is not None:
            self._asm.open(TOOL_CALL, start, channel=header.channel)
        elif header.channel == "analysis":
            self._asm.open(THINKING, start)
        else:
            channel = None if header.channel == "final" else header.channel
            self._asm.open(TEXT, start, channel=channel)

    def close(self, end: int, end_token: str | None, truncated: bool) -> None:
        self._asm.close(end, incomplete=truncated, build=self._tool_call)

    def part(self, message: PlannedMessage) -> Part | None:
        """The part :meth:`begin`, ``body`` and :meth:`close` make of a whole message (an
        assistant's, without stray header words)."""
        header = message.header
        text = message.body
        if header.recipient is not None:
            self._header = header
            return self._tool_call([text], message.truncated)
        if not text:
            return None
        if header.channel == "analysis":
            return ThinkingPart(text, None, message.truncated)
        channel = None if header.channel == "final" else header.channel
        return TextPart(text, channel, message.truncated)

    def _tool_call(self, segments: list[str], incomplete: bool) -> Part:
        header = self._header
        assert header is not None and header.recipient is not None
        raw = segments[0]
        name = _tool_name(header.recipient)
        channel = None if header.channel == "commentary" else header.channel
        if incomplete:
            return UnparsedToolCallPart(
                raw, "cut off before <|call|>", name=name, channel=channel, incomplete=True
            )
        if _expects_json(header):
            try:
                json.loads(raw)
            except ValueError as exc:
                return UnparsedToolCallPart(
                    raw, f"invalid JSON arguments: {exc}", name=name, channel=channel, arguments=raw
                )
        return ToolCallPart(name, raw, channel=channel, content_type=header.content_type)


class _GptOssParser(StreamParser):
    """gpt-oss completions: the Harmony state machine with a sink that builds parts."""

    def __init__(self, r: GptOssRenderer, events: bool) -> None:
        tk = r.tokens
        stops = (tk.return_, tk.call)
        super().__init__(
            r.table,
            structural=r.table.control_ids,
            stop_ids=stops,
            eos_ids=(tk.end_of_text,),
            events=events,
        )
        self.machine = HarmonyMachine(
            tk,
            _PartSink(self),
            role="assistant",
            strict=False,
            report=self._issue,
            spell=r.table.control_text,
        )
        self._token = self.machine.token
        self._on_text = self.machine.text  # type: ignore[method-assign]
        self._at = 0
        # The ids of the chunk being fed, and of a header that began in an earlier chunk:
        # a header turning out to be another role's moves its ids to the trailing ids.
        self._chunk: Sequence[int] | np.ndarray[Any, Any] = ()
        self._chunk_base = 0
        self._stash: list[int] = []

    def _writes_through(self) -> tuple[bool, MarkerScanner | None]:
        return self.machine.in_body, None  # body text goes straight to the part

    def _parse_runs(self, runs: BatchRuns) -> ParseResult | None:
        """The one-shot parse of assistant messages in canonical shape (what
        :meth:`HarmonyMachine.plan` reads): one part per message, as the sink makes it.
        Anything else (an issue to report, another role's message) takes the general
        path."""
        planned = self.machine.plan(
            runs.texts, runs.tokens, runs.cuts, runs.count, self._stop_ids | self._eos_ids
        )
        if planned is None:
            return None
        messages, stop = planned
        sink = _PartSink(self)
        parts: list[Part | None] = []
        spans: list[tuple[int, int]] = []
        for message in messages:
            if message.header.role != "assistant":
                return None
            part = sink.part(message)
            if part is not None:
                parts.append(part)
                spans.append((message.header.start, message.end))
        return self._one_shot_result(runs, parts, spans, stop)

    def _feed(self, token_ids: Sequence[int] | np.ndarray[Any, Any]) -> list[Event]:
        # Not on the one-token hot path, which takes ordinary text inside a body only:
        # a header can neither begin nor continue there.
        self._chunk, self._chunk_base = token_ids, self._pos
        events = super()._feed(token_ids)
        if self.machine.in_header and not self._done:
            start, base = self.machine.header_start, self._chunk_base
            if start >= base:
                self._stash = _as_list(token_ids[start - base :])
            else:
                self._stash += _as_list(token_ids)
        return events

    def _on_token(self, token_id: int, pos: int) -> None:
        self._at = pos
        self._token(token_id, pos)

    def _on_end(self, pos: int, stopped: bool) -> None:
        self._at = pos
        if not stopped:
            # finish(): every fed id is in the stash already if a header is open.
            self._chunk, self._chunk_base = (), pos
        self.machine.end(pos, self._stop_id if stopped else None)

    def cut(self, header: Header) -> None:
        """End the assistant's message where ``header``'s message (another role's) began;
        its ids become trailing ids."""
        start, base, at = header.start, self._chunk_base, self._at
        self._issue(
            start, f"a {header.role} message in the completion: the assistant's message ends here"
        )
        if start >= base:
            ids = _as_list(self._chunk[start - base : at - base])
        else:
            ids = self._stash + _as_list(self._chunk[: at - base])
        self._trailing += int_ids(ids)  # (the caller's own items: any integers)
        self._done = True
        self.machine.halt()


def _as_list(ids: Sequence[int] | np.ndarray[Any, Any]) -> list[int]:
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
