"""`make bench-tpch`: the 22 TPC-H queries (examples/tpch) refreshed as batch_refresh models
against the same queries rebuilt as `table`s, after refresh steps of RF1 + RF2 + updates
(bench/tpch_data.py), in one process and one JVM.

    python bench/tpch.py --scale 1 --steps 1
    python bench/tpch.py --scale 0.1 --choice structural   # replay wherever the model can

Per query and step: the strategy the refresh used, its seconds (dbt's execution time of the
node) against the table's, and whether the two outputs are equal. The data of a scale factor
is generated once into ~/.cache/dbt-spark-batch-refresh/tpch/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import tpch_data  # noqa: E402
from bench import dbt_invoke  # noqa: E402
from bench.dbt_invoke import SPARK_UP, run_models  # noqa: E402
from bench.run import conf_arg  # noqa: E402
from bench.tpch_data import EXAMPLE, queries  # noqa: E402

SOURCE_SCHEMA = "tpch"
SCHEMA = "tpch_bench"


# A model's `{{ config(...) }}` block (one per query model).
_CONFIG = re.compile(r"\{\{\s*config\(.*?\)\s*\}\}", flags=re.S)


def as_table(sql: str, dropped: bool = False) -> str:
    """The same query with the batch_refresh config replaced by a table's: with
    `file_format='delta'`, which dbt-spark builds by `create or replace table ... as` (the
    table's log kept, as for a Delta user's `table`, and as bench/run.py's tables); `dropped`,
    without it, which dbt-spark builds by dropping the table and creating it anew (a new log:
    no old snapshot to read and no removes to commit, 0.2-0.5 s a query cheaper at SF 1)."""
    config = "materialized='table'" if dropped else "materialized='table', file_format='delta'"
    return _CONFIG.sub("{{ config(" + config + ") }}", sql, count=1)


def plain_sql(sql: str) -> str:
    """A query model's SQL as Spark runs it over the source schema (no config, sources named)."""
    body = _CONFIG.sub("", sql, count=1)
    return re.sub(r"\{\{\s*source\(\s*'tpch'\s*,\s*'(\w+)'\s*\)\s*\}\}",
                  lambda m: f"{SOURCE_SCHEMA}.{m.group(1)}", body)


def write_project(root: str, session_dir: str, driver_memory: str,
                  spark_confs: Dict[str, str], tables_dropped: bool) -> None:
    with open(os.path.join(EXAMPLE, "sources.yml")) as f:
        sources = f.read()
    models = {"spark_up": SPARK_UP}
    for q in queries():
        with open(os.path.join(EXAMPLE, f"{q}.sql")) as f:
            sql = f.read()
        models.update({q: sql, f"tbl_{q}": as_table(sql, tables_dropped)})
    dbt_invoke.write_project(root, name="tpch", schema=SCHEMA, session_dir=session_dir,
                             sources=sources, models=models,
                             confs={"spark.driver.memory": driver_memory, **spark_confs})


class TpchBench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = tempfile.mkdtemp(prefix="bench-tpch-", dir="/tmp")
        self.project = os.path.join(self.work, "project")
        write_project(self.project, os.path.join(self.work, "session"), args.driver_memory,
                      dict(args.spark_conf), args.tables_dropped)
        from dbt.cli.main import dbtRunner

        self.dbt = dbtRunner()
        self.spark: Any = None

    def log(self, msg: str) -> None:
        print(f"[bench-tpch {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def dbt_run(self, select: List[str]) -> Dict[str, Any]:
        results = run_models(self.dbt, self.project, [
            "--vars", json.dumps({"tpch_schema": SOURCE_SCHEMA}), "--select", *select])
        return {r.node.name: r for r in results}

    def sql(self, statement: str) -> List[Any]:
        return self.spark.sql(statement).collect()

    def differences(self, q: str) -> int:
        a, b = f"{SCHEMA}.{q}", f"{SCHEMA}.tbl_{q}"
        return int(self.sql(f"select count(*) as n from ((select * from {a} except all "
                            f"select * from {b}) union all (select * from {b} except all "
                            f"select * from {a}))")[0]["n"])

    def timed_run(self, names: List[str]) -> tuple:
        t0 = time.perf_counter()
        results = self.dbt_run(names)
        return results, time.perf_counter() - t0

    def run(self) -> Dict[str, Any]:
        qs = [q for q in queries() if not self.args.queries or q in self.args.queries]
        data = tpch_data.generate(self.args.scale,
                                  os.path.join(tpch_data.CACHE, f"sf{self.args.scale:g}"))
        self.log(f"work dir {self.work}; starting Spark through dbt")
        self.dbt_run(["spark_up"])
        from pyspark.sql import SparkSession

        self.spark = SparkSession.builder.getOrCreate()
        self.log(f"loading TPC-H SF {self.args.scale:g} from {data}")
        self.sql(f"create schema if not exists {SOURCE_SCHEMA}")
        for statement in tpch_data.load_sql(SOURCE_SCHEMA, data):
            self.sql(statement)
        lineitems = int(self.sql(f"select count(*) as n from {SOURCE_SCHEMA}.lineitem")[0]["n"])
        self.log(f"lineitem {lineitems:,} rows; backfills, then tables")
        # The backfills go first: read every table and run every query once before them, as
        # before each step, or they pay the first reads the tables then find done (each
        # upstream's snapshot state, 0.7-1.2 s at SF 1, in the backfills' DESCRIBE DETAIL).
        self.first_reads(qs)
        backfill, backfill_wall = self.timed_run(qs)
        tables, table_wall = self.timed_run([f"tbl_{q}" for q in qs])
        steps = []
        for step in range(1, self.args.steps + 1):
            self.log(f"step {step}: RF1 + RF2 + updates")
            for statement in tpch_data.refresh_sql(SOURCE_SCHEMA, step):
                self.sql(statement)
            self.first_reads(qs)
            # Of two writers of the same query after a change the second is faster (bench/
            # README.md, "Which writer goes first"): the order alternates every step,
            # --tables-first sets the first step's.
            tables_first = self.args.tables_first == (step % 2 == 1)
            if tables_first:
                rebuilt, rebuild_wall = self.timed_run([f"tbl_{q}" for q in qs])
                refreshed, refresh_wall = self.timed_run(qs)
            else:
                refreshed, refresh_wall = self.timed_run(qs)
                rebuilt, rebuild_wall = self.timed_run([f"tbl_{q}" for q in qs])
            rows = []
            for q in qs:
                response = refreshed[q].adapter_response or {}
                rows.append({
                    "query": q, "action": response.get("action"), "mode": response.get("mode"),
                    "strategy": response.get("strategy"),
                    "reason": response.get("fallback_reason") or "",
                    "refresh_s": refreshed[q].execution_time,
                    "table_s": rebuilt[f"tbl_{q}"].execution_time,
                    "backfill_s": backfill[q].execution_time,
                    "differences": self.differences(q),
                })
            steps.append({"step": step, "tables_first": tables_first,
                          "refresh_wall_s": refresh_wall,
                          "rebuild_wall_s": rebuild_wall, "queries": rows})
            self.log(f"step {step}: refresh {refresh_wall:.1f} s, rebuild {rebuild_wall:.1f} s")
        return {"scale": self.args.scale, "lineitem_rows": lineitems,
                "backfill_wall_s": backfill_wall, "table_wall_s": table_wall,
                "auto": self.args.choice, "tables_first": self.args.tables_first,
                "warm_up": not self.args.no_warm_up, "steps": steps,
                "tables": "dropped and created" if self.args.tables_dropped
                else "create or replace (file_format delta)",
                "started": time.strftime("%Y-%m-%d %H:%M:%S")}

    def first_reads(self, qs: List[str]) -> None:
        """The first reader of a table's new version loads its snapshot (cached in this JVM
        after); read here, neither timed run pays it. At SF 1 this changed no refresh ratio
        measurably (bench/README.md, "TPC-H"), but it keeps the two sides even."""
        for table in tpch_data.TABLES:
            self.sql(f"select count(*) from {SOURCE_SCHEMA}.{table}")
        if not self.args.no_warm_up:
            self.warm_up(qs)

    def warm_up(self, qs: List[str]) -> None:
        """Each query run once into Spark's `noop` sink, untimed, as bench/run.py does: of two
        writers of one query after an upstream change the first pays more (bench/README.md,
        "Which writer goes first"), and in production each is that first writer; here
        neither timed run is."""
        for q in qs:
            with open(os.path.join(EXAMPLE, f"{q}.sql")) as f:
                sql = plain_sql(f.read())
            self.spark.sql(sql).write.format("noop").mode("overwrite").save()

    def cleanup(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def render(result: Dict[str, Any]) -> str:
    out = [f"TPC-H SF {result['scale']:g} ({result['lineitem_rows']:,} line items), "
           f"choice: {result['auto']}; first builds: batch_refresh backfills "
           f"{result['backfill_wall_s']:.1f} s, tables {result['table_wall_s']:.1f} s"
           + ("; each query run once before the timed writes of a step"
              if result.get("warm_up") else "")
           + (f"; tables: {result['tables']}" if "tables" in result else "")]
    for step in result["steps"]:
        rows = step["queries"]
        order = ""  # results written before the order alternated do not say it
        if "tables_first" in step:
            order = ", tables first" if step["tables_first"] else ", refreshes first"
        out += ["", f"Step {step['step']} (RF1 + RF2 + updates{order}): "
                f"refresh all {len(rows)} {step['refresh_wall_s']:.1f} s, rebuild all {len(rows)} as tables "
                f"{step['rebuild_wall_s']:.1f} s "
                f"({step['refresh_wall_s'] / step['rebuild_wall_s']:.2f}x)", "",
                "| query | strategy | refresh s | table s | refresh / table | equal | reason |",
                "|---|---|---:|---:|---:|---|---|"]
        for r in rows:
            how = r["strategy"] if r["action"] == "replay" else r["action"]
            out.append(f"| {r['query']} | {how} | {r['refresh_s']:.2f} | {r['table_s']:.2f} | "
                       f"{r['refresh_s'] / r['table_s']:.2f}x | "
                       f"{'yes' if r['differences'] == 0 else 'NO (%d rows)' % r['differences']} "
                       f"| {r['reason'][:90]} |")
        replays = sum(1 for r in rows if r["action"] == "replay")
        out.append(f"\n{replays} of {len(rows)} replayed; "
                   f"{sum(1 for r in rows if r['differences'] == 0)} equal to the table.")
    return "\n".join(out)


def chart(result: Dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["steps"][-1]["queries"]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.bar([i - 0.2 for i in x], [r["refresh_s"] for r in rows], 0.4, label="batch_refresh")
    ax.bar([i + 0.2 for i in x], [r["table_s"] for r in rows], 0.4, label="table")
    ax.set_xticks(list(x), [r["query"] for r in rows])
    ax.set_ylabel("seconds")
    ax.set_title(f"TPC-H SF {result['scale']:g}: refresh after RF1 + RF2 + updates")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor")
    p.add_argument("--steps", type=int, default=1, help="refresh steps (RF1 + RF2 + updates)")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--spark-conf", action="append", default=[], type=conf_arg, metavar="KEY=VALUE",
                   help="a Spark conf of the embedded session (repeatable; e.g. an event log)")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default="tpch")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--queries", type=lambda s: [f"q{int(q):02d}" for q in s.split(",")],
                   default=None, help="only these queries, e.g. 6,14,19 (default: all 22)")
    p.add_argument("--keep", action="store_true", help="keep the work dir under /tmp")
    p.add_argument("--tables-dropped", action="store_true",
                   help="build the tables without file_format='delta' (dbt-spark then drops and\n"
                        "creates each one; the yardstick of every run before session 63)")
    p.add_argument("--tables-first", action="store_true",
                   help="rebuild the tables before the refreshes in the first step (the\n"
                        "order alternates every step after it)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="time the writes without running each query once before them")
    p.add_argument("--choice", choices=("cost", "structural"), default="cost",
                   help="refresh_mode auto by estimated cost (the default a user gets), or\n"
                        "structural: replay whenever the model can (what the test suite runs)")
    args = p.parse_args(argv)
    if args.choice == "structural":
        os.environ["BATCH_REFRESH_AUTO"] = "structural"
    bench = TpchBench(args)
    try:
        result = bench.run()
    finally:
        if not args.keep:
            bench.cleanup()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.name}.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    text = render(result)
    with open(os.path.join(args.out, f"{args.name}.md"), "w") as f:
        f.write(text + "\n")
    if not args.no_charts:
        chart(result, os.path.join(args.out, f"{args.name}.png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
