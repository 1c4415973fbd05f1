"""Does it matter which of two writers of the same query runs first after an upstream change?
(Issue #33: the benchmarks compare an overwrite refresh with dbt's `table` of the same query.)

TPC-H at a small scale factor (bench/tpch_data.py) loaded into Delta in a scratch session, each
listed query written twice: as an overwrite refresh writes it (the target's history read through
the JVM, DESCRIBE QUERY, the idempotent-write and metadata confs, `INSERT OVERWRITE` of the query
pinned to the upstream versions, the history read after) and as dbt's `table` writes it
(`CREATE OR REPLACE TABLE ... AS` the query). After each refresh step (RF1 + RF2 + updates) every
query runs both ways, the refresh first on odd steps and the table first on even ones, with an
optional warm-up between the change and the timed writes:

* `none`: nothing;
* `count`: `SELECT count(*)` of every source table (what bench/tpch.py did before);
* `query`: every query run once to a `noop` sink.

usage: .venv/bin/python bench/order_effect.py [scale] [steps] [none|count|query] [q03,q10,...]
(run alone: 2 cores). Prints seconds per query, step and side; the second writer's advantage.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from typing import Dict, List, Mapping, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import tpch_data  # noqa: E402
from bench.scratch_spark import arguments, scratch  # noqa: E402

from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions  # noqa: E402
from dbt.adapters.spark_batch_refresh.storage.jvm_history import (  # noqa: E402
    history_read, read_history)
from dbt.adapters.spark_batch_refresh.storage.session_confs import (  # noqa: E402
    PARTITION_OVERWRITE, USER_METADATA, idempotent_write)

PROPS = ("TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', "
         "'delta.enableDeletionVectors' = 'true')")


def model(query: str, pinned: Optional[Mapping[str, int]]) -> str:
    """The example's query model as SQL over schema `tpch`, pinned to versions as a refresh
    pins it (sql/rewrite.py) when `pinned` is given."""
    text = open(os.path.join(tpch_data.EXAMPLE, f"{query}.sql")).read()
    text = re.sub(r"\{\{\s*config\([^}]*\)\s*\}\}", "", text)
    sql = re.sub(r"\{\{\s*source\('tpch',\s*'(\w+)'\)\s*\}\}", r"tpch.\1", text)
    return pin_versions(sql, {f"tpch.{t}": v for t, v in pinned.items()}) if pinned else sql


def main(scale: float, steps: int, warm: str, listed: str) -> None:
    queries = listed.split(",")
    data = tpch_data.generate(scale, os.path.join(tpch_data.CACHE, f"sf{scale:g}"))
    extra = dict(kv.split("=", 1) for kv in os.environ.get("BENCH_SPARK_CONFS", "").split(",") if kv)
    with scratch("br-order-bench-", "local[*]", 2, {"spark.driver.memory": "8g", **extra}) as spark:

        def timed(sql: str) -> float:
            started = time.monotonic()
            spark.sql(sql).collect()
            return time.monotonic() - started

        def confs(values: Dict[str, str]) -> None:
            for key, value in values.items():
                spark.conf.set(key, value)

        def refresh(query: str, step: int, versions: Mapping[str, int]) -> float:
            started = time.monotonic()
            read_history(spark, history_read(f"DESCRIBE HISTORY {query}_br LIMIT 1"))
            spark.sql(f"DESCRIBE QUERY {model(query, versions)}").collect()
            txn = {**idempotent_write(f"batch_refresh:{query}", step * 1_000_000),
                   USER_METADATA: '{"action": "overwrite"}', PARTITION_OVERWRITE: "static"}
            confs(txn)
            spark.sql(f"INSERT OVERWRITE {query}_br SELECT * FROM ({model(query, versions)})")
            for key in txn:
                spark.conf.unset(key)
            read_history(spark, history_read(f"DESCRIBE HISTORY {query}_br LIMIT 20"))
            return time.monotonic() - started

        spark.sql("CREATE DATABASE tpch")
        for statement in tpch_data.load_sql("tpch", data):
            spark.sql(statement)
        for query in queries:
            spark.sql(f"CREATE TABLE {query}_br USING delta {PROPS} AS {model(query, None)}")
            spark.sql(f"CREATE TABLE {query}_t USING delta AS {model(query, None)}")
        second_gain: Dict[str, List[float]] = {"refresh": [], "table": []}
        for step in range(1, steps + 1):
            for statement in tpch_data.refresh_sql("tpch", step):
                spark.sql(statement)
            versions = {t: int(spark.sql(f"DESCRIBE HISTORY tpch.{t} LIMIT 1").collect()[0][
                "version"]) for t in tpch_data.TABLES}
            if warm == "count":
                for table in tpch_data.TABLES:
                    spark.sql(f"SELECT count(*) FROM tpch.{table}").collect()
            elif warm == "query":
                for query in queries:
                    spark.sql(model(query, None)).write.format("noop").mode("overwrite").save()
            refresh_first = step % 2 == 1
            for query in queries:
                table_sql = f"CREATE OR REPLACE TABLE {query}_t USING delta AS {model(query, None)}"
                if refresh_first:
                    r, t = refresh(query, step, versions), timed(table_sql)
                else:
                    t, r = timed(table_sql), refresh(query, step, versions)
                second_gain["table" if refresh_first else "refresh"].append(
                    (r - t) if refresh_first else (t - r))
                print(f"step {step} ({'refresh' if refresh_first else 'table'} first) {query}: "
                      f"refresh {r:.2f} s, table {t:.2f} s, refresh / table {r / t:.2f}x",
                      flush=True)
        for side, gains in second_gain.items():
            if gains:
                print(f"{side} second: first minus second, median {statistics.median(gains):+.2f} s "
                      f"over {len(gains)} pairs")


if __name__ == "__main__":
    main(*arguments(0.1, 2, "none", "q01,q02,q03,q10,q16,q22"))
