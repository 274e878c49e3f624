"""Finding a renderer by name or model id."""

from __future__ import annotations

import importlib
from typing import Any

from renderers.rendering import Renderer

__all__ = ["RENDERERS", "describe_renderers", "get_renderer", "renderer_names"]

# name -> (module, class, default model id). Modules are imported on first use.
RENDERERS: dict[str, tuple[str, str, str]] = {
    "qwen3": ("renderers.qwen3", "Qwen3Renderer", "Qwen/Qwen3-8B"),
    "deepseek_v3": ("renderers.deepseek_v3", "DeepSeekV3Renderer", "deepseek-ai/DeepSeek-V3"),
    "deepseek_v3.1": ("renderers.deepseek_v3", "DeepSeekV31Renderer", "deepseek-ai/DeepSeek-V3.1"),
    "gpt_oss": ("renderers.gpt_oss", "GptOssRenderer", "openai/gpt-oss-20b"),
    "kimi_k2": ("renderers.kimi_k2", "KimiK2Renderer", "moonshotai/Kimi-K2-Instruct"),
    "kimi_k2_thinking": (
        "renderers.kimi_k2",
        "KimiK2ThinkingRenderer",
        "moonshotai/Kimi-K2-Thinking",
    ),
}


def renderer_names() -> list[str]:
    """The names :func:`get_renderer` accepts (besides model ids)."""
    return sorted(RENDERERS)


def describe_renderers() -> str:
    """Every renderer as ``name (default model id)``, comma-separated."""
    return ", ".join(f"{name} ({model})" for name, (_, _, model) in sorted(RENDERERS.items()))


def _resolve(name_or_model_id: str) -> str:
    key = name_or_model_id.strip()
    if key in RENDERERS:
        return key
    lowered = key.lower()
    for name, (_, _, model_id) in RENDERERS.items():
        if model_id.lower() == lowered:
            return name
    raise ValueError(
        f"unknown renderer or model id {name_or_model_id!r}; known: {describe_renderers()}"
    )


def get_renderer(name_or_model_id: str, tokenizer: Any = None, **options: Any) -> Renderer:
    """The renderer for a name (``"qwen3"``) or model id (``"Qwen/Qwen3-8B"``).

    Loads the model's tokenizer when ``tokenizer`` is not given. ``options`` are the
    format's options (for example ``enable_thinking=False``); they become the defaults of
    every call and can be overridden per call.
    """
    name = _resolve(name_or_model_id)
    module_name, class_name, _ = RENDERERS[name]
    cls = getattr(importlib.import_module(module_name), class_name)
    renderer: Renderer = cls(tokenizer, **options)
    return renderer
