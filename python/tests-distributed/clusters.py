"""The local Ray cluster and Spark session the distributed tests and bench_scale.py run on:
each with its state in a temp folder of its own, removed after, and quiet."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def local_ray(cpus: int) -> Iterator[None]:
    """A local Ray cluster of `cpus` CPUs (its tasks run in worker processes of their own)."""
    import ray

    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(num_cpus=cpus, include_dashboard=False, _temp_dir=temp, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def local_spark(master: str, **config: str) -> Iterator[Any]:
    """A PySpark session on `master` (`local[N]`, `local[N, retries]`), with `config`; its
    Python workers this interpreter."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    warehouse = tempfile.mkdtemp(prefix="spark-", dir="/tmp")
    builder = (
        SparkSession.builder.master(master)
        .appName("kvlint-workload")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.local.dir", warehouse)
    )
    for key, value in config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
