"""`dbt run-operation batch_refresh_explain`: how a model will refresh, and why (read-only)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Mapping, Optional, Tuple

from sqlglot import exp
from sqlglot.lineage import lineage

from dbt.adapters.spark_batch_refresh.sql import aggdelta as ad
from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import deltajoin as dj
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.plan import cost
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint, choose_mode
from dbt.adapters.spark_batch_refresh.plan.strategy import (
    Strategy, delta_upkeep, intermediate_upkeep, replay_rule)


def key_sources(sql: str, key: Tuple[str, ...]) -> Dict[str, List[str]]:
    """Upstream columns each output key column is computed from (sqlglot's column lineage).

    These are the scans the recompute's `key IN (affected keys)` restriction reaches: Spark
    pushes the predicate through projections, filters, GROUP BY keys and join keys.
    """
    found: Dict[str, List[str]] = {}
    for column in key:
        try:
            root = lineage(column, sql, None, dialect=sa.DIALECT)
        except Exception:  # noqa: BLE001 - lineage is best effort; explain still prints the rest
            continue
        sources: List[str] = []
        for node in root.walk():
            if isinstance(node.expression, exp.Table):
                sources.append(f"{sa.table_name(node.expression)}.{node.name.split('.')[-1]}")
            elif isinstance(node.expression, exp.Placeholder) and isinstance(node.source, exp.Select):
                scans = [t for t in node.source.find_all(exp.Table) if t.name]
                if len(scans) == 1:
                    sources.append(f"{sa.table_name(scans[0])}.{node.name.split('.')[-1]}")
        found[column] = sorted(set(sources))
    return found


@dataclass(frozen=True)
class UpstreamInfo:
    name: str
    latest: Optional[UpstreamPoint]
    change_feed: Optional[bool]
    consumed: Optional[int]


@dataclass(frozen=True)
class LastRefresh:
    """The model's newest refresh, as its commit recorded it, for the cost lines."""

    action: str
    estimate_s: Optional[float]
    seconds: Optional[float]
    memory: cost.CostMemory
    # the model keeps a sidecar this refresh left behind (strategy.sidecar_behind)
    sidecar_behind: bool = False


_RULE_WORDS = {
    Strategy.ROWWISE: "row-wise: the model over the change rows alone, netted",
    Strategy.DELTA_JOIN: "delta join: the model over each moved upstream's change rows, netted",
    Strategy.DELTA_AGGREGATE: "delta aggregate: old state + signed change rows",
    Strategy.AFFECTED_KEYS: "affected-key replay of the change feed",
    Strategy.APPEND: "append: keyless row-wise model, inserts only",
    Strategy.INTERMEDIATE: ("intermediate aggregate: its GROUP BY subquery kept by delta in a "
                            "sidecar, the rest of the model recomputed over those groups"),
}


def render(model: str, config: BatchRefreshConfig, analysis: sa.Analysis,
           upstreams: List[UpstreamInfo], phase: Optional[str],
           last: Optional[LastRefresh] = None, change_rows: Optional[int] = None,
           views: Tuple[str, ...] = (), coarse: Optional[str] = None) -> str:
    non_delta = tuple(u.name for u in upstreams if u.latest is None)
    try:
        mode, fallback = choose_mode(model, config, analysis, non_delta)
        error = None
    except BatchRefreshUserError as exc:
        mode, fallback, error = "error", None, str(exc)
    lines = [f"batch_refresh explain: {model}"]
    key_queries = 1
    if error:
        lines.append(f"  mode:       cannot refresh: {error}")
    elif mode == "incremental":
        moved = [u.name for u in upstreams if u.latest is not None and u.consumed is not None
                 and u.latest.version > u.consumed] or [u.name for u in upstreams]
        rule = replay_rule(analysis, replace(config, unique_key=analysis.key), moved)
        queries = ""
        if rule is Strategy.AFFECTED_KEYS:
            key_queries = sa.key_query_count(analysis.key_paths, moved)
            queries = f", {key_queries} key quer{'y' if key_queries == 1 else 'ies'}"
        lines.append(f"  mode:       incremental ({_RULE_WORDS[rule]}{queries}; strategy {rule})")
    elif config.refresh_mode == "overwrite":
        lines.append("  mode:       overwrite (recomputed and rewritten in one commit, as a `table`; "
                     "refresh_mode='overwrite')")
    else:
        lines.append(f"  mode:       full recompute (reason: {fallback})")
    lines.append(f"  refresh_mode config: {config.refresh_mode}")
    lines.extend(_cost_lines(config, mode, fallback, last, change_rows, key_queries))
    # an outer join's NULL-extended key beside the preserved one's (keyinfer.Inferred.outer_key)
    outer = (f"; {', '.join(analysis.key_outer)} NULL where an outer join matches no row: matched "
             f"null-safely" if analysis.key_outer else "")
    if config.unique_key:
        lines.append(f"  unique_key: {', '.join(config.unique_key)} (configured)")
    elif analysis.key and analysis.key_source == "tests":
        lines.append(f"  unique_key: {', '.join(analysis.key)} (declared by the model's tests)")
    elif analysis.key and analysis.key_source == "upstream tests":
        lines.append(f"  unique_key: {', '.join(analysis.key)} (inferred from the query and "
                     f"the keys its upstreams' tests declare{outer})")
    elif analysis.key and config.nullable_key:
        lines.append(f"  unique_key: {', '.join(analysis.key)} (inferred from the query; NULL "
                     f"in some rows, a group of its own: matched null-safely)")
    elif analysis.key and analysis.key_through:
        lines.append(f"  unique_key: {', '.join(analysis.key)} (inferred from the query and "
                     f"the keys of its upstream batch_refresh models "
                     f"{', '.join(analysis.key_through)}{outer})")
    elif analysis.key:
        lines.append(f"  unique_key: {', '.join(analysis.key)} (inferred from the query{outer})")
    else:
        lines.append("  unique_key: none")
    lines.append(f"  state:      {phase or 'never refreshed'}")
    if views:
        lines.append(f"  views:      {', '.join(views)} (read through: the tables beneath are "
                     "its upstreams)")
    lines.append("  upstreams:")
    for info in upstreams:
        if info.latest is None:
            lines.append(f"    {info.name}: missing, or not a Delta table (no versions, no change feed)")
            continue
        behind = ("" if info.consumed is None else
                  f", consumed v{info.consumed} ({info.latest.version - info.consumed} behind)")
        feed = {True: "change feed on", False: "CHANGE FEED OFF", None: "change feed ?"}[info.change_feed]
        lines.append(f"    {info.name}: Delta v{info.latest.version}, {feed}{behind}")
    middle = analysis.intermediate
    if mode == "incremental" and delta_upkeep(config, analysis):
        lines.extend(_delta_lines(analysis))
    elif mode == "incremental" and middle is not None and intermediate_upkeep(config, analysis):
        if middle.outer_partition and analysis.key:
            over = ("the groups of the partitions (by "
                    f"{', '.join(o for _, o in middle.outer_partition)}) the change touches, "
                    "merged by key")
        elif middle.outer_keys_sql is not None and analysis.key:
            over = (f"all its groups for the outer groups (by {', '.join(analysis.key)}) its "
                    "touched groups fall in before and after the change, merged by key")
        else:
            over = "all its groups, merged as a difference"
        # A model replayed through its split form has no reason of its own left to show.
        above = (f" (above it: {analysis.incremental_reason})"
                 if analysis.incremental_reason else "")
        lines.append(f"  intermediate: the subquery grouped by ({', '.join(middle.keys)}) is kept "
                     f"in a sidecar from the signed change rows; the model's rest{above} is "
                     f"recomputed over {over}")
    elif mode == "incremental" and analysis.key:
        lines.append("  key paths (how a changed upstream row reaches the output keys):")
        joined = analysis.delta_join
        for path in analysis.key_paths:
            rule = "row-wise" if analysis.rowwise else path.rule
            if joined is not None and path.occurrence.upstream in joined.outer:
                lines.append(f"    - [{dj.RULE}] {path.occurrence.upstream} (as "
                             f"{path.occurrence.alias}): on the NULL-supplying side of an outer "
                             "join; the preserved rows whose join key its change rows touch, "
                             "joined to it at its old and its new version (the matched/unmatched "
                             "transitions), every other upstream read at a pinned version")
                continue
            if joined is not None and path.occurrence.upstream not in joined.fixed:
                lines.append(f"    - [{dj.RULE}] {path.occurrence.upstream} (as "
                             f"{path.occurrence.alias}): its signed change rows through the "
                             "model, every other upstream read at a pinned version")
                continue
            if joined is not None:
                rule += ", as it is on a NULL-supplying side"
            lines.append(f"    - [{rule}] {path.describe()}")
        if coarse and not analysis.rowwise and joined is None:
            # sql/coarse.py: the key query of these scans reads their change rows (joined
            # along a chain of equalities), not the model
            lines.append(f"  coarse key: {coarse} (recomputed for those values; the target's "
                         "other rows with them deleted)")
        if analysis.rowwise:
            lines.append("  staging:    the model over the change rows alone, netted (row-wise: "
                         "the upstream table is not scanned; map or variant output columns "
                         "fall back to the recompute)")
        elif joined is not None:
            lines.append(
                "  staging:    delta join: the sum over the moved upstreams of the model with "
                "that upstream replaced by its change rows (those before it in name order at "
                "their new version, those after it at their old), netted by key; the moved "
                "upstream itself is not scanned"
                + (f". A run in which {', '.join(sorted(joined.fixed))} moved recomputes its "
                   "affected keys instead (on a NULL-supplying side that is not one upstream "
                   "joined by an equality with the preserved side)"
                   if joined.fixed else ""))
        else:
            sources = key_sources(analysis.normalized_sql, analysis.key)
            reached = sorted({s for cols in sources.values() for s in cols})
            lines.append("  pushdown:   recompute restricted to `(" + ", ".join(analysis.key)
                         + ") IN (affected keys)`" + (
                             f", which reaches the scans of {', '.join(reached)}" if reached
                             else ""))
    elif analysis.incremental_reason and mode != "incremental":
        lines.append(f"  why not incremental: the model {analysis.incremental_reason}")
        if middle is not None:
            lines.append(f"  intermediate aggregate: the model qualifies (a subquery grouped by "
                         f"{', '.join(middle.keys)}); aggregate_upkeep='delta' keeps it in a "
                         "sidecar and replays the rest over its groups")
    if (mode == "incremental" and analysis.delta_join is None and analysis.delta_join_reason
            and analysis.delta is None):
        lines.append(f"  no delta join: the model {analysis.delta_join_reason}")
    if mode == "incremental" and analysis.delta is None and analysis.delta_reason:
        lines.append(f"  no delta aggregate: the model {analysis.delta_reason}")
    elif mode == "incremental" and not delta_upkeep(config, analysis) and analysis.delta:
        lines.append("  delta aggregate: the model qualifies; aggregate_upkeep='delta' maintains "
                     "it from the change rows and a sidecar instead of recomputing its groups")
    elif mode != "incremental" and analysis.delta is not None and not delta_upkeep(config, analysis):
        lines.append("  delta aggregate: the model qualifies; aggregate_upkeep='delta' maintains "
                     "it from the change rows and a sidecar")
    return "\n".join(lines)


def _cost_lines(config: BatchRefreshConfig, mode: str, fallback: Optional[str],
                last: Optional[LastRefresh], change_rows: Optional[int],
                key_queries: int = 1) -> List[str]:
    """What the next refresh would write and why (refresh_mode='auto'), and the last refresh's
    estimate against what it took."""
    lines = []
    if config.refresh_mode == "auto" and mode != "error":
        memory = last.memory if last is not None else cost.CostMemory()
        choice = cost.choose(memory, change_rows,
                             None if mode == "incremental" else (fallback or "cannot replay"),
                             key_queries, sidecar_behind=last is not None and last.sidecar_behind)
        rows = "unknown" if change_rows is None else f"{change_rows:,}"
        lines.append(f"  next write: {choice.strategy}, by cost ({rows} change rows waiting): "
                     f"{choice.describe()}")
    if last is not None:
        took = "not measured" if last.seconds is None else f"{last.seconds:.1f}s"
        est = "" if last.estimate_s is None else f"estimated {last.estimate_s:.1f}s, "
        lines.append(f"  last refresh: {last.action}, {est}took {took} (to its commit)")
    return lines


def _delta_lines(analysis: sa.Analysis) -> List[str]:
    delta = analysis.delta
    assert delta is not None
    kinds = sorted({a.kind.replace("_star", "(*)") for a in delta.aggregates})
    groups = (f"grouped by {', '.join(delta.keys)}" if delta.keys
              else "summed into its one row (a global aggregate)")
    extremes = any(a.kind in ("min", "max") for a in delta.aggregates)
    outer = sorted(delta.join.outer) if delta.join is not None else []
    source = (f"{delta.upstreams[0]}: its signed change rows" if delta.join is None else
              f"{', '.join(delta.upstreams)}: the signed change rows of their join "
              f"([{dj.RULE}]: each moved upstream's change rows, the others pinned"
              + (f"; {', '.join(outer)}, on a NULL-supplying side, by the preserved rows "
                 "whose join key its change rows touch, at its old and new version"
                 if outer else "") + ")")
    return [
        "  key paths (how a changed upstream row reaches the output keys):",
        f"    - [{ad.RULE}] {source} {groups}, "
        f"added to the state of the last refresh ({', '.join(kinds)})",
        "  staging:    per-group state in a sidecar Delta table next to the state table "
        "(written before the target); "
        + ("the upstream is not scanned" if delta.join is None else
           "a moved upstream is not scanned (unless on a NULL-supplying side), its join "
           "partners are (pinned)")
        + ("; min/max read it only for groups whose old extreme was deleted" if extremes else "")
        + ". A float or double sum or average recomputes its affected groups instead (exact, "
        "no drift); a decimal average is Spark's decimal division of its sum by its count.",
    ]


def props_change_feed(props: Mapping[str, str]) -> bool:
    return props.get("delta.enableChangeDataFeed", "false").lower() == "true"
