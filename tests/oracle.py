"""The official chat templates as test oracles: expected ids come from here, never from
the code under test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2.sandbox


def hf_template_ids(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool,
    **kwargs: Any,
) -> list[int]:
    """Ids of ``tokenizer.apply_chat_template`` (the official template of the tokenizer),
    tokenized the way ``apply_chat_template(tokenize=True)`` does."""
    text = hf_template_text(
        tokenizer, messages, tools, add_generation_prompt=add_generation_prompt, **kwargs
    )
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False)
    return ids


def hf_template_text(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool,
    **kwargs: Any,
) -> str:
    text: str = tokenizer.apply_chat_template(
        messages,
        tools=tools,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    return text


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: Any = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    """transformers' ``tojson`` filter (jinja's own escapes HTML characters)."""
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def sandboxed_template(path: str | Path) -> jinja2.Template:
    """A chat template file rendered with jinja2's mutable sandbox (the later Kimi
    templates call ``list.append``/``pop``, which transformers' immutable sandbox refuses)."""
    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = _tojson

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(Path(path).read_text(encoding="utf-8"))


def chat_template_file(model_id: str, filename: str = "chat_template.jinja") -> Path:
    """Path of a file of ``model_id`` in the hub cache (or downloaded when online)."""
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(model_id, filename))
