"""One refresh of one model: plan -> preflight -> stage -> apply -> record, and nothing else.

The target's own Delta log is the record of every refresh (commit_log.py): a run plans from
its newest commit, a refresh that fits in one chunk makes exactly one commit, and the state and
history rows are left for the invocation's single write (record.py). Only a refresh of several
chunks takes the lease and persists its staging (chunks.py).

All SQL goes through the callables given (the dbt connection), never a local SparkSession, so
the same code serves the embedded session and a Spark Thrift Server.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.engine.aggstage import SidecarUpkeep
from dbt.adapters.spark_batch_refresh.engine.apply import Applier, ConcurrentRefresh
from dbt.adapters.spark_batch_refresh.engine.chunks import ChunkedApply, lease_error
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit, TargetLog, columns_hash
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig, parse_config
from dbt.adapters.spark_batch_refresh.storage.delta import (
    Columns, DeltaReader, SharedHistories, feed_key_max)
from dbt.adapters.spark_batch_refresh.errors import (
    BadKeyError, BatchRefreshLeaseError, BatchRefreshRuntimeError, BatchRefreshUserError,
    NullKeyError)
from dbt.adapters.spark_batch_refresh.storage.endpoint import current_time, measuring_time
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.plan.gaps import Gap, classify
from dbt.adapters.spark_batch_refresh.engine.lease_wait import LeaseFreed, LeaseWait
from dbt.adapters.spark_batch_refresh.engine.preflight import Preflight
from dbt.adapters.spark_batch_refresh.plan.cost import CostMemory
from dbt.adapters.spark_batch_refresh.plan.key_top import (
    KeyTop, KeyType, ceiling_after, single_key, with_inserted)
from dbt.adapters.spark_batch_refresh.plan.planner import (
    AUTO_ENV, ModelState, Plan, UpstreamPoint, closed_gate, moved_ranges, plan_run,
    rebuild_or_fail)
from dbt.adapters.spark_batch_refresh.plan.strategy import (
    BACKFILL, REPLAY, SKIP, Strategy, backfills_checked, replay_rule, sidecar_behind)
from dbt.adapters.spark_batch_refresh.engine.record import (
    Outcome, Recorder, history_row, logged_history_row)
from dbt.adapters.spark_batch_refresh.engine.run_result import (
    Fetch, Meter, RefreshRequest, RefreshResult, Run)
from dbt.adapters.spark_batch_refresh.engine.stage import Staged, Stager
from dbt.adapters.spark_batch_refresh.storage.state import StateRow, StateStore
from dbt.adapters.spark_batch_refresh.storage.views import ViewReader
from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.sql.rewrite import over_changes, pin_versions, quote_relation

logger = AdapterLogger("SparkBatchRefresh")


@dataclass
class _Run:
    """One refresh under way: what was asked, decided and staged so far."""

    req: RefreshRequest
    config: BatchRefreshConfig
    analysis: sa.Analysis
    fingerprint: str
    plan: Plan
    log: TargetLog
    started: datetime
    result: RefreshResult
    run_id: str
    columns: Columns = ()  # type: ignore[assignment]
    staged: Optional[Staged] = None
    memory: CostMemory = field(default_factory=CostMemory)  # measured refreshes, for the commit
    clock: Optional[datetime] = None  # measuring_time() at the start, for the next estimate
    prep_s: Optional[float] = None  # seconds from `clock` to the staging
    inferred_key: bool = False  # the key is inferred from the query, not configured
    null_key: bool = False  # the inferred key was found NULL: matched null-safely or dropped
    # upstream models' recorded keys the key went through (RefreshCommit.through)
    through: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    committed: bool = False  # a commit of this refresh is in the target's log
    ceiling: Optional[KeyTop] = None  # the target's key ceiling before the write (_ceiling)
    ceiling_read: bool = False

    @property
    def refresh(self) -> int:
        return (self.log.last.refresh if self.log.last else 0) + 1

    @property
    def previous_plan(self) -> Optional[str]:
        """The plan of the target's newest refresh (its sidecar version, aggstage.py)."""
        return self.log.last.plan_id if self.log.last else None

    @property
    def view(self) -> str:
        return f"_br_staging_{self.run_id}"

    @property
    def strategy(self) -> Strategy:
        """What the refresh does: the plan's strategy, as staging carried it out."""
        staged = self.staged.strategy if self.staged is not None else None
        return staged or self.plan.strategy

    def commit(self) -> RefreshCommit:
        plan = self.plan
        return RefreshCommit(
            model_id=self.req.model_id, refresh=self.refresh, plan_id=self.run_id,
            run_id=self.run_id, action=plan.action, mode=plan.mode, reason=plan.reason,
            fingerprint=self.fingerprint, columns=columns_hash(self.columns),
            pinned=plan.pinned, consumed=plan.consumed, staged_rows=self.result.staged_rows,
            fallback_reason=plan.fallback_reason, started=self.clock, prep_s=self.prep_s,
            change_rows=plan.change_rows, null_key=self.null_key,
            estimate_s=(round(plan.choice.estimate_s, 3) if plan.choice and
                        plan.choice.estimate_s is not None else None),
            cost=self.memory, rule=self.strategy if plan.action == REPLAY else None,
            key_top=self.key_top(), key_top_added=self.key_top_added(),
            sidecar_rebuilt=bool(self.staged and self.staged.sidecar_rebuilt),
            key=self.proved_key(), through=self.through)

    def proved_key(self) -> Tuple[str, ...]:
        """The key this commit records for the models downstream (RefreshCommit.key): one
        the query proves (alone or through upstream models' keys), NULL in some rows or not:
        unique under `<=>` either way, which is what a model downstream assumes of it (its
        joins' equalities never match a NULL; a NULL it passes on is matched null-safely
        there, as this model's own). Not the model's configured one (dbt's graph hands that
        downstream) nor one that rests on dbt tests."""
        if not self.inferred_key or not self.config.unique_key:
            return ()
        return tuple(self.config.unique_key) if self.analysis.key_source == "query" else ()

    def key_top(self) -> Optional[KeyTop]:
        """The target's key ceiling after this refresh's write (plan/key_top.py); for a write
        whose inserted keys are not known before it, the ceiling before it (key_top_added)."""
        staged = self.staged
        if staged is None or self.strategy is Strategy.OVERWRITE:
            return None  # an overwrite stages nothing to take it from
        if staged.inline:
            return staged.target_top
        whole = self.strategy in (Strategy.BACKFILL, Strategy.FULL)
        return ceiling_after(whole, staged.top_key, staged.top, staged.target_top)

    def key_top_added(self) -> Optional[KeyType]:
        """The key by which the rows this write inserts raise the ceiling, read back from its
        commit when the next replay needs it: an overwrite's (whose rows replace the target)
        and an inline-checked append's."""
        if self.strategy is Strategy.OVERWRITE:
            return self.single_key()
        return self.staged.top_key if self.staged is not None and self.staged.inline else None

    def single_key(self) -> Optional[KeyType]:
        """The key a ceiling is kept for (plan/key_top.py); none for a null-safe key, which a
        ceiling cannot bound (a NULL is above nothing)."""
        if self.config.nullable_key:
            return None
        return single_key(self.config.unique_key, self.columns)


InsertedKeyMax = Callable[[str, int, str], Optional[str]]  # (target, version, column)


def _key_retry(exc: BatchRefreshUserError, analysis: sa.Analysis,
               null_safe: bool) -> Optional["_InferredKeyNull"]:
    """How a refresh whose key is not configured plans again when the key proved bad, or None
    (the error stands). One inferred from the query alone is unique by construction, so a NULL
    (a NULL group) makes it null-safe, and only a repeat under `<=>` drops it; one that rests
    on dbt tests (the model's or its upstreams') is dropped on a NULL or a repeat; one through
    an upstream model's key is as the query's, but a repeat drops it too (that upstream's key
    may be configured wrong)."""
    if analysis.key_source in ("tests", "upstream tests"):
        return _InferredKeyNull(null_safe=False) if isinstance(exc, BadKeyError) else None
    if isinstance(exc, NullKeyError) and not null_safe:
        return _InferredKeyNull(null_safe=True)
    if isinstance(exc, BadKeyError) and (null_safe or analysis.key_through):
        return _InferredKeyNull(null_safe=False)
    return None


def _keyed_config(config: BatchRefreshConfig, analysis: sa.Analysis,
                  null_safe: bool) -> BatchRefreshConfig:
    """The config a refresh plans with: the key it uses (configured, else inferred), matched
    null-safely where a NULL was seen in it (`null_safe`) or where a LEFT JOIN's NULL
    extension may leave some of its columns NULL (outer_key; a NULL in the others is still a
    NULL key)."""
    outer = () if null_safe else analysis.key_outer
    return replace(config, unique_key=analysis.key, nullable_key=null_safe or bool(outer),
                   outer_key=outer)


class _InferredKeyNull(Exception):
    """A key that is not configured proved bad in the staged rows (_key_retry): plan again
    with it matched null-safely, or without it."""

    def __init__(self, null_safe: bool) -> None:
        super().__init__("null-safe" if null_safe else "keyless")
        self.null_safe = null_safe


class Refresher:
    def __init__(self, fetch: Fetch, run: Run, recorder: Recorder,
                 histories: Optional[SharedHistories] = None,
                 inserted_key_max: Optional[InsertedKeyMax] = None,
                 replace_using: bool = False) -> None:
        self._recorder = recorder  # the invocation's, written once at its end (record.py)
        self._meter = Meter(fetch, run)
        self._fetch, self._run = self._meter.fetch, self._meter.run
        # The largest key a target commit inserted: from its file statistics where the
        # embedded session gives them, else from its change feed, one statement (metered).
        self._inserted_key_max: InsertedKeyMax = inserted_key_max or (
            lambda target, version, column: feed_key_max(self._fetch, target, version, column))
        # The invocation's upstream histories, shared with the other models' refreshes.
        self.reader = DeltaReader(self._fetch, histories)
        self.views = ViewReader(self._fetch, histories)
        self._stager = Stager(self._fetch, self._run, self.reader.describe, self.table_columns,
                              SidecarUpkeep(self._fetch, self._run, self.reader))
        # `replace_using`: the session writes REPLACE USING (the embedded one, frame_write.py).
        self._applier = Applier(self._fetch, self._run, self.reader, replace_using)
        self._checks = Preflight(self.reader)

    # ---------------------------------------------------------------- plan
    def refresh(self, req: RefreshRequest) -> RefreshResult:
        config = parse_config(req.model, req.raw_config)
        # Upstream views are read through: the Delta tables beneath them are pinned and
        # replayed, and the SQL recorded (so a changed view definition is a model change).
        sql, views = self.views.see_through(req.sql)
        if views:
            logger.debug(f"batch_refresh model '{req.model}': reads through the views "
                         f"{', '.join(views)}")
            req = replace(req, sql=sql)
        waiter = LeaseWait(config.lease_wait_s)
        infer, nulls = True, False
        while True:
            try:
                return self._refresh(req, config, waiter, infer, nulls)
            except LeaseFreed:
                continue  # the lease we waited for is free: plan again from the target's log
            except _InferredKeyNull as retry:
                # Plan again, the key null-safe or dropped; nothing was written.
                nulls, infer = (True, True) if retry.null_safe else (nulls, False)

    def _refresh(self, req: RefreshRequest, config: BatchRefreshConfig,
                 waiter: LeaseWait, infer: bool = True, nulls: bool = False) -> RefreshResult:
        now, clock = current_time(), measuring_time()
        written = req.sql
        analysis = sa.analyze(written, config.unique_key, config.tested_key,
                              config.upstream_keys, config.upstream_model_keys)
        fingerprint = sa.fingerprint(analysis, config.result_fingerprint_parts(), req.run_values)
        log = (self.reader.target_log(req.target, req.model_id) if req.target_kind == "delta"
               else TargetLog(None))
        null_seen = nulls or (log.last is not None and log.last.null_key and not req.full_refresh)
        analysis, keyless, null_safe = sa.keyless_if_null(
            analysis, config.unique_key, drop=not infer, null_seen=null_seen)
        inferred = bool(analysis.key) and not config.unique_key
        # From here on the key is the configured one or the one inferred from GROUP BY.
        config = _keyed_config(config, analysis, null_safe)
        if analysis.replay_sql is not None:
            req = replace(req, sql=analysis.replay_sql)  # same rows; the form that replays
        store = StateStore(req.state_schema, self._fetch, self._run)
        through: Mapping[str, Tuple[str, ...]] = {}
        last = log.last
        resuming = last is not None and not last.complete and not req.full_refresh
        if resuming and last is not None and not analysis.key and infer and not keyless:
            # Keyed through upstream models' recorded keys (below), an interrupted refresh
            # resumes with the same key, its upstreams unread.
            through = last.through
            keyed = self._keyed_through(written, req, config, through, null_seen)
            if keyed is not None:
                analysis, keyless, null_safe, config, req = keyed
                inferred = True
        if resuming:
            chunked = ChunkedApply(self._fetch, self._run, self._applier, self._stager, store,
                                   waiter)
            try:
                result, landed, message = chunked.resume(req, config, analysis, log, now)
            except (BatchRefreshUserError, BatchRefreshLeaseError):
                raise
            except Exception as exc:
                raise BatchRefreshRuntimeError(
                    f"batch_refresh model '{req.model}': resumed {log.last.action} failed: {exc}\n"
                    "The refresh is recorded as interrupted; the next `dbt run` resumes it with "
                    "the same pinned upstream versions.") from exc
            self._recorder.add(Outcome(
                req.state_schema, req.model_id, req.target, current_time(), commit=landed,
                sql=req.sql, history=history_row(landed, result, now, current_time(), message)))
            return self._finish(result)
        state, recreated = self._model_state(req, log, store)
        closed = (None if req.full_refresh or req.force or recreated else closed_gate(
            config=config, upstreams=analysis.upstreams, state=state, fingerprint=fingerprint,
            now=now))
        if closed is not None:
            self._reconcile(req, log)
            return self._finish(_result(closed))
        latest = self.reader.latest_points(req.model, analysis.upstreams)
        if not analysis.key and infer and not keyless:
            # No key yet: one may pass through the keys upstream batch_refresh models'
            # queries prove, which their commits record.
            through = self.reader.proven_keys(analysis.upstreams, {
                u: p.version for u, p in (state.consumed if state is not None else {}).items()},
                latest)  # from the histories `latest` read: no statement
            keyed = self._keyed_through(written, req, config, through, null_seen)
            if keyed is not None:
                analysis, keyless, null_safe, config, req = keyed
                inferred = True
        memory = log.last.memory_after() if log.last is not None else CostMemory()
        inserts_alone, counted = self._keyless_inserts_alone(analysis, state, latest)
        plan = plan_run(
            model=req.model, config=config, analysis=analysis, fingerprint=fingerprint,
            state=state, latest=latest, target_exists=req.target_kind == "delta",
            full_refresh=req.full_refresh, force=req.force, now=now, memory=memory,
            change_rows=self._change_rows(state, latest),
            by_cost=os.environ.get(AUTO_ENV, "").lower() != "structural",
            inserts=self._inserts_replay(config, analysis, log, state, latest),
            inserts_alone=inserts_alone,
            sidecar_behind=log.last is not None and sidecar_behind(
                config, analysis, log.last.action, log.last.fallback_reason))
        if counted is not None and plan.strategy is Strategy.APPEND and plan.ranges == counted[0]:
            plan = replace(plan, append_rows=counted[1])
        if recreated and not req.full_refresh:
            pinned = {u: p for u, p in latest.items() if p is not None}
            plan = rebuild_or_fail(req.model, config, replace(plan, pinned=pinned), changed=(
                f"the target {req.target} was recreated (its log has no refresh of this model)"))
        result = _result(plan)
        if not plan.writes:
            self._reconcile(req, log)
            return self._finish(result)
        run = _Run(req, config, analysis, fingerprint, plan, log, now, result,
                   uuid.uuid4().hex[:12], memory=memory, clock=clock, inferred_key=inferred,
                   null_key=keyless or null_safe,
                   through=through if analysis.key_through else {})
        self._preflight(run, store)
        return self._finish(self._execute(run, store, waiter))

    def _reconcile(self, req: RefreshRequest, log: TargetLog) -> None:
        """A refresh with nothing to write still offers the target's newest refresh to the
        end-of-run write, which records it where the state row lags (a run that committed
        and then lost its own state write): the row and the history then say what the target
        holds from the next run on, not only from the next refresh that writes."""
        last = log.last
        if last is None or not last.complete:
            return
        when = last.timestamp or current_time()
        self._recorder.add(Outcome(
            req.state_schema, req.model_id, req.target, when, commit=last, sql=req.sql,
            previous=logged_history_row(last, when), previous_refresh=last.refresh,
            reconcile=True))

    @staticmethod
    def _keyed_through(written: str, req: RefreshRequest, config: BatchRefreshConfig,
                       recorded: Mapping[str, Tuple[str, ...]], null_seen: bool) -> Optional[
            Tuple[sa.Analysis, bool, bool, BatchRefreshConfig, RefreshRequest]]:
        """A model with no key, analysed again through its upstream models' recorded keys
        (and configured ones): the analysis, whether keyless and null-safe, and the config and
        request that plan with its key; None when that finds no key either."""
        keyed = sa.through_proven_keys(written, config.tested_key, config.upstream_keys,
                                       recorded, config.upstream_model_keys, null_seen)
        if keyed is None:
            return None
        analysis, keyless, null_safe = keyed
        return (analysis, keyless, null_safe,
                _keyed_config(config, analysis, null_safe),
                replace(req, sql=analysis.replay_sql or written))

    def _inserts_replay(self, config: BatchRefreshConfig, analysis: sa.Analysis, log: TargetLog,
                        state: Optional[ModelState],
                        latest: Mapping[str, Optional[UpstreamPoint]]) -> bool:
        """Whether a replay now would likely be one checked INSERT (`_inline_write`): a
        row-wise model with one key column that has a ceiling in the
        target's newest refresh commit, one upstream moved by inserts alone. For the cost
        estimate only: the write itself checks again."""
        last = log.last
        if not analysis.rowwise or state is None or len(config.unique_key) != 1 or last is None:
            return False
        known = last.key_top_added or (last.key_top.key if last.key_top else None)
        if known is None or known.column != config.unique_key[0].lower():
            return False
        return self._inserts_alone(moved_ranges(
            {u: p.version for u, p in state.consumed.items()}, latest))

    def _keyless_inserts_alone(
            self, analysis: sa.Analysis, state: Optional[ModelState],
            latest: Mapping[str, Optional[UpstreamPoint]],
    ) -> Tuple[bool, Optional[Tuple[Dict[str, Tuple[int, int]], int]]]:
        """For a keyless row-wise model, whether its upstream's change since the consumed
        version holds inserts alone (what its append replay can apply); True for any other
        model or before it has consumed anything. The history this run read answers for blind
        appends; anything else (an update, or only an OPTIMIZE, or more commits than the history
        window) is counted in the change feed, the query the append's guard runs: then the
        ranges counted and their change rows come back too, for the guard to reuse."""
        if analysis.key or not analysis.rowwise or state is None:
            return True, None
        ranges = moved_ranges({u: p.version for u, p in state.consumed.items()}, latest)
        if not ranges or self._inserts_alone(ranges):
            return True, None
        (upstream, (start, end)), = ranges.items()
        try:
            changes, non_inserts = self.reader.feed_counts(upstream, start, end)
        except DbtRuntimeError:
            # A change-feed gap (VACUUM, log retention): the replay's staging meets it again
            # and makes it a gap, with on_change_feed_gap's rebuild or error.
            return True, None
        return non_inserts == 0, (dict(ranges), changes)

    def _inserts_alone(self, ranges: Mapping[str, Tuple[int, int]]) -> bool:
        """Whether the change to replay is one upstream's commits that hold inserts alone
        (`_inline_write`)."""
        if len(ranges) != 1:
            return False
        (upstream, (start, end)), = ranges.items()
        return self.reader.inserts_only(upstream, start, end)

    def _change_rows(self, state: Optional[ModelState],
                     latest: Mapping[str, Optional[UpstreamPoint]]) -> Optional[int]:
        if state is None:
            return None
        return self.reader.moved_rows({u: p.version for u, p in state.consumed.items()}, latest)

    def _model_state(self, req: RefreshRequest, log: TargetLog,
                     store: StateStore) -> tuple[Optional[ModelState], bool]:
        """(what the model consumed, target recreated): from its newest refresh commit.

        Without one (no target, or a target whose log has no refresh of this model) the state
        row tells a first run from a target dropped or recreated under the model.
        """
        last = log.last
        if last is not None:
            return ModelState(last.fingerprint, last.pinned, "idle", last.timestamp), False
        row = _read_row(store, req.model_id)
        if row is None or not row.fingerprint:
            return None, False
        return row.model_state(), req.target_kind == "delta"

    # ---------------------------------------------------------------- preflight
    def _preflight(self, run: _Run, store: StateStore) -> None:
        """Read-only checks before anything is written; each may turn the plan into a backfill
        (or raise) per on_change_feed_gap and on_model_change."""
        if run.plan.action != BACKFILL:
            run.plan, columns = self._checks.replay(run.req, run.config, run.plan, run.log,
                                                    run.started)
            run.columns = columns or run.columns
        if run.plan.action == BACKFILL:
            run.plan = self._checks.backfill(run.req, run.config, run.plan)
        if not run.columns:  # the replay check may have described the model already
            run.columns = self.reader.describe(pin_versions(run.req.sql, run.plan.versions_to()))
        if run.plan.action == REPLAY:
            run.plan = replace(run.plan, rule=replay_rule(
                run.analysis, run.config, run.plan.ranges(), run.columns))
        self._sync_result(run)

    # ---------------------------------------------------------------- stage, apply, record
    def _execute(self, run: _Run, store: StateStore, waiter: LeaseWait) -> RefreshResult:
        req, result = run.req, run.result
        result.run_id = run.run_id
        now = measuring_time()
        if now is not None and run.clock is not None:
            run.prep_s = round((now - run.clock).total_seconds(), 3)
        try:
            landed_inline = self._inline_write(run)
            chunks = 1 if landed_inline is not None else self._stage_with_gap(run)
            if landed_inline is not None:
                landed = landed_inline
            elif chunks == 1:
                self._applier.guard(req, run.config, run.staged, run.strategy)
                landed = self._commit(run)
            else:
                chunked = ChunkedApply(self._fetch, self._run, self._applier, self._stager, store,
                                       waiter)
                landed = chunked.apply(req, run.config, run.staged, run.commit(), chunks, result,
                                       run.started)
                run.committed = True
            result.chunks = chunks
        except ConcurrentRefresh as lost:
            self._drop(run)
            return _refreshed_concurrently(run, lost.winner)
        except BatchRefreshLeaseError:
            self._drop(run)
            raise
        except BatchRefreshUserError as exc:
            self._drop(run)
            retry = (_key_retry(exc, run.analysis,
                                run.config.nullable_key and not run.config.outer_key)
                     if run.inferred_key and not run.committed else None)
            if retry is not None:
                raise retry from exc
            self._recorder.add(Outcome(req.state_schema, req.model_id, req.target, current_time(),
                                 error=str(exc).splitlines()[0]))
            raise
        except Exception as exc:
            self._drop(run)
            self._recorder.add(Outcome(req.state_schema, req.model_id, req.target, current_time(),
                                 error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
            raise BatchRefreshRuntimeError(
                f"batch_refresh model '{req.model}': {run.plan.action} failed: {exc}\n"
                + ("The refresh is in the target's log; the next `dbt run` continues from it."
                   if run.committed else self._not_done(run, exc))
            ) from exc
        self._drop(run)
        self._meter.finish(result)
        previous = run.log.last
        self._recorder.add(Outcome(
            req.state_schema, req.model_id, req.target, current_time(), commit=landed,
            sql=req.sql, history=history_row(landed, result, run.started, current_time()),
            previous=(logged_history_row(previous, run.started)
                      if previous is not None and previous.complete else None),
            previous_refresh=previous.refresh if previous is not None else 0))
        return result

    @staticmethod
    def _not_done(run: _Run, exc: BaseException) -> str:
        if getattr(exc, "resumable", False):
            return ("The refresh is recorded as interrupted; the next `dbt run` resumes it with "
                    "the same pinned upstream versions.")
        return "The target was not touched; the next `dbt run` starts the refresh again."

    def _stage_with_gap(self, run: _Run) -> int:
        """Stage the plan; a change-feed gap met on the way turns a replay into a backfill."""
        try:
            return self._stage(run)
        except DbtRuntimeError as exc:
            kind = classify(str(exc))
            if kind is None or run.plan.action != REPLAY or isinstance(exc, BatchRefreshUserError):
                raise
            plan = run.plan
            moved = [u for u, p in plan.pinned.items() if p.version > plan.consumed[u].version]
            gap = Gap(kind, ", ".join(moved), min(plan.consumed[u].version + 1 for u in moved),
                      max(plan.pinned[u].version for u in moved))
            self._drop(run)
            run.plan = self._checks.backfill(
                run.req, run.config, self._checks.on_gap(run.req.model, run.config, run.plan, gap))
            self._sync_result(run)
            return self._stage(run)

    def _inline_write(self, run: _Run) -> Optional[RefreshCommit]:
        """One write of the model with its key checks inline, nothing cached, no separate check:
        a row-wise replay of inserts alone whose keys lie above the target's key ceiling (one
        INSERT of the model over the inserted change rows; 0.40 s against 0.60-0.65 s staged
        at 100k-1M rows), or a keyed backfill that replaces the target (strategy.
        backfills_checked). None where neither applies or a row failed its checks: then the
        refresh stages as usual, and a bad key gets its usual error (an inferred key found
        NULL: planned again without it)."""
        staged = self._inline_staging(run)
        if staged is None:
            return None
        run.staged = staged
        result = run.result
        try:
            fail_point("during_staging")
            landed = self._commit(run)
        except DbtRuntimeError as exc:
            if (isinstance(exc, BatchRefreshUserError) or (
                    sqlgen.INLINE_CHECK_MARKER not in str(exc) and classify(str(exc)) is None)):
                raise
            if run.inferred_key and sqlgen.INLINE_NULL_MARKER in str(exc):
                # Planned again at once (_key_retry), not staged only to find the NULL: a
                # first build of a NULL group evaluates the model twice, not three times.
                key = ", ".join(run.config.unique_key)
                raise NullKeyError(run.req.model, "bad unique_key",
                                   [f"output rows have a NULL in unique_key ({key})."]) from exc
            run.staged = None  # a key to check against the target, or a change-feed gap
            return None
        if not staged.direct:  # a direct write's rows are its commit's, none staged
            result.staged_rows = result.rows_inserted
        result.staged_from = staged.staged_from
        result.strategy = run.strategy.value
        return landed

    def _commit(self, run: _Run) -> RefreshCommit:
        """The write of a single-chunk refresh, between the fail points crash tests stop at."""
        assert run.staged is not None
        fail_point("before_commit")
        landed = self._applier.commit(run.req, run.config, run.staged, run.commit(), run.result)
        run.committed = True
        fail_point("after_commit")
        return landed

    def _inline_staging(self, run: _Run) -> Optional[Staged]:
        plan, req = run.plan, run.req
        if plan.action == BACKFILL:
            return self._checked_backfill(run)
        if plan.action != REPLAY or plan.strategy is not Strategy.ROWWISE:
            return None
        key = run.single_key()
        ranges = plan.ranges()
        if key is None or not self._inserts_alone(ranges):
            return None
        (upstream, (start, end)), = ranges.items()
        ceiling = self._ceiling(run)
        if ceiling is None or ceiling.key != key:
            return None
        body = over_changes(req.sql, upstream, start, end, change_types=("insert",))
        select = sqlgen.inserted_checked(body, [c for c, _ in run.columns],
                                         run.config.unique_key[0],
                                         sqlgen.typed_lit(ceiling.value, key.sql_type))
        return Staged(f"(\n{select}\n) _br_i", list(run.columns), strategy=Strategy.ROWWISE,
                      top_key=key, target_top=ceiling, inline=True)

    def _checked_backfill(self, run: _Run) -> Optional[Staged]:
        """A keyed backfill written straight from the model, its key checks in the write
        (strategy.backfills_checked). Its key ceiling is read back from its commit by the next
        replay, as an overwrite's is (key_top_added)."""
        plan, req, key = run.plan, run.req, run.single_key()
        replaces = req.target_kind == "none" or (req.target_kind == "delta" and req.full_refresh)
        if not backfills_checked(plan.strategy, run.config, replaces_target=replaces):
            return None
        agg_run = self._stager.agg_run(req, run.config, run.analysis, plan, plan_id=run.run_id,
                                       refresh=run.refresh, previous_plan=run.previous_plan)
        model = self._stager.whole_model(req.sql, run.analysis, plan, run.columns, agg_run)
        select = sqlgen.backfill_checked(model, [c for c, _ in run.columns],
                                         run.config.unique_key, run.config.null_checked())
        return Staged(f"(\n{select}\n) _br_b", list(run.columns), strategy=Strategy.BACKFILL,
                      top_key=key, inline=True, direct=True)

    def _ceiling(self, run: _Run) -> Optional[KeyTop]:
        """The target's key ceiling before this replay (plan/key_top.py), from its newest
        refresh commit; read once per refresh."""
        if run.ceiling_read:
            return run.ceiling
        run.ceiling_read = True
        last = run.log.last
        if last is None or last.key_top_added is None:
            run.ceiling = last.key_top if last is not None else None
        elif last.version >= 0:
            inserted = self._inserted_key_max(run.req.target, last.version,
                                              last.key_top_added.column)
            run.ceiling = with_inserted(last.key_top, last.key_top_added, inserted)
        return run.ceiling

    def _stage(self, run: _Run) -> int:
        """The chunk count the staged rows need."""
        config = run.config
        run.staged = self._stager.stage_plan(
            run.req, config, run.analysis, run.plan, run.columns, run.view, plan_id=run.run_id,
            refresh=run.refresh, previous_plan=run.previous_plan)
        if run.plan.action == REPLAY:
            run.staged.target_top = self._ceiling(run)  # the target as the replay finds it
        run.result.staged_rows = run.staged.rows
        run.result.staged_from = run.staged.staged_from
        run.result.strategy = run.strategy.value
        if (run.strategy in (Strategy.BACKFILL, Strategy.OVERWRITE) or not config.unique_key
                or run.staged.partial):
            return 1
        return max(1, -(-run.staged.rows // config.merge_chunk_rows))

    def _drop(self, run: _Run) -> None:
        # A staging that failed may still have left its view: Spark 3.5 creates the view of a
        # `CACHE TABLE ... AS SELECT` before the caching fails (a gap met while staging), and
        # the backfill that follows stages under the same name.
        if run.staged is None:  # staging failed, maybe part-way
            views = [run.view] + self._stager.derived_views(run.view, run.analysis)
        else:
            views = [run.view] if run.staged.source == run.view else []
        try:
            self._stager.drop(run.staged, views)
        except Exception:  # noqa: BLE001 - cleanup after a failure must not hide the failure
            pass

    def _sync_result(self, run: _Run) -> None:
        plan, result = run.plan, run.result
        result.action, result.reason, result.mode = plan.action, plan.reason, plan.mode
        result.strategy = plan.strategy.value
        result.fallback_reason = plan.fallback_reason
        result.versions_to = plan.versions_to() or plan.versions_from()

    def _finish(self, result: RefreshResult) -> RefreshResult:
        self._meter.finish(result)
        logger.debug("batch_refresh slowest statements: " + "; ".join(
            f"{secs:.2f}s {sql}" for secs, sql in self._meter.slowest))
        return result

    def table_columns(self, relation: str) -> List[str]:
        return [n for n, _ in self.reader.describe(f"SELECT * FROM {quote_relation(relation)}")]


def _read_row(store: StateStore, model_id: str) -> Optional[StateRow]:
    try:
        return store.read(model_id)
    except DbtRuntimeError:
        return None  # no state table yet


def _result(plan: Plan) -> RefreshResult:
    return RefreshResult(
        action=plan.action, reason=plan.reason, mode=plan.mode, strategy=plan.strategy.value,
        fallback_reason=plan.fallback_reason, versions_from=plan.versions_from(),
        versions_to=plan.versions_to() or plan.versions_from(),
        next_due=plan.next_due.isoformat(sep=" ") if plan.next_due else None)


def _refreshed_concurrently(run: _Run, winner: Optional[RefreshCommit]) -> RefreshResult:
    result = run.result
    by = f"run {winner.plan_id}" if winner else "another run"
    result.action, result.mode, result.strategy = SKIP, "none", Strategy.SKIP.value
    result.reason = (f"refreshed concurrently by {by} (refresh {run.refresh}); this run wrote "
                     "nothing")
    result.refreshed_by = winner.plan_id if winner else None
    result.rows_inserted = result.rows_updated = result.rows_deleted = 0
    result.rewritten = False
    if winner is not None:
        result.versions_to = {u: p.version for u, p in winner.pinned.items()}
    return result


__all__ = ["Refresher", "RefreshRequest", "RefreshResult", "lease_error"]
