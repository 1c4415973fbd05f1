"""`SHOW VIEWS IN <database>` answered by the embedded session's JVM.

Each model with an upstream in a database lists that database's views once per invocation
(storage/views.py: a view upstream is seen through). Through SQL that is a statement (median
0.026 s in the 100k-row strategies bench); the session catalog's own `listViews` answers it
with one metastore call. Anything this path cannot answer exactly as SQL would (another
catalog, a missing database, an error of any kind) returns None, and the caller runs the SQL,
so its errors keep their text.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from dbt.adapters.spark_batch_refresh.storage.jvm_history import name_parts

_STATEMENT = re.compile(r"\s*SHOW\s+VIEWS\s+IN\s+(?P<database>\S+)\s*", re.IGNORECASE)


def views_read(sql: str) -> Optional[str]:
    """The database of a `SHOW VIEWS IN <database>` statement (one plain or backquoted name);
    None for any other statement."""
    found = _STATEMENT.fullmatch(sql)
    parts = name_parts(found.group("database")) if found is not None else None
    return parts[0] if parts is not None and len(parts) == 1 else None


def read_views(session: Any, database: str) -> Optional[List[Dict[str, Any]]]:
    """SHOW VIEWS' rows (namespace, viewName, isTemporary) for `database`, or None where only
    SQL can answer. Like SHOW VIEWS, the session's temporary views come with the database's."""
    try:
        if database.lower() == str(session.conf.get("spark.sql.globalTempDatabase",
                                                    "global_temp")).lower():
            return None  # its views are temporary, which SHOW VIEWS says and listViews not
        catalog = session._jsparkSession.sessionState().catalog()
        # A missing database raises here, and the SQL raises the error the caller expects.
        names = catalog.listViews(database, "*").iterator()
        rows: List[Dict[str, Any]] = []
        while names.hasNext():
            ident = names.next()
            stored = ident.database().isDefined()
            rows.append({"namespace": ident.database().get() if stored else "",
                         "viewName": ident.table(), "isTemporary": not stored})
    except Exception:  # noqa: BLE001 - anything unexpected: let SQL answer (and fail) as always
        return None
    return rows
