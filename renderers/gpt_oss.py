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
The parser is Harmony's own (:class:`harmony.parts.HarmonyPartsParser`) run on the grammar
record :class:`harmony.parts.HarmonyGrammar` of the tokenizer's control ids.

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
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeGuard

from harmony import (
    BROWSER,
    CHANNELS,
    DEFAULT_IDENTITY,
    DEFAULT_KNOWLEDGE_CUTOFF,
    PYTHON,
    REASONING_EFFORTS,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyMessage,
    SystemContent,
    ToolNamespace,
    drop_analysis,
    functions_namespace,
)
from harmony.chat_template import template_functions, tojson
from harmony.parts import (
    HarmonyGrammar,
    HarmonyPartsParser,
    closing_ids,
    prefill_ids,
    recipient_of,
    write_prefill,
)
from renderers.core.engine import StreamParser
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
from renderers.core.writer import TokenWriter
from renderers.rendering import Renderer, checked_arguments, plain_text
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["GptOssOptions", "GptOssRenderer"]

_BUILTIN_TOOLS = {"browser": BROWSER, "python": PYTHON}
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
        body = tojson(text) if self.template else text
        self.items.append(
            _Item("tool", recipient_of(name), body, "commentary", "assistant", None, i)
        )

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
        return _Item("assistant", "assistant", body, channel, recipient_of(name), content_type, i)


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
        self.grammar = HarmonyGrammar(self.tokens)
        self._system_bodies: dict[tuple[Any, ...], str] = {}

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self.grammar.stop_ids

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
                    text += "# Tools\n\n" + template_functions(functions.tools)
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
        return closing_ids(self.grammar, result)

    def _dropped_stop(self, result: ParseResult, completion_ids: Sequence[int]) -> list[int]:
        # History ends a final answer with <|end|>; the model ends it with <|return|> (a
        # stop token, where <|end|> is not one).
        closing = self._close_turn(result, completion_ids)[1]
        last = result.message.parts[-1] if result.message.parts else None
        final = type(last) is TextPart and last.channel in (None, "final")
        return [self.tokens.return_] if final and closing == [self.tokens.end] else closing

    def _new_parser(self, options: GptOssOptions, events: bool) -> StreamParser:
        return HarmonyPartsParser(self.grammar, self.table, events)

    # -- prefill ------------------------------------------------------------------------

    def _write_prefill(self, w: TokenWriter, prefill: str, options: GptOssOptions) -> None:
        """``<|channel|>{prefill_channel}<|message|>{prefill}`` after ``<|start|>assistant``."""
        write_prefill(w, self.grammar, prefill, options.prefill_channel)

    def _prefill_ids(self, prefill: str, options: GptOssOptions) -> list[int]:
        return prefill_ids(self.table, self.grammar, prefill, options.prefill_channel)


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
