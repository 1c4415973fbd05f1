"""NULL groups: a key inferred from GROUP BY that is NULL in some output rows.

GROUP BY puts every NULL in one group, so such a key is unique under null-safe equality: the
refresh keeps it and matches it by `<=>` (config.nullable_key), where it used to drop the key
and recompute in full on every run. Each step moves the NULL group (its rows change, it
vanishes, it comes back) and every model must replay and equal the model from scratch.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.tests.util import run_dbt, run_dbt_and_capture
from tests.functional.helpers import actions, assert_contract, rows, sources_yml

SRC = "{{ source('raw', 'src') }}"
MODELS = {
    "sources.yml": sources_yml("src"),
    # kept by delta in a sidecar
    "by_grp_delta.sql": "{{ config(materialized='batch_refresh', refresh_mode='incremental', "
                        "aggregate_upkeep='delta') }}\n"
                        f"select grp, count(*) as n, sum(v) as total, max(v) as hi from {SRC} "
                        "group by grp\n",
    # affected-key recompute of a compound key with a NULL in either part
    "by_pair.sql": "{{ config(materialized='batch_refresh', refresh_mode='incremental') }}\n"
                   f"select grp, sub, count(*) as n from {SRC} group by grp, sub\n",
    # no NULL until a replay gives one (the sidecar written before the key check finds it;
    # such a replay once staged only the new NULL group's tombstone, and the target lost
    # the group)
    "by_sub_delta.sql": "{{ config(materialized='batch_refresh', refresh_mode='incremental', "
                        "aggregate_upkeep='delta') }}\n"
                        f"select sub, count(*) as n, sum(v) as total from {SRC} group by sub\n",
}
NAMES = [name[:-4] for name in MODELS if name.endswith(".sql")]


class TestNullGroups:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @staticmethod
    def _run() -> Dict[str, Dict[str, Any]]:
        return {r.node.name: r.adapter_response for r in run_dbt(["run"]).results}

    def _step(self, project: Any, *statements: str) -> None:
        for statement in statements:
            project.run_sql(statement.format(src=f"{project.test_schema}.src"))
        responses = self._run()
        for name in NAMES:  # first what the targets hold, then how they got there
            assert_contract(project, name)
        for name, response in responses.items():
            assert response["action"] == "replay" and response["mode"] == "incremental", (
                name, response)

    def test_null_groups_replay(self, project):
        src = f"{project.test_schema}.src"
        project.run_sql(f"create table {src} (id int, grp string, sub string, v int) using delta "
                        "tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), "
                        "if(id % 5 = 0, null, concat('g', id % 5)), concat('s', id % 3), "
                        "cast(id * 7 % 50 as int) from range(1, 31)")
        assert {n: r["action"] for n, r in self._run().items()} == {n: "backfill" for n in NAMES}
        for name in NAMES:
            assert_contract(project, name)
        assert rows(project, f"select count(*) as n from {project.test_schema}.by_grp_delta "
                             "where grp is null")[0]["n"] == 1

        # the NULL group's rows change and grow; a NULL sub appears in a replay
        self._step(project, "update {src} set v = v + 100 where id = 5",
                   "insert into {src} values (31, null, 's1', 3), (32, 'g1', null, 4)")
        # the NULL groups vanish: each a tombstone that must meet the target's NULL row
        self._step(project, "delete from {src} where grp is null or sub is null")
        assert rows(project, f"select count(*) as n from {project.test_schema}.by_pair "
                             "where grp is null or sub is null")[0]["n"] == 0
        # a NULL group enters and leaves within one window: its rows net to nothing, and no
        # sidecar or target holds the group, while another group changes (Delta's MERGE
        # with deletion vectors, once it rewrites a file, raised "Unexpected row: did not
        # match any merge clause" on such a `<=>` source row)
        self._step(project, "insert into {src} values (35, null, null, 2)",
                   "update {src} set v = v + 1 where id = 1", "delete from {src} where id = 35")
        # and come back
        self._step(project, "insert into {src} values (40, null, null, 9), (41, null, 's2', 1)")
        assert actions(project, "by_pair") == ["backfill", "replay", "replay", "replay", "replay"]

        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: by_pair}"])
        assert "unique_key: grp, sub (inferred from the query; NULL in some rows" in explained, (
            explained)

    def test_null_safe_merge_chunks_and_tombstones(self, project):
        # The MERGEs a null-safe key writes, on a target with deletion vectors, where Delta
        # tests the ON condition again on outer-join rows lacking a side (`<=>` holds between
        # a NULL key and the missing side's NULLs): a chunk of a full recompute whose key hash
        # leaves out the target's NULL row, and a tombstone of a NULL key the target lacks.
        target = f"{project.test_schema}.merged"
        staged = f"{project.test_schema}.staged"

        def merge(source: str, initial: str, **options: Any) -> List[Tuple[Any, Any]]:
            project.run_sql(f"create or replace table {target} (g int, n bigint) using delta "
                            "tblproperties ('delta.enableDeletionVectors' = 'true')")
            project.run_sql(f"insert into {target} values {initial}")
            project.run_sql(f"create or replace table {staged} using delta as {source}")
            project.run_sql(sqlgen.merge_staging(target, staged, ["g"], ["g", "n"],
                                                 null_safe=True, **options))
            return sorted(((r["g"], r["n"]) for r in rows(project, f"select * from {target}")),
                          key=str)

        full = ("select g, n, true as _br_present, g as _br_k_0 from values (1, 5L), (2, 7L), "
                "(3, 1L) as v(g, n) where pmod(xxhash64(g), 2) = 1")  # chunk 2 of 2: 1, 3
        assert merge(full, "(null, 1), (1, 1), (2, 2)", delete_missing=True,
                     chunk=(2, 2)) == [(1, 5), (2, 2), (3, 1), (None, 1)]
        changes = ("select * from values (cast(null as int), cast(null as bigint), "
                   "cast(null as boolean), cast(null as int)), (1, 9L, true, 1) "
                   "as v(g, n, _br_present, _br_k_0)")
        assert merge(changes, "(1, 1), (2, 2)", delete_missing=False,
                     keep_null_tombstone=False) == [(1, 9), (2, 2)]
