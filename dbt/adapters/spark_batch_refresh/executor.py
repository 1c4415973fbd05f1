"""Runs one refresh of one model: plan, lease, stage, apply, clean up.

All SQL goes through the callables given (the dbt connection), never a local SparkSession, so
the same code serves the embedded session and a Spark Thrift Server.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List, Mapping, Optional

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError
from dbt_common.invocation import get_invocation_id

from dbt.adapters.spark_batch_refresh import analysis as sa
from dbt.adapters.spark_batch_refresh import sqlgen
from dbt.adapters.spark_batch_refresh.config import BatchRefreshConfig, parse_config
from dbt.adapters.spark_batch_refresh.errors import (
    BatchRefreshLeaseError,
    BatchRefreshRuntimeError,
    BatchRefreshUserError,
    MissingUpstream,
)
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.gaps import Gap, classify, retention_risk
from dbt.adapters.spark_batch_refresh.planner import (
    BACKFILL,
    FULL,
    NOOP,
    REPLAY,
    SKIP,
    Plan,
    UpstreamPoint,
    gap_error,
    model_change_error,
    plan_run,
)
from dbt.adapters.spark_batch_refresh.session_confs import (
    USER_METADATA, SessionConfs, idempotent_write)
from dbt.adapters.spark_batch_refresh.state import (
    StateRow, StateStore, as_datetime, points_from_json, points_json)

logger = AdapterLogger("SparkBatchRefresh")

Fetch = Callable[[str], List[Dict[str, Any]]]
Run = Callable[[str], None]

NOW_ENV = "BATCH_REFRESH_NOW"  # testing aid: a fixed clock for the interval gate
TRACE_ENV = "BATCH_REFRESH_TRACE"  # profiling aid: append each statement's seconds and SQL here


def current_time() -> datetime:
    fixed = os.environ.get(NOW_ENV)
    return datetime.fromisoformat(fixed) if fixed else datetime.now().replace(microsecond=0)


@dataclass(frozen=True)
class RefreshRequest:
    model: str
    model_id: str
    target: str  # rendered relation, e.g. `schema`.`name`
    sql: str  # compiled model SQL
    raw_config: Mapping[str, Any]
    target_options: str  # rendered partition/location/comment clauses
    target_kind: str  # "none" | "delta" | "other"
    state_schema: str
    full_refresh: bool
    force: bool


@dataclass
class RefreshResult:
    action: str
    reason: str
    mode: str
    run_id: Optional[str] = None
    resumed: bool = False
    fallback_reason: Optional[str] = None
    versions_from: Dict[str, int] = field(default_factory=dict)
    versions_to: Dict[str, int] = field(default_factory=dict)
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    staged_rows: int = 0
    next_due: Optional[str] = None
    duration_s: float = 0.0
    chunks: int = 0
    # What a keyed replay recomputed its rows from: "changes" (the change feed alone, row-wise
    # models) or "snapshot" (the model at the pinned versions, restricted to affected keys).
    staged_from: Optional[str] = None
    statements: int = 0  # SQL statements this refresh issued
    writes: int = 0  # of which Delta writes (each one commit)

    @property
    def rows_affected(self) -> int:
        return self.rows_inserted + self.rows_updated + self.rows_deleted

    def message(self) -> str:
        if self.action in (SKIP, NOOP):
            return f"{self.action.upper()}: {self.reason}"
        ups = sorted(set(self.versions_from) | set(self.versions_to))
        moves = ", ".join(
            f"{u} v{self.versions_from.get(u, '-')}->v{self.versions_to.get(u, '-')}" for u in ups
        )
        verb = ("resumed " if self.resumed else "") + self.action
        tail = f" (fallback: {self.fallback_reason})" if self.fallback_reason else ""
        return (
            f"{verb.upper()} [{moves}]: +{self.rows_inserted} ~{self.rows_updated} "
            f"-{self.rows_deleted} rows{tail}"
        )

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["rows_affected"] = self.rows_affected
        data["message"] = self.message()
        writes = self.action not in (SKIP, NOOP)
        data["log_line"] = self.message() + (f" ({self.reason})" if writes else "")
        return data


_WRITE_PREFIXES = ("MERGE", "INSERT", "UPDATE", "DELETE", "CREATE OR REPLACE TABLE",
                   "CREATE TABLE", "ALTER TABLE")


class _Meter:
    """Counts and times the statements of one refresh (for run results and benchmarks)."""

    def __init__(self, fetch: Fetch, run: Run) -> None:
        self._inner_fetch, self._inner_run = fetch, run
        self.statements = 0
        self.writes = 0
        self.slowest: List[tuple[float, str]] = []

    def _timed(self, call: Callable[[str], Any], sql: str) -> Any:
        started = time.monotonic()
        try:
            return call(sql)
        finally:
            elapsed = time.monotonic() - started
            self.statements += 1
            self.writes += sql.lstrip().upper().startswith(_WRITE_PREFIXES)
            self.slowest = sorted(self.slowest + [(elapsed, sql.split("\n", 1)[0][:90])],
                                  reverse=True)[:5]
            trace = os.environ.get(TRACE_ENV)
            if trace:
                with open(trace, "a") as handle:
                    handle.write(f"{elapsed:8.3f}\t{' '.join(sql.split())[:400]}\n")

    def fetch(self, sql: str) -> List[Dict[str, Any]]:
        return self._timed(self._inner_fetch, sql)

    def run(self, sql: str) -> None:
        self._timed(self._inner_run, sql)


class Refresher:
    def __init__(self, fetch: Fetch, run: Run) -> None:
        self._meter = _Meter(fetch, run)
        self._fetch = self._meter.fetch
        self._run = self._meter.run

    # ---------------------------------------------------------------- reading upstreams
    def latest_point(self, upstream: str) -> Optional[UpstreamPoint]:
        """Latest version and commit time, or None for a relation that is not a Delta table."""
        try:
            return self._point(sa.quote_relation(upstream))
        except DbtRuntimeError as exc:
            text = str(exc)
            if "DELTA_ONLY_OPERATION" in text or "not a Delta table" in text or "is a view" in text:
                return None
            if "TABLE_OR_VIEW_NOT_FOUND" in text or "cannot be found" in text:
                raise MissingUpstream(upstream) from exc
            raise

    def _latest_points(self, model: str, upstreams: List[str]) -> Dict[str, Optional[UpstreamPoint]]:
        """Every upstream's latest point; all missing upstreams in one error, before any write."""
        latest: Dict[str, Optional[UpstreamPoint]] = {}
        missing = []
        for upstream in upstreams:
            try:
                latest[upstream] = self.latest_point(upstream)
            except MissingUpstream:
                missing.append(upstream)
        if missing:
            raise BatchRefreshUserError(model, "an upstream relation does not exist", [
                f"{name} was not found. Build it first (`dbt run --select +{model}` builds the "
                f"model's parents) or fix the ref/source/table name in the model."
                for name in missing])
        return latest

    def details(self, upstreams: List[str]) -> Dict[str, tuple[Optional[str], Dict[str, str]]]:
        """Delta table id and properties of each upstream (DESCRIBE DETAIL)."""
        found = {}
        for upstream in upstreams:
            rows = self._fetch(f"DESCRIBE DETAIL {sa.quote_relation(upstream)}")
            detail = rows[0] if rows else {}
            found[upstream] = (detail.get("id"), _props_dict(detail.get("properties")))
        return found

    # ---------------------------------------------------------------- one run
    def refresh(self, req: RefreshRequest) -> RefreshResult:
        started = time.monotonic()
        config = parse_config(req.model, req.raw_config)
        analysis = sa.analyze(req.sql, config.unique_key)
        fingerprint = sa.fingerprint(analysis, config.result_fingerprint_parts())
        # From here on the key is the configured one or the one inferred from GROUP BY.
        config = replace(config, unique_key=analysis.key)
        store = StateStore(req.state_schema, self._fetch, self._run)
        store.ensure()
        # Planning starts from this invocation's snapshot of the state table (one read for all
        # models); a run that will write, or finds its model busy, reads its row afresh.
        row, fresh = store.read_planned(req.model_id, get_invocation_id())
        now = current_time()
        latest = self._latest_points(req.model, analysis.upstreams)

        def decide(row: Optional[StateRow]) -> tuple[Plan, bool]:
            if row is not None and row.phase != "idle":
                self._check_lease(req, row, now)
                if row.plan and row.fingerprint in ("", fingerprint) and not req.full_refresh:
                    return _plan_from_json(row.plan), True
            return plan_run(
                model=req.model,
                config=config,
                analysis=analysis,
                fingerprint=fingerprint,
                state=row.model_state() if row and row.fingerprint else None,
                latest=latest,
                target_exists=req.target_kind == "delta",
                full_refresh=req.full_refresh,
                force=req.force,
                now=now,
            ), False

        planned: Optional[tuple[Plan, bool]] = None
        if fresh or (row is not None and row.phase == "idle"):
            planned = decide(row)
        if planned is None or (planned[0].writes and not fresh):
            row = store.read(req.model_id)
            planned = decide(row)
        plan, resumed = planned
        if plan.writes and not resumed:
            if plan.action == BACKFILL:
                plan = self._validate_backfill(req, config, plan)
            else:
                plan = self._preflight(req, config, plan, row, now)
                if plan.action == BACKFILL:
                    plan = self._validate_backfill(req, config, plan)
        result = RefreshResult(
            action=plan.action,
            reason=plan.reason,
            mode=plan.mode,
            resumed=resumed,
            fallback_reason=plan.fallback_reason,
            versions_from=plan.versions_from(),
            versions_to=plan.versions_to() or plan.versions_from(),
            next_due=plan.next_due.isoformat(sep=" ") if plan.next_due else None,
        )
        if not plan.writes:
            self._finish_metrics(result, started)
            return result

        run_id = uuid.uuid4().hex[:12]
        plan_json = row.plan if resumed and row is not None and row.plan else {
            **_plan_to_json(plan), "plan_id": run_id}
        plan_id = str(plan_json.get("plan_id") or run_id)
        result.run_id = plan_id
        holder = f"{socket.gethostname()}:{os.getpid()}"
        if not store.take_lease(
            model_id=req.model_id, relation=req.target, seen=row, run_id=run_id, holder=holder,
            now=now, until=now + timedelta(seconds=config.lease_timeout_s), plan=plan_json,
            keep_phase=resumed,
        ):
            raise _lease_error(req, store.read(req.model_id))
        fail_point("after_lease")

        phase = row.phase if resumed and row is not None else "refreshing"
        ctx = _RunContext(req, config, analysis, plan, store, run_id, plan_id,
                          _staging_name(req.target), f"_br_staging_{plan_id}", result,
                          touched=phase in ("merging", "cleanup"))
        try:
            if phase != "merging" or not self._staging_ready(ctx):
                # Nothing durable before the merge phase: staging is recomputed from the pinned
                # versions, and chunks the target history shows as committed are skipped.
                self._refreshing(ctx)
            self._merging(ctx)
            fail_point("before_cleanup")
            result.chunks = ctx.chunks
            self._finish_metrics(result, started)
            store.record(self._history_values(ctx, now, "success",
                                              f"resumed by run {run_id}" if resumed else ""))
            target = self._point(req.target)
            store.complete(
                model_id=req.model_id, run_id=run_id, fingerprint=fingerprint,
                consumed=ctx.plan.pinned, action=ctx.plan.action,
                target_version=target.version if target else None,
                target_committed_at=target.timestamp if target else None, now=current_time(),
            )
            self._drop_staging(ctx)
            self._finish_metrics(result, started)  # the result counts the cleanup as well
            fail_point("after_cleanup")
        except BatchRefreshUserError as exc:
            self._drop_view(ctx)
            self._release(ctx, exc)
            raise
        except Exception as exc:
            # A persisted staging table stays: the resumed run merges its remaining chunks.
            self._drop_view(ctx)
            self._release(ctx, exc)
            raise BatchRefreshRuntimeError(
                f"batch_refresh model '{req.model}': {plan.action} failed: {exc}\n"
                + ("The refresh is recorded as interrupted; the next `dbt run` resumes it with "
                   "the same pinned upstream versions." if ctx.touched else
                   "The target was not touched; the next `dbt run` starts the refresh again.")
            ) from exc
        return result

    def _finish_metrics(self, result: RefreshResult, started: float) -> None:
        result.duration_s = time.monotonic() - started
        result.statements, result.writes = self._meter.statements, self._meter.writes
        logger.debug("batch_refresh slowest statements: " + "; ".join(
            f"{secs:.2f}s {sql}" for secs, sql in self._meter.slowest))

    # ---------------------------------------------------------------- phases
    def _release(self, ctx: "_RunContext", exc: BaseException) -> None:
        try:
            ctx.store.release(ctx.req.model_id, ctx.run_id, ctx.touched, f"error: {exc}",
                              current_time())
        except Exception as release_exc:  # noqa: BLE001 - the original error matters more
            logger.warning(f"batch_refresh model '{ctx.req.model}': could not release the "
                           f"lease ({release_exc}); it expires at its lease_timeout.")

    def _check_lease(self, req: RefreshRequest, row: StateRow, now: datetime) -> None:
        if row.lease_until is not None and row.lease_until > now:
            raise _lease_error(req, row)

    def _validate_backfill(self, req: RefreshRequest, config: BatchRefreshConfig,
                           plan: Plan) -> Plan:
        """Every Delta upstream has its change feed on; pin the table ids seen."""
        details = self.details(list(plan.pinned))
        missing = [] if config.refresh_mode == "full" else [
            u for u, (_, props) in details.items()
            if props.get("delta.enableChangeDataFeed", "false").lower() != "true"
        ]
        if missing:
            raise BatchRefreshUserError(
                req.model,
                "upstream Delta tables have no Change Data Feed, so changes cannot be replayed",
                [f"{u}: run  ALTER TABLE {u} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)"
                 for u in missing]
                + ["or set refresh_mode='full' to recompute the model on every refresh."],
            )
        return replace(plan, pinned={u: replace(p, table_id=details[u][0])
                                     for u, p in plan.pinned.items()})

    def _preflight(self, req: RefreshRequest, config: BatchRefreshConfig, plan: Plan,
                   row: Optional[StateRow], now: datetime) -> Plan:
        """Read-only checks before a replay or recompute takes the lease.

        Upstream recreated (table id changed), the retention guard, the target written by
        someone else, and the model's output columns no longer matching the target. Each
        either turns the plan into a backfill or raises, per on_change_feed_gap and
        on_model_change.
        """
        moved = [u for u, p in plan.pinned.items() if p.version > plan.consumed[u].version]
        details = self.details(moved)
        for upstream in moved:
            seen, (table_id, props) = plan.consumed[upstream], details[upstream]
            if seen.table_id and table_id and seen.table_id != table_id:
                gap = Gap("recreated", upstream, seen.version, plan.pinned[upstream].version)
                return self._on_gap(req, config, plan, gap)
            risk = retention_risk(props, now - seen.timestamp)
            if risk:
                prop, retention, left = risk
                logger.warning(
                    f"batch_refresh model '{req.model}': upstream {upstream} was consumed at "
                    f"v{seen.version} ({seen.timestamp}); {prop} is {retention}, so "
                    + (f"only {left} is left before" if left.total_seconds() > 0 else "already past")
                    + " VACUUM or log cleanup may open a change-feed gap. Run this model more "
                    "often than that (its refresh_interval and your schedule)."
                )
        pinned = {u: replace(p, table_id=details[u][0] if u in details else
                             plan.consumed[u].table_id) for u, p in plan.pinned.items()}
        plan = replace(plan, pinned=pinned)
        changed = self._target_changed(req, row)
        if changed is None:
            changed = self._output_changed(req, plan)
        if changed is not None:
            if config.on_model_change == "fail":
                raise model_change_error(req.model, changed)
            return replace(plan, action=BACKFILL, mode="full", reason=f"{changed}; rebuilding")
        return plan

    def _on_gap(self, req: RefreshRequest, config: BatchRefreshConfig, plan: Plan, gap: Gap) -> Plan:
        if config.on_change_feed_gap == "fail":
            raise gap_error(req.model, gap)
        logger.warning(f"batch_refresh model '{req.model}': {gap.describe()}; rebuilding from a "
                       f"new snapshot (on_change_feed_gap='rebuild').")
        return replace(plan, action=BACKFILL, mode="full", reason=f"change feed gap: {gap.describe()}")

    def _target_changed(self, req: RefreshRequest, row: Optional[StateRow]) -> Optional[str]:
        """A commit on the target that is neither ours nor table maintenance."""
        if row is None or row.target_version is None:
            return None
        latest = self._point(req.target)
        version = latest.version if latest else -1
        if version < row.target_version:
            return f"the target {req.target} was recreated (its version went back)"
        if version == row.target_version:
            # Same version number, other commit: dropped and rebuilt up to the same version
            # (e.g. a plain CTAS at v0 after our backfill at v0).
            if (latest is not None and row.target_committed_at is not None and abs(
                    (latest.timestamp - row.target_committed_at).total_seconds()) > 1):
                return f"the target {req.target} was recreated (v{version} is another commit)"
            return None
        for entry in self._fetch(f"DESCRIBE HISTORY {req.target} LIMIT {version - row.target_version}"):
            if str(entry.get("operation", "")).upper() in MAINTENANCE_OPERATIONS:
                continue
            if "batch_refresh_plan" in str(entry.get("userMetadata") or ""):
                continue
            return (f"the target {req.target} was changed outside batch_refresh "
                    f"(v{entry['version']}: {entry.get('operation')})")
        return None

    def _output_changed(self, req: RefreshRequest, plan: Plan) -> Optional[str]:
        model_sql = sa.pin_versions(req.sql, plan.versions_to())
        model_cols = [(c.lower(), t) for c, t in self._describe(model_sql)]
        target_cols = [(c.lower(), t) for c, t in self._describe(f"SELECT * FROM {req.target}")]
        if model_cols != target_cols:
            return (f"the model's output columns changed ({_cols(target_cols)} -> "
                    f"{_cols(model_cols)})")
        return None

    def _staging_ready(self, ctx: "_RunContext") -> bool:
        """A multi-chunk merge was under way: its Delta staging table is still there."""
        if ctx.plan.action == REPLAY and not ctx.config.unique_key:
            return False  # the append path stages nothing
        schema, _, name = ctx.staging.replace("`", "").rpartition(".")
        if not self._fetch(f"SHOW TABLES IN {schema} LIKE '{name}'"):
            return False
        row = ctx.store.read(ctx.req.model_id)
        ctx.chunks = max(1, int((row.chunks_total if row else 0) or 1))
        ctx.result.staged_rows = int((row.staged_rows if row else 0) or 0)
        ctx.source = ctx.staging
        return True

    def _drop_staging(self, ctx: "_RunContext") -> None:
        if ctx.plan.action == REPLAY and ctx.config.unique_key:
            self._run(f"DROP VIEW IF EXISTS {ctx.keys}")
        if ctx.source == ctx.staging:
            self._run(f"DROP TABLE IF EXISTS {ctx.staging}")
        elif ctx.source == ctx.view:
            self._run(f"DROP VIEW IF EXISTS {ctx.view}")

    def _drop_view(self, ctx: "_RunContext") -> None:
        if ctx.source != ctx.view:
            return
        try:
            self._run(f"DROP VIEW IF EXISTS {ctx.keys}")
            self._run(f"DROP VIEW IF EXISTS {ctx.view}")
        except Exception:  # noqa: BLE001 - cleanup after a failure must not hide the failure
            pass

    def _refreshing(self, ctx: "_RunContext") -> None:
        """Phase 1: write the staging table (nothing touches the target yet)."""
        try:
            chunks = self._stage_or_guard(ctx)
        except DbtRuntimeError as exc:
            kind = classify(str(exc))
            if kind is None or ctx.plan.action != REPLAY or isinstance(exc, BatchRefreshUserError):
                raise
            plan = ctx.plan
            moved = [u for u, p in plan.pinned.items() if p.version > plan.consumed[u].version]
            gap = Gap(kind, ", ".join(moved), min(plan.consumed[u].version + 1 for u in moved),
                      max(plan.pinned[u].version for u in moved))
            ctx.plan = self._validate_backfill(ctx.req, ctx.config,
                                               self._on_gap(ctx.req, ctx.config, plan, gap))
            ctx.result.action, ctx.result.reason, ctx.result.mode = (
                ctx.plan.action, ctx.plan.reason, ctx.plan.mode)
            ctx.store.replan(ctx.req.model_id, ctx.run_id,
                             {**_plan_to_json(ctx.plan), "plan_id": ctx.plan_id}, current_time())
            chunks = self._stage_or_guard(ctx)
        ctx.chunks = chunks
        if chunks > 1:
            # Several commits: persist staging so a resumed run merges the remaining chunks
            # without recomputing it, and record the progress for status output.
            if ctx.source == ctx.view:
                self._run(f"CREATE OR REPLACE TABLE {ctx.staging} USING delta "
                          f"TBLPROPERTIES ('delta.enableChangeDataFeed' = 'false') AS "
                          f"SELECT * FROM {ctx.view}")
                self._run(f"DROP VIEW IF EXISTS {ctx.view}")
                ctx.source = ctx.staging
            ctx.store.begin_merging(ctx.req.model_id, ctx.run_id, chunks, ctx.result.staged_rows,
                                    current_time())
        fail_point("after_staging")

    def _stage_or_guard(self, ctx: "_RunContext") -> int:
        """Stage the plan; the chunk count it needs."""
        req, config, plan = ctx.req, ctx.config, ctx.plan
        if plan.action == REPLAY and not config.unique_key:
            ctx.result.staged_rows = self._append_guard(req, plan)
            return 1
        else:
            self._stage(ctx)
            return 1 if plan.action == BACKFILL or not config.unique_key else max(
                1, math.ceil(ctx.result.staged_rows / config.merge_chunk_rows))

    def _stage(self, ctx: "_RunContext") -> None:
        req, config, analysis, plan = ctx.req, ctx.config, ctx.analysis, ctx.plan
        pinned = plan.versions_to()
        model_sql = sa.pin_versions(req.sql, pinned) if analysis.shape != "unparsed" else req.sql
        if plan.action == REPLAY:
            ranges = {u: (plan.consumed[u].version + 1, p.version) for u, p in plan.pinned.items()
                      if p.version > plan.consumed[u].version}
            select = self._changes_only_staging(ctx, ranges, model_sql)
            ctx.result.staged_from = "snapshot" if select is None else "changes"
            if select is None:
                parts = sa.affected_keys_sql(req.sql, config.unique_key, ranges, pinned,
                                             plan.versions_from(), self._table_columns)
                # The keys are computed (and cached) on their own: one plan holding the model
                # once per changed scan plus the model again grows past what Spark plans quickly.
                self._run(f"DROP VIEW IF EXISTS {ctx.keys}")
                self._run(f"CACHE TABLE {ctx.keys} AS\n"
                          f"{sqlgen.affected_keys(parts, config.unique_key)}")
                select = sqlgen.staging_affected(model_sql, ctx.keys, config.unique_key)
        else:
            select = sqlgen.staging_full(model_sql, config.unique_key)
        fail_point("during_staging")
        # Staging is computed once into the session's cache (memory and disk), not a Delta
        # commit: it is a pure function of the pinned versions, so a resumed run recomputes it.
        # Only a merge of several chunks persists it as a Delta table (see _refreshing).
        self._run(f"DROP VIEW IF EXISTS {ctx.view}")
        self._run(f"CACHE TABLE {ctx.view} AS\n{select}")
        ctx.source = ctx.view
        if config.unique_key:
            self._check_keys(ctx)
        else:
            rows = self._fetch(f"SELECT count(*) AS staged FROM {ctx.source}")
            ctx.result.staged_rows = int(rows[0]["staged"])

    def _changes_only_staging(self, ctx: "_RunContext", ranges: Mapping[str, tuple[int, int]],
                              model_sql: str) -> Optional[str]:
        """A row-wise model's staging from its upstream's change feed alone, when possible.

        The general replay recomputes the affected keys from the upstream at the pinned version,
        a scan that grows with the table. A row-wise model does not need it: its new rows are
        the model over the change rows, netted (sqlgen.staging_from_changes). Output columns
        Spark cannot group by (maps, variants) keep the general path.
        """
        if not ctx.analysis.rowwise or len(ranges) != 1:
            return None
        columns = self._describe(model_sql)
        if not columns or any(not sa.groupable_type(t) for _, t in columns):
            return None
        (upstream, (start, end)), = ranges.items()
        plus = sa.over_changes(ctx.req.sql, upstream, start, end, sa.PLUS_CHANGES)
        minus = sa.over_changes(ctx.req.sql, upstream, start, end, sa.MINUS_CHANGES)
        return sqlgen.staging_from_changes(plus, minus, [c for c, _ in columns],
                                           ctx.config.unique_key)

    def _table_columns(self, relation: str) -> List[str]:
        return self._columns(sa.quote_relation(relation))

    def _check_keys(self, ctx: "_RunContext") -> None:
        config, staging = ctx.config, ctx.source
        quality = self._fetch(sqlgen.key_quality(staging, config.unique_key))[0]
        ctx.result.staged_rows = int(quality["staged"])
        key = ", ".join(config.unique_key)
        problems = []
        if int(quality["null_keys"]):
            problems.append(f"{quality['null_keys']} output rows have a NULL in unique_key ({key}).")
        if int(quality["staged"]) - int(quality["null_keys"]) != int(quality["distinct_keys"]):
            examples = self._fetch(sqlgen.duplicate_examples(staging, config.unique_key))
            shown = "; ".join(
                "(" + ", ".join(str(v) for k, v in ex.items() if k != "n") + f") x{ex['n']}"
                for ex in examples
            )
            problems.append(f"unique_key ({key}) is not unique in the model output: {shown}.")
        if problems:
            raise BatchRefreshUserError(
                ctx.req.model, "bad unique_key; the target was not touched",
                problems + ["Fix: choose a unique_key that identifies one output row, or "
                            "de-duplicate / filter NULL keys in the model."],
            )

    def _merging(self, ctx: "_RunContext") -> None:
        """Phase 2: apply staging to the target, chunk by chunk, each chunk exactly once.

        Every chunk is an idempotent Delta write (txnAppId = the plan, txnVersion = the chunk)
        tagged with the plan id in userMetadata. A resumed run reads the target's own history
        to find the chunks that committed and continues after them; should it re-apply one,
        Delta skips the repeated (app id, version).
        """
        chunks = ctx.chunks
        done = self._committed_chunks(ctx, chunks)
        ctx.touched = True
        staged: Optional[List[tuple[str, str]]] = None
        for chunk in range(1, chunks + 1):
            if chunk in done:
                continue
            with self._tagged(ctx, chunk, chunks):
                if ctx.plan.action == REPLAY and not ctx.config.unique_key:
                    self._append(ctx)
                else:
                    staged = staged or self._describe(f"SELECT * FROM {ctx.source}")
                    try:
                        self._apply_chunk(ctx, staged, chunk, chunks)
                    except BatchRefreshUserError:
                        # A refused first chunk left the target as it was: back to idle, so
                        # the next run plans afresh once the data or the model is fixed.
                        ctx.touched = bool(done) or chunk > 1
                        raise
            if chunks > 1:
                # progress for status output (and a lease extension); a single chunk's
                # tagged commit in the target history is record enough
                ctx.store.chunk_done(ctx.req.model_id, ctx.run_id, chunk, current_time(),
                                     current_time() + timedelta(seconds=ctx.config.lease_timeout_s))
            fail_point(f"after_chunk:{chunk}")

    def _committed_chunks(self, ctx: "_RunContext", chunks: int) -> set[int]:
        if not ctx.resumed and ctx.plan_id == ctx.run_id:
            return set()  # a plan made by this run cannot have committed anything yet
        try:
            history = self._fetch(f"DESCRIBE HISTORY {ctx.req.target} LIMIT {chunks + 20}")
        except DbtRuntimeError:
            return set()  # no target yet
        done = set()
        for entry in history:
            try:
                meta = json.loads(entry.get("userMetadata") or "{}")
            except (TypeError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("batch_refresh_plan") == ctx.plan_id:
                chunk = int(meta.get("chunk", 0))
                if chunk not in done:
                    _count_committed(entry.get("operationMetrics"), ctx.result)
                done.add(chunk)
        return done

    def _apply_chunk(self, ctx: "_RunContext", staged: List[tuple[str, str]], chunk: int,
                     chunks: int) -> None:
        """Apply one chunk of staging; `staged` = the staging columns and their types."""
        req, config, plan, staging, result = ctx.req, ctx.config, ctx.plan, ctx.source, ctx.result
        columns = sqlgen.model_columns(name for name, _ in staged)
        if plan.action == BACKFILL:
            if req.target_kind == "other":
                self._run(f"DROP TABLE IF EXISTS {req.target}")
                self._run(f"DROP VIEW IF EXISTS {req.target}")
            props = {
                "delta.enableChangeDataFeed": "true",
                "delta.enableDeletionVectors": "true",
                **config.tblproperties,
            }
            cols = ", ".join(sqlgen.q(c) for c in columns)
            self._run(
                f"CREATE OR REPLACE TABLE {req.target} USING delta {req.target_options} "
                f"{sqlgen.tblproperties(props)} AS SELECT {cols} FROM {staging}"
            )
            result.rows_inserted = result.staged_rows
        elif config.unique_key:
            source = staging if chunks == 1 else (
                f"(SELECT * FROM {staging} WHERE {sqlgen.chunk_predicate(config.unique_key, chunks, chunk)})"
            )
            merge = sqlgen.merge_staging(req.target, source, config.unique_key, columns,
                                         delete_missing=plan.action == FULL,
                                         chunk=(chunk, chunks) if chunks > 1 else None,
                                         guard_new_keys=any(n == sqlgen.HAD_OLD for n, _ in staged),
                                         unordered=[n for n, t in staged if not sa.groupable_type(t)])
            try:
                merged = self._fetch(merge)
            except DbtRuntimeError as exc:
                if sqlgen.DUPLICATE_KEY_MARKER not in str(exc):
                    raise
                raise BatchRefreshUserError(
                    req.model, "bad unique_key; this merge was not applied",
                    [f"unique_key ({', '.join(config.unique_key)}) is not unique in the model "
                     "output: a changed upstream row produces the key of a row that did not "
                     "change.",
                     "Fix: choose a unique_key that identifies one output row, or "
                     "de-duplicate the model."],
                ) from None
            _count_merge(merged, result)
        else:
            # Full recompute of a model without a key: overwrite keeps the table's identity.
            cols = ", ".join(sqlgen.q(c) for c in columns)
            self._run(f"INSERT OVERWRITE {req.target} SELECT {cols} FROM {staging}")
            result.rows_inserted = result.staged_rows

    def _append_guard(self, req: RefreshRequest, plan: Plan) -> int:
        """Keyless row-wise model: only inserts upstream can be replayed (as an append)."""
        (upstream, point), = plan.pinned.items()
        start = plan.consumed[upstream].version + 1
        counts = self._fetch(
            f"SELECT count(*) AS changes, coalesce(sum(CASE WHEN _change_type <> 'insert' THEN 1 "
            f"ELSE 0 END), 0) AS non_inserts FROM table_changes('{upstream}', {start}, {point.version})"
        )[0]
        if int(counts["non_inserts"]):
            raise BatchRefreshUserError(
                req.model,
                f"upstream {upstream} has {counts['non_inserts']} updated or deleted rows in "
                f"v{start}..v{point.version}, and the model has no unique_key to apply them by",
                ["Fix: set unique_key to the column(s) identifying an output row, or set "
                 "refresh_mode='full' to recompute the model on every refresh."],
            )
        return int(counts["changes"])

    def _append(self, ctx: "_RunContext") -> None:
        req, plan = ctx.req, ctx.plan
        (upstream, point), = plan.pinned.items()
        start = plan.consumed[upstream].version + 1
        columns = self._columns(req.target)
        cols = ", ".join(sqlgen.q(c) for c in columns)
        body = sa.over_changes(req.sql, upstream, start, point.version, change_types=("insert",))
        rows = self._fetch(f"INSERT INTO {req.target} ({cols}) SELECT {cols} FROM ({body}) _br_a")
        if rows and rows[0].get("num_inserted_rows") is not None:
            ctx.result.rows_inserted = int(rows[0]["num_inserted_rows"])
        else:
            ctx.result.rows_inserted = self._last_commit_metric(req.target, "numOutputRows")

    # ---------------------------------------------------------------- helpers
    def _last_commit_metric(self, relation: str, metric: str) -> int:
        rows = self._fetch(f"DESCRIBE HISTORY {relation} LIMIT 1")
        metrics = rows[0].get("operationMetrics") if rows else None
        if isinstance(metrics, Mapping):
            return int(metrics.get(metric) or 0)
        return 0

    def _columns(self, relation: str) -> List[str]:
        return [name for name, _ in self._describe(f"SELECT * FROM {relation}")]

    def _describe(self, sql: str) -> List[tuple[str, str]]:
        """Output columns and types of a query, without running it."""
        rows = self._fetch(f"DESCRIBE QUERY {sql}")
        return [(r["col_name"], r["data_type"]) for r in rows]

    def _point(self, relation: str) -> Optional[UpstreamPoint]:
        """Latest version and commit time of a Delta table (`relation` as SQL text)."""
        rows = self._fetch(f"DESCRIBE HISTORY {relation} LIMIT 1")
        if not rows:
            return None
        return UpstreamPoint(int(rows[0]["version"]), as_datetime(rows[0]["timestamp"]))

    def _tagged(self, ctx: "_RunContext", chunk: int, chunks: int) -> SessionConfs:
        plan = ctx.plan
        confs = {
            USER_METADATA: json.dumps(
                {"batch_refresh_plan": ctx.plan_id, "run": ctx.run_id, "chunk": chunk,
                 "chunks": chunks, "action": plan.action, "to": plan.versions_to()},
                sort_keys=True,
            ),
            **idempotent_write(f"batch_refresh:{ctx.req.model_id}:{ctx.plan_id}", chunk),
        }
        return SessionConfs(self._run, confs)

    def _history_values(self, ctx: "_RunContext", started: datetime, outcome: str,
                        message: str) -> Dict[str, Any]:
        result = ctx.result
        return {
            "run_id": ctx.plan_id, "model_id": ctx.req.model_id, "relation": ctx.req.target,
            "action": result.action, "mode": result.mode,
            "reason": result.reason if not result.fallback_reason
            else f"{result.reason}; fallback: {result.fallback_reason}",
            "versions_from": json.dumps(result.versions_from, sort_keys=True),
            "versions_to": json.dumps(result.versions_to, sort_keys=True),
            "rows_inserted": result.rows_inserted, "rows_updated": result.rows_updated,
            "rows_deleted": result.rows_deleted, "staged_rows": result.staged_rows,
            "started_at": started, "finished_at": current_time(),
            "duration_s": round(result.duration_s, 3), "outcome": outcome, "message": message,
        }


@dataclass
class _RunContext:
    req: RefreshRequest
    config: BatchRefreshConfig
    analysis: sa.Analysis
    plan: Plan
    store: StateStore
    run_id: str
    plan_id: str
    staging: str  # Delta staging table (multi-chunk merges)
    view: str  # cached temp view the staging rows are computed into

    @property
    def keys(self) -> str:
        """Cached temp view of a replay's affected keys."""
        return f"{self.view}_keys"
    result: RefreshResult
    touched: bool = False
    source: str = ""  # what the merge reads: `view`, or `staging` once persisted
    chunks: int = 1

    @property
    def resumed(self) -> bool:
        return self.result.resumed


def _staging_name(target: str) -> str:
    return f"{target[:-1]}__br_staging`" if target.endswith("`") else f"{target}__br_staging"


MAINTENANCE_OPERATIONS = frozenset({
    "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES",
    "ANALYZE", "REORG", "CHANGE COLUMN", "SET COLUMN COMMENT", "UPGRADE PROTOCOL",
})
_PROP = re.compile(r"""['"]?([\w.]+)['"]?\s*(?:->|=|:)\s*['"]?([^,'"}]+)""")


def _props_dict(props: Any) -> Dict[str, str]:
    """`properties` of DESCRIBE DETAIL: a map (session) or its text form (Thrift)."""
    if isinstance(props, Mapping):
        return {str(k): str(v) for k, v in props.items()}
    return {k: v.strip() for k, v in _PROP.findall(str(props or ""))}


def _cols(cols: List[tuple[str, str]]) -> str:
    return ", ".join(f"{c} {t}" for c, t in cols)


def _count_merge(rows: List[Dict[str, Any]], result: RefreshResult) -> None:
    if not rows:
        return
    r = rows[0]
    # Summed over the chunks of a multi-chunk merge (and added to a resumed run's count of the
    # chunks committed before it).
    result.rows_inserted += int(r.get("num_inserted_rows") or 0)
    result.rows_updated += int(r.get("num_updated_rows") or 0)
    result.rows_deleted += int(r.get("num_deleted_rows") or 0)


def _count_committed(metrics: Any, result: RefreshResult) -> None:
    """Rows of a chunk an interrupted run committed, from the target's history, so a resumed
    refresh reports the whole refresh and not only the chunks it applied itself."""
    if not isinstance(metrics, Mapping):
        return  # the Thrift driver may render the map as text; the counts then stay partial
    def number(name: str) -> int:
        try:
            return int(metrics.get(name) or 0)
        except (TypeError, ValueError):
            return 0
    result.rows_inserted += number("numTargetRowsInserted") or number("numOutputRows")
    result.rows_updated += number("numTargetRowsUpdated")
    result.rows_deleted += number("numTargetRowsDeleted")


def _plan_to_json(plan: Plan) -> Dict[str, Any]:
    return {
        "action": plan.action, "reason": plan.reason, "mode": plan.mode,
        "pinned": json.loads(points_json(plan.pinned)),
        "consumed": json.loads(points_json(plan.consumed)),
        "fallback_reason": plan.fallback_reason,
    }


def _plan_from_json(data: Mapping[str, Any]) -> Plan:
    return Plan(
        action=data["action"], reason=data["reason"], mode=data["mode"],
        pinned=points_from_json(json.dumps(data["pinned"])),
        consumed=points_from_json(json.dumps(data["consumed"])),
        fallback_reason=data.get("fallback_reason"),
    )


def _lease_error(req: RefreshRequest, row: Optional[StateRow]) -> BatchRefreshLeaseError:
    if row is None:
        return BatchRefreshLeaseError(
            f"batch_refresh model '{req.model}': another run took the refresh lease first."
        )
    return BatchRefreshLeaseError(
        f"batch_refresh model '{req.model}': another refresh holds the lease "
        f"(run {row.run_id} by {row.lease_holder}, phase {row.phase}, since {row.lease_since}, "
        f"until {row.lease_until}). Nothing was changed. Wait for it to finish; if that run is "
        f"dead, the next run after {row.lease_until} resumes it, or clear the lease now with "
        f"`dbt run-operation batch_refresh_unlock --args '{{model: {req.model}, force: true}}'`."
    )
