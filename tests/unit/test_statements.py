"""What a statement of dbt's writes (sql/statements.py): the names the shared histories forget."""

import pytest

from dbt.adapters.spark_batch_refresh.sql.statements import written_tables


@pytest.mark.parametrize("sql, names", [
    # dbt-spark's table, view, incremental, seed and snapshot statements
    ("/* {\"app\": \"dbt\"} */ create or replace table s.tbl using delta as select * from s.src",
     {"tbl"}),
    ("create table `spark_catalog`.`s`.`t` as select 1", {"t"}),
    ("create or replace view s.v as select * from s.src", {"v"}),
    ("create or replace temporary view t__dbt_tmp as select * from s.src", {"t__dbt_tmp"}),
    ("merge into s.t as DBT_INTERNAL_DEST using t__dbt_tmp as DBT_INTERNAL_SOURCE "
     "on DBT_INTERNAL_SOURCE.id = DBT_INTERNAL_DEST.id when matched then update set *", {"t"}),
    ("insert overwrite table s.t select * from t__dbt_tmp", {"t"}),
    ("insert into s.seed (a, b) values (1, 2), (3, 4)", {"seed"}),
    ("drop table if exists s.a, s.b", {"a", "b"}),
    ("drop view if exists s.v", {"v"}),
    ("alter table s.t rename to s.u", {"t", "u"}),
    ("alter table s.t set tblproperties ('delta.enableChangeDataFeed' = 'true')", {"t"}),
    ("truncate table s.t", {"t"}),
    ("update s.t set v = 1 where id = 2", {"t"}),
    ("delete from s.t where id = 2", {"t"}),
    ("with n as (select 1 as id) insert into s.t select * from n", {"t"}),
    ("insert into s.t select 1; insert into s.u select 2", {"t", "u"}),
    ("with x as (select * from s.t) select count(*) from x", set()),
])
def test_named_writes(sql, names):
    assert written_tables(sql) == frozenset(names)


@pytest.mark.parametrize("sql", [
    "optimize s.t", "vacuum s.t", "call s.proc()", "drop schema s cascade", "create schema s",
    "replace table s.t as select 1",
    "insert overwrite directory '/tmp/x' select 1", "insert into s.t select 1; optimize s.t",
    "alter table s.t change column a comment 'x'", "not sql at all (",
])
def test_what_it_cannot_tell(sql):
    assert written_tables(sql) is None
