"""The sidecar of a delta-maintained aggregate (aggdelta.py): built, advanced, recovered.

Delta cannot commit the sidecar and the target together, so the sidecar's commits carry the
plan id of the refresh that wrote them (`userMetadata`), and a refresh writes the sidecar first,
then the target. A run reads the sidecar at the version written by the plan of the target's
newest refresh, never simply its latest: a sidecar ahead of the target (a run that died or lost
a race between the two commits) is restored to that version before it is advanced again (one
extra commit, only on recovery). A sidecar that cannot be matched with the target (missing, or
its version gone) is rebuilt from the upstream, and that refresh recomputes its affected groups
as a model without delta upkeep would.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.sql import aggdelta as ad
from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.storage.delta import DeltaReader
from dbt.adapters.spark_batch_refresh.failpoints import decimal_average_rows, fail_point
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, Run
from dbt.adapters.spark_batch_refresh.storage.session_confs import USER_METADATA, SessionConfs
from dbt.adapters.spark_batch_refresh.sql.rewrite import (
    MINUS_CHANGES, PLUS_CHANGES, change_rows_sql, over_changes, pin_versions)

META_KEY = "batch_refresh_sidecar"
# The sidecar version of the target's newest refresh is the newest one, or one behind after a
# crash between the two commits; further back only after several lost races in a row.
_LOOKBACK = 20


@dataclass(frozen=True)
class AggRun:
    """The refresh the sidecar is advanced for."""

    schema: str  # the state schema, where the sidecar lives
    sidecar: str
    plan_id: str
    refresh: int
    previous_plan: Optional[str]  # plan of the target's newest refresh (its sidecar version)


@dataclass
class AggStaged:
    state: str  # cached view: the new state of every touched group
    views: List[str]
    # The new state of every group, as a relation (what an intermediate's outer part reads).
    whole: str
    # The touched groups' state before the change, as a relation, for an intermediate whose
    # outer part aggregates again (None otherwise, or when it is not readable).
    before: Optional[str] = None
    # A touched group is past the rows its decimal average is exact for from the state
    # (aggdelta.DecimalAverage): the sidecar is advanced, the groups are recomputed.
    inexact: bool = False


class SidecarUpkeep:
    def __init__(self, fetch: Fetch, run: Run, reader: DeltaReader) -> None:
        self._fetch, self._run, self._reader = fetch, run, reader

    def state_types(self, agg: ad.DeltaAggregate,
                    pinned: Mapping[str, int]) -> Tuple[Dict[str, str], Optional[str]]:
        """The sidecar's column types, and why delta upkeep is ruled out by them (or None)."""
        sql = agg.state_sql(pin_versions(agg.input_sql, pinned))
        types = {n: t for n, t in self._reader.describe(sql)}
        return types, agg.type_problem(types)

    def build(self, agg: ad.DeltaAggregate, ctx: AggRun, pinned: Mapping[str, int]) -> Optional[str]:
        """The whole state from the upstream at the pinned versions (backfill, recompute).
        Returns the version written, as a relation to read the whole state from
        (None when the sidecar's newest commit is not this plan's: a concurrent refresh)."""
        body = agg.state_sql(pin_versions(agg.input_sql, pinned))
        self._run(f"CREATE SCHEMA IF NOT EXISTS {ctx.schema}")
        with SessionConfs(self._run, {USER_METADATA: _metadata(ctx, agg)}):
            self._run(f"CREATE OR REPLACE TABLE {ctx.sidecar} USING delta TBLPROPERTIES ("
                      "'delta.enableChangeDataFeed' = 'false', "
                      "'delta.enableDeletionVectors' = 'true') AS " + body)
        fail_point("after_sidecar")
        written = _version_of(self._reader.history(ctx.sidecar, 1), ctx.plan_id,
                              state_definition(agg))
        return None if written is None else f"{ctx.sidecar} VERSION AS OF {written}"

    def replay(self, agg: ad.DeltaAggregate, ctx: AggRun, ranges: Mapping[str, Tuple[int, int]],
               pinned: Mapping[str, int], types: Mapping[str, str],
               view: str) -> Optional[AggStaged]:
        """Advance the sidecar by the change rows; None when it does not match the target."""
        entries = self._history(ctx.sidecar)
        if entries is None:
            return None
        delta = f"{view}_delta"
        kept = state_definition(agg)
        mine = _version_of(entries, ctx.plan_id, kept)
        base = _version_of(entries, ctx.previous_plan, kept) if ctx.previous_plan else None
        if mine is None and base is None:
            return None
        views: List[str] = []
        plus, minus = self._signed_input(agg, ranges, pinned, view, views)
        self._run(f"CACHE TABLE {delta} AS\n{agg.delta_sql(plus, minus)}")
        views.append(delta)
        state = f"{view}_state"
        if mine is not None:
            # Written by this plan already (a resumed refresh that restages): read it back.
            self._run(f"CACHE TABLE {state} AS\n{_written(agg, delta, ctx.sidecar, mine)}")
            before = (agg.state_before(f"{ctx.sidecar} VERSION AS OF {base}", state)
                      if base is not None and agg.outer_keys_sql is not None else None)
            return AggStaged(state, views + [state], f"{ctx.sidecar} VERSION AS OF {mine}",
                             before, self.inexact(agg, state))
        assert base is not None
        if base != int(entries[0]["version"]):
            self._run(f"RESTORE TABLE {ctx.sidecar} TO VERSION AS OF {base}")
        new = f"{view}_new"
        self._run(f"CACHE TABLE {new} AS\n"
                  f"{agg.new_state_sql(delta, f'{ctx.sidecar} VERSION AS OF {base}', types)}")
        views.append(new)
        extremes = None
        inexact = agg.inexact_sql(decimal_average_rows()) or "false"
        counts = self._fetch(f"SELECT count(*) AS groups, coalesce(sum(CASE WHEN {ad.RECOMPUTE} "
                             f"THEN 1 ELSE 0 END), 0) AS flagged, coalesce(sum(CASE WHEN "
                             f"{inexact} THEN 1 ELSE 0 END), 0) AS inexact FROM {new}")[0]
        if int(counts["flagged"]):
            extremes = f"{view}_extremes"
            source = pin_versions(agg.input_sql, pinned)
            self._run(f"CACHE TABLE {extremes} AS\n{agg.extremes_sql(source, new)}")
            views.append(extremes)
        self._run(f"CACHE TABLE {state} AS\n{agg.final_state_sql(new, extremes)}")
        views.append(state)
        with SessionConfs(self._run, {USER_METADATA: _metadata(ctx, agg)}):
            if not int(counts["groups"]):
                # No group touched (the upstream moved without changing a row of the input),
                # yet the plan's sidecar commit must exist: an empty blind INSERT commits.
                self._run(f"INSERT INTO {ctx.sidecar} SELECT * FROM {ctx.sidecar} WHERE false")
            elif agg.keys:
                self._run(agg.merge_sidecar_sql(ctx.sidecar, state))
            else:  # one row, always there: a blind overwrite costs less than a MERGE
                self._run(f"INSERT OVERWRITE {ctx.sidecar} SELECT * FROM {state}")
        fail_point("after_sidecar")
        whole = agg.whole_state(f"{ctx.sidecar} VERSION AS OF {base}", state)
        before = agg.old_state(new) if agg.outer_keys_sql is not None else None
        return AggStaged(state, views, whole, before, bool(int(counts["inexact"])))

    def inexact(self, agg: ad.DeltaAggregate, relation: str) -> bool:
        """Whether a group of `relation` (a state) is past the rows one of the model's decimal
        averages is exact for (no statement for a model without one)."""
        condition = agg.inexact_sql(decimal_average_rows())
        if condition is None:
            return False
        return bool(self._fetch(f"SELECT 1 AS hit FROM {relation} WHERE {condition} LIMIT 1"))

    def _signed_input(self, agg: ad.DeltaAggregate, ranges: Mapping[str, Tuple[int, int]],
                      pinned: Mapping[str, int], view: str, views: List[str]) -> Tuple[str, str]:
        """The aggregate's input over the change rows: what it gains (plus) and loses (minus).
        A transition upstream's changed join keys are cached first (into `views`)."""
        if agg.join is None:
            (upstream, (start, end)), = ranges.items()
            return (over_changes(agg.input_sql, upstream, start, end, PLUS_CHANGES),
                    over_changes(agg.input_sql, upstream, start, end, MINUS_CHANGES))
        old = {**pinned, **{u: start - 1 for u, (start, _) in ranges.items()}}

        def change_rows(upstream: str, types: Tuple[str, ...]) -> str:
            return change_rows_sql(upstream, *ranges[upstream], types)

        for name, select in agg.join.transition_keys(agg.input_sql, view, ranges, change_rows):
            self._run(f"CACHE TABLE {name} AS\n{select}")
            views.append(name)
        return agg.join.terms(agg.input_sql, change_rows, ranges, pinned, old,
                              agg.join.key_views(view))

    def _history(self, sidecar: str) -> Optional[List[Dict[str, Any]]]:
        try:
            return self._reader.history(sidecar, _LOOKBACK)
        except DbtRuntimeError as exc:
            text = str(exc)
            if "TABLE_OR_VIEW_NOT_FOUND" in text or "cannot be found" in text or "not a Delta" in text:
                return None
            raise


def state_definition(agg: ad.DeltaAggregate) -> str:
    """What the sidecar's columns mean (its input rows and state columns), as a short hash:
    a sidecar written under another definition (a changed analysis in a plugin upgrade) is
    not advanced but rebuilt, never mixed with deltas of the new one."""
    text = agg.state_sql(agg.input_sql)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _metadata(ctx: AggRun, agg: ad.DeltaAggregate) -> str:
    return json.dumps({META_KEY: {"plan": ctx.plan_id, "refresh": ctx.refresh,
                                  "state": state_definition(agg)}}, separators=(",", ":"))


def _version_of(entries: List[Dict[str, Any]], plan_id: Optional[str],
                definition: str) -> Optional[int]:
    """The sidecar version written by `plan_id` under this state definition (newest first;
    None when not among them, or written under another definition)."""
    for entry in entries:
        text = str(entry.get("userMetadata") or "")
        if META_KEY not in text:
            continue
        try:
            data = json.loads(text).get(META_KEY) or {}
        except (ValueError, AttributeError):
            continue
        if data.get("plan") == plan_id:
            return int(entry["version"]) if data.get("state") == definition else None
    return None


def _written(agg: ad.DeltaAggregate, delta: str, sidecar: str, version: int) -> str:
    """The touched groups' state as a plan wrote it (a group it deleted has 0 rows)."""
    on = sqlgen.keys_match(agg.keys, "_br_s", "_br_d")
    names = [n for n, _ in agg.state_columns()]
    cols = [f"_br_d.{sqlgen.q(k)}" for k in agg.keys] + [
        f"coalesce(_br_s.{n}, 0) AS {n}" if n == ad.ROWS else f"_br_s.{n}" for n in names]
    return (f"SELECT {', '.join(cols)} FROM {delta} _br_d "
            f"LEFT JOIN {sidecar} VERSION AS OF {version} _br_s ON {on}")
