"""The batch mapper: conversations in, training columns out (see :mod:`renderers.prepare`
for the column layout).

One :class:`ConversationMapper` serves every runner: ``datasets.Dataset.map(mapper,
batched=True, num_proc=N)``, Ray Data's ``map_batches(ConversationMapper, fn_constructor_
kwargs=...)``, and the ``renderers prepare`` job. It pickles in about a kilobyte (the
renderer pickles by class, options and tokenizer source), so worker processes pay the
tokenizer load once each.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
except ImportError:  # the data extra
    raise ImportError(
        "renderers.prepare needs pyarrow: pip install 'exact-renderers[data]'"
    ) from None

from renderers.core.loading import TokenizerUnavailableError
from renderers.core.tools import without_nulls
from renderers.prepare.shapes import (
    SHAPES,
    Conversation,
    Reader,
    ShapeError,
    detect_shape,
    is_missing,
)
from renderers.registry import get_renderer, renderer_class
from renderers.rendering import Renderer, TrainOn
from renderers.supervised_example import SupervisedExample

__all__ = [
    "IGNORE_INDEX",
    "ConversationMapper",
    "PrepareConfig",
    "RowError",
    "missing_extra",
    "pa",
    "pc",
    "pq",
]

IGNORE_INDEX = -100
"""The label of a token that is not trained (PyTorch's ``CrossEntropyLoss`` default)."""

Overflow = Literal["error", "drop", "truncate"]
OnError = Literal["raise", "skip"]
ArrowStructs = Literal["refuse", "accept"]
SplitTurns = Literal["auto", "never"]


def missing_extra(module: str, extra: str = "data") -> ImportError:
    """The one-line error for an optional dependency that is not installed."""
    return ImportError(f"{module} is needed for this: pip install 'exact-renderers[{extra}]'")


class RowError(ValueError):
    """A conversation that cannot become a training row, with where it failed."""

    def __init__(self, row_id: Any, message: str, message_index: int | None = None) -> None:
        super().__init__(f"row {row_id}: {message}")
        self.row_id = row_id
        self.reason = message
        self.message_index = message_index

    def __reduce__(self) -> tuple[Any, ...]:
        return (RowError, (self.row_id, self.reason, self.message_index))


@dataclass(frozen=True, slots=True)
class PrepareConfig:
    """How conversations become training rows (every runner shares it)."""

    train_on: str | tuple[str, ...] = TrainOn.LAST_ASSISTANT.value
    """A :class:`~renderers.TrainOn` mode, or a tuple of roles to train on."""
    train_end_of_turn: bool = True
    """Whether the token that ends a trained assistant message is trained."""
    max_length: int | None = None
    """Longest row in tokens (``None``: no limit)."""
    overflow: Overflow = "error"
    """A longer row: ``error`` (a row error), ``drop`` (left out, listed as rejected) or
    ``truncate`` (its first ``max_length`` tokens kept)."""
    on_error: OnError = "raise"
    """A row that fails: ``raise`` (stop with the row id, message index and error) or
    ``skip`` (an empty row with its ``error`` set; ``renderers prepare`` writes those to
    the rejects file)."""
    shape: str = "auto"
    """The shape of the rows: ``openai``, ``sharegpt``, ``llamafactory`` (see
    :mod:`renderers.prepare.shapes`), or ``auto``: each file's (each batch's) shape, from
    its first row."""
    roles: Mapping[str, str] | tuple[tuple[str, str], ...] = ()
    """Role names to add to (or override in) the role table,
    :data:`~renderers.prepare.shapes.DEFAULT_ROLES`: ``{"robot": "assistant"}``."""
    messages_column: str | None = None
    """The column of the messages (default: ``messages``, else ``conversations``); it may
    hold JSON text."""
    tools_column: str = "tools"
    system_column: str = "system"
    """The column of a ShareGPT row's system prompt."""
    id_column: str | None = None
    """The column holding each row's id (default: the row's position in the input)."""
    arrow_structs: ArrowStructs = "refuse"
    """Tool-call arguments or tool definitions stored as Arrow structs (JSON objects in a
    Parquet file, ``Dataset.from_list``, Ray Data) come back with keys reordered, absent
    keys as nulls and integers as floats: ``refuse`` stops with the column named;
    ``accept`` renders them as stored (nulls dropped)."""
    weights: bool = False
    """Add a float32 ``weights`` column (needed to keep fractional message weights)."""
    assistant_masks: bool = False
    """Add TRL's ``assistant_masks`` column (equal to ``loss_mask``)."""
    shifted: bool = False
    """Add next-token targets: ``target_ids`` and ``target_mask`` (tinker, Megatron-style
    stacks that do not shift labels themselves)."""
    attribution: bool = False
    """Add ``message_indices``: the message each token belongs to (-1 outside any)."""
    split_turns: SplitTurns = "auto"
    """``auto``: a conversation whose trained turns the format does not write as the model
    samples them in one example becomes several rows, one per group of turns
    (:meth:`~renderers.Renderer.build_supervised_examples`), with an ``example_index``
    column; ``never``: one row per conversation
    (:meth:`~renderers.Renderer.build_supervised_example`, with its refusals)."""

    def __post_init__(self) -> None:
        if self.overflow not in ("error", "drop", "truncate"):
            raise ValueError(f"overflow: expected error, drop or truncate, got {self.overflow!r}")
        if self.on_error not in ("raise", "skip"):
            raise ValueError(f"on_error: expected raise or skip, got {self.on_error!r}")
        if self.arrow_structs not in ("refuse", "accept"):
            raise ValueError(
                f"arrow_structs: expected refuse or accept, got {self.arrow_structs!r}"
            )
        if self.split_turns not in ("auto", "never"):
            raise ValueError(f"split_turns: expected auto or never, got {self.split_turns!r}")
        if self.shape != "auto" and self.shape not in SHAPES:
            raise ValueError(f"shape: expected auto, {', '.join(SHAPES)}, got {self.shape!r}")
        if isinstance(self.roles, Mapping):
            object.__setattr__(self, "roles", tuple(sorted(self.roles.items())))
        Reader("auto", dict(self.roles))  # checks the role table
        if self.max_length is not None and self.max_length < 2:
            raise ValueError(f"max_length: expected at least 2 tokens, got {self.max_length}")
        if isinstance(self.train_on, str) and self.train_on not in {t.value for t in TrainOn}:
            choices = ", ".join(t.value for t in TrainOn)
            raise ValueError(
                f"train_on: expected one of {choices} or a tuple of roles, got {self.train_on!r}"
            )


_MESSAGE_INDEX = re.compile(r"^messages\[(\d+)\]")


class ConversationMapper:
    """Maps a batch of conversations to training columns.

    Call it on a batch: a dict of columns (what ``datasets`` and Ray Data pass), a
    ``pyarrow.Table``/``RecordBatch``; ``datasets`` may also pass the row indices
    (``with_indices=True``), which become row ids. Returns a ``pyarrow.Table``.

    ``renderer`` is a :class:`~renderers.Renderer` or a renderer name / model id (built
    lazily in the worker that uses it); ``options`` are that renderer's options.
    ``environment`` is set in this process's environment before a renderer given by name
    loads its tokenizer: Ray workers do not inherit the driver's environment, so pass
    :func:`~renderers.core.loading.loading_environment` (the driver's hub cache and offline
    mode) with the other constructor arguments.
    """

    def __init__(
        self,
        renderer: Renderer | str,
        config: PrepareConfig | None = None,
        *,
        renderer_options: Mapping[str, Any] | None = None,
        environment: Mapping[str, str] | None = None,
        **config_fields: Any,
    ) -> None:
        if config is None:
            config = PrepareConfig(**config_fields)
        elif config_fields:
            raise TypeError("give a PrepareConfig or its fields, not both")
        for name, value in (environment or {}).items():
            os.environ[name] = value
        if isinstance(renderer, str):
            if environment is None:
                _check_worker_cache(renderer)
            try:
                renderer = get_renderer(renderer, **dict(renderer_options or {}))
            except TokenizerUnavailableError as exc:
                raise TokenizerUnavailableError(f"{exc}{_worker_advice(environment)}") from None
        elif renderer_options:
            raise TypeError("renderer_options apply to a renderer given by name")
        if not isinstance(config.train_on, str):
            unknown = [r for r in config.train_on if r not in renderer.roles]
            if unknown or not config.train_on:
                modes = ", ".join(t.value for t in TrainOn)
                raise ValueError(
                    f"train_on: {', '.join(map(repr, unknown)) or 'no role'} is neither a mode "
                    f"({modes}) nor a role of {renderer.name} ({', '.join(renderer.roles)})"
                )
        self.renderer = renderer
        self.config = config
        self.reader = Reader(
            config.shape,
            dict(config.roles),
            config.messages_column,
            config.tools_column,
            config.system_column,
        )

    def __repr__(self) -> str:
        return f"ConversationMapper({self.renderer!r}, {self.config!r})"

    def warm_up(self) -> None:
        """Build and import what the first row needs (the renderer's fast encoder, cached
        declarations, pyarrow's conversions), so worker processes forked after this share
        it (a renderer otherwise builds its encoder only once encoding has taken a while)."""
        self.renderer.table.fast_encoding  # noqa: B018  (builds the encoder)
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
        # A whole row and its table: pyarrow imports what it converts with (pandas, when
        # installed: half a second) on the first conversion.
        # (Best effort: a configuration refusing this row, e.g. a tiny max_length with
        # overflow="error", refuses it for the rows it is meant for, where it reports.)
        with contextlib.suppress(ValueError):
            self.table([0], [self.row(0, {"messages": messages}, False, "openai")])

    def detect(self, row: Any) -> str | None:
        """The shape rows like ``row`` are read as: the configured one, or the shape of
        ``row`` (``None`` when ``row`` fits none: each row then reports why)."""
        if self.config.shape != "auto":
            return self.config.shape
        if not isinstance(row, Mapping):
            return None
        try:
            return detect_shape(row, self.config.messages_column)
        except ValueError:
            return None

    # -- runner entry points ------------------------------------------------------------

    def __call__(
        self, batch: Any, indices: Sequence[int] | None = None, *, shape: str | None = None
    ) -> pa.Table:
        """A batch from ``datasets.Dataset.map(batched=True)`` or Ray Data's
        ``map_batches`` (dict of columns, ``pyarrow.Table`` or ``pandas.DataFrame``). The
        rows are read in ``shape``, else the configured shape, else the shape of the
        batch's first row."""
        config = self.config
        schema = _schema_of(batch)
        columns = _columns_of(batch)
        if config.messages_column is not None:
            wanted = [config.messages_column]
        else:
            wanted = [c for c in ("messages", "conversations") if c in columns]
        if not wanted or wanted[0] not in columns:
            raise ValueError(
                f"the batch has no {wanted[0] if wanted else 'messages or conversations'} "
                f"column (columns: {', '.join(map(str, columns))}); set messages_column"
            )
        if config.arrow_structs == "refuse" and schema is not None:
            _refuse_structs(schema, wanted, config.tools_column)
        values = {c: _python_list(columns[c]) for c in wanted}
        n = len(values[wanted[0]])
        for column in (config.tools_column, config.system_column):
            if column in columns and column not in values:
                values[column] = _python_list(columns[column])
        ids: Sequence[Any]
        if config.id_column is not None:
            if config.id_column not in columns:
                raise ValueError(f"the batch has no id column {config.id_column!r}")
            ids = [None if is_missing(i) else i for i in _python_list(columns[config.id_column])]
        elif indices is not None:
            ids = list(indices)
        else:
            ids = [None] * n
        records = [{c: v[k] for c, v in values.items()} for k in range(n)]
        if config.arrow_structs == "refuse" and schema is None:
            # No schema to look at: Ray Data's NumPy and pandas batches come from Arrow
            # blocks (any object there was a struct); a dict of lists may (IterableDataset
            # batches do), and its structs show as objects with null-filled keys.
            certain = not all(isinstance(columns[c], list) for c in wanted)
            for row_id, record in zip(ids, records, strict=True):
                _refuse_struct_values(row_id, record, wanted, config.tools_column, certain)
        if shape is None and records:
            shape = self.detect(records[0])
        built = [self.row(i, r, True, shape) for i, r in zip(ids, records, strict=True)]
        return self.table(list(ids), built)

    def map_rows(
        self, rows: Sequence[tuple[Any, Any, Any]], *, from_arrow: bool = False
    ) -> pa.Table:
        """The columns of ``(row id, messages, tools)`` triples (messages in any shape).
        ``from_arrow``: the rows were read back from Arrow, whose struct columns fill absent
        keys with null (those keys are dropped, see
        :func:`~renderers.core.tools.without_nulls`)."""
        column = self.config.messages_column or "messages"
        records = [{column: msgs, self.config.tools_column: tools} for _, msgs, tools in rows]
        shape = self.detect(records[0]) if records else None
        built = [
            self.row(row_id, record, from_arrow, shape)
            for (row_id, _, _), record in zip(rows, records, strict=True)
        ]
        return self.table([row_id for row_id, _, _ in rows], built)

    def row_error(self, row_id: Any, message: str) -> RowResult:
        """An unreadable input row, failed or skipped as the config says."""
        error = RowError(row_id, message)
        if self.config.on_error == "raise":
            raise error
        return error, ()

    # -- one row ------------------------------------------------------------------------

    def row(
        self, row_id: Any, record: Mapping[str, Any], from_arrow: bool, shape: str | None = None
    ) -> RowResult:
        """One conversation's examples (one, or one per group of turns with
        ``split_turns="auto"``), or the error that skips it (raised with
        ``on_error="raise"``). ``record`` is the row's columns; ``shape`` the shape it is
        read as (``None``: its own)."""
        conversation: Conversation | None = None
        try:
            if from_arrow:
                record = {k: without_nulls(v) for k, v in record.items()}
            try:
                conversation = self.reader.read(record, shape)
            except ShapeError as exc:
                if shape is None or self.config.shape != "auto":
                    raise
                message = _not_the_first_rows_shape(exc, record, shape, self.config)
                raise ShapeError(message) from None
            return None, self._tokenize(row_id, conversation)
        except RowError as dropped:
            if self.config.on_error == "raise" and not dropped.reason.startswith(_DROPPED):
                raise
            return dropped, ()
        except (ValueError, TypeError) as exc:
            text = str(exc)
            match = _MESSAGE_INDEX.match(text)
            index = int(match.group(1)) if match else None
            if match and conversation is not None and index is not None:
                source = conversation.sources[index] if index < len(conversation.sources) else None
                if source is not None and source != f"messages[{index}]":
                    text = f"messages[{index}] ({source}){text[match.end() :]}"
            failed = RowError(row_id, text, index)
            if self.config.on_error == "raise":
                raise failed from None
            return failed, ()

    def _tokenize(self, row_id: Any, conversation: Conversation) -> tuple[_Row, ...]:
        config = self.config
        messages, tools = conversation.messages, conversation.tools
        train_on = config.train_on if isinstance(config.train_on, str) else set(config.train_on)
        build = (
            self.renderer.build_supervised_examples
            if config.split_turns == "auto"
            else _one_example(self.renderer)
        )
        examples = build(
            messages,
            tools,
            train_on=train_on,
            train_end_of_turn=config.train_end_of_turn,
            attribution=config.attribution,
        )
        return tuple(self._row_of(row_id, example) for example in examples)

    def _row_of(self, row_id: Any, example: SupervisedExample) -> _Row:
        config = self.config
        tokens, weights = example.tokens, example.weights
        indices = example.message_indices
        if config.max_length is not None and len(tokens) > config.max_length:
            if config.overflow == "truncate":
                tokens = tokens[: config.max_length]
                weights = weights[: config.max_length]
                indices = None if indices is None else indices[: config.max_length]
            else:
                reason = f"{len(tokens)} tokens, longer than max_length {config.max_length}"
                if config.overflow == "drop":
                    raise RowError(row_id, _DROPPED + ": " + reason)
                raise ValueError(reason)
        weights = weights.copy()
        weights[:1] = 0.0  # nothing precedes the first token: it is never a target
        if not config.weights and np.any((weights != 0.0) & (weights != 1.0)):
            raise ValueError(
                "fractional message weights need the weights column (weights=True); "
                "loss_mask alone would round them"
            )
        return _Row(tokens.astype(np.int32), weights, indices, len(example.tokens))

    # -- columns ------------------------------------------------------------------------

    def table(self, source_ids: list[Any], built: list[RowResult]) -> pa.Table:
        """The columns of rows made by :meth:`row` (see :func:`examples_table`)."""
        return examples_table(self.config, source_ids, built)


def examples_table(
    config: PrepareConfig, source_ids: list[Any], built: list[RowResult]
) -> pa.Table:
    """The columns of rows made by :meth:`ConversationMapper.row`: one row per example
    (an error row has no tokens), each with the id of the row it comes from."""
    empty = _Row(_NO_IDS, _NO_WEIGHTS, _NO_INDICES if config.attribution else None, 0)
    row_ids: list[Any] = []
    example_index: list[int] = []
    rows: list[_Row] = []
    errors: list[RowError | None] = []
    for row_id, (error, examples) in zip(source_ids, built, strict=True):
        for k, example in enumerate(examples or (empty,)):
            row_ids.append(row_id)
            example_index.append(k)
            rows.append(example)
            errors.append(error)
    lengths = np.fromiter((len(r.tokens) for r in rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate([r.tokens for r in rows]) if rows else _NO_IDS
    weights = np.concatenate([r.weights for r in rows]) if rows else _NO_WEIGHTS
    trained = weights > 0
    labels = np.where(trained, tokens, IGNORE_INDEX).astype(np.int32)
    mask = trained.astype(np.int8)
    pa_offsets = pa.array(offsets, pa.int32())

    def lists(values: np.ndarray) -> Any:
        return pa.ListArray.from_arrays(pa_offsets, pa.array(values))

    trained_before = np.concatenate([[0], np.cumsum(trained, dtype=np.int64)])
    counts = trained_before[offsets[1:]] - trained_before[offsets[:-1]]
    columns: dict[str, Any] = {
        "row_id": pa.array(row_ids)
        if any(r is not None for r in row_ids)
        else pa.nulls(len(row_ids), pa.int64()),
    }
    if config.split_turns == "auto":
        columns["example_index"] = pa.array(example_index, pa.int32())
    columns.update({"input_ids": lists(tokens), "labels": lists(labels), "loss_mask": lists(mask)})
    if config.weights:
        columns["weights"] = lists(weights.astype(np.float32))
    if config.assistant_masks:
        columns["assistant_masks"] = lists(mask)
    if config.shifted:
        target_ids, target_mask = shifted_targets(tokens, mask, offsets)
        columns["target_ids"] = lists(target_ids)
        columns["target_mask"] = lists(target_mask)
        if config.weights:
            target_weights, _ = shifted_targets(weights, mask, offsets, fill=0.0)
            columns["target_weights"] = lists(target_weights.astype(np.float32))
    if config.attribution:
        columns["message_indices"] = lists(
            np.concatenate([r.indices for r in rows if r.indices is not None])
            if rows
            else _NO_INDICES
        )
    columns["num_tokens"] = pa.array(lengths.astype(np.int32))
    columns["num_trained_tokens"] = pa.array(counts.astype(np.int32))
    if config.max_length is not None and config.overflow == "truncate":
        columns["untruncated_num_tokens"] = pa.array(
            np.fromiter((r.full_length for r in rows), dtype=np.int32, count=len(rows))
        )
    columns["error"] = pa.array([None if e is None else e.reason for e in errors], pa.string())
    columns["error_message_index"] = pa.array(
        [None if e is None else e.message_index for e in errors], pa.int32()
    )
    return pa.table(columns)


_DROPPED = "dropped"


def _not_the_first_rows_shape(
    error: ShapeError, record: Mapping[str, Any], shape: str, config: PrepareConfig
) -> str:
    """The error of a row read in the shape of its file's (or batch's) first row, saying
    which shape the row has instead, or that it fits none."""
    try:
        own = detect_shape(record, config.messages_column)
    except ShapeError as none:
        if str(none) == str(error):
            return str(none)
        return f"{none}; read as {shape}, the shape of the first row: {error}"
    if own == shape:
        return f"{error} (read as {shape})"
    return (
        f"{error} (read as {shape}, the shape of the first row, but this row is {own}: give "
        "each shape its own file, or shape= / --format to read every row as one)"
    )


def _check_worker_cache(name: str) -> None:
    """In a Ray worker given no ``environment``, fail at once (rather than after minutes of
    download retries) when the renderer's model is not in this worker's hub cache."""
    if not _worker_advice(None) or os.path.isdir(name) or ":" in name:
        return
    try:
        cls = renderer_class(name)
        model_id = name if "/" in name else cls.default_model
    except ValueError:
        model_id = name
    if "/" not in model_id:
        return
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model_id, "tokenizer_config.json"), str):
        return
    raise TokenizerUnavailableError(
        f"cannot load the tokenizer of {model_id!r}: it is not in this worker's hub cache "
        f"{constants.HF_HUB_CACHE}{_worker_advice(None)} (environment={{}} lets the worker "
        "download it)"
    )


def _worker_advice(environment: Mapping[str, str] | None) -> str:
    """What to do about a tokenizer a Ray worker cannot load (nothing outside Ray)."""
    ray: Any = sys.modules.get("ray")
    if ray is None:
        return ""
    try:
        if not ray.is_initialized():
            return ""
        context = ray.get_runtime_context()
        if getattr(getattr(context, "worker", None), "mode", None) != ray.WORKER_MODE:
            return ""
        node = context.get_node_id()
    except Exception:  # Ray's internals vary between versions: advice is best effort
        return ""
    given = f" (given: {', '.join(sorted(environment))})" if environment else ""
    return (
        f" [on Ray worker pid {os.getpid()}, node {node[:12]}: Ray workers do not inherit "
        f"the driver's environment{given}; pass environment=loading_environment() with the "
        "mapper's other arguments, or runtime_env={'env_vars': loading_environment()}]"
    )


@dataclass(frozen=True, slots=True)
class _Row:
    tokens: np.ndarray
    weights: np.ndarray
    indices: np.ndarray | None
    full_length: int


RowResult = tuple[RowError | None, tuple[_Row, ...]]
"""A source row's error (``None`` when it made examples) and its examples (none on error)."""


def _one_example(renderer: Renderer) -> Callable[..., list[SupervisedExample]]:
    """``build_supervised_example`` returning a list (``split_turns="never"``)."""

    def build(*args: Any, **kwargs: Any) -> list[SupervisedExample]:
        return [renderer.build_supervised_example(*args, **kwargs)]

    return build


_NO_IDS = np.zeros(0, dtype=np.int32)
_NO_WEIGHTS = np.zeros(0, dtype=np.float32)
_NO_INDICES = np.zeros(0, dtype=np.int32)


def shifted_targets(
    values: np.ndarray, mask: np.ndarray, offsets: np.ndarray, fill: float = IGNORE_INDEX
) -> tuple[np.ndarray, np.ndarray]:
    """Next-token targets of concatenated sequences (``offsets`` bound each one):
    ``targets[t] = values[t + 1]`` and ``target_mask[t] = mask[t + 1]`` within a
    sequence; ``fill`` and 0 at each sequence's last position (no target crosses a
    boundary)."""
    targets = np.full(len(values), fill, dtype=np.int32 if fill == IGNORE_INDEX else values.dtype)
    target_mask = np.zeros(len(values), dtype=np.int8)
    if len(values) > 1:
        targets[:-1] = values[1:]
        target_mask[:-1] = mask[1:]
    ends = offsets[1:][offsets[1:] > offsets[:-1]] - 1
    targets[ends] = fill
    target_mask[ends] = 0
    return targets, target_mask


def _columns_of(batch: Any) -> Mapping[str, Any]:
    if isinstance(batch, Mapping):
        return batch
    to_pydict: Callable[[], dict[str, Any]] | None = getattr(batch, "to_pydict", None)
    if to_pydict is not None:  # pyarrow Table / RecordBatch
        return to_pydict()
    if hasattr(batch, "to_dict"):  # pandas DataFrame
        return {name: list(batch[name]) for name in batch.columns}
    raise TypeError(
        f"expected a batch of columns (dict, pyarrow.Table, pandas.DataFrame), got "
        f"{type(batch).__name__}"
    )


def _python_list(values: Any) -> list[Any]:
    """A column as a list of Python values (Ray's NumPy batches hold object arrays)."""
    if isinstance(values, list):
        return values
    return [_plain(v) for v in values]


def _plain(value: Any) -> Any:
    """Python values of what Ray's NumPy batches hold (object arrays of dicts and arrays)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# -- JSON objects that went through Arrow structs ----------------------------------------------

_STRUCT_DAMAGE = "come back from Arrow structs with keys reordered, absent keys as nulls and "
_STRUCT_DAMAGE += "integers as floats"
_ARGUMENTS_ADVICE = (
    f"tool-call arguments stored as objects {_STRUCT_DAMAGE}: store each call's arguments "
    "as JSON text (json.dumps(arguments)), or the messages column as JSON text "
    "(json.dumps(messages)); arrow_structs='accept' renders them as stored"
)
_TOOLS_ADVICE = (
    f"tool definitions stored as objects {_STRUCT_DAMAGE}: store the tools column as JSON "
    "text (json.dumps(tools)); arrow_structs='accept' renders them as stored"
)


def _schema_of(batch: Any) -> Any:
    """The Arrow schema behind ``batch``, when it shows one: a ``pyarrow.Table`` or
    ``RecordBatch``, or ``datasets``' ``LazyBatch`` (its ``pa_table``)."""
    if isinstance(batch, (pa.Table, pa.RecordBatch)):
        return batch.schema
    table = getattr(batch, "pa_table", None)
    return table.schema if isinstance(table, pa.Table) else None


def _refuse_structs(schema: Any, message_columns: Sequence[str], tools_column: str) -> None:
    """Stop when the schema stores tool-call arguments or tool definitions as structs."""
    for name in message_columns:
        if name in schema.names:
            path = _struct_arguments(schema.field(name).type, name)
            if path is not None:
                raise ValueError(f"{path}: {_ARGUMENTS_ADVICE}")
    if tools_column in schema.names and _has_struct(schema.field(tools_column).type):
        raise ValueError(f"{tools_column}: {_TOOLS_ADVICE}")


def _children(kind: Any) -> list[tuple[str, Any]]:
    if pa.types.is_struct(kind):
        return [(kind.field(k).name, kind.field(k).type) for k in range(kind.num_fields)]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [("[]", kind.value_type)]
    if pa.types.is_map(kind):
        return [("{}", kind.item_type)]
    return []


def _has_struct(kind: Any) -> bool:
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return True
    return any(_has_struct(child) for _, child in _children(kind))


def _struct_arguments(kind: Any, path: str) -> str | None:
    """The path of an ``arguments`` field holding structs within ``kind``, if any."""
    for name, child in _children(kind):
        where = path + name if name in ("[]", "{}") else f"{path}.{name}"
        if name == "arguments" and _has_struct(child):
            return where
        found = _struct_arguments(child, where)
        if found is not None:
            return found
    return None


def _refuse_struct_values(
    row_id: Any,
    record: Mapping[str, Any],
    message_columns: Sequence[str],
    tools_column: str,
    certain: bool,
) -> None:
    """Stop on objects that came through Arrow structs, in a batch without a schema:
    every object when the batch certainly came from Arrow, else objects with a null value
    (Arrow's filling of absent keys)."""

    def damaged(value: Any) -> bool:
        return isinstance(value, Mapping) and (certain or _has_null(value))

    for column in message_columns:
        messages = record.get(column)
        if not isinstance(messages, list):
            continue
        for i, message in enumerate(messages):
            calls = message.get("tool_calls") if isinstance(message, Mapping) else None
            if not isinstance(calls, list):
                continue
            for k, call in enumerate(calls):
                function = call.get("function", call) if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and damaged(function.get("arguments")):
                    raise ValueError(
                        f"row {row_id}: {column}[{i}].tool_calls[{k}].function.arguments: "
                        + _ARGUMENTS_ADVICE
                    )
    tools = record.get(tools_column)
    if isinstance(tools, list):
        for k, tool in enumerate(tools):
            if damaged(tool):
                raise ValueError(f"row {row_id}: {tools_column}[{k}]: {_TOOLS_ADVICE}")


def _has_null(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(v is None or _has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return False
