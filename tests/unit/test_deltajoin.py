"""Which models replay by delta join, and the SQL of their terms (pure)."""

from __future__ import annotations

import pytest

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.rewrite import change_rows_sql


def _derive(sql: str):
    return dj.derive(st.parse(sql))  # derive reads the tree as st.parse gives it


def _changes(upstream, types):
    return f"SELECT * FROM table_changes('{upstream}', 3, 4) WHERE _change_type IN {types}"


def test_an_inner_join_is_linear_in_every_input():
    joined, why = _derive("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert why is None and joined == dj.DeltaJoin(("raw.c", "raw.o"))
    assert joined.blocker(["raw.c", "raw.o"]) is None


def test_null_supplying_sides_replay_by_transition_or_are_fixed():
    left, _ = _derive("select o.id from raw.o o left join raw.c c on o.cid = c.id "
                      "left join (select p.id from raw.p p join raw.q q on p.q = q.id) pq "
                      "on pq.id = o.pid")
    # one upstream scanned directly and joined by an equality: a transition term
    assert left.outer == {"raw.c"}
    # a join group (subquery) on the NULL-supplying side: fixed
    assert left.fixed == {"raw.p", "raw.q"}
    assert left.blocker(["raw.o", "raw.c"]) is None
    assert "raw.p moved" in left.blocker(["raw.o", "raw.p"])
    right, _ = _derive("select c.id from raw.o o right join raw.c c on o.cid = c.id")
    assert (right.fixed, right.outer) == (frozenset(), {"raw.o"})
    full, _ = _derive("select c.id from raw.o o full join raw.c c on o.cid = c.id")
    assert (full.fixed, full.outer) == (frozenset(), {"raw.o", "raw.c"})
    group, _ = _derive("select c.id from raw.o o join raw.p p on p.id = o.pid "
                       "full join raw.c c on o.cid = c.id")
    assert (group.fixed, group.outer) == ({"raw.o", "raw.p"}, {"raw.c"})
    semi, _ = _derive("select o.id from raw.o o left anti join raw.c c on o.cid = c.id")
    assert semi.outer == {"raw.c"}
    # under a later RIGHT join, the LEFT join's right side supplies NULLs twice
    nested, _ = _derive("select e.id from raw.o o left join raw.c c on o.cid = c.id "
                        "right join raw.e e on e.id = o.eid")
    assert "raw.c" in nested.fixed and "raw.c" not in nested.outer


@pytest.mark.parametrize("on", [
    "using (cid)",                       # no side to name the preserved key by
    "on cid = c.id",                     # unqualified: could be either side's
    "on o.cid <=> c.id",                 # matches NULL keys, which IN does not
    "on c.active",                       # no equality with the preserved side
    "on c.id = c.parent",
])
def test_a_null_supplying_side_without_an_equality_key_is_fixed(on):
    joined, _ = _derive(f"select o.id from raw.o o left join raw.c c {on}")
    assert joined.fixed == {"raw.c"} and not joined.outer


@pytest.mark.parametrize("where, fixed", [
    ("c.tier = 'gold'", False),           # NULL-extended rows fail it: an inner join
    ("c.tier is not null", False),
    ("o.amount > c.lo and o.id > 3", False),
    ("c.tier in ('a', 'b')", False),
    ("c.tier is null", True),             # keeps exactly the NULL-extended rows
    ("coalesce(c.tier, 'x') = 'x'", True),
    ("o.amount in (c.lo, 1)", True),      # c's column only in IN's list
    ("c.tier = 'gold' or o.id > 3", True),
])
def test_a_left_join_whose_where_drops_the_null_extended_rows_is_inner(where, fixed):
    joined, _ = _derive(f"select o.id from raw.o o left join raw.c c "
                        f"on o.amount between c.lo and c.hi where {where}")
    assert (joined.fixed == {"raw.c"}) is fixed and not joined.outer


def test_a_transition_term_restricts_the_preserved_rows_to_the_changed_join_keys():
    sql = ("select o.id, c.x from raw.o o left join raw.c c "
           "on o.cid + 1 = c.id and c.k = o.k and c.active where o.v > 0")
    joined, _ = _derive(sql)
    # the changed join keys, cached first (their size known, Spark broadcasts them)
    assert joined.key_views("_br_s") == {"raw.c": "_br_s_outer0"}
    assert joined.transition_keys(sql, "_br_s", ["raw.o"], _changes) == []
    (view, keys), = joined.transition_keys(sql, "_br_s", ["raw.c", "raw.o"], _changes)
    assert view == "_br_s_outer0"
    assert keys == ("SELECT DISTINCT `id`, `k` FROM (SELECT * FROM table_changes('raw.c', 3, 4) "
                    "WHERE _change_type IN ('insert', 'update_postimage', 'delete', "
                    "'update_preimage')) _br_k")
    plus, minus = joined.terms(sql, _changes, ["raw.c", "raw.o"],
                               new={"raw.c": 5, "raw.o": 9}, old={"raw.c": 4, "raw.o": 8},
                               keys=joined.key_views("_br_s"))
    c_plus, o_plus = plus.split("UNION ALL")
    c_minus, _ = minus.split("UNION ALL")
    restriction = "WHERE o.v > 0 AND (o.cid + 1, o.k) IN (SELECT `id`, `k` FROM _br_s_outer0)"
    for term, version in ((c_plus, 5), (c_minus, 4)):
        flat = term.replace("\n", " ")
        assert f"raw.c VERSION AS OF {version} AS c" in flat
        assert "raw.o VERSION AS OF 8 AS o" in flat  # after raw.c in name order: old
        assert restriction in flat
    # the preserved side's own term is the usual one: its change rows, raw.c at its new version
    assert "TABLE_CHANGES('raw.o'" in o_plus and "raw.c VERSION AS OF 5" in o_plus
    assert " IN (SELECT" not in o_plus


def test_a_full_join_also_keeps_the_moved_sides_changed_and_null_keys():
    sql = "select o.id as oid, c.id as cid from raw.o o full join raw.c c on o.cid = c.id"
    joined, _ = _derive(sql)
    plus, _ = joined.terms(sql, _changes, ["raw.c", "raw.o"], new={"raw.c": 5, "raw.o": 9},
                           old={"raw.c": 4, "raw.o": 8},
                           keys={"raw.c": "kc", "raw.o": "ko"})
    c_term, o_term = plus.split("UNION ALL")
    assert ("WHERE (o.cid IN (SELECT `id` FROM kc) OR c.id IN (SELECT `id` FROM kc) "
            "OR ((o.cid IS NULL) AND (c.id IS NULL)))") in c_term.replace("\n", " ")
    assert ("WHERE (c.id IN (SELECT `cid` FROM ko) OR o.cid IN (SELECT `cid` FROM ko) "
            "OR ((c.id IS NULL) AND (o.cid IS NULL)))") in o_term.replace("\n", " ")


def test_a_full_join_asks_the_other_sides_columns_whether_it_is_null():
    # coalesce(c.id, -1) is -1 on a NULL-extended row: an order whose customer_id is NULL
    # (before or after the change) is unmatched though the expression is not NULL
    sql = ("select coalesce(c.id, -1) as kc, o.id as oid from raw.c c "
           "full join raw.o o on coalesce(c.id, -1) = o.cid")
    joined, _ = _derive(sql)
    plus, _ = joined.terms(sql, _changes, ["raw.o"], new={"raw.c": 5, "raw.o": 9},
                           old={"raw.c": 5, "raw.o": 8}, keys={"raw.o": "ko"})
    assert ("OR ((c.id IS NULL) AND (o.cid IS NULL)))") in plus.replace("\n", " ")
    assert "COALESCE(c.id, -1) IS NULL" not in plus


def test_a_right_join_restricts_its_right_side():
    sql = "select c.id, o.v from raw.o o right join raw.c c on o.cid = c.id"
    joined, _ = _derive(sql)
    plus, minus = joined.terms(sql, _changes, ["raw.o"], new={"raw.c": 5, "raw.o": 9},
                               old={"raw.c": 5, "raw.o": 8}, keys={"raw.o": "k"})
    assert "raw.o VERSION AS OF 9" in plus and "raw.o VERSION AS OF 8" in minus
    assert "WHERE c.id IN (SELECT `cid` FROM k)" in plus


@pytest.mark.parametrize("sql, reason", [
    ("select o.id, count(*) as n from raw.o o join raw.c c on o.cid = c.id group by o.id",
     "aggregates"),
    ("select distinct o.id from raw.o o join raw.c c on o.cid = c.id", "DISTINCT"),
    ("select o.id, row_number() over (partition by c.id order by o.id) as r "
     "from raw.o o join raw.c c on o.cid = c.id", "window"),
    ("select id from raw.o union select id from raw.c", "UNION (distinct)"),
    ("select o.id from raw.o o join raw.o p on o.id = p.id join raw.c c on c.id = o.cid",
     "more than once"),
    ("with x as (select * from raw.o) select x.id from x join x y on x.id = y.id "
     "join raw.c c on c.id = x.cid", "more than once"),
    ("select o.id from raw.o o join raw.c c on o.cid = c.id where o.x in (select x from raw.p)",
     "subquery"),
    ("select * from raw.o union all select * from raw.c", "* under UNION ALL"),
    ("select id from raw.o", "fewer than two"),
])
def test_non_linear_models_say_why(sql, reason):
    joined, why = _derive(sql)
    assert joined is None and reason in why


def test_terms_telescope_pinning_earlier_inputs_new_and_later_ones_old():
    joined, _ = _derive("select o.id, c.region, p.cat from raw.o o join raw.c c on o.cid = c.id "
                        "join raw.p p on p.id = o.pid")
    plus, minus = joined.terms(
        "select o.id, c.region, p.cat from raw.o o join raw.c c on o.cid = c.id "
        "join raw.p p on p.id = o.pid",
        _changes, ["raw.o", "raw.c"], new={"raw.o": 9, "raw.c": 7, "raw.p": 5},
        old={"raw.o": 8, "raw.c": 6, "raw.p": 5})
    first, second = plus.split("UNION ALL")
    # raw.c changes first: raw.o (after it in name order) at its old version
    assert "TABLE_CHANGES('raw.c'" in first and "raw.o VERSION AS OF 8" in first
    # then raw.o changes, with raw.c at its new version; raw.p never moved
    assert "TABLE_CHANGES('raw.o'" in second and "raw.c VERSION AS OF 7" in second
    assert "raw.p VERSION AS OF 5" in first and "raw.p VERSION AS OF 5" in second
    assert "'insert', 'update_postimage'" in plus and "'delete', 'update_preimage'" in minus


def test_a_union_branch_without_the_changed_upstream_is_emptied():
    sql = ("select concat('o', id) as uid from raw.o union all "
           "select concat('p', id) as uid from raw.p where m <> 'void'")
    joined, _ = _derive(sql)
    plus, _ = joined.terms(sql, _changes, ["raw.o"], new={"raw.o": 2, "raw.p": 1},
                           old={"raw.o": 1, "raw.p": 1})
    assert "TABLE_CHANGES('raw.o'" in plus
    assert "raw.p VERSION AS OF 1 WHERE m <> 'void' AND FALSE" in plus.replace("\n", " ")


def test_analysis_offers_a_delta_join_only_for_keyed_linear_models():
    joined = sa.analyze("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id", ["id"])
    assert joined.delta_join is not None and not joined.rowwise
    agg = sa.analyze("select c.region, count(*) as n from raw.o o join raw.c c on o.cid = c.id "
                     "group by c.region")
    assert agg.delta_join is None and agg.delta_join_reason == "aggregates"
    rowwise = sa.analyze("select id from raw.o", ["id"])
    assert rowwise.delta_join is None and rowwise.delta_join_reason is None


def test_explain_names_the_rule_per_upstream():
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh.report import explain
    from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
    from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint

    sql = "select o.id, c.region from raw.o o left join raw.c c on o.cid = c.id"
    ups = [explain.UpstreamInfo(u, UpstreamPoint(2, datetime(2026, 1, 1)), True, 2)
           for u in ("raw.c", "raw.o")]
    text = explain.render("m", BatchRefreshConfig(unique_key=("id",)), sa.analyze(sql, ["id"]),
                          ups, "idle")
    assert "incremental (delta join" in text
    assert "[delta join] raw.o (as o)" in text
    assert "[delta join] raw.c (as c): on the NULL-supplying side of an outer join" in text
    assert "A run in which" not in text
    grouped = ("select o.id, c.region from raw.o o "
               "full join (select * from raw.c) c on o.cid = c.id")
    text = explain.render("m", BatchRefreshConfig(unique_key=("id",)),
                          sa.analyze(grouped, ["id"]), ups, "idle")
    assert "[affected-key recompute, as it is on a NULL-supplying side] raw.c (as" in text
    assert "A run in which raw.c moved recomputes its affected keys" in text
    windowed = ("select o.id, row_number() over (partition by c.id order by o.id) as r "
                "from raw.o o join raw.c c on o.cid = c.id")
    text = explain.render("m", BatchRefreshConfig(unique_key=("id",)),
                          sa.analyze(windowed, ["id"]), ups, "idle")
    assert "no delta join: the model uses a window function" in text or "full recompute" in text


def test_a_star_asks_for_the_change_rows_without_the_feed_columns():
    joined, _ = _derive("select o.*, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert joined.star
    plain, _ = _derive("select o.id, c.region from raw.o o join raw.c c on o.cid = c.id")
    assert not plain.star
    text = change_rows_sql("raw.o", 2, 3, dj.PLUS, ["id", "cid"])
    assert text.startswith("SELECT `id`, `cid` FROM table_changes('raw.o', 2, 3)")
