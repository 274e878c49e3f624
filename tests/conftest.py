"""Shared fixtures: real tokenizers from the hub cache (``HF_HUB_CACHE``) or the hub.

Hypothesis profiles: ``ci`` (default, fast, derandomized: the same examples on every run,
so the gate that lands a change is reproducible) and ``thorough`` (many more, random
examples: the bug hunt, run by hand), chosen with
``HYPOTHESIS_PROFILE=thorough python -m pytest``.
"""

from __future__ import annotations

import datetime
import functools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import renderers

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """With ``RENDERERS_NO_SKIPS=1`` (set by ``.ci/run``) a skipped test fails: the gate that
    lands a change runs every test, so a skip (a browser or a stack that did not install)
    is never counted as a pass."""
    outcome = yield
    report = outcome.get_result()
    expected_failure = hasattr(report, "wasxfail")  # a strict xfail: a known gap, recorded
    if report.skipped and not expected_failure and os.environ.get("RENDERERS_NO_SKIPS") == "1":
        report.outcome = "failed"
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped, which RENDERERS_NO_SKIPS=1 forbids: {reason}"


# The 2026 families' tokenizers are not in the hub cache: the tokenizers tml-renderers
# bundles stand in for them (tml-renderers is also their rendering and parsing oracle).
TML_TOKENIZERS = {
    "Qwen/Qwen3.5-27B": "tml_renderers.tokenizers:Qwen35Tokenizer",
    "Qwen/Qwen3.6-27B": "tml_renderers.tokenizers:Qwen35Tokenizer",
    "Qwen/Qwen3.8-27B": "tml_renderers.tokenizers:Qwen35Tokenizer",
    "deepseek-ai/DeepSeek-V4-Pro": "tml_renderers.tokenizers:DeepSeekV4Tokenizer",
    "deepseek-ai/DeepSeek-R1": "tml_renderers.tokenizers:DeepSeekR1Tokenizer",
    "deepseek-ai/DeepSeek-V4.1-Flash": "tml_renderers.tokenizers:DeepSeekV41Tokenizer",
    "moonshotai/Kimi-K2.5": "tml_renderers.tokenizers:KimiK25Tokenizer",
    "moonshotai/Kimi-K2.6": "tml_renderers.tokenizers:KimiK26Tokenizer",
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B": "tml_renderers.tokenizers:Nemotron3Tokenizer",
    "zai-org/GLM-5.2": "tml_renderers.tokenizers:GlmTokenizer",
    "zai-org/GLM-5.3": "tml_renderers.tokenizers:GlmTokenizer",
    "zai-org/GLM-5.3-Flash": "tml_renderers.tokenizers:GlmTokenizer",
    # Shipped by the publisher's own package (the families extra), not the hub.
    "meta-llama/Llama-3.1-8B-Instruct": "renderers.core.packaged_tokenizers:Llama3Tokenizer",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (
        "renderers.core.packaged_tokenizers:Llama4Tokenizer"
    ),
    "mistralai/Mistral-Nemo-Instruct-2407": "renderers.core.packaged_tokenizers:TekkenTokenizer",
    "mistralai/Mistral-Large-Instruct-2411": (
        "renderers.core.packaged_tokenizers:MistralV7Tokenizer"
    ),
    # The Qwen line on Qwen3's vocabulary (renderers/qwen2_5.py, renderers/qwen3_2507.py).
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-4B-Instruct-2507": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-4B-Thinking-2507": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-VL-8B-Instruct": "Qwen/Qwen3-8B",
}


@functools.cache
def tokenizer_for(model_id: str) -> Any:
    """The real tokenizer of ``model_id``, loaded once per test session."""
    return renderers.load_tokenizer(TML_TOKENIZERS.get(model_id, model_id))


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> Any:
    return tokenizer_for("Qwen/Qwen3-8B")


FIXED_DATE = datetime.datetime(2025, 6, 28, 12, 0, 0)


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Templates that write today's date (gpt-oss's ``strftime_now``) see 2025-06-28, in
    transformers and in the template renderer's sandbox."""
    import transformers.utils.chat_template_utils as chat_template_utils

    import renderers.template.environment as template_environment

    class FixedDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> FixedDateTime:
            return cls(2025, 6, 28, 12, 0, 0)

    monkeypatch.setattr(chat_template_utils, "datetime", FixedDateTime)
    monkeypatch.setattr(template_environment, "datetime", FixedDateTime)
