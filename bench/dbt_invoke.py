"""The benchmark drivers' dbt projects (bench/run.py, bench/tpch.py, bench/first_build.py):
written to a directory, run in-process."""

from __future__ import annotations

import os
from typing import Any, List, Mapping, Optional, Tuple

# A view that starts the embedded session (its first `dbt run`) before anything is timed.
SPARK_UP = "{{ config(materialized='view') }}\nselect 1 as up\n"


def write_project(root: str, *, name: str, schema: str, session_dir: str, sources: str,
                  models: Mapping[str, str], confs: Optional[Mapping[str, str]] = None) -> None:
    """A dbt project of `models` (name -> SQL) and `sources` (a sources.yml) whose profile is
    the embedded session at `session_dir`, one thread, `confs` as its server_side_parameters."""
    os.makedirs(os.path.join(root, "models"), exist_ok=True)
    with open(os.path.join(root, "dbt_project.yml"), "w") as f:
        f.write(f"name: {name}\nversion: '1.0'\nconfig-version: 2\nprofile: bench\n"
                "model-paths: ['models']\n")
    profile = ("bench:\n  target: session\n  outputs:\n    session:\n"
               "      type: spark_batch_refresh\n      method: session\n"
               f"      schema: {schema}\n      threads: 1\n      session_dir: {session_dir}\n")
    if confs:
        profile += "      server_side_parameters:\n" + "".join(
            f"        {key}: '{value}'\n" for key, value in confs.items())
    with open(os.path.join(root, "profiles.yml"), "w") as f:
        f.write(profile)
    with open(os.path.join(root, "models", "sources.yml"), "w") as f:
        f.write(sources)
    for model, sql in models.items():
        with open(os.path.join(root, "models", f"{model}.sql"), "w") as f:
            f.write(sql)


def run_models(dbt: Any, project: str, args: List[str]) -> List[Any]:
    """`dbt run <args>` of `project` (its own profiles.yml, run from its directory, quiet);
    the node results, or an error naming every node that did not succeed."""
    argv = ["run", "--project-dir", project, "--profiles-dir", project, "--quiet", *args]
    cwd = os.getcwd()
    os.chdir(project)
    try:
        res = dbt.invoke(argv)
    finally:
        os.chdir(cwd)
    if res.result is None:
        raise RuntimeError(f"dbt {' '.join(argv)} failed: {res.exception}")
    results = list(res.result.results)
    bad = [r for r in results if str(r.status) not in ("success", "RunStatus.Success")]
    if bad:
        raise RuntimeError("; ".join(f"{r.node.name}: {r.status} {r.message}" for r in bad))
    return results


def start_source_project(project: str, *, name: str, schema: str, models: Mapping[str, str],
                         rows: int) -> Tuple[Any, Any]:
    """A project of `models` over one source, `raw.src` (`<schema>_raw.src`: `rows` rows of
    `id, g = id % 1000, v`, Delta with its change feed), the embedded session started by a
    `spark_up` view: (dbt's runner, the session). bench/first_build.py, bench/invocation.py."""
    write_project(project, name=name, schema=schema, session_dir=os.path.join(project, "session"),
                  sources=(f"version: 2\nsources:\n  - name: raw\n    schema: {schema}_raw\n"
                           "    tables:\n      - name: src\n"),
                  models={"spark_up": SPARK_UP, **models})
    from dbt.cli.main import dbtRunner
    from pyspark.sql import SparkSession

    dbt = dbtRunner()
    run_models(dbt, project, ["--select", "spark_up"])
    spark = SparkSession.builder.getOrCreate()
    spark.sql(f"create schema if not exists {schema}_raw")
    spark.sql(f"create or replace table {schema}_raw.src using delta "
              "tblproperties (delta.enableChangeDataFeed = true) as "
              f"select id, id % 1000 as g, cast(id * 7 % 100 as int) as v from range({rows})")
    return dbt, spark


def save_results(name: str, text: str, data: Mapping[str, Any]) -> None:
    """bench/results/<name>.md (`text`) and <name>.json (`data` and when it was written)."""
    import json
    import time

    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump({**data, "started": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=1)
