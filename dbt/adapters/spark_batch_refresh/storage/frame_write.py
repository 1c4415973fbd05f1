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
from typing import Any, List, Optional, Set

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

    A query that reads the target is materialized first (a local checkpoint): an overwrite by
    `saveAsTable` uncaches, before it runs, every cached plan that reads the table it writes,
    so a cached staging that reads the target (the coarse keys' tombstones, a whole-keys
    staging's target rows) would be computed again, model and all, inside the write (TPC-H
    Q18 at SF 1: a 7.2 s write after a 7.0 s staging; design log, session 62)."""
    frame = session.sql(statement.query)
    if reads_table(session, frame, statement.target):
        frame = frame.localCheckpoint()
    (frame.write.format("delta").mode("overwrite")
     .option("replaceUsing", ", ".join(statement.keys)).saveAsTable(statement.target))


def reads_table(session: Any, frame: Any, table: str) -> bool:
    """Whether the frame's analyzed plan (cached views included) reads the catalog table."""
    try:
        wanted = _catalog_tables(session.table(table))
        return bool(wanted) and bool(wanted & _catalog_tables(frame))
    except Exception:  # noqa: BLE001 - a plan this cannot read: written as before
        return False


def _catalog_tables(frame: Any) -> Set[str]:
    names: Set[str] = set()
    leaves = frame._jdf.queryExecution().analyzed().collectLeaves().iterator()
    while leaves.hasNext():
        leaf = leaves.next()
        if leaf.getClass().getSimpleName() != "LogicalRelation":
            continue
        table = leaf.catalogTable()
        if table.isDefined():
            names.add(table.get().identifier().unquotedString())
    return names
