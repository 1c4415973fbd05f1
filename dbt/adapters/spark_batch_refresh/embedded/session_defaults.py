"""Spark confs for the embedded (`method: session`) Spark, computed without touching Spark.

Static confs (jars, extensions, catalog, warehouse, metastore) only take effect when the first
SparkSession of the process is created, so they are applied once, before dbt-spark's cursor ever
calls `getOrCreate()`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Dict, List, Mapping, Optional

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
LOG4J_CONFIG = os.path.join(os.path.dirname(__file__), "log4j2.properties")
JARS_ENV = "BATCH_REFRESH_DELTA_JARS"
PACKAGE_ENV = "BATCH_REFRESH_DELTA_PACKAGE"
# Delta (3.3+, 4.x) keeps a small table's file list in each commit's checksum file, so a commit
# needs no state reconstruction (a Spark job over the log). Where the session, JVM or system time
# zone is not UTC (a laptop anywhere but UTC) this conf makes it reconstruct the state anyway after
# every commit, to compare it with the checksum: a diagnostic of Delta's own (its source names
# spurious mismatches of pre-1883 timestamps in non-UTC zones); on a mismatch it only drops the
# list from the checksum, and UTC sessions never check. In a New York JVM with it off an append
# replayed in 0.5 s instead of 0.9 s, a table build took 0.05-0.2 s less (bench/README.md,
# "Commits outside UTC").
DELTA_VERIFY_NON_UTC = "spark.databricks.delta.allFilesInCrc.verificationMode.forceOnNonUTC.enabled"


def delta_maven_coordinate() -> str:
    """The Delta jar matching the installed pyspark and delta-spark wheels."""
    spark_version = metadata.version("pyspark")
    delta_version = metadata.version("delta-spark")
    spark_minor = ".".join(spark_version.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{delta_version}"


@dataclass(frozen=True)
class SessionSettings:
    """What the profile says about the embedded session (all optional)."""

    session_dir: str = ".batch_refresh"
    delta_jars: Optional[List[str]] = None
    delta_package: Optional[str] = None
    user_confs: Mapping[str, str] = field(default_factory=dict)
    # Jar paths Spark's Ivy resolved on an earlier start (see jar_cache_file): using them
    # directly skips Ivy's resolution, its console output and any network access.
    cached_jars: Optional[List[str]] = None


def _jar_confs(settings: SessionSettings, env: Mapping[str, str]) -> Dict[str, str]:
    # Precedence: explicit jar paths (air-gapped machines) > explicit coordinate > the
    # coordinate matching the installed wheels, resolved by Spark's Ivy from Maven Central
    # once and then from the Ivy cache offline.
    jars = list(settings.delta_jars or [])
    if not jars and env.get(JARS_ENV):
        jars = [p for p in env[JARS_ENV].split(",") if p]
    if jars:
        return {"spark.jars": ",".join(os.path.abspath(os.path.expanduser(j)) for j in jars)}
    if settings.cached_jars and all(os.path.isfile(j) for j in settings.cached_jars):
        return {"spark.jars": ",".join(settings.cached_jars)}
    return {"spark.jars.packages": delta_package(settings, env)}


def delta_package(settings: SessionSettings, env: Mapping[str, str]) -> str:
    return settings.delta_package or env.get(PACKAGE_ENV) or delta_maven_coordinate()


def jar_cache_file(package: str, env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dbt-spark-batch-refresh", package.replace(":", "_") + ".jars")


def embedded_confs(
    settings: SessionSettings, cwd: str, env: Optional[Mapping[str, str]] = None
) -> Dict[str, str]:
    """Builder confs for the embedded session; the user's `server_side_parameters` win."""
    env = os.environ if env is None else env
    base = os.path.abspath(os.path.join(cwd, os.path.expanduser(settings.session_dir)))
    metastore = os.path.join(base, "metastore_db")
    confs: Dict[str, str] = {
        "spark.master": "local[*]",
        "spark.app.name": "dbt-spark-batch-refresh",
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.warehouse.dir": os.path.join(base, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={metastore};create=true"
        ),
        # derby.log lands in derby.system.home rather than in the caller's cwd.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={base} -Dlog4j.configurationFile=file:{LOG4J_CONFIG}"
        ),
        # Tables created without USING become Delta, and every Delta table created here has
        # its change feed on, so seeds and plain `table` models are valid upstreams.
        "spark.sql.sources.default": "delta",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        # Local-sized defaults: 200 shuffle partitions cost more than they give on a laptop;
        # one per core keeps every core busy. Adaptive execution re-plans each query stage,
        # which on local tables costs more than it saves (a tiny MERGE 4.6 -> 3.6 s without it,
        # tests/spark_confs.py); a large local job can turn it back on in the profile.
        "spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)),
        "spark.sql.adaptive.enabled": "false",
        # Delta rebuilds table snapshots with 50 partitions by default; on a few local cores
        # that costs seconds per statement on small tables (measured 9 s -> 2.5 s per MERGE
        # at 4 partitions; 1 partition again cut a tiny table's UPDATE 3.5 -> 2.1 s, MERGE
        # 6.2 -> 4.4 s and the first read after a commit 4.0 -> 2.2 s). A local table's log
        # is small enough for one task.
        "spark.databricks.delta.snapshotPartitions": "1",
        # A long-lived session compiles the same query shapes refresh after refresh; Spark
        # keeps only 100 compiled classes, which a run of a few models and Delta's own commit
        # queries evicts, so the first writer after an upstream change compiled again (of two
        # writers of one query the first took 0.35 s longer at 100 entries, 0.05-0.3 s at
        # 1,000: medians of six TPC-H queries, bench/order_effect.py). Static: applies when
        # the session starts.
        "spark.sql.codegen.cache.maxEntries": "1000",
        DELTA_VERIFY_NON_UTC: "false",
        "spark.driver.memory": "4g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    confs.update(_jar_confs(settings, env))
    user = {str(k): str(v) for k, v in settings.user_confs.items()}
    # JVM options add to ours (metastore home, log config) instead of replacing them.
    java_opts = user.pop("spark.driver.extraJavaOptions", "")
    confs.update(user)
    if java_opts:
        confs["spark.driver.extraJavaOptions"] += " " + java_opts
    return confs

