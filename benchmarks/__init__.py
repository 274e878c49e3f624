"""``python -m benchmarks`` from a source checkout runs :mod:`renderers.bench`."""
