"""Conversations in the shapes datasets are published in, read into the message model.

A row is a mapping of columns (a JSON object, a Parquet or ``datasets`` row).
:func:`read_conversation` reads one in any of these shapes, or detects which one it is:

``openai``
    ``messages``: OpenAI chat messages (``role``, ``content``, ``reasoning_content``,
    ``tool_calls``, ``tool_call_id``, ``name``; see :meth:`renderers.Message.from_dict`),
    and a ``tools`` column. The legacy ``function_call`` field of an assistant message is
    its one tool call, as in OpenAI's deprecated function-calling API.

``sharegpt``
    ``conversations``: ``{"from": TAG, "value": TEXT}`` entries, with an optional
    row-level ``system`` prompt and ``tools`` (JSON text): the shape of LLaMA-Factory's
    ``data/README.md`` ("Sharegpt Format") and its converters (``src/llamafactory/data/
    converter.py``, ``SharegptDatasetConverter``; ``src/llamafactory/v1/plugins/
    data_plugins/converter.py``, ``sharegpt_converter``; hiyouga/LLaMA-Factory at
    ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30), used by glaive-function-calling, xLAM,
    ToolACE, Hermes and OpenHermes exports. A ``function_call`` entry's value is the JSON
    text of one call ``{"name", "arguments"}`` or of a list of parallel calls; an
    ``observation`` entry is a tool result.

``llamafactory``
    LLaMA-Factory's v1 sample (``src/llamafactory/v1/utils/types.py``, ``SFTSample``,
    same commit): ``messages`` of ``{"role", "content": [{"type", "value"}, ...],
    "loss_weight"}`` where a part's type is ``text``, ``reasoning`` or ``tool_call`` (the
    JSON text of ``{"name", "arguments"}``), and ``tools`` as JSON text.

How each maps to the message model, exactly:

- a row's ``system`` (ShareGPT) becomes the first message, a system message;
- a ``function_call`` entry becomes an assistant message with its calls in order, parallel
  calls staying one message; consecutive ``function_call`` entries, and a ``gpt`` entry
  followed by ``function_call`` entries, are one assistant message (its text, then its
  calls), as the OpenAI shape writes one assistant turn;
- a tool result (``observation``, role ``tool``) answers the oldest unanswered call of the
  assistant message before it: it takes that call's name, and its id when the call has one
  (no id is invented);
- ``reasoning`` parts become reasoning; ``loss_weight`` (LLaMA-Factory) and ``weight``
  (ShareGPT, as OpenHermes writes it) become the message's loss weight;
- tool-call arguments given as JSON objects are kept in their given key order and
  serialized as the templates' ``tojson`` does; arguments given as text are kept verbatim.

Role names differ between datasets: :data:`DEFAULT_ROLES` maps each known name to a role
of the message model, and ``roles`` extends or overrides it (``--role NAME=ROLE`` on the
command line). A value that is null, NaN (what pandas and Ray Data give for a null) or
absent means the same everywhere: no system prompt, no tools, no weight.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, cast, get_args

from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    coerce_messages,
    serialize_arguments,
)

__all__ = [
    "DEFAULT_ROLES",
    "ROLE_TARGETS",
    "SHAPES",
    "Conversation",
    "Reader",
    "ShapeError",
    "ShapeName",
    "detect_shape",
    "is_missing",
    "read_conversation",
    "role_table",
]

ShapeName: TypeAlias = Literal["openai", "sharegpt", "llamafactory"]
SHAPES: tuple[ShapeName, ...] = get_args(ShapeName)
"""The shapes :func:`read_conversation` reads, in the order detection tries them."""

ROLE_TARGETS = ("system", "developer", "user", "assistant", "tool", "function_call")
"""What a role name can map to: a role of the message model, or ``function_call`` (an
assistant turn whose text is the JSON of its tool call or list of calls)."""

DEFAULT_ROLES: Mapping[str, str] = MappingProxyType(
    {
        "system": "system",
        "developer": "developer",
        "user": "user",
        "human": "user",
        "assistant": "assistant",
        "gpt": "assistant",
        "chatgpt": "assistant",
        "bing": "assistant",
        "bard": "assistant",
        "bot": "assistant",
        "model": "assistant",
        "tool": "tool",
        "observation": "tool",
        "function": "tool",
        "ipython": "tool",
        "function_call": "function_call",
    }
)
"""Role names as datasets spell them, and the role each one is.

``human``/``gpt``/``observation``/``function_call`` are ShareGPT's tags (LLaMA-Factory);
``chatgpt``, ``bing`` and ``bard`` appear in the original ShareGPT dumps; ``bot`` and
``model`` (Gemini) name the assistant elsewhere; ``function`` is OpenAI's legacy role of a
function's result and ``ipython`` Llama 3's role of a tool result: both are tool results.
"""

_MESSAGE_COLUMNS = ("messages", "conversations")


class ShapeError(ValueError):
    """A row that fits no known shape, or not the shape asked for (names the field)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """A row read into the message model: its messages, its tools as the row gives them
    (``None`` for none), the shape it was read as, and where each message came from in
    the row (``"conversations[3]"``, ``"system"``)."""

    messages: tuple[Message, ...]
    tools: Any
    shape: ShapeName
    sources: tuple[str, ...]


def is_missing(value: Any) -> bool:
    """Whether a column value stands for "nothing": ``None``, a float NaN (pandas and Ray
    Data give NaN for null in a column of floats or objects) or pandas' ``NA``."""
    if value is None:
        return True
    if isinstance(value, float) or type(value).__module__ == "numpy":
        try:
            return bool(math.isnan(value))
        except TypeError:
            return False
    return type(value).__name__ == "NAType"


def role_table(roles: Mapping[str, str] | None = None) -> dict[str, str]:
    """:data:`DEFAULT_ROLES` extended (or overridden) by ``roles``; each target must be
    one of :data:`ROLE_TARGETS`."""
    table = dict(DEFAULT_ROLES)
    for name, role in (roles or {}).items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"roles: expected role names as non-empty strings, got {name!r}")
        if role not in ROLE_TARGETS:
            raise ValueError(
                f"roles: {name!r} maps to {role!r}, expected one of {', '.join(ROLE_TARGETS)}"
            )
        table[name] = role
    return table


def read_conversation(
    row: Mapping[str, Any],
    shape: ShapeName | Literal["auto"] = "auto",
    *,
    roles: Mapping[str, str] | None = None,
    messages_column: str | None = None,
    tools_column: str = "tools",
    system_column: str = "system",
) -> Conversation:
    """The conversation of ``row`` in ``shape`` (``"auto"``: the shape the row has, see
    :func:`detect_shape`), with role names mapped by :func:`role_table` of ``roles``.

    ``messages_column`` is the column holding the messages (default: ``messages``, else
    ``conversations``); it may hold JSON text. Raises :class:`ShapeError` (a
    ``ValueError``) naming the field that does not fit, and for a row that fits no shape,
    each shape tried and why.
    """
    return Reader(shape, roles, messages_column, tools_column, system_column).read(row)


def detect_shape(row: Mapping[str, Any], messages_column: str | None = None) -> ShapeName:
    """The shape of ``row``, from its structure: ShareGPT entries have ``from``, a
    LLaMA-Factory message's content is a list of ``{"type", "value"}`` parts, and other
    messages with a ``role`` are OpenAI messages."""
    column, messages = _messages_of(row, messages_column, None)
    return _detected(messages, column)


class Reader:
    """:func:`read_conversation` with its settings checked and its role table built once
    (what a pipeline reading many rows uses)."""

    __slots__ = ("messages_column", "roles", "shape", "system_column", "tools_column")

    def __init__(
        self,
        shape: str = "auto",
        roles: Mapping[str, str] | None = None,
        messages_column: str | None = None,
        tools_column: str = "tools",
        system_column: str = "system",
    ) -> None:
        if shape != "auto" and shape not in SHAPES:
            raise ValueError(f"shape: expected auto, {', '.join(SHAPES)}, got {shape!r}")
        self.shape = shape
        self.roles = role_table(roles)
        self.messages_column = messages_column
        self.tools_column = tools_column
        self.system_column = system_column

    def read(self, row: Mapping[str, Any], shape: str | None = None) -> Conversation:
        """``row`` read in ``shape`` (default: this reader's)."""
        if not isinstance(row, Mapping):
            raise ShapeError(f"expected an object of columns, got {type(row).__name__}")
        shape = shape or self.shape
        column, messages = _messages_of(row, self.messages_column, shape)
        name = _detected(messages, column) if shape == "auto" else cast(ShapeName, shape)
        tools = _value(row, self.tools_column)
        if isinstance(tools, str) and tools.strip() in ("", "null"):
            tools = None  # JSON text of nothing
        if name == "sharegpt":
            system = _value(row, self.system_column)
            if system is not None and not isinstance(system, str):
                raise ShapeError(
                    f"{self.system_column}: expected the system prompt as a string, got "
                    f"{type(system).__name__}"
                )
            msgs, sources = _sharegpt(messages, column, system or None, self.roles)
        elif name == "llamafactory":
            msgs, sources = _llamafactory(messages, column, self.roles)
        else:
            msgs, sources = _openai(messages, column, self.roles)
        return Conversation(tuple(msgs), tools, name, tuple(sources))


# -- finding the messages -----------------------------------------------------------------


def _value(row: Mapping[str, Any], column: str) -> Any:
    value = row.get(column)
    return None if is_missing(value) else value


def _messages_of(
    row: Mapping[str, Any], column: str | None, shape: str | None
) -> tuple[str, list[Any]]:
    """The messages column of ``row`` and its list (JSON text parsed)."""
    if column is None:
        preferred = ("conversations", "messages") if shape == "sharegpt" else _MESSAGE_COLUMNS
        column = next((c for c in preferred if not is_missing(row.get(c))), None)
        if column is None:
            present = [c for c in preferred if c in row]
            if present:
                raise ShapeError(f"{present[0]}: null (the row has no conversation)")
            fields = ", ".join(map(str, row)) or "none"
            raise ShapeError(
                f"fits no known shape (tried {', '.join(SHAPES)}): no messages or "
                f"conversations field (fields: {fields})"
            )
    value = row.get(column)
    if is_missing(value):
        raise ShapeError(f"{column}: {'null' if column in row else 'missing'}")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ShapeError(f"{column}: not valid JSON ({exc})") from None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ShapeError(f"{column}: expected a list of messages, got {type(value).__name__}")
    return column, value if isinstance(value, list) else list(value)


def _detected(messages: list[Any], column: str) -> ShapeName:
    for k, item in enumerate(messages):
        if not isinstance(item, Mapping):
            why = f"{column}[{k}]: expected an object, got {type(item).__name__}"
            raise ShapeError(f"fits no known shape (tried {', '.join(SHAPES)}): {why}")
        if "from" in item and "role" not in item:
            return "sharegpt"
        if "role" not in item:
            keys = ", ".join(map(str, item)) or "none"
            raise ShapeError(
                f"fits no known shape: openai and llamafactory need {column}[{k}].role, "
                f"sharegpt {column}[{k}].from (its fields: {keys})"
            )
        content = item.get("content")
        if isinstance(content, (list, tuple)) and content:
            first = content[0]
            if isinstance(first, Mapping) and "value" in first and "text" not in first:
                return "llamafactory"
            return "openai"
        if isinstance(content, str) and content:
            return "openai"  # LLaMA-Factory's content is always a list of parts
    return "openai"  # no content tells (or no message): both read the same


# -- the shapes ----------------------------------------------------------------------------


def _openai(
    messages: list[Any], column: str, roles: Mapping[str, str]
) -> tuple[list[Message], list[str]]:
    mapped: list[Any] = []
    for i, item in enumerate(messages):
        if isinstance(item, Mapping):
            role = item.get("role")
            target = roles.get(role, role) if isinstance(role, str) else role
            if target == "function_call":
                text = item.get("content")
                mapped.append(_function_call_message(text, f"{column}[{i}].content", None))
                continue
            legacy = item.get("function_call")
            if target != role or (legacy is not None and item.get("tool_calls") is None):
                item = dict(item)
                item["role"] = target
                if legacy is not None and item.get("tool_calls") is None:
                    item["tool_calls"] = [{"function": legacy}]
                    del item["function_call"]
        mapped.append(item)
    try:
        msgs = coerce_messages(mapped)
    except ValueError as exc:
        text = str(exc)
        if column != "messages" and text.startswith("messages["):
            text = column + text[len("messages") :]
        raise ShapeError(text) from None
    return msgs, [f"{column}[{i}]" for i in range(len(msgs))]


def _sharegpt(
    entries: list[Any], column: str, system: str | None, roles: Mapping[str, str]
) -> tuple[list[Message], list[str]]:
    msgs: list[Message] = []
    sources: list[str] = []
    pending: deque[ToolCallPart] = deque()
    assistant_open = False  # the previous entry made an assistant message calls may join
    for j, entry in enumerate(entries):
        where = f"{column}[{j}]"
        if not isinstance(entry, Mapping):
            raise ShapeError(
                f"{where}: expected an object with from and value, got {type(entry).__name__}"
            )
        tag = entry.get("from")
        if not isinstance(tag, str):
            if tag is None and "role" in entry:
                raise ShapeError(f"{where}.from: missing (it has role: an OpenAI message)")
            raise ShapeError(f"{where}.from: expected a role name, got {tag!r}")
        role = roles.get(tag)
        if role is None:
            raise ShapeError(f"{where}.from: {_unknown_role(tag, roles)}")
        value = entry.get("value")
        weight = _weight(entry.get("weight"), f"{where}.weight")
        if role == "function_call":
            message = _function_call_message(value, f"{where}.value", weight)
            if assistant_open:
                merged = _merged(msgs[-1], message, where)
                msgs[-1] = merged
                sources[-1] = sources[-1].split("..")[0].rstrip("]") + f"..{j}]"
            else:
                msgs.append(message)
                sources.append(where)
            pending.extend(message.tool_calls)
            assistant_open = True
            continue
        if not isinstance(value, str):
            raise ShapeError(f"{where}.value: expected a string, got {type(value).__name__}")
        if role == "tool":
            call = pending.popleft() if pending else None
            name = call.name if call is not None else None
            call_id = call.id if call is not None else None
            msgs.append(Message("tool", value, name=name, tool_call_id=call_id, weight=weight))
        else:
            if role == "system" and j == 0 and system is not None:
                if value != system:
                    raise ShapeError(
                        f"{where}: a system message, and the row's system field differs "
                        "from it (give the system prompt once)"
                    )
                system = None
            pending.clear()
            msgs.append(Message(role, value, weight=weight))
        sources.append(where)
        assistant_open = role == "assistant"
    if system is not None:
        msgs.insert(0, Message("system", system))
        sources.insert(0, "system")
    return msgs, sources


def _llamafactory(
    messages: list[Any], column: str, roles: Mapping[str, str]
) -> tuple[list[Message], list[str]]:
    msgs: list[Message] = []
    pending: deque[ToolCallPart] = deque()
    for i, item in enumerate(messages):
        where = f"{column}[{i}]"
        if not isinstance(item, Mapping):
            raise ShapeError(f"{where}: expected a message object, got {type(item).__name__}")
        name = item.get("role")
        if not isinstance(name, str):
            raise ShapeError(f"{where}.role: expected a role name, got {name!r}")
        role = roles.get(name)
        if role is None:
            raise ShapeError(f"{where}.role: {_unknown_role(name, roles)}")
        weight = _weight(item.get("loss_weight"), f"{where}.loss_weight")
        parts = _llamafactory_parts(item.get("content"), f"{where}.content")
        if role == "function_call":
            text = "".join(p.text for p in parts if isinstance(p, TextPart))
            message = _function_call_message(text, f"{where}.content", weight)
        elif role == "tool":
            call = pending.popleft() if pending else None
            message = Message(
                "tool",
                parts,
                name=call.name if call is not None else None,
                tool_call_id=call.id if call is not None else None,
                weight=weight,
            )
        else:
            message = Message(role, parts, weight=weight)
        if role != "tool":
            pending = deque(message.tool_calls)
        msgs.append(message)
    return msgs, [f"{column}[{i}]" for i in range(len(msgs))]


def _llamafactory_parts(content: Any, where: str) -> list[Part]:
    if is_missing(content):
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, (list, tuple)):
        raise ShapeError(
            f"{where}: expected a list of {{type, value}} parts, got {type(content).__name__}"
        )
    parts: list[Part] = []
    for k, part in enumerate(content):
        at = f"{where}[{k}]"
        if not isinstance(part, Mapping):
            raise ShapeError(f"{at}: expected a {{type, value}} part, got {type(part).__name__}")
        kind = part.get("type")
        value = part.get("value")
        if kind == "tool_call":
            parts.extend(_calls(value, f"{at}.value", single=True))
            continue
        if not isinstance(value, str):
            raise ShapeError(f"{at}.value: expected a string, got {type(value).__name__}")
        if kind == "text":
            parts.append(TextPart(value))
        elif kind == "reasoning":
            parts.append(ThinkingPart(value))
        else:
            raise ShapeError(
                f"{at}.type: {kind!r} is not a text part (expected text, reasoning or "
                "tool_call; media parts are not rendered by text-only formats)"
            )
    return parts


# -- shared pieces --------------------------------------------------------------------------


def _function_call_message(value: Any, where: str, weight: float | None) -> Message:
    """An assistant message holding the call(s) of a ``function_call`` entry."""
    return Message("assistant", _calls(value, where, single=False), weight=weight)


def _calls(value: Any, where: str, *, single: bool) -> list[ToolCallPart]:
    """The calls of ``value``: JSON text (or the decoded value) of one call
    ``{"name", "arguments"}`` or, unless ``single``, of a list of calls."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ShapeError(f"{where}: not valid JSON for a tool call ({exc})") from None
    if isinstance(value, Mapping):
        return [_call(value, where)]
    if not single and isinstance(value, list) and value:
        return [_call(call, f"{where}[{k}]") for k, call in enumerate(value)]
    expected = "a tool call {name, arguments}" + ("" if single else " or a list of them")
    raise ShapeError(f"{where}: expected {expected}, got {_describe(value)}")


def _call(call: Any, where: str) -> ToolCallPart:
    if not isinstance(call, Mapping):
        raise ShapeError(
            f"{where}: expected a tool call {{name, arguments}}, got {_describe(call)}"
        )
    function = call.get("function", call)  # an OpenAI-shaped call is read too
    if not isinstance(function, Mapping):
        raise ShapeError(f"{where}.function: expected an object, got {_describe(function)}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ShapeError(f"{where}.name: expected a non-empty string, got {name!r}")
    if "arguments" not in function:
        raise ShapeError(f"{where}.arguments: missing")
    try:
        arguments = serialize_arguments(function["arguments"])
    except (TypeError, ValueError) as exc:
        raise ShapeError(f"{where}.arguments: not JSON-serialisable ({exc})") from None
    call_id = call.get("id")
    if is_missing(call_id):
        call_id = None
    elif not isinstance(call_id, str):
        raise ShapeError(f"{where}.id: expected a string, got {type(call_id).__name__}")
    return ToolCallPart(name, arguments, call_id)


def _merged(previous: Message, calls: Message, where: str) -> Message:
    """An assistant message and the calls of the ``function_call`` entry after it."""
    if calls.weight != previous.weight:
        raise ShapeError(
            f"{where}.weight: {calls.weight} differs from the weight of the assistant turn "
            f"it continues ({previous.weight})"
        )
    return Message("assistant", [*previous.parts, *calls.parts], weight=previous.weight)


def _weight(value: Any, where: str) -> float | None:
    if is_missing(value):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ShapeError(f"{where}: expected a number >= 0, got {value!r}")
    if not 0 <= value < math.inf:
        raise ShapeError(f"{where}: expected a finite number >= 0, got {value!r}")
    return float(value)


def _unknown_role(name: str, roles: Mapping[str, str]) -> str:
    known = ", ".join(sorted(roles))
    return (
        f"unknown role {name!r} (known: {known}); map it with --role {name}=ROLE "
        f"(Python: roles={{{name!r}: ROLE}}), ROLE one of {', '.join(ROLE_TARGETS)}"
    )


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    return type(value).__name__
