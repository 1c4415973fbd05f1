"""What a replay's staging costs when the NULL-supplying side of a LEFT JOIN moves (issue #16:
"outer joins need the matched/unmatched transitions of the other side").

    select f.id, f.v, d.label from fact f left join dim d on f.dim_id = d.id   -- unique_key id

fact has N rows, dim N/10; a tenth of the facts point at dim ids that do not exist yet. Each
round changes 0.1% of dim: 80% relabelled, 10% deleted (their facts lose their only match),
10% inserted at missing ids (their facts gain one). The same change is staged three ways, each
cached the way a replay caches its staging (`CACHE TABLE ... AS`, then a count):

* `transition`: the delta join's transition term (deltajoin.py): the changed dim ids cached,
  then the facts whose dim_id is among them, joined to dim at its new and at its old version,
  netted;
* `affected_keys`: what a run did before it (and still does for a FULL join): the affected
  output keys first (analysis.affected_keys_sql), then the model recomputed for those keys;
* `rebuild`: the model from scratch into a new Delta table (what `table` does).

The MERGE that follows is left out: both stagings hold the same changed keys (the affected-key
one also its unchanged ones, which the MERGE's change test skips).

usage: .venv/bin/python bench/outer_join.py [fact rows] [rounds]   (run alone: 2 cores)
Prints the median seconds per method and the staged rows. Everything lives in a temporary
directory that is removed at the end.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any, Dict, List

import sqlglot

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.sql.rewrite import change_rows_sql, pin_versions

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.scratch_spark import arguments, scratch  # noqa: E402

MODEL = "select f.id, f.v, d.label from fact f left join dim d on f.dim_id = d.id"
KEY = ("id",)
COLUMNS = ["id", "v", "label"]


def version(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").collect()[0]["version"])


def cached(spark: Any, name: str, select: str) -> int:
    spark.sql(f"CACHE TABLE {name} AS\n{select}")
    return int(spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"])


def main(rows: int, rounds: int) -> None:
    dims = rows // 10
    props = "TBLPROPERTIES (delta.enableChangeDataFeed = true, delta.enableDeletionVectors = true)"
    with scratch("br-outer-bench-", "local[*]", 2, {"spark.driver.memory": "8g"}) as spark:
        spark.sql(f"CREATE TABLE fact USING delta {props} AS SELECT id, "
                  f"pmod(xxhash64(id), {dims + dims // 9}) AS dim_id, id % 997 AS v "
                  f"FROM range({rows})")
        spark.sql(f"CREATE TABLE dim USING delta {props} AS SELECT id, "
                  f"concat('dim-', id) AS label FROM range({dims})")
        joined, why = dj.derive(sqlglot.parse_one(MODEL, read="spark"))
        assert joined is not None and joined.outer == {"dim"}, why
        found: Dict[str, List[float]] = {"transition": [], "affected_keys": [], "rebuild": []}
        staged: Dict[str, int] = {}
        top = dims
        for r in range(rounds + 1):
            start = version(spark, "dim") + 1
            changed = max(10, dims // 1000)  # about: 80% updated, 10% deleted, 10% new
            spark.sql(f"UPDATE dim SET label = concat(label, '-r{r}') "
                      f"WHERE pmod(xxhash64(id, {r}), 10000) < 8")
            spark.sql(f"DELETE FROM dim WHERE pmod(xxhash64(id, {r}), 10000) = 8")
            spark.sql(f"INSERT INTO dim SELECT id, concat('new-', id) FROM "
                      f"range({top}, {top + changed // 10})")
            top += changed // 10
            end = version(spark, "dim")
            fact = version(spark, "fact")
            new, old = {"dim": end, "fact": fact}, {"dim": start - 1, "fact": fact}
            ranges = {"dim": (start, end)}

            def change_rows(upstream: str, types: Any) -> str:
                return change_rows_sql(upstream, *ranges[upstream], types)

            t0 = time.perf_counter()
            for name, select in joined.transition_keys(MODEL, f"_t{r}", ranges, change_rows):
                cached(spark, name, select)
            plus, minus = joined.terms(MODEL, change_rows, ranges, new, old,
                                       joined.key_views(f"_t{r}"))
            n = cached(spark, f"_t{r}", sqlgen.staging_from_changes(plus, minus, COLUMNS, KEY))
            timing = {"transition": time.perf_counter() - t0}
            staged["transition"] = n

            t0 = time.perf_counter()
            parts = sa.affected_keys_sql(MODEL, KEY, ranges, new, old)
            cached(spark, f"_k{r}", sqlgen.affected_keys(parts, KEY))
            n = cached(spark, f"_a{r}", sqlgen.staging_affected(pin_versions(MODEL, new),
                                                                f"_k{r}", KEY))
            timing["affected_keys"] = time.perf_counter() - t0
            staged["affected_keys"] = n

            t0 = time.perf_counter()
            spark.sql(f"CREATE OR REPLACE TABLE rebuilt USING delta AS "
                      f"{pin_versions(MODEL, new)}")
            timing["rebuild"] = time.perf_counter() - t0
            for view in (f"_t{r}", f"_t{r}_outer0", f"_k{r}", f"_a{r}"):
                spark.sql(f"DROP VIEW IF EXISTS {view}")
            label = "warm-up" if r == 0 else f"round {r}"
            print(f"{label}: " + ", ".join(f"{m} {s:.2f}s" for m, s in timing.items())
                  + f"; staged rows {staged}", flush=True)
            if r:
                for method, seconds in timing.items():
                    found[method].append(seconds)
        print(f"\n{rows:,} fact rows, {dims:,} dim rows, {changed:,} dim rows changed per round, "
              f"median of {rounds} rounds:")
        print("| staging | median s | staged rows (last round) |\n|---|---:|---:|")
        for method, values in found.items():
            print(f"| {method} | {statistics.median(values):.2f} | {staged.get(method, '-')} |")


if __name__ == "__main__":
    main(*arguments(10_000_000, 3))
