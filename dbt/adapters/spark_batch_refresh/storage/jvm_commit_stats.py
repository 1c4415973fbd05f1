"""The largest key a Delta commit inserted, from its files' statistics (embedded session only).

A commit whose key ceiling is not known when it is written (an overwrite, which stages nothing;
an append checked inline, plan/key_top.py) records that the rows it inserts raise the ceiling.
The next replay that needs the ceiling reads it here: the commit's JSON file, one small read on
the driver, and the `maxValues` Delta recorded for each file it added. What that equals is
`SELECT max(key) FROM table_changes(t, v, v) WHERE _change_type = 'insert'` for a commit that
only adds whole files (an INSERT or INSERT OVERWRITE: no change-data files, no deletion
vectors); anything else, a file without statistics for the column included, answers None
(the ceiling stays unknown and the replay reads the target as before), never a guess.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Union

from dbt.adapters.spark_batch_refresh.storage.jvm_history import delta_log, handles, session_table


def inserted_key_max(session: Any, relation: str, version: int, column: str) -> Optional[str]:
    """The largest `column` value the commit `version` of `relation` inserted, as Spark casts
    it to text (an integer, or a date as YYYY-MM-DD); None when it cannot be told exactly."""
    named = session_table(relation)
    if named is None:
        return None
    try:
        java = handles(session._jvm)
        log = delta_log(session, java, *named)
        if log is None:
            return None
        snapshot = log.update(False, java.none, java.none)
        if not 0 <= version <= snapshot.version():
            return None
        path = java.files(snapshot).deltaFile(version)
        text = log.store().read(path, log.newDeltaHadoopConf()).mkString("\n")
    except Exception:  # noqa: BLE001 - unreadable: the ceiling stays unknown
        return None
    return added_max(str(text), column)


def added_max(commit: str, column: str) -> Optional[str]:
    """From a commit file's text (one JSON action a line): the largest `column` value of the
    files it added, or None unless every added file's statistics say (pure)."""
    top: Optional[Union[int, str]] = None
    for line in commit.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "cdc" in action:
            return None  # its inserts are in change-data files, not the added ones
        add = action.get("add")
        if add is None:
            continue
        if add.get("deletionVector") or add.get("dataChange") is False:
            return None
        value = _file_max(add.get("stats"), column)
        if value is _EMPTY:
            continue
        if value is None:
            return None
        if top is not None and type(top) is not type(value):
            return None
        top = value if top is None or value > top else top  # type: ignore[operator]
    return None if top is None else str(top)


_EMPTY = object()  # a file with no row, or only NULLs in the column


def _file_max(stats_text: Any, column: str) -> Any:
    try:
        stats = json.loads(stats_text) if isinstance(stats_text, str) else None
    except ValueError:
        return None
    if not isinstance(stats, dict):
        return None
    records = stats.get("numRecords")
    maxes = stats.get("maxValues") or {}
    nulls = stats.get("nullCount") or {}
    name = next((k for k in maxes if k.lower() == column.lower()), None)
    if name is None:
        counted = next((v for k, v in nulls.items() if k.lower() == column.lower()), None)
        if records == 0 or (records is not None and counted == records):
            return _EMPTY
        return None
    value = maxes[name]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return value
