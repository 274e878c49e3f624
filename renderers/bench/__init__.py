"""Throughput and scaling benchmarks for parsing and rendering (``renderers bench``).

Shipped inside the package so that ``renderers bench`` works from any install; peers
(openai-harmony, tml-renderers, tinker-cookbook) are compared only when installed.
"""
