"""A refresh of several chunks: lease, persisted staging, one tagged commit per chunk, resume.

Only a change set above `merge_chunk_rows` pays for this protocol. The lease (a compare-and-set
on the state row) keeps two runs from merging chunks of two plans into one target; the target's
log says which chunks of a plan committed, so a run that takes over a dead run's lease applies
only the rest, each exactly once (Delta skips a repeated txnVersion as well). A single-chunk
run never reads the lease: its commit and chunk 1 of a plan carry the same txnVersion, so
whichever commits second is skipped by Delta, and the loser stops before it writes anything.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Optional, Set, Tuple

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.spark_batch_refresh.sql import analysis as sa
from dbt.adapters.spark_batch_refresh.engine.apply import Applier, ConcurrentRefresh, count_committed
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit, TargetLog
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig, format_duration
from dbt.adapters.spark_batch_refresh.storage.endpoint import current_time
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshLeaseError, BatchRefreshRuntimeError
from dbt.adapters.spark_batch_refresh.failpoints import fail_point
from dbt.adapters.spark_batch_refresh.engine.lease_holder import LOCAL, PROCESS_KEY
from dbt.adapters.spark_batch_refresh.engine.lease_wait import LeaseFreed, LeaseWait, held, unexpired
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, RefreshRequest, RefreshResult, Run
from dbt.adapters.spark_batch_refresh.engine.stage import Staged, Stager
from dbt.adapters.spark_batch_refresh.storage.state import StateRow, StateStore
from dbt.adapters.spark_batch_refresh.sql.rewrite import pin_versions

logger = AdapterLogger("SparkBatchRefresh")


class InterruptedChunks(BatchRefreshRuntimeError):
    """A chunk failed after others committed: the next run resumes the plan."""

    resumable = True


def staging_table(target: str) -> str:
    return f"{target[:-1]}__br_staging`" if target.endswith("`") else f"{target}__br_staging"


class ChunkedApply:
    def __init__(self, fetch: Fetch, run: Run, applier: Applier, stager: Stager,
                 store: StateStore, waiter: LeaseWait) -> None:
        self._fetch, self._run = fetch, run
        self._applier, self._stager, self._store = applier, stager, store
        self._waiter = waiter

    def apply(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
              commit: RefreshCommit, chunks: int, result: RefreshResult,
              now: datetime) -> RefreshCommit:
        """A new plan: lease, persist staging, then every chunk."""
        self._applier.check_new_keys(req, config, staged)
        self._store.ensure()
        row = self._store.read(req.model_id)
        fail_point("before_lease")
        holder = self._lease(req, config, row, commit, chunks, staged.rows, now, resumed=False)
        fail_point("after_lease")
        try:
            self._stager.persist(staged, staging_table(req.target))
        except Exception:
            self._release(req, holder, touched=False, outcome="error: staging not persisted")
            raise
        fail_point("after_staging")
        return self._chunks(req, config, staged, commit, chunks, result, set(), holder)

    def resume(self, req: RefreshRequest, config: BatchRefreshConfig, analysis: sa.Analysis,
               log: TargetLog, now: datetime) -> Tuple[RefreshResult, RefreshCommit, str]:
        """A plan whose chunks a dead (or failed) run left unfinished: the same pinned plan.
        Returns the result, the last commit and who resumed it (for the history row)."""
        last = log.last
        assert last is not None
        self._store.ensure()
        row = self._store.read(req.model_id)
        plan = last.plan()
        result = RefreshResult(
            action=plan.action, reason=plan.reason, mode=plan.mode, run_id=last.plan_id,
            strategy=plan.strategy.value,
            resumed=True, fallback_reason=plan.fallback_reason,
            versions_from=plan.versions_from(), versions_to=plan.versions_to(),
            staged_rows=last.staged_rows, chunks=last.chunks)
        base = last.for_chunk(1, last.chunks)
        holder = self._lease(req, config, row, base, last.chunks, last.staged_rows, now,
                             resumed=True)
        table = staging_table(req.target)
        schema, _, name = table.replace("`", "").rpartition(".")
        if self._fetch(f"SHOW TABLES IN {schema} LIKE '{name}'"):
            staged = Staged(table, [], rows=last.staged_rows)
            staged.columns = [(r["col_name"], r["data_type"])
                              for r in self._fetch(f"DESCRIBE QUERY SELECT * FROM {table}")]
        else:
            columns = [(r["col_name"], r["data_type"]) for r in
                       self._fetch(f"DESCRIBE QUERY {pin_versions(req.sql, plan.versions_to())}")]
            staged = self._stager.stage_plan(
                req, config, analysis, plan, columns, f"_br_staging_{uuid.uuid4().hex[:12]}",
                plan_id=last.plan_id, refresh=last.refresh, previous_plan=None)
            self._stager.persist(staged, table)
        done = self._committed(req, last, result)
        landed = self._chunks(req, config, staged, base, last.chunks, result, done, holder)
        return result, landed, f"resumed by run {row.run_id if row else ''}".strip()

    # ---------------------------------------------------------------- steps
    def _lease(self, req: RefreshRequest, config: BatchRefreshConfig, row: Optional[StateRow],
               commit: RefreshCommit, chunks: int, staged_rows: int, now: datetime,
               resumed: bool) -> str:
        """Take the lease; the run id it is held under."""
        if row is not None and held(row, now):
            self._wait(req, row)
        if row is not None and unexpired(row, now):  # not held: its process has ended
            logger.info(
                f"batch_refresh model '{req.model}': run {row.run_id} by {row.lease_holder} holds "
                f"the refresh lease until {row.lease_until}, but that process has ended on this "
                f"host; this run takes the lease over.")
        me = LOCAL.this_process()
        plan = {"plan_id": commit.plan_id, "refresh": commit.refresh, "chunks": chunks,
                "action": commit.action, "to": commit.plan().versions_to(),
                PROCESS_KEY: me.start}
        run_id = uuid.uuid4().hex[:12] if resumed else commit.run_id
        if not self._store.take_lease(
                model_id=req.model_id, relation=req.target, seen=row, run_id=run_id,
                holder=me.holder, now=now,
                until=now + timedelta(seconds=config.lease_timeout_s), plan=plan,
                chunks=chunks, staged_rows=staged_rows, keep_progress=resumed):
            winner = self._store.read(req.model_id)
            if winner is not None and held(winner, current_time()):
                self._wait(req, winner)  # lost the race for the lease to a live run
            if self._waiter.replan():
                # The run that won the lease has already released it: what this run staged may
                # be consumed, so plan again (usually a no-op) rather than report a live lease.
                raise LeaseFreed(f"batch_refresh model '{req.model}': the lease changed hands")
            raise lease_error(req, winner)
        return run_id

    def _wait(self, req: RefreshRequest, row: StateRow) -> None:
        """Wait (lease_wait) for the holder, then have the refresh planned again: what this
        run staged is stale once the holder has committed."""
        self._waiter.until_free(req.model, row, lambda: self._store.read(req.model_id),
                                current_time,
                                lambda seen: lease_error(req, seen, self._waiter.budget_s))
        if not self._waiter.replan():
            raise lease_error(req, row, self._waiter.budget_s)
        raise LeaseFreed(f"batch_refresh model '{req.model}': the refresh lease was released")

    def _committed(self, req: RefreshRequest, last: RefreshCommit, result: RefreshResult) -> Set[int]:
        """Chunks of the plan in the target's log; their rows count toward the result."""
        done: Set[int] = set()
        for entry in self._fetch(f"DESCRIBE HISTORY {req.target} LIMIT {last.chunks + 20}"):
            found = RefreshCommit.from_history(entry, req.model_id)
            if found is not None and found.plan_id == last.plan_id and found.chunk not in done:
                done.add(found.chunk)
                count_committed(entry.get("operationMetrics"), result,
                                entry.get("operationParameters"))
        return done

    def _chunks(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
                base: RefreshCommit, chunks: int, result: RefreshResult,
                done: Set[int], run_id: str) -> RefreshCommit:
        landed = base
        try:
            for chunk in range(1, chunks + 1):
                if chunk in done:
                    continue
                landed = self._applier.commit(req, config, staged, base.for_chunk(chunk, chunks),
                                              result)
                done.add(chunk)
                if not self._store.chunk_done(
                        req.model_id, run_id, chunk, current_time(),
                        current_time() + timedelta(seconds=config.lease_timeout_s)):
                    raise lost_lease(req, self._store.read(req.model_id), chunk, chunks)
                fail_point(f"after_chunk:{chunk}")
        except BatchRefreshLeaseError:
            raise  # the lease is another run's: nothing of ours to release or drop
        except ConcurrentRefresh:
            # Another run committed this refresh before our first chunk: nothing of ours landed.
            self._release(req, run_id, touched=False, outcome="refreshed concurrently")
            self._applier.drop_staging_table(staging_table(req.target))
            raise
        except Exception as exc:
            self._release(req, run_id, touched=bool(done), outcome=f"error: {exc}")
            if not done:
                self._applier.drop_staging_table(staging_table(req.target))
                raise
            raise InterruptedChunks(str(exc)) from exc
        self._release(req, run_id, touched=False, outcome="success")
        self._applier.drop_staging_table(staging_table(req.target))
        result.chunks = chunks
        return landed

    def _release(self, req: RefreshRequest, run_id: str, touched: bool, outcome: str) -> None:
        try:
            self._store.release(req.model_id, run_id, touched, outcome, current_time())
        except Exception as exc:  # noqa: BLE001 - the original error matters more
            logger.warning(
                f"batch_refresh model '{req.model}': could not release the lease ({exc}); it "
                f"expires at its lease_timeout.")


def lost_lease(req: RefreshRequest, row: Optional[StateRow], chunk: int,
               chunks: int) -> BatchRefreshLeaseError:
    """The lease expired while this run merged and another run took it over."""
    holder = f"run {row.run_id} by {row.lease_holder}" if row is not None else "another run"
    return BatchRefreshLeaseError(
        f"batch_refresh model '{req.model}': this run lost the refresh lease to {holder} after "
        f"committing chunk {chunk} of {chunks}, and stopped. The committed chunks are in the "
        f"target's log; the run holding the lease applies the rest, each exactly once. Raise "
        f"the model's lease_timeout above the time a chunk takes.")


def lease_error(req: RefreshRequest, row: Optional[StateRow],
                waited_s: float = 0.0) -> BatchRefreshLeaseError:
    waited = (f" This run waited {format_duration(waited_s)} for it (lease_wait); raise the "
              f"model's lease_wait to wait longer." if waited_s > 0 else
              " Set the model's lease_wait (e.g. '30m') to have a run wait for the lease.")
    if row is None:
        return BatchRefreshLeaseError(
            f"batch_refresh model '{req.model}': another run took the refresh lease first."
        )
    return BatchRefreshLeaseError(
        f"batch_refresh model '{req.model}': another refresh holds the lease "
        f"(run {row.run_id} by {row.lease_holder}, phase {row.phase}, since {row.lease_since}, "
        f"until {row.lease_until}). Nothing was changed. Wait for it to finish; if that run is "
        f"dead, a run on its host resumes it at once, any run after {row.lease_until} does, or "
        f"clear the lease now with "
        f"`dbt run-operation batch_refresh_unlock --args '{{model: {req.model}, force: true}}'`."
        + waited
    )

