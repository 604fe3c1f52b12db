"""The workload's map and reduce steps (`kvlint_cache.workload`) on the engines people run:
one process, a real local Ray cluster (two worker processes), PySpark ``local[2]``, and DuckDB
over the Parquet files they write. Each run's figures must equal ``kvlint workload`` on the
same files exactly: the report, the hashed traces byte for byte, and the sharing rate and
block count that DuckDB's SQL computes on its own from the rows. The map step over a request
log's rows is held to ``kvlint workload --log`` on the same log in the same way.
"""

from __future__ import annotations

import glob
import json
import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from clusters import local_ray, local_spark

from kvlint_cache.workload import (
    SHARING_SQL,
    SPARK_SCHEMA,
    Workload,
    arrow_schema,
    map_arrow,
    map_batch,
    map_log_arrow,
    map_log_batch,
)

FORMATS = ("mooncake", "mooncake-agentic", "bailian", "weka", "lmcache")


def files_of(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


def batch_of(root: Path, paths: list[Path]) -> dict[str, list[Any]]:
    return {"path": [str(path) for path in paths], "bytes": [path.read_bytes() for path in paths]}


def assert_same_as_kvlint(workload: Workload, expected: dict[str, Any]) -> None:
    assert workload.report() == expected["report"]
    for (format, block), text in expected["traces"].items():
        assert workload.export_trace(format, block) == text, (format, block)


def sql_figures(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    row = connection.execute(SHARING_SQL).fetchone()
    assert row is not None
    names = [column[0] for column in connection.description]
    return dict(zip(names, row))


def assert_sql_agrees(figures: dict[str, Any], expected: dict[str, Any]) -> None:
    report = expected["report"]
    assert figures["requests"] == report["requests"]
    assert figures["prompt_tokens"] == report["prompt_tokens"]
    assert figures["within_session_tokens"] == report["reuse"]["within_session_tokens"]
    assert figures["prefix_sharing_rate"] == report["reuse"]["prefix_sharing_rate"]
    # The block count, from kvlint's own Mooncake trace at 16-token blocks: its distinct ids,
    # less the one id each request with a partial last block has alone.
    lines = [json.loads(line) for line in expected["traces"][("mooncake", 16)].splitlines()]
    ids = {hash_id for line in lines for hash_id in line["hash_ids"]}
    partial = sum(1 for line in lines if line["input_length"] % 16)
    assert figures["blocks"] == len(ids) - partial


def assert_parquet_rows_agree(out: Path, expected: dict[str, Any]) -> None:
    """The rows a distributed run wrote to Parquet in `out`: joined, they are the trace of
    `kvlint workload`; read by DuckDB, their sharing rate and block count are its too."""
    workload = Workload.from_rows(pq.read_table(str(out)).to_pydict())
    assert workload.errors == []
    assert_same_as_kvlint(workload, expected)
    connection = duckdb.connect()
    parquet = sorted(glob.glob(str(out / "*.parquet")))
    connection.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet({parquet!r})")
    assert_sql_agrees(sql_figures(connection), expected)


def test_map_and_reduce_in_one_process_equal_kvlint_workload(
    log: Path, expected: dict[str, Any]
) -> None:
    paths = files_of(log)
    # Three map calls, their rows concatenated in reverse: the reduce orders them itself.
    parts = [map_batch(batch_of(log, paths[start::3]), root=str(log)) for start in range(3)]
    rows = {name: [value for part in reversed(parts) for value in part[name]] for name in parts[0]}
    workload = Workload.from_rows(rows)
    assert workload.errors == []
    assert workload.rows == expected["report"]["requests"]
    assert_same_as_kvlint(workload, expected)
    table = pa.Table.from_pydict(rows, schema=arrow_schema())
    connection = duckdb.connect()
    connection.register("rows", table)
    assert_sql_agrees(sql_figures(connection), expected)


def test_a_bad_file_is_a_counted_row_and_the_job_goes_on(
    log: Path, bad: Path, expected: dict[str, Any]
) -> None:
    paths = files_of(bad) + files_of(log)
    rows = map_batch(
        {"name": [path.name for path in paths], "bytes": [p.read_bytes() for p in paths]}
    )
    workload = Workload.from_rows(rows)
    failed = {(file, error.split(":")[0]) for file, _, error in workload.errors}
    assert {file for file, _ in failed} == {
        "invalid.jsonl",
        "truncated.jsonl.gz",
        "not-a-request.jsonl",
    }
    for file, _, error in workload.errors:
        assert file in error, error
    # Every row read is a request or an error: nothing dropped.
    assert workload.rows == expected["report"]["requests"] + len(workload.errors)
    assert workload.report() == expected["report"]


@pytest.fixture()
def ray_cluster() -> Any:
    """A local Ray cluster with two CPUs."""
    with local_ray(cpus=2):
        yield


@pytest.mark.parametrize("crash", [False, True], ids=["ray", "ray-worker-killed"])
@pytest.mark.usefixtures("ray_cluster")
def test_ray_data_on_two_workers_equals_kvlint_workload(
    log: Path, expected: dict[str, Any], tmp_path: Path, crash: bool
) -> None:
    marker = str(tmp_path / "crashed") if crash else None
    workers_seen = tmp_path / "workers"
    workers_seen.mkdir()

    # Defined here, so that Ray ships it to its workers by value (they cannot import tests).
    def traced_with_pid(
        batch: Any, root: str, crash_marker: str | None, workers: str
    ) -> dict[str, Any]:
        """The map step, with the worker's process id beside the rows. A worker's first batch
        waits (up to 30 s) until a second worker has started one: the map's tasks are
        quick, and Ray would otherwise be free to run them all, one after the other, in the
        same process. With `crash_marker`, the first worker to reach the log's third file dies
        there (once: it leaves the marker)."""
        seen = Path(workers)
        mine = seen / str(os.getpid())
        if not mine.exists():
            mine.touch()
            deadline = time.monotonic() + 30
            while len(list(seen.iterdir())) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        paths = batch.column("path").to_pylist()
        third = any(path.endswith("session-0002.jsonl") for path in paths)
        if crash_marker and third and not os.path.exists(crash_marker):
            Path(crash_marker).write_text(str(os.getpid()))
            os._exit(1)
        rows = map_batch(batch, root=root)
        rows["worker"] = [os.getpid()] * len(rows["file"])
        return rows

    # No `max_retries`: Ray Data's map tasks already retry a dead worker without limit
    # (ray/data/_internal/remote_fn.py), and 2.60 ran the map one task at a time when it was given.
    dataset = ray.data.read_binary_files(str(log), include_paths=True, override_num_blocks=8)
    rows = dataset.map_batches(
        traced_with_pid,
        fn_kwargs={"root": str(log), "crash_marker": marker, "workers": str(workers_seen)},
        batch_format="pyarrow",
    )
    out = tmp_path / "rows"
    rows.write_parquet(str(out))
    table = pq.read_table(str(out))
    workers = set(table.column("worker").to_pylist())
    if crash:
        assert Path(marker or "").exists(), "no worker was killed"
        # The killed worker ran the map too, though none of its rows survived it.
        workers.add(int(Path(marker or "").read_text()))
    assert len(workers) >= 2, f"the map ran in {len(workers)} worker process"
    assert_parquet_rows_agree(out, expected)


@pytest.fixture(scope="module")
def spark() -> Any:
    """PySpark on two local cores, a failed task tried up to three times (a new Python worker
    for each, so that a killed one is not reused)."""
    with local_spark("local[2, 3]", **{"spark.python.worker.reuse": "false"}) as session:
        yield session


@pytest.mark.parametrize("crash", [False, True], ids=["spark", "spark-task-killed"])
def test_pyspark_map_in_arrow_equals_kvlint_workload(
    spark: Any, log: Path, expected: dict[str, Any], tmp_path: Path, crash: bool
) -> None:
    root = str(log)
    marker = str(tmp_path / "crashed") if crash else None

    def traced(batches: Any) -> Any:
        for batch in batches:
            paths = batch.column("path").to_pylist()
            third = any(path.endswith("session-0002.jsonl") for path in paths)
            if marker and third and not os.path.exists(marker):
                Path(marker).write_text(str(os.getpid()))
                os._exit(1)
            yield from map_arrow([batch], root=root)

    files = spark.read.format("binaryFile").load(root).select("path", "content").repartition(4)
    rows = files.mapInArrow(traced, SPARK_SCHEMA)
    out = tmp_path / "rows"
    rows.write.parquet(str(out))
    if crash:
        assert Path(marker or "").exists(), "no task was killed"
    assert_parquet_rows_agree(out, expected)


def test_log_rows_in_one_process_equal_kvlint_workload_log(
    parquet_log: Path, expected_log: dict[str, Any]
) -> None:
    rows = pq.read_table(str(parquet_log)).to_pylist()
    for row in rows:
        row["url"] = None
    # A body that is no request, in a session that has good ones (the third row of its key),
    # and a request that takes no prompt.
    key, sent = rows[0]["session_id"], rows[0]["time"]
    third = [index for index, row in enumerate(rows) if row["session_id"] == key][2]
    rows.insert(third, {"session_id": key, "time": sent, "request": "{not json", "url": None})
    embedding = json.dumps({"model": "e", "input": "x"})
    rows.append({"session_id": "e", "time": sent, "request": embedding, "url": "/v1/embeddings"})
    # Two batches, each holding every row of its keys, their rows concatenated in reverse.
    halves: list[list[dict[str, Any]]] = [[], []]
    for row in rows:
        halves[row["session_id"] in ("e", key)].append(row)
    assert any(row["session_id"] is None for row in halves[0]), "no row without a key"
    parts = [map_log_batch(pa.Table.from_pylist(half)) for half in reversed(halves)]
    # A pandas frame (Spark's applyInPandas hands one) gives the same rows as Arrow.
    assert map_log_batch(pa.Table.from_pylist(halves[1]).to_pandas()) == parts[0]
    assert "(no session key)" in parts[1]["file"]
    columns = {name: [value for part in parts for value in part[name]] for name in parts[0]}
    workload = Workload.from_rows(columns)
    assert sorted(workload.errors) == [
        ("e", 0, "requests that take no prompt (embeddings, token counts): 1 row"),
        (
            key,
            0,
            "row 3: not a request kvlint reads: expected a request body object, found a string",
        ),
    ]
    assert workload.rows == expected_log["report"]["requests"] + len(workload.errors)
    assert_same_as_kvlint(workload, expected_log)


def test_log_rows_of_a_key_apart_are_refused() -> None:
    rows = [
        {"session_id": key, "request": json.dumps({"model": "m", "messages": []})}
        for key in ("a", "b", "a")
    ]
    with pytest.raises(ValueError, match="session_id 'a' are not together"):
        list(map_log_arrow([pa.RecordBatch.from_pylist(rows)]))


def test_pyspark_log_rows_grouped_by_key_equal_kvlint_workload_log(
    spark: Any, parquet_log: Path, expected_log: dict[str, Any], tmp_path: Path
) -> None:
    """Spark shuffles the log's rows by `session_id`, sorts each partition by it and by time,
    and maps them in Arrow batches of 7 rows: most sessions span batches."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        log = spark.read.parquet(str(parquet_log))
        grouped = log.repartition(3, "session_id").sortWithinPartitions("session_id", "time")
        out = tmp_path / "rows"
        grouped.mapInArrow(map_log_arrow, SPARK_SCHEMA).write.parquet(str(out))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert_parquet_rows_agree(out, expected_log)


@pytest.mark.usefixtures("ray_cluster")
def test_ray_data_log_rows_grouped_by_key_equal_kvlint_workload_log(
    parquet_log: Path, expected_log: dict[str, Any], tmp_path: Path
) -> None:
    def traced(group: pa.Table) -> pa.Table:
        # Typed: a group whose `finding` is all null would otherwise be a column of nulls,
        # which Ray cannot unify with another group's strings.
        return pa.Table.from_pydict(map_log_batch(group), schema=arrow_schema())

    log = ray.data.read_parquet(str(parquet_log))
    rows = log.groupby("session_id").map_groups(traced, batch_format="pyarrow")
    out = tmp_path / "rows"
    rows.write_parquet(str(out))
    assert_parquet_rows_agree(out, expected_log)
