"""Benchmark driver: one Python process, one JVM, dbt in-process (dbtRunner).

For each scale: build the upstreams, build every model once (backfill / initial table). Then for
each change distribution (uniform, recent, append, upsert: see bench/data.py), change fraction and
repetition: apply one change batch to raw.fact, run every method, time it, count its commits (and
statements, where the adapter reports them), check its output against the model SQL evaluated
from scratch, then run the batch_refresh models again (no-op).

    python bench/run.py --scales 1000000 --fractions 0.0001,0.001,0.01,0.1 --reps 3
    python bench/run.py --scales 1000000 --fractions 0.001,0.1 --distributions recent,uniform
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import data, models, report  # noqa: E402
from bench.dbt_invoke import run_models  # noqa: E402

EXTRA_MODELS = ["gate_rowwise", "ovh_view", "ovh_table"]
METHOD_OF_PREFIX = {"br": "replay", "tbl": "rebuild", "inc": "incremental", "au": "auto",
                    "ow": "overwrite", "fu": "full"}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = tempfile.mkdtemp(prefix="bench-", dir="/tmp")
        self.project = os.path.join(self.work, "project")
        self.trace = os.path.join(self.work, "statements.trace")
        os.environ["BATCH_REFRESH_TRACE"] = self.trace
        models.write_project(self.project, args.shapes, os.path.join(self.work, "session"),
                             args.driver_memory, args.strategies, args.checkpoint_interval,
                             args.spark_conf)
        from dbt.cli.main import dbtRunner

        self.dbt = dbtRunner()
        self.spark: Any = None
        self.records: List[Dict[str, Any]] = []
        self.traces: List[Dict[str, Any]] = []
        self.round_no = 0
        self.next_id = 0

    # ------------------------------------------------------------------ plumbing
    def log(self, msg: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def dbt_run(self, select: List[str], full_refresh: bool = False) -> List[Any]:
        return run_models(self.dbt, self.project,
                          ["--select", *select] + (["--full-refresh"] if full_refresh else []))

    def sql(self, statement: str) -> List[Any]:
        return self.spark.sql(statement).collect()

    def version(self, table: str) -> int:
        return int(self.sql(f"describe history {table} limit 1")[0]["version"])

    def signature(self, sql: str) -> tuple:
        """(rows, order-independent hash of all rows): equal outputs have equal signatures."""
        row = self.sql(
            "select count(*) as n, coalesce(sum(cast(xxhash64(*) as decimal(38, 0))), 0) as h "
            f"from ({sql})"
        )[0]
        return int(row["n"]), str(row["h"])

    def start(self) -> None:
        self.log(f"work dir {self.work}; starting Spark through dbt")
        self.dbt_run(["ovh_view"])
        from pyspark.sql import SparkSession

        self.spark = SparkSession.builder.getOrCreate()

    # ------------------------------------------------------------------ one scale
    def build(self, n: int) -> Dict[str, float]:
        self.log(f"scale {n:,}: creating raw.fact ({n:,} rows) and raw.dim ({data.dims(n):,} rows)")
        t0 = time.perf_counter()
        for statement in data.create_sql(n):
            self.sql(statement)
        setup = {"create_upstreams_s": time.perf_counter() - t0}
        self.next_id = n
        self.log("initial builds (backfill, table, incremental) with --full-refresh")
        results = self.dbt_run(self.all_models(), full_refresh=True)
        for r in results:
            setup[f"initial_{r.node.name}_s"] = r.execution_time
        if "rowwise" in self.args.shapes:
            t0 = time.perf_counter()
            self.sql("drop table if exists bench.hand_rowwise")
            self.sql("create table bench.hand_rowwise using delta "
                     "tblproperties (delta.enableDeletionVectors = true) as "
                     + models.plain_sql("rowwise"))
            setup["initial_hand_rowwise_s"] = time.perf_counter() - t0
        self.consumed = self.version("raw.fact")
        return setup

    def prefixes(self) -> List[str]:
        prefixes = ["br", "tbl"] if self.args.no_incremental else ["br", "tbl", "inc"]
        if self.args.strategies:
            prefixes += ["au", "ow", "fu"]
        return prefixes

    def all_models(self) -> List[str]:
        names = [f"{p}_{s}" for s in self.args.shapes for p in self.prefixes()]
        return names + EXTRA_MODELS

    def timed_runs(self) -> List[Any]:
        """Every model refreshed once: each method's models in a `dbt run` of their own, the
        methods in an order rotated every round (dbt runs independent nodes by name, so in
        one run the tables always came last). Whichever runs first after an upstream change
        pays 0.2-0.6 s a model more than the next reader of the same data (measured on TPC-H
        queries in a scratch session, either order: bench/README.md), so a fixed order
        charged that to the same method every round."""
        prefixes = self.prefixes()
        turn = self.round_no % len(prefixes)
        results: List[Any] = []
        for prefix in prefixes[turn:] + prefixes[:turn]:
            results += self.dbt_run([f"{prefix}_{s}" for s in self.args.shapes])
        return results + self.dbt_run(EXTRA_MODELS)

    def warm_up(self) -> None:
        """Each shape's query run once into Spark's `noop` sink, untimed, before the timed
        writes: of two writers of one query after an upstream change the first pays more
        (bench/README.md, "Which writer goes first"), and in production every method is that
        first writer; with five methods and two repetitions a cell cannot give each the first
        place equally often, so no method gets it (bench/order_effect.py: with this warm-up the
        first writer's extra fell to about 0.1 s)."""
        for shape in self.args.shapes:
            self.spark.sql(models.plain_sql(shape)).write.format("noop").mode("overwrite").save()

    def record(self, **fields: Any) -> None:
        self.records.append(fields)

    def one_round(self, n: int, distribution: str, fraction: float, rep: int) -> None:
        self.round_no += 1
        ins, upd, dele = data.change_counts(n, fraction, distribution)
        common = dict(scale=n, distribution=distribution, fraction=fraction,
                      changes=ins + upd + dele, rep=rep)
        t0 = time.perf_counter()
        self.sql(data.change_sql(n, fraction, self.round_no, self.next_id, distribution))
        self.next_id += ins
        upstream_s = time.perf_counter() - t0
        version_to = self.version("raw.fact")
        self.log(f"scale {n:,} {distribution} fraction {fraction:g} rep {rep}: "
                 f"+{ins} ~{upd} -{dele} "
                 f"(upstream commit {upstream_s:.1f}s, v{self.consumed}->v{version_to})")

        expected = {s: self.signature(models.plain_sql(s)) for s in self.args.shapes}
        if not self.args.no_warm_up:
            self.warm_up()
        before = {name: self.version(f"bench.{name}") for name in self.all_models()
                  if not name.startswith("ovh_view")}

        trace_start = os.path.getsize(self.trace) if os.path.exists(self.trace) else 0
        results = self.timed_runs()
        self.split_trace(trace_start, results, common)
        for r in results:
            name = r.node.name
            prefix, _, shape = name.partition("_")
            resp = dict(r.adapter_response or {})
            commits = (self.version(f"bench.{name}") - before[name]) if name in before else 0
            if prefix in METHOD_OF_PREFIX:
                got = self.signature(f"select * from bench.{name}")
                self.record(**common, shape=shape, method=METHOD_OF_PREFIX[prefix],
                            seconds=r.execution_time, action=resp.get("action", ""),
                            statements=resp.get("statements", ""), writes=resp.get("writes", ""),
                            chunks=resp.get("chunks", ""),
                            target_commits=commits, correct=got == expected[shape],
                            rows=got[0], expected_rows=expected[shape][0])
            elif name == "gate_rowwise":
                self.record(**common, shape="rowwise", method="gated_skip",
                            seconds=r.execution_time, action=resp.get("action", ""),
                            statements=resp.get("statements", ""), writes=resp.get("writes", ""),
                            target_commits=commits, correct=True)
            else:
                self.record(**common, shape="-", method=f"overhead_{shape}",
                            seconds=r.execution_time, action="", statements="", writes="",
                            target_commits=commits, correct=True)

        if "rowwise" in self.args.shapes:
            before_hand = self.version("bench.hand_rowwise")
            t0 = time.perf_counter()
            self.sql(models.hand_merge_sql("bench.hand_rowwise", self.consumed + 1, version_to))
            seconds = time.perf_counter() - t0
            got = self.signature("select * from bench.hand_rowwise")
            self.record(**common, shape="rowwise", method="hand_merge", seconds=seconds,
                        action="merge", statements=1, writes=1,
                        target_commits=self.version("bench.hand_rowwise") - before_hand,
                        correct=got == expected["rowwise"], rows=got[0],
                        expected_rows=expected["rowwise"][0])
        self.consumed = version_to

        trace_start = os.path.getsize(self.trace) if os.path.exists(self.trace) else 0
        noop = self.dbt_run([f"br_{s}" for s in self.args.shapes])
        self.split_trace(trace_start, noop, common)
        for r in noop:
            resp = dict(r.adapter_response or {})
            self.record(**common, shape=r.node.name[3:], method="noop", seconds=r.execution_time,
                        action=resp.get("action", ""), statements=resp.get("statements", ""),
                        writes=resp.get("writes", ""), target_commits=0, correct=True)
        last = [r for r in self.records if r["scale"] == n and r["rep"] == rep
                and r["distribution"] == distribution and r["fraction"] == fraction]
        self.log("  " + ", ".join(
            f"{r['method']}/{r['shape']} {r['seconds']:.1f}s{'' if r['correct'] else ' WRONG'}"
            for r in last))

    def split_trace(self, start: int, results: List[Any], common: Dict[str, Any]) -> None:
        """Attribute the traced statements (BATCH_REFRESH_TRACE) to the batch_refresh refreshes."""
        if not os.path.exists(self.trace):
            return
        with open(self.trace) as handle:
            handle.seek(start)
            lines = handle.read().splitlines()
        pos = 0
        for r in results:
            resp = dict(r.adapter_response or {})
            count = resp.get("statements")
            if not isinstance(count, int) or not count:
                continue
            chunk = lines[pos:pos + count]
            pos += count
            if r.node.name.startswith(("br_", "gate_", "au_", "ow_", "fu_")):
                stmts = []
                for line in chunk:
                    secs, _, text = line.partition("\t")
                    stmts.append([round(float(secs), 3), text[:160]])
                self.traces.append({**common, "model": r.node.name, "action": resp.get("action"),
                                    "statements": stmts})

    # ------------------------------------------------------------------ main
    def run(self) -> Dict[str, Any]:
        started = time.time()
        self.start()
        setups: Dict[str, Any] = {}
        for n in self.args.scales:
            setups[str(n)] = self.build(n)
            for distribution in self.args.distributions:
                for fraction in self.args.fractions:
                    for rep in range(1, self.args.reps + 1):
                        self.one_round(n, distribution, fraction, rep)
                        # Partial results after every round: a run stopped early still reports.
                        self.save(self.result(started, setups))
        return self.result(started, setups)

    def result(self, started: float, setups: Dict[str, Any]) -> Dict[str, Any]:
        return {
            "meta": machine_info(self.args, time.time() - started, self.spark),
            "setup": setups,
            "records": self.records,
            "traces": self.traces,
        }

    def cleanup(self) -> None:
        """Stop Spark and delete the temporary warehouse: a 100M-row run leaves ~26 GB."""
        if self.spark is not None:
            self.spark.stop()
            self.spark = None
        shutil.rmtree(self.work, ignore_errors=True)

    def save(self, result: Dict[str, Any]) -> str:
        os.makedirs(self.args.out, exist_ok=True)
        path = os.path.join(self.args.out, f"{self.args.name}.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)
        return path


def machine_info(args: argparse.Namespace, wall: float, spark: Any) -> Dict[str, Any]:
    import importlib.metadata as md

    def ver(pkg: str) -> str:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "?"

    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":")[1].strip()
    except OSError:
        pass
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "wall_s": round(wall, 1),
        "cpus": os.cpu_count(),
        "memory": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "spark": spark.version if spark is not None else "?",
        "packages": {p: ver(p) for p in ("dbt-core", "dbt-spark", "delta-spark",
                                         "dbt-spark-batch-refresh")},
        "driver_memory": args.driver_memory, "checkpoint_interval": args.checkpoint_interval,
        "spark_confs": args.spark_conf, "time_zone": time.strftime("%Z"),
        "scales": args.scales, "fractions": args.fractions, "shapes": args.shapes,
        "distributions": args.distributions, "reps": args.reps,
    }


def conf_arg(text: str) -> Tuple[str, str]:
    """A `--spark-conf KEY=VALUE` argument (bench/run.py, bench/tpch.py)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scales", default="1000000", help="fact rows, comma-separated")
    p.add_argument("--fractions", default="0.0001,0.001,0.01,0.1")
    p.add_argument("--shapes", default=",".join(models.SHAPES))
    p.add_argument("--distributions", default="uniform",
                   help="which keys a change batch touches, comma-separated:\n"
                        "uniform (updates/deletes over the whole id range, the worst case),\n"
                        "recent (updates/deletes in the newest 1%% of the ids),\n"
                        "append (inserts only),\n"
                        "upsert (inserts and updates over the whole id range, no deletes)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--driver-memory", default="8g")
    # Delta writes a checkpoint with every 10th commit of a table, which costs that commit
    # 0.6-1.2 s more on this machine (a 1,000-row target: bench/README.md), a table build and a
    # refresh alike. The bench's targets reach a tenth version in the same round, so a cell's
    # median of two repetitions averages a checkpoint with a plain commit, and the checkpoint's
    # cost varies by table.
    p.add_argument("--checkpoint-interval", type=int, default=1000,
                   help="delta.checkpointInterval of every table the bench creates\n"
                        "(10 is Delta's default; the default here keeps checkpoints\n"
                        "out of the timed writes)")
    p.add_argument("--spark-conf", action="append", default=[], type=conf_arg, metavar="KEY=VALUE",
                   help="a Spark conf of the embedded session (repeatable); yours win")
    p.add_argument("--out", default="bench/results", help="directory for JSON, Markdown, PNGs")
    p.add_argument("--name", default="bench", help="file name stem of the results")
    p.add_argument("--no-charts", action="store_true")
    # dbt's incremental model is wrong on deletes and takes minutes per round at 100M rows.
    p.add_argument("--no-incremental", action="store_true",
                   help="leave dbt's incremental models out (their cells show '-')")
    p.add_argument("--strategies", action="store_true",
                   help="also run each shape as refresh_mode auto (by cost), overwrite and full")
    p.add_argument("--no-warm-up", action="store_true",
                   help="time the writes without running each shape's query once before them")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary warehouse and dbt project under /tmp/bench-*")
    args = p.parse_args(argv)
    args.scales = [int(float(s)) for s in args.scales.split(",") if s]
    args.fractions = [float(f) for f in args.fractions.split(",") if f]
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.spark_conf = dict(args.spark_conf)  # the last value of a key repeated wins
    unknown = set(args.shapes) - set(models.SHAPES)
    if unknown:
        p.error(f"unknown shapes {sorted(unknown)}; choose from {list(models.SHAPES)}")
    args.distributions = list(dict.fromkeys(d for d in args.distributions.split(",") if d))
    unknown = set(args.distributions) - set(data.DISTRIBUTIONS)
    if unknown or not args.distributions:
        p.error(f"unknown distributions {sorted(unknown)}; choose from {list(data.DISTRIBUTIONS)}")
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    try:
        result = bench.run()
        path = bench.save(result)
    finally:
        if not args.keep:
            bench.cleanup()
    text = report.write_report([result], args.out, args.name, charts=not args.no_charts)
    print(text)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
