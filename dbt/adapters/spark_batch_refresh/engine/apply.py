"""Writing staged rows to the target: one tagged, exactly-once Delta commit per chunk.

Each write carries the refresh's RefreshCommit as `userMetadata` and Delta's idempotent-write
confs (txnAppId = the model, txnVersion = refresh and chunk), then the target's log is read back
to learn whether this run's commit is the one that landed. When another run committed the same
refresh first, Delta skipped or refused this write, and ConcurrentRefresh says who won.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.sql import sqlgen
from dbt.adapters.spark_batch_refresh.storage.commit_log import RefreshCommit, TargetLog, txn_app_id
from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.storage.frame_write import plain_keys
from dbt.adapters.spark_batch_refresh.storage.delta import (
    AFTER_COMMIT_WINDOW,
    LOG_LOOKBACK,
    DeltaReader,
)
from dbt.adapters.spark_batch_refresh.errors import BadKeyError, BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.plan.strategy import Strategy, Write, choose_write
from dbt.adapters.spark_batch_refresh.engine.run_result import Fetch, RefreshRequest, RefreshResult, Run
from dbt.adapters.spark_batch_refresh.storage.session_confs import (
    PARTITION_OVERWRITE, REPLACE_WHERE_CHECK, USER_METADATA, SessionConfs, idempotent_write)
from dbt.adapters.spark_batch_refresh.engine.stage import Staged
from dbt.adapters.spark_batch_refresh.storage.state import is_conflict
from dbt.adapters.spark_batch_refresh.storage.values import as_map
from dbt.adapters.spark_batch_refresh.sql.rewrite import groupable_type, over_changes

# A changes-only staging of at most this many keys is applied by REPLACE WHERE, its keys as
# literals (Delta takes no subquery there), rather than by MERGE: at 10M rows and 10,000
# changed keys spread over the table, 7.4 s against the MERGE's 15.7 s (bench/apply_paths.py).
REPLACE_WHERE_MAX_KEYS = 50_000
# A staging recomputed for its keys (Staged.whole_keys) first reads the target to list only
# the keys whose row differs (0.5-1.3 s), and a literal list costs the REPLACE WHERE more as
# it grows: at 100 keys it beat the MERGE by 0.4-0.5 s a refresh, at 1,000 it was even, at
# ~10,000 (a 100k-row aggregate target) 3 s slower (bench/results/archive/whole-keys/).
WHOLE_KEYS_REPLACE_MAX = 500


class ConcurrentRefresh(Exception):
    """Another run committed this refresh (same model, same refresh number) first."""

    def __init__(self, winner: Optional[RefreshCommit]) -> None:
        super().__init__(winner.plan_id if winner else "unknown")
        self.winner = winner


class Applier:
    def __init__(self, fetch: Fetch, run: Run, reader: DeltaReader,
                 replace_using: bool = False) -> None:
        self._fetch, self._run, self._reader = fetch, run, reader
        # Whether the session writes `INSERT INTO ... REPLACE USING` (storage/frame_write.py).
        self._replace_using = replace_using

    def commit(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
               commit: RefreshCommit, result: RefreshResult) -> RefreshCommit:
        """Write one chunk as one commit; the commit as the target's log recorded it."""
        confs = {USER_METADATA: commit.to_metadata(),
                 **idempotent_write(txn_app_id(req.model_id), commit.txn_version)}
        write = self.write_of(req, config, staged, commit)
        if write is Write.INSERT_OVERWRITE:
            # Every partition replaced, whatever partitionOverwriteMode the session has:
            # `dynamic` would keep the partitions the new rows no longer have.
            confs[PARTITION_OVERWRITE] = "static"
        if write is Write.REPLACE_WHERE:
            confs[REPLACE_WHERE_CHECK] = "false"
        counts: Dict[str, int] = {}
        conflict: Optional[DbtRuntimeError] = None
        try:
            with SessionConfs(self._run, confs):
                counts = self._write(req, config, staged, commit, write)
        except DbtRuntimeError as exc:
            if isinstance(exc, BatchRefreshUserError) or not is_conflict(exc):
                raise
            conflict = exc  # lost a race at commit time: to another run of this refresh?
        landed = self._landed(req, commit, conflict)
        result.rewritten = result.rewritten or write is Write.INSERT_OVERWRITE
        for name, value in counts.items():
            setattr(result, name, getattr(result, name) + value)
        if not counts and landed.metrics:
            count_committed(landed.metrics, result)
        return landed

    def _landed(self, req: RefreshRequest, commit: RefreshCommit,
                conflict: Optional[DbtRuntimeError]) -> RefreshCommit:
        entries: List[Dict[str, Any]] = []
        # Its own commit is the newest but for another writer's right after it.
        for window in (AFTER_COMMIT_WINDOW, LOG_LOOKBACK):
            entries = self._reader.read_after_commit(req.target, window)
            for entry in entries:
                found = RefreshCommit.from_history(entry, req.model_id)
                if found is not None and found.plan_id == commit.plan_id \
                        and found.chunk == commit.chunk:
                    return found
        winner = TargetLog.from_history(entries, req.model_id).last
        if winner is not None and winner.txn_version >= commit.txn_version:
            raise ConcurrentRefresh(winner)
        if conflict is not None:
            raise conflict  # a conflict with some other writer of the target
        raise DbtRuntimeError(
            f"batch_refresh model '{req.model}': the write of refresh {commit.refresh} "
            f"(plan {commit.plan_id}, chunk {commit.chunk}) is not in the target's log")

    def write_of(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
                 commit: RefreshCommit) -> Write:
        """How this commit writes (strategy.choose_write); a backfill asks the target whether
        it can be merged in place."""
        strategy = commit.strategy
        return choose_write(
            strategy, keyed=bool(config.unique_key), chunks=commit.chunks, rows=staged.rows,
            replaceable=replaceable(staged, commit.chunks),
            in_place=strategy is Strategy.BACKFILL and self._rebuild_in_place(req, config, staged),
            partial=staged.partial, unseen=unseen(staged), inline=staged.inline,
            upsert=self._upsert(req, config, staged, commit.chunks))

    def _upsert(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
                chunks: int) -> bool:
        """Whether the session writes this staging by REPLACE USING (upsertable), its rows'
        types checked once per staging (guard() and the write ask alike)."""
        if not (self._replace_using and upsertable(staged, chunks, config.unique_key)):
            return False
        if config.nullable_key:
            return False  # whether `replaceUsing` matches a NULL key is not Delta's contract
        if staged.frame_fits is None:
            staged.frame_fits = self._frame_fits(req, staged)
        return staged.frame_fits

    def _write(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
               commit: RefreshCommit, write: Write) -> Dict[str, int]:
        columns = sqlgen.model_columns(name for name, _ in staged.columns)
        cols = ", ".join(sqlgen.q(c) for c in columns)
        if write is Write.CREATE:
            if req.target_kind == "other":
                self._run(f"DROP TABLE IF EXISTS {req.target}")
                self._run(f"DROP VIEW IF EXISTS {req.target}")
            props = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true",
                     **config.tblproperties}
            self._run(f"CREATE OR REPLACE TABLE {req.target} USING delta {req.target_options} "
                      f"{sqlgen.tblproperties(props)} AS SELECT {cols} FROM {staged.source}")
            # A direct write's rows were not counted before (nothing staged): from its metrics.
            return {} if staged.direct else {"rows_inserted": staged.rows}
        if write is Write.INSERT_OVERWRITE:
            self._run(f"INSERT OVERWRITE {req.target} SELECT {cols} FROM {staged.source}")
            return {} if staged.direct else {"rows_inserted": staged.rows}
        if write is Write.APPEND:
            return self._append(req, commit, cols)
        if write is Write.MARKER:
            return self._marker(req.target, cols)
        if write in (Write.INSERT_CHECKED, Write.INSERT_NEW):
            # Keys above the target's ceiling: no row to match or guard (plan/key_top.py).
            self._run(f"INSERT INTO {req.target} ({cols}) SELECT {cols} FROM {staged.source}")
            # An inline-checked INSERT staged nothing to count: its rows come from the commit's
            # metrics, not the statement's result (Spark 3.5's Thrift server returns an INSERT
            # no result set, and reading one failed in PyHive).
            return {} if staged.inline else {"rows_inserted": staged.rows}
        if write is Write.REPLACE_WHERE:
            return self._replace(req, config, staged, columns)
        if write is Write.REPLACE_USING:
            return self._replace_by_key(req, config, staged, columns)
        return self._merge(req, config, staged, commit, columns,
                           delete_missing=write is Write.MERGE_ALL)

    def _replace(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
                 columns: List[str]) -> Dict[str, int]:
        """The staged keys' target rows replaced by the staged rows, in one commit.

        Unlike the MERGE, a key's row is deleted and inserted again, so the target's change
        feed shows `delete` + `insert` where the MERGE wrote an update's pre- and post-image
        (a downstream batch_refresh model nets both alike); only keys whose row really changed
        are listed (a changes-only staging is netted; a whole-keys one is compared with the
        target first, _changed_keys), so no unchanged row is rewritten. A new row on the key of an
        unchanged target row would silently replace it: the statement itself fails on it, as
        the MERGE does (sqlgen.replace_where's `new_range`), unless every new key lies above
        the target's key ceiling (plan/key_top.py)."""
        alias = sqlgen.key_aliases(config.unique_key)[0]
        assert staged.key_range is not None and staged.key_type  # replaceable() holds
        # A whole-keys staging's are always read by guard(); a changes-only one's by staging
        # when it was checked in the driver (driver_keys.py), else here.
        keys = staged.replace_keys
        if keys is None:
            # (a NULL key's tombstone matches no target row, as in the MERGE)
            keys = [r["k"] for r in self._fetch(
                f"SELECT {alias} AS k FROM {staged.source} WHERE {alias} IS NOT NULL")]
        if not keys:  # every recomputed row came out as the target has it
            return self._marker(req.target, ", ".join(sqlgen.q(c) for c in columns))
        literals = [sqlgen.typed_lit(str(k), staged.key_type) for k in keys]
        # New keys above the target's key ceiling cannot collide: no read of the target.
        guarded = staged.new_rows > 0 and not staged.whole_keys and not staged.new_keys_unseen
        with _refusing_collisions(req, config, "the target was not touched"):
            self._run(sqlgen.replace_where(
                req.target, staged.source, config.unique_key[0], literals, columns,
                staged.key_range, listed_only=staged.whole_keys,
                new_range=(staged.new_range or staged.key_range) if guarded else None))
        if staged.replace_counts is not None:
            return dict(staged.replace_counts)
        return {"rows_inserted": staged.new_rows,
                "rows_updated": staged.rows - staged.tombstones - staged.new_rows,
                "rows_deleted": staged.tombstones}

    def _replace_by_key(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
                        columns: List[str]) -> Dict[str, int]:
        """An upsert staging (apply.upsertable) by REPLACE USING: the staged keys' target rows
        replaced by the staged rows in one commit, as the REPLACE WHERE does, but with no key
        list (no read of the keys, no 50,000-key limit, a compound key too). The new-key check
        is in the write, as there, unless every new key lies above the target's ceiling; a
        whole-keys staging's rows equal to the target's are left out in the write instead, and
        its counts come from the commit's metrics (count_committed)."""
        if staged.whole_keys:
            self._run(sqlgen.replace_using_changed(
                req.target, staged.source, config.unique_key, columns, staged.key_range,
                unordered=_unordered(staged)))
            return {}
        guarded = staged.new_rows > 0 and not staged.new_keys_unseen
        with _refusing_collisions(req, config, "the target was not touched"):
            self._run(sqlgen.replace_using(
                req.target, staged.source, config.unique_key, columns,
                new_range=staged.new_range, guarded=guarded))
        return {"rows_inserted": staged.new_rows, "rows_updated": staged.rows - staged.new_rows,
                "rows_deleted": 0}

    def _same_columns(self, req: RefreshRequest, staged: Staged) -> bool:
        """The target has the model's columns (as staged) with their types, in order."""
        columns = sqlgen.model_columns(name for name, _ in staged.columns)
        types = {n.lower(): t.lower() for n, t in staged.columns}
        want = [(c.lower(), types.get(c.lower(), "")) for c in columns]
        return want == self._columns_of(f"SELECT * FROM {req.target}")

    def _frame_fits(self, req: RefreshRequest, staged: Staged) -> bool:
        """The rows a REPLACE USING writes have the target's columns and types, in order, as
        the staging holds them: a DataFrame write casts nothing (an INT column into a BIGINT
        one fails the write), where INSERT would. Two analyser reads in the embedded session."""
        cols = ", ".join(sqlgen.q(c) for c in sqlgen.model_columns(n for n, _ in staged.columns))
        return (self._columns_of(f"SELECT {cols} FROM {staged.source}")
                == self._columns_of(f"SELECT * FROM {req.target}"))

    def _columns_of(self, query: str) -> List[Tuple[str, str]]:
        return [(n.lower(), t.lower()) for n, t in self._reader.describe(query)]

    def _rebuild_in_place(self, req: RefreshRequest, config: BatchRefreshConfig,
                          staged: Staged) -> bool:
        """A rebuild (model edit, change-feed gap) of a keyed target whose columns stay as
        they are is a full-recompute MERGE, not a replaced table: the target's change feed then
        carries only the rows that really changed, so downstream models replay those rather
        than a delete and re-insert of every row. `--full-refresh` always recreates the table,
        as dbt's own materializations do (new partitioning or properties take effect)."""
        if req.target_kind != "delta" or not config.unique_key or req.full_refresh:
            return False
        return self._same_columns(req, staged)

    def _merge(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
               commit: RefreshCommit, columns: List[str],
               delete_missing: bool = False) -> Dict[str, int]:
        source = staged.source if commit.chunks == 1 else (
            f"(SELECT * FROM {staged.source} WHERE "
            f"{sqlgen.chunk_predicate(config.unique_key, commit.chunks, commit.chunk)})")
        merge = sqlgen.merge_staging(
            req.target, source, config.unique_key, columns,
            delete_missing=delete_missing,
            chunk=(commit.chunk, commit.chunks) if commit.chunks > 1 else None,
            guard_new_keys=staged.from_changes,
            unordered=_unordered(staged),
            key_range=staged.key_range, null_safe=config.nullable_key,
            keep_null_tombstone=self._null_tombstone_meets(req, config, staged))
        with _refusing_collisions(req, config, "this merge was not applied"):
            merged = self._fetch(merge)
        return merge_counts(merged)

    def _null_tombstone_meets(self, req: RefreshRequest, config: BatchRefreshConfig,
                              staged: Staged) -> bool:
        """Whether a null-safe MERGE's tombstone of the all-NULL key would meet a target row:
        one that would not (the key's rows came and went between two runs) cannot be in
        the MERGE (sqlgen._null_safe_source). Read only when the staging has tombstones."""
        if not config.nullable_key or not staged.tombstones:
            return True
        return bool(self._fetch(sqlgen.held_null_key(req.target, config.unique_key)))

    def guard(self, req: RefreshRequest, config: BatchRefreshConfig, staged: Staged,
              strategy: Strategy) -> None:
        """What a single-chunk write reads from the target before its commit step (a whole-keys
        staging's changed keys): a run that then loses the race to another run's commit of
        the same refresh is told so by Delta (the same txnVersion: skipped, or a conflict), not
        by a read that already sees the winner's rows. The new-key check of a changes-only
        staging is in its write (sqlgen.replace_where, merge_staging)."""
        write = choose_write(strategy, keyed=bool(config.unique_key), chunks=1, rows=staged.rows,
                             replaceable=replaceable(staged, 1), in_place=False,
                             partial=staged.partial, unseen=unseen(staged),
                             inline=staged.inline,
                             upsert=self._upsert(req, config, staged, 1))
        if write is Write.REPLACE_WHERE and staged.whole_keys:
            self._changed_keys(req, config, staged)

    def _changed_keys(self, req: RefreshRequest, config: BatchRefreshConfig,
                      staged: Staged) -> None:
        """A whole-keys staging against the target: the keys to replace (those whose row is
        new, gone or different) and the exact row counts of replacing them."""
        assert staged.key_range is not None
        rows = self._fetch(sqlgen.keys_against_target(
            req.target, staged.source, config.unique_key,
            sqlgen.model_columns(n for n, _ in staged.columns), staged.key_range,
            unordered=_unordered(staged)))
        changed = [r for r in rows if not r["same"] and (r["present"] or r["existed"])]
        staged.replace_keys = [r["k"] for r in changed]
        staged.replace_counts = {
            "rows_inserted": sum(1 for r in changed if r["present"] and not r["existed"]),
            "rows_updated": sum(1 for r in changed if r["present"] and r["existed"]),
            "rows_deleted": sum(1 for r in changed if not r["present"])}

    def check_new_keys(self, req: RefreshRequest, config: BatchRefreshConfig,
                       staged: Staged) -> None:
        """Before the first of several chunks: the MERGE guard's check over the whole staging,
        so a bad key fails the refresh with the target untouched (not after chunk 1 landed)."""
        if not config.unique_key or not staged.from_changes:
            return
        found = self._fetch(sqlgen.new_key_collisions(
            req.target, staged.source, config.unique_key, staged.new_range or staged.key_range,
            null_safe=config.nullable_key))
        if found and int(found[0]["collisions"]):
            raise _collision(req, config, "the target was not touched")

    def _append(self, req: RefreshRequest, commit: RefreshCommit, cols: str) -> Dict[str, int]:
        (upstream, point), = commit.pinned.items()
        start = commit.consumed[upstream].version + 1
        body = over_changes(req.sql, upstream, start, point.version, change_types=("insert",))
        self._run(f"INSERT INTO {req.target} ({cols}) SELECT {cols} FROM ({body}) _br_a")
        return {}  # counted from the commit's metrics, as the checked INSERT

    def _marker(self, target: str, cols: str) -> Dict[str, int]:
        """Nothing to write, but the refresh must still be recorded: an empty blind INSERT
        commits (a MERGE of nothing costs a snapshot scan; a DELETE of nothing commits nothing)."""
        self._run(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {target} WHERE false")
        return {"rows_inserted": 0}

    def drop_staging_table(self, table: str) -> None:
        self._run(f"DROP TABLE IF EXISTS {table}")


def _unordered(staged: Staged) -> List[str]:
    """Staged columns that have no `<=>` (maps, variants): compared as JSON text."""
    return [n for n, t in staged.columns if not groupable_type(t)]


def replaceable(staged: Staged, chunks: int) -> bool:
    """A replay applied by REPLACE WHERE instead of MERGE: one chunk, a single key column with
    literal bounds (integer, string or date: `key_type`; Delta translates no `(a, b) IN (...)`
    of a compound key into the filter its REPLACE WHERE needs), few enough keys to list, and

    * a whole-keys staging (recomputed keys, Staged.whole_keys) of at most
      WHOLE_KEYS_REPLACE_MAX keys: its keys whose row differs from the target's are replaced;
    * or a changes-only staging (only keys whose row changed) with some key with an old row
      (an update or a delete). New keys alone stay a MERGE: Delta runs an insert-only MERGE as
      an anti-join pruned to the key range, cheaper than listing keys and checking them (10M
      rows, 10,000 appended: 4.1 s replay by MERGE, 6.4 s by REPLACE WHERE,
      bench/results/replacewhere.md)."""
    if (chunks != 1 or staged.key_range is None or staged.key_type is None
            or not 0 < staged.rows <= REPLACE_WHERE_MAX_KEYS):
        return False
    if staged.whole_keys:
        return staged.rows <= WHOLE_KEYS_REPLACE_MAX
    return staged.from_changes and staged.new_rows < staged.rows


def upsertable(staged: Staged, chunks: int, unique_key: List[str]) -> bool:
    """A staging that REPLACE USING applies exactly: one chunk, no tombstone (the statement
    deletes only keys it inserts a row for), key columns whose names the `replaceUsing` option
    carries plainly, and either

    * a changes-only staging with some updated row (new keys alone keep the insert-only MERGE
      or the blind INSERT, cheaper: nothing of the target to delete);
    * or a whole-keys staging (every key recomputed has a row; sqlgen.replace_using_changed
      leaves out the rows equal to the target's)."""
    if chunks != 1 or staged.inline or staged.tombstones != 0 or staged.rows <= 0 \
            or not plain_keys(unique_key):
        return False
    if staged.whole_keys:
        return True
    return staged.from_changes and staged.new_rows < staged.rows


def unseen(staged: Staged) -> bool:
    """A changes-only staging of new keys alone (no update, no tombstone), every one above
    the target's key ceiling: none can match a target row, so a blind INSERT applies it
    exactly, without the MERGE's read of the target (plan/key_top.py)."""
    return (staged.from_changes and not staged.partial and 0 < staged.rows == staged.new_rows
            and staged.tombstones == 0 and staged.new_keys_unseen)


@contextmanager
def _refusing_collisions(req: RefreshRequest, config: BatchRefreshConfig,
                         outcome: str) -> Iterator[None]:
    """A write whose new-key guard fired (DUPLICATE_KEY_MARKER, raised by the statement
    before it commits) becomes the user's bad-key error."""
    try:
        yield
    except DbtRuntimeError as exc:
        if sqlgen.DUPLICATE_KEY_MARKER not in str(exc):
            raise
        raise _collision(req, config, outcome) from None


def _collision(req: RefreshRequest, config: BatchRefreshConfig,
               outcome: str) -> BadKeyError:
    return BadKeyError(
        req.model, f"bad unique_key; {outcome}",
        [f"unique_key ({', '.join(config.unique_key)}) is not unique in the model "
         "output: a changed upstream row produces the key of a row that did not change.",
         "Fix: choose a unique_key that identifies one output row, or de-duplicate the model."])


def merge_counts(rows: List[Dict[str, Any]]) -> Dict[str, int]:
    if not rows:
        return {}
    r = rows[0]
    return {"rows_inserted": int(r.get("num_inserted_rows") or 0),
            "rows_updated": int(r.get("num_updated_rows") or 0),
            "rows_deleted": int(r.get("num_deleted_rows") or 0)}


def count_committed(metrics: Any, result: RefreshResult, parameters: Any = None) -> None:
    """Rows of a commit from the target's history (a chunk an interrupted run committed, or an
    append whose statement returned no counts, a write straight from the model); `parameters`
    (its operationParameters, when read) tell a whole-table rewrite."""
    metrics = as_map(metrics)
    if str(as_map(parameters).get("mode", "")).lower() == "overwrite":
        result.rewritten = True

    def number(name: str) -> int:
        try:
            return int(metrics.get(name) or 0)
        except (TypeError, ValueError):
            return 0
    if "numCopiedRows" in metrics and "numTargetRowsInserted" not in metrics:
        # A WRITE that deletes by key (REPLACE USING, REPLACE WHERE) counts the rows it kept
        # of the files it touched as output and as copied; what it deleted of a key it wrote
        # a row for is an update (exact for REPLACE USING, which deletes no other key).
        written = number("numOutputRows") - number("numCopiedRows")
        deleted = number("numDeletedRows")
        updated = min(written, deleted)
        result.rows_inserted += written - updated
        result.rows_updated += updated
        result.rows_deleted += deleted - updated
        return
    result.rows_inserted += number("numTargetRowsInserted") or number("numOutputRows")
    result.rows_updated += number("numTargetRowsUpdated")
    result.rows_deleted += number("numTargetRowsDeleted")
