"""What rewriting a whole Delta target costs, by the ways a refresh could do it (issue #33: an
`overwrite` refresh must cost what dbt's `table` costs).

A source of N rows; a target built from it (deletion vectors and change feed on, as
batch_refresh creates it). Each round rewrites the target from the source by one of:

* `insert_overwrite`: `INSERT OVERWRITE t SELECT ...` (what an overwrite refresh runs);
* `replace_where_true`: `INSERT INTO t REPLACE WHERE true SELECT ...`;
* `create_or_replace`: `CREATE OR REPLACE TABLE t ... AS SELECT ...` (what dbt's `table` runs);

and reports the median seconds, whether the change feed over the commit can be read by
`table_changes` (a downstream replay needs it) and what it holds.

usage: .venv/bin/python bench/overwrite_paths.py [rows] [rounds]   (run alone: 2 cores)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.scratch_spark import arguments, scratch  # noqa: E402

SELECT = ("SELECT id, id % 1000 AS k, CAST(id % 997 AS DECIMAL(12,2)) AS amount, "
          "IF(id % 7 = 0, 'done', 'open') AS status FROM src")
PROPS = ("TBLPROPERTIES (delta.enableChangeDataFeed = true, "
         "delta.enableDeletionVectors = true)")
METHODS = {
    "insert_overwrite": f"INSERT OVERWRITE t {SELECT}",
    "replace_where_true": f"INSERT INTO t REPLACE WHERE true {SELECT}",
    "create_or_replace": f"CREATE OR REPLACE TABLE t USING delta {PROPS} AS {SELECT}",
}


def main(rows: int, rounds: int) -> None:
    with scratch("br-overwrite-bench-", "local[*]", 2, {"spark.driver.memory": "8g"}) as spark:
        spark.sql(f"CREATE TABLE src USING delta AS SELECT id FROM range({rows})")
        spark.sql(f"CREATE TABLE t USING delta {PROPS} AS {SELECT}")
        found: Dict[str, List[float]] = {m: [] for m in METHODS}
        feed: Dict[str, str] = {}
        for r in range(rounds + 1):
            for method, statement in METHODS.items():
                version = spark.sql("DESCRIBE HISTORY t LIMIT 1").collect()[0]["version"]
                started = time.monotonic()
                try:
                    spark.sql(statement).collect()
                except Exception as exc:  # noqa: BLE001 - a path Delta refuses is a result
                    feed[method] = f"refused: {str(exc).splitlines()[0][:120]}"
                    continue
                seconds = time.monotonic() - started
                if r:  # the first round warms the JIT
                    found[method].append(seconds)
                try:
                    feed[method] = ", ".join(
                        f"{row['_change_type']} {row['n']}" for row in spark.sql(
                            f"SELECT _change_type, count(*) AS n FROM table_changes('t', "
                            f"{version + 1}) GROUP BY 1 ORDER BY 1").collect())
                except Exception as exc:  # noqa: BLE001
                    feed[method] = f"change feed unreadable: {str(exc).splitlines()[0][:120]}"
        for method, secs in found.items():
            shown = (f"median {statistics.median(secs):6.2f} s  ({', '.join(f'{s:.2f}' for s in secs)})"
                     if secs else "no time")
            print(f"{method:20s} {shown}   change feed: {feed.get(method)}")


if __name__ == "__main__":
    main(*arguments(1_000_000, 3))
