"""The official chat templates as test oracles: expected ids come from here, never from
the code under test."""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

import jinja2.sandbox

REPO = Path(__file__).resolve().parents[1]


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


def shared_path(relative: str) -> Path:
    """A file of the shared data directory: ``../shared`` beside the checkout, else the
    directory that holds the hub cache (``HF_HUB_CACHE``)."""
    bases = [REPO.parent / "shared"]
    if os.environ.get("HF_HUB_CACHE"):
        bases.append(Path(os.environ["HF_HUB_CACHE"]).resolve().parent)
    for base in bases:
        if (base / relative).is_file():
            return base / relative
    raise FileNotFoundError(f"{relative}: in none of {', '.join(map(str, bases))}")


_OFFICIAL_KIMI = {
    "moonshotai/Kimi-K2-Thinking": "templates/moonshotai/Kimi-K2-Thinking/chat_template.jinja",
    "moonshotai/Kimi-K2.5": "templates/moonshotai/Kimi-K2.5/chat_template.jinja",
}


@functools.cache
def official_kimi_template(model_id: str) -> str:
    """Moonshot's own chat template of a Kimi model (``../shared/PROVENANCE.md``):
    K2-Thinking's and K2.5's from ``templates/``, K2-Instruct's the one embedded in its
    ``tokenizer_config.json``. (The hub cache's ``chat_template.jinja`` of the K2 models
    are llama.cpp's edited copies, not the oracle.)"""
    if model_id == "moonshotai/Kimi-K2-Instruct":
        config = chat_template_file(model_id, "tokenizer_config.json")
        template: str = json.loads(config.read_text(encoding="utf-8"))["chat_template"]
        return template
    return shared_path(_OFFICIAL_KIMI[model_id]).read_text(encoding="utf-8")


def deep_sort_dict(obj: Any) -> Any:
    """Moonshot's helper (``tokenization_kimi.py``): sort the keys of every dict,
    recursively; its ``apply_chat_template`` applies it to ``tools`` before templating."""
    if isinstance(obj, dict):
        return {k: deep_sort_dict(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [deep_sort_dict(item) for item in obj]
    return obj


def kimi_template_text(
    tokenizer: Any,
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    add_generation_prompt: bool,
    **kwargs: Any,
) -> str:
    """A Kimi template rendered by transformers' ``apply_chat_template`` (its immutable
    sandbox) after Moonshot's deep sort of ``tools``; an empty conversation, which
    ``apply_chat_template`` refuses, by the function it renders with."""
    sorted_tools = deep_sort_dict(copy.deepcopy(tools)) if tools else None
    if not messages:
        from transformers.utils.chat_template_utils import render_jinja_template

        rendered, _ = render_jinja_template(
            [[]],
            tools=sorted_tools,
            chat_template=template,
            add_generation_prompt=add_generation_prompt,
            **kwargs,
        )
        empty: str = rendered[0]
        return empty
    text: str = tokenizer.apply_chat_template(
        copy.deepcopy(messages),
        tools=sorted_tools,
        chat_template=template,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    return text


def trl_template(name: str) -> str:
    """A chat template TRL keeps byte for byte (``trl/chat_templates/{name}.jinja``; see
    that directory's README for each file's origin), for models whose template is not in
    the hub cache (Qwen3.5: ``qwen3_5_think``, Qwen3.8: ``qwen3_8``). Read from the
    installed package without importing it (TRL imports PyTorch); the test skips where TRL
    (the integration extra, which CI installs) is missing."""
    import importlib.util

    import pytest

    found = importlib.util.find_spec("trl")
    if found is None or found.origin is None:
        pytest.skip("TRL (the integration extra) holds the official Qwen3.5/3.8 templates")
    path = Path(found.origin).parent / "chat_templates" / f"{name}.jinja"
    return path.read_text("utf-8")


def template_text(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
    **kwargs: Any,
) -> str:
    """``apply_chat_template(tokenize=False)`` of a chat template given as text, for a
    tokenizer transformers cannot load (tml-renderers' stand-ins): transformers' own message
    normalisation (keys whose value is ``None`` dropped) and ``render_jinja_template``
    (``continue_final_message`` included)."""
    from transformers.utils.chat_template_utils import (
        _normalize_chat_messages,
        render_jinja_template,
    )

    rendered, _ = render_jinja_template(
        [_normalize_chat_messages(messages)],
        tools=tools,
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    text: str = rendered[0]
    return text


def server_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as vLLM hands it to a chat template (``_postprocess_messages`` in
    ``vllm/entrypoints/chat_utils.py`` at vllm-project/vllm
    bd5ec6d50b83652c21a570b81c1fb5219a6ebf76): each call's arguments text parsed into an
    object (``""`` and ``None`` as ``{}``), an empty ``tool_calls`` list removed."""
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("role") != "assistant" or not isinstance(m.get("tool_calls"), list):
            continue
        if not m["tool_calls"]:
            del m["tool_calls"]
            continue
        for call in m["tool_calls"]:
            arguments = call["function"].get("arguments")
            if not arguments:
                call["function"]["arguments"] = {}
            elif not isinstance(arguments, (dict, list)):
                call["function"]["arguments"] = json.loads(arguments)
    return out
