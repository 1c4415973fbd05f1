"""`DESCRIBE HISTORY <table> LIMIT <n>` answered by the embedded session's JVM.

Every refresh reads Delta histories: the target's before planning and after its commit, each
upstream's once per invocation (storage/delta.py). Through SQL each read is a Spark job whose
rows come back through the DataFrame collect; in the embedded session (`method: session`, the
only connection with a JVM in this process) the same `DeltaHistoryManager.getHistory` call
Delta's DESCRIBE HISTORY makes is reachable directly, each commit serialized to JSON by Delta's
own mapper (one py4j round trip per commit, not one per field). Measured with
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
    if found is None:
        return None
    parts = _name_parts(found.group("relation"))
    if parts is None or not 1 <= len(parts) <= 3:
        return None
    if len(parts) == 3:
        if parts[0].lower() != _SESSION_CATALOG:
            return None
        parts = parts[1:]
    database = parts[0] if len(parts) == 2 else None
    return HistoryRead(database, parts[-1], int(found.group("limit")))


def _name_parts(relation: str) -> Optional[List[str]]:
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


def read_history(session: Any, read: HistoryRead) -> Optional[List[Dict[str, Any]]]:
    """The newest `read.limit` commits as DESCRIBE HISTORY's rows (timestamps as the session's
    wall clock, as the SQL path returns them), or None where only SQL can answer."""
    try:
        jvm = session._jvm
        ident = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
            read.table, jvm.scala.Option.apply(read.database))
        catalog = session._jsparkSession.sessionState().catalog()
        if catalog.isTempView(ident):
            return None  # SQL resolves a temporary view first
        table = catalog.getTableMetadata(ident)  # a missing table raises: SQL says so
        if table.tableType().name() == "VIEW":
            return None
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session._jsparkSession, table)
        if not log.tableExists():
            return None
        commits = log.history().getHistory(jvm.scala.Some(read.limit))
        # One call per commit: Jackson took 2 ms a commit for the Seq as a whole (42 ms for
        # 20), 0.1 ms for each on its own.
        mapper = jvm.org.apache.spark.sql.delta.util.JsonUtils.mapper()
        texts = [mapper.writeValueAsString(commits.apply(i)) for i in range(commits.size())]
        zone = session_zone(session.conf.get("spark.sql.session.timeZone", None))
    except Exception:  # noqa: BLE001 - anything unexpected: let SQL answer (and fail) as always
        return None
    return [_row(json.loads(text), zone) for text in texts]


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
