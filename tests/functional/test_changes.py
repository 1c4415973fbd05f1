"""The world moves under a model: change-feed gaps, schema changes, outside writes, bad keys.

One project, one model per case and setting, each on its own upstream, so a single `dbt run`
exercises every case. After each run: the action taken, the message, and the target equals the
from-scratch evaluation (or is untouched, for `fail`).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

from tests.functional.helpers import actions, assert_contract, history, rows, state, table_version
from dbt.tests.util import run_dbt_and_capture

CASES = ["vacuum", "cdf", "recreate", "schema", "logret", "written", "star", "edit"]
SETTINGS = {"rebuild": "rebuild", "fail": "fail"}
# `fail` shares detection with `rebuild` and only differs in raising instead of rebuilding, so it
# runs for one case of each kind of detection (error class, table identity, target history,
# fingerprint); every case runs under `rebuild`. Saves ~4 backfills of CI time.
FAIL_CASES = ["vacuum", "recreate", "written", "edit"]


def pairs():
    return [(case, s) for case in CASES for s in SETTINGS if s == "rebuild" or case in FAIL_CASES]


def model_sql(case: str, setting: str) -> str:
    knob = "on_model_change" if case in ("written", "star", "edit") else "on_change_feed_gap"
    select = "*" if case == "star" else "id, v"
    return (
        f"{{{{ config(materialized='batch_refresh', unique_key='id', {knob}='{setting}') }}}}\n"
        f"select {select} from {{{{ target.schema }}}}.src_{case}_{setting}\n"
    )


MODELS = {f"{case}_{s}.sql": model_sql(case, s) for case, s in pairs()}
MODELS.update({
    "additive.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\n"
                    "select id, v from {{ target.schema }}.src_additive\n",
    "dupkeys.sql": "{{ config(materialized='batch_refresh', unique_key='grp') }}\n"
                   "select grp, v from {{ target.schema }}.src_dupkeys\n",
    "nullkeys.sql": "{{ config(materialized='batch_refresh', unique_key='nk') }}\n"
                    "select case when id = 3 then null else id end as nk, v "
                    "from {{ target.schema }}.src_nullkeys\n",
    "missing.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\n"
                   "select id, v from {{ target.schema }}.src_never_created\n",
    "retention.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\n"
                     "select id, v from {{ target.schema }}.src_retention\n",
    # The NULL-supplying side of an outer join changes under a filtered group key: the
    # affected key of a NULL-region customer is NULL, a tombstone, not a NULL output key.
    "outer.sql": "{{ config(materialized='batch_refresh', unique_key='region') }}\n"
                 "select c.region, count(o.id) as n_orders, sum(o.amount) as amount "
                 "from {{ target.schema }}.cust_outer c left join {{ target.schema }}.ord_outer o "
                 "on o.cust_id = c.id where c.region is not null group by c.region\n",
    # A replay gives a group key NULL (order 2 passes the filter and joins the NULL-region
    # customer): a NULL output key, whose recompute restricted to `key IN (...)` would stage
    # only a tombstone and delete the group. The key is inferred (the model sets none), so the
    # refresh goes on with it matched null-safely (it failed with "bad unique_key" before,
    # then recomputed in full without a key).
    "nullgroup.sql": "{{ config(materialized='batch_refresh') }}\n"
                     "select c.region, sum(o.amount) as amount "
                     "from {{ target.schema }}.ord_outer o join {{ target.schema }}.cust_outer c "
                     "on o.cust_id = c.id where o.amount <> 20 group by c.region\n",
    # The same join's NULL-region group from the first build: the backfill's inline check
    # of the inferred key fails its write, and the model is built with the key null-safe.
    "nullgroup_first.sql": "{{ config(materialized='batch_refresh') }}\n"
                           "select c.region, sum(o.amount) as amount "
                           "from {{ target.schema }}.ord_outer o join {{ target.schema }}.cust_outer c "
                           "on o.cust_id = c.id group by c.region\n",
    # Several chunks; a new row takes the key of an unchanged row (k = 101 % 100 = 1).
    "collide.sql": "{{ config(materialized='batch_refresh', unique_key='k', merge_chunk_rows=1) }}\n"
                   "select id % 100 as k, v from {{ target.schema }}.src_collide\n",
    # One chunk, an update among the changes: applied by REPLACE WHERE, whose statement
    # checks the new keys itself.
    "collide_replace.sql": "{{ config(materialized='batch_refresh', unique_key='k') }}\n"
                           "select id % 100 as k, v from {{ target.schema }}.src_collide\n",
})
# Keyless models replay by appending; a gap met by their append check must still be a gap.
KEYLESS_GAPS = ["vacuum", "logret"]
MODELS.update({
    f"{case}_keyless.sql": "{{ config(materialized='batch_refresh', on_change_feed_gap='rebuild') }}\n"
                           f"select id, v from {{{{ target.schema }}}}.src_{case}_keyless\n"
    for case in KEYLESS_GAPS})


def create(project, name: str, extra: str = "", props: str = "") -> str:
    relation = f"{project.test_schema}.{name}"
    project.run_sql(
        f"create table {relation} (id int, v int, grp int{extra}) using delta tblproperties "
        f"(delta.enableChangeDataFeed = true{props})"
    )
    project.run_sql(f"insert into {relation} (id, v, grp) values (1, 10, 1), (2, 20, 1), (3, 30, 2)")
    return relation


def in_one_session(project, *statements: str) -> None:
    # Session confs (the VACUUM retention check) hold only for the connection that sets them.
    with project.adapter.connection_named("__session"):
        for statement in statements:
            project.adapter._run_sql(statement)


def perturb(project, case: str, src: str) -> None:
    if case == "vacuum":
        project.run_sql(f"update {src} set v = v + 1 where id = 1")
        in_one_session(project,
                       "SET spark.databricks.delta.retentionDurationCheck.enabled=false",
                       f"VACUUM {src} RETAIN 0 HOURS")
    elif case == "cdf":
        project.run_sql(f"alter table {src} set tblproperties (delta.enableChangeDataFeed = false)")
        project.run_sql(f"update {src} set v = v + 1 where id = 1")
        project.run_sql(f"alter table {src} set tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"update {src} set v = v + 1 where id = 2")
    elif case == "recreate":
        project.run_sql(f"drop table {src}")
        project.run_sql(f"create table {src} (id int, v int, grp int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        for i in range(3):  # more commits than before, so the version does not go back
            project.run_sql(f"insert into {src} values ({10 + i}, {i}, 1)")
    elif case == "schema":
        project.run_sql(f"alter table {src} set tblproperties ('delta.columnMapping.mode' = 'name', "
                        f"'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')")
        project.run_sql(f"alter table {src} rename column grp to grp_renamed")
        project.run_sql(f"update {src} set v = v + 1 where id = 1")
    elif case == "logret":
        # What log cleanup does once the log retention passed: commit files before the latest
        # checkpoint are deleted, including the range the model has not consumed yet.
        project.run_sql(f"alter table {src} set tblproperties ('delta.checkpointInterval' = '2')")
        for _ in range(4):
            project.run_sql(f"update {src} set v = v + 1 where id = 1")
        location = rows(project, f"describe detail {src}")[0]["location"].removeprefix("file:")
        for version in range(4):
            os.remove(os.path.join(location, "_delta_log", f"{version:020d}.json"))
    elif case in ("written", "star", "edit"):
        project.run_sql(f"update {src} set v = v + 1 where id = 1")
    if case == "edit":
        # someone edits the model's SQL between runs
        for setting in (s for c, s in pairs() if c == "edit"):
            path = os.path.join(project.project_root, "models", f"edit_{setting}.sql")
            with open(path) as handle:
                text = handle.read()
            with open(path, "w") as handle:
                handle.write(text.replace("select id, v from", "select id, v + 1 as v from"))


class TestWorldMoves:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def test_every_case(self, project, monkeypatch):
        schema = project.test_schema
        sources = {}
        for case, s in pairs():
            sources[(case, s)] = create(project, f"src_{case}_{s}")
        additive = create(project, "src_additive")
        create(project, "src_dupkeys")
        nullkeys = create(project, "src_nullkeys")
        retention = create(project, "src_retention",
                           props=", 'delta.deletedFileRetentionDuration' = 'interval 1 days'")
        keyless = {case: create(project, f"src_{case}_keyless") for case in KEYLESS_GAPS}
        collide = create(project, "src_collide")
        for name, cols, values in (("cust_outer", "id int, region string",
                                    "(1, 'eu'), (2, null), (3, 'us')"),
                                   ("ord_outer", "id int, cust_id int, amount int",
                                    "(1, 1, 10), (2, 2, 20), (3, 3, 30)")):
            project.run_sql(f"create table {schema}.{name} ({cols}) using delta "
                            f"tblproperties (delta.enableChangeDataFeed = true)")
            project.run_sql(f"insert into {schema}.{name} values {values}")

        _, output = run_dbt_and_capture(["run"], expect_pass=False)
        # bad keys fail before any target exists, with the offending keys and counts
        assert "batch_refresh model 'dupkeys': bad unique_key" in output
        assert "unique_key (grp) is not unique in the model output: (1) x2" in output
        assert "batch_refresh model 'nullkeys': bad unique_key" in output
        assert "1 output rows have a NULL in unique_key (nk)" in output
        # an upstream that does not exist: one user error naming it and the fix
        assert "batch_refresh model 'missing': an upstream relation does not exist" in output
        assert "src_never_created was not found" in output
        assert "dbt run --select +missing" in output
        assert "Traceback" not in output
        for model in ("dupkeys", "nullkeys"):
            assert not rows(project, f"show tables in {schema} like '{model}'")
            assert state(project, model)["phase"] == "idle"
        project.run_sql(f"update {nullkeys} set id = 4 where id = 3")

        # the world moves
        for (case, s), src in sources.items():
            perturb(project, case, src)
            if case == "written":
                project.run_sql(f"insert into {schema}.{case}_{s} values (99, 99)")
            if case == "star":
                project.run_sql(f"alter table {src} add columns (extra string)")
        project.run_sql(f"alter table {additive} add columns (extra string)")
        project.run_sql(f"insert into {additive} values (4, 40, 2, 'x')")
        project.run_sql(f"update {additive} set v = 0, extra = 'y' where id = 1")
        project.run_sql(f"update {retention} set v = 0 where id = 1")
        for case, src in keyless.items():
            perturb(project, case, src)
        project.run_sql(f"update {schema}.ord_outer set amount = amount + 1 where id in (1, 2)")
        project.run_sql(f"update {collide} set v = v + 1 where id = 2")
        project.run_sql(f"insert into {collide} values " + ", ".join(
            f"({i}, {i}, 1)" for i in [*range(4, 12), 101]))
        collide_versions = {m: table_version(project, f"{schema}.{m}")
                            for m in ("collide", "collide_replace")}

        untouched = {case: table_version(project, f"{schema}.{case}_fail") for case in FAIL_CASES}
        # 20 hours after the consumed commit: under a quarter of the 1-day retention is left
        monkeypatch.setenv("BATCH_REFRESH_NOW",
                           (datetime.now() + timedelta(hours=20)).isoformat(timespec="seconds"))
        _, output = run_dbt_and_capture(["run", "--exclude", "dupkeys", "missing"], expect_pass=False)

        expected_gap = {
            "vacuum": "removed by VACUUM",
            "cdf": "Change Data Feed was turned off",
            "recreate": "dropped and recreated",
            "schema": "incompatible schema change",
            "logret": "older than the table's log retention",
        }
        for case, text in expected_gap.items():
            last = history(project, f"{case}_rebuild")[-1]
            assert last["action"] == "backfill", (case, last)
            assert text in last["reason"], (case, last["reason"])
            assert_contract(project, f"{case}_rebuild")
            if case in FAIL_CASES:
                assert text in output
                assert (f"batch_refresh model '{case}_fail': the upstream change feed has a gap"
                        in output)
                assert f"dbt run --select {case}_fail --full-refresh" in output
        assert "changed outside batch_refresh" in history(project, "written_rebuild")[-1]["reason"]
        assert_contract(project, "written_rebuild")
        assert "batch_refresh model 'written_fail': the target" in output
        assert "output columns changed" in history(project, "star_rebuild")[-1]["reason"]
        assert_contract(project, "star_rebuild")
        assert history(project, "edit_rebuild")[-1]["reason"] == "model changed since the last build"
        assert_contract(project, "edit_rebuild")
        assert "batch_refresh model 'edit_fail': the model changed since its last build" in output
        for case in FAIL_CASES:
            assert actions(project, f"{case}_fail") == ["backfill"]
            assert table_version(project, f"{schema}.{case}_fail") == untouched[case]
            assert state(project, f"{case}_fail")["phase"] == "idle"
        assert "Traceback" not in output

        # additive upstream column the model does not select: a plain replay
        assert actions(project, "additive") == ["backfill", "replay"]
        assert_contract(project, "additive")
        # retention guard
        assert "upstream " + retention in output and "left before" in output
        assert actions(project, "retention") == ["backfill", "replay"]
        # a keyless model's gap is a gap (its append check reads the change feed lazily)
        for case in KEYLESS_GAPS:
            last = history(project, f"{case}_keyless")[-1]
            assert last["action"] == "backfill", (case, last)
            assert expected_gap[case] in last["reason"], (case, last["reason"])
            assert_contract(project, f"{case}_keyless")
        # a NULL affected key of an outer join is no NULL output key
        assert actions(project, "outer") == ["backfill", "replay"]
        assert_contract(project, "outer")
        # a NULL group key that appears in a replay: the inferred key is kept, matched
        # null-safely (the NULL group is a key like any other), and the refresh replays
        assert "batch_refresh model 'nullgroup': bad unique_key" not in output
        assert actions(project, "nullgroup") == ["backfill", "replay"]
        assert history(project, "nullgroup")[-1]["mode"] == "incremental"
        assert_contract(project, "nullgroup")
        # the same from the first build: built with the NULL group, then replayed
        assert actions(project, "nullgroup_first") == ["backfill", "replay"]
        assert_contract(project, "nullgroup_first")
        # a key collision in any chunk fails before the first chunk: target untouched, no
        # lease left, and fixing the upstream lets the next run through
        for model, version in collide_versions.items():
            assert (f"batch_refresh model '{model}': bad unique_key; the target was not touched"
                    in output)
            assert table_version(project, f"{schema}.{model}") == version
            assert state(project, model)["phase"] == "idle"
        project.run_sql(f"delete from {collide} where id = 101")
        run_dbt_and_capture(["run", "--select", "collide", "collide_replace"])
        for model in collide_versions:
            assert actions(project, model) == ["backfill", "replay"]
            assert_contract(project, model)
        written = rows(project, f"describe history {schema}.collide_replace limit 1")[0]
        assert written["operation"] == "WRITE", written["operation"]  # the REPLACE WHERE
        # fixed keys build
        assert actions(project, "nullkeys") == ["backfill"]
        assert_contract(project, "nullkeys")
