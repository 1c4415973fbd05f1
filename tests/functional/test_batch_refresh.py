"""The batch_refresh materialization end to end on embedded Spark + Delta, dbt in-process."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from dbt.tests.util import run_dbt_and_capture, write_file

from dbt.adapters.spark_batch_refresh.engine.run_result import TRACE_ENV

from tests.functional.helpers import (
    actions,
    assert_contract,
    history,
    rows,
    run_fails,
    run_ok,
    sources_yml,
    state,
    table_version,
)

SOURCES = sources_yml("src_orders")

ROWWISE = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, customer, amount * 2 as amount2, upper(status) as status
from {{ source('raw', 'src_orders') }}
where status <> 'hidden'
"""

KEYLESS = """
{{ config(materialized='batch_refresh') }}
select id, amount from {{ source('raw', 'src_orders') }} where amount > 0
"""

CHAINED = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, customer, amount2 + 1 as amount3 from {{ ref('orders_rw') }} where status = 'OK'
"""

AGGREGATE = """
{{ config(materialized='batch_refresh', unique_key='customer') }}
select customer, count(*) as n, sum(amount2) as total from {{ ref('orders_rw') }} group by customer
"""

ALL = ["orders_rw", "orders_keyless", "orders_chained", "customer_totals"]

# The consistency check users attach (issue 19.8): it must pass after every refresh and fail,
# naming the rows, once a target is written by hand.
CONSISTENT = """
version: 2
models:
  - name: orders_rw
    data_tests: [batch_refresh_consistent]
  - name: customer_totals
    data_tests: [batch_refresh_consistent]
"""


def create_source(project, cdf: bool = True) -> str:
    relation = f"{project.test_schema}.src_orders"
    project.run_sql(
        f"create table {relation} (id int, customer string, amount int, status string) using delta "
        f"tblproperties (delta.enableChangeDataFeed = {'true' if cdf else 'false'})"
    )
    project.run_sql(
        f"insert into {relation} values (1, 'a', 10, 'ok'), (2, 'a', 20, 'ok'), (3, 'b', 30, 'ok'),"
        f" (4, 'b', 40, 'hidden'), (5, 'c', 50, 'ok'), (6, 'c', 60, 'ok')"
    )
    return relation


class TestBackfillThenReplay:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": SOURCES,
            "orders_rw.sql": ROWWISE,
            "orders_keyless.sql": KEYLESS,
            "orders_chained.sql": CHAINED,
            "customer_totals.sql": AGGREGATE,
            "consistent.yml": CONSISTENT,
        }

    def test_lifecycle(self, project, monkeypatch, tmp_path):
        src = create_source(project)
        schema = project.test_schema

        # 1. first run: snapshot backfill of every model, target is Delta with CDF on
        trace = tmp_path / "trace.tsv"
        monkeypatch.setenv(TRACE_ENV, str(trace))
        run_ok(["run"])
        monkeypatch.delenv(TRACE_ENV)
        for model in ALL:
            assert actions(project, model) == ["backfill"]
            assert_contract(project, model)
        # No target yet: every model is written straight from the model as a table is,
        # nothing cached first (before: from a cached staging view, the keyless model until
        # 56f553b, the keyed ones until session 43), a keyed model's checks in the write's
        # SELECT, its rows counted by the write (every source row has amount > 0).
        statements = trace.read_text().splitlines()
        assert not [line for line in statements if "\tCACHE " in line], statements
        for model, written in (("orders_keyless", 6), ("orders_rw", 5), ("customer_totals", 3)):
            (create,) = [line for line in statements
                         if "CREATE OR REPLACE TABLE" in line
                         and line.split(" USING ", 1)[0].strip("`").endswith(model)]
            assert "_br_staging" not in create and " FROM ( " in create, create
            assert history(project, model)[0]["rows_inserted"] == written, model
        detail = rows(project, f"describe detail {schema}.orders_rw")[0]
        assert detail["format"] == "delta"
        assert detail["properties"]["delta.enableChangeDataFeed"] == "true"

        # 2. nothing changed upstream: a no-op that touches no target
        versions = {m: table_version(project, f"{schema}.{m}") for m in ALL}
        results = run_ok(["run"])
        assert {r.adapter_response["action"] for r in results} == {"noop"}
        assert versions == {m: table_version(project, f"{schema}.{m}") for m in ALL}
        assert all(len(history(project, m)) == 1 for m in ALL)

        # the state table is a cache of the targets' logs: a row deleted by hand is shown from
        # the log by status, and written again by the model's next refresh (step 3)
        project.run_sql(f"delete from {schema}_batch_refresh.batch_refresh_state "
                        f"where model_id = 'model.test.orders_rw'")
        _, report = run_dbt_and_capture(
            ["run-operation", "batch_refresh_status", "--args", "{model: orders_rw, history: 0}"])
        (line,) = [x for x in report.splitlines() if x.strip().startswith("orders_rw")]
        assert "idle" in line and "(backfill)" in line and "never" not in line, line

        # 3. inserts only: row-wise replay, keyless append, chained replay, aggregate replay
        project.run_sql(f"insert into {src} values (7, 'd', 70, 'ok'), (8, 'a', 80, 'hidden')")
        run_ok(["run"])
        assert actions(project, "orders_rw")[-1] == "replay"
        assert actions(project, "orders_keyless")[-1] == "replay"
        assert actions(project, "orders_chained")[-1] == "replay"
        assert actions(project, "customer_totals")[-1] == "replay"
        for model in ALL:
            assert_contract(project, model)
        assert history(project, "orders_keyless")[-1]["rows_inserted"] == 2
        assert state(project, "orders_rw")["last_action"] == "replay"  # the deleted row is back
        # one Delta commit per refresh: the target's own, carrying the refresh in its log
        assert table_version(project, f"{schema}.orders_rw") == versions["orders_rw"] + 1

        # 4. updates, deletes, a key change, rows leaving and entering the filter
        project.run_sql(f"update {src} set amount = amount + 1 where id = 1")
        project.run_sql(f"delete from {src} where id = 2")
        project.run_sql(f"update {src} set id = 30 where id = 3")
        project.run_sql(f"update {src} set status = 'hidden' where id = 5")
        project.run_sql(f"update {src} set status = 'ok' where id = 4")
        project.run_sql(f"update {src} set amount = amount where id = 6")  # changes nothing
        run_ok(["run", "--exclude", "orders_keyless"])
        last = history(project, "orders_rw")[-1]
        assert last["action"] == "replay"
        # only the touched keys were recomputed: 1, 2, 3, 30, 4, 5 (not 6, 7, 8)
        assert last["staged_rows"] == 6
        assert (last["rows_inserted"], last["rows_updated"], last["rows_deleted"]) == (2, 1, 3)
        assert actions(project, "orders_chained")[-1] == "replay"
        for model in ["orders_rw", "orders_chained", "customer_totals"]:
            assert_contract(project, model)
        # the target's own change feed carries only real changes: no update whose pre- and
        # post-image are equal (the no-op update of id 6 upstream left no trace)
        for model in ["orders_rw", "customer_totals"]:
            assert equal_updates(project, f"{schema}.{model}") == 0, model
        # the aggregate's affected groups (a, b, c) recomputed, none gone: replaced by key in
        # one REPLACE USING (a WRITE commit, not a MERGE; no read of the target before it),
        # counted exactly from its metrics
        totals = history(project, "customer_totals")[-1]
        assert (totals["rows_inserted"], totals["rows_updated"], totals["rows_deleted"]) == (
            0, 3, 0), totals
        last = rows(project, f"describe history {schema}.customer_totals limit 1")[0]
        assert (last["operation"], dict(last["operationParameters"]).get("replaceUsingCols")) \
            == ("WRITE", "(customer)"), last

        # 4a. rows move between keys of one group and its totals stay: the group is
        # recomputed, found equal to its target row and not rewritten (no change rows)
        before = table_version(project, f"{schema}.customer_totals")
        project.run_sql(f"update {src} set id = 31 where id = 30")
        run_ok(["run", "--exclude", "orders_keyless"])
        totals = history(project, "customer_totals")[-1]
        assert (totals["action"], totals["staged_rows"]) == ("replay", 1), totals
        assert (totals["rows_inserted"], totals["rows_updated"], totals["rows_deleted"]) == (
            0, 0, 0), totals
        assert table_version(project, f"{schema}.customer_totals") == before + 1
        (feed,) = rows(project, f"select count(*) as n from table_changes("
                                f"'{schema}.customer_totals', {before + 1}, {before + 1})")
        assert feed["n"] == 0, "an unchanged group was rewritten"
        assert_contract(project, "customer_totals")
        # users can ask for the contract themselves
        run_ok(["test", "--select", "orders_rw", "customer_totals"])

        # 4b. a model edit that leaves every output row as it was: the rebuild of the keyed
        # target writes no change rows (a MERGE, not a replaced table), so downstream models
        # see an upstream commit without changes
        write_file(ROWWISE.replace("upper(status)", "upper(trim(status))"),
                   project.project_root, "models", "orders_rw.sql")
        (res,) = run_ok(["run", "--select", "orders_rw"])
        assert (res.adapter_response["action"], res.adapter_response["reason"]) == (
            "backfill", "model changed since the last build"), res.adapter_response
        rebuilt = table_version(project, f"{schema}.orders_rw")
        (feed,) = rows(project, f"select count(*) as n from "
                                f"table_changes('{schema}.orders_rw', {rebuilt}, {rebuilt})")
        assert feed["n"] == 0, "a rebuild that changed nothing published change rows"
        assert_contract(project, "orders_rw")

        # 5. the keyless model cannot apply updates/deletes by key: under `auto` that refresh
        # recomputes in full and says why (it failed the run before session 53, where a
        # `table` builds); under refresh_mode='incremental' one clear error, target untouched
        (res,) = run_ok(["run", "--select", "orders_keyless"])
        assert (res.adapter_response["action"], res.adapter_response["mode"]) in (
            ("full", "full"), ("overwrite", "full")), res.adapter_response
        assert "has no unique_key" in res.adapter_response["fallback_reason"], res.adapter_response
        # one INSERT OVERWRITE either way: the counts say so (they said `+6 ~0 -0` before
        # session 66, as if six rows were added to the old ones)
        assert res.adapter_response["rewritten"] is True, res.adapter_response
        assert res.adapter_response["_message"].endswith(" rows rewritten") or \
            res.adapter_response["action"] == "overwrite", res.adapter_response
        assert_contract(project, "orders_keyless")
        # an insert that reads its own table is no blind append in the history (nor is an
        # OPTIMIZE): the change feed is counted, finds inserts alone, and the model appends
        project.run_sql(f"insert into {src} select 9, 'e', 90, 'ok' from {src} where id = 1")
        (res,) = run_ok(["run", "--select", "orders_keyless"])
        assert (res.adapter_response["action"], res.adapter_response["mode"]) == (
            "replay", "incremental"), res.adapter_response
        assert history(project, "orders_keyless")[-1]["rows_inserted"] == 1
        assert_contract(project, "orders_keyless")
        write_file(KEYLESS.replace("materialized='batch_refresh'",
                                   "materialized='batch_refresh', refresh_mode='incremental'"),
                   project.project_root, "models", "orders_keyless.sql")
        project.run_sql(f"update {src} set amount = amount + 1 where id = 6")
        before = table_version(project, f"{schema}.orders_keyless")
        output = run_fails(["run", "--select", "orders_keyless"])
        assert "batch_refresh model 'orders_keyless'" in output
        assert "unique_key" in output and "refresh_mode='full'" in output
        assert "Traceback" not in output
        assert table_version(project, f"{schema}.orders_keyless") == before
        assert state(project, "orders_keyless")["phase"] == "idle"
        assert_contract(project, "orders_keyless")

        # 6. --full-refresh: a new snapshot backfill, here the fix for the keyless model
        run_ok(["run", "--full-refresh"])
        for model in ALL:
            assert actions(project, model)[-1] == "backfill"
            assert_contract(project, model)

        # 7. a target written by hand: the consistency test fails with one failure per
        # differing row, and batch_refresh_verify names them
        project.run_sql(f"update {schema}.orders_rw set amount2 = -1 where id = 1")
        _, output = run_dbt_and_capture(["test", "--select", "orders_rw"], expect_pass=False)
        assert "Got 2 results" in output
        output = run_fails(["run-operation", "batch_refresh_verify", "--args", "{model: orders_rw}"])
        assert "1 rows only in the target, 1 rows only in the model" in output
        assert "only in target: id=1, customer=a, amount2=-1" in output
        assert "only in model: id=1, customer=a, amount2=22" in output
        assert "Traceback" not in output


GATED = """
{{ config(materialized='batch_refresh', unique_key='id', refresh_interval='2h') }}
select id, amount from {{ source('raw', 'src_orders') }}
"""


def equal_updates(project, relation: str) -> int:
    """Updates in `relation`'s change feed whose pre- and post-image are the same row."""
    cols = ", ".join(f"`{r['col_name']}`" for r in rows(project, f"describe {relation}")
                     if r["col_name"] and not r["col_name"].startswith("#"))
    changes = f"table_changes('{relation}', 0)"
    return rows(project, (
        f"select count(*) as n from (select _commit_version, {cols} from {changes} "
        f"where _change_type = 'update_preimage' intersect all "
        f"select _commit_version, {cols} from {changes} where _change_type = 'update_postimage')"
    ))[0]["n"]


class TestIntervalGate:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "gated.sql": GATED}

    def test_gate(self, project, monkeypatch):
        src = create_source(project)
        run_ok(["run"])
        target = f"{project.test_schema}.gated"
        version = table_version(project, target)
        consumed_at = rows(project, f"describe history {src} limit 1")[0]["timestamp"]

        project.run_sql(f"insert into {src} values (9, 'z', 90, 'ok')")
        # Clock just after the change: consumed data is younger than 2h, the gate stays closed.
        results = run_ok(["run"])
        response = results[0].adapter_response
        assert response["action"] == "skip"
        # due 2h after the commit time of the upstream version the model consumed
        assert datetime.fromisoformat(response["next_due"]) == consumed_at + timedelta(hours=2)
        assert "gate closed" in response["_message"] and "next due" in response["_message"]
        assert table_version(project, target) == version
        assert actions(project, "gated") == ["backfill"]
        assert_contract(project, "gated")

        # batch_refresh_force bypasses the gate
        run_ok(["run", "--vars", "{batch_refresh_force: true}"])
        assert actions(project, "gated") == ["backfill", "replay"]
        assert_contract(project, "gated")

        # the gate opens once the consumed data is 2h old (a fixed clock, not a sleep)
        project.run_sql(f"update {src} set amount = 0 where id = 1")
        monkeypatch.setenv("BATCH_REFRESH_NOW", "2999-01-01T00:00:00")
        run_ok(["run"])
        assert actions(project, "gated") == ["backfill", "replay", "replay"]
        assert_contract(project, "gated")


class TestBadInput:
    @pytest.fixture(scope="class")
    def models(self):
        base = "select id, amount from {{ source('raw', 'src_orders') }}"
        return {
            "sources.yml": SOURCES,
            "bad_format.sql": "{{ config(materialized='batch_refresh', unique_key='id', file_format='parquet') }}\n" + base,
            "bad_interval.sql": "{{ config(materialized='batch_refresh', unique_key='id', refresh_interval='soon') }}\n" + base,
            "bad_mode.sql": "{{ config(materialized='batch_refresh', unique_key='id', refresh_mode='sometimes') }}\n" + base,
            "bad_many.sql": "{{ config(materialized='batch_refresh', unique_key='id', refresh_mode='x', on_model_change='y') }}\n" + base,
        }

    @pytest.mark.parametrize(
        "model, expected",
        [
            ("bad_format", ["`file_format` is 'parquet'", "file_format='delta'"]),
            ("bad_interval", ["`refresh_interval` is 'soon'", "'15m'"]),
            ("bad_mode", ["`refresh_mode` is 'sometimes'", "'auto', 'incremental', 'full'"]),
            ("bad_many", ["`refresh_mode` is 'x'", "`on_model_change` is 'y'"]),
        ],
    )
    def test_config_errors(self, project, model, expected):
        if not rows(project, f"show tables in {project.test_schema} like 'src_orders'"):
            create_source(project)
        output = run_fails(["run", "--select", model])
        assert f"batch_refresh model '{model}': invalid config" in output
        for text in expected:
            assert text in output
        assert "Traceback" not in output
        assert not rows(project, f"show tables in {project.test_schema} like '{model}'")


class TestUpstreamWithoutChangeFeed:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sources.yml": SOURCES,
            "no_cdf.sql": "{{ config(materialized='batch_refresh', unique_key='id') }}\n"
            "select id, amount from {{ source('raw', 'src_orders') }}",
        }

    def test_error_prints_the_fix(self, project):
        create_source(project, cdf=False)
        # PySpark's own loggers of converted SQL errors: a failed first run (its state-table
        # probe fails by design, then the user error) must leave the report to dbt, not put a
        # JSON stack trace per error on the console (before the fix: the probe's record).
        from pyspark.logger import PySparkLogger

        records: list = []
        collect = logging.Handler()
        collect.emit = records.append  # type: ignore[method-assign]
        loggers = [PySparkLogger.getLogger(name)
                   for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
        for log in loggers:
            log.addHandler(collect)
        try:
            output = run_fails(["run"])
        finally:
            for log in loggers:
                log.removeHandler(collect)
        assert [r.getMessage()[:80] for r in records] == []
        assert "batch_refresh model 'no_cdf'" in output
        assert (
            f"ALTER TABLE {project.test_schema}.src_orders SET TBLPROPERTIES "
            f"(delta.enableChangeDataFeed = true)" in output
        )
        assert not rows(project, f"show tables in {project.test_schema} like 'no_cdf'")


DBT_SPARK_CONFIGS = """
{{ config(
    materialized='batch_refresh',
    unique_key='id',
    partition_by=['customer'],
    tblproperties={'delta.appendOnly': 'false', 'my.owner': 'data-eng'},
    location_root=var('location_root'),
    persist_docs={'relation': true},
    pre_hook="insert into {{ target.schema }}.hook_log values ('pre')",
    post_hook="insert into {{ target.schema }}.hook_log values ('post')",
) }}
select id, customer, amount from {{ source('raw', 'src_orders') }}
"""

DOCS = """
version: 2
models:
  - name: configured
    description: "A batch_refresh model with dbt-spark configs"
"""


class TestDbtSparkConfigs:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": SOURCES, "configured.sql": DBT_SPARK_CONFIGS, "docs.yml": DOCS}

    @pytest.fixture(scope="class")
    def project_config_update(self, tmp_path_factory):
        return {"vars": {"location_root": str(tmp_path_factory.mktemp("locations"))}}

    def test_configs_apply(self, project):
        create_source(project)
        project.run_sql(f"create table {project.test_schema}.hook_log (event string) using delta")
        run_ok(["run"])
        detail = rows(project, f"describe detail {project.test_schema}.configured")[0]
        assert list(detail["partitionColumns"]) == ["customer"]
        assert detail["properties"]["my.owner"] == "data-eng"
        assert detail["properties"]["delta.enableChangeDataFeed"] == "true"
        assert "locations" in detail["location"]
        assert detail["description"] == "A batch_refresh model with dbt-spark configs"
        events = sorted(r["event"] for r in rows(project, f"select * from {project.test_schema}.hook_log"))
        assert events == ["post", "pre"]
        assert_contract(project, "configured")
        project.run_sql(f"update {project.test_schema}.src_orders set amount = 1 where id = 1")
        run_ok(["run"])
        assert actions(project, "configured") == ["backfill", "replay"]
        assert_contract(project, "configured")
