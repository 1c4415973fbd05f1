"""A whole `dbt run`: N models as `batch_refresh` against the same N models as `table`.

    python bench/invocation.py [rows] [reps] [models] [name]   # defaults: 100000 5 1,8 invocation

dbt reports each node's execution time, and the other benchmarks compare those. A user times
the `dbt run`: dbt's own start and end, and, for `batch_refresh`, the refresh-state and history
write made once when the invocation ends (engine/record.py). This measures that wall time.

One JVM (the embedded session, through dbt in-process), a Delta source of `rows` rows with its
change feed on, and for each count in `models` that many aggregates over it (to 1,000 groups,
`refresh_mode` auto) as `batch_refresh` and as `table` (`file_format='delta'`). Each
repetition changes 0.1% of the source's rows, then runs each set in a `dbt run` of its own
(the order alternates every repetition: the first reader of changed data pays more,
bench/README.md "Which writer goes first"). Reported: medians of the invocation's wall time,
the sum of its nodes' execution times, the seconds of the refreshes' own statements in them
(BATCH_REFRESH_TRACE) and the seconds of the state and history write (Recorder.flush, timed).
The report goes to bench/results/<name>.md and .json. Run it alone: 2 cores.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.dbt_invoke import run_models, save_results, start_source_project  # noqa: E402
from bench.scratch_spark import arguments  # noqa: E402

SCHEMA = "invocation"
AGGREGATE = ("select g, count(*) as n, sum(v) as s, max(v) + {i} as top "
             "from {{{{ source('raw', 'src') }}}} group by g")


def _models(counts: List[int]) -> Dict[str, str]:
    models: Dict[str, str] = {}
    for count in counts:  # each set its own models: a model refreshed by another set is a no-op
        for i in range(count):
            body = AGGREGATE.format(i=i)
            models[f"br_{count}_{i}"] = "{{ config(materialized='batch_refresh') }}\n" + body
            # file_format='delta': dbt-spark's `create or replace` of the existing table (the
            # other benchmarks' yardstick); without it dbt drops the table and creates a new one
            models[f"tb_{count}_{i}"] = ("{{ config(materialized='table', file_format='delta') }}\n"
                                         + body)
    return models


FLUSHES: List[float] = []


def _time_the_record() -> None:
    """Time the invocation's state and history write (Recorder.flush), which the statement
    meter of the refreshes does not see."""
    from dbt.adapters.spark_batch_refresh.engine.record import Recorder

    flush = Recorder.flush

    def timed(self: Recorder, *args: object) -> None:
        began = time.monotonic()
        try:
            flush(self, *args)  # type: ignore[arg-type]
        finally:
            FLUSHES.append(time.monotonic() - began)

    Recorder.flush = timed  # type: ignore[method-assign]


def _traced_seconds(trace: str, offset: int) -> float:
    """The seconds of the refresh statements traced after `offset` (BATCH_REFRESH_TRACE)."""
    if not os.path.exists(trace):
        return 0.0
    with open(trace) as handle:
        handle.seek(offset)
        return sum(float(line.split("\t", 1)[0]) for line in handle if "\t" in line)


def main() -> int:
    rows, reps, models, name = arguments(100_000, 5, "1,8", "invocation")
    counts = [int(c) for c in models.split(",")]
    work = tempfile.mkdtemp(prefix="bench-invocation-", dir="/tmp")
    _time_the_record()
    # each refresh statement's seconds (yours, if BATCH_REFRESH_TRACE names a file)
    trace = os.environ.setdefault("BATCH_REFRESH_TRACE", os.path.join(work, "statements.trace"))
    try:
        project = os.path.join(work, "project")
        dbt, spark = start_source_project(project, name="invocation", schema=SCHEMA,
                                          models=_models(counts), rows=rows)
        everything = [f"{p}_{c}_{i}" for p in ("br", "tb") for c in counts for i in range(c)]
        run_models(dbt, project, ["--select", *everything])  # first builds, untimed
        found: Dict[str, Dict[str, List[float]]] = {}
        for rep in range(reps + 1):  # the first round warms the JVM up, untimed
            spark.sql(f"update {SCHEMA}_raw.src set v = v + 1 "
                      f"where id % 1000 = {rep}").collect()
            kinds = ["br", "tb"] if rep % 2 == 0 else ["tb", "br"]
            for count in counts:
                for kind in kinds:
                    FLUSHES.clear()
                    offset = os.path.getsize(trace) if os.path.exists(trace) else 0
                    began = time.monotonic()
                    chosen = [f"{kind}_{count}_{i}" for i in range(count)]
                    results = run_models(dbt, project, ["--select", *chosen])
                    wall = time.monotonic() - began
                    nodes = sum(r.execution_time for r in results)
                    record = sum(FLUSHES)
                    statements = _traced_seconds(trace, offset)
                    actions = sorted({str((r.adapter_response or {}).get("action", "table"))
                                      for r in results})
                    print(f"[invocation] {kind} x{count}: {wall:.2f} s wall, {nodes:.2f} s "
                          f"nodes, {record:.2f} s record, {actions}", flush=True)
                    if rep:
                        cell = found.setdefault(f"{kind}_{count}",
                                                {"wall": [], "nodes": [], "statements": [],
                                                 "record": []})
                        cell["wall"].append(wall)
                        cell["nodes"].append(nodes)
                        cell["statements"].append(statements)
                        cell["record"].append(record)
            print(f"[invocation] round {rep} done", flush=True)
        med = {k: {m: statistics.median(v) for m, v in cell.items()} for k, cell in found.items()}
        report = [f"A whole `dbt run` of N aggregates over a {rows:,}-row source (0.1% of it "
                  f"changed before each run), medians of {reps} "
                  f"(`python bench/invocation.py {rows} {reps} {','.join(map(str, counts))} "
                  f"{name}`):", "",
                  "| models | materialization | `dbt run` wall s | nodes' execution s | "
                  "of which the refreshes' statements s | state + history write s | "
                  "wall against the tables' |",
                  "|---:|---|---:|---:|---:|---:|---:|"]
        for count in counts:
            for kind, label in (("br", "batch_refresh"), ("tb", "table")):
                m = med[f"{kind}_{count}"]
                statements = f"{m['statements']:.2f}" if kind == "br" else "-"
                report.append(f"| {count} | {label} | {m['wall']:.2f} | {m['nodes']:.2f} | "
                              f"{statements} | {m['record']:.2f} | "
                              f"{m['wall'] / med[f'tb_{count}']['wall']:.2f}x |")
        text = "\n".join(report) + "\n"
        print(text)
        save_results(name, text, {"rows": rows, "reps": reps, "counts": counts, "seconds": found})
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
