"""Affected-key analysis on SQL text alone (no Spark): shapes that replay, and fallback reasons."""

import re

import pytest

from dbt.adapters.spark_batch_refresh.sql import analysis as sa

ORDERS_BY_CUSTOMER = """
with pay as (
  select order_id, sum(amount) as paid from s.payments group by order_id
), ord as (
  select id, customer_id from s.orders where status <> 'cancelled'
)
select ord.customer_id, sum(pay.paid) as paid, count(distinct ord.id) as orders
from ord join pay on pay.order_id = ord.id
group by ord.customer_id
having sum(pay.paid) > 0
"""


def paths(sql, key=()):
    a = sa.analyze(sql, key)
    assert a.incremental_reason is None, a.incremental_reason
    return {p.occurrence.upstream: p for p in a.key_paths}


def test_rowwise_needs_no_join():
    p = paths("select id, v * 2 as v2 from s.t where v > 0", ("id",))
    assert list(p) == ["s.t"] and p["s.t"].joined == ()


def test_cte_chain_join_and_aggregate_infer_group_key():
    a = sa.analyze(ORDERS_BY_CUSTOMER)
    assert a.upstreams == ("s.orders", "s.payments")
    assert a.inferred_key == ("customer_id",) and a.key == ("customer_id",)
    assert a.incremental_reason is None
    by = {p.occurrence.upstream: p for p in a.key_paths}
    # payments changes reach the customer key only through orders
    assert by["s.payments"].joined == ("s.orders",)
    assert "HAVING dropped" in by["s.payments"].notes


@pytest.mark.parametrize("sql, key", [
    ("select k, sum(v) as s, count(*) as n, min(v) as lo, max(v) as hi, avg(v) as a, "
     "count(distinct w) as d from s.t group by k", ("k",)),
    ("select t.k, u.name, sum(t.v) as s from s.t join s.u on t.k = u.k group by t.k, u.name",
     ("k", "name")),
    ("select upper(k) as uk, sum(v) as s from s.t group by upper(k)", ("uk",)),
    ("select k, sum(v) as s from s.t group by 1", ("k",)),
    ("select distinct a, b from s.t", ("a", "b")),
    # passed through the one CTE or subquery a plain SELECT reads (dbt's `select * from final`)
    ("with final as (select k, sum(v) as s from s.t group by k) select * from final", ("k",)),
    ("select k2, s from (select k as k2, sum(v) as s from s.t group by k) t where s > 0",
     ("k2",)),
    ("with a as (select k, sum(v) as s from s.t group by k), b as (select * from a where s > 1) "
     "select b.k as key, s, rank() over (order by s) as r from b", ("key",)),
    ("with a as (select k, sum(v) as s from s.t group by k) "
     "select a.k, b.x from a join s.u b on a.k = b.k", ()),
    ("with a as (select k, v from s.t) select * from a", ()),
    ("with t as (select * from t) select * from t", ()),  # the inner t is a table
    ("with a as (select k, sum(v) as s from s.t group by k) select s from a", ()),
    ("with a as (select k, sum(v) as s from s.t group by k) select sum(s) as t from a", ()),
    # a generator makes several rows of one group or row: no key, at either level
    ("select k, explode(collect_list(v)) as x from s.t group by k", ()),
    ("select k, posexplode_outer(collect_list(v)) from s.t group by k", ()),
    ("select k, inline_outer(collect_list(struct(v))) from s.t group by k", ()),
    ("select k, stack(2, min(v), max(v)) from s.t group by k", ()),
    ("with a as (select k, collect_list(v) as vs from s.t group by k) "
     "select k, explode(vs) as v from a", ()),
    ("select k, (select max(x) from (select explode(array(1, 2)) as x)) as m, sum(v) as s "
     "from s.t group by k", ("k",)),  # the generator is the scalar subquery's
    ("select distinct k, explode(vs) as v from s.t", ("k", "v")),
])
def test_inferred_keys(sql, key):
    assert sa.analyze(sql).inferred_key == key


def test_a_key_passed_through_final_replays():
    a = sa.analyze("with agg as (select k, sum(v) as s from s.t group by k), "
                   "final as (select * from agg where s > 0) select * from final")
    assert a.key == ("k",) and a.incremental_reason is None, a.incremental_reason


def test_no_key_inferred_without_group_by():
    a = sa.analyze("select a.id, b.v from s.a a join s.b b on a.id = b.id")
    assert a.inferred_key == () and "no unique_key" in a.incremental_reason


def test_four_way_join():
    sql = ("select o.id, c.region, p.amount, d.label from s.o o join s.c c on o.cid = c.id "
           "left join s.p p on p.oid = o.id left join s.d d on d.id = o.did")
    p = paths(sql, ("id",))
    assert set(p) == {"s.o", "s.c", "s.p", "s.d"}
    assert any("made inner" in n for n in p["s.p"].notes)
    assert not any("made inner" in n for n in p["s.o"].notes)


def test_left_join_right_side_change_becomes_inner_and_keeps_its_where():
    """A change row joined to the other sources is the model's own row, and its NULL-extended
    twin is the second branch's: the WHERE judges both exactly, so it stays."""
    sql = "select a.id, b.v from s.a a left join s.b b on a.id = b.id where b.id is null"
    out = sa.affected_keys_sql(sql, ["id"], {"s.b": (3, 5)}, {"s.a": 9, "s.b": 5}, {})
    assert len(out) == 1
    matched, extended = out[0].upper().split(" UNION ALL ")
    assert "LEFT JOIN" not in matched and "WHERE B.ID IS NULL" in matched
    assert "TABLE_CHANGES('S.B', 3, 5)" in matched and "S.A VERSION AS OF 9" in matched
    # the NULL-extended rows: the preserved rows matching a change row, the changed side empty
    assert "LEFT SEMI JOIN (SELECT * FROM TABLE_CHANGES('S.B', 3, 5)) AS _BR_M ON A.ID = _BR_M.ID" in extended
    assert "WHERE FALSE) AS B ON A.ID = B.ID" in extended and "WHERE B.ID IS NULL" in extended


def test_comma_joins_keep_their_conditions_when_the_null_supplying_side_moves():
    """TPC-DS Q40's form: the joins' conditions are in the WHERE; dropping it (as the walk did
    for a change on an outer join's NULL-supplying side) made the key query a cross product
    (117 s for a 1 s table in tests/tpcds/diff.py --queries 40)."""
    sql = ("select w.state, i.item, sum(s.price - coalesce(r.refund, 0)) as total "
           "from s.sales s left join s.returns r on s.order_no = r.order_no, s.w w, s.i i "
           "where s.wid = w.id and s.iid = i.id and i.price between 1 and 2 "
           "group by w.state, i.item")
    out = sa.affected_keys_sql(sql, ["state", "item"], {"s.returns": (3, 5)},
                               {"s.sales": 9, "s.returns": 5, "s.w": 2, "s.i": 4}, {})
    for branch in out[0].upper().split(" UNION ALL "):
        assert "S.WID = W.ID AND S.IID = I.ID AND I.PRICE BETWEEN 1 AND 2" in branch


ITEM_KEY = ("coalesce(concat('i:', cast(s.i_id as string)), "
            "concat('o:', cast(o.o_id as string))) as k")


@pytest.mark.parametrize("null_side", [
    "left join (select * from src.items where qty > 0) s on s.o_id = o.o_id",
    "left join src.items s using (o_id)",
    "left join src.items s on s.o_id = o.o_id and s.qty > 0",
    "full join (select * from src.items) s on s.o_id = o.o_id",
    # made inner, a LEFT OUTER JOIN kept its OUTER and read `OUTER JOIN` (TPC-DS Q72)
    "left outer join src.items s on s.o_id = o.o_id",
    "full outer join src.items s on s.o_id = o.o_id",
])
def test_outer_join_key_read_from_the_null_side_gets_its_null_extended_rows(null_side):
    """Issue 31: an order gaining its first item (or losing its last) unmakes (makes) its
    NULL-extended row, whose key reads the items side as NULL."""
    sql = f"select {ITEM_KEY}, o.o_id from src.orders o {null_side}"
    analysis = sa.analyze(sql, ["k"])
    assert analysis.incremental_reason is None
    out = sa.affected_keys_sql(sql, ["k"], {"src.items": (3, 4)}, {"src.orders": 7,
                                                                    "src.items": 4}, {})
    assert len(out) == 1 and " UNION ALL " in out[0]
    extended = out[0].split(" UNION ALL ")[1]
    assert "LEFT SEMI JOIN" in extended and "WHERE FALSE" in extended
    assert not re.search(r"(?<!LEFT )(?<!RIGHT )(?<!FULL )OUTER JOIN", out[0]), out[0]


@pytest.mark.parametrize("sql,reason", [
    (f"select {ITEM_KEY} from src.orders o left join (src.items s join src.prods p "
     "on p.p_id = s.p_id) on s.o_id = o.o_id", "parenthesised join group"),
    ("select coalesce(a.id, b.id, c.id) as k from s.a a full join s.b b on a.id = b.id "
     "full join s.c c on c.id = coalesce(a.id, b.id)", "more than one outer join"),
    ("select coalesce(a.id, b.id, c.id) as k from s.a a join s.b b on a.id = b.id "
     "right join s.c c on c.x = b.x", "does not relate"),
])
def test_outer_join_shapes_that_cannot_be_bounded_fall_back(sql, reason):
    analysis = sa.analyze(sql, ["k"])
    assert reason in (analysis.incremental_reason or "")


def test_two_windows_without_a_common_partition_fall_back():
    """Issue 31: the whole-partition rewrite built `WHERE ` with no condition and raised a
    ParseError out of analyze()."""
    analysis = sa.analyze("select k, m, p, v, rank() over (partition by m order by v desc) as r, "
                          "sum(v) over (partition by p) as tot from db.t", ["k"])
    assert "no PARTITION BY column in common" in analysis.incremental_reason


def test_anti_join_and_not_exists_flip():
    sql = ("select a.id from s.a a left anti join s.b b on a.id = b.id "
           "where not exists (select 1 from s.c c where c.id = a.id)")
    out_b = sa.affected_keys_sql(sql, ["id"], {"s.b": (1, 2)}, {}, {})[0].upper()
    assert "SEMI JOIN" in out_b
    out_c = sa.affected_keys_sql(sql, ["id"], {"s.c": (1, 2)}, {}, {})[0].upper()
    assert "NOT EXISTS" not in out_c and "EXISTS" in out_c


def test_not_in_reads_the_changed_values_or_every_row_when_a_null_changed():
    sql = ("select a.id from s.a a where a.ok and "
           "a.x not in (select b.v as w from s.b b where b.k = a.k and b.live)")
    assert sa.analyze(sql, ("id",)).incremental_reason is None
    through_b = sa.affected_keys_sql(sql, ["id"], {"s.b": (1, 2)}, {"s.a": 5}, {})[0]
    changes = "(SELECT * FROM TABLE_CHANGES('s.b', 1, 2)) AS b"
    assert (f"WHERE a.ok AND (a.x IN (SELECT b.v AS w FROM {changes} WHERE b.k = a.k AND b.live) "
            f"OR EXISTS(SELECT 1 FROM {changes} WHERE (b.k = a.k AND b.live) AND b.v IS NULL) "
            "OR a.x IS NULL)") in through_b, through_b
    through_a = sa.affected_keys_sql(sql, ["id"], {"s.a": (1, 2)}, {"s.b": 5}, {"s.b": 5})[0]
    assert "NOT a.x IN (SELECT b.v AS w FROM s.b VERSION AS OF 5 AS b" in through_a


def test_union_branches_map_unnamed_columns_by_position():
    # the second branch's columns have no names: its sum(qty) made the key k partial too
    # ("keys its rows by k, a value computed by an aggregate"), so the model recomputed in full
    sql = ("select concat('o', cast(o_id as string)) as k, sum(qty) as q from s.items group by "
           "o_id union all select concat('p', cast(p_id as string)), sum(qty) from s.items "
           "group by p_id")
    a = sa.analyze(sql, ("k",))
    assert a.incremental_reason is None, a.incremental_reason
    # an aggregate in the key's position is still partial
    swapped = sql.replace("select concat('p', cast(p_id as string)), sum(qty)",
                          "select cast(sum(qty) as string), sum(qty)")
    assert "computed by an aggregate" in sa.analyze(swapped, ("k",)).incremental_reason


def test_union_all_empties_other_branches():
    sql = "select id, v from s.a union all select id, v from s.b"
    out = sa.affected_keys_sql(sql, ["id"], {"s.b": (1, 2)}, {"s.a": 4, "s.b": 2}, {})[0]
    assert "FALSE" in out.upper() and "table_changes('s.b', 1, 2)" in out.lower()


def test_nested_subquery_and_aggregate_filter_dropped():
    sql = "select k, n from (select k, count(*) as n from (select k from s.t where v > 0) x group by k) y where n > 2"
    out = sa.affected_keys_sql(sql, ["k"], {"s.t": (1, 2)}, {}, {})[0]
    assert "n > 2" not in out and "v > 0" in out


def test_both_sides_moved_telescope_one_query_per_scan():
    sql = "select o.customer_id, sum(p.amount) as a from s.p p join s.o o on p.oid = o.id group by o.customer_id"
    ranges = {"s.p": (3, 4), "s.o": (7, 8)}
    out = sa.affected_keys_sql(sql, ["customer_id"], ranges, {"s.p": 4, "s.o": 8}, {"s.p": 2, "s.o": 6})
    # p's change meets o as it was (6); o's change meets p as it is now (4)
    assert len(out) == 2, out
    assert "TABLE_CHANGES('s.p', 3, 4)" in out[0] and "s.o VERSION AS OF 6" in out[0]
    assert "TABLE_CHANGES('s.o', 7, 8)" in out[1] and "s.p VERSION AS OF 4" in out[1]
    one = sa.affected_keys_sql(sql, ["customer_id"], {"s.p": (3, 4)}, {"s.p": 4, "s.o": 8}, {})
    assert len(one) == 1


def test_self_join_replaces_each_scan_separately():
    sql = "select a.id, b.v from s.t a join s.t b on a.parent = b.id"
    out = sa.affected_keys_sql(sql, ["id"], {"s.t": (1, 2)}, {"s.t": 2}, {"s.t": 0})
    assert len(out) == 2
    assert all(q.lower().count("table_changes") == 1 for q in out)
    # the first scan's change meets the second as it was, the second's the first as it is
    assert "s.t VERSION AS OF 0" in out[0] and "s.t VERSION AS OF 2" in out[1]


def test_star_on_path_projects_table_columns():
    sql = "select * from s.a union all select * from s.b"
    out = sa.affected_keys_sql(sql, ["id"], {"s.a": (1, 2)}, {}, {}, lambda u: ["id", "v"])
    assert "SELECT `id`, `v` FROM TABLE_CHANGES" in out[0]


def test_a_correlated_scalar_aggregate_is_read_as_exists_of_its_rows():
    sql = ("select a.id, a.v from s.a a where a.flag and "
           "a.v > (select 0.2 * avg(b.v) from s.b b where b.a_id = a.id and b.ok)")
    assert sa.analyze(sql, ("id",)).incremental_reason is None
    through_b = sa.affected_keys_sql(sql, ["id"], {"s.b": (1, 2)}, {"s.a": 5}, {})[0]
    assert "AVG(" not in through_b.upper() and "EXISTS(SELECT 1 FROM (SELECT * FROM TABLE_CHANGES('s.b'" in through_b
    assert "b.a_id = a.id AND b.ok" in through_b and "a.flag" in through_b
    through_a = sa.affected_keys_sql(sql, ["id"], {"s.a": (1, 2)}, {"s.b": 5}, {})[0]
    assert "AVG(b.v)" in through_a  # the outer rows' own changes keep the comparison


def test_an_uncorrelated_scalar_in_having_becomes_a_where_exists():
    sql = ("select k, sum(v) as total from s.a where k > 0 group by k "
           "having sum(v) > (select sum(v) * 0.1 from s.a where v > 0)")
    analysis = sa.analyze(sql)
    assert analysis.key == ("k",) and analysis.incremental_reason is None
    queries = sa.affected_keys_sql(sql, ["k"], {"s.a": (1, 2)}, {"s.a": 2}, {"s.a": 0})
    inner = [q for q in queries if "EXISTS" in q]
    assert len(inner) == 1 and len(queries) == 2, queries  # one per scan
    for q in inner:
        assert q.startswith("SELECT `k` FROM (SELECT k, SUM(v) AS total FROM s.a VERSION AS OF")
        assert ("WHERE k > 0 AND EXISTS(SELECT 1 FROM (SELECT * FROM TABLE_CHANGES('s.a', 1, 2)) "
                "AS a WHERE v > 0) GROUP BY k) AS _br_ak") in q, q
        assert "HAVING" not in q, q


def test_a_global_aggregate_delta_upkeep_cannot_keep_says_so():
    sql = ("select sum(a.v) / 7.0 as avg_yearly from s.a a join s.b b on b.id = a.b_id "
           "where a.q < (select 0.2 * avg(c.q) from s.a c where c.b_id = b.id)")
    reason = sa.analyze(sql).incremental_reason
    assert reason.startswith("is a global aggregate (no GROUP BY) that delta upkeep cannot keep"
                             " (it has a subquery in an expression)"), reason


@pytest.mark.parametrize("sql, reason", [
    ("select id, row_number() over (order by v) as r from s.t", "window"),
    # a scalar aggregate under an OR, or one with a LIMIT, is not read as EXISTS
    ("select id from s.a a where a.v > 0 or a.v < (select avg(b.v) from s.b b)", "without GROUP BY"),
    ("select id from s.a a where a.v < (select avg(b.v) from s.b b group by b.k limit 1)", "LIMIT"),
    ("select id from s.t order by id limit 5", "LIMIT"),
    ("select id, rand() as r from s.t", "non-deterministic function rand"),
    ("select id, uuid() as u from s.t", "non-deterministic function uuid"),
    ("select id, current_timestamp() as ts from s.t", "non-deterministic function current_timestamp"),
    ("select id from s.a where (id, v) not in (select id, v from s.b)", "NOT IN"),
    ("select id from s.a where v not in (select max(v) from s.b group by k)", "NOT IN over an aggregated"),
    ("select count(*) as n, 1 as id from s.t", "without GROUP BY"),
    ("select id from s.a intersect select id from s.b", "INTERSECT"),
    # IN / EXISTS in the SELECT list: not as a group key, not beside a window
    ("select a.v in (select b.v from s.b b) as id, count(*) as n from s.a a group by 1",
     "groups by a value read from an IN or EXISTS subquery"),
    ("select id, exists (select 1 from s.b b where b.id = a.id) as f, "
     "row_number() over (partition by id order by v) as r from s.a a", "with window functions"),
    ("select id, (a.v, a.k) in (select b.v, b.k from s.b b) as f from s.a a", "tests IN"),
    ("select id, (select b.v from s.b b where b.id = a.id) as m from s.a a", "SELECT list"),
    ("select n, count(*) as c from (select k, count(*) as n from s.t group by k) x group by n",
     "groups by an aggregated value"),
    ("select id from s.a a where v > (select b.v from s.b b where b.id = a.id)", "WHERE expression"),
    ("select id from s.t version as of 3", "time travel"),
    ("select concat_ws('|', cast(o.id as string), cast(c.id as string), g.k) as id "
     "from (select k, max(v) as m from s.b group by k) g "
     "left join s.a o on o.id = g.k and g.m <> 1 left join s.c c on c.id = g.k and g.m > 2",
     "more than one outer join"),
    ("select a.id from s.a a join s.b b on a.id = b.id and exists (select 1 from s.c c where c.id = a.id)",
     "JOIN condition"),
])
def test_fallback_reasons(sql, reason):
    a = sa.analyze(sql, ("id",) if "group by n" not in sql else ("n",))
    assert a.incremental_reason is not None and reason in a.incremental_reason, a.incremental_reason


AGG_ON_KEY = "concat_ws('|', coalesce(cast(o.id as string), '~'), cast(g.k as string)) as id"
GROUPED = "(select k, max(v) as m from s.b group by k) g"


@pytest.mark.parametrize("sql,extended", [
    # the changed aggregate preserved: its NULL-extended row from the other side emptied
    (f"select {AGG_ON_KEY} from s.a o right join {GROUPED} on o.id = g.k and g.m <> 1",
     "FROM (SELECT * FROM S.A VERSION AS OF 9 AS O WHERE FALSE) AS O RIGHT JOIN"),
    (f"select {AGG_ON_KEY} from {GROUPED} left join s.a o on o.id = g.k and g.m > 3",
     "LEFT JOIN (SELECT * FROM S.A VERSION AS OF 9 AS O WHERE FALSE) AS O"),
    # the changed aggregate NULL-supplying: the preserved rows matching its change rows on
    # the condition's other conjuncts
    (f"select {AGG_ON_KEY} from s.a o left join {GROUPED} on o.id = g.k and g.m <> 1",
     "LEFT SEMI JOIN (SELECT K, MAX(V) AS M FROM (SELECT * FROM TABLE_CHANGES('S.B', 3, 5)) AS B "
     "GROUP BY K) AS _BR_M ON O.ID = _BR_M.K LEFT JOIN"),
])
def test_an_aggregate_in_an_outer_joins_condition_adds_both_rows_of_each_changed_group(sql,
                                                                                      extended):
    """Fuzz seed 5324 (fz09): dropped from an outer join's ON, a conjunct over an aggregate of
    the change rows no longer decides between a group's match and its NULL-extended row, whose
    keys differ; both come out (on main before 3afec39 the NULL-extended one was missed)."""
    assert sa.analyze(sql, ("id",)).incremental_reason is None
    out = sa.affected_keys_sql(sql, ["id"], {"s.b": (3, 5)}, {"s.a": 9, "s.b": 5}, {})
    matched, branch = out[0].upper().split(" UNION ALL ")
    assert "<> 1" not in matched and "> 3" not in matched, matched
    assert extended in branch, branch


def test_unparsed_model_falls_back():
    a = sa.analyze("select from where (", ("id",))
    assert a.shape == "unparsed" and "parser" in a.incremental_reason


def test_wrong_explicit_keys_are_errors():
    a = sa.analyze("select k, sum(v) as total from s.t group by k", ("order_id",))
    assert "not an output column" in a.key_errors[0]
    b = sa.analyze("select k, sum(v) as total from s.t group by k", ("total",))
    assert "is an aggregate" in b.key_errors[0]
    assert sa.analyze("select * from s.t", ("anything",)).key_errors == ()


DEDUP = ("select customer_id, id, amount from (select *, row_number() over (partition by "
         "customer_id order by amount desc, id desc) as rn from s.o where status <> 'x') d "
         "where rn = 1")


def test_a_window_partitioned_by_the_key_replays_the_partitions_it_touches():
    a = sa.analyze(DEDUP, ("customer_id",))
    assert a.incremental_reason is None
    (path,) = a.key_paths
    assert "partitions the change touches (PARTITION BY customer_id)" in path.describe()
    (query,) = sa.affected_keys_sql(DEDUP, ["customer_id"], {"s.o": (3, 4)}, {"s.o": 4},
                                    {"s.o": 2}, lambda u: ["id", "customer_id", "amount", "status"])
    # the change rows' partitions, not the rows that rank first among the change rows alone
    assert "rn = 1" not in query and "TABLE_CHANGES('s.o', 3, 4)" in query
    assert "status <> 'x'" in query  # a filter below the window applies to every row alike


@pytest.mark.parametrize("sql, key, reason", [
    ("select id, lag(v) over (order by id) as p from s.t", ("id",), "without PARTITION BY"),
    ("select g, row_number() over (partition by g % 2 order by v) as r from s.t", ("g",),
     "by an expression"),
    # over a join, split from it (winsplit.split_joined_windows), and still by an expression
    ("select a.g, row_number() over (partition by a.g % 2 order by b.v) as r from s.a a "
     "join s.b b on a.id = b.id", ("g",), "over a join"),
])
def test_window_fallbacks(sql, key, reason):
    a = sa.analyze(sql, key)
    assert a.incremental_reason is not None and reason in a.incremental_reason, a.incremental_reason


RUNNING = "select customer_id, id, sum(amount) over (partition by customer_id order by id) as run from s.o"


def test_a_window_keyed_off_its_partitions_reads_them_whole_at_both_versions():
    """A running total keyed by order: one change alters every later row of its partition, so
    the touched partitions are read whole, at the new and at the old versions (the keys they
    held before the change and after it)."""
    a = sa.analyze(RUNNING, ("customer_id", "id"))
    assert a.incremental_reason is None
    (path,) = a.key_paths
    assert path.rule == "partition recompute" and path.whole_partitions
    new, old = sa.affected_keys_sql(RUNNING, ["customer_id", "id"], {"s.o": (3, 4)}, {"s.o": 4},
                                    {"s.o": 2})
    assert "s.o VERSION AS OF 4" in new and "s.o VERSION AS OF 2" in old
    for query in (new, old):
        assert "TABLE_CHANGES('s.o', 3, 4)" in query
        assert "_br_c.`customer_id` IS NOT DISTINCT FROM _br_w.`customer_id`" in query  # NULL-safe
    # a filter above such a window reads exact values, and stays
    ranked = ("select g, v from (select g, v, rank() over (partition by g order by v) as r "
              "from s.t) x where r = 1")
    (query, _) = sa.affected_keys_sql(ranked, ["v"], {"s.t": (5, 5)}, {"s.t": 5}, {"s.t": 4})
    assert "WHERE r = 1" in query


def test_a_whole_partition_window_keeps_the_filter_on_its_input():
    """Below the window an aggregate's value is partial from the change rows, so the walk drops
    the window SELECT's filter on it; read whole, the input is exact and the filter is back."""
    sql = ("select k, r from (select region, k, rank() over (partition by region order by total) "
           "as r from (select region, k, sum(v) as total from s.t group by region, k) g "
           "where total > 10) x where r = 1")
    a = sa.analyze(sql, ("k",))
    assert a.incremental_reason is None and a.key_paths[0].whole_partitions
    new, _ = sa.affected_keys_sql(sql, ["k"], {"s.t": (5, 6)}, {"s.t": 6}, {"s.t": 4})
    assert "total > 10" in new and "WHERE r = 1" in new


def test_key_query_count_follows_the_moved_scans():
    sql = ("select o.customer_id, sum(p.amount) as a from s.p p join s.o o on p.oid = o.id "
           "join s.c c on c.id = o.customer_id group by o.customer_id")
    paths = sa.analyze(sql).key_paths
    assert sa.key_query_count(paths, {"s.p"}) == 1
    assert sa.key_query_count(paths, {"s.p", "s.o"}) == 2  # one per changed scan
    assert sa.key_query_count(paths, {"s.p", "s.o", "s.c"}) == 3
    assert len(sa.affected_keys_sql(sql, ["customer_id"], {"s.p": (1, 2), "s.o": (1, 2)},
                                    {"s.p": 2, "s.o": 2, "s.c": 0}, {"s.p": 1, "s.o": 1})) == 2


def test_in_and_exists_in_select_list_bound_the_rows_they_can_turn():
    sql = ("select a.id, a.v in (select b.v from s.b b where b.w > 0) as f, "
           "exists (select 1 from s.c c where c.id = a.id) as e from s.a a where a.k <> 1")
    by = paths(sql, ("id",))
    assert "SELECT-list IN / EXISTS" in " ".join(by["s.b"].notes)
    queries = sa.affected_keys_sql(sql, ("id",), {"s.b": (3, 4), "s.c": (5, 6)},
                                   {"s.a": 1, "s.b": 4, "s.c": 6}, {"s.a": 1, "s.b": 2, "s.c": 4})
    b = next(q for q in queries if "TABLE_CHANGES('s.b'" in q)
    where = b[b.index(" WHERE a.k <> 1"):]
    # as NOT IN's bound: a change row's value, a NULL among the change rows, a NULL x
    assert "a.v IN (SELECT b.v FROM" in where and "b.v IS NULL" in where and "a.v IS NULL" in where
    c = next(q for q in queries if "TABLE_CHANGES('s.c'" in q)
    assert "AND EXISTS(SELECT 1 FROM (SELECT * FROM TABLE_CHANGES('s.c'" in c


def test_in_select_list_under_an_aggregate_keys_by_its_groups():
    by = paths("select a.k, count_if(a.v in (select b.v from s.b b)) as n from s.a a group by a.k")
    assert set(by) == {"s.a", "s.b"}
