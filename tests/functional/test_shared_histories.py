"""One dbt invocation reads an upstream's history once: the models over one source share the
read, a child takes its parent's read after the parent's commit, a `table` model built between
them does not make them read the source again (it writes only itself), and a statement of
dbt's that writes the source (here a pre-hook inserting into it) makes the next model read
afresh, so it sees the rows its DAG promises it (storage/delta.py SharedHistories). The
backfills' DESCRIBE DETAIL of each upstream is shared the same way."""

from __future__ import annotations

import re

import pytest

from dbt.adapters.spark_batch_refresh.engine.run_result import TRACE_ENV
from tests.functional.helpers import assert_contract, rows, run_ok, sources_yml

A = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v from {{ source('raw', 'src') }}
"""
B = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v + 1 as w from {{ source('raw', 'src') }} where v >= 0
"""
CHILD = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v * 10 as x from {{ ref('a') }}
"""
# A `table` model built after a and b (dbt-spark drops it and creates it again: no
# file_format), a batch_refresh model over src after it (those statements do not write src:
# its history is still shared), and one over the table.
TBL = """
-- depends_on: {{ ref('a') }} {{ ref('b') }}
{{ config(materialized='table') }}
select id, v from {{ source('raw', 'src') }} where id < 10
"""
LATER = """
-- depends_on: {{ ref('tbl') }}
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v - 1 as u from {{ source('raw', 'src') }}
"""
OVER_TBL = """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, v * 2 as y from {{ ref('tbl') }}
"""
# Runs last (after a, b and later, which read src first); its pre-hook writes src before it
# plans.
HOOKED = """
-- depends_on: {{ ref('a') }} {{ ref('b') }} {{ ref('later') }} {{ ref('over_tbl') }}
{{ config(materialized='batch_refresh', unique_key='id',
          pre_hook="insert into {{ source('raw', 'src') }} select max(id) + 1, 7 from {{ source('raw', 'src') }}") }}
select id, v from {{ source('raw', 'src') }}
"""


class TestSharedHistories:
    @pytest.fixture(scope="class")
    def models(self):
        return {"sources.yml": sources_yml("src"), "a.sql": A, "b.sql": B, "child.sql": CHILD,
                "tbl.sql": TBL, "later.sql": LATER, "over_tbl.sql": OVER_TBL, "hooked.sql": HOOKED}

    def test_one_read_per_invocation_and_hooks_seen(self, project, monkeypatch, tmp_path):
        schema = project.test_schema
        src = f"{schema}.src"
        project.run_sql(f"create table {src} (id int, v int) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {src} select cast(id as int), cast(id as int) from range(20)")
        trace = tmp_path / "trace.tsv"
        monkeypatch.setenv(TRACE_ENV, str(trace))
        run_ok(["run", "--threads", "1"])
        # The backfills read each upstream's DESCRIBE DETAIL (table id, change-feed property)
        # once too: a, b and later share src's, hooked reads it again after its pre-hook's
        # insert (on main each of the four read it).
        details = re.compile(rf"DESCRIBE DETAIL `?{schema}`?\.`?src`?\s*$", re.I)
        first_run = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]
        assert sum(1 for s in first_run if details.search(s)) == 2, first_run

        project.run_sql(f"update {src} set v = v + 100 where id < 3")
        trace.write_text("")
        second = {r.node.name: r.adapter_response for r in run_ok(["run", "--threads", "1"])}
        actions = {n: r.get("action") for n, r in second.items()}
        assert {n: actions[n] for n in ("a", "b", "child", "later", "hooked")} == {
            "a": "replay", "b": "replay", "child": "replay", "later": "replay",
            "hooked": "replay"}, second
        statements = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]

        def reads(relation: str) -> int:
            # every read but a refresh's one-row read of its own target's newest commit
            pattern = re.compile(rf"DESCRIBE HISTORY `?{schema}`?\.`?{relation}`? LIMIT (?!1\b)\d+",
                                 re.I)
            return sum(1 for s in statements if pattern.search(s))
        # a, b and later share one read of src (the table model between them wrote only
        # itself); the pre-hook's insert makes hooked read it again.
        assert reads("src") == 2, statements
        # a's read after its commit serves child: no second read of a.
        assert reads("a") == 1, statements
        # hooked planned after its pre-hook's insert: its target has that row.
        newest = rows(project, f"select max(id) as m from {src}")[0]["m"]
        assert rows(project, f"select max(id) as m from {schema}.hooked")[0]["m"] == newest
        # over_tbl planned after tbl was rebuilt (dropped and created again at v0 by
        # dbt-spark): it rebuilt from the new table, not a no-op over the old one.
        assert actions["over_tbl"] == "backfill", second["over_tbl"]
        assert rows(project, f"select y from {schema}.over_tbl where id = 0")[0]["y"] == 200
        for model in ("a", "b", "child", "later", "over_tbl", "hooked"):
            assert_contract(project, model)

    def test_histories_read_from_the_jvm_equal_describe_history(self, project):
        """The embedded session answers DESCRIBE HISTORY from Delta's log (storage/jvm_history.py):
        the same rows as the SQL, commit metadata and session-clock times included, for the
        target a refresh wrote and its source; a view, a missing table and a non-Delta table are
        left to the SQL and its error."""
        from dbt.adapters.spark_batch_refresh.client.session_cursor import SessionCursor
        from dbt.adapters.spark_batch_refresh.embedded.spark import EmbeddedSpark
        from dbt.adapters.spark_batch_refresh.storage.jvm_history import history_read, read_history

        schema = project.test_schema
        session = EmbeddedSpark._base
        project.run_sql(f"create or replace view {schema}.v_src as select * from {schema}.src")
        project.run_sql(f"create table {schema}.plain (id int) using parquet")
        # In-commit timestamps (a commit's time written in it, not its file's), from creation
        # and turned on later: the history's times are those, where a commit has one.
        project.run_sql(f"create table {schema}.ict using delta tblproperties "
                        f"(delta.enableInCommitTimestamps = true) as select 1 as id")
        project.run_sql(f"create table {schema}.late using delta as select 1 as id")
        project.run_sql(f"insert into {schema}.late values (2)")
        project.run_sql(f"alter table {schema}.late set tblproperties "
                        f"(delta.enableInCommitTimestamps = true)")
        for table in ("ict", "late"):
            project.run_sql(f"insert into {schema}.{table} values (3)")

        def by_sql(sql: str) -> list:  # as the adapter's cursor returns them (session clock)
            cursor = SessionCursor(session)
            cursor.execute(sql)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

        metadata = False
        for relation, limit in ((f"{schema}.a", 20), (f"`{schema}`.`src`", 20),
                                (f"spark_catalog.{schema}.hooked", 20), (f"{schema}.a", 2),
                                (f"{schema}.ict", 20), (f"{schema}.late", 20)):
            sql = f"DESCRIBE HISTORY {relation} LIMIT {limit}"
            found = read_history(session, history_read(sql))
            expected = by_sql(sql)
            assert found is not None and len(found) == len(expected) > 1, relation
            for got, want in zip(found, expected):
                # Delta's JSON leaves out the null entries of a map (CREATE TABLE's description)
                want["operationParameters"] = {k: v for k, v in
                                               (want["operationParameters"] or {}).items()
                                               if v is not None}
                assert got == want, (relation, got, want)
            metadata = metadata or any(r["userMetadata"] for r in found)
        assert metadata  # a refresh's commit metadata came through
        for relation in ("v_src", "nope", "plain"):
            assert read_history(session, history_read(
                f"DESCRIBE HISTORY {schema}.{relation} LIMIT 1")) is None, relation

        # SHOW VIEWS from the session catalog (storage/jvm_views.py): the SQL's rows, the
        # session's temporary views included; a missing database left to the SQL's error.
        from dbt.adapters.spark_batch_refresh.storage.jvm_views import read_views, views_read

        session.sql("create or replace temporary view t_src as select 1 as id")
        sql = f"SHOW VIEWS IN `{schema}`"
        rows = read_views(session, views_read(sql))
        key = lambda r: (r["namespace"], r["viewName"])  # noqa: E731
        assert rows is not None and any(r["viewName"] == "v_src" for r in rows)
        assert any(r["isTemporary"] and r["viewName"] == "t_src" for r in rows)
        assert sorted(rows, key=key) == sorted(by_sql(sql), key=key)
        assert read_views(session, "no_such_database") is None
        assert read_views(session, "global_temp") is None  # temporary: left to the SQL

        # DESCRIBE QUERY from the analyser (storage/jvm_describe.py): the SQL's rows for every
        # type, char/varchar, comments, a pinned Delta read and duplicate names; a statement
        # that is not a query is never run, and a wide or failing query is left to the SQL.
        from dbt.adapters.spark_batch_refresh.storage.jvm_describe import (
            MAX_COLUMNS, describe_read, read_describe)

        project.run_sql(f"create table {schema}.typed (c char(5) comment 'a char', "
                        f"vc varchar(10), d decimal(38,4)) using delta")
        project.run_sql(f"create table {schema}.collated (s string collate UTF8_LCASE) using parquet")
        queries = [
            "select 1 as i, 1L as l, 1.0 as dec, 1.0d as dbl, cast(1 as float) f, "
            "cast(1 as tinyint) t, cast(1 as smallint) sm, 'x' s, true b, date'2020-01-01' d, "
            "timestamp'2020-01-01 00:00:00' ts, timestamp_ntz'2020-01-01 00:00:00' tsn, x'01' bin, "
            "array(1, 2) arr, map('a', 1) m, named_struct('a', 1, 'b `q', array(named_struct("
            "'c', 1.5))) st, interval 1 day iv, interval '1-2' year to month ym, "
            "cast(null as void) nl, parse_json('1') v",
            f"select *, upper(c) as uc, struct(c, vc) as cv from {schema}.typed",
            f"select s, count(*) as n from {schema}.collated group by s",
            f"select id, v from {schema}.src version as of 1 -- a trailing comment",
            "select 1 as a, 2 as a",
            "with x as (select 1 as k) select k from x",
        ]
        for query in queries:
            sql = f"DESCRIBE QUERY {query}"
            assert describe_read(sql) == query
            assert read_describe(session, query) == by_sql(sql), query
        wide = "select " + ", ".join(f"{n} as c{n}" for n in range(MAX_COLUMNS + 1))
        for query in (wide, f"select nope from {schema}.src",
                      f"insert into {schema}.src values (-1, -1)"):
            assert read_describe(session, query) is None, query
        assert project.run_sql(f"select count(*) from {schema}.src where id = -1",
                               fetch="one")[0] == 0  # the insert was not run

