"""What the atomic ways of applying one staged change set cost on one Delta table (issue #15,
item 4: "pick the cheapest atomic apply ... and measure it against the alternatives").

A target of N rows (deletion vectors and change feed on, as batch_refresh creates it) receives
change sets of 0.1% of its keys spread uniformly (the case where the replay's MERGE loses to
the rebuild: every file holds a changed key): 80% updates, 10% deletes, 10% new keys. Each
change set is staged and cached the way a replay stages it (model columns, `_br_present`,
`_br_k_0`), then applied by one of:

* `merge`: the replay's MERGE today (sqlgen.merge_staging: update only changed rows, delete
  tombstones, insert new keys, the key range as target-only literals);
* `replace_where`: one `INSERT INTO t REPLACE WHERE id IN (<literal keys>) SELECT <rows>`
  (Delta's DELETE with deletion vectors, then the insert, in one commit);
* `delete_insert`: the same as two commits (not atomic; for reference only);
* `replace_using`: the DataFrame write `mode("overwrite").option("replaceUsing", "id")` of the
  present rows (Delta 4.4 on Spark 4.2; the embedded session and Spark Connect only, not SQL):
  one WRITE commit replacing the rows of the frame's keys and inserting new ones. It has no
  form for a delete (a key with no row in the frame keeps its target row), so its change set
  leaves the tombstones out: timed for the write path, not a faithful apply of deletes;
* `blind_insert`: the staged rows appended by a plain `INSERT INTO` (wrong as an apply: old
  rows stay): the cheapest commit a write can make, the floor the others are read against.

`recent` (third argument) instead picks the changed keys among the newest 2% of ids, in a
target whose files hold contiguous id ranges (rows appended in id order, as orders or events
are), where the MERGE's key-range literals let Delta skip all but the newest files.

usage: .venv/bin/python bench/apply_paths.py [rows] [rounds] [uniform|recent]
(run alone: 2 cores)
Prints the median seconds per method and what each wrote to the target's change feed.
Everything lives in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import random
import statistics
import os
import sys
import time
from typing import Dict, List

from dbt.adapters.spark_batch_refresh.sql import sqlgen

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.scratch_spark import arguments, scratch  # noqa: E402

COLUMNS = ["id", "customer_id", "amount", "status"]


def main(rows: int, rounds: int, distribution: str = "uniform") -> None:
    rng = random.Random(15)
    with scratch("br-apply-bench-", "local[*]", 2, {"spark.driver.memory": "8g"}) as spark:
        spark.sql("CREATE TABLE t (id BIGINT, customer_id BIGINT, amount DECIMAL(12,2), "
                  "status STRING) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true, "
                  "delta.enableDeletionVectors = true)")
        spark.sql(f"INSERT INTO t SELECT id, id % 100000, CAST(id % 997 AS DECIMAL(12,2)), "
                  f"IF(id % 7 = 0, 'done', 'open') FROM range({rows}) "
                  + ("DISTRIBUTE BY id % 20" if distribution == "uniform"
                     else f"DISTRIBUTE BY floor(id * 20 / {rows}) SORT BY id"))
        top = rows
        found: Dict[str, List[float]] = {
            "merge": [], "replace_where": [], "replace_where_guarded": [], "delete_insert": [],
            "replace_using": [], "blind_insert": []}
        feed: Dict[str, str] = {}
        for r in range(rounds + 1):
            for method in found:
                changed = max(10, rows // 1000)
                pool = range(top) if distribution == "uniform" else range(top - top // 50, top)
                keys = rng.sample(pool, changed - changed // 10)
                new = list(range(top, top + changed // 10))
                top += len(new)
                deleted = set(keys[: changed // 10])
                stage(spark, keys, deleted, new, r)
                version = spark.sql("DESCRIBE HISTORY t LIMIT 1").collect()[0]["version"]
                started = time.monotonic()
                apply(spark, method, keys + new, new)
                seconds = time.monotonic() - started
                if r:  # the first round warms the JIT
                    found[method].append(seconds)
                feed[method] = ", ".join(
                    f"{row['_change_type']} {row['n']}" for row in spark.sql(
                        f"SELECT _change_type, count(*) AS n FROM table_changes('t', "
                        f"{version + 1}) GROUP BY 1 ORDER BY 1").collect())
                spark.sql("DROP VIEW IF EXISTS s")
        for method, secs in found.items():
            print(f"{method:14s} median {statistics.median(secs):6.2f} s  ({', '.join(f'{s:.2f}' for s in secs)})"
                  f"   change feed of the last: {feed[method]}")


def stage(spark, keys: List[int], deleted: set, new: List[int], r: int) -> None:  # type: ignore[no-untyped-def]
    """The staged rows a replay would cache: changed rows, tombstones (no row) and new keys."""
    values = []
    for k in keys + new:
        if k in deleted:
            values.append(f"({k}, NULL, NULL, NULL, NULL, true, {k})")
        else:
            had_old = "NULL" if k in new else "true"
            values.append(f"({k}, {k % 100000}, CAST({(k + r + 1) % 997} AS DECIMAL(12,2)), "
                          f"'open', true, {had_old}, {k})")
    spark.sql("CACHE TABLE s AS SELECT * FROM VALUES " + ", ".join(values)
              + f" AS s(id, customer_id, amount, status, {sqlgen.PRESENT}, {sqlgen.HAD_OLD}, "
              f"{sqlgen.KEY_PREFIX}0)")


def apply(spark, method: str, keys: List[int], new: List[int]) -> None:  # type: ignore[no-untyped-def]
    cols = ", ".join(COLUMNS)
    in_list = ", ".join(str(k) for k in sorted(keys))
    if method == "merge":
        spark.sql(sqlgen.merge_staging("t", "s", ["id"], COLUMNS, delete_missing=False,
                                       key_range=(str(min(keys)), str(max(keys))))).collect()
    elif method == "replace_where":  # as the replay writes it: the key list and its range
        spark.sql(sqlgen.replace_where("t", "s", "id", [str(k) for k in sorted(keys)], COLUMNS,
                                       (str(min(keys)), str(max(keys))))).collect()
    elif method == "replace_where_guarded":  # with the new-key check a replay's write carries
        spark.sql(sqlgen.replace_where("t", "s", "id", [str(k) for k in sorted(keys)], COLUMNS,
                                       (str(min(keys)), str(max(keys))),
                                       new_range=(str(min(new)), str(max(new))))).collect()
    elif method == "replace_using":
        # a DataFrame write does not cast to the table's types as INSERT does
        (spark.sql("SELECT CAST(id AS BIGINT) id, CAST(customer_id AS BIGINT) customer_id, "
                   f"amount, status FROM s WHERE {sqlgen.PRESENT}")
         .write.format("delta").mode("overwrite").option("replaceUsing", "id").saveAsTable("t"))
    elif method == "blind_insert":
        spark.sql(f"INSERT INTO t SELECT {cols} FROM s WHERE {sqlgen.PRESENT}").collect()
    else:
        spark.sql(f"DELETE FROM t WHERE id IN ({in_list})").collect()
        spark.sql(f"INSERT INTO t SELECT {cols} FROM s WHERE {sqlgen.PRESENT}").collect()


if __name__ == "__main__":
    main(*arguments(10_000_000, 2, "uniform"))
