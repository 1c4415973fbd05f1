"""SQL analysis and rewriting of a compiled model (pure; sqlglot, Spark dialect).

What it answers: which physical relations the model reads (not CTE names), whether its output
rows each derive from one upstream row (so the change feed of that upstream bounds the affected
output keys), and how to rewrite the model: every upstream pinned `VERSION AS OF v`, or one
upstream replaced by its change rows.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Collection, List, Mapping, Optional, Sequence, Tuple

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dbt.adapters.spark_batch_refresh.sql import aggdelta as ad
from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.sql import keypath as kp
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.coarse import Coarse, coarse_key, coarse_part
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.sql.decorrelate import scalar_joins
from dbt.adapters.spark_batch_refresh.sql.keyinfer import Inferred, infer_key
from dbt.adapters.spark_batch_refresh.sql.rewrite import change_rows_sql, over_changes
from dbt.adapters.spark_batch_refresh.sql.sqltree import DIALECT
from dbt.adapters.spark_batch_refresh.sql.winsplit import (
    is_aggregate, split_joined_windows, split_windowed, window_function)


# Functions whose value differs between evaluations: a recompute of some keys would not
# reproduce what the backfill wrote, so such models are recomputed in full.
NONDETERMINISTIC = frozenset(
    {
        "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id",
        "spark_partition_id", "input_file_name", "current_timestamp", "current_date",
        "current_time", "now", "localtimestamp", "unix_timestamp", "curdate",
        "current_timezone", "try_reflect", "reflect",
    }
)
_NONDETERMINISTIC_NODES: Tuple[type, ...] = tuple(
    getattr(exp, name)
    for name in ("Rand", "Randn", "Uuid", "CurrentTimestamp", "CurrentDate", "CurrentTime",
                 "UnixTimestamp")
    if hasattr(exp, name)
)


@dataclass(frozen=True)
class Analysis:
    upstreams: Tuple[str, ...]
    shape: str  # "rowwise" | "general" | "unparsed"
    reason: Optional[str]  # why the model is not row-wise over one upstream (None when it is)
    normalized_sql: str
    # The key replay uses: the configured unique_key, else the one inferred from the query,
    # else the one the model's tests declare (key_source says which of the last two).
    key: Tuple[str, ...] = ()
    inferred_key: Tuple[str, ...] = ()
    # For a key that is not configured: "query", "tests" (the model's), "upstream tests"
    # (the query's key rests on keys its upstreams' tests declare)
    key_source: str = ""
    # The upstream batch_refresh models whose recorded keys (keyinfer.Inferred.proven_keys)
    # the inferred key passes through, for explain.
    key_through: Tuple[str, ...] = ()
    # Columns of an inferred key that a LEFT JOIN's NULL extension leaves NULL
    # (keyinfer.Inferred.outer_key): matched null-safely, their NULL no problem.
    key_outer: Tuple[str, ...] = ()
    key_errors: Tuple[str, ...] = ()  # a configured unique_key the query proves wrong
    # Why affected-key replay is unsound for this model and key (None when it is sound).
    incremental_reason: Optional[str] = None
    key_paths: Tuple[kp.KeyPath, ...] = ()
    # Maintained by delta aggregation (aggdelta.py), or why not (None when it is, or when the
    # model does not aggregate at all).
    delta: Optional[ad.DeltaAggregate] = None
    delta_reason: Optional[str] = None
    # Replayed as a sum of one-upstream-changed terms (deltajoin.py), or why not (None when it
    # is, or when the model reads one upstream).
    delta_join: Optional[dj.DeltaJoin] = None
    delta_join_reason: Optional[str] = None
    # A model the key walk cannot replay whose upstreams are all read by one GROUP BY in a
    # subquery or CTE: that aggregate kept by delta in a sidecar, the rest of the model
    # recomputed over it (aggdelta.DeltaAggregate.outer_sql); or why not.
    intermediate: Optional[ad.DeltaAggregate] = None
    intermediate_reason: Optional[str] = None
    # The SQL a refresh runs when it is not the model's own: its grouped SELECTs with windows
    # split in two (winsplit.py), the form the key walk replays (same rows, same columns).
    replay_sql: Optional[str] = None

    @property
    def rowwise(self) -> bool:
        return self.shape == "rowwise"


# Normalized `schema.table` (or `table`) for a physical relation (one home: sqltree).
table_name = st.table_name


def _rowwise_blocker(tree: exp.Expression, tables: List[exp.Table]) -> Optional[str]:
    names = {table_name(t) for t in tables}
    if len(names) != 1:
        return f"reads {len(names)} upstream relations (row-wise replay needs exactly one)"
    if len(tables) != 1:
        return "reads its upstream more than once (self-join or repeated scan)"
    if tables[0].args.get("version"):
        return "pins its upstream with its own time travel clause"
    for node_type, reason in ((exp.Join, "has a join"), (exp.Union, "has a set operation")):
        if tree.find(node_type) is not None:
            return reason
    reason = dj.nonlinear(tree)
    if reason:
        return reason
    blocker = nondeterministic_function(tree)
    if blocker:
        return f"calls the non-deterministic function {blocker}()"
    return None


def nondeterministic_function(tree: exp.Expression) -> Optional[str]:
    for node in tree.find_all(exp.Func):
        if isinstance(node, _NONDETERMINISTIC_NODES):
            return node.sql_name().lower()
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in NONDETERMINISTIC:
            return str(node.this).lower()
    return None


def analyze(sql: str, unique_key: Sequence[str] = (), tested_key: Sequence[str] = (),
            upstream_keys: Optional[Mapping[str, Tuple[str, ...]]] = None,
            proven_keys: Optional[Mapping[str, Tuple[str, ...]]] = None) -> Analysis:
    """What the model reads and how it can replay. Never raises: an analysis or rewriting
    defect (an exception of the parser or of the rewrites, rehearsed here on every replay
    path the model may take) costs a full recompute with the reason, never a failed build.
    `tested_key`, the key the model's tests declare, is used when neither `unique_key` nor
    the query gives one and the query does not prove it wrong; `upstream_keys`, the keys its
    upstreams' tests declare, let the query give one through them (keyinfer.py);
    `proven_keys`, the keys of upstream `batch_refresh` models (configured, which the plugin
    checks on their writes, or proved by their queries and recorded in their commits), count
    as keys the query itself proves."""
    try:
        fail_point("during_analysis")
        analysis = _analyze(sql, unique_key, upstream_keys, tested_key, proven_keys)
        try:
            analysis = _split_for_replay(sql, unique_key, analysis) or analysis
        except Exception:  # noqa: BLE001 -- a defect of the split: the model as written
            pass
        _rehearse(analysis.replay_sql or sql, analysis)
        return analysis
    except st.NotIncremental as exc:
        return _unreplayable(sql, unique_key, str(exc))
    except Exception as exc:  # noqa: BLE001 -- a defect of ours, not the user's model
        return _unreplayable(sql, unique_key, (
            f"could not be analysed for replay ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:300]})"))


def _unreplayable(sql: str, unique_key: Sequence[str], reason: str) -> Analysis:
    """The model recomputed in full on every refresh, its upstreams still read for gating."""
    try:
        tree = st.parse_written(sql)
        normalized, shape = tree.sql(dialect=DIALECT, normalize=True), "general"
        tree = st.inner_rejected_left_joins(tree)
        upstreams = tuple(sorted({table_name(t) for t in st.physical_tables(tree)}))
        errors = tuple(key_errors(tree, unique_key))
    except Exception:  # noqa: BLE001 -- the parser itself failed: the SQL as written
        upstreams, normalized, shape, errors = (), " ".join(sql.split()), "unparsed", ()
    return Analysis(upstreams, shape, reason, normalized, key=tuple(unique_key),
                    key_errors=errors, incremental_reason=reason)


def _split_for_replay(sql: str, unique_key: Sequence[str],
                      analysis: Analysis) -> Optional[Analysis]:
    """The model with its grouped windows split (the aggregate in a subquery, the windows
    over it), its SELECT list's correlated scalar subqueries joined (decorrelate.py) and its
    windows over a join split from the join (the join in a subquery), when that form replays
    by the key walk and the model as written does not: a rank partitioned by a group key
    replays by affected keys as its CTE form does. Its
    fingerprint stays the model's own (normalized_sql), so nothing rebuilds for the change."""
    if analysis.incremental_reason is None or analysis.shape == "unparsed" or not analysis.key:
        return None
    tree = st.parse(sql)
    split = split_joined_windows(scalar_joins(split_windowed(tree)))
    if split == tree:
        return None
    replay_sql = split.sql(dialect=DIALECT)
    other = _analyze(replay_sql, tuple(unique_key) or analysis.key)
    if other.incremental_reason is not None:
        return None
    # The intermediate stays the one found for the model as written: with
    # aggregate_upkeep='delta' it is still kept in a sidecar (replay_rule prefers it).
    return replace(other, normalized_sql=analysis.normalized_sql, key=analysis.key,
                   inferred_key=analysis.inferred_key, key_source=analysis.key_source,
                   key_through=analysis.key_through,
                   key_errors=analysis.key_errors,
                   replay_sql=replay_sql, intermediate=analysis.intermediate,
                   intermediate_reason=analysis.intermediate_reason)


def _rehearse(sql: str, analysis: Analysis) -> None:
    """Generate, without running, the SQL of every replay path the planner may choose, with
    every upstream moved: what raises here would raise mid-refresh."""
    if not analysis.upstreams or analysis.shape == "unparsed":
        return
    new = {u: 2 for u in analysis.upstreams}
    old = {u: 1 for u in analysis.upstreams}
    ranges = {u: (2, 2) for u in analysis.upstreams}
    if analysis.rowwise:
        over_changes(sql, analysis.upstreams[0], 2, 2)
    if analysis.incremental_reason is None and analysis.key:
        affected_keys_sql(sql, analysis.key, ranges, new, old)
    joined = analysis.delta_join
    if joined is not None:
        moved = [u for u in joined.upstreams if u not in joined.fixed]
        views = joined.key_views("_br_rehearsal")
        joined.transition_keys(sql, "_br_rehearsal", moved, _rehearsal_rows)
        joined.terms(sql, _rehearsal_rows, moved, new, old, views)
    middle = analysis.intermediate
    if middle is not None:
        whole = middle.whole_state("_br_rehearsal_base", "_br_rehearsal_state")
        middle.model_over(whole)
        if middle.outer_partition and analysis.key:
            rows = middle.model_over(middle.in_touched_partitions(whole, "_br_rehearsal_state"))
            middle.partition_keys(rows, "_br_rehearsal_target", "_br_rehearsal_state",
                                  analysis.key)
        if middle.outer_keys_sql is not None:
            middle.touched_outer_keys(middle.old_state("_br_rehearsal_new"),
                                      "_br_rehearsal_state")


def _rehearsal_rows(upstream: str, change_types: Tuple[str, ...]) -> str:
    return change_rows_sql(upstream, 2, 2, change_types)


def _analyze(sql: str, unique_key: Sequence[str],
             upstream_keys: Optional[Mapping[str, Tuple[str, ...]]] = None,
             tested_key: Sequence[str] = (),
             proven_keys: Optional[Mapping[str, Tuple[str, ...]]] = None) -> Analysis:
    try:
        tree = st.parse_written(sql)
    except (ParseError, sqlglot.errors.TokenError) as exc:
        reason = f"the SQL parser cannot read the model: {exc}"
        return Analysis((), "unparsed", reason, " ".join(sql.split()), key=tuple(unique_key),
                        incremental_reason=reason)
    if not isinstance(tree, (exp.Query,)):
        reason = "the model is not a single SELECT query"
        return Analysis((), "unparsed", reason, " ".join(sql.split()), key=tuple(unique_key),
                        incremental_reason=reason)
    # The fingerprint's text is the model as written; the analysis reads what `st.parse` gives.
    normalized = tree.sql(dialect=DIALECT, normalize=True)
    tree = st.inner_rejected_left_joins(tree)
    tables = st.physical_tables(tree)
    upstreams = tuple(sorted({table_name(t) for t in tables}))
    blocker = _rowwise_blocker(tree, tables)
    inference = Inferred(upstream_keys or {}, proven_keys=proven_keys or {})
    inferred = inference.key(tree)
    key_source = "" if unique_key else "upstream tests" if inference.declared else "query"
    outer = inference.outer_key(tree) if inferred and not unique_key else ()
    if not unique_key and not inferred and tested_key and not key_errors(tree, tested_key):
        inferred, key_source = tuple(tested_key), "tests"  # unless the query proves it wrong
    key = tuple(unique_key) or inferred
    paths: Tuple[kp.KeyPath, ...] = ()
    # Holds whichever upstream changes: no replay rule applies (key walk, delta, intermediate).
    global_blocker = _global_blocker(tree, tables)
    try:
        reason = global_blocker
        if reason is None and not key:
            reason = ("has no unique_key and none can be inferred (the output is not a "
                      "GROUP BY, SELECT DISTINCT or UNION over projected columns, nor the "
                      "row_number() = 1 row of each partition, nor keyed relations passed "
                      "through filters and joins with their keys projected)")
        if reason is None:
            paths = key_paths(tree, key)
    except st.NotIncremental as exc:
        reason = str(exc)
    delta, delta_reason = None, None
    if global_blocker is None and tree.find(exp.AggFunc) is not None:
        delta, delta_reason = _delta_aggregate(sql, key, upstreams)
        if delta is not None:
            reason = None  # a global aggregate (no key) too: its one row is kept by delta
        elif not key and _global_aggregate(tree):
            reason = (f"is a global aggregate (no GROUP BY) that delta upkeep cannot keep "
                      f"(it {delta_reason}): its one row depends on every input row")
    joined, joined_reason = None, None
    if blocker and len(upstreams) > 1 and reason is None:
        joined, joined_reason = dj.derive(tree)
    middle, middle_reason = None, None
    if reason is not None and delta is None and key and global_blocker is None:
        middle, middle_reason = _intermediate(tree, upstreams, key)
    return Analysis(upstreams, "general" if blocker else "rowwise", blocker, normalized,
                    key=key, inferred_key=inferred,
                    key_source=key_source if inferred else "",
                    key_through=tuple(inference.proven_used) if inferred else (),
                    key_outer=outer,
                    key_errors=tuple(key_errors(tree, unique_key)),
                    incremental_reason=reason, key_paths=paths, delta=delta,
                    delta_reason=delta_reason, delta_join=joined,
                    delta_join_reason=joined_reason, intermediate=middle,
                    intermediate_reason=middle_reason)


def _intermediate(tree: exp.Expression, upstreams: Sequence[str], key: Sequence[str]) -> Tuple[
        Optional[ad.DeltaAggregate], Optional[str]]:
    """The model split at its intermediate aggregate: the outermost subquery (a CTE inlined)
    that reads every scan of the model and aggregates by GROUP BY what delta upkeep can keep;
    the rest of the model reads only that subquery's rows. A grouped SELECT that computes
    windows over its groups is split into the two first (winsplit.py)."""
    inlined = split_windowed(st.inline_ctes(tree))
    scans = {id(t) for t in st.physical_tables(inlined)}
    why = "no subquery or CTE that reads every upstream aggregates them by GROUP BY"
    for sub in inlined.find_all(exp.Subquery):  # breadth first: the outermost first
        body = sub.this
        if (not isinstance(body, exp.Select) or not isinstance(sub.parent, (exp.From, exp.Join))
                or not body.args.get("group")
                or {id(t) for t in st.physical_tables(body)} != scans):
            continue
        keys = infer_key(body)
        if not keys:
            why = "its GROUP BY subquery does not output its group keys"
            continue
        delta, problem = _delta_aggregate(body.sql(dialect=DIALECT), keys, upstreams)
        if delta is None:
            why = f"its intermediate aggregate {problem}"
            continue
        sub.set("this", exp.select("*").from_(ad.INNER))
        partition = _outer_partition(inlined, sub, keys)
        return replace(delta, outer_sql=inlined.sql(dialect=DIALECT), outer_partition=partition,
                       outer_keys_sql=None if partition else _outer_groups(inlined, sub, key)), None
    return None, why


def _outer_groups(outer: exp.Expression, sub: exp.Subquery, key: Sequence[str]) -> Optional[str]:
    """For an outer part that aggregates the intermediate's rows again (`select n_orders,
    count(*) ... from (<per customer>) group by n_orders`): the model's key columns projected
    from the intermediate's rows (SELECT DISTINCT, the outer's WHERE, without its GROUP BY
    and HAVING), the outer groups a row falls in. None when an output row may depend on more
    than its group's rows (a window, a join, another query level, DISTINCT, LIMIT) or a key
    column is not a plain function of the row (an aggregate, `*`)."""
    select = _outer_select(outer, sub)
    if (select is None or not isinstance(select.args.get("group"), exp.Group)
            or any(select.args.get(a) for a in ("qualify", "order", "limit", "offset"))):
        return None
    group = select.args["group"]
    if (any(group.args.get(a) for a in ("grouping_sets", "cube", "rollup", "all"))
            or group.find(exp.Rollup, exp.Cube, exp.GroupingSets) is not None):
        return None  # a row falls in several groupings
    if select.find(exp.Window) is not None or any(p.is_star for p in select.expressions):
        return None
    by_name = {p.alias_or_name.lower(): p for p in select.expressions}
    projections = []
    for name in key:
        found = by_name.get(name.lower())
        if found is None or any(is_aggregate(n) for n in found.walk()):
            return None
        projections.append(found.copy())
    keys = select.copy()
    for arg in ("group", "having"):
        keys.set(arg, None)
    keys.set("expressions", projections)
    keys.set("distinct", exp.Distinct())
    return keys.sql(dialect=DIALECT)


def _outer_select(outer: exp.Expression, sub: exp.Subquery) -> Optional[exp.Select]:
    """The rest of the model as one SELECT reading only the intermediate `sub` (in its FROM:
    no join, DISTINCT, WINDOW clause or other query level), or None."""
    select = outer if isinstance(outer, exp.Select) else None
    if (select is None or sub.parent is not select.args.get("from_")
            or any(select.args.get(a) for a in ("joins", "distinct", "windows"))):
        return None
    if any(s is not select and s is not sub.this for s in select.find_all(exp.Select)):
        return None
    return select


def _outer_partition(outer: exp.Expression, sub: exp.Subquery,
                     keys: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    """The intermediate's keys that every window of the rest of the model is partitioned by,
    each with the output column that carries it unchanged; () when an output row may depend
    on groups outside its partition (a window without PARTITION BY, an aggregate, a join,
    another query level) or there is no window."""
    select = _outer_select(outer, sub)
    if select is None or select.args.get("group"):
        return ()
    windows = list(select.find_all(exp.Window))
    if not windows or any(is_aggregate(n) and not window_function(n) for n in select.walk()):
        return ()
    names = {k.lower(): k for k in keys}
    common: Optional[set] = None
    for window in windows:
        parts = {c.name.lower() for c in window.args.get("partition_by") or []
                 if isinstance(c, exp.Column) and c.name.lower() in names}
        common = parts if common is None else common & parts
    pairs = []
    for name in sorted(common or ()):
        if any(p.is_star for p in select.expressions):
            output: Optional[str] = names[name]
        else:
            output = next((p.alias_or_name for p in select.expressions
                           if isinstance(p.unalias(), exp.Column)
                           and p.unalias().name.lower() == name), None)
        if output is None:
            return ()
        pairs.append((names[name], output))
    return tuple(pairs)


def _delta_aggregate(sql: str, key: Sequence[str], upstreams: Sequence[str]) -> Tuple[
        Optional[ad.DeltaAggregate], Optional[str]]:
    """The model's delta upkeep when its aggregate reads rows of one upstream, each from one
    upstream row (the input must be row-wise, as a row-wise model's staging is), or an inner
    join of several (aggdelta checks that its input is a delta join)."""
    delta, why = ad.maybe_derive(sql, key, upstreams)
    if delta is None:
        return None, why
    if delta.join is not None:
        return delta, None
    inner = st.parse(delta.input_sql)
    blocker = _rowwise_blocker(inner, st.physical_tables(inner))
    if blocker:
        return None, f"its aggregate's input {blocker}"
    return delta, None


def _global_blocker(tree: exp.Expression, tables: List[exp.Table]) -> Optional[str]:
    """Reasons that hold whichever upstream changes."""
    if tree.find(exp.Limit) is not None or tree.find(exp.Offset) is not None:
        return "has LIMIT (which rows survive depends on all the others)"
    blocker = nondeterministic_function(tree)
    if blocker:
        return f"calls the non-deterministic function {blocker}()"
    if any(t.args.get("version") for t in tables):
        return "pins an upstream with its own time travel clause"
    if not tables:
        return "reads no upstream table"
    return None


def key_paths(tree: exp.Expression, key: Sequence[str]) -> Tuple[kp.KeyPath, ...]:
    """How change rows of each scan reach the output key; raises NotIncremental, also where
    the key queries would read the upstreams too often (_ReadBudget)."""
    inlined = st.inline_ctes(tree)
    paths = []
    scans = st.occurrences(inlined)
    budget = _ReadBudget(len(scans))
    for occurrence in scans:
        budget.next_walk()
        source = st.change_source(occurrence.upstream, 1, 1)
        query, path = kp.affected_keys(inlined, occurrence.index, key, source, partitions_at=0)
        budget.add(query, 2 if path.whole_partitions else 1)
        paths.append(path)
    budget.close()
    return tuple(paths)


def affected_keys_sql(
    sql: str,
    key: Sequence[str],
    ranges: Mapping[str, Tuple[int, int]],
    new: Mapping[str, int],
    old: Mapping[str, int],
    columns_of: Optional[Callable[[str], Sequence[str]]] = None,
) -> List[str]:
    """One query per changed scan yielding a superset of affected keys.

    The change from the old to the new versions is taken one scan at a time, in scan order
    (telescoping): scan i's change rows meet the scans before it at their new versions and the
    scans after it at their old ones. Every key whose row differs between the two endpoints
    differs across at least one of these steps, and each step's key query bounds its step
    for whatever versions the other scans are read at: so one query per changed scan, where
    pinning all others at the new and then at the old versions took two. A window read by
    whole partitions takes two: the keys its partitions hold before and after its step.
    """
    return _key_parts(st.inline_ctes(st.parse(sql)), key, ranges, new, old, columns_of)


def coarse_keys_sql(
    sql: str,
    key: Sequence[str],
    ranges: Mapping[str, Tuple[int, int]],
    new: Mapping[str, int],
    old: Mapping[str, int],
    columns_of: Callable[[str], Sequence[str]],
    column_types: Optional[Mapping[str, str]] = None,
) -> Optional[Tuple[Coarse, List[str]]]:
    """The coarse key column (coarse.py) and one query per changed scan yielding a superset of
    its affected values: a traced scan's from its change rows alone, any other's by the key
    walk projecting that column. None when no changed scan traces to a key column.
    `column_types`: the model's output column types by lower-case name."""
    inlined = st.inline_ctes(st.parse(sql))
    if len(st.scans(inlined)) < 2:
        return None  # the walk reads the change rows alone, and needs no read of the target
    columns_of = functools.cache(columns_of)  # each value query reads the scope again
    found = coarse_key(inlined, key, columns_of, set(ranges))
    if found is None:
        return None
    kind = (column_types or {}).get(found.column.lower())
    return found, _key_parts(inlined, [found.column], ranges, new, old, columns_of, found, kind)


def coarse_description(sql: str, key: Sequence[str],
                       columns_of: Callable[[str], Sequence[str]]) -> Optional[str]:
    """What `coarse_keys_sql` would restrict by when every upstream moved (explain), or None."""
    inlined = st.inline_ctes(st.parse(sql))
    found = coarse_key(inlined, key, columns_of)
    if found is None:
        return None
    return found.describe({o.index: o.upstream for o in st.occurrences(inlined)})


# The most upstream reads the key queries of one refresh may hold (_ReadBudget). Each key
# query carries the model's path from its scan to the output with every other scan on it, and
# each window read by whole partitions doubles what lies below it, so nested windows over CTEs
# read several times grow it fast: fivetran/dbt_stripe's subscription MRR report (three
# window levels over a cross join of items and months, its CTEs read up to three times) made
# 28 key queries of 1,742 reads, 2.6 MB of SQL that took 20 s to generate and ran the driver
# out of memory after ten minutes, where the model builds in seconds. The largest that replay
# well: 210 reads (TPC-DS Q33, Q56, Q60), 250 (dbt_artifacts' run health).
KEY_WALK_READS_MAX = 512


def _key_parts(inlined: exp.Expression, key: Sequence[str],
               ranges: Mapping[str, Tuple[int, int]], new: Mapping[str, int],
               old: Mapping[str, int], columns_of: Optional[Callable[[str], Sequence[str]]],
               coarse: Optional[Coarse] = None, kind: Optional[str] = None) -> List[str]:
    scans = st.occurrences(inlined)
    parts: List[str] = []
    walked = [occ for occ in scans if occ.upstream in ranges]
    budget = _ReadBudget(len(walked))
    for occ in walked:
        budget.next_walk()
        start, end = ranges[occ.upstream]
        columns = (columns_of(occ.upstream) if columns_of is not None
                   and st.star_on_path(inlined, occ.index) else None)
        source = st.change_source(occ.upstream, start, end, columns)
        pins = {o.index: version for o in scans if o.index != occ.index
                for version in [(new if o.index < occ.index else old).get(o.upstream)]
                if version is not None}
        if coarse is not None and columns_of is not None and occ.index in coarse.traced:
            part = coarse_part(inlined, occ.index, coarse, source, pins, columns_of, kind)
            parts.append(part.sql(dialect=DIALECT))
            budget.add(part)
            continue
        query, path = kp.affected_keys(inlined, occ.index, key, source, pins,
                                       new.get(occ.upstream))
        parts.append(query.sql(dialect=DIALECT))
        budget.add(query)
        if path.whole_partitions:  # the keys its partitions held at the old version as well
            query, _ = kp.affected_keys(inlined, occ.index, key, source, pins,
                                        old.get(occ.upstream))
            parts.append(query.sql(dialect=DIALECT))
            budget.add(query)
    budget.close()
    return parts


class _ReadBudget:
    """Counts the relations the key queries of `walks` scans read (upstreams at a version,
    their change rows) and raises NotIncremental past KEY_WALK_READS_MAX: at the end, or
    as soon as the walks so far, taken as many again for each scan left, would pass it
    (generating the rest alone can take seconds)."""

    def __init__(self, walks: int) -> None:
        self.walks, self.done, self.reads = walks, -1, 0

    def next_walk(self) -> None:
        self.done += 1
        if self.done and self.reads / self.done * self.walks > KEY_WALK_READS_MAX:
            self._refuse(f"about {round(self.reads / self.done * self.walks)}")

    def add(self, query: exp.Expression, times: int = 1) -> None:
        self.reads += times * sum(1 for _ in query.find_all(exp.Table))

    def close(self) -> None:
        if self.reads > KEY_WALK_READS_MAX:
            self._refuse(str(self.reads))

    @staticmethod
    def _refuse(reads: str) -> None:
        raise st.NotIncremental(
            f"would read its upstreams {reads} times to find its affected keys (more than "
            f"{KEY_WALK_READS_MAX}: windows nested over CTEs that are read several times); "
            "a recompute reads them once")


def _global_aggregate(tree: exp.Expression) -> bool:
    """The output is one aggregate row: aggregates and no GROUP BY."""
    select = _output_select(tree)
    # sqlglot makes rank() and dense_rank() aggregate functions too; a window's function
    # aggregates nothing of the SELECT.
    return (select is not None and select.args.get("group") is None
            and any(st.nearest_query(n) is select and not window_function(n)
                    for p in select.expressions for n in p.find_all(exp.AggFunc)))


def key_query_count(paths: Sequence[kp.KeyPath], moved: Collection[str]) -> int:
    """How many key queries `affected_keys_sql` runs when `moved` upstreams changed: one per
    scan of a moved upstream, two where a window is read whole."""
    return sum(2 if path.whole_partitions else 1 for path in paths
               if path.occurrence.upstream in moved)


def _output_select(tree: exp.Expression) -> Optional[exp.Select]:
    while isinstance(tree, (exp.Union, exp.Subquery)):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def keyless_if_null(analysis: Analysis, unique_key: Sequence[str], null_seen: bool,
                    drop: bool = False) -> Tuple[Analysis, bool, bool]:
    """The analysis a refresh plans with, whether it goes keyless, and whether its key is
    matched null-safely (NULL one key value like any other).

    A key inferred from the query alone (none configured) that was found NULL, in this run or
    in a refresh since the last --full-refresh, is kept and matched null-safely: GROUP BY and
    DISTINCT put every NULL in one group, so the key is unique under `<=>`.
    One that rests on dbt tests is dropped (dbt's `unique` test passes any number of NULLs),
    as is any inferred key with `drop` (it repeated in the output even so)."""
    if unique_key or not analysis.key:
        return analysis, False, False
    if drop or (null_seen and analysis.key_source != "query"):
        return without_inferred_key(analysis), True, False
    return analysis, False, null_seen


def through_proven_keys(sql: str, tested_key: Sequence[str],
                        upstream_keys: Optional[Mapping[str, Tuple[str, ...]]],
                        recorded: Mapping[str, Tuple[str, ...]],
                        configured: Mapping[str, Tuple[str, ...]],
                        null_seen: bool) -> Optional[Tuple[Analysis, bool, bool]]:
    """For a model that found no key with its upstream models' `configured` keys: its
    analysis through the keys their queries prove too (`recorded` in their commits), as
    keyless_if_null gives it; None when there are none or that gives no key either."""
    if not recorded:
        return None
    keyed = analyze(sql, (), tested_key, upstream_keys, {**recorded, **configured})
    return keyless_if_null(keyed, (), null_seen=null_seen) if keyed.key else None


_KEY_SOURCES = {"tests": "its tests declare",
                "upstream tests": "inferred through the keys its upstreams' tests declare"}


def without_inferred_key(analysis: Analysis) -> Analysis:
    """The analysis of a model whose inferred key proved NULL in its output (a NULL group):
    no key, so no replay rule that needs one; it recomputes in full, keyless."""
    key = ", ".join(analysis.key)
    return replace(
        analysis, key=(), key_outer=(), key_paths=(), delta=None, delta_join=None,
        intermediate=None,
        incremental_reason=(
            f"has no unique_key, and the one {_KEY_SOURCES[analysis.key_source]} ({key}) is "
            f"NULL or repeated in some output rows; set unique_key to columns that identify "
            f"one row to replay; without one it tries that key again after a --full-refresh"
            if analysis.key_source in _KEY_SOURCES else
            f"has no unique_key, and the one inferred from the query ({key}) repeats in some "
            f"output rows; set unique_key to columns that identify one row to replay; without "
            f"one each refresh tries the inferred key again and recomputes in full when the "
            f"change reaches a repeated key"))


def key_errors(tree: exp.Expression, unique_key: Sequence[str]) -> List[str]:
    """A configured unique_key that the query proves wrong."""
    select = _output_select(tree)
    if select is None or not unique_key:
        return []
    outputs = {p.alias_or_name.lower(): p for p in select.expressions if not p.is_star}
    star = any(p.is_star for p in select.expressions)
    errors = []
    for column in unique_key:
        projection = outputs.get(column.lower())
        if projection is None and not star:
            errors.append(f"unique_key column '{column}' is not an output column of the model "
                          f"(its columns: {', '.join(p.alias_or_name for p in select.expressions)})")
        elif projection is not None and any(
                a.find_ancestor(exp.Select) is select for a in projection.find_all(exp.AggFunc)):
            errors.append(f"unique_key column '{column}' is an aggregate "
                          f"({projection.unalias().sql(dialect=DIALECT)}), which cannot identify "
                          "an output row")
    return errors


# Shorter run values could match ordinary text of the model.
_RUN_VALUE_MIN = 8


def fingerprint(analysis: Analysis, parts: Mapping[str, Any],
                run_values: Sequence[str] = ()) -> str:
    """The model's identity across runs: its normalised SQL and result-shaping configs, with
    the invocation's own values (run_started_at, invocation_id, rendered into audit columns)
    replaced by a placeholder, so a model that writes them is not 'changed' by every run."""
    sql = analysis.normalized_sql
    for value in sorted({v for v in run_values if len(v) >= _RUN_VALUE_MIN}, key=len, reverse=True):
        sql = sql.replace(value, "<run value>")
    payload = json.dumps({"sql": sql, **parts}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
