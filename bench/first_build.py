"""A model's first build: its `batch_refresh` backfill against the same model as a `table`.

    python bench/first_build.py [rows] [reps] [name]      # defaults: 2000000 3 first-build

One JVM (the embedded session, through dbt in-process), a Delta source of `rows` rows with its
change feed on, and eight models over it: a keyless row-wise model as `batch_refresh` and as
`table`, the same model keyed (`unique_key='id'`) as `batch_refresh`, and an aggregate to 1,000
groups (its key inferred from the GROUP BY) as `batch_refresh` and as `table`, and the aggregate
kept by delta (`aggregate_upkeep='delta'`: a sidecar built with it) as `batch_refresh`, and the
aggregate with one NULL group (`nullif(g, 0)`) as `batch_refresh` and as `table`. Each repetition
rebuilds every model with `dbt run --full-refresh`, one model per run, in an order rotated every
repetition (the first reader of a query's data pays more: bench/README.md, "Which writer goes
first"). Reported: dbt's execution time of each node, medians, and each backfill against the
table build of the same SQL. The report goes to bench/results/<name>.md and .json.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.dbt_invoke import run_models, save_results, start_source_project  # noqa: E402
from bench.scratch_spark import arguments  # noqa: E402

SCHEMA = "first_build"
MODEL = "select id, g, v * 2 as v2 from {{ source('raw', 'src') }} where v % 10 <> 0"
AGGREGATE = "select g, count(*) as n, sum(v) as s from {{ source('raw', 'src') }} group by g"
AGGREGATE_NULL = ("select nullif(g, 0) as g, count(*) as n, sum(v) as s "
                  "from {{ source('raw', 'src') }} group by nullif(g, 0)")
MODELS = {
    "keyless_br": "{{ config(materialized='batch_refresh') }}\n" + MODEL,
    "keyless_table": "{{ config(materialized='table') }}\n" + MODEL,
    "keyed_br": "{{ config(materialized='batch_refresh', unique_key='id') }}\n" + MODEL,
    "agg_br": "{{ config(materialized='batch_refresh') }}\n" + AGGREGATE,
    "agg_table": "{{ config(materialized='table') }}\n" + AGGREGATE,
    # Kept by delta: its sidecar (the groups' state) built first, the target read from it.
    "agg_delta_br": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                    + AGGREGATE,
    # One NULL group (g = 0): its inferred key is matched null-safely, found by the first try.
    "agg_null_br": "{{ config(materialized='batch_refresh') }}\n" + AGGREGATE_NULL,
    "agg_null_table": "{{ config(materialized='table') }}\n" + AGGREGATE_NULL,
}
# Each model against the table build of its SQL.
YARDSTICK = {"keyless_br": "keyless_table", "keyless_table": "keyless_table",
             "keyed_br": "keyless_table", "agg_br": "agg_table", "agg_table": "agg_table",
             "agg_delta_br": "agg_table", "agg_null_br": "agg_null_table",
             "agg_null_table": "agg_null_table"}


def main() -> int:
    rows, reps, name = arguments(2_000_000, 3, "first-build")
    work = tempfile.mkdtemp(prefix="bench-first-build-", dir="/tmp")
    try:
        project = os.path.join(work, "project")
        dbt, _ = start_source_project(project, name="first_build", schema=SCHEMA,
                                      models={m: sql + "\n" for m, sql in MODELS.items()},
                                      rows=rows)
        names = list(MODELS)
        seconds: Dict[str, List[float]] = {n: [] for n in names}
        for rep in range(reps + 1):  # the first round warms the JVM up, untimed
            order = names[rep % len(names):] + names[:rep % len(names)]
            for model in order:
                (result,) = run_models(dbt, project, ["--full-refresh", "--select", model])
                if rep:
                    seconds[model].append(result.execution_time)
            print(f"[first-build] round {rep}: " + ", ".join(
                f"{m} {seconds[m][-1]:.2f} s" for m in names if rep), flush=True)
        medians = {m: statistics.median(v) for m, v in seconds.items()}
        report = [f"First builds of models over a {rows:,}-row source, medians of {reps} "
                  f"(`python bench/first_build.py {rows} {reps} {name}`):", "",
                  "| model | seconds | against the table |", "|---|---:|---:|"]
        report += [f"| {m} | {medians[m]:.2f} | {medians[m] / medians[YARDSTICK[m]]:.2f}x |"
                   for m in names]
        text = "\n".join(report) + "\n"
        print(text)
        save_results(name, text, {"rows": rows, "reps": reps, "seconds": seconds})
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
