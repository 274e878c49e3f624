"""Training data at scale: conversations in, tokenized training rows out.

One code path for every runner: :class:`ConversationMapper` maps a batch of
conversations to the columns below; ``datasets.Dataset.map(mapper, batched=True,
num_proc=N)``, Ray Data's ``map_batches`` and the ``renderers prepare`` command
(:func:`run_prepare`) all call it. Needs the ``data`` extra (``datasets``, ``pyarrow``,
``tqdm``); Ray Data the ``ray`` extra.

Rows are read in the shape they are published in (OpenAI messages, ShareGPT
conversations, LLaMA-Factory's v1 messages): :mod:`renderers.prepare.shapes`, also usable
alone (:func:`read_conversation`, which needs neither pyarrow nor a tokenizer).

Column layout (one row per example)
-----------------------------------
A conversation is one row, or with ``split_turns="auto"`` (the default) several where
its trained turns do not extend into one example
(:meth:`~renderers.Renderer.build_supervised_examples`): one row per group of turns, the
conversation cut after them, rows of a conversation adjacent and in order. Every list
column of a row has ``num_tokens`` entries, aligned with ``input_ids``.

================================ ========================================================
``row_id``                       the input row's id: its ``id_column`` value, else its
                                 0-based position in the input (int64; null when a
                                 runner gives neither); the same on every row of a split
                                 conversation
``example_index``                int32: the row's place among the examples of its
                                 conversation (0 for a conversation kept whole; absent
                                 with ``split_turns="never"``)
``input_ids``                    list<int32>: the tokens, exactly as the official chat
                                 template renders the conversation
``labels``                       list<int32>: the token where trained, -100 elsewhere;
                                 *not* shifted (the model shifts, as Hugging Face models
                                 do: ``logits[t]`` predicts ``labels[t + 1]``)
``loss_mask``                    list<int8>: 1 where trained (``labels != -100``), else 0
``num_tokens``                   int32: ``len(input_ids)``
``num_trained_tokens``           int32: ``sum(loss_mask)``
``error``, ``error_message_index`` string, int32: null on a good row; on a row skipped
                                 with ``on_error="skip"`` (or dropped as too long) the
                                 error and the message it names, and every list is empty.
                                 ``renderers prepare`` moves those rows to the rejects file.
================================ ========================================================

Optional columns (:class:`PrepareConfig` fields, ``renderers prepare`` flags):

- ``weights`` (``weights=True``, ``--weights``): list<float32>, each token's loss weight
  (a message's fractional ``weight`` survives here; ``loss_mask`` is ``weights > 0``).
- ``assistant_masks`` (``assistant_masks=True``): list<int8>, equal to ``loss_mask`` under
  TRL's name.
- ``target_ids``, ``target_mask`` (``shifted=True``, ``--shifted``): next-token targets,
  ``target_ids[t] = input_ids[t + 1]`` and ``target_mask[t] = loss_mask[t + 1]``, -100
  and 0 at the last position of each conversation; with ``weights=True`` also
  ``target_weights`` (list<float32>, ``weights[t + 1]``, 0 at the last position).
- ``message_indices`` (``attribution=True``, ``--attribution``): list<int32>, the index of
  the message each token belongs to, -1 for template text outside any message.
- ``untruncated_num_tokens`` (with ``max_length`` and ``overflow="truncate"``): int32, the
  length before truncation.

A conversation's first token is never a target (nothing precedes it): its label is
-100 and its mask 0 even with ``train_on="all"``.

Packed rows (``--pack LENGTH``, :func:`pack_table`)
---------------------------------------------------
Consecutive rows joined, in input order, into rows of at most LENGTH tokens:
``row_ids`` (list of the packed rows' ``row_id``), ``example_indices`` (their
``example_index``), the list columns above concatenated,
``position_ids`` (list<int32>, restarting at 0 at each conversation), ``seq_lens``
(list<int32>, each conversation's length, summing to ``num_tokens``), ``num_tokens`` and
``num_trained_tokens`` (sums). No label crosses a conversation boundary: each
conversation's first label is -100, and shifted targets end each one with -100.

What each training stack reads
------------------------------
- TRL ``SFTTrainer`` (trl 1.16): a dataset with ``input_ids`` is taken as pre-tokenized and
  a ``labels`` column is used as is (the collator pads it with -100; the model shifts).
  ``assistant_masks`` is TRL's name for the same mask when labels are absent. For TRL's
  padding-free packing give ``position_ids``; TRL's own packer names ``seq_lens``
  ``seq_lengths``.
- verl ``fsdp_sft_trainer``: ``input_ids``, ``loss_mask`` aligned with the tokens (recent
  verl slices ``loss_mask[:, 1:]`` against ``input_ids[:, 1:]`` itself), ``position_ids``
  for packed rows.
- OpenRLHF SFT and prime-rl: ``input_ids`` with ``loss_mask`` aligned with the tokens (both
  shift logits against ``input_ids[1:]`` themselves); packed rows with ``position_ids`` /
  ``seq_lens`` for their varlen attention.
- tinker-style ``Datum`` (targets given, not shifted by the trainer): ``shifted=True``;
  ``model_input = input_ids[:-1]``, ``target_tokens = target_ids[:-1]``,
  ``weights = target_mask[:-1]`` (or the shifted ``weights`` for fractional weights).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from renderers.core.loading import loading_environment
from renderers.prepare.outputs import DEFAULT_MAX_REJECT_FRACTION, OUTPUT_FORMATS
from renderers.prepare.shapes import (
    DEFAULT_ROLES,
    SHAPES,
    Conversation,
    ShapeError,
    detect_shape,
    read_conversation,
)

if TYPE_CHECKING:
    from renderers.prepare.job import PrepareStats, RejectedRowsError, run_prepare
    from renderers.prepare.mapper import (
        IGNORE_INDEX,
        ConversationMapper,
        PrepareConfig,
        RowError,
    )
    from renderers.prepare.packing import Packer, pack_table
    from renderers.prepare.sources import Source, open_source

__all__ = [
    "DEFAULT_MAX_REJECT_FRACTION",
    "DEFAULT_ROLES",
    "IGNORE_INDEX",
    "OUTPUT_FORMATS",
    "SHAPES",
    "Conversation",
    "ConversationMapper",
    "Packer",
    "PrepareConfig",
    "PrepareStats",
    "RejectedRowsError",
    "RowError",
    "ShapeError",
    "Source",
    "detect_shape",
    "loading_environment",
    "open_source",
    "pack_table",
    "read_conversation",
    "run_prepare",
]

# The pipeline needs pyarrow (the data extra); the shape readers above do not, so they are
# imported at once and the pipeline when first used.
_LAZY = {
    "IGNORE_INDEX": "mapper",
    "ConversationMapper": "mapper",
    "PrepareConfig": "mapper",
    "RowError": "mapper",
    "PrepareStats": "job",
    "RejectedRowsError": "job",
    "run_prepare": "job",
    "Packer": "packing",
    "pack_table": "packing",
    "Source": "sources",
    "open_source": "sources",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'renderers.prepare' has no attribute {name!r}")
    return getattr(importlib.import_module(f"renderers.prepare.{module}"), name)
