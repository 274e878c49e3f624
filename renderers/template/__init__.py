"""Any model with a chat template: the template renderer (see
:mod:`renderers.template.renderer`), its format spec and the places its ids can differ
from the raw template's."""

from __future__ import annotations

from renderers.template.placeholders import TemplateDifference
from renderers.template.renderer import TemplateOptions, TemplateRenderer
from renderers.template.spec import FormatSpec, ToolCallSyntax

__all__ = [
    "FormatSpec",
    "TemplateDifference",
    "TemplateOptions",
    "TemplateRenderer",
    "ToolCallSyntax",
]
