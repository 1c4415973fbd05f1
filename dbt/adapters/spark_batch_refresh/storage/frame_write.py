"""`INSERT INTO t REPLACE USING (key, ...) <query>` run as the DataFrame write Delta gives it.

Databricks SQL has the statement; Spark 4.2's SQL does not (Delta 4.4.0 fails it with
UNSUPPORTED_FEATURE.TABLE_OPERATION), but Delta 4.4.0 executes the same operation as the
DataFrame write option `replaceUsing`: one WRITE commit that deletes the target rows whose key
a query row has and inserts the query's rows. A refresh issues the statement only in the
embedded session (engine/apply.py), whose delta-spark is pinned to a release that has the
option: a Delta that does not know the option would take `mode("overwrite")` as an overwrite
of the whole table, which is why a Spark Connect server (whose Delta is the server's) is not
given it.

The write runs in the session whose `SET`s the refresh made, so the idempotent-write confs
(txnAppId, txnVersion) and the commit's userMetadata apply to it as to a SQL statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Optional

_STATEMENT = re.compile(
    r"\s*INSERT\s+INTO\s+(?P<target>(?:`[^`]*`|[^\s`])+)\s+REPLACE\s+USING\s*"
    r"\((?P<keys>[^)]*)\)\s*\n"
    r"(?P<query>\S.*)", re.IGNORECASE | re.DOTALL)
_PLAIN = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENTIFIER = re.compile(rf"`?(?P<name>{_PLAIN})`?")


@dataclass(frozen=True)
class ReplaceUsing:
    target: str
    keys: List[str]
    query: str


def replace_using_statement(sql: str) -> Optional[ReplaceUsing]:
    """The parts of a REPLACE USING statement as sqlgen.replace_using writes it; None for any
    other statement (and for key names the option's comma list cannot carry plainly)."""
    found = _STATEMENT.fullmatch(sql)
    if found is None:
        return None
    keys = []
    for part in found.group("keys").split(","):
        name = _IDENTIFIER.fullmatch(part.strip())
        if name is None:
            return None
        keys.append(name.group("name"))
    return ReplaceUsing(found.group("target"), keys, found.group("query"))


def plain_keys(unique_key: List[str]) -> bool:
    """Whether every key column's name passes through the option unquoted."""
    return all(re.fullmatch(_PLAIN, k) for k in unique_key)


def write_replace_using(session: Any, statement: ReplaceUsing) -> None:
    """The DataFrame write of the statement (by name: the query's columns are the target's;
    Delta casts nothing here, so their types must be the target's, apply.py checks that).

    A query reading a cached staging that reads the target (the coarse keys' tombstones) is
    materialized first (a local checkpoint): an overwrite by `saveAsTable` uncaches, before it
    runs, every cached plan that reads the table it writes, so the staging would be computed
    again, model and all, inside the write (TPC-H Q18 at SF 1: a 7.2 s write after a 7.0 s
    staging; design log, session 62)."""
    frame = session.sql(statement.query)
    if reads_table(session, frame, statement.target):
        frame = frame.localCheckpoint()
    (frame.write.format("delta").mode("overwrite")
     .option("replaceUsing", ", ".join(statement.keys)).saveAsTable(statement.target))


def reads_table(session: Any, frame: Any, table: str) -> bool:
    """Whether a cached plan the frame reads reads the catalog table, which the write's
    uncaching would drop (the frame's own reads of it, an anti-join, are read once anyway):
    the plan reads the table more often as analyzed than with its cached parts in place."""
    try:
        wanted = _catalog_reads(session.table(table)._jdf.queryExecution().analyzed())
        execution = frame._jdf.queryExecution()
        return _reads_of(execution.analyzed(), wanted) > \
            _reads_of(execution.withCachedData(), wanted)
    except Exception:  # noqa: BLE001 - a plan this cannot read: written as before
        return False


def _reads_of(plan: Any, tables: List[str]) -> int:
    return sum(1 for name in _catalog_reads(plan) if name in tables)


def _catalog_reads(plan: Any) -> List[str]:
    """The catalog tables the plan's leaves read, once per leaf."""
    names: List[str] = []
    leaves = plan.collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() != "LogicalRelation":
            continue
        table = leaf.catalogTable()
        if table.isDefined():
            names.append(table.get().identifier().unquotedString())
    return names
