"""Deciding what one run of one model does (pure: no I/O, unit-tested without Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Dict, Mapping, Optional, Sequence

from dbt.adapters.spark_batch_refresh.sql.analysis import Analysis, key_query_count
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig, format_duration
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.plan.cost import Choice, CostMemory, choose
from dbt.adapters.spark_batch_refresh.plan.gaps import Gap
from dbt.adapters.spark_batch_refresh.plan.strategy import (
    BACKFILL, FULL, NOOP, OVERWRITE, REPLAY, SKIP, WRITING_ACTIONS, Strategy, delta_upkeep,
    intermediate_upkeep, replay_rule)

# Test and benchmark aid: "structural" makes refresh_mode='auto' replay whenever the model can
# and recompute in full otherwise, without estimating costs (docs/development.md).
AUTO_ENV = "BATCH_REFRESH_AUTO"


@dataclass(frozen=True)
class UpstreamPoint:
    """A version of an upstream Delta table and when it was committed."""

    version: int
    timestamp: datetime
    table_id: Optional[str] = None  # Delta table id: changes when a table is recreated

    def to_json(self) -> Dict[str, object]:
        data: Dict[str, object] = {"version": self.version, "timestamp": self.timestamp.isoformat()}
        if self.table_id:
            data["table_id"] = self.table_id
        return data

    @staticmethod
    def from_json(data: Mapping[str, object]) -> "UpstreamPoint":
        return UpstreamPoint(
            int(data["version"]),  # type: ignore[arg-type]
            datetime.fromisoformat(str(data["timestamp"])),
            str(data["table_id"]) if data.get("table_id") else None,
        )


def moved_ranges(consumed: Mapping[str, int],
                 points: Mapping[str, Optional[UpstreamPoint]]) -> Dict[str, tuple[int, int]]:
    """The change-feed version range (first, last) of each upstream whose point lies past the
    version consumed; an upstream without a point or never consumed has none."""
    return {u: (consumed[u] + 1, p.version) for u, p in points.items()
            if p is not None and u in consumed and p.version > consumed[u]}


@dataclass(frozen=True)
class ModelState:
    """The refresh-state row of one model, as far as planning needs it."""

    fingerprint: str
    consumed: Mapping[str, UpstreamPoint]
    phase: str = "idle"
    last_refresh_at: Optional[datetime] = None


@dataclass(frozen=True)
class Plan:
    action: str
    reason: str
    mode: str  # "incremental" | "full" | "none"
    pinned: Mapping[str, UpstreamPoint] = field(default_factory=dict)
    consumed: Mapping[str, UpstreamPoint] = field(default_factory=dict)
    next_due: Optional[datetime] = None
    fallback_reason: Optional[str] = None
    # refresh_mode='auto': every candidate's estimate (cost.py) and the change's size in rows
    choice: Optional[Choice] = None
    change_rows: Optional[int] = None
    # A replay's rule (strategy.replay_rule), set once the model's columns are known.
    rule: Optional[Strategy] = None
    # An append's change rows, when planning already counted them in the change feed (and
    # found inserts alone): the append's guard need not count them again.
    append_rows: Optional[int] = None

    @property
    def strategy(self) -> Strategy:
        """The one name of what this plan does (strategy.py)."""
        return self.rule if self.action == REPLAY and self.rule else Strategy.of_action(self.action)

    def ranges(self) -> Dict[str, tuple[int, int]]:
        """The change-feed version range of each upstream that moved."""
        return moved_ranges({u: p.version for u, p in self.consumed.items()}, self.pinned)

    @property
    def writes(self) -> bool:
        return self.action in WRITING_ACTIONS

    def versions_from(self) -> Dict[str, int]:
        return {u: p.version for u, p in self.consumed.items()}

    def versions_to(self) -> Dict[str, int]:
        return {u: p.version for u, p in self.pinned.items()}


def choose_mode(model: str, config: BatchRefreshConfig, analysis: Analysis,
                non_delta: tuple[str, ...]) -> tuple[str, Optional[str]]:
    """(mode, fallback reason): how changes will be applied when the model refreshes."""
    if analysis.key_errors:
        raise BatchRefreshUserError(
            model, "its unique_key is wrong for this model",
            [f"{e}." for e in analysis.key_errors]
            + ["Fix: set unique_key to the output column(s) that identify a row (for a GROUP BY "
               "model, its group keys; or leave it unset to infer them)."],
        )
    if config.refresh_mode in ("full", "overwrite"):
        return "full", f"refresh_mode='{config.refresh_mode}'"
    blocker: Optional[str] = None
    if non_delta:
        blocker = f"upstream {', '.join(non_delta)} is not a Delta table (no change feed)"
    elif not analysis.key and analysis.rowwise:
        blocker = None  # keyless row-wise model: inserts replay as appends
    elif analysis.delta is not None and not analysis.key and not delta_upkeep(config, analysis):
        blocker = ("the model is a global aggregate (no GROUP BY; aggregate_upkeep='delta' "
                   "maintains it from the change rows instead)")
    elif analysis.incremental_reason and not intermediate_upkeep(config, analysis):
        blocker = f"the model {analysis.incremental_reason}"
    if blocker is None:
        return "incremental", None
    if config.refresh_mode == "incremental":
        raise BatchRefreshUserError(
            model,
            "refresh_mode='incremental' but the model cannot replay incrementally",
            [f"{blocker}.",
             "Fix: use refresh_mode='auto' (falls back to a full recompute) or 'full'."],
        )
    return "full", blocker


def plan_run(
    *,
    model: str,
    config: BatchRefreshConfig,
    analysis: Analysis,
    fingerprint: str,
    state: Optional[ModelState],
    latest: Mapping[str, Optional[UpstreamPoint]],
    target_exists: bool,
    full_refresh: bool,
    force: bool,
    now: datetime,
    memory: CostMemory = CostMemory(),
    change_rows: Optional[int] = None,
    by_cost: bool = True,
    inserts: bool = False,
    sidecar_behind: bool = False,
    inserts_alone: bool = True,
) -> Plan:
    non_delta = tuple(sorted(u for u, p in latest.items() if p is None))
    mode, fallback = choose_mode(model, config, analysis, non_delta)
    pinned = {u: p for u, p in latest.items() if p is not None}

    def backfill(reason: str) -> Plan:
        return Plan(BACKFILL, reason, "full", pinned=pinned, fallback_reason=fallback)

    if full_refresh:
        return backfill("--full-refresh")
    if state is None:
        return backfill("first run")
    if not target_exists:
        return backfill("target table is missing")
    if state.fingerprint != fingerprint:
        return rebuild_or_fail(model, config, backfill(""),
                               changed="the model changed since its last build (SQL or unique_key)")
    for upstream, point in pinned.items():
        seen = state.consumed.get(upstream)
        if seen is None:
            return backfill(f"new upstream {upstream}")
        if point.version < seen.version:
            return rebuild_or_fail(model, config, backfill(""),
                                   gap=Gap("went_back", upstream, seen.version, point.version))
        if (point.version == seen.version and None not in (point.timestamp, seen.timestamp)
                and point.timestamp != seen.timestamp):
            # Dropped and created again up to the same version (dbt-spark's `table`
            # materialization does that on every run unless file_format='delta'): the same
            # number, another commit. Taken for "nothing moved" it left the model stale.
            return rebuild_or_fail(model, config, backfill(""),
                                   gap=Gap("same_version", upstream, seen.version, point.version))

    consumed = {u: state.consumed[u] for u in pinned}
    moved = {u: p for u, p in pinned.items() if p.version > consumed[u].version}
    if non_delta:
        # No versions to compare: every run recomputes, the interval still gates.
        moved_since = state.last_refresh_at or now
        due = _due(config, [moved_since], now)
        if due is not None and not force:
            return _skip(config, due, consumed)
        return _by_cost(Plan(FULL, f"upstream {', '.join(non_delta)} has no versions to compare",
                             mode, pinned=pinned, consumed=consumed, fallback_reason=fallback),
                        config, memory, None, by_cost)
    if not moved:
        return Plan(NOOP, "no upstream changed", "none", consumed=consumed)
    due = _due(config, [consumed[u].timestamp for u in moved], now)
    if due is not None and not force:
        return _skip(config, due, consumed)
    action = REPLAY if mode == "incremental" else FULL
    if (action == REPLAY and not analysis.key and analysis.rowwise and not inserts_alone
            and config.refresh_mode == "auto"):
        # A keyless model replays by appending the model over the inserted rows; an update or
        # delete has no key to be applied by. `auto` recomputes instead of failing the run (a
        # `table` would have built); refresh_mode='incremental' keeps the staging's error.
        action, mode = FULL, "full"
        fallback = (f"the model has no unique_key and {', '.join(sorted(moved))} has updated or "
                    "deleted rows (a keyless model replays inserts alone)")
    summary = ", ".join(f"{u} v{consumed[u].version}->v{p.version}" for u, p in moved.items())
    key_queries = (key_query_count(analysis.key_paths, moved) if action == REPLAY
                   and replay_rule(analysis, config, moved) is Strategy.AFFECTED_KEYS else 1)
    return _by_cost(Plan(action, f"upstream moved: {summary}", mode, pinned=pinned,
                         consumed=consumed, fallback_reason=fallback),
                    config, memory, change_rows, by_cost, key_queries, inserts, sidecar_behind)


def _by_cost(plan: Plan, config: BatchRefreshConfig, memory: CostMemory,
             change_rows: Optional[int], by_cost: bool, key_queries: int = 1,
             inserts: bool = False, sidecar_behind: bool = False) -> Plan:
    """The structural plan's write chosen by refresh_mode: `overwrite` always rewrites;
    `auto` takes the cheapest estimate (cost.py); `incremental` and `full` keep their action."""
    if config.refresh_mode == "overwrite":
        return replace(plan, action=OVERWRITE, change_rows=change_rows)
    if config.refresh_mode != "auto" or not by_cost:
        return replace(plan, change_rows=change_rows)
    blocker = None if plan.action == REPLAY else (plan.fallback_reason or plan.reason)
    choice = choose(memory, change_rows, blocker, key_queries, inserts, sidecar_behind)
    mode = "incremental" if choice.strategy == REPLAY else "full"
    rows = "unknown" if change_rows is None else f"{change_rows:,}"
    return replace(plan, action=choice.strategy, mode=mode, choice=choice, change_rows=change_rows,
                   reason=f"{plan.reason}; by cost ({rows} change rows): {choice.describe()}")


def closed_gate(*, config: BatchRefreshConfig, upstreams: Sequence[str],
                state: Optional[ModelState], fingerprint: str, now: datetime) -> Optional[Plan]:
    """A skip decided from the target's log alone, before any upstream is read.

    The gate opens once the oldest consumed commit among the *moved* upstreams is
    `refresh_interval` old; while even the oldest consumed commit of *all* upstreams is younger,
    it is closed whichever of them moved, so reading their history cannot change the outcome.
    (A model whose upstreams did not move then reports this skip rather than a no-op; both
    write nothing.) Everything a skip would not act on anyway (an upstream recreated or
    dropped) is found by the first run after the gate opens.
    """
    if config.refresh_interval_s is None or state is None or state.fingerprint != fingerprint:
        return None
    if not upstreams or any(u not in state.consumed for u in upstreams):
        return None
    consumed = {u: state.consumed[u] for u in upstreams}
    due = _due(config, [p.timestamp for p in consumed.values()], now)
    if due is None:
        return None
    return _skip(config, due, consumed)


def _due(config: BatchRefreshConfig, consumed_times: list[datetime], now: datetime) -> Optional[datetime]:
    """When the gate opens, or None if it is open now.

    The target reflects its upstreams as of the consumed commits; it is refreshed once the
    oldest consumed commit among the moved upstreams is `refresh_interval` old (a target lag).
    """
    if config.refresh_interval_s is None or not consumed_times:
        return None
    opens_at = min(consumed_times) + timedelta(seconds=config.refresh_interval_s)
    return None if now >= opens_at else opens_at


def _skip(config: BatchRefreshConfig, due: datetime,
          consumed: Mapping[str, UpstreamPoint]) -> Plan:
    return Plan(SKIP, _skip_reason(config, due), "none", consumed=consumed, next_due=due)


def _skip_reason(config: BatchRefreshConfig, due: datetime) -> str:
    interval = format_duration(config.refresh_interval_s or 0)
    return f"gate closed (refresh_interval {interval}); next due {due.isoformat(sep=' ', timespec='seconds')}"


def rebuild_or_fail(model: str, config: BatchRefreshConfig, plan: Plan, *,
                    gap: Optional[Gap] = None, changed: Optional[str] = None) -> Plan:
    """The one home of on_change_feed_gap and on_model_change: the plan turned into a backfill
    at its pinned versions, or the error that leaves the target as it is."""
    if gap is not None:
        if config.on_change_feed_gap == "fail":
            raise gap_error(model, gap)
        reason = f"change feed gap: {gap.describe()}"
    else:
        what = changed or "the model changed"
        if config.on_model_change == "fail":
            raise model_change_error(model, what)
        reason = ("model changed since the last build" if what.startswith("the model changed since")
                  else f"{what}; rebuilding")
    return Plan(BACKFILL, reason, "full", pinned=plan.pinned, fallback_reason=plan.fallback_reason)


def gap_error(model: str, gap: Gap) -> BatchRefreshUserError:
    return BatchRefreshUserError(
        model,
        "the upstream change feed has a gap, so the change cannot be replayed; the target "
        "was not changed",
        [gap.describe() + ".",
         f"Fix: run `dbt run --select {model} --full-refresh` to rebuild from a new snapshot, "
         "or set on_change_feed_gap='rebuild' to do that automatically."],
    )


def model_change_error(model: str, what: str) -> BatchRefreshUserError:
    return BatchRefreshUserError(
        model,
        f"{what}; on_model_change='fail' keeps the target as it is",
        [f"Fix: run `dbt run --select {model} --full-refresh` to rebuild it, or set "
         "on_model_change='rebuild'."],
    )
