import pytest

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql.rewrite import groupable_type, over_changes, pin_versions


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
    out = pin_versions("with c as (select * from s.t) select * from c join s.u on c.id = u.id",
                          {"s.t": 3, "s.u": 7})
    assert "s.t VERSION AS OF 3" in out and "s.u VERSION AS OF 7" in out
    assert "c VERSION AS OF" not in out


def test_over_changes_keeps_alias_and_pins_others():
    out = over_changes("select o.id from s.t as o where o.v > 1", "s.t", 4, 9)
    assert "table_changes('s.t', 4, 9)" in out.lower() or "TABLE_CHANGES('s.t', 4, 9)" in out
    assert "AS o" in out
    sql = over_changes("select id from s.t", "s.t", 1, 2, change_types=("insert",))
    assert "'insert'" in sql and "'delete'" not in sql


def test_fingerprint_ignores_formatting_but_not_logic():
    parts = {"unique_key": ["id"]}
    a = sa.fingerprint(sa.analyze("select id from s.t where v > 1"), parts)
    b = sa.fingerprint(sa.analyze("SELECT id\n  FROM s.t\n WHERE v > 1"), parts)
    c = sa.fingerprint(sa.analyze("select id from s.t where v > 2"), parts)
    d = sa.fingerprint(sa.analyze("select id from s.t where v > 1"), {"unique_key": ["v"]})
    assert a == b and a != c and a != d


def test_gap_classification():
    from datetime import timedelta

    from dbt.adapters.spark_batch_refresh.plan.gaps import classify, parse_interval, retention_risk

    assert classify("[DELTA_MISSING_CHANGE_DATA] Error getting change data") == "cdf_off"
    assert classify("[FAILED_READ_FILE.FILE_NOT_EXIST] file:/w/t/_change_data/x.parquet") == "vacuumed"
    assert classify("FileNotFoundException: file:/w/t/_delta_log/00001.json") == "log_retention"
    assert classify("[DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE] ...") == "schema"
    assert classify("[DELTA_VERSION_NOT_FOUND] ...") == "log_retention"
    assert classify("java.lang.IllegalStateException: Could not find any delta files for "
                    "version 2") == "log_retention"
    assert classify("[PARSE_SYNTAX_ERROR]") is None
    assert parse_interval("interval 7 days") == timedelta(days=7)
    assert parse_interval("interval 1 hours") == timedelta(hours=1)
    risk = retention_risk({"delta.deletedFileRetentionDuration": "interval 1 days"}, timedelta(hours=20))
    assert risk is not None and risk[2] == timedelta(hours=4)
    assert retention_risk({}, timedelta(days=1)) is None


def test_groupable_types():
    assert groupable_type("int") and groupable_type("struct<a:int,b:array<string>>")
    assert not groupable_type("map<string,int>")
    assert not groupable_type("array<map<string,int>>") and not groupable_type("variant")


def test_explain_says_where_staging_comes_from():
    from datetime import datetime

    from dbt.adapters.spark_batch_refresh.report import explain
    from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
    from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint

    info = [explain.UpstreamInfo("s.t", UpstreamPoint(3, datetime(2026, 1, 1)), True, 2)]
    config = BatchRefreshConfig(unique_key=("id",))
    rowwise = explain.render("m", config, sa.analyze("select id, v from s.t where v > 0", ["id"]),
                             info, "idle")
    assert "the model over the change rows alone" in rowwise and "pushdown" not in rowwise
    grouped = explain.render("m", BatchRefreshConfig(),
                             sa.analyze("select k, count(distinct v) as s from s.t group by k"),
                             info, "idle")
    assert "pushdown:   recompute restricted to `(k) IN (affected keys)`" in grouped
    assert "no delta aggregate: the model uses COUNT(DISTINCT v)" in grouped
    query = sa.analyze("select k, sum(v) as s from s.t group by k")
    summed = explain.render("m", BatchRefreshConfig(aggregate_upkeep="delta"), query, info, "idle")
    assert "[delta aggregate] s.t: its signed change rows grouped by k" in summed
    # without aggregate_upkeep='delta' a keyed aggregate recomputes its groups, a global one all
    assert "aggregate_upkeep='delta' maintains" in explain.render("m", BatchRefreshConfig(), query,
                                                                  info, "idle")
    overall = sa.analyze("select count(*) as n from s.t")
    assert "[delta aggregate]" in explain.render(
        "m", BatchRefreshConfig(aggregate_upkeep="delta"), overall, info, "idle")
    recomputed = explain.render("m", BatchRefreshConfig(), overall, info, "idle")
    assert "full recompute" in recomputed and "global aggregate" in recomputed


def test_pin_versions_edits_only_the_pins_into_the_users_text():
    """Issue 31: the SQL a backfill, a full recompute and verify run is the user's, with only
    `VERSION AS OF` added (a regeneration read percentile_cont as percentile_approx)."""
    
    sql = ("-- db.t in a comment\nwith x as (select * from `cat`.`db`.`t` t1 where a > 1)\n"
           "select k, percentile_cont(0.5) within group (order by v) as p\n"
           "from x join db.u as u on x.k = u.k join db.v VERSION AS OF 1 vv on vv.k = u.k\n"
           "left join (db.w w join db.t t2 on t2.k = w.k) on w.k = u.k group by k")
    pinned = pin_versions(sql, {"cat.db.t": 5, "db.u": 6, "db.v": 7, "db.w": 8})
    assert pinned == (
        "-- db.t in a comment\nwith x as (select * from `cat`.`db`.`t` VERSION AS OF 5 t1 "
        "where a > 1)\nselect k, percentile_cont(0.5) within group (order by v) as p\n"
        "from x join db.u VERSION AS OF 6 as u on x.k = u.k join db.v VERSION AS OF 1 vv on "
        "vv.k = u.k\nleft join (db.w VERSION AS OF 8 w join db.t t2 on t2.k = w.k) on "
        "w.k = u.k group by k")


def test_regenerated_sql_keeps_exact_percentiles_and_qualify():
    normalized = sa.analyze("select k, percentile_cont(0.95) within group (order by x) as p95, "
                            "percentile_disc(0.5) within group (order by x) as p50 from db.t "
                            "group by k", ["k"]).normalized_sql
    assert "PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY x)" in normalized
    assert "PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY x)" in normalized
    assert "APPROX" not in normalized
    qualified = sa.analyze("select * from db.t qualify row_number() over (partition by k "
                           "order by v) = 1", ["k"]).normalized_sql
    assert "QUALIFY" in qualified and "_w" not in qualified


def test_a_rank_over_an_aggregate_is_not_called_a_global_aggregate():
    # sqlglot parses rank() and dense_rank() as aggregate functions: a keyless model whose
    # last SELECT only ranks was told it "is a global aggregate (no GROUP BY)"
    sql = ("with p as (select c, sum(v) as t from s.t group by c) "
           "select u.region, p.c, p.t, dense_rank() over (partition by u.region order by p.t desc) "
           "as r from p join s.u u on u.id = p.c")
    a = sa.analyze(sql)
    assert "global aggregate" not in a.incremental_reason
    assert "no unique_key and none can be inferred" in a.incremental_reason
    assert "global aggregate" in sa.analyze("select sum(v) as s, rank() over (order by 1) as r "
                                            "from s.t where v in (select v from s.u)").incremental_reason


@pytest.mark.parametrize(
    "sql, group_by",
    [
        # checked against Spark 4.2: each pair returns the same rows
        ("select a, b || 'z' as c, count(*) n from s.t group by all", "GROUP BY a, b || 'z'"),
        ("select sum(x) s, count(*) from s.t group by all", None),  # a global aggregate
        ("select 'k' as src, count(*) from s.t group by all", "GROUP BY 'k'"),
        ("select a, rank() over (order by sum(x)) r from s.t group by all", "GROUP BY a"),
        ("with c as (select a, count(*) n from s.t group by all) select * from c", "GROUP BY a"),
        # left as written: unknown columns, a column that may be `all`, an ordinal to be
        ("select *, count(*) from s.t group by all", "GROUP BY ALL"),
        ("select `all`, count(*) from s.t group by all", "GROUP BY ALL"),
        ("select a, 2 as two, count(*) from s.t group by all", "GROUP BY ALL"),
        ("select a as x, x + 1 as y, count(*) from s.t group by all", "GROUP BY ALL"),
        ("select a as a, b as c, count(*) from s.t group by all", "GROUP BY a, b"),
    ],
)
def test_group_by_all_spelled_out(sql, group_by):
    from dbt.adapters.spark_batch_refresh.sql import sqltree as st
    written = st.parse(sql).sql(dialect=st.DIALECT)
    assert (group_by in written) if group_by else ("GROUP BY" not in written), written


@pytest.mark.parametrize(
    "sql, joins",
    [
        ("select o.id from s.o o left join s.p p on p.id = o.pid where p.method = 'card'",
         ["JOIN"]),
        ("select o.id from s.o o left outer join s.p p using (id) where p.x in (1, 2) "
         "and o.v > 0", ["JOIN"]),
        ("select o.id from s.o o left join s.p on s.p.id = o.pid where p.x is not null",
         ["JOIN"]),
        ("select o.id from s.o o left join s.p p on p.id = o.pid "
         "left join s.q q on q.id = o.qid where q.y between 1 and 3", ["LEFT JOIN", "JOIN"]),
        # kept: the WHERE keeps NULL-extended rows, or tests no column of the joined side
        ("select o.id from s.o o left join s.p p on p.id = o.pid where p.x is null",
         ["LEFT JOIN"]),
        ("select o.id from s.o o left join s.p p on p.id = o.pid "
         "where coalesce(p.x, 0) = 0", ["LEFT JOIN"]),
        ("select o.id from s.o o left join s.p p on p.id = o.pid where p.x = 1 or o.v > 0",
         ["LEFT JOIN"]),
        ("select o.id from s.o o left join s.p p on p.id = o.pid where o.v in (p.x, 1)",
         ["LEFT JOIN"]),
        ("select o.id from s.o o left semi join s.p p on p.id = o.pid where o.v = 1",
         ["LEFT SEMI JOIN"]),
        ("select * from (select o.id, p.x from s.o o left join s.p p on p.id = o.pid) t "
         "where t.x = 1", ["LEFT JOIN"]),  # the WHERE of another SELECT
    ],
)
def test_a_left_join_whose_where_rejects_its_null_extended_rows_is_read_inner(sql, joins):
    """Checked against Spark 4.2: its optimizer rewrites the same joins (EliminateOuterJoin)."""
    from sqlglot import exp

    from dbt.adapters.spark_batch_refresh.sql import sqltree as st
    tree = st.parse(sql)
    found = [j.sql(dialect=st.DIALECT).split(" s.")[0] for j in tree.find_all(exp.Join)]
    assert found == joins


def test_the_fingerprint_is_the_model_as_written():
    """A rewrite `st.parse` makes (the inner join above) is no edit of the model: the
    fingerprint is taken of the SQL as written, so no model rebuilds for a new rewrite."""
    from dbt.adapters.spark_batch_refresh.sql import sqltree as st
    sql = ("select o.id, p.x from s.o o left join s.p p on p.id = o.pid "
           "where p.method = 'card'")
    a = sa.analyze(sql, upstream_keys={"s.o": ("id",), "s.p": ("id",)})
    assert "LEFT JOIN" in a.normalized_sql
    assert a.normalized_sql == st.parse_written(sql).sql(dialect=st.DIALECT, normalize=True)
    # ... while the analysis reads the inner join: the pair key, p replayed by a plain term
    assert a.key == ("id",) and a.delta_join is not None and not a.delta_join.fixed


def test_group_by_all_infers_its_groups_as_key():
    a = sa.analyze("select coalesce(region, 'none') as region, sum(c) as n "
                   "from s.t group by all")
    assert a.key == ("region",) and a.incremental_reason is None and a.delta is not None


def test_a_group_key_projected_as_its_string_is_the_key():
    a = sa.analyze("select cast(customer_id as string) as cid, sum(v) as s from s.o "
                   "group by customer_id")
    # replayed by affected keys: the key query projects the model's own cast
    assert a.key == ("cid",) and a.key_source == "query" and a.incremental_reason is None
    assert [p.rule for p in a.key_paths] == ["affected-key recompute"]
    a = sa.analyze("select cast(customer_id as bigint) as cid, sum(v) as s from s.o "
                   "group by customer_id")
    assert a.key == ()


@pytest.mark.parametrize(
    "sql, key",
    [
        ("select a as k, b from s.t union select c, d from s.u", ("k", "b")),
        ("select a, b from s.t union all select a, b from s.u union select a, b from s.v", ("a", "b")),
        ("select a, b from s.t union all select a, b from s.u", ()),  # repeats rows
        ("select a, b from s.t union select a, b from s.u union all select a, b from s.v", ()),
        ("select a, b + 1 from s.t union select a, b from s.u", ()),  # a name Spark makes
        ("select a, b from s.t union select a, b from s.u limit 3", ()),
    ],
)
def test_distinct_union_key(sql, key):
    a = sa.analyze(sql)
    assert a.key == key and (a.incremental_reason is None) == bool(key), a.incremental_reason


def test_tested_key_used_only_where_nothing_else_gives_one():
    join = "select o.id, c.region from s.o o join s.c c on c.id = o.cid"
    a = sa.analyze(join, (), ("id",))
    assert a.key == ("id",) and a.key_source == "tests" and a.incremental_reason is None
    grouped = sa.analyze("select k, count(*) as n from s.t group by k", (), ("n",))
    assert grouped.key == ("k",) and grouped.key_source == "query"
    assert sa.analyze(join, ("region",), ("id",)).key == ("region",)
    # a declared key the query proves wrong (not an output column) is not used
    assert sa.analyze(join, (), ("nope",)).key == ()
    dropped = sa.without_inferred_key(a)
    assert dropped.key == () and "its tests declare (id)" in dropped.incremental_reason


def test_a_key_found_null_is_kept_null_safe_only_where_the_query_gives_it():
    grouped = sa.analyze("select k, count(*) as n from s.t group by k")
    assert sa.keyless_if_null(grouped, (), null_seen=False) == (grouped, False, False)
    # a NULL group: GROUP BY puts every NULL in one group, unique under <=>
    assert sa.keyless_if_null(grouped, (), null_seen=True) == (grouped, False, True)
    # repeated even so: dropped
    kept, keyless, null_safe = sa.keyless_if_null(grouped, (), null_seen=True, drop=True)
    assert kept.key == () and keyless and not null_safe and "repeats" in kept.incremental_reason
    # a key the tests declare (dbt's `unique` passes any number of NULLs): dropped
    tested = sa.analyze("select o.id, c.region from s.o o join s.c c on c.id = o.cid", (), ("id",))
    kept, keyless, null_safe = sa.keyless_if_null(tested, (), null_seen=True)
    assert kept.key == () and keyless and not null_safe
    # a configured key is the user's: never changed here
    assert sa.keyless_if_null(grouped, ("k",), null_seen=True) == (grouped, False, False)


@pytest.mark.parametrize(
    "sql, key",
    [
        # a staging model over a source whose tests declare its key
        ("select id, amount * 2 as a2 from spark_catalog.raw.orders", ("id",)),
        # through a left join matching at most one row: the joined key all equated
        ("select o.id, c.region from raw.orders o left join raw.customers c on c.id = o.cid",
         ("id",)),
        ("with co as (select cid, count(*) as n from raw.orders group by cid) "
         "select c.id, co.n from raw.customers c left join co on co.cid = c.id", ("id",)),
        # not: a join that may repeat rows, a right join, a key of the joined side only
        ("select o.id, c.region from raw.orders o join raw.customers c on c.region = o.region", ()),
        ("select o.id, c.region from raw.orders o right join raw.customers c on c.id = o.cid", ()),
        ("select c.id, o.amount from raw.orders o left join raw.customers c on c.id = o.cid", ()),
        ("select o.id from raw.orders o cross join raw.customers c", ()),
        ("select id from raw.events", ()),  # no declared key
        # a join that may match several rows: the pair of both keys (inner, cross, comma)
        ("select o.id as oid, c.id as cid from raw.orders o join raw.customers c "
         "on o.amount between c.lo and c.hi", ("oid", "cid")),
        ("select o.id as oid, c.id as cid from raw.orders o join raw.customers c "
         "on o.amount <=> c.id", ("oid", "cid")),
        ("select o.*, c.id as cid from raw.orders o cross join raw.customers c", ("id", "cid")),
        ("select o.id as oid, c.id as cid from raw.orders o, raw.customers c "
         "where c.region = o.region", ("oid", "cid")),
        # a LEFT join whose NULL-extended rows the WHERE rejects is inner
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region where c.tier = 'gold'", ("oid", "cid")),
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region where c.tier is not null and o.amount > 3", ("oid", "cid")),
        # NULL-extended rows kept: the pair all the same, its joined part NULL in them (one
        # row per unmatched preserved row: key_outer, matched null-safely)
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region", ("oid", "cid")),
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region where coalesce(c.tier, 'x') = 'x'", ("oid", "cid")),
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region where c.tier is null", ("oid", "cid")),
        # not: a key part not projected, two parts under one name, a right or full join
        ("select o.id as oid, c.region from raw.orders o join raw.customers c "
         "on c.region = o.region", ()),
        ("select o.id, c.id from raw.orders o join raw.customers c on c.region = o.region", ()),
        ("select * from raw.orders o join raw.customers c on c.region = o.region", ()),
        ("select o.id as oid, c.id as cid from raw.orders o full join raw.customers c "
         "on c.region = o.region where c.tier = 'gold'", ()),
        ("select o.id as oid, e.id as eid from raw.orders o join raw.events e on e.oid = o.id", ()),
        # a posexplode adds its position; not an explode (equal elements), an _outer one
        # (an empty array's NULL position) or a position not projected
        ("select o.id, pos, x from raw.orders o "
         "lateral view posexplode(array(o.amount, o.amount * 2)) t as pos, x", ("id", "pos")),
        ("select id, t.pos as i, col from raw.orders lateral view posexplode(arr) t",
         ("id", "i")),
        ("select o.id, p1, p2 from raw.orders o lateral view posexplode(o.a) t as p1, x "
         "lateral view posexplode(o.b) u as p2, y", ("id", "p1", "p2")),
        ("select o.id, x from raw.orders o lateral view explode(o.arr) t as x", ()),
        ("select o.id, pos, x from raw.orders o lateral view outer posexplode(o.arr) t as pos, x",
         ()),
        ("select o.id, x from raw.orders o lateral view posexplode(o.arr) t as pos, x", ()),
        # a one-to-one image of the key: a cast to string (Fivetran's staging), a concat with
        # string literals; not a cast to another type ('01' and '1' are one int), not a
        # concat of two columns, not a function that can map two keys to one
        ("with base as (select * from raw.orders), final as (select cast(id as string) as "
         "order_id, amount from base) select * from final", ("order_id",)),
        ("select id::string as order_id, amount from raw.orders", ("order_id",)),
        ("select concat('inv', id) as invocation_id from raw.orders", ("invocation_id",)),
        ("select cast(id as string) || ':user:001' as event_id from raw.orders where v > 0",
         ("event_id",)),
        ("select concat('a', cast(o.id as varchar(8)), 'b') as oid, c.name from raw.orders o "
         "left join raw.customers c on c.id = o.cid", ("oid",)),
        ("select cast(o.id as string) as oid, cast(c.id as string) as cid from raw.orders o "
         "join raw.customers c on o.amount between c.lo and c.hi", ("oid", "cid")),
        ("select cast(id as string) as sid, id, amount from raw.orders", ("id",)),  # plain first
        ("select cast(id as int) as order_id from raw.orders", ()),
        ("select concat(id, amount) as k from raw.orders", ()),
        ("select upper(cast(id as string)) as k from raw.orders", ()),
        ("select md5(cast(id as string)) as k from raw.orders", ()),
        # a window over a tagged UNION ALL of keyed sources (the probe's p_window_over_union)
        ("select src, id, row_number() over (partition by src order by id) as rn from "
         "(select id, 'o' as src from raw.orders union all select id, 'c' as src "
         "from raw.customers) u", ("src", "id")),
        # dbt_artifacts' lineage edges: a DISTINCT (the tag among its key) beside a branch
        # keyed by its first column
        ("select distinct concat('t', id % 7) as child, 'test' as kind, p as parent "
         "from raw.orders union all select concat('m', id) as child, 'model' as kind, "
         "concat('m', id div 2) from raw.customers where id > 1", ("kind", "child", "parent")),
    ],
)
def test_key_through_upstream_tests(sql, key):
    a = sa.analyze(sql, upstream_keys={"raw.orders": ("id",), "raw.customers": ("id",)})
    assert a.key == key and (a.key_source == "upstream tests") == bool(key), (a.key, a.key_source)


_GL = """
with journals as (select * from raw.journal), lines as (select * from raw.journal_line),
joined as (
  select journals.journal_id, journals.source_id, lines.journal_line_id, accounts.name,
    case when journals.kind = 'inv' then journals.source_id end as invoice_id
  from journals
  left join lines on journals.journal_id = lines.journal_id
  left join raw.account accounts on accounts.account_id = lines.account_id),
first_contact as (
  select joined.*, invoices.contact_id from joined
  left join raw.invoice invoices on joined.invoice_id = invoices.invoice_id)
select * from first_contact"""


@pytest.mark.parametrize(
    "sql, key, outer",
    [
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region", ("oid", "cid"), ("cid",)),
        ("select o.id as oid, c.id as cid from raw.orders o join raw.customers c "
         "on c.region = o.region", ("oid", "cid"), ()),
        # the WHERE rejects the NULL-extended rows: inner
        ("select o.id as oid, c.id as cid from raw.orders o left join raw.customers c "
         "on c.region = o.region where c.tier = 'gold'", ("oid", "cid"), ()),
        # fivetran/dbt_xero's general ledger: journals, their lines (one to many), then joins
        # that match at most one row, through `select *` of CTEs
        (_GL, ("journal_id", "journal_line_id"), ("journal_line_id",)),
        # a CTE keyed with an outer column, joined on as one side of a pair
        ("with x as (select o.id as oid, c.id as cid from raw.orders o left join "
         "raw.customers c on c.region = o.region) select x.oid, x.cid, p.id as pid from x "
         "join raw.products p on p.price > x.oid", ("oid", "cid", "pid"), ("cid",)),
        # a GROUP BY over it: its groups, NULL one group like any other
        ("with x as (select o.id as oid, c.id as cid from raw.orders o left join "
         "raw.customers c on c.region = o.region) select oid, cid, count(*) as n from x "
         "group by oid, cid", ("oid", "cid"), ()),
        # two one-to-many LEFT joins: a preserved row's matches of each, or one NULL
        ("select o.id as oid, c.id as cid, p.id as pid from raw.orders o left join "
         "raw.customers c on c.region = o.region left join raw.products p on p.price = o.amount",
         ("oid", "cid", "pid"), ("cid", "pid")),
        # RIGHT joins, the LEFT join seen from the preserved side: orders with their customer
        # (at most one: the order's key alone), then their items (one to many: the pair)
        ("select c.id as cid, o.id as oid from raw.customers c right join raw.orders o "
         "on c.id = o.customer_id", ("oid",), ()),
        ("select c.id as cid, o.id as oid, i.id as iid from raw.customers c right join "
         "raw.orders o on c.id = o.customer_id left join raw.items i on o.id = i.order_id",
         ("oid", "iid"), ("iid",)),
        # a customer may match several orders of its region: everything before is the outer part
        ("select c.id as cid, o.id as oid from raw.customers c right join raw.orders o "
         "on c.region = o.region", ("cid", "oid"), ("cid",)),
        ("select o.id as oid, p.id as pid from raw.orders o right join raw.products p "
         "on p.id = o.product_id", ("oid", "pid"), ("oid",)),
    ],
)
def test_key_outer_of_left_joins(sql, key, outer):
    keys = {t: (c,) for t, c in (("raw.orders", "id"), ("raw.customers", "id"),
                                  ("raw.products", "id"), ("raw.items", "id"),
                                  ("raw.journal", "journal_id"),
                                  ("raw.journal_line", "journal_line_id"),
                                  ("raw.account", "account_id"), ("raw.invoice", "invoice_id"))}
    a = sa.analyze(sql, upstream_keys=keys)
    assert (a.key, a.key_outer) == (key, outer)
    assert a.incremental_reason is None, a.incremental_reason
    # a configured key has no outer columns: its NULL stays an error
    assert sa.analyze(sql, unique_key=list(key), upstream_keys=keys).key_outer == ()
    if outer:
        from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
        from dbt.adapters.spark_batch_refresh.report import explain
        said = explain.render("m", BatchRefreshConfig(), a, [], "idle")
        assert f"{', '.join(outer)} NULL where an outer join matches no row" in said, said
    # dropped on a NULL in the preserved side's key where it rests on tests: none either
    dropped, keyless, _ = sa.keyless_if_null(a, (), null_seen=True)
    assert keyless == (a.key_source == "upstream tests")
    assert not keyless or dropped.key_outer == ()


_LINES = {"s.bills": ("bill_id", "source_relation"), "s.bill_lines": ("bill_id", "index", "source_relation"),
          "raw.orders": ("id",), "raw.customers": ("id",), "raw.items": ("id",), "raw.products": ("id",)}


@pytest.mark.parametrize(
    "sql, key, outer",
    [
        # each line matches one bill: the lines' key alone, its columns as the bills' the ON
        # equates (fivetran/dbt_quickbooks' bill double entry)
        ("select b.bill_id as transaction_id, b.source_relation, l.index, l.amount from s.bills b "
         "inner join s.bill_lines l on b.bill_id = l.bill_id and b.source_relation = l.source_relation",
         ("transaction_id", "index", "source_relation"), ()),
        ("select c.id as cid, o.id as oid from raw.customers c join raw.orders o "
         "on o.customer_id = c.id", ("oid",), ()),
        # a LEFT join whose WHERE rejects its NULL-extended rows is inner
        ("select o.id as oid, i.id as iid from raw.orders o left join raw.items i "
         "on i.order_id = o.id where i.qty > 0", ("iid",), ()),
        # then a join matching at most one row: still the lines' key
        ("select c.id as cid, o.id as oid, p.id as pid from raw.customers c join raw.orders o "
         "on o.customer_id = c.id left join raw.products p on p.id = o.product_id", ("oid",), ()),
        # the ON equates part of the bills' key: the pair, but the lines' columns the ON fixes
        ("select b.bill_id, l.index, b.source_relation, l.source_relation as ls "
         "from s.bills b join s.bill_lines l on b.bill_id = l.bill_id",
         ("bill_id", "source_relation", "index", "ls"), ()),
        # equated to a column of another relation: the pair
        ("select c.id as cid, o.id as oid, i.id as iid from raw.customers c "
         "left join raw.orders o on o.id = c.id join raw.items i on c.id = o.customer_id",
         ("cid", "iid"), ()),
        # a LEFT join keeps the bills without lines: the pair, the lines' part outer, less the
        # columns its ON fixes (NULL with the rest in a NULL-extended row)
        ("select b.bill_id, b.source_relation, l.index from s.bills b left join s.bill_lines l "
         "on b.bill_id = l.bill_id and b.source_relation = l.source_relation",
         ("bill_id", "source_relation", "index"), ("index",)),
        ("select b.bill_id, b.source_relation, l.index, l.source_relation as ls from s.bills b "
         "left join s.bill_lines l on b.bill_id = l.bill_id",
         ("bill_id", "source_relation", "index", "ls"), ("index", "ls")),
    ],
)
def test_key_of_join_to_many(sql, key, outer):
    a = sa.analyze(sql, upstream_keys=_LINES)
    assert (a.key, a.key_outer) == (key, outer), (a.key, a.incremental_reason)


@pytest.mark.parametrize(
    "sql, key",
    [
        ("select 'c' as kind, cid as k, sum(v) as t from s.o group by cid "
         "union all select 'p', pid, sum(v) from s.o group by pid", ("kind", "k")),
        # dbt_utils.union_relations' tag over keyed branches, three of them
        ("select cast('a' as string) as _dbt_source_relation, k, n from "
         "(select k, count(*) n from s.a group by k) x union all "
         "select cast('b' as string), k, n from (select k, count(*) n from s.b group by k) y "
         "union all select cast('c' as string), k, n from (select k, count(*) n from s.c group by k) z",
         ("_dbt_source_relation", "k")),
        # keys at other positions: the tag and every position a branch's key takes
        ("select 'c' as kind, cid as k, count(*) as n from s.o group by cid "
         "union all select 'p', count(*), pid from s.o group by pid", ("kind", "k", "n")),
        # not: one tag for both, a branch without a key, a branch keyed by its tag alone
        ("select 'c' as kind, cid as k, sum(v) from s.o group by cid "
         "union all select 'c', pid, sum(v) from s.o group by pid", ()),
        ("select 'c' as kind, cid as k from s.o group by cid "
         "union all select 'p', pid from s.o", ()),
    ],
)
def test_tagged_union_all_key(sql, key):
    a = sa.analyze(sql)
    assert a.key == key, (a.key, a.incremental_reason)


A_BY_K = "(select k, sum(v) as s from s.a group by k)"
B_BY_K = "(select k, sum(w) as w from s.b group by k)"


@pytest.mark.parametrize(
    "sql, key",
    [
        # relations keyed by the USING columns: one row per key on each side, so per output
        (f"select * from {A_BY_K} a full outer join {B_BY_K} b using (k)", ("k",)),
        (f"select k, s, w from {A_BY_K} a left join {B_BY_K} b using (k)", ("k",)),
        # attribution-playbook's cpa_and_roas: two aggregates by month and source
        ("with x as (select date_trunc('month', d) as date_month, src, sum(p) as pts "
         "from s.a group by 1, 2), y as (select date_trunc('month', d) as date_month, src, "
         "sum(c) as spend from s.b group by 1, 2), j as (select *, spend / pts as cpa from x "
         "full outer join y using (date_month, src)) select * from j order by date_month",
         ("date_month", "src")),
        # joined ON the key, projected as each pair's coalesce (Fivetran's daily_shop), and a
        # later join that matches at most one row
        (f"select coalesce(a.k, b.k) as k, s, w from {A_BY_K} a full outer join {B_BY_K} b "
         f"on a.k = b.k", ("k",)),
        ("with x as (select d, src, sum(p) as pts from s.a group by 1, 2), "
         "y as (select d, src, sum(c) as spend from s.b group by 1, 2), "
         "z as (select d, src, count(*) as n from s.c group by 1, 2) "
         "select ifnull(y.src, x.src) as source_relation, coalesce(x.d, y.d) as date_day, "
         "pts, spend, z.n from x full outer join y on x.d = y.d and y.src = x.src "
         "left join z on coalesce(x.d, y.d) = z.d and coalesce(x.src, y.src) = z.src",
         ("date_day", "source_relation")),
        (f"select * from {A_BY_K} a full outer join {B_BY_K} b using (k) "
         f"left join (select k, max(v) as m from s.c group by k) c on c.k = a.k", ("k",)),
        # not: ON beside the key's equality, a side's own column, a side keyed otherwise, a
        # later join that may match several rows
        (f"select coalesce(a.k, b.k) as k, s, w from {A_BY_K} a full outer join {B_BY_K} b "
         f"on a.k = b.k and a.s > 0", ()),
        (f"select a.k, s, w from {A_BY_K} a full outer join {B_BY_K} b on a.k = b.k", ()),
        (f"select coalesce(a.k, b.j) as k from {A_BY_K} a full outer join "
         f"(select j, k, sum(w) as w from s.b group by j, k) b on a.k = b.j", ()),
        ("select coalesce(x.d, y.d) as d, pts, spend, z.n from "
         "(select d, sum(p) as pts from s.a group by d) x full outer join "
         "(select d, sum(c) as spend from s.b group by d) y on x.d = y.d "
         "left join s.c z on coalesce(x.d, y.d) = z.d", ()),
        # not: a side's own column (not the coalesced key), a key wider than USING, a side
        # without a key, a second join
        (f"select a.k, s, w from {A_BY_K} a full outer join {B_BY_K} b using (k)", ()),
        (f"select * from (select k, j, sum(v) as s from s.a group by k, j) a "
         f"full outer join {B_BY_K} b using (k)", ()),
        (f"select * from s.a a full outer join {B_BY_K} b using (k)", ()),
        (f"select * from {A_BY_K} a join {B_BY_K} b using (k) join s.c c on c.k = k", ()),
    ],
)
def test_key_of_relations_joined_on_their_shared_key(sql, key):
    a = sa.analyze(sql)
    assert a.key == key, (a.key, a.incremental_reason)


NUMBERED = ("(select *, row_number() over (partition by id order by received_at) as rn "
            "from s.pages)")


@pytest.mark.parametrize(
    "sql, key",
    [
        # the staging dedup: one row per partition where row_number() = 1 (segment's base
        # model: numbered in one CTE, filtered in the next, renamed in a third)
        (f"select * from {NUMBERED} n where rn = 1", ("id",)),
        (f"select id as page_view_id, v from {NUMBERED} n where n.rn = 1 and v > 0",
         ("page_view_id",)),
        ("with numbered as (select *, row_number() over (partition by id order by t) as row_num "
         "from s.pages), deduped as (select * from numbered where row_num = 1), renamed as "
         "(select id as page_view_id, anonymous_id from deduped) select * from renamed",
         ("page_view_id",)),
        ("select a, b, v from (select a, b, v, row_number() over (partition by a, b order by v) "
         "as rn from s.t) x where 1 = rn", ("a", "b")),
        ("select id, v from s.t qualify row_number() over (partition by id order by v desc) = 1",
         ("id",)),
        # dbt_utils.deduplicate as it compiles on Databricks
        ("select * from s.t qualify row_number() over (partition by k order by v desc) = 1",
         ("k",)),
        ("select o.k, o.v, row_number() over (partition by o.k order by o.v) as rn "
         "from s.t o join s.u u on u.x = o.x qualify rn = 1", ("k",)),
        # Fivetran's flag: `row_number() over (...) = 1 as is_most_recent_record`, tested
        # in a WHERE over the CTE that defines it or in the QUALIFY of its own SELECT
        ("with f as (select id, v, row_number() over (partition by source_relation, id "
         "order by synced desc) = 1 as is_most_recent_record, source_relation from s.h) "
         "select source_relation, id, v from f where is_most_recent_record", ("source_relation", "id")),
        ("with f as (select *, 1 = row_number() over (partition by id order by synced desc) "
         "as latest from s.h) select id, v from f where f.latest = true", ("id",)),
        ("select id, v, row_number() over (partition by id order by t desc) = 1 as latest "
         "from s.h qualify latest", ("id",)),
        # not: the flag negated, a flag of another comparison
        ("with f as (select id, v, row_number() over (partition by id order by t) = 1 as latest "
         "from s.h) select id, v from f where not latest", ()),
        ("with f as (select id, v, row_number() over (partition by id order by t) <= 1 as latest "
         "from s.h) select id, v from f where latest", ()),
        # not: rank and dense_rank repeat 1 on ties, a filter on another number, the
        # partition column not projected, a partition by an expression, the number <= 2
        ("select * from (select *, rank() over (partition by id order by t) as rn "
         "from s.pages) n where rn = 1", ()),
        (f"select * from {NUMBERED} n where rn = 2", ()),
        (f"select v from {NUMBERED} n where rn = 1", ()),
        ("select * from (select *, row_number() over (partition by lower(id) order by t) as rn "
         "from s.pages) n where rn = 1", ()),
        (f"select * from {NUMBERED} n where rn <= 2", ()),
        ("select id, v from s.t qualify dense_rank() over (partition by id order by v) = 1", ()),
        ("select id, explode(arr) as e from s.t "
         "qualify row_number() over (partition by id order by v) = 1", ()),
    ],
)
def test_key_of_first_row_per_partition(sql, key):
    a = sa.analyze(sql)
    assert a.key == key, (a.key, a.incremental_reason)


@pytest.mark.parametrize(
    "sql, key",
    [
        # segment's user stitching: DISTINCT over a column and whole-partition aggregates
        ("select distinct anonymous_id, last_value(user_id) ignore nulls over (partition by "
         "anonymous_id order by t rows between unbounded preceding and unbounded following) "
         "as user_id, min(t) over (partition by anonymous_id) as first_seen_at, "
         "max(t) over (partition by anonymous_id) as last_seen_at from s.events",
         ("anonymous_id",)),
        # segment's sessions: partitioned by one of the plain columns
        ("select distinct session_id, anonymous_id, count(*) over (partition by session_id) "
         "as n, first_value(url) over (partition by session_id order by n rows between "
         "unbounded preceding and unbounded following) as first_url from s.pv",
         ("session_id", "anonymous_id")),
        # not: a frame ending at the current row, a running ORDER BY, a partition by a column
        # not projected, a row expression beside them, a ranking function
        ("select distinct a, sum(v) over (partition by a order by t rows between unbounded "
         "preceding and current row) as s from s.t", ()),
        ("select distinct a, max(v) over (partition by a order by t) as m from s.t", ()),
        ("select distinct a, max(v) over (partition by b) as m from s.t", ()),
        ("select distinct a, v + 1 as w, max(v) over (partition by a) as m from s.t", ()),
        ("select distinct a, rank() over (partition by a order by v) as r from s.t", ()),
    ],
)
def test_key_of_distinct_over_whole_partitions(sql, key):
    a = sa.analyze(sql)
    assert a.key == key, (a.key, a.incremental_reason)


def test_an_upstream_models_proven_key_counts_as_the_querys_own():
    """A keyless model over a `batch_refresh` model whose query proves a key (recorded in its
    commits) infers its key through it as from the query: proven, not resting on tests."""
    sql = "select customer_id, order_id, amount * 2 as a2 from s.latest where amount > 10"
    assert sa.analyze(sql).key == ()
    a = sa.analyze(sql, proven_keys={"s.latest": ("customer_id",)})
    assert a.key == ("customer_id",) and a.key_source == "query"
    assert a.key_through == ("s.latest",) and a.incremental_reason is None
    # beside a key the tests of another upstream declare, the key rests on those tests
    joined = ("select l.customer_id, c.region from s.latest l "
              "left join s.customers c on c.id = l.customer_id")
    b = sa.analyze(joined, upstream_keys={"s.customers": ("id",)},
                   proven_keys={"s.latest": ("customer_id",)})
    assert b.key == ("customer_id",) and b.key_source == "upstream tests"
    # not projected: no key
    assert sa.analyze("select order_id from s.latest",
                      proven_keys={"s.latest": ("customer_id",)}).key == ()


def test_a_left_join_using_the_joined_key_keeps_the_preserved_key():
    """segment's stitched sessions: `select sessions.*, ... from sessions left join
    id_stitching using (anonymous_id)`, the stitching keyed by anonymous_id, matches each
    session with one row at most, so the sessions' key passes (a qualified or bare `*`)."""
    keys = {"s.sessions": ("session_id",), "s.stitching": ("anonymous_id",)}
    for sql in ("select sessions.*, coalesce(st.user_id, sessions.anonymous_id) as blended "
                "from s.sessions sessions left join s.stitching st using (anonymous_id)",
                "select * from s.sessions left join s.stitching using (anonymous_id)",
                "select se.session_id, st.user_id from s.sessions se "
                "join s.stitching st using (anonymous_id, user_id)"):
        assert sa.analyze(sql, upstream_keys=keys).key == ("session_id",), sql
    # USING not every column of the joined key, or a right join: may repeat a session
    other = {"s.sessions": ("session_id",), "s.stitching": ("anonymous_id", "day")}
    assert sa.analyze("select * from s.sessions left join s.stitching using (anonymous_id)",
                      upstream_keys=other).key == ()
    assert sa.analyze("select s.* from s.sessions s right join s.stitching t "
                      "using (anonymous_id)", upstream_keys=keys).key == ()


def test_a_key_through_an_upstream_models_key_is_dropped_where_it_repeats():
    """executor._key_retry: a key the query proves alone fails on a repeat (it cannot repeat
    but through a NULL); one through an upstream model's key (configured, maybe wrong) is
    dropped instead, as one resting on tests is; a NULL makes either null-safe first."""
    from dbt.adapters.spark_batch_refresh.engine.executor import _key_retry
    from dbt.adapters.spark_batch_refresh.errors import BadKeyError, NullKeyError
    alone = sa.analyze("select k, count(*) as n from s.t group by k")
    through = sa.analyze("select k, v from s.up", proven_keys={"s.up": ("k",)})
    assert alone.key_through == () and through.key_through == ("s.up",)
    repeat, null = BadKeyError("m", "bad unique_key", []), NullKeyError("m", "bad unique_key", [])
    assert _key_retry(repeat, alone, null_safe=False) is None
    assert _key_retry(repeat, through, null_safe=False).null_safe is False
    assert _key_retry(null, through, null_safe=False).null_safe is True
    assert _key_retry(repeat, through, null_safe=True).null_safe is False


def test_a_key_walk_past_its_read_budget_recomputes(monkeypatch):
    # fivetran/dbt_stripe's MRR report made key queries of 1,742 reads that ran the driver
    # out of memory; past the budget the model recomputes instead, its key kept
    sql = ("with j as (select a.k, b.v from s.a a join s.b b on a.k = b.k) "
           "select k, v, rank() over (partition by k order by v) as r from j")
    assert sa.analyze(sql, ("k", "v")).incremental_reason is None
    monkeypatch.setattr(sa, "KEY_WALK_READS_MAX", 3)
    a = sa.analyze(sql, ("k", "v"))
    assert a.key == ("k", "v")
    assert "would read its upstreams" in (a.incremental_reason or ""), a
