"""Reading Delta metadata through the dbt connection: latest commits, table ids, properties,
the target's log, and a query's output columns."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt_common.exceptions import DbtRuntimeError

from dbt.adapters.spark_batch_refresh.storage.commit_log import TargetLog, recorded_key
from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError, MissingUpstream
from dbt.adapters.spark_batch_refresh.plan.cost import commit_rows, window_rows
from dbt.adapters.spark_batch_refresh.plan.planner import UpstreamPoint, moved_ranges
from dbt.adapters.spark_batch_refresh.storage.calls import Fetch
from dbt.adapters.spark_batch_refresh.storage.values import as_datetime, as_map
from dbt.adapters.spark_batch_refresh.sql.rewrite import quote_relation
from dbt.adapters.spark_batch_refresh.sql.sqlgen import q
from dbt.adapters.spark_batch_refresh.sql.statements import first_word, written_tables

# How far back a run looks for its own last commit when the newest one is not a refresh's
# (table maintenance, or a write by someone else).
LOG_LOOKBACK = 50
# A replay tells a recreated upstream from its history when at most this many commits came
# since the consumed one; past that, one snapshot read (DESCRIBE DETAIL) costs less.
HISTORY_SPAN_MAX = 200
# An upstream's latest point is read with its newest commits, so that a replay over at most
# this many commits also finds the consumed one there (same_table) without a second read.
# Measured (bench/metadata_statements.py, session 14): LIMIT 1 0.105 s, LIMIT 20 0.126 s,
# LIMIT 1 then LIMIT 2 0.216 s.
HISTORY_WINDOW = 20
# The target's commits read right after a refresh's write: its own commit and the one before,
# which is what a model downstream that consumed the previous refresh looks for (same_table).
# In the embedded session 2 commits cost 0.011 s, 20 0.031 s (bench/metadata_statements.py);
# a write that is not among these (another writer committed right after it) is looked for
# further back.
AFTER_COMMIT_WINDOW = 2
Columns = List[tuple[str, str]]
Detail = Tuple[Optional[str], Dict[str, str]]  # a table's Delta id and properties
_SHIFT = timedelta(milliseconds=1)


def raw_time(rows: List[Dict[str, Any]], i: int) -> Optional[datetime]:
    """The commit time of history row `i` (rows newest first) as Delta stored it, or None when
    this window may show it shifted: Delta's getHistory makes times increase over the window
    it reads by moving a commit not later than the one before it to that one's time + 1 ms, and
    never moves the window's oldest row. Only a time read unmoved compares equal across
    reads."""
    stamp = as_datetime(rows[i]["timestamp"])
    if i + 1 >= len(rows):
        return stamp
    return None if stamp - as_datetime(rows[i + 1]["timestamp"]) == _SHIFT else stamp


# Statements that cannot change a table: after any other statement of dbt's (a hook, another
# materialization, a seed) the invocation's shared histories may be stale.
_READ_ONLY = ("select", "show", "describe", "desc", "explain", "set", "reset", "use",
              "cache", "uncache", "refresh", "list")


def _relation_key(relation: str) -> str:
    return relation.replace("`", "").lower()


class SharedHistories:
    """The newest commits of each relation, read once per dbt invocation and shared by every
    model that reads it (a DAG of 20 models over one source reads its history once), and
    handed from a refresh's read after its commit to the models downstream of it.

    A read older than the relation is still a consistent point to pin: a model that plans from
    it consumes that version and the next run takes the rest. But dbt's DAG promises a model
    its parents' writes, so a statement of dbt's that writes (a hook, a `table` model, a seed)
    forgets the tables it names (sql/statements.py), one that may write and names none that
    the parser can tell forgets everything, and the adapter forgets everything when the
    invocation ends."""

    def __init__(self) -> None:
        self._rows: Dict[str, List[Dict[str, Any]]] = {}
        # Each relation's DESCRIBE DETAIL (table id, properties), which a backfill reads for
        # every upstream: forgotten with the relation's history.
        self._details: Dict[str, Detail] = {}
        # Other catalog reads shared the same way (storage/views.py: views per database,
        # view definitions), forgotten with the histories.
        self._facts: Dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def get(self, relation: str) -> Optional[List[Dict[str, Any]]]:
        with self._lock:
            return self._rows.get(_relation_key(relation))

    def put(self, relation: str, rows: List[Dict[str, Any]]) -> None:
        """A newer history of `relation` (a refresh's read after its own write, which may
        have replaced the table: its detail is read again)."""
        with self._lock:
            self._rows[_relation_key(relation)] = rows
            self._details.pop(_relation_key(relation), None)

    def detail(self, relation: str) -> Optional[Detail]:
        with self._lock:
            return self._details.get(_relation_key(relation))

    def put_detail(self, relation: str, detail: Detail) -> None:
        with self._lock:
            self._details[_relation_key(relation)] = detail

    def fact(self, key: tuple) -> Any:
        with self._lock:
            return self._facts.get(key)

    def remember(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._facts[key] = value

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._details.clear()
            self._facts.clear()

    def saw(self, sql: str) -> None:
        """A statement issued outside the refreshes: forget what it may have written."""
        if first_word(sql) in _READ_ONLY:
            return
        written = written_tables(sql)
        if written is None:
            self.clear()
            return
        with self._lock:
            for known in (self._rows, self._details):
                for key in [k for k in known
                            if any(k == n or k.endswith("." + n) for n in written)]:
                    del known[key]
            # View definitions and view lists: a created or dropped view changes them.
            self._facts.clear()


class DeltaReader:
    def __init__(self, fetch: Fetch, shared: Optional[SharedHistories] = None) -> None:
        self._fetch = fetch
        # upstream -> its newest commits as latest_point read them (newest first)
        self._recent: Dict[str, List[Dict[str, Any]]] = {}
        self._shared = shared if shared is not None else SharedHistories()

    def latest_point(self, upstream: str) -> Optional[UpstreamPoint]:
        """Latest version and commit time, or None for a relation that is not a Delta table."""
        relation = quote_relation(upstream)
        try:
            rows = self.recent_commits(upstream)
        except DbtRuntimeError as exc:
            text = str(exc)
            if "DELTA_ONLY_OPERATION" in text or "not a Delta table" in text or "is a view" in text:
                return None
            if "TABLE_OR_VIEW_NOT_FOUND" in text or "cannot be found" in text:
                raise MissingUpstream(upstream) from exc
            raise
        self._recent[upstream] = rows
        if not rows:
            return None
        stamp = raw_time(rows, 0)
        if stamp is None:  # maybe shifted by Delta within this window: read it alone
            rows = self.history(relation, 1)  # (a commit since is the latest point then)
            stamp = as_datetime(rows[0]["timestamp"])
        return UpstreamPoint(int(rows[0]["version"]), stamp)

    def latest_points(self, model: str, upstreams: List[str]) -> Dict[str, Optional[UpstreamPoint]]:
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

    def details(self, upstreams: List[str]) -> Dict[str, Detail]:
        """Delta table id and properties of each upstream (DESCRIBE DETAIL), read once per
        invocation (TPC-H's 22 backfills read 72 for 8 tables, 0.09 s each)."""
        found = {}
        for upstream in upstreams:
            known = self._shared.detail(upstream)
            if known is None:
                rows = self._fetch(f"DESCRIBE DETAIL {quote_relation(upstream)}")
                row = rows[0] if rows else {}
                known = (row.get("id"), as_map(row.get("properties")))
                self._shared.put_detail(upstream, known)
            found[upstream] = known
        return found

    def same_table(self, upstream: str, seen: UpstreamPoint, latest: int) -> Optional[bool]:
        """Whether `upstream` is still the table whose version `seen` was consumed, from its
        history: that version's commit must carry the commit time recorded when it was
        consumed (a table dropped and created again has a commit of that number from another
        time). None when the history cannot tell: the commit left the log, or too many came
        since. Unlike DESCRIBE DETAIL (the table id) this builds no snapshot state: DETAIL
        reports file count and size, so Delta rebuilds the whole state for it (1.4 s per
        upstream in `make demo`'s replays), which a replay from the change feed needs nowhere
        else."""
        span = latest - seen.version + 1
        if seen.timestamp is None or not 1 <= span <= HISTORY_SPAN_MAX:
            return None
        recent = self._recent.get(upstream, [])
        if recent and int(recent[0]["version"]) == latest and span <= len(recent):
            stamp = raw_time(recent, span - 1)
            if stamp is not None and int(recent[span - 1]["version"]) == seen.version:
                return stamp == seen.timestamp
        for row in self.history(quote_relation(upstream), span):
            if int(row["version"]) == seen.version:
                return as_datetime(row["timestamp"]) == seen.timestamp
        return None

    def change_rows(self, upstream: str, start: int, end: int) -> Optional[int]:
        """Rows versions start..end add to `upstream`'s change feed, from the commit metrics of
        the newest commits latest_point already read (no statement); commits older than those
        count at the read ones' average. None when no read commit's metrics say."""
        recent = self._recent.get(upstream, [])
        found = [commit_rows(str(r.get("operation") or ""), as_map(r.get("operationMetrics")),
                             as_map(r.get("operationParameters")))
                 for r in recent if start <= int(r["version"]) <= end]
        return window_rows(found, end - start + 1)

    def proven_keys(self, upstreams: Sequence[str], consumed: Mapping[str, int],
                    latest: Mapping[str, Optional[UpstreamPoint]]) -> Dict[str, Tuple[str, ...]]:
        """The key each upstream `batch_refresh` model's query proves at the version it is
        pinned to and at the one consumed (`consumed`; none for a model that consumed nothing
        of it), as their refresh commits in the history latest_point read record them
        (commit_log.recorded_key); an upstream whose two versions do not both say the same
        key is left out. No statement."""
        found: Dict[str, Tuple[str, ...]] = {}
        for upstream in upstreams:
            point = latest.get(upstream)
            recent = self._recent.get(upstream, [])
            key = recorded_key(recent, point.version) if point is not None else ()
            seen = consumed.get(upstream)
            if key and (seen is None or recorded_key(recent, seen) == key):
                found[upstream] = key
        return found

    def inserts_only(self, upstream: str, start: int, end: int) -> bool:
        """Whether `upstream`'s change feed over versions start..end holds inserts alone, as the
        history latest_point read says of each commit (inserts_only); False for a commit it
        did not read."""
        recent = {int(r["version"]): r for r in self._recent.get(upstream, [])}
        return start <= end and all(v in recent and inserts_only(recent[v])
                                    for v in range(start, end + 1))

    def feed_counts(self, upstream: str, start: int, end: int) -> Tuple[int, int]:
        return feed_counts(self._fetch, upstream, start, end)

    def moved_rows(self, consumed: Mapping[str, int],
                   latest: Mapping[str, Optional[UpstreamPoint]]) -> Optional[int]:
        """Change rows of every upstream that moved past its consumed version (cost.py)."""
        total = 0
        for upstream, (start, end) in moved_ranges(consumed, latest).items():
            rows = self.change_rows(upstream, start, end)
            if rows is None:
                return None
            total += rows
        return total

    def commit_times(self, upstream: str, since: int,
                     limit: int) -> Optional[tuple[int, Dict[int, datetime]]]:
        """An upstream's newest version and the times of its commits after `since` (at most
        `limit` of them), for lag; None when it cannot be read (dropped)."""
        try:
            head = self.history(upstream, 1)
        except DbtRuntimeError:
            return None
        version = int(head[0]["version"]) if head else -1
        commits = {version: as_datetime(head[0]["timestamp"])} if head else {}
        if version > since + 1:
            commits = {int(r["version"]): as_datetime(r["timestamp"])
                       for r in self.history(upstream, min(version - since, limit))}
        return version, commits

    def properties(self, upstream: str) -> Dict[str, str]:
        """Table properties, from the snapshot's metadata only (no state rebuilt)."""
        rows = self._fetch(f"SHOW TBLPROPERTIES {quote_relation(upstream)}")
        return {str(r["key"]): str(r["value"]) for r in rows}

    def history(self, relation: str, limit: int) -> List[Dict[str, Any]]:
        return self._fetch(f"DESCRIBE HISTORY {relation} LIMIT {int(limit)}")

    def recent_commits(self, relation: str) -> List[Dict[str, Any]]:
        """The relation's newest HISTORY_WINDOW commits, as this invocation last read them."""
        rows = self._shared.get(relation)
        if rows is None:
            rows = self.history(quote_relation(relation), HISTORY_WINDOW)
            self._shared.put(relation, rows)
        return rows

    def read_after_commit(self, target: str,
                          window: int = AFTER_COMMIT_WINDOW) -> List[Dict[str, Any]]:
        """The target's newest commits right after this refresh's write, kept for the models
        downstream of it in this invocation (their read of it would return the same)."""
        rows = self.history(target, window)
        self._shared.put(target, rows)
        return rows

    def target_log(self, target: str, model_id: str) -> TargetLog:
        """The model's newest refresh commit: one history row when it is the newest commit
        (the usual case), a longer read only after maintenance or an outside write."""
        head = self.history(target, 1)
        log = TargetLog.from_history(head, model_id)
        if log.last is not None or not head:
            return log
        return TargetLog.from_history(self.history(target, LOG_LOOKBACK), model_id)

    def describe(self, sql: str) -> Columns:
        """Output columns and types of a query, without running it."""
        rows = self._fetch(f"DESCRIBE QUERY {sql}")
        return [(r["col_name"], r["data_type"]) for r in rows]


# A MERGE whose change feed holds inserts alone reports each of these as 0 (Delta 4.4; an
# update under deletion vectors removes no file but adds a vector).
_NOT_INSERTS = ("numTargetRowsUpdated", "numTargetRowsDeleted", "numTargetRowsCopied",
                "numTargetFilesRemoved", "numTargetDeletionVectorsAdded")


def inserts_only(entry: Mapping[str, Any]) -> bool:
    """Whether one history entry's commit adds only inserts to the change feed: a blind append
    (files added, none removed), or a MERGE that inserted and did nothing else (an insert-only
    `WHEN NOT MATCHED THEN INSERT`, which Delta does not call blind: it reads the table)."""
    if entry.get("isBlindAppend") is True:
        return True
    if str(entry.get("operation") or "").upper() != "MERGE":
        return False
    metrics = as_map(entry.get("operationMetrics"))
    try:
        return all(int(metrics[name]) == 0 for name in _NOT_INSERTS)
    except (KeyError, TypeError, ValueError):
        return False


def feed_counts(fetch: Fetch, relation: str, start: int, end: int) -> Tuple[int, int]:
    """(change rows, rows that are not inserts) of `relation`'s change feed over versions
    start..end: one Spark job over the commits' change files."""
    counts = fetch(
        f"SELECT count(*) AS changes, coalesce(sum(CASE WHEN _change_type <> 'insert' THEN 1 "
        f"ELSE 0 END), 0) AS non_inserts FROM table_changes('{relation}', {int(start)}, "
        f"{int(end)})")[0]
    return int(counts["changes"]), int(counts["non_inserts"])


def feed_key_max(fetch: Fetch, relation: str, version: int, column: str) -> Optional[str]:
    """The largest `column` value the commit `version` of `relation` inserted, as Spark casts
    it to text, read from the commit's change feed: over a SQL connection (Thrift, Spark
    Connect), where the embedded session reads its files' statistics instead
    (storage/jvm_commit_stats.py). A Spark job over the files the commit added, one key column
    of them. None when the feed cannot be read (the ceiling stays unknown: the next replay
    reads the target)."""
    try:
        rows = fetch(f"SELECT CAST(max({q(column)}) AS STRING) AS top "
                     f"FROM table_changes('{relation}', {int(version)}, {int(version)}) "
                     "WHERE _change_type = 'insert'")
    except DbtRuntimeError:
        return None
    top = rows[0].get("top") if rows else None
    return None if top is None else str(top)
