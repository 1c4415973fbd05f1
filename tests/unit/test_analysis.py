import pytest

from dbt.adapters.spark_batch_refresh import analysis as sa


def test_rowwise_filter_projection():
    a = sa.analyze("select id, upper(s) as s from sch.t where x > 1")
    assert a.rowwise and a.upstreams == ("sch.t",)


def test_cte_names_are_not_upstreams():
    a = sa.analyze("with base as (select id, v from sch.t) select id, v * 2 as v2 from base where v > 0")
    assert a.upstreams == ("sch.t",) and a.rowwise


@pytest.mark.parametrize(
    "sql, reason",
    [
        ("select a.id from s.a join s.b on a.id = b.id", "2 upstream"),
        ("select k, sum(v) from s.t group by k", "aggregates"),
        ("select distinct k from s.t", "DISTINCT"),
        ("select id, row_number() over (order by id) from s.t", "window"),
        ("select id from s.t limit 5", "LIMIT"),
        ("select id, rand() as r from s.t", "non-deterministic"),
        ("select id, current_timestamp() as ts from s.t", "non-deterministic"),
        ("select id from s.t where id in (select id from s.t)", "more than once"),
        ("select id from s.t union all select id from s.t", "more than once"),
    ],
)
def test_fallback_reasons(sql, reason):
    a = sa.analyze(sql)
    assert not a.rowwise
    assert reason in a.reason


def test_unparseable():
    a = sa.analyze("select from where (")
    assert a.shape == "unparsed" and "parser" in a.reason


def test_pin_versions():
    out = sa.pin_versions("with c as (select * from s.t) select * from c join s.u on c.id = u.id",
                          {"s.t": 3, "s.u": 7})
    assert "s.t VERSION AS OF 3" in out and "s.u VERSION AS OF 7" in out
    assert "c VERSION AS OF" not in out


def test_over_changes_keeps_alias_and_pins_others():
    out = sa.over_changes("select o.id from s.t as o where o.v > 1", "s.t", 4, 9)
    assert "table_changes('s.t', 4, 9)" in out.lower() or "TABLE_CHANGES('s.t', 4, 9)" in out
    assert "AS o" in out
    sql = sa.over_changes("select id from s.t", "s.t", 1, 2, change_types=("insert",))
    assert "'insert'" in sql and "'delete'" not in sql


def test_fingerprint_ignores_formatting_but_not_logic():
    parts = {"unique_key": ["id"]}
    a = sa.fingerprint(sa.analyze("select id from s.t where v > 1"), parts)
    b = sa.fingerprint(sa.analyze("SELECT id\n  FROM s.t\n WHERE v > 1"), parts)
    c = sa.fingerprint(sa.analyze("select id from s.t where v > 2"), parts)
    d = sa.fingerprint(sa.analyze("select id from s.t where v > 1"), {"unique_key": ["v"]})
    assert a == b and a != c and a != d
