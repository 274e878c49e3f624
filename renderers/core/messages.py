"""The message model shared by every renderer: ordered parts, OpenAI dicts in and out.

A message's ``content`` is either a plain ``str`` or an ordered tuple of parts, in the
order the model sampled them: ``(ThinkingPart, TextPart, ToolCallPart, ThinkingPart, ...)``
is legal. A message whose content is only plain text always holds a ``str``, so code that
expects strings keeps working; :attr:`Message.parts` always gives the tuple.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "Message",
    "Part",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "UnparsedToolCallPart",
    "coerce_messages",
    "serialize_arguments",
]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text meant for the reader.

    ``channel`` keeps a Harmony channel (``"final"``, or ``"commentary"`` for a preamble);
    ``incomplete`` marks text cut off because the sample ran out of tokens.
    """

    text: str
    channel: str | None = None
    incomplete: bool = False


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Reasoning the model produced before or between answers.

    ``attributes`` holds metadata of text-level reasoning tags (for example the
    ``thought_type`` and ``confidence`` of ``<thinking ...>``); it is empty for token-level
    formats.
    """

    text: str
    channel: str | None = None
    incomplete: bool = False
    attributes: tuple[tuple[str, str], ...] = ()

    def attribute(self, name: str) -> str | None:
        """The text of attribute ``name`` (matched case-insensitively; the first one wins,
        as in HTML), or ``None`` when there is none. Typed access to the known
        ``<thinking>`` attributes: :func:`renderers.text.confidence`."""
        key = name.lower()
        return next((value for k, value in self.attributes if k.lower() == key), None)


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call whose arguments are the raw JSON text exactly as sampled or given.

    ``id`` is the format's call id where it has one (Kimi-K2), else ``None``.
    ``content_type`` keeps a Harmony content type such as ``"json"``.
    """

    name: str
    arguments: str
    id: str | None = None
    channel: str | None = None
    content_type: str | None = None

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON (raises ``json.JSONDecodeError`` if invalid)."""
        return json.loads(self.arguments)


@dataclass(frozen=True, slots=True)
class UnparsedToolCallPart:
    """A tool call the parser could not decode, kept verbatim with the reason.

    ``raw`` is the text between the format's tool-call markers; ``name`` is filled when
    the name was still recognisable, ``arguments`` with the arguments' text as sampled when
    the format sets it apart (what :meth:`Message.to_openai` reports, as OpenAI reports
    invalid JSON arguments).
    """

    raw: str
    error: str
    name: str | None = None
    id: str | None = None
    channel: str | None = None
    incomplete: bool = False
    arguments: str | None = None


Part: TypeAlias = TextPart | ThinkingPart | ToolCallPart | UnparsedToolCallPart
_PART_TYPES = (TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart)


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False)


def serialize_arguments(arguments: Any) -> str:
    """Tool-call arguments as JSON text: strings are kept verbatim, other values are
    serialized the way the official templates' ``tojson`` does (``ensure_ascii=False``,
    default separators, keys in given order)."""
    if isinstance(arguments, str):
        return arguments
    return _JSON_ENCODER.encode(arguments)


def _is_plain_text(part: Part) -> bool:
    return type(part) is TextPart and part.channel is None and not part.incomplete


def _normalized(parts: Sequence[Part]) -> str | tuple[Part, ...]:
    """Parts as a message stores them: only plain text parts become the joined ``str``."""
    for p in parts:
        if not _is_plain_text(p):
            return tuple(parts)
    return "".join(p.text for p in parts if type(p) is TextPart)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    ``content`` is a ``str`` or an ordered tuple of parts (a list is accepted and stored
    as a tuple). Content made only of plain text parts is stored as the joined ``str``.
    """

    role: str
    content: str | Sequence[Part] = ""
    name: str | None = None
    tool_call_id: str | None = None
    weight: float | None = None
    """The loss weight of this message in a supervised example, overriding the ``train_on``
    mode (0: not trained; 1: trained; ``None``: the mode decides)."""

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(f"role: expected a non-empty string, got {self.role!r}")
        if self.weight is not None:
            object.__setattr__(self, "weight", _checked_weight(self.weight, "weight"))
        content = self.content
        if isinstance(content, str):
            return
        if not isinstance(content, (list, tuple)):
            raise ValueError(
                f"content: expected a string or a sequence of parts, got {type(content).__name__}"
            )
        for i, part in enumerate(content):
            if not isinstance(part, _PART_TYPES):
                raise ValueError(
                    f"content[{i}]: expected TextPart, ThinkingPart, ToolCallPart or "
                    f"UnparsedToolCallPart, got {type(part).__name__}"
                )
        object.__setattr__(self, "content", _normalized(content))

    # -- views -------------------------------------------------------------------------

    @property
    def parts(self) -> tuple[Part, ...]:
        """The content as a tuple of parts (a non-empty string becomes one ``TextPart``)."""
        content = self.content
        if isinstance(content, str):
            return (TextPart(content),) if content else ()
        assert isinstance(content, tuple)  # lists become tuples in __post_init__
        return content

    @property
    def text(self) -> str:
        """All text parts joined, without thinking or tool calls."""
        content = self.content
        if isinstance(content, str):
            return content
        return "".join(p.text for p in content if type(p) is TextPart)

    @property
    def thinking(self) -> str | None:
        """All thinking parts joined, or ``None`` when the message has none."""
        content = self.content
        if isinstance(content, str):
            return None
        texts = [p.text for p in content if type(p) is ThinkingPart]
        return "".join(texts) if texts else None

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The parsed tool calls, in order (see :attr:`attempted_tool_calls` for all)."""
        content = self.content
        if isinstance(content, str):
            return ()
        return tuple(p for p in content if type(p) is ToolCallPart)

    @property
    def attempted_tool_calls(self) -> tuple[ToolCallPart | UnparsedToolCallPart, ...]:
        """Every tool call the model made, parsed or not, in order: an agent loop answers
        each (an unparsed one with an error) rather than taking the turn as final."""
        content = self.content
        if isinstance(content, str):
            return ()
        return tuple(p for p in content if isinstance(p, (ToolCallPart, UnparsedToolCallPart)))

    @property
    def called_tool(self) -> bool:
        """Whether the model called a tool, including calls that could not be parsed."""
        return bool(self.attempted_tool_calls)

    # -- conversion ----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from an OpenAI-style chat dict or from :meth:`to_dict` output.

        Accepts ``content`` as a string, ``None`` or a list of parts
        (``{"type": "text", "text": ...}``, ``{"type": "thinking", "text": ...}``, ...),
        ``reasoning_content`` (or ``thinking``), ``tool_calls`` whose
        ``function.arguments`` is a JSON string or a JSON-serialisable value,
        ``tool_call_id``, ``name``, and a per-message loss weight: ``weight`` (a number),
        or ``train`` / ``trainable`` (a bool, tinker-cookbook 0.x's ``trainable`` field).
        A field whose value is ``None`` counts as absent. Errors name the offending field.
        """
        if type(data) is dict and data.keys() <= _PLAIN_FIELDS:  # the common shape, fast
            role = data.get("role")
            content = data.get("content")
            name = data.get("name")
            tool_call_id = data.get("tool_call_id")
            if (
                type(role) is str
                and role
                and type(content) is str
                and (name is None or type(name) is str)
                and (tool_call_id is None or type(tool_call_id) is str)
            ):
                if cls is Message:
                    return _message(role, content, name, tool_call_id, None)
                return cls(role, content, name, tool_call_id)
        elif type(data) is not dict and not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping, got {type(data).__name__}")
        get = data.get
        role = get("role")
        if not isinstance(role, str) or not role:
            raise ValueError(f"role: expected a non-empty string, got {role!r}")
        content = get("content")
        name = get("name")
        tool_call_id = get("tool_call_id")
        if get("weight") is None and get("train") is None and get("trainable") is None:
            weight = None
        else:
            weight = _weight_field(data)
        reasoning = get("reasoning_content", _ABSENT)
        if reasoning is _ABSENT:
            reasoning = get("thinking")
        tool_calls = get("tool_calls")
        if (
            type(content) is str
            and tool_calls is None
            and reasoning is None
            and (name is None or type(name) is str)
            and (tool_call_id is None or type(tool_call_id) is str)
        ):
            if cls is Message:
                return _message(role, content, name, tool_call_id, weight)
            return cls(role, content, name, tool_call_id, weight)
        parts: list[Part] = []
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise ValueError(
                    f"reasoning_content: expected a string, got {type(reasoning).__name__}"
                )
            if reasoning:
                parts.append(ThinkingPart(reasoning))
        if type(content) is str:
            if content:
                parts.append(TextPart(content))
        elif content is not None:
            parts.extend(_content_parts(content))
        if tool_calls is not None:
            if not isinstance(tool_calls, (list, tuple)):
                raise ValueError(f"tool_calls: expected a list, got {type(tool_calls).__name__}")
            for i, call in enumerate(tool_calls):
                try:
                    parts.append(_tool_call_part(call))
                except ValueError as exc:
                    raise ValueError(f"tool_calls[{i}].{exc}") from None
        if name is not None and not isinstance(name, str):
            raise ValueError(f"name: expected a string, got {type(name).__name__}")
        if tool_call_id is not None and not isinstance(tool_call_id, str):
            raise ValueError(f"tool_call_id: expected a string, got {type(tool_call_id).__name__}")
        if cls is Message:  # every part is a part type: only normalisation is left
            return _message(role, _normalized(parts), name, tool_call_id, weight)
        return cls(role, parts, name=name, tool_call_id=tool_call_id, weight=weight)

    def to_dict(self) -> dict[str, Any]:
        """A lossless dict: ``content`` is a string or the ordered list of part dicts."""
        out: dict[str, Any] = {"role": self.role}
        if isinstance(self.content, str):
            out["content"] = self.content
        else:
            out["content"] = [_part_to_dict(p) for p in self.content]
        if self.name is not None:
            out["name"] = self.name
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.weight is not None:
            out["weight"] = self.weight
        return out

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat shape: ``content``, ``reasoning_content`` and ``tool_calls``.

        This shape cannot express interleaving; use :meth:`to_dict` to keep part order.
        Unparsed tool calls are included as OpenAI reports calls with invalid JSON: the
        arguments' text as sampled (the raw call text when the format does not set the
        arguments apart) and the name if readable, else ``""``.
        """
        out: dict[str, Any] = {"role": self.role}
        calls = self.attempted_tool_calls
        text = self.text
        out["content"] = text if (text or not calls) else None
        thinking = self.thinking
        if thinking is not None:
            out["reasoning_content"] = thinking
        if calls:
            out["tool_calls"] = [_openai_call(c) for c in calls]
        if self.name is not None:
            out["name"] = self.name
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


def _openai_call(call: ToolCallPart | UnparsedToolCallPart) -> dict[str, Any]:
    if type(call) is ToolCallPart:
        name, arguments = call.name, call.arguments
    else:
        assert type(call) is UnparsedToolCallPart
        name = call.name or ""
        arguments = call.arguments if call.arguments is not None else call.raw
    return {
        **({"id": call.id} if call.id is not None else {}),
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


_WEIGHT_FIELDS = ("weight", "train", "trainable")


_ABSENT: Any = object()
_PLAIN_FIELDS = frozenset(("role", "content", "name", "tool_call_id"))

_SLOTS: Any = Message.__dict__  # the slot descriptors: setting them skips __setattr__
_set_role = _SLOTS["role"].__set__
_set_content = _SLOTS["content"].__set__
_set_name = _SLOTS["name"].__set__
_set_tool_call_id = _SLOTS["tool_call_id"].__set__
_set_weight = _SLOTS["weight"].__set__


def _message(
    role: str,
    content: str | tuple[Part, ...],
    name: str | None,
    tool_call_id: str | None,
    weight: float | None,
) -> Message:
    """A ``Message`` from fields :meth:`Message.from_dict` has already checked and
    normalised (its slots set directly: ``__post_init__`` would check them again)."""
    m = object.__new__(Message)
    _set_role(m, role)
    _set_content(m, content)
    _set_name(m, name)
    _set_tool_call_id(m, tool_call_id)
    _set_weight(m, weight)
    return m


def _weight_field(data: Mapping[str, Any]) -> float | None:
    """The loss weight a message dict asks for, from whichever weight field it has."""
    found = [key for key in _WEIGHT_FIELDS if data.get(key) is not None]
    if not found:
        return None
    if len(found) > 1:
        raise ValueError(f"{found[1]}: conflicts with {found[0]} (give one weight field)")
    key = found[0]
    value = data[key]
    if key != "weight":
        if type(value) is not bool:
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return 1.0 if value else 0.0
    return _checked_weight(value, key)


def _checked_weight(value: Any, key: str) -> float:
    number = None
    if type(value) is not bool and isinstance(value, (int, float, numbers.Real)):
        number = float(value)
    if number is None or not number >= 0:  # also rejects NaN
        raise ValueError(f"{key}: expected a number >= 0, got {value!r}")
    if number == float("inf"):
        raise ValueError(f"{key}: expected a finite number, got {value!r}")
    return number


def _content_parts(content: Any) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, (list, tuple)):
        raise ValueError(
            f"content: expected a string, None or a list of parts, got {type(content).__name__}"
        )
    parts: list[Part] = []
    for i, item in enumerate(content):
        if isinstance(item, _PART_TYPES):
            parts.append(item)
            continue
        if isinstance(item, str):
            parts.append(TextPart(item))
            continue
        if not isinstance(item, Mapping):
            raise ValueError(f"content[{i}]: expected a part or a dict, got {type(item).__name__}")
        try:
            parts.append(_part_from_dict(item))
        except ValueError as exc:
            raise ValueError(f"content[{i}].{exc}") from None
    return parts


def _str_field(d: Mapping[str, Any], key: str, *, required: bool = True) -> Any:
    value = d.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string, got {type(value).__name__}")
    return value


def _part_from_dict(d: Mapping[str, Any]) -> Part:
    kind = d.get("type", "text")
    channel = _str_field(d, "channel", required=False)
    incomplete = bool(d.get("incomplete", False))
    if kind == "text":
        return TextPart(_str_field(d, "text"), channel=channel, incomplete=incomplete)
    if kind in ("thinking", "reasoning"):
        key = "text" if "text" in d else kind
        attributes = d.get("attributes") or {}
        if not isinstance(attributes, Mapping):
            raise ValueError("attributes: expected a mapping")
        return ThinkingPart(
            _str_field(d, key),
            channel=channel,
            incomplete=incomplete,
            attributes=tuple((str(k), str(v)) for k, v in attributes.items()),
        )
    if kind in ("tool_call", "function"):
        return _tool_call_part(d)
    if kind == "unparsed_tool_call":
        return UnparsedToolCallPart(
            _str_field(d, "raw"),
            _str_field(d, "error"),
            name=_str_field(d, "name", required=False),
            id=_str_field(d, "id", required=False),
            channel=channel,
            incomplete=incomplete,
            arguments=_str_field(d, "arguments", required=False),
        )
    if kind in _MEDIA_TYPES:
        raise ValueError(
            f"type: {kind!r} parts are not supported: the renderers write text (images, "
            "audio and video of multimodal models are out of scope)"
        )
    raise ValueError(
        f"type: unknown part type {kind!r} (expected text, thinking, tool_call or "
        "unparsed_tool_call)"
    )


_MEDIA_TYPES = frozenset(
    ["image", "image_url", "input_image", "video", "video_url", "audio", "input_audio"]
)
"""OpenAI's and Hugging Face's spellings of multimodal parts."""


def _tool_call_part(call: Any) -> ToolCallPart:
    if type(call) is not dict:
        if isinstance(call, ToolCallPart):
            return call
        if not isinstance(call, Mapping):
            raise ValueError(f"expected a dict, got {type(call).__name__}")
    function = call.get("function", call)
    if type(function) is not dict and not isinstance(function, Mapping):
        raise ValueError(f"function: expected a dict, got {type(function).__name__}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"function.name: expected a non-empty string, got {name!r}")
    if "arguments" not in function:
        raise ValueError("function.arguments: missing")
    try:
        arguments = serialize_arguments(function["arguments"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"function.arguments: not JSON-serialisable ({exc})") from None
    call_id = call.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ValueError(f"id: expected a string, got {type(call_id).__name__}")
    channel = call.get("channel")
    content_type = call.get("content_type")
    if channel is not None or content_type is not None:
        channel = _str_field(call, "channel", required=False)
        content_type = _str_field(call, "content_type", required=False)
    return ToolCallPart(name, arguments, call_id, channel, content_type)


def _part_to_dict(part: Part) -> dict[str, Any]:
    out: dict[str, Any]
    if type(part) is TextPart:
        out = {"type": "text", "text": part.text}
    elif type(part) is ThinkingPart:
        out = {"type": "thinking", "text": part.text}
        if part.attributes:
            out["attributes"] = dict(part.attributes)
    elif type(part) is ToolCallPart:
        out = {"type": "tool_call", "name": part.name, "arguments": part.arguments}
        if part.id is not None:
            out["id"] = part.id
        if part.content_type is not None:
            out["content_type"] = part.content_type
    else:
        assert type(part) is UnparsedToolCallPart
        out = {"type": "unparsed_tool_call", "raw": part.raw, "error": part.error}
        if part.name is not None:
            out["name"] = part.name
        if part.id is not None:
            out["id"] = part.id
        if part.arguments is not None:
            out["arguments"] = part.arguments
    if part.channel is not None:
        out["channel"] = part.channel
    if getattr(part, "incomplete", False):
        out["incomplete"] = True
    return out


def coerce_messages(messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
    """Turn a conversation of ``Message`` objects and/or dicts into ``Message`` objects.

    Raises ``ValueError`` naming the message index and field, e.g.
    ``messages[2].tool_calls[0].function.name: expected a non-empty string``.
    """
    if isinstance(messages, (str, bytes, Mapping)):
        raise ValueError("messages: expected a sequence of messages, not a single value")
    out: list[Message] = []
    append = out.append
    from_dict = Message.from_dict
    for i, m in enumerate(messages):
        if type(m) is not dict:
            if isinstance(m, Message):
                append(m)
                continue
            if not isinstance(m, Mapping):
                raise ValueError(
                    f"messages[{i}]: expected a Message or a dict, got {type(m).__name__}"
                )
        try:
            append(from_dict(m))
        except ValueError as exc:
            raise ValueError(f"messages[{i}].{exc}") from None
    return out


def join_text(parts: Sequence[Part]) -> str:
    """The text parts of ``parts`` joined (how list content is rendered by templates
    that only accept strings)."""
    return "".join(p.text for p in parts if type(p) is TextPart)
