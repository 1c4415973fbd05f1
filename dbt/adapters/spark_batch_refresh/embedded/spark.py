"""The embedded (`method: session`) Spark: one JVM per process, a SparkSession per dbt
connection."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace
from typing import Any, Dict

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_batch_refresh.embedded.jar_cache import (
    remember_jars,
    start_resolving_once,
)
from dbt.adapters.spark_batch_refresh.embedded.session_defaults import (
    SessionSettings,
    delta_package,
    embedded_confs,
    jar_cache_file,
)

logger = AdapterLogger("SparkBatchRefresh")


class EmbeddedSpark:
    """One JVM per process; each dbt connection gets its own SparkSession on it.

    Separate sessions keep session confs (the idempotent-write txn confs, commit metadata)
    from leaking between dbt threads that refresh different models at once.
    """

    _lock = threading.Lock()
    _base: Any = None

    @classmethod
    def session_for_connection(cls, settings: SessionSettings) -> Any:
        with cls._lock:
            if cls._base is None:
                cls._base = cls._start(settings)
            return cls._base.newSession()

    @staticmethod
    def _start(settings: SessionSettings) -> Any:
        from pyspark.sql import SparkSession

        quiet_pyspark_error_log()
        active = SparkSession.getActiveSession()
        if active is not None:
            # Someone (a test harness, a notebook) already started Spark: reuse it.
            return active
        cache = jar_cache_file(delta_package(settings, os.environ), os.environ)
        return start_resolving_once(
            cache,
            lambda jars: embedded_confs(replace(settings, cached_jars=jars), cwd=os.getcwd()),
            lambda confs: EmbeddedSpark._build(confs, cache))

    @staticmethod
    def _build(confs: Dict[str, str], cache: str) -> Any:
        from pyspark.sql import SparkSession

        # The embedded Spark serves only this process: bind it to loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.makedirs(os.path.dirname(confs["spark.sql.warehouse.dir"]), exist_ok=True)
        builder = SparkSession.builder.enableHiveSupport()
        for key, value in confs.items():
            builder = builder.config(key, value)
        logger.debug(f"Starting embedded Spark with {confs}")
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if "spark.jars.packages" in confs and not remember_jars(
                cache, spark.sparkContext.getConf().get("spark.jars", "")):
            logger.debug(f"Could not remember the Delta jars in {cache}")
        return spark


def quiet_pyspark_error_log() -> None:
    """PySpark 4 writes every SQL error it converts to stderr a second time, as a JSON record
    with the JVM's stack trace, from loggers of its own that do not propagate. dbt already
    reports the error (once, as a dbt error), and some statements of a refresh fail by design
    (the state table a first run looks for before it exists): on a console that was a
    screenful of JSON per model. Those loggers are turned off for this process."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pyspark before 4.0 has no such logger
        return
    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
