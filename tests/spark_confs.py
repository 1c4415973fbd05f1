"""Spark confs every test JVM uses (embedded session, crash subprocesses, Thrift Server).

Small tables: few partitions, one Delta snapshot partition (tiny commits ~35% cheaper) and no
adaptive query execution (its re-planning costs more than it saves on a few rows). The JIT is
left tiered: a test JVM lives for minutes, and C1-only made its statements slower. Measured on
this machine (2 cores, nothing else running) by a loop of the statements a refresh issues
(create, insert, CTAS, UPDATE, DESCRIBE HISTORY/DETAIL, CACHE TABLE, MERGE, EXCEPT ALL) on
20-row Delta tables, 12 rounds: C1-only 305 s, tiered 228 s, tiered without AQE 192 s; MERGE
7.0 / 4.6 / 3.6 s. Whole-stage codegen off changed nothing (231 s).

A local JVM (the pytest process, crash subprocesses, the Spark 3.5 server) runs one task slot
and one shuffle partition: on two cores the JIT compiler threads are busy for the JVM's first
minutes (the C2 thread alone at 70-90% of a core while a test runs), and a second task thread
only competes with them for tiny tasks. The same loop (10 rounds):
local[2] + 2 partitions 105-110 s, local[1] + 1 partition 92 s. Raising the C2 thresholds
(fewer, later compilations) made a crash-test process slower (232 -> 279 s).

Interpreted evaluation (`spark.sql.codegen.wholeStage=false` with
`spark.sql.codegen.factoryMode=NO_CODEGEN`, Spark's own interpreted paths for projections,
predicates and orderings): much of the JVMs' CPU went to compiling generated code (Janino,
then the JIT on its classes) for query shapes that each run once on a few rows. A loop of 12 rounds of
new-shaped statements on 40-row Delta tables (create, insert, CTAS aggregate, MERGE, UPDATE,
CACHE TABLE of a window, change feed, REPLACE WHERE, EXCEPT ALL; local[1], idle, 2026-11-29):
143 / 146 s with codegen, 127 / 121 s without, 129 s with only the factory mode; whole-stage
codegen off alone had changed nothing (above). `test_shapes.py` alone 462 -> 368 s,
`test_changes_only.py` 240 -> 224 s; `make test` 59.5 -> 51.3 min. Only test JVMs: the
product keeps Spark's default, and the generated-code paths users run stay checked by
`make tpcds` and the benches' equality checks (their sessions use the product's confs).
"""

from typing import Dict

JVM_OPTIONS = "-XX:+UseParallelGC"

PARTITION_CONFS: Dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.enabled": "false",
    # Interpreted evaluation: a test compiles hundreds of query shapes once each, on rows
    # where Janino's compile costs more than the generated code saves.
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # VACUUM lists the table's directory in a job of this many tasks (Delta's VacuumCommand
    # passes it as the listing parallelism; Spark's default 10,000): on one task slot that job
    # took 82-116 s of each of the suite's six VACUUMs of 20-row tables, 2.7-3.6 s with 2.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}

# The standalone cluster keeps 2 partitions so both executors get work.
LOCAL_CONFS: Dict[str, str] = {
    **PARTITION_CONFS,
    "spark.master": "local[1]",
    "spark.sql.shuffle.partitions": "1",
}

TEST_SPARK_CONFS: Dict[str, str] = {**LOCAL_CONFS, "spark.driver.extraJavaOptions": JVM_OPTIONS}
