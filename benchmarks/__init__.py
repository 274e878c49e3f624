"""Throughput and scaling benchmarks for parsing and rendering (``python -m benchmarks``)."""
