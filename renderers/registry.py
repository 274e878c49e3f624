"""Finding a renderer by name or model id.

Adding a model family is one line here (its module in :data:`FAMILIES`): the names and
model ids come from the renderer classes the module defines (``name``, ``model_ids``).
Any other model id (or local directory) with a chat template gets the template renderer
(:mod:`renderers.template`).
"""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any

from renderers.core.loading import TokenizerUnavailableError, load_tokenizer
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer

__all__ = [
    "FAMILIES",
    "describe_renderers",
    "get_renderer",
    "renderer_class",
    "renderer_classes",
    "renderer_names",
]

FAMILIES: tuple[str, ...] = (
    "renderers.qwen3",
    "renderers.qwen3_2507",
    "renderers.qwen2_5",
    "renderers.qwen3_5",
    "renderers.deepseek_v3",
    "renderers.deepseek_v3_1",
    "renderers.deepseek_r1",
    "renderers.deepseek_v4",
    "renderers.deepseek_v4_1",
    "renderers.kimi_k2",
    "renderers.kimi_k2_5",
    "renderers.gpt_oss",
    "renderers.nemotron3",
    "renderers.glm5",
    "renderers.llama3",
    "renderers.llama4",
    "renderers.mistral",
)
"""The modules of the model families; each defines one or more renderer classes."""


@functools.cache
def renderer_classes() -> list[type[Renderer]]:
    """Every renderer class, in the order of :data:`FAMILIES` and of each module."""
    classes: list[type[Renderer]] = []
    for module_name in FAMILIES:
        module = importlib.import_module(module_name)
        classes += [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type)
            and issubclass(obj, Renderer)
            and obj.__module__ == module_name
            and "name" in vars(obj)
        ]
    return classes


def renderer_names() -> list[str]:
    """The names :func:`get_renderer` accepts (besides model ids)."""
    return sorted(cls.name for cls in renderer_classes())


def describe_renderers() -> str:
    """Every renderer as ``name (default model id)``, comma-separated."""
    return ", ".join(
        f"{cls.name} ({cls.default_model})"
        for cls in sorted(renderer_classes(), key=lambda c: c.name)
    )


def renderer_class(name_or_model_id: str) -> type[Renderer]:
    """The renderer class for a name (``"qwen3"``) or model id (``"Qwen/Qwen3-8B"``)."""
    key = _checked_name(name_or_model_id).strip()
    lowered = key.lower()
    for cls in renderer_classes():
        if key == cls.name or lowered in (m.lower() for m in cls.model_ids):
            return cls
    raise ValueError(
        f"unknown renderer or model id {name_or_model_id!r}; known: {describe_renderers()}"
    )


def _checked_name(name_or_model_id: object) -> str:
    """``name_or_model_id`` if it is a string, else a ``TypeError`` saying what to pass (a
    tokenizer given first is the usual slip)."""
    if isinstance(name_or_model_id, str):
        return name_or_model_id
    kind = type(name_or_model_id).__name__
    if hasattr(name_or_model_id, "encode") and hasattr(name_or_model_id, "decode"):
        model = getattr(name_or_model_id, "name_or_path", None) or "MODEL_ID"
        raise TypeError(
            f"name_or_model_id: expected a renderer name or a model id, got a {kind}; pass "
            f"the tokenizer second: get_renderer({model!r}, tokenizer)"
        )
    raise TypeError(f"name_or_model_id: expected a renderer name or a model id, got {kind}")


def get_renderer(
    name_or_model_id: str, tokenizer: Any = None, *, generic: bool = False, **options: Any
) -> Renderer:
    """The renderer for a name (``"qwen3"``) or model id (``"Qwen/Qwen3-8B"``).

    Loads the model's tokenizer when ``tokenizer`` is not given (a model id loads that
    model's tokenizer; a name loads the renderer's default model). ``options`` are the
    format's options (for example ``enable_thinking=False``); they become the defaults of
    every call and can be overridden per call.

    A model id (or local directory) without a specialised renderer gets a
    :class:`~renderers.template.TemplateRenderer` built from the model's own chat template
    (``renderer.name == "template"``); ``generic=True`` uses it for a supported model too.
    """
    key = _checked_name(name_or_model_id).strip()
    try:
        cls: type[Renderer] | None = renderer_class(key)
    except ValueError:
        cls = None
    model_id = key
    if cls is not None:
        lowered = key.lower()
        model_id = next((m for m in cls.model_ids if m.lower() == lowered), cls.default_model)
        if not generic:
            if tokenizer is None:
                tokenizer = load_tokenizer(cls.tokenizer_source or model_id)
            return cls(tokenizer, **options)
    if tokenizer is None:
        try:
            tokenizer = load_tokenizer(model_id)
        except TokenizerUnavailableError as exc:
            if cls is not None:
                raise
            if "/" not in key and not os.path.isdir(key):
                # Most likely a misspelt renderer name: the hub's reasons would only hide it.
                raise TokenizerUnavailableError(
                    f"{key!r} is not a renderer name (known: {describe_renderers()}), and no "
                    "model of that id could be loaded (a hub model id looks like Org/Model)"
                ) from None
            raise TokenizerUnavailableError(
                f"{key!r} is not a renderer name (known: {describe_renderers()}) and {exc}"
            ) from None
    return TemplateRenderer(tokenizer, model_id=model_id, **options)
