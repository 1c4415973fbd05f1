"""Delta-maintained aggregates (aggdelta.py, aggstage.py): the sidecar's life on real Spark + Delta.

The shape harness (test_shapes.py) checks that delta upkeep equals the from-scratch query under
random changes; this file checks what can happen to the sidecar between runs: a refresh that
fails after the sidecar write (the sidecar one commit ahead of the target), a sidecar dropped
by hand, arguments whose sums are not exact by delta, and decimal averages (which are).
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from dbt.tests.util import run_dbt, run_dbt_and_capture
from dbt.adapters.spark_batch_refresh.engine.run_result import TRACE_ENV
from tests.functional.helpers import STATE_SUFFIX, assert_contract, rows

MODELS = {
    "sources.yml": "version: 2\nsources:\n  - name: raw\n    schema: \"{{ target.schema }}\"\n"
                   "    tables:\n      - name: src\n",
    "by_grp.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                  "select grp, count(*) as n, sum(v) as total, avg(v) as mean, min(v) as lo, "
                  "max(v) as hi, sum(price) as price, avg(price) as mean_price, "
                  # a decimal average is Spark's exact decimal division, also under round()
                  "round(avg(price), 2) as mean_price_2\n"
                  "from {{ source('raw', 'src') }} where v >= 0 group by grp\n",
    "overall.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                   "select count(*) as n, sum(v) as total, max(v) as hi from {{ source('raw', 'src') }}\n",
    # count(*) alone: its input rows have no column (the backfill's DESCRIBE failed on
    # `SELECT FROM ...`; TPC-DS Q96).
    "rows_only.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                     "select count(*) as n from {{ source('raw', 'src') }} where v >= 0\n",
    # A double sum is not exact by delta: its groups are recomputed, never drifted.
    "by_grp_double.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                         "select grp, sum(d) as total from {{ source('raw', 'src') }} group by grp\n",
    # An intermediate aggregate: its GROUP BY kept in a sidecar, the rank over every group
    # recomputed from that sidecar.
    "grp_rank.sql": "{{ config(materialized='batch_refresh', unique_key='grp', "
                    "aggregate_upkeep='delta') }}\n"
                    "with t as (select grp, count(*) as n, sum(v) as total, min(v) as lo "
                    "from {{ source('raw', 'src') }} where v >= 0 group by grp)\n"
                    "select grp, n, total, lo, rank() over (order by total desc, grp) as rnk "
                    "from t\n",
    # Windows partitioned by a group key: a refresh recomputes the partitions it touches.
    "sub_rank.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                    "select grp, id % 3 as part, count(*) as n, sum(v) as total, "
                    "rank() over (partition by grp order by sum(v) desc, id % 3) as rnk "
                    "from {{ source('raw', 'src') }} where v >= 0 group by grp, id % 3\n",
    # An aggregate of the aggregate: a refresh recomputes the outer groups (by n) its touched
    # groups' rows fall in, before and after.
    "by_size.sql": "{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}\n"
                   "select n, count(*) as grps, sum(total) as total from (select grp, "
                   "count(*) as n, sum(v) as total from {{ source('raw', 'src') }} "
                   "where v >= 0 group by grp) t group by n\n",
}


def _run(project: Any, expect_pass: bool = True) -> Dict[str, Dict[str, Any]]:
    results = run_dbt(["run"], expect_pass=expect_pass)
    return {r.node.name: r.adapter_response for r in results.results}


def _cached_relations() -> List[str]:
    """Names of the relations held in the JVM's shared cache (every session's CACHE TABLE)."""
    from pyspark.sql import SparkSession

    context = SparkSession.builder.getOrCreate().sparkContext
    info = context._jsc.sc().getRDDStorageInfo()
    return [str(info[i].name()) for i in range(len(info))]


def _sidecar(project: Any, model: str) -> str:
    return f"{project.test_schema}{STATE_SUFFIX}.`model_test_{model}__br_agg`"


def _operations(project: Any, model: str) -> list[str]:
    return [r["operation"] for r in rows(project, f"describe history {_sidecar(project, model)}")]


class TestSidecar:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_sidecar_recovers(self, project, monkeypatch, tmp_path):
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table {src} (id int, grp int, v int, price decimal(10, 2), "
                        f"d double) using delta tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id % 5 as int), "
                        f"cast(id * 7 % 40 as int), cast(id / 4 as decimal(10, 2)), id / 3.0 "
                        f"from range(60)")

        def change(step: int) -> None:
            # updates (some leave the filter, some move group), deletes of each group's largest
            # v, inserts
            project.run_sql(f"update {src} set v = v + {step}, grp = (grp + id) % 6, "
                            f"d = d + 0.1 where id % 7 = {step % 7}")
            project.run_sql(f"merge into {src} t using (select max_by(id, v) as id from {src} "
                            f"group by grp) s on t.id = s.id when matched then delete")
            project.run_sql(f"insert into {src} values ({100 + step}, 9, -1, 1.25, 0.5), "
                            f"({200 + step}, {step % 5}, 99, null, null)")

        def contract() -> None:
            for model in ("by_grp", "overall", "rows_only", "by_grp_double", "grp_rank",
                          "sub_rank", "by_size"):
                assert_contract(project, model)

        trace = tmp_path / "trace.tsv"
        monkeypatch.setenv(TRACE_ENV, str(trace))
        first = _run(project)
        monkeypatch.delenv(TRACE_ENV)
        assert {m: r["action"] for m, r in first.items()} == dict.fromkeys(first, "backfill")
        contract()
        # No target yet: each sidecar is built (all but the double sum's), then the target
        # written straight from the model read from it, a key's checks in the write; nothing
        # cached (until this session the model over the sidecar was staged in the session's
        # cache, its keys checked there, and the target written from the cache).
        statements = trace.read_text().splitlines()
        assert not [line for line in statements if "\tCACHE " in line], statements
        created = [line.split("CREATE OR REPLACE TABLE ", 1)[1].split(" USING ", 1)[0]
                   for line in statements if "CREATE OR REPLACE TABLE " in line]
        built = sorted(name.split("model_test_", 1)[1].split("__br_agg")[0]
                       for name in created if "__br_agg" in name)
        assert built == ["by_grp", "by_size", "grp_rank", "overall", "rows_only", "sub_rank"]
        assert len(created) == len(built) + len(first), created

        change(1)
        second = _run(project)
        for model in ("by_grp", "overall", "rows_only"):
            assert second[model]["action"] == "replay" and second[model]["staged_from"] == "aggregate"
        assert second["by_grp_double"]["staged_from"] == "snapshot"  # recomputed, exact
        assert second["grp_rank"]["staged_from"] == "intermediate"
        contract()

        # A refresh that fails between the sidecar's commit and the target's: the sidecar is
        # one write ahead, and the next run restores it before advancing it again.
        change(2)
        monkeypatch.setenv("BATCH_REFRESH_FAIL_AT", "after_sidecar")
        monkeypatch.setenv("BATCH_REFRESH_FAIL_MODE", "error")
        _, output = run_dbt_and_capture(["run", "--select", "by_grp"], expect_pass=False)
        assert "injected fault at fail point 'after_sidecar'" in output
        # The upkeep's cached steps (delta, new state, state) went with the failed staging.
        # Their session ends with the run, but the cached blocks live in the JVM's shared
        # cache (a Thrift server's, for days) until the view is dropped.
        # The cached views are named _br_staging_<run id>_...; "Delta Table State" blocks are
        # Delta's own cache of a table's log (here of another test's persisted staging table,
        # since tests share the JVM), which Delta evicts itself.
        left = [name for name in _cached_relations()
                if "_br_staging" in name and not name.startswith("Delta Table State")]
        assert left == [], left
        _, output = run_dbt_and_capture(["run", "--select", "grp_rank", "by_size"],
                                        expect_pass=False)
        assert output.count("injected fault at fail point 'after_sidecar'") == 2
        monkeypatch.delenv("BATCH_REFRESH_FAIL_AT")
        change(3)
        third = _run(project)
        assert third["by_grp"]["staged_from"] == "aggregate"
        assert _operations(project, "by_grp")[:3] == ["MERGE", "RESTORE", "MERGE"]
        # The intermediate's rest read the whole state from the restored sidecar's groups.
        assert third["grp_rank"]["staged_from"] == "intermediate"
        assert _operations(project, "grp_rank")[:3] == ["MERGE", "RESTORE", "MERGE"]
        # The outer groups read before the change from the restored version (the base).
        assert third["by_size"]["staged_from"] == "intermediate"
        assert _operations(project, "by_size")[:3] == ["MERGE", "RESTORE", "MERGE"]
        contract()

        # A sidecar dropped by hand: the next refresh recomputes its groups and rebuilds it,
        # the one after is a delta again.
        project.run_sql(f"drop table {_sidecar(project, 'by_grp')}")
        project.run_sql(f"drop table {_sidecar(project, 'grp_rank')}")
        change(4)
        fourth = _run(project)
        assert fourth["by_grp"]["action"] == "replay" and fourth["by_grp"]["staged_from"] == "snapshot"
        # An intermediate without its sidecar: the model in full, merged as a difference.
        assert fourth["grp_rank"]["action"] == "replay" and fourth["grp_rank"]["strategy"] == "full"
        contract()
        change(5)
        fifth = _run(project)
        assert fifth["by_grp"]["staged_from"] == "aggregate"
        assert fifth["overall"]["staged_from"] == "aggregate"
        assert fifth["grp_rank"]["staged_from"] == "intermediate"
        assert fifth["sub_rank"]["staged_from"] == "intermediate"
        contract()

        # One row of one group changes: only that group's partition is staged and merged.
        changed = rows(project, f"select grp, min(id) as id from {src} where v >= 0 and grp "
                                f"is not null group by grp order by grp limit 1")[0]
        project.run_sql(f"update {src} set v = v + 1 where id = {changed['id']}")
        sixth = {r.node.name: r.adapter_response
                 for r in run_dbt(["run", "--select", "sub_rank", "by_size"]).results}
        target = rows(project, f"select grp from {project.test_schema}.sub_rank")
        in_partition = [r for r in target if r["grp"] == changed["grp"]]
        assert sixth["sub_rank"]["staged_from"] == "intermediate"
        assert sixth["sub_rank"]["staged_rows"] == len(in_partition) < len(target)
        assert_contract(project, "sub_rank")
        # The group's count stays: its row before and after is in one outer group, the only
        # one recomputed.
        sizes = rows(project, f"select n from {project.test_schema}.by_size")
        assert sixth["by_size"]["staged_rows"] == 1 < len(sizes), sizes
        assert_contract(project, "by_size")

        # A group past the rows its decimal average is exact for from the state (500 million
        # at decimal(10, 2); capped here): the sidecar advances, the touched groups are
        # recomputed from the upstream; below the cap again, a delta.
        versions = len(_operations(project, "by_grp"))
        monkeypatch.setenv("BATCH_REFRESH_DECIMAL_AVG_ROWS", "3")
        change(6)
        capped = {r.node.name: r.adapter_response
                  for r in run_dbt(["run", "--select", "by_grp"]).results}["by_grp"]
        assert capped["action"] == "replay" and capped["staged_from"] == "snapshot", capped
        assert len(_operations(project, "by_grp")) == versions + 1
        assert_contract(project, "by_grp")
        monkeypatch.delenv("BATCH_REFRESH_DECIMAL_AVG_ROWS")
        change(7)
        uncapped = {r.node.name: r.adapter_response
                    for r in run_dbt(["run", "--select", "by_grp"]).results}["by_grp"]
        assert uncapped["staged_from"] == "aggregate", uncapped
        assert_contract(project, "by_grp")

        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: by_grp}"])
        assert "incremental (delta aggregate" in explained and "[delta aggregate] " in explained
        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: grp_rank}"])
        assert "incremental (intermediate aggregate" in explained
        assert "intermediate: the subquery grouped by (grp) is kept in a sidecar" in explained
        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: sub_rank}"])
        assert "recomputed over the groups of the partitions (by grp) the change touches" in explained
        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: by_size}"])
        assert "for the outer groups (by n) its touched groups fall in" in explained
        assert "above it: None" not in explained  # replayed through its split form
