"""A month of logs on Ray, Spark or DuckDB: the map and reduce steps of ``kvlint workload``.

The **map step**, :func:`map_batch` (or :func:`map_arrow`, Spark's ``mapInArrow`` form), takes a
batch of files (session files or recordings: anything ``kvlint check`` reads, gzip or not) and
traces each with the Rust engine (the GIL released) into one row per request: its session, time,
lengths and the chained hashes of its prompt's blocks. No text leaves the map step. A file is
never split: its sessions are traced by the one call that reads it. A file that cannot be read
or traced is one row whose ``error`` says why, so that a bad file never stops the job and the
rows always add up.

The map step over **request logs** (one row per request, sessions interleaved, as a platform team
keeps them in Parquet or JSON Lines), :func:`map_log_batch` and :func:`map_log_arrow`, takes the
log's rows instead of files: every row of each session key it is handed (a ``session_id``
column), partitioned by that key (Spark's ``repartition(key)`` then
``sortWithinPartitions(key, time)``, Ray's ``groupby(key).map_groups``), and groups them into the
sessions ``kvlint workload --log`` finds for those keys, then traces them into the same rows.

The **reduce steps**:

- :meth:`Workload.from_rows` joins any set of rows, in any order, into the trace
  ``kvlint workload`` builds from the same files: ``report()`` is its JSON report,
  ``export_trace(format)`` its hashed trace (Mooncake, Bailian, AIPerf's conversations, LMCache);
- :data:`SHARING_SQL` is the prefix-sharing rate in SQL (DuckDB) over a table ``rows`` of them:
  each request's leading blocks that some earlier request sent, by first-seen time per hash.

Row columns (:data:`COLUMNS`; :func:`arrow_schema` and :data:`SPARK_SCHEMA` give their types):
``file`` (relative to the workload's folder), ``session`` (its number in the file),
``identity``, ``turn``, ``time`` (seconds since the epoch, or null), ``input_length``,
``output_length``, ``shared_with_previous``, ``shared_with_previous_sequence``,
``previous_input_tokens``, ``kept_blocks``, ``hash_ids`` (the prompt's full blocks, signed 64-bit),
``generated_hash_ids``, ``finding`` (the rule kvlint names for the turn's break), ``block_size``,
``renderer``, ``error``.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime, timezone
from typing import Any

from kvlint_cache._kvlint import TRACE_ROW_COLUMNS, Workload, trace_rows

__all__ = [
    "COLUMNS",
    "SHARING_SQL",
    "SPARK_SCHEMA",
    "Workload",
    "arrow_schema",
    "map_arrow",
    "map_batch",
    "map_log_arrow",
    "map_log_batch",
    "trace_rows",
]

#: The rows' columns, in order (the native module's, which writes and reads them).
COLUMNS: tuple[str, ...] = TRACE_ROW_COLUMNS

_LIST_COLUMNS = ("hash_ids", "generated_hash_ids")
_TEXT_COLUMNS = ("file", "identity", "finding", "renderer", "error")
_FLOAT_COLUMNS = ("time",)

#: The rows' schema as Spark's DDL, for ``mapInArrow(map_arrow, SPARK_SCHEMA)``.
SPARK_SCHEMA = ", ".join(
    f"{name} "
    + (
        "array<bigint>"
        if name in _LIST_COLUMNS
        else "string"
        if name in _TEXT_COLUMNS
        else "double"
        if name in _FLOAT_COLUMNS
        else "bigint"
    )
    for name in COLUMNS
)

#: The prefix-sharing rate ``kvlint workload`` reports (``reuse.prefix_sharing_rate``), in
#: DuckDB's SQL over a table or view ``rows`` of the map step's rows: requests in the order they
#: were sent (by time when every request has one, else file, session and turn), each block
#: hash's first request, and per request its leading blocks that an earlier request sent.
SHARING_SQL = """
WITH requests AS (
    SELECT row_number() OVER (
               ORDER BY CASE WHEN (SELECT count(*) FROM rows WHERE error IS NULL AND time IS NULL) = 0
                             THEN time END,
                        file, session, turn) AS arrival,
           input_length, block_size, hash_ids, shared_with_previous
    FROM rows WHERE error IS NULL
),
blocks AS (
    SELECT arrival, unnest(hash_ids) AS hash, unnest(range(len(hash_ids))) AS position
    FROM requests
),
first_sent AS (
    SELECT hash, min(arrival) AS arrival FROM blocks GROUP BY hash
),
first_new AS (
    SELECT blocks.arrival, min(blocks.position) AS position
    FROM blocks JOIN first_sent USING (hash, arrival)
    GROUP BY blocks.arrival
)
SELECT count(*) AS requests,
       sum(input_length) AS prompt_tokens,
       (SELECT count(*) FROM first_sent) AS blocks,
       sum(shared_with_previous) AS within_session_tokens,
       sum(coalesce(first_new.position, len(hash_ids)) * block_size)::DOUBLE
           / sum(input_length) AS prefix_sharing_rate
FROM requests LEFT JOIN first_new USING (arrival)
"""


def _relative(path: str, root: str | None) -> str:
    if path.startswith("file:"):
        path = path[len("file:") :]
        while path.startswith("//"):
            path = path[1:]
    if root is None:
        return os.path.basename(path)
    return os.path.relpath(path, root).replace(os.sep, "/")


def _column(batch: Any, names: Sequence[str]) -> list[Any]:
    # A dict of lists or arrays, a pandas frame, or a pyarrow table or record batch.
    present = batch.column_names if hasattr(batch, "column_names") else list(batch.keys())
    for name in names:
        if name in present:
            values = batch[name]
            return values.to_pylist() if hasattr(values, "to_pylist") else list(values)
    raise KeyError(f"the batch has none of the columns {', '.join(names)}")


def map_batch(
    batch: Any,
    *,
    root: str | None = None,
    block_size: int = 16,
    tokenizer: str | None = None,
    chat_template: str | None = None,
    serving_engine: str = "vllm",
) -> dict[str, list[Any]]:
    """The map step over a batch of files, as Ray Data's ``map_batches`` passes one.

    ``batch`` (a dict of lists or arrays, a pandas frame, a pyarrow table) holds each file's name (column ``path``, as ``ray.data.read_binary_files(...,
    include_paths=True)`` and Spark's ``binaryFile`` give it, or ``name``) and its contents
    (``bytes``, ``content`` or ``text``). Names are made relative to ``root`` (the workload's
    folder, as ``kvlint workload ROOT`` names its files); without one, a file's base name.
    Returns the rows as columns (:data:`COLUMNS`).
    """
    names = [_relative(str(name), root) for name in _column(batch, ("path", "name"))]
    contents = _column(batch, ("bytes", "content", "text"))
    columns: dict[str, list[Any]] = trace_rows(
        names,
        contents,
        block_size=block_size,
        tokenizer=tokenizer,
        chat_template=chat_template,
        serving_engine=serving_engine,
    )
    return columns


def _pyarrow() -> Any:
    # Imported when asked for: the package does not depend on pyarrow.
    return importlib.import_module("pyarrow")


def arrow_schema() -> Any:
    """The rows' schema in pyarrow."""
    pa = _pyarrow()

    def kind(name: str) -> Any:
        if name in _LIST_COLUMNS:
            return pa.list_(pa.int64())
        if name in _TEXT_COLUMNS:
            return pa.string()
        if name in _FLOAT_COLUMNS:
            return pa.float64()
        return pa.int64()

    return pa.schema([(name, kind(name)) for name in COLUMNS])


def map_arrow(batches: Iterable[Any], **options: Any) -> Iterator[Any]:
    """The map step as Spark's ``mapInArrow`` calls it: pyarrow record batches of files in
    (``path`` and ``content``, Spark's ``binaryFile`` source), record batches of rows out.
    ``options`` are :func:`map_batch`'s."""
    pa = _pyarrow()
    schema = arrow_schema()
    for batch in batches:
        columns = map_batch(batch.to_pydict(), **options)
        yield pa.RecordBatch.from_pydict(columns, schema=schema)


#: The file name a log's rows without a session key are traced under.
NO_KEY = "(no session key)"


def _json_value(value: Any) -> Any:
    # What json.dumps cannot write itself, as kvlint reads the same column from Parquet.
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days * 86_400
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if hasattr(value, "tolist"):  # numpy arrays and scalars, from pandas
        return value.tolist()
    raise TypeError(f"a log column of type {type(value).__name__}")


def _log_line(row: dict[str, Any]) -> str:
    # A row as kvlint reads a JSON Lines log: its null (and NaN, pandas' null) columns left out.
    present = {
        name: value
        for name, value in row.items()
        if value is not None and not (isinstance(value, float) and math.isnan(value))
    }
    return json.dumps(present, default=_json_value)


def _rows(batch: Any) -> list[dict[str, Any]]:
    # A pyarrow table or record batch, a pandas frame, or a dict of lists, as rows.
    if hasattr(batch, "to_pylist"):
        rows: list[dict[str, Any]] = batch.to_pylist()
        return rows
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):
        return list(batch.to_dict("records"))
    names = list(batch.keys())
    return [dict(zip(names, values)) for values in zip(*(batch[name] for name in names))]


def _key_name(key: Any) -> str:
    return NO_KEY if key is None else str(key)


def _trace_log_groups(
    groups: Sequence[tuple[Any, Sequence[dict[str, Any]]]], options: dict[str, Any]
) -> dict[str, list[Any]]:
    names = [_key_name(key) for key, _ in groups]
    contents = ["\n".join(_log_line(row) for row in rows) for _, rows in groups]
    columns: dict[str, list[Any]] = trace_rows(names, contents, log=True, **options)
    return columns


def map_log_batch(batch: Any, *, key: str = "session_id", **options: Any) -> dict[str, list[Any]]:
    """The map step over a batch of a request log's rows that holds every row of each value of
    the column ``key`` in it (a group of Ray's ``groupby(key).map_groups``, a frame of Spark's
    ``applyInPandas``): the rows of each key are grouped into sessions as ``kvlint workload
    --log`` groups them, traced under the file name the key is (rows without a key under
    :data:`NO_KEY`). Columns are read as ``kvlint workload --log`` reads a log's (``request``,
    ``time``, ``response``, ``headers``, ``url``, ``session_id``, Langfuse's); a row that is not
    traced (bad, or a request that takes no prompt) is a row with its ``error``. A time without
    a time zone is read as UTC (Spark hands pandas its timestamps in the session's time zone:
    set ``spark.sql.session.timeZone`` to ``UTC``). ``options`` are :func:`map_batch`'s but
    ``root``. Returns the rows as columns (:data:`COLUMNS`); Ray needs them typed
    (``pa.Table.from_pydict(..., schema=arrow_schema())``), or a group whose ``finding`` is all
    null makes a column of nulls it cannot join with the others'."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in _rows(batch):
        groups.setdefault(row.get(key), []).append(row)
    return _trace_log_groups(list(groups.items()), options)


def map_log_arrow(
    batches: Iterable[Any], *, key: str = "session_id", **options: Any
) -> Iterator[Any]:
    """The map step over a request log's rows as Spark's ``mapInArrow`` calls it, after
    ``repartition(key)`` and ``sortWithinPartitions(key, ...)``: pyarrow record batches of rows
    whose keys come together, record batches of trace rows out. A key's rows may span batches
    (a session larger than a batch): its rows are held until the next key starts. A key met
    again after another is an error: the partition was not sorted by it. ``options`` are
    :func:`map_log_batch`'s."""
    pa = _pyarrow()
    schema = arrow_schema()
    finished: set[Any] = set()
    held: list[tuple[Any, list[dict[str, Any]]]] = []
    for batch in batches:
        for row in _rows(batch):
            value = row.get(key)
            if held and held[-1][0] == value:
                held[-1][1].append(row)
                continue
            if value in finished:
                raise ValueError(
                    f"the rows of {key} {value!r} are not together: sort each partition by {key}"
                )
            if held:
                finished.add(held[-1][0])
            held.append((value, [row]))
        ready, held = held[:-1], held[-1:]
        if ready:
            yield pa.RecordBatch.from_pydict(_trace_log_groups(ready, options), schema=schema)
    if held:
        yield pa.RecordBatch.from_pydict(_trace_log_groups(held, options), schema=schema)
