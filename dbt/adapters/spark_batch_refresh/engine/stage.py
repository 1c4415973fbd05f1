"""Staging: the rows a refresh will write, computed once into Spark's cache and checked.

A replay stages the model over the signed change rows (row-wise models) or recomputed for the
affected keys at the pinned versions; a backfill or full recompute stages the whole model. The
staging is a pure function of the pinned versions, so nothing of it needs to survive a crash;
only a merge of several chunks persists it as a Delta table (see apply.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.sql import aggdelta as ad
from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.coarse import Coarse
from dbt.adapters.spark_batch_refresh.engine import driver_keys
from dbt.adapters.spark_batch_refresh.engine.aggstage import AggRun, SidecarUpkeep
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.storage.delta import Columns, feed_counts
from dbt.adapters.spark_batch_refresh.errors import BadKeyError, BatchRefreshUserError, NullKeyError
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.plan.key_top import KeyTop, KeyType, above, make_top, single_key
from dbt.adapters.spark_batch_refresh.plan.planner import Plan
from dbt.adapters.spark_batch_refresh.plan.strategy import (
    NETTED, REPLAY_RULES, Strategy, writes_direct, writes_sidecar)
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, RefreshRequest, Run
from dbt.adapters.spark_batch_refresh.sql.rewrite import (
    MINUS_CHANGES, PLUS_CHANGES, change_rows_sql, over_changes, pin_versions)

# Key types whose min/max render as literals the MERGE can prune target files by.
_RANGE_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "date")


logger = AdapterLogger("SparkBatchRefresh")


@dataclass
class Staged:
    """What staging produced: where the rows are and what the apply needs to know of them."""

    source: str  # relation the apply reads (cached view, or the persisted Delta table)
    columns: Columns  # staging columns and types (model columns plus bookkeeping)
    rows: int = 0
    tombstones: int = 0
    # Literal bounds of the (first) key column over the staged rows, for file pruning, and,
    # for a single-column key, the key's type they are literals of.
    key_range: Optional[tuple[str, str]] = None
    key_type: Optional[str] = None
    # What the rows were computed by: the plan's strategy, or AFFECTED_KEYS where a delta
    # aggregate's sidecar could not serve (None: a resumed run's persisted staging).
    strategy: Optional[Strategy] = None
    extra_views: List[str] = field(default_factory=list)
    # Changes-only staging of a single ranged key: its rows without an old row (new keys), and
    # their literal key range, for the new-key check of a REPLACE WHERE apply (apply.py).
    new_rows: int = 0
    new_range: Optional[tuple[str, str]] = None
    # The keys a REPLACE WHERE lists: of a whole-keys staging, those whose row differs from
    # the target's (Applier.guard); of a changes-only staging checked in the driver
    # (driver_keys.py), every staged key as text. None: the write reads them from the staging.
    replace_keys: Optional[List[Any]] = None
    # An intermediate's touched partitions only (rows and tombstones by key), not the whole
    # model: merged by key, never as MERGE_ALL, and in one chunk (a persisted staging is
    # resumed as a whole model's would be).
    partial: bool = False
    # Of a whole-keys staging: the rows inserted / updated / deleted by replacing its keys
    # whose row differs from the target's (read with replace_keys before the write).
    replace_counts: Optional[Mapping[str, int]] = None
    # A single-column key of a comparable type: the largest key of a staged row, and the
    # target's key ceiling before this write (from its newest refresh commit, set by the
    # executor); with the text of the smallest new key, whether the new-key check can be
    # proved without reading the target (plan/key_top.py).
    top_key: Optional[KeyType] = None  # None: the key has no ceiling (plan/key_top.py)
    top: Optional[KeyTop] = None  # None with a top_key: no staged row
    target_top: Optional[KeyTop] = None
    new_floor: Optional[str] = None
    # The model over inserted change rows with the key checks inline (sqlgen.inserted_checked),
    # written as it is read: nothing cached, counted by the write.
    inline: bool = False
    # A replay that found no sidecar matching the target (an overwrite left it behind) and
    # rebuilt it: measured as the full recompute it was, not as a replay (cost.py).
    sidecar_rebuilt: bool = False
    # The model itself at the pinned versions, nothing cached or counted (strategy.
    # writes_direct; a keyed backfill's checks inline, backfills_checked): the write's commit
    # metrics count its rows.
    direct: bool = False
    # Whether its rows have the target's column types (Applier._frame_fits), once read.
    frame_fits: Optional[bool] = None

    @property
    def new_keys_unseen(self) -> bool:
        """Every new key lies above every key the target holds: none can collide."""
        return above(self.target_top, self.top_key, self.new_floor)

    @property
    def whole_keys(self) -> bool:
        """Recomputed for its keys (affected keys, a delta aggregate's groups from its sidecar,
        an intermediate's touched partitions: `staging_affected`): every model row of each
        staged key, so the target rows of those keys can be replaced by the staged rows
        without a new-key check. (A keyless staging of these strategies is never applied by
        key; a resumed run's persisted staging knows no strategy.)"""
        return self.partial or self.strategy in (Strategy.AFFECTED_KEYS,
                                                 Strategy.DELTA_AGGREGATE)

    @property
    def staged_from(self) -> Optional[str]:
        return self.strategy.staged_from if self.strategy is not None else None

    @property
    def from_changes(self) -> bool:
        """Netted from signed change rows (sqlgen.staging_from_changes): the staging marks the
        keys that had a row, and its MERGE guards new keys. Read from the columns, which a
        resumed run's persisted staging has too (it knows no strategy)."""
        return any(n == sqlgen.HAD_OLD for n, _ in self.columns)


def pinned_model(sql: str, analysis: sa.Analysis, versions: Mapping[str, int]) -> str:
    """The model read at `versions` (one it could not parse: as written)."""
    return pin_versions(sql, versions) if analysis.shape != "unparsed" else sql


class Stager:
    def __init__(self, fetch: Fetch, run: Run, describe: Callable[[str], Columns],
                 table_columns: Callable[[str], List[str]], upkeep: SidecarUpkeep) -> None:
        self._fetch, self._run = fetch, run
        self._describe = describe
        self._table_columns = table_columns
        self._upkeep = upkeep

    def stage_plan(self, req: RefreshRequest, config: BatchRefreshConfig, analysis: sa.Analysis,
                   plan: Plan, columns: Columns, view: str, *, plan_id: str, refresh: int,
                   previous_plan: Optional[str]) -> Staged:
        """Stage a refresh's plan by its strategy (a first run, or a resumed one whose
        persisted staging is gone), with the delta aggregate's sidecar run where the model
        keeps one."""
        strategy = plan.strategy
        agg_run = self.agg_run(req, config, analysis, plan, plan_id=plan_id, refresh=refresh,
                               previous_plan=previous_plan)
        if writes_direct(strategy, config):
            # Written straight from the model at the pinned versions, as dbt's `table` is:
            # nothing cached, no key check (the refreshes that apply by key check theirs),
            # rows counted by the write. An overwrite leaves a sidecar behind (TPC-H:
            # rebuilding it made an overwrite 1.4-2.7x its table; docs/decisions.md, session 38).
            model_sql = self.whole_model(req.sql, analysis, plan, columns, agg_run)
            return Staged(f"(\n{model_sql}\n) _br_o", list(columns), strategy=strategy,
                          direct=True)
        if strategy is Strategy.APPEND:
            rows = plan.append_rows if plan.append_rows is not None else self.append_guard(
                req.model, plan)
            return Staged("", list(columns), rows=rows, strategy=strategy)
        return self.stage(model=req.model, sql=req.sql, config=config, analysis=analysis,
                          plan=plan, model_columns=columns, view=view, agg_run=agg_run,
                          target=req.target)

    @staticmethod
    def agg_run(req: RefreshRequest, config: BatchRefreshConfig, analysis: sa.Analysis,
                plan: Plan, *, plan_id: str, refresh: int,
                previous_plan: Optional[str]) -> Optional[AggRun]:
        """The sidecar this refresh keeps in step, or None where it writes none."""
        if not writes_sidecar(config, analysis, plan.action, plan.fallback_reason):
            return None
        return AggRun(req.state_schema, ad.sidecar_table(req.state_schema, req.model_id),
                      plan_id, refresh, previous_plan)

    def stage(self, *, model: str, sql: str, config: BatchRefreshConfig, analysis: sa.Analysis,
              plan: Plan, model_columns: Columns, view: str,
              agg_run: Optional[AggRun] = None, target: Optional[str] = None) -> Staged:
        pinned = plan.versions_to()
        model_sql = pinned_model(sql, analysis, pinned)
        extra: List[str] = []
        strategy = plan.strategy
        delta, types = self._kept(analysis, agg_run, pinned)
        ranges = plan.ranges()
        select: Optional[str] = None
        partial = rebuilt = False
        if strategy in NETTED:
            select = self._changes_only(sql, analysis, config, plan, ranges, model_columns,
                                        view, extra)
        elif strategy in (Strategy.DELTA_AGGREGATE, Strategy.INTERMEDIATE):
            upkept = None
            if delta is not None and agg_run is not None:
                upkept = self._upkeep.replay(delta, agg_run, ranges, pinned, types, view)
                if upkept is None:  # no sidecar matching the target: rebuild it, recompute now
                    model_sql = self._built(delta, agg_run, pinned, model_columns, model_sql)
                    rebuilt = True
            if upkept is not None and upkept.inexact:
                # A group past the rows its decimal average is exact for from the state: the
                # sidecar is advanced, the touched groups recomputed from the upstreams.
                extra += upkept.views
                strategy = Strategy.AFFECTED_KEYS
                select = (sqlgen.staging_affected(model_sql, upkept.state, config.unique_key,
                                                  config.nullable_key)
                          if config.unique_key else sqlgen.staging_full(model_sql, ()))
            elif upkept is None:  # recomputed: the affected groups, or an intermediate's model
                strategy = (Strategy.AFFECTED_KEYS if strategy is Strategy.DELTA_AGGREGATE
                            else Strategy.FULL)
            elif strategy is Strategy.INTERMEDIATE:
                extra += upkept.views
                assert delta is not None
                if delta.outer_partition and config.unique_key and target:
                    # Windows partitioned by group keys: the touched partitions' rows, by key.
                    rows = delta.model_over(delta.in_touched_partitions(upkept.whole,
                                                                        upkept.state))
                    select = sqlgen.staging_affected(rows, delta.partition_keys(
                        rows, target, upkept.state, config.unique_key), config.unique_key,
                        config.nullable_key)
                    partial = True
                elif delta.outer_keys_sql is not None and config.unique_key and upkept.before:
                    # An aggregate of the aggregate: the outer groups the touched groups' rows
                    # fall in, before and after, recomputed over the whole state, by key.
                    select = sqlgen.staging_affected(
                        delta.model_over(upkept.whole),
                        delta.touched_outer_keys(upkept.before, upkept.state), config.unique_key,
                        config.nullable_key)
                    partial = True
                else:
                    # The rest of the model over every group's new state, merged as a
                    # difference (target rows it lacks are deleted).
                    select = sqlgen.staging_full(delta.model_over(upkept.whole),
                                                 config.unique_key)
            else:
                extra += upkept.views
                rows = delta.output_over(upkept.state)  # type: ignore[union-attr]
                select = (sqlgen.staging_affected(rows, upkept.state, config.unique_key,
                                                  config.nullable_key)
                          if config.unique_key else sqlgen.staging_full(rows, ()))
        elif delta is not None and agg_run is not None and strategy not in REPLAY_RULES:
            model_sql = self._built(delta, agg_run, pinned, model_columns, model_sql)
        if select is None and strategy is Strategy.AFFECTED_KEYS and not config.unique_key:
            select = sqlgen.staging_full(model_sql, ())  # a global aggregate, in full
        elif select is None and strategy is Strategy.AFFECTED_KEYS:
            keys = f"{view}_keys"
            coarse = self._coarse(sql, config, ranges, plan, model_columns) if target else None
            if coarse is not None:
                found, parts = coarse
                self._run(f"CACHE TABLE {keys} AS\n{sqlgen.affected_keys(parts, [found.column])}")
                # A key of that one column: its values are the affected keys themselves, and
                # the target need not be read for the old ones.
                select = (sqlgen.staging_affected(model_sql, keys, config.unique_key,
                                                  config.nullable_key)
                          if len(config.unique_key) == 1 else
                          sqlgen.staging_coarse(model_sql, keys, found.column, target or "",
                                                config.unique_key, config.nullable_key))
            else:
                parts = sa.affected_keys_sql(sql, config.unique_key, ranges, pinned,
                                             plan.versions_from(), self._table_columns)
                # The keys are computed (and cached) on their own: one plan holding the model
                # once per changed scan plus the model again grows past what Spark plans
                # quickly.
                self._run(f"CACHE TABLE {keys} AS\n"
                          f"{sqlgen.affected_keys(parts, config.unique_key)}")
                select = sqlgen.staging_affected(model_sql, keys, config.unique_key,
                                                 config.nullable_key)
            extra.append(keys)
        elif select is None:  # backfill, full recompute (an intermediate's sidecar rebuilt)
            select = sqlgen.staging_full(model_sql, config.unique_key)
        fail_point("during_staging")
        # Computed once into the session's cache (memory and disk), not a Delta commit; lazily,
        # so the first read (the key checks) computes and fills it in the same job.
        self._run(f"CACHE LAZY TABLE {view} AS\n{select}")
        key_rows = None
        if strategy in NETTED and driver_keys.eligible(
                plan.change_rows, config.unique_key,
                {c.lower(): t for c, t in model_columns}, config.merge_chunk_rows):
            key_rows = self._fetch(driver_keys.keys_sql(view, config.unique_key))
            if len(key_rows) > driver_keys.DRIVER_KEYS_MAX_ROWS:
                key_rows = None  # more rows than the planner counted: counted by SQL
        columns = sqlgen.staging_columns(
            model_columns, config.unique_key, strategy in NETTED)
        staged = Staged(view, columns, strategy=strategy, extra_views=extra, partial=partial,
                        sidecar_rebuilt=rebuilt)
        if config.unique_key:
            self._check_keys(model, config, staged, model_columns,
                             bounds=strategy is not Strategy.BACKFILL,
                             model_sql=model_sql if staged.whole_keys else None,
                             key_rows=key_rows)
        else:
            staged.rows = int(self._fetch(f"SELECT count(*) AS staged FROM {view}")[0]["staged"])
        return staged

    def _coarse(self, sql: str, config: BatchRefreshConfig, ranges: Mapping[str, Tuple[int, int]],
                plan: Plan, columns: Columns) -> Optional[Tuple[Coarse, List[str]]]:
        """The coarse key column and its value queries (coarse.py), where a changed scan
        traces to a key column; None where none does, or where the walk projecting that
        column alone is refused (the full key's walk decides then). A defect of this
        analysis costs the walk, never the refresh (as a defect of the model's analysis
        costs a full recompute); a failed statement is not one."""
        try:
            return sa.coarse_keys_sql(sql, config.unique_key, ranges, plan.versions_to(),
                                      plan.versions_from(), self._table_columns,
                                      {c.lower(): t for c, t in columns})
        except st.NotIncremental:
            return None
        except DbtRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - pure analysis: any defect falls back
            logger.debug(f"batch_refresh: coarse keys not used ({type(exc).__name__}: {exc})")
            return None

    def whole_model(self, sql: str, analysis: sa.Analysis, plan: Plan, columns: Columns,
                    agg_run: Optional[AggRun]) -> str:
        """The whole model at the plan's pinned versions, for a write straight from it (a
        backfill or full recompute written as dbt's `table` is): where the refresh keeps a
        sidecar (`agg_run`), the sidecar built first and the model read from it, as a staged
        backfill's is."""
        pinned = plan.versions_to()
        model_sql = pinned_model(sql, analysis, pinned)
        delta, _ = self._kept(analysis, agg_run, pinned)
        if delta is None or agg_run is None:
            return model_sql
        return self._built(delta, agg_run, pinned, columns, model_sql)

    def _kept(self, analysis: sa.Analysis, agg_run: Optional[AggRun], pinned: Mapping[str, int]
              ) -> Tuple[Optional[ad.DeltaAggregate], Mapping[str, str]]:
        """The aggregate the refresh keeps in its sidecar, typed by the sidecar's columns, and
        those types; None where it keeps none or a type rules delta upkeep out (a double
        sum: its groups are recomputed, never drifted)."""
        delta = (analysis.delta or analysis.intermediate) if agg_run is not None else None
        if delta is None:
            return None, {}
        types, problem = self._upkeep.state_types(delta, pinned)
        return (None if problem is not None else delta.typed(types)), types

    def _built(self, delta: ad.DeltaAggregate, agg_run: AggRun, pinned: Mapping[str, int],
               model_columns: Columns, model_sql: str) -> str:
        """Build the sidecar at the pinned versions and return the model read from it (one
        scan of the upstream, not a second for the model), or `model_sql` when the version
        written cannot be read as this plan's."""
        built = self._upkeep.build(delta, agg_run, pinned)
        if built is None or self._upkeep.inexact(delta, built):
            return model_sql
        return sqlgen.typed(delta.model_over(built), model_columns)

    def _changes_only(self, sql: str, analysis: sa.Analysis, config: BatchRefreshConfig,
                      plan: Plan, ranges: Mapping[str, tuple[int, int]],
                      columns: Columns, view: str, extra: List[str]) -> str:
        """The model's staging from its upstreams' change feeds alone (ROWWISE, DELTA_JOIN).

        The general replay recomputes the affected keys from the upstreams at the pinned
        versions, a scan that grows with the tables. A row-wise model does not need it: its new
        rows are the model over the change rows, netted (sqlgen.staging_from_changes). Nor does
        a delta join (deltajoin.py): the model over each moved upstream's change rows, the
        others pinned, netted the same way.
        """
        names = [c for c, _ in columns]
        if plan.strategy is Strategy.ROWWISE:
            (upstream, (start, end)), = ranges.items()
            plus = over_changes(sql, upstream, start, end, PLUS_CHANGES)
            minus = over_changes(sql, upstream, start, end, MINUS_CHANGES)
            return sqlgen.staging_from_changes(plus, minus, names, config.unique_key)
        joined = analysis.delta_join
        assert joined is not None  # replay_rule chose DELTA_JOIN
        # Only the table's own columns when the model has a `*` (one DESCRIBE per upstream,
        # shared by its plus and minus side).
        own = {u: self._table_columns(u) if joined.star else None for u in ranges}

        def change_rows(upstream: str, types: Tuple[str, ...]) -> str:
            return change_rows_sql(upstream, *ranges[upstream], types, own[upstream])

        transitions = joined.transition_keys(sql, view, ranges, change_rows)
        for name, select in transitions:
            self._run(f"CACHE TABLE {name} AS\n{select}")
            extra.append(name)
        plus, minus = joined.terms(sql, change_rows, ranges, plan.versions_to(),
                                   plan.versions_from(), joined.key_views(view))
        # The staging reads the netted rows once (one pass by key), so a transition term's
        # preserved side is scanned once without caching them apart.
        return sqlgen.staging_from_changes(plus, minus, names, config.unique_key)

    def _check_keys(self, model: str, config: BatchRefreshConfig, staged: Staged,
                    model_columns: Columns, bounds: bool, model_sql: Optional[str] = None,
                    key_rows: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
        """NULL or duplicate keys fail the run here, before the target is touched; the same
        scan gives the key range the MERGE prunes target files by.

        A recompute restricted to `key IN (affected keys)` (every whole-keys staging: affected
        keys, a delta aggregate's or an intermediate's touched groups) never stages a row
        whose key is NULL, so an affected NULL key shows only as a tombstone. It is one (an
        outer join's NULL-supplying side changed under a filtered key) unless the model has a
        row with a NULL key, which only the model itself can tell: asked only when such a
        tombstone exists, since merging it would lose that row's group. A null-safe
        key (config.nullable_key) is restricted by `<=>`: its NULL is a key like any other,
        counted among the distinct keys, and no problem."""
        key_types = dict((c.lower(), t.lower()) for c, t in model_columns)
        first_type = key_types.get(config.unique_key[0].lower())
        null_safe = config.nullable_key
        checked = config.null_checked()
        # A null-safe key has no literal range nor ceiling: both leave its NULL key out.
        ranged = bounds and first_type in _RANGE_TYPES and not null_safe
        top_key = None if null_safe else single_key(config.unique_key, model_columns)
        if key_rows is not None:  # a changes-only staging's keys, read by stage()
            quality = driver_keys.quality(
                key_rows, len(config.unique_key), ranged, top=top_key is not None,
                null_safe=null_safe,
                null_checked=[i for i, k in enumerate(config.unique_key) if k in checked])
            if len(config.unique_key) == 1:
                staged.replace_keys = driver_keys.listed(key_rows)
        else:
            quality = self._fetch(sqlgen.key_quality(staged.source, config.unique_key, ranged,
                                                     staged.from_changes,
                                                     top=top_key is not None,
                                                     null_safe=null_safe,
                                                     null_checked=checked))[0]
        staged.rows = int(quality["staged"])
        staged.tombstones = int(quality["tombstones"])
        staged.new_rows = int(quality.get("new_rows") or 0)
        if top_key is not None:
            staged.top_key = top_key
            if quality.get("key_top") is not None:
                staged.top = make_top(top_key, str(quality["key_top"]))
                if staged.top is None:  # a date outside four-digit years
                    staged.top_key = None
        if quality.get("new_min") is not None:
            staged.new_floor = str(quality["new_min"])
        if ranged and quality.get("key_min") is not None:
            kind = key_types[config.unique_key[0].lower()]
            staged.key_type = kind if len(config.unique_key) == 1 else None
            staged.key_range = (sqlgen.typed_lit(quality["key_min"], kind),
                                sqlgen.typed_lit(quality["key_max"], kind))
            if quality.get("new_min") is not None:
                staged.new_range = (sqlgen.typed_lit(quality["new_min"], kind),
                                    sqlgen.typed_lit(quality["new_max"], kind))
        key = ", ".join(config.unique_key)
        problems = []
        null_keys = 0  # a null-safe key's NULL is no problem (but in its null_checked columns)
        if checked:
            null_keys = int(quality["null_keys"])
            if not null_keys and model_sql is not None and int(quality["null_any"]):
                null_keys = int(self._fetch(sqlgen.null_key_rows(model_sql, checked))[0]["n"])
        if null_keys:
            problems.append(f"{null_keys} output rows have a NULL in unique_key ({key}).")
        # Outside a null-safe key a key with a NULL is not among the distinct keys.
        keyed = int(quality["staged"]) - (0 if null_safe else int(quality["null_any"]))
        if keyed != int(quality["distinct_keys"]):
            examples = self._fetch(sqlgen.duplicate_examples(staged.source, config.unique_key))
            shown = "; ".join(
                "(" + ", ".join(str(v) for k, v in ex.items() if k != "n") + f") x{ex['n']}"
                for ex in examples
            )
            problems.append(f"unique_key ({key}) is not unique in the model output: {shown}.")
        if problems:
            only_nulls = bool(null_keys) and len(problems) == 1
            raise (NullKeyError if only_nulls else BadKeyError)(
                model, "bad unique_key; the target was not touched",
                problems + ["Fix: choose a unique_key that identifies one output row, or "
                            "de-duplicate / filter NULL keys in the model."],
            )

    def append_guard(self, model: str, plan: Plan) -> int:
        """Keyless row-wise model: only inserts upstream can be replayed (as an append)."""
        (upstream, point), = plan.pinned.items()
        start = plan.consumed[upstream].version + 1
        changes, non_inserts = feed_counts(self._fetch, upstream, start, point.version)
        if non_inserts:
            raise BatchRefreshUserError(
                model,
                f"upstream {upstream} has {non_inserts} updated or deleted rows in "
                f"v{start}..v{point.version}, and the model has no unique_key to apply them by",
                ["Fix: set unique_key to the column(s) identifying an output row, or set "
                 "refresh_mode='auto' (recomputes a refresh like this one) or "
                 "refresh_mode='full' (recomputes every refresh)."],
            )
        return changes

    def persist(self, staged: Staged, table: str) -> None:
        """Several commits: persist staging so a resumed run merges the remaining chunks
        without recomputing it."""
        self._run(f"CREATE OR REPLACE TABLE {table} USING delta "
                  f"TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false') AS "
                  f"SELECT * FROM {staged.source}")
        self._run(f"DROP VIEW IF EXISTS {staged.source}")
        staged.source = table

    @staticmethod
    def derived_views(view: str, analysis: sa.Analysis) -> List[str]:
        """The cached views a staging under `view` may create besides `view` itself (the
        affected keys; the delta aggregate's steps, aggstage.py; a delta join's transition
        keys): a staging that raised part-way has not reported them in Staged.extra_views."""
        joins = [analysis.delta_join, analysis.delta.join if analysis.delta else None]
        return ([f"{view}_{step}" for step in ("keys", "net", "delta", "new", "extremes", "state")]
                + [v for joined in joins if joined is not None
                   for v in joined.key_views(view).values()])

    def drop(self, staged: Optional[Staged], views: List[str]) -> None:
        """Free the session cache (no commit); a persisted staging table is dropped by apply."""
        for name in views + (staged.extra_views if staged else []):
            self._run(f"DROP VIEW IF EXISTS {name}")
