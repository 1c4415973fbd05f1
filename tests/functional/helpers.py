"""Assertions shared by the functional tests: state, history and the correctness contract."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions
from dbt.tests.util import run_dbt, run_dbt_and_capture

STATE_SUFFIX = "_batch_refresh"


def sources_yml(*tables: str) -> str:
    """A `raw` source in the test schema with the given tables."""
    listed = "".join(f"\n      - name: {t}" for t in tables)
    return (
        "version: 2\nsources:\n  - name: raw\n    schema: \"{{ target.schema }}\"\n"
        f"    tables:{listed}\n"
    )


def rows(project: Any, sql: str) -> List[Dict[str, Any]]:
    # The adapter's own fetch keeps Spark's values (maps, timestamps) instead of agate's text.
    with project.adapter.connection_named("__test"):
        return project.adapter._fetch_dicts(sql)


def state(project: Any, model: str) -> Dict[str, Any]:
    found = rows(
        project,
        f"select * from {project.test_schema}{STATE_SUFFIX}.batch_refresh_state "
        f"where model_id = 'model.test.{model}'",
    )
    assert len(found) == 1, f"expected one state row for {model}, got {found}"
    return found[0]


def history(project: Any, model: str) -> List[Dict[str, Any]]:
    return rows(
        project,
        f"select * from {project.test_schema}{STATE_SUFFIX}.batch_refresh_history "
        f"where model_id = 'model.test.{model}' order by started_at, finished_at",
    )


def actions(project: Any, model: str) -> List[str]:
    return [h["action"] for h in history(project, model)]


def consumed_versions(project: Any, model: str) -> Dict[str, int]:
    data = json.loads(state(project, model)["consumed"])
    return {u: p["version"] for u, p in data.items()}


def table_version(project: Any, relation: str) -> int:
    return int(rows(project, f"describe history {relation} limit 1")[0]["version"])


def compiled_sql(project: Any, model: str) -> str:
    path = os.path.join(project.project_root, "target", "compiled", "test", "models", f"{model}.sql")
    with open(path) as handle:
        return handle.read()


def assert_contract(project: Any, model: str) -> None:
    """The target equals the model evaluated from scratch at the consumed upstream versions.

    One pass, as EXCEPT ALL computes it (Spark rewrites EXCEPT ALL to this union and
    aggregate): each distinct row's count in the model minus its count in the target; rows
    missing are the positive differences, rows extra the negative ones. Both directions of
    EXCEPT ALL evaluated the model twice."""
    from pyspark.sql import SparkSession

    expected = pin_versions(compiled_sql(project, model), consumed_versions(project, model))
    target = f"{project.test_schema}.{model}"
    columns = ", ".join("`" + c.replace("`", "``") + "`"
                        for c in SparkSession.builder.getOrCreate().table(target).columns)
    diff = rows(project, (
        "select coalesce(sum(greatest(_br_d, 0)), 0) as missing, "
        "coalesce(sum(greatest(-_br_d, 0)), 0) as extra from ("
        f"select sum(_br_side) as _br_d from (select *, 1 as _br_side from (({expected})) _br_e "
        f"union all select *, -1 as _br_side from {target}) _br_u group by {columns}) _br_g"))[0]
    assert (diff["missing"], diff["extra"]) == (0, 0), (
        f"{model}: target differs from the from-scratch evaluation: "
        f"{diff['missing']} rows missing, {diff['extra']} rows extra"
    )


def run_ok(args: List[str]) -> List[Any]:
    return list(run_dbt(args))


def run_fails(args: List[str]) -> str:
    _, output = run_dbt_and_capture(args, expect_pass=False)
    return output
