"""`DESCRIBE QUERY <query>` answered by the embedded session's analyser.

Every refresh that writes reads its model's output columns first (the schema check before a
write). As a statement (a command, whose rows are then collected) DESCRIBE QUERY took
0.032-0.036 s on a five-column aggregate over a Delta table pinned with VERSION AS OF, the
query's own analysed schema 0.012 s (scratch session, medians of 30; docs/decisions.md,
session 35). The query is wrapped in `SELECT * FROM (...)` so that only a query can be
analysed here: `sql()` runs a command eagerly, and a command must never run in place of its
description.

Each column costs a few round trips to the JVM, so a wide model (over MAX_COLUMNS) is left to
the SQL, as is anything this path cannot answer exactly as SQL would (an error of any kind):
the caller then runs the statement and its errors keep their text. The type strings are
Spark's `simpleString`, which is what DESCRIBE QUERY prints (compared type by type with the
statement's rows in tests/functional/test_shared_histories.py).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

_STATEMENT = re.compile(r"\s*DESCRIBE\s+QUERY\s+(?P<query>\S.*)", re.IGNORECASE | re.DOTALL)
# Each column is a few py4j round trips (the field, its name, type and comment): a wide
# model's would cost what the statement costs.
MAX_COLUMNS = 24


def describe_read(sql: str) -> Optional[str]:
    """The query of a `DESCRIBE QUERY <query>` statement; None for any other statement."""
    found = _STATEMENT.fullmatch(sql)
    return found.group("query") if found is not None else None


def read_describe(session: Any, query: str) -> Optional[List[Dict[str, Any]]]:
    """DESCRIBE QUERY's rows (col_name, data_type, comment) for `query`, or None where only
    the SQL can answer."""
    try:
        # The newline ends a trailing `--` comment of the query before the parenthesis.
        schema = session._jsparkSession.sql(f"SELECT * FROM (\n{query}\n) AS _br_describe").schema()
        count = schema.length()
        if count > MAX_COLUMNS:
            return None
        rows: List[Dict[str, Any]] = []
        for i in range(count):
            field = schema.apply(i)
            comment = field.getComment()
            rows.append({"col_name": field.name(), "data_type": field.dataType().simpleString(),
                         "comment": comment.get() if comment.isDefined() else None})
    except Exception:  # noqa: BLE001 - anything unexpected: let SQL answer (and fail) as always
        return None
    return rows
