"""A request log of a million sessions, end to end: a benchmark run by hand in the distributed
venv (scripts/setup-distributed.sh, with the wheel installed), not by the test command (it takes
tens of minutes).

1. **The log.** make_log.py's sessions (two to seven turns each) as a request log in Parquet:
   one row per request in the order sent, sessions interleaved, `session_id`, `time`, `request`
   and `response` (zstd, ``ROWS_PER_FILE`` rows a file, as a day's partition would be).
2. **Extraction on PySpark** ``local[2]``: the log's rows shuffled by `session_id`, each
   partition sorted by it and by time, and traced by the map step over log rows
   (``map_log_arrow``) into one row per request, written as Parquet. Each Python worker reports
   its peak resident memory after every batch; the JVM's (driver and executors in one process,
   in local mode) is read from ``/proc`` at the end.
3. **The baseline**: ``kvlint workload --log`` on one thread (``RAYON_NUM_THREADS=1``) over the
   first ``SAMPLE_SESSIONS`` sessions of the same generator, written apart (it holds every
   request it takes until grouping, so it does not take the whole log): its sessions a second
   per core against Spark's.
4. **The reduce on DuckDB**, over the rows' Parquet: the prefix-sharing rate
   (``SHARING_SQL``), the requests' length percentiles and the number of rows not traced, under a
   memory limit (``DUCKDB_MEMORY``), spilling to disk beyond it.

It prints each stage's seconds and peak memory, and exits 1 when the job's sessions a second
per core are more than 1.5× below the baseline's, when a Python worker's peak grew with the log
rather than with its batch (its peak after its last batch over 1.25× its peak after
its first, plus 32 MB), or when a row was not traced.

    python bench_log.py [SESSIONS [LOG]]     (default 1,000,000; LOG: a folder where the log is
                                              kept, written when it is missing)
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
from bench_scale import (
    MAX_MEMORY_GROWTH,
    MAX_PER_CORE_RATIO,
    MEMORY_SLACK_KB,
    kvlint_one_thread,
    memory_growth,
)
from clusters import local_spark

from kvlint_cache.workload import SHARING_SQL, SPARK_SCHEMA, map_log_arrow

ROWS_PER_FILE = 500_000
SAMPLE_SESSIONS = 20_000
PARTITIONS = 64
DUCKDB_MEMORY = "4GB"

LENGTHS_SQL = """
SELECT quantile_disc(input_length, [0.5, 0.9, 0.99]) AS input,
       quantile_disc(output_length, [0.5, 0.9, 0.99]) AS output,
       count(*) FILTER (WHERE error IS NOT NULL) AS not_traced
FROM rows
"""


def peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def process_peak_kb(pid: int) -> int:
    """A live process's peak resident memory (VmHWM), in KB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def generate(log: Path, sessions: int) -> None:
    """Writes the log in a process of its own, so that its memory is counted apart."""
    script = (
        "import sys; from pathlib import Path; from make_log import write_parquet_log; "
        f"write_parquet_log(Path({str(log)!r}), {sessions}, {ROWS_PER_FILE})"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parent)


def spark_extraction(log: Path, out: Path) -> tuple[float, int]:
    """The map job: its seconds (the session's start excluded) and the JVM's peak in KB."""

    def traced(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for rows in map_log_arrow(batches):
            count = rows.num_rows
            yield rows.append_column(
                "worker", pa.array([os.getpid()] * count, pa.int64())
            ).append_column("peak_rss_kb", pa.array([peak_rss_kb()] * count, pa.int64()))

    with local_spark("local[2]", **{"spark.driver.memory": "4g"}) as spark:
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        started = time.perf_counter()
        rows = spark.read.parquet(str(log))
        grouped = rows.repartition(PARTITIONS, "session_id").sortWithinPartitions(
            "session_id", "time"
        )
        schema = f"{SPARK_SCHEMA}, worker bigint, peak_rss_kb bigint"
        grouped.mapInArrow(traced, schema).write.parquet(str(out))
        return time.perf_counter() - started, process_peak_kb(jvm)


def reduce_on_duckdb(out: Path, spill: Path) -> tuple[float, dict[str, Any], dict[str, Any]]:
    started = time.perf_counter()
    sql = duckdb.connect()
    sql.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
    sql.execute(f"SET temp_directory = '{spill}'")
    sql.execute("SET preserve_insertion_order = false")
    sql.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet('{out}/*.parquet')")
    sharing = sql.execute(SHARING_SQL)
    names = [column[0] for column in sharing.description]
    figures = dict(zip(names, sharing.fetchone() or ()))
    lengths = sql.execute(LENGTHS_SQL)
    names = [column[0] for column in lengths.description]
    percentiles = dict(zip(names, lengths.fetchone() or ()))
    return time.perf_counter() - started, figures, percentiles


def main() -> int:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    missed = []
    with tempfile.TemporaryDirectory(prefix="kvlint-log-", dir="/tmp") as folder:
        log = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(folder) / "log"
        out, spill = Path(folder) / "rows", Path(folder) / "spill"
        started = time.perf_counter()
        written = ""
        if not log.exists():
            generate(log, sessions)
            written = f"; written in {time.perf_counter() - started:.0f} s"
        files = sorted(log.iterdir())
        size = sum(path.stat().st_size for path in files)
        requests = sum(pq.ParquetFile(path).metadata.num_rows for path in files)
        print(
            f"log: {sessions:,} sessions, {requests:,} requests in {len(files)} Parquet files, "
            f"{size / 1e9:.2f} GB{written}"
        )
        sample = Path(folder) / "sample"
        generate(sample, SAMPLE_SESSIONS)
        baseline = SAMPLE_SESSIONS / kvlint_one_thread("--log", sample)[0]
        print(f"kvlint workload --log on one thread: {baseline:,.0f} sessions/s")

        seconds, jvm_kb = spark_extraction(log, out)
        print(
            f"extraction on Spark local[2]: {seconds:.0f} s, {sessions / seconds:,.0f} sessions/s, "
            f"{requests / seconds:,.0f} requests/s; JVM peak {jvm_kb / 1024:,.0f} MB"
        )
        per_core = baseline / (sessions / seconds / 2)
        print(
            f"  kvlint workload --log on one thread {per_core:.2f}× the job's sessions a second "
            f"per core (target ≤ {MAX_PER_CORE_RATIO}×)"
        )
        if per_core > MAX_PER_CORE_RATIO:
            missed.append(f"per-core throughput {per_core:.2f}× below kvlint's")
        first, last = memory_growth(out)
        print(
            f"  the largest Python worker's peak: {first / 1024:.0f} MB after its first batch, "
            f"{last / 1024:.0f} MB after its last"
        )
        if last > first * MAX_MEMORY_GROWTH + MEMORY_SLACK_KB:
            missed.append("a worker's memory grew with the log")

        seconds, figures, lengths = reduce_on_duckdb(out, spill)
        print(
            f"reduce on DuckDB (memory limit {DUCKDB_MEMORY}): {seconds:.0f} s; "
            f"{figures['requests']:,} requests, {figures['prompt_tokens']:,} prompt tokens, "
            f"{figures['blocks']:,} distinct blocks, prefix-sharing rate "
            f"{figures['prefix_sharing_rate']:.1%}"
        )
        print(
            f"  input length p50/p90/p99 {lengths['input']}, output {lengths['output']}; "
            f"rows not traced {lengths['not_traced']}"
        )
        print(f"this process (the driver and DuckDB): peak {peak_rss_kb() / 1024:,.0f} MB")
        if lengths["not_traced"] or figures["requests"] != requests:
            missed.append(f"{figures['requests']:,} of {requests:,} requests traced")
    for line in missed:
        print(f"log: target missed: {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
