"""`DESCRIBE HISTORY <table> LIMIT <n>` answered by the embedded session's JVM.

Every refresh reads Delta histories: the target's before planning and after its commit, each
upstream's once per invocation (storage/delta.py). Through SQL each read is a Spark job whose
rows come back through the DataFrame collect; in the embedded session (`method: session`, the
only connection with a JVM in this process) the commit files DESCRIBE HISTORY reads are read
on the driver through Delta's own classes (no Spark job), each commit serialized to JSON by
Delta's own mapper (one round trip per commit, not one per field). Measured with
`bench/metadata_statements.py`: bench/README.md, "Metadata reads of a replay".

Anything this path cannot answer exactly as SQL would (a name it does not resolve, a view, a
table that is not Delta, an error of any kind) returns None, and the caller runs the SQL, so
errors keep the text the callers match (storage/delta.py latest_point).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Dict, List, Optional

from dbt.adapters.spark_batch_refresh.client.session_cursor import session_zone

_STATEMENT = re.compile(r"\s*DESCRIBE\s+HISTORY\s+(?P<relation>\S+)\s+LIMIT\s+(?P<limit>\d+)\s*",
                        re.IGNORECASE)
_PART = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_]+)")

# DESCRIBE HISTORY's columns: Delta's JSON leaves out the ones that are null.
COLUMNS = ("version", "timestamp", "userId", "userName", "operation", "operationParameters",
           "job", "notebook", "clusterId", "readVersion", "isolationLevel", "isBlindAppend",
           "operationMetrics", "userMetadata", "engineInfo")
_SESSION_CATALOG = "spark_catalog"


@dataclass(frozen=True)
class HistoryRead:
    database: Optional[str]
    table: str
    limit: int


def history_read(sql: str) -> Optional[HistoryRead]:
    """The table and limit of a `DESCRIBE HISTORY <relation> LIMIT <n>` statement (a plain or
    backquoted one- to three-part name in the session catalog); None for any other statement."""
    found = _STATEMENT.fullmatch(sql)
    named = session_table(found.group("relation")) if found is not None else None
    if found is None or named is None:
        return None
    return HistoryRead(named[0], named[1], int(found.group("limit")))


def session_table(relation: str) -> Optional[tuple[Optional[str], str]]:
    """(database or None, table) of a plain or backquoted one- to three-part name in the
    session catalog; None for any other name."""
    parts = name_parts(relation)
    if parts is None or not 1 <= len(parts) <= 3:
        return None
    if len(parts) == 3:
        if parts[0].lower() != _SESSION_CATALOG:
            return None
        parts = parts[1:]
    return (parts[0] if len(parts) == 2 else None), parts[-1]


def name_parts(relation: str) -> Optional[List[str]]:
    # Not sqlglot: its Table parse takes a quoted string ('/tmp/t') or a four-part name for a
    # table name, which Spark's DESCRIBE HISTORY does not; such a read must go to the SQL.
    parts: List[str] = []
    at = 0
    while True:
        part = _PART.match(relation, at)
        if part is None:
            return None
        parts.append(part.group(1).replace("``", "`") if part.group(1) is not None
                     else part.group(2))
        at = part.end()
        if at == len(relation):
            return parts
        if relation[at] != ".":
            return None
        at += 1


@dataclass(frozen=True)
class _Handles:
    """The Java static methods and constants a read calls, looked up once per JVM: every step
    of a `jvm.a.b.C.m` lookup is a round trip to the JVM (about 75 us), about 35 a read."""

    identifier: Any  # TableIdentifier.apply
    option: Any  # Option.apply
    none: Any
    for_table: Any  # DeltaLog.forTable
    files: Any  # DeltaCommitFileProvider.apply
    commit_info: Any  # DeltaHistoryManager.getCommitInfoOpt
    empty_info: Any  # CommitInfo.empty
    some: Any  # scala.Some's constructor
    history: Any  # DeltaHistory.fromCommitInfo
    mapper: Any


@lru_cache(maxsize=4)
def handles(jvm: Any) -> _Handles:
    delta = jvm.org.apache.spark.sql.delta
    option = jvm.scala.Option
    return _Handles(
        identifier=jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply,
        option=option.apply, none=option.empty(), for_table=delta.DeltaLog.forTable,
        files=delta.util.DeltaCommitFileProvider.apply,
        commit_info=delta.DeltaHistoryManager.getCommitInfoOpt,
        empty_info=delta.actions.CommitInfo.empty, some=jvm.scala.Some,
        history=delta.DeltaHistory.fromCommitInfo, mapper=delta.util.JsonUtils.mapper())


def read_history(session: Any, read: HistoryRead) -> Optional[List[Dict[str, Any]]]:
    """The newest `read.limit` commits as DESCRIBE HISTORY's rows (timestamps as the session's
    wall clock, as the SQL path returns them), or None where only SQL can answer."""
    try:
        java = handles(session._jvm)
        log = delta_log(session, java, read.database, read.table)
        if log is None:
            return None
        texts = _newest_commits(java, log, read.limit)
        zone = session_zone(session.conf.get("spark.sql.session.timeZone", None))
    except Exception:  # noqa: BLE001 - anything unexpected: let SQL answer (and fail) as always
        return None
    return [_row(row, zone) for row in _monotonic([json.loads(text) for text in texts])][::-1]


def delta_log(session: Any, java: _Handles, database: Optional[str], table: str) -> Any:
    """The DeltaLog of a session-catalog table, or None for a temporary view (SQL resolves one
    first), a view or a table that is not Delta; a missing table raises (SQL says so)."""
    ident = java.identifier(table, java.option(database))
    catalog = session._jsparkSession.sessionState().catalog()
    if catalog.isTempView(ident):
        return None
    metadata = catalog.getTableMetadata(ident)
    if metadata.tableType().name() == "VIEW":
        return None
    log = java.for_table(session._jsparkSession, metadata)
    return log if log.tableExists() else None


def _newest_commits(java: _Handles, log: Any, limit: int) -> List[str]:
    """The newest `limit` commits, oldest first, each as Delta's JSON of its DeltaHistory row.

    What `DeltaHistoryManager.getHistory(limit)` does (DESCRIBE HISTORY's own call), on the
    driver: it reads the commit files in a Spark job, which cost 60 ms even for one commit of
    a 6-commit log (bench/README.md, "Which writer goes first"). Each commit's time is its
    in-commit timestamp where the table writes one, else its file's modification time; the
    functional test compares every row with the SQL's, in-commit timestamps included."""
    snapshot = log.update(False, java.none, java.none)
    latest = snapshot.version()
    files = java.files(snapshot)
    conf = log.newDeltaHadoopConf()
    store = log.store()
    fs = log.logPath().getFileSystem(conf)
    texts = []
    for version in range(max(latest - limit + 1, 0), latest + 1):
        path = files.deltaFile(version)
        found = java.commit_info(store, path, conf)
        info = (found.get() if found.isDefined()
                else java.empty_info(java.some(version)))
        stamp = info.inCommitTimestamp()
        info = info.withTimestamp(stamp.get() if stamp.isDefined()
                                  else fs.getFileStatus(path).getModificationTime())
        texts.append(java.mapper.writeValueAsString(java.history(info)))
    return texts


def _monotonic(commits: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Commit times made increasing with the version, as Delta's history does: a commit not
    later than the one before it is taken as 1 ms after it."""
    for before, after in zip(commits, commits[1:]):
        if isinstance(before.get("timestamp"), int) and isinstance(after.get("timestamp"), int) \
                and before["timestamp"] >= after["timestamp"]:
            after["timestamp"] = before["timestamp"] + 1
    return commits


def _row(commit: Dict[str, Any], zone: Any) -> Dict[str, Any]:
    row = {name: commit.get(name) for name in COLUMNS}
    millis = commit.get("timestamp")
    if isinstance(millis, int):
        # whole seconds and milliseconds apart: a float division could land a microsecond off,
        # and a consumed commit's time is compared for equality (storage/delta.py same_table)
        instant = (datetime.fromtimestamp(millis // 1000, tz=timezone.utc)
                   + timedelta(milliseconds=millis % 1000))
        local = instant.astimezone(zone) if zone is not None else instant.astimezone()
        row["timestamp"] = local.replace(tzinfo=None)
    return row
