"""The distributed map step's scale, measured: a benchmark, not a test, run by hand in the
distributed venv (scripts/setup-distributed.sh, with the wheel installed). Not run by the test
command: it takes about seven minutes, and Spark's per-core figure sits at its bound.

On a generated log (make_log.py) of SESSIONS sessions captured PER_FILE to an HTTP Archive (as a
proxy in front of an engine writes them: many sessions a file, their requests interleaved), it
times the same map job, files in and rows written as Parquet, on Ray Data and on PySpark with
one worker and with two, and `kvlint workload` on one thread over the same folder. Each worker
reports its peak resident memory after every batch it maps. It prints every figure and exits 1
when a target is missed:

- two workers finish the job at least 1.6× faster than one, on Ray and on Spark;
- the map step's throughput per core (sessions a second with one worker) is within 1.5× of
  `kvlint workload`'s on one thread (`RAYON_NUM_THREADS=1`), both including reading the files;
- a worker's memory is bounded by its batch, not by the log: its peak after the last batch is
  at most 1.25× its peak after its first (plus 32 MB of the runtime's own growth).

    python bench_scale.py [SESSIONS [PER_FILE]]     (default 36000 sessions, 250 a file)

At 12,000 sessions the clusters' start (worker processes, imports, the first tasks: about 3 s)
weighs on the one-worker time as much as a tenth of the work; the default log is three times
that, and still small beside a month of logs.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from clusters import local_ray, local_spark
from make_log import write_har_log

from kvlint_cache.workload import SPARK_SCHEMA, map_arrow, map_batch

MIN_SPEED_UP = 1.6
MAX_PER_CORE_RATIO = 1.5
MAX_MEMORY_GROWTH = 1.25
MEMORY_SLACK_KB = 32 * 1024


def peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def kvlint_one_thread(*source: str | Path) -> tuple[float, int]:
    """`kvlint workload SOURCE` on one thread: its seconds and the requests it counted."""
    command = Path(sys.executable).parent / "kvlint"
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    started = time.perf_counter()
    done = subprocess.run(
        [str(command), "workload", *map(str, source), "--format", "json", "--no-trace-cache"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    seconds = time.perf_counter() - started
    return seconds, json.loads(done.stdout)["requests"]


def ray_job(log: Path, workers: int, out: Path) -> float:
    """The map job on a local Ray cluster of `workers` CPUs: its seconds, the cluster's start
    excluded."""
    import ray

    def mapped(batch: Any, root: str) -> dict[str, Any]:
        rows = map_batch(batch, root=root)
        rows["worker"] = [os.getpid()] * len(rows["file"])
        rows["peak_rss_kb"] = [peak_rss_kb()] * len(rows["file"])
        return rows

    with local_ray(cpus=workers):
        # Ray Data reserves part of the CPUs for each operator by default: with two CPUs, the
        # map (fused with the read) kept one and ran one task at a time beside the write.
        ray.data.DataContext.get_current().op_resource_reservation_enabled = False
        started = time.perf_counter()
        # A block a file: Ray's default (about one block per hundred small files) would read
        # the whole log as one block, mapped by one worker.
        count = len(list(log.iterdir()))
        files = ray.data.read_binary_files(str(log), include_paths=True, override_num_blocks=count)
        rows = files.map_batches(mapped, fn_kwargs={"root": str(log)}, batch_format="pyarrow")
        rows.write_parquet(str(out))
        return time.perf_counter() - started


def spark_job(log: Path, workers: int, out: Path) -> float:
    """The map job on PySpark `local[workers]`: its seconds, the session's start excluded."""
    root = str(log)

    def mapped(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for rows in map_arrow(batches, root=root):
            count = rows.num_rows
            yield rows.append_column(
                "worker", pa.array([os.getpid()] * count, pa.int64())
            ).append_column("peak_rss_kb", pa.array([peak_rss_kb()] * count, pa.int64()))

    with local_spark(f"local[{workers}]") as spark:
        started = time.perf_counter()
        files = spark.read.format("binaryFile").load(root).select("path", "content")
        files = files.repartition(4 * workers)
        rows = files.mapInArrow(mapped, f"{SPARK_SCHEMA}, worker bigint, peak_rss_kb bigint")
        rows.write.parquet(str(out))
        return time.perf_counter() - started


def memory_growth(out: Path) -> tuple[int, int]:
    """The largest worker's peak resident memory after its first batch and after its last, in
    KB (a peak only grows, so its first batch reported the least)."""
    table = pq.read_table(str(out), columns=["worker", "peak_rss_kb"]).to_pydict()
    by_worker: dict[int, list[int]] = {}
    for worker, peak in zip(table["worker"], table["peak_rss_kb"], strict=True):
        by_worker.setdefault(worker, []).append(peak)
    return max(((min(peaks), max(peaks)) for peaks in by_worker.values()), key=lambda p: p[1])


def main() -> int:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 36_000
    per_file = int(sys.argv[2]) if len(sys.argv) > 2 else 250
    missed = []
    with tempfile.TemporaryDirectory(prefix="kvlint-scale-") as folder:
        log = Path(folder) / "log"
        files = write_har_log(log, sessions, per_file)
        size = sum(path.stat().st_size for path in files)
        print(f"scale: {sessions} sessions in {len(files)} captures, {size / 1e6:.0f} MB")

        seconds, requests = kvlint_one_thread(log)
        baseline = sessions / seconds
        print(
            f"scale: kvlint workload on one thread: {seconds:.1f} s, {requests} requests, "
            f"{baseline:.0f} sessions/s"
        )

        for engine, job in (("ray", ray_job), ("spark", spark_job)):
            times = {}
            for workers in (1, 2):
                out = Path(folder) / f"{engine}-{workers}"
                times[workers] = job(log, workers, out)
                first, last = memory_growth(out)
                print(
                    f"scale: {engine} with {workers} worker(s): {times[workers]:.1f} s, "
                    f"{sessions / times[workers]:.0f} sessions/s; a worker's peak memory "
                    f"{first / 1024:.0f} MB after its first batch, {last / 1024:.0f} MB after its last"
                )
                if last > first * MAX_MEMORY_GROWTH + MEMORY_SLACK_KB:
                    missed.append(f"{engine} {workers}: a worker's memory grew with the log")
                shutil.rmtree(out)
            speed_up = times[1] / times[2]
            per_core = baseline / (sessions / times[1])
            print(
                f"scale: {engine}: 2 workers {speed_up:.2f}× one (target ≥ {MIN_SPEED_UP}×); "
                f"kvlint workload on one thread {per_core:.2f}× the map's throughput on one "
                f"(target ≤ {MAX_PER_CORE_RATIO}×)"
            )
            if speed_up < MIN_SPEED_UP:
                missed.append(f"{engine}: 2 workers only {speed_up:.2f}× one")
            if per_core > MAX_PER_CORE_RATIO:
                missed.append(f"{engine}: per-core throughput {per_core:.2f}× below kvlint's")
    for line in missed:
        print(f"scale: target missed: {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
