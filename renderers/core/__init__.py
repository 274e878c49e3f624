"""The core every format builds on, and which depends on nothing above it.

- :mod:`~renderers.core.tokens`: the per-tokenizer table (bytes of every id, control tokens,
  an ordinary-text encoder); :mod:`~renderers.core.loading`: tokenizers by model id;
- :mod:`~renderers.core.messages`: the message model (ordered parts, OpenAI dicts);
- :mod:`~renderers.core.engine`: the incremental token-level parsing engine, built on
  :mod:`~renderers.core.result` (what a parse returns), :mod:`~renderers.core.assembly`
  (parts and stream events) and :mod:`~renderers.core.scanning` (ids, bytes and markers);
- :mod:`~renderers.core.writer`: the token writer that renders pieces to ids and weights.

``harmony`` and the model modules import from here; nothing here imports them.
"""
