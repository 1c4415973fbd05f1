"""Spark confs every test JVM uses (embedded session, crash subprocesses, Thrift Server).

Small tables and short-lived JVMs: C1-only JIT and few partitions (~15% faster statements
here); one Delta snapshot partition makes the tiny state/history commits ~35% cheaper.
"""

from typing import Dict

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"

PARTITION_CONFS: Dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
}

TEST_SPARK_CONFS: Dict[str, str] = {**PARTITION_CONFS, "spark.driver.extraJavaOptions": JVM_OPTIONS}
