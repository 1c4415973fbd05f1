"""TPC-DS as a differential test: real SQL no one here wrote, on real (small) data.

sqlglot's source distribution on PyPI carries the 99 TPC-DS queries and a tiny TPC-DS data set
(tests/fixtures/optimizer/tpc-ds: 24 tables, at most 10,000 rows each). This driver downloads
it once (`pip download`, PyPI only), loads the tables into Delta with the change feed on (money
as DECIMAL, the calendars completed and foreign keys folded into range: see DIMENSIONS), and
builds every query as a `batch_refresh` model `qNN` and as a `table` `tbl_qNN` (the final ORDER
BY / LIMIT dropped, the query transpiled to Spark SQL by sqlglot, output columns Delta cannot
store renamed). Then, for each of STEPS change batches (updates, deletes and re-inserts in the
seven fact tables, updates to three dimensions), it runs both and counts the rows that differ
(EXCEPT ALL both ways). A query whose table does not build on Spark is left out and listed.

    make tpcds                                   # 2 steps, keys found, replay wherever possible
    .venv/bin/python tests/tpcds/diff.py --steps 2 --queries 1,72 --config "aggregate_upkeep='delta'"

`--keys` gives each model a unique_key, as a user would set one: the shortest leading run of
its output columns that is unique and NULL-free in the table after the backfill (a key that is
unique only by accident shows as a "bad unique_key" failure later, counted apart). Without it a
model gets the key the plugin infers, or none. The refreshes replay wherever the model can
(BATCH_REFRESH_AUTO=structural), since the cost choice would overwrite most of them at this
size. Results: a table per step on stdout, and JSON in --out.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import sqlglot
from sqlglot import exp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "dbt-spark-batch-refresh", "tpcds")
FIXTURES = "tests/fixtures/optimizer/tpc-ds"
SOURCE = "tpcds"
SCHEMA = "tpcds_models"
# Per fact table: a column that identifies its rows well enough to pick some, and the measures
# an update changes.
FACTS = {
    "store_sales": ("ss_ticket_number", ("ss_quantity", "ss_net_profit")),
    "store_returns": ("sr_ticket_number", ("sr_return_amt", "sr_return_quantity")),
    "catalog_sales": ("cs_order_number", ("cs_quantity", "cs_net_profit")),
    "catalog_returns": ("cr_order_number", ("cr_return_amount", "cr_return_quantity")),
    "web_sales": ("ws_order_number", ("ws_quantity", "ws_net_profit")),
    "web_returns": ("wr_order_number", ("wr_return_amt", "wr_return_quantity")),
    "inventory": ("inv_item_sk", ("inv_quantity_on_hand",)),
}


def fixtures() -> str:
    """The TPC-DS fixture directory of the installed sqlglot's source distribution."""
    where = os.path.join(CACHE, f"sqlglot-{sqlglot.__version__}")
    found = os.path.join(where, f"sqlglot-{sqlglot.__version__}", FIXTURES)
    if os.path.exists(os.path.join(found, "tpc-ds.sql")):
        return found
    os.makedirs(where, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", "--dest", where, f"sqlglot=={sqlglot.__version__}"],
                   check=True)
    archive, = glob.glob(os.path.join(where, "sqlglot-*.tar.gz"))
    prefix = f"sqlglot-{sqlglot.__version__}/{FIXTURES}/"
    with tarfile.open(archive) as tar:
        tar.extractall(where, members=[m for m in tar.getmembers()
                                       if m.name.startswith(prefix)], filter="data")
    return found


def queries(directory: str) -> Dict[int, str]:
    """Query number -> its text as written (the file also holds sqlglot's optimized form)."""
    with open(os.path.join(directory, "tpc-ds.sql")) as f:
        blocks = re.split(r"-{10,}\n-- TPC-DS (\d+)\n-{10,}\n", f.read())
    found = {}
    for number, body in zip(blocks[1::2], blocks[2::2]):
        text = "\n".join(line for line in body.splitlines() if not line.startswith("#"))
        found[int(number)] = text.split(";")[0]
    return found


def model_sql(query: str, tables: Sequence[str]) -> str:
    """The query as a model: Spark SQL, tables in the source schema, no final ORDER BY / LIMIT,
    every output column a name Delta can store (col<i> for expressions and repeats)."""
    tree = sqlglot.parse_one(query)
    tree.set("order", None)
    tree.set("limit", None)
    for table in tree.find_all(exp.Table):
        if table.name.lower() in tables and not table.args.get("db"):
            table.set("db", exp.to_identifier(SOURCE))
    head = tree
    while isinstance(head, exp.SetOperation):
        head = head.this
    head = head.unnest() if isinstance(head, exp.Subquery) else head
    seen, named = set(), []
    for i, column in enumerate(head.expressions):
        if column.is_star:
            named.append(column)
            continue
        name = column.alias_or_name
        if not re.fullmatch(r"[A-Za-z_]\w*", name or "") or name.lower() in seen:
            name = f"col{i}"
            column = exp.alias_(column.unalias(), name)
        seen.add(name.lower())
        named.append(column)
    head.set("expressions", named)
    return tree.sql(dialect="spark")


# The fixture holds the first rows of each table of a larger data set, so most foreign keys
# miss: its date_dim ends in 1927 and time_dim at 02:46 while the sales are of 1998-2003, and the
# facts name customers, addresses and demographics beyond the ones kept. Completing the two
# calendars and folding each foreign key into its dimension's key range (all are 1..n) makes
# the joins, and so most queries' outputs, non-empty.
DIMENSIONS = {  # key-column suffix -> the dimension it references
    "_customer_sk": "customer", "_cdemo_sk": "customer_demographics",
    "_hdemo_sk": "household_demographics", "_addr_sk": "customer_address", "_item_sk": "item",
    "_store_sk": "store", "_promo_sk": "promotion", "_warehouse_sk": "warehouse",
    "_web_site_sk": "web_site", "_web_page_sk": "web_page", "_call_center_sk": "call_center",
    "_catalog_page_sk": "catalog_page", "_ship_mode_sk": "ship_mode", "_reason_sk": "reason",
}
LAST_DAY_SK = 2453005  # 2003-12-31 (TPC-DS day keys are Julian day numbers)


def calendar_sql() -> List[str]:
    """date_dim completed to the end of 2003 and time_dim to the end of the day, with the
    fixture's conventions (d_dow 0 on 1900-01-01, week 1 starting there)."""
    day = "date_add(DATE'1900-01-02', cast(sk - 2415022 AS INT))"
    dow = "pmod(sk - 2415021, 7)"
    return [
        f"""INSERT INTO {SOURCE}.date_dim (d_date_sk, d_date_id, d_date, d_month_seq, d_week_seq,
          d_quarter_seq, d_year, d_dow, d_moy, d_dom, d_qoy, d_fy_year, d_fy_quarter_seq,
          d_fy_week_seq, d_day_name, d_quarter_name, d_holiday, d_weekend, d_following_holiday,
          d_first_dom, d_last_dom, d_same_day_ly, d_same_day_lq, d_current_day, d_current_week,
          d_current_month, d_current_quarter, d_current_year)
        SELECT sk, concat('D', sk), d, (year(d) - 1900) * 12 + month(d) - 1,
          floor((sk - 2415021) / 7) + 1, (year(d) - 1900) * 4 + quarter(d), year(d), dow,
          month(d), day(d), quarter(d), year(d), (year(d) - 1900) * 4 + quarter(d),
          floor((sk - 2415021) / 7) + 1,
          element_at(array('Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday',
                           'Saturday'), dow + 1),
          concat(year(d), 'Q', quarter(d)), 'N', if(dow IN (0, 6), 'Y', 'N'), 'N',
          sk - day(d) + 1, sk - day(d) + day(last_day(d)), sk - 365, sk - 91, 'N', 'N', 'N',
          'N', 'N'
        FROM (SELECT sk, {day} AS d, {dow} AS dow FROM (SELECT explode(sequence(
          (SELECT max(d_date_sk) + 1 FROM {SOURCE}.date_dim), {LAST_DAY_SK})) AS sk))""",
        f"""INSERT INTO {SOURCE}.time_dim (t_time_sk, t_time_id, t_time, t_hour, t_minute,
          t_second, t_am_pm, t_shift, t_sub_shift, t_meal_time)
        SELECT sk, concat('T', sk), sk, h, (sk div 60) % 60, sk % 60, if(h < 12, 'AM', 'PM'),
          CASE WHEN h < 8 THEN 'third' WHEN h < 16 THEN 'first' ELSE 'second' END,
          CASE WHEN h < 6 THEN 'night' WHEN h < 12 THEN 'morning' WHEN h < 18 THEN 'afternoon'
               ELSE 'evening' END,
          CASE WHEN h IN (7, 8) THEN 'breakfast' WHEN h IN (12, 13) THEN 'lunch'
               WHEN h IN (18, 19) THEN 'dinner' END
        FROM (SELECT sk, sk div 3600 AS h FROM (SELECT explode(sequence(
          (SELECT max(t_time_sk) + 1 FROM {SOURCE}.time_dim), 86399)) AS sk))""",
    ]


def change_sql(step: int) -> List[str]:
    """One change batch: in each fact table ~2.5% of rows updated, ~2% deleted, ~2.5% copied
    (duplicates, as a re-sent batch would make); three dimensions updated."""
    out = []
    for table, (column, measures) in FACTS.items():
        def picked(one_in: int, salt: str) -> str:
            return (f"pmod(hash({column}, {measures[0]}, '{table}{step}{salt}'), {one_in}) = 0")
        sets = ", ".join(f"{m} = {m} + 1" for m in measures)
        out += [f"update {SOURCE}.{table} set {sets} where {picked(40, 'u')}",
                f"delete from {SOURCE}.{table} where {picked(50, 'd')}",
                f"insert into {SOURCE}.{table} select * from {SOURCE}.{table} "
                f"where {picked(40, 'i')}"]
    return out + [
        f"update {SOURCE}.customer set c_preferred_cust_flag = "
        f"if(c_preferred_cust_flag = 'Y', 'N', 'Y') where pmod(hash(c_customer_sk, {step}), 20) = 0",
        f"update {SOURCE}.item set i_current_price = i_current_price * 1.5 "
        f"where pmod(hash(i_item_sk, {step}), 15) = 0",
        f"update {SOURCE}.customer_address set ca_state = 'TN' "
        f"where pmod(hash(ca_address_sk, {step}), 25) = 0",
    ]


@dataclass
class Outcome:
    status: str  # ok, MISMATCH, FAIL, BAD_KEY
    action: Optional[str] = None
    strategy: Optional[str] = None
    fallback: Optional[str] = None
    differing: int = 0
    seconds: float = 0.0
    table_seconds: float = 0.0
    rows: int = 0  # of the table twin: an empty output proves little
    error: str = ""


@dataclass
class Project:
    root: str
    session_dir: str
    config: str
    models: Dict[str, str] = field(default_factory=dict)

    def write(self) -> None:
        os.makedirs(os.path.join(self.root, "models"), exist_ok=True)
        with open(os.path.join(self.root, "dbt_project.yml"), "w") as f:
            f.write("name: tpcds\nversion: '1.0'\nconfig-version: 2\nprofile: tpcds\n"
                    "model-paths: ['models']\n")
        with open(os.path.join(self.root, "profiles.yml"), "w") as f:
            f.write("tpcds:\n  target: session\n  outputs:\n    session:\n"
                    "      type: spark_batch_refresh\n      method: session\n"
                    f"      schema: {SCHEMA}\n      threads: 1\n"
                    f"      session_dir: {self.session_dir}\n")
        self._file("spark_up", "{{ config(materialized='view') }}\nselect 1 as up")
        for name, sql in self.models.items():
            self.batch_refresh(name, None)
            self._file(f"tbl_{name}", f"{{{{ config(materialized='table', "
                                      f"file_format='delta') }}}}\n{sql}")

    def batch_refresh(self, name: str, key: Optional[List[str]]) -> None:
        config = "materialized='batch_refresh'"
        if key:
            config += f", unique_key={key if len(key) > 1 else key[0]!r}"
        if self.config:
            config += f", {self.config}"
        self._file(name, f"{{{{ config({config}) }}}}\n{self.models[name]}")

    def _file(self, name: str, text: str) -> None:
        with open(os.path.join(self.root, "models", f"{name}.sql"), "w") as f:
            f.write(text + "\n")


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        from dbt.cli.main import dbtRunner

        self.args = args
        self.fixtures = fixtures()
        self.tables = sorted(os.path.basename(p)[:-len(".csv.gz")]
                             for p in glob.glob(os.path.join(self.fixtures, "*.csv.gz")))
        self.work = tempfile.mkdtemp(prefix="tpcds-diff-")
        self.project = Project(os.path.join(self.work, "project"),
                               os.path.join(self.work, "session"), args.config)
        for number, text in queries(self.fixtures).items():
            if not args.queries or number in args.queries:
                self.project.models[f"q{number:02d}"] = model_sql(text, self.tables)
        self.project.write()
        self.dbt = dbtRunner()
        self.spark: Any = None

    def run(self, names: Sequence[str]) -> Dict[str, Any]:
        argv = ["run", "--project-dir", self.project.root, "--profiles-dir",
                self.project.root, "--quiet", "--select", *names]
        cwd = os.getcwd()
        os.chdir(self.project.root)
        try:
            result = self.dbt.invoke(argv)
        finally:
            os.chdir(cwd)
        return {r.node.name: r for r in (result.result.results if result.result else [])}

    def differing(self, name: str) -> int:
        a, b = f"{SCHEMA}.{name}", f"{SCHEMA}.tbl_{name}"
        return int(self.spark.sql(
            f"select count(*) as n from ((select * from {a} except all select * from {b}) "
            f"union all (select * from {b} except all select * from {a}))").collect()[0]["n"])

    def load(self) -> None:
        from pyspark.sql import SparkSession

        self.run(["spark_up"])  # starts the embedded session with the plugin's settings
        self.spark = SparkSession.builder.getOrCreate()
        self.spark.sql(f"create schema if not exists {SOURCE}")
        self.spark.sql("set spark.databricks.delta.properties.defaults.enableChangeDataFeed=true")
        sizes = {}
        for table in self.tables:
            frame = (self.spark.read.option("sep", "|").option("header", True)
                     .option("inferSchema", True)
                     .csv(os.path.join(self.fixtures, f"{table}.csv.gz")))
            # TPC-DS money is DECIMAL(7,2): read as DOUBLE its sums differ in the last bits
            # with the order Spark adds them in, and EXCEPT ALL counts those as differences.
            # Keys with NULLs are read as DOUBLE too.
            frame = frame.select(*[
                frame[f.name].cast("bigint" if f.name.endswith("_sk") else "decimal(15,2)")
                .alias(f.name) if f.dataType.typeName() == "double" else frame[f.name]
                for f in frame.schema.fields])
            frame.write.format("delta").mode("overwrite").saveAsTable(f"{SOURCE}.{table}")
            sizes[table] = frame.count()
        for statement in calendar_sql():
            self.spark.sql(statement)
        for table in self.tables:
            columns = [f.name for f in self.spark.table(f"{SOURCE}.{table}").schema.fields]
            folds = [f"{c} = pmod({c} - 1, {sizes[dim]}) + 1" for c in columns
                     for suffix, dim in DIMENSIONS.items()
                     if c.endswith(suffix) and dim != table]
            if folds:
                self.spark.sql(f"update {SOURCE}.{table} set {', '.join(folds)}")

    def key(self, name: str) -> Optional[List[str]]:
        table = self.spark.table(f"{SCHEMA}.tbl_{name}")
        rows = table.count()
        columns = [f.name for f in table.schema.fields]
        # One row (a global aggregate) makes any column unique: no key to find.
        for k in range(1, len(columns) + 1 if rows > 1 else 0):
            lead = columns[:k]
            found = self.spark.sql(
                f"select count(distinct {', '.join(lead)}) as d, coalesce(sum(case when "
                f"{' or '.join(c + ' is null' for c in lead)} then 1 else 0 end), 0) as nulls "
                f"from {SCHEMA}.tbl_{name}").collect()[0]
            if found["nulls"]:
                return None
            if found["d"] == rows:
                return lead
        return None

    def main(self) -> Dict[str, Any]:
        self.load()
        names = sorted(self.project.models)
        tables = self.run([f"tbl_{n}" for n in names])
        built = [n for n in names if _ok(tables.get(f"tbl_{n}"))]
        report: Dict[str, Any] = {
            "left_out": {n: _message(tables.get(f"tbl_{n}")) for n in names if n not in built},
            "keys": {}, "steps": []}
        if self.args.keys:
            for name in built:
                key = self.key(name)
                self.project.batch_refresh(name, key)
                report["keys"][name] = key
        for step in range(self.args.steps + 1):
            if step:
                for statement in change_sql(step):
                    self.spark.sql(statement)
                tables = self.run([f"tbl_{n}" for n in built])
            refreshed = self.run(built)
            outcomes = {n: self.outcome(n, refreshed.get(n), tables.get(f"tbl_{n}"))
                        for n in built}
            report["steps"].append({n: vars(o) for n, o in outcomes.items()})
            print_step(step, outcomes)
        return report

    def outcome(self, name: str, result: Any, table: Any) -> Outcome:
        if not _ok(result):
            message = _message(result)
            wrong = "bad unique_key" in message or "unique_key is wrong" in message
            return Outcome("BAD_KEY" if wrong else "FAIL", error=message)
        response = dict(result.adapter_response or {})
        differing = self.differing(name)
        return Outcome("ok" if differing == 0 else "MISMATCH", response.get("action"),
                       response.get("strategy"), response.get("fallback_reason") or None,
                       differing, round(result.execution_time, 2),
                       round(table.execution_time, 2) if table is not None else 0.0,
                       self.spark.table(f"{SCHEMA}.tbl_{name}").count())


def _ok(result: Any) -> bool:
    return result is not None and str(result.status) in ("success", "RunStatus.Success")


def _message(result: Any) -> str:
    return "no result" if result is None else str(result.message or result.status)[:800]


def print_step(step: int, outcomes: Dict[str, Outcome]) -> None:
    counts = Counter(o.status for o in outcomes.values())
    ways = Counter(o.strategy for o in outcomes.values() if o.status == "ok")
    filled = sum(o.rows > 0 for o in outcomes.values())
    print(f"step {step}: {filled} of {len(outcomes)} outputs non-empty; "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + " | " + ", ".join(f"{k} {v}" for k, v in sorted(ways.items(), key=str)), flush=True)
    for name, o in sorted(outcomes.items()):
        if o.status != "ok":
            print(f"  {name} {o.status} {o.differing or ''} {o.error.splitlines()[:6]}",
                  flush=True)


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--queries", default="", help="query numbers, comma-separated (default all)")
    p.add_argument("--keys", action="store_true", help="give each model a unique_key")
    p.add_argument("--config", default="", help="more model config, e.g. aggregate_upkeep='delta'")
    p.add_argument("--out", default="tpcds-diff.json")
    p.add_argument("--keep", action="store_true", help="keep the temporary warehouse and project")
    args = p.parse_args(argv)
    args.queries = {int(q) for q in args.queries.split(",") if q.strip()}
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    os.environ.setdefault("BATCH_REFRESH_AUTO", "structural")
    driver = Driver(args)
    try:
        report = driver.main()
    finally:
        if driver.spark is not None:
            driver.spark.stop()
        if not args.keep:
            shutil.rmtree(driver.work, ignore_errors=True)  # the warehouse and the project
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    bad = sum(o["status"] in ("MISMATCH", "FAIL") for s in report["steps"] for o in s.values())
    print(f"left out (their table does not build on Spark): {sorted(report['left_out'])}")
    print(f"report: {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
