"""Which upstreams of a model are views, and their definitions (catalog reads, shared per
dbt invocation like the upstream histories), and the model's SQL with them seen through
(sql/views.py does the splicing)."""

from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

from dbt_common.exceptions import DbtRuntimeError
from sqlglot.errors import ParseError

from dbt.adapters.spark_batch_refresh.sql import sqltree as st
from dbt.adapters.spark_batch_refresh.sql.rewrite import quote_relation
from dbt.adapters.spark_batch_refresh.sql.views import (
    ViewDefinition,
    describe_rows_view,
    inline_views,
)
from dbt.adapters.spark_batch_refresh.storage.calls import Fetch
from dbt.adapters.spark_batch_refresh.storage.delta import SharedHistories

# Views over views are followed this deep; a deeper chain stays a view (a full recompute).
MAX_DEPTH = 8


class ViewReader:
    def __init__(self, fetch: Fetch, shared: Optional[SharedHistories] = None) -> None:
        self._fetch = fetch
        self._shared = shared if shared is not None else SharedHistories()

    def see_through(self, sql: str) -> Tuple[str, Tuple[str, ...]]:
        """`sql` with its view upstreams (and theirs) replaced by their definitions, and the
        views replaced; the SQL unchanged when it has none or cannot be spliced."""
        seen: List[str] = []
        for _ in range(MAX_DEPTH):
            try:
                tree = st.parse(sql)
            except ParseError:
                break  # the analysis reports what it cannot read
            views = self.definitions({st.table_name(t) for t in st.physical_tables(tree)})
            if not views:
                break
            try:
                sql = inline_views(sql, views, tree)
            except ParseError:
                break
            seen.extend(sorted(views))
        return sql, tuple(seen)

    def definitions(self, names: Iterable[str]) -> Dict[str, ViewDefinition]:
        found: Dict[str, ViewDefinition] = {}
        for name in names:
            database, _, table = name.rpartition(".")
            if not database or table not in self._views_in(database):
                continue
            view = self._definition(name)
            if view is not None:
                found[name] = view
        return found

    def _views_in(self, database: str) -> FrozenSet[str]:
        """One SHOW VIEWS per database and invocation (a model with no views pays this)."""
        key = ("views", database)
        known = self._shared.fact(key)
        if known is None:
            try:
                rows = self._fetch(f"SHOW VIEWS IN {quote_relation(database)}")
            except DbtRuntimeError:
                rows = []  # a missing database: the upstream check names it later
            known = frozenset(str(r.get("viewName", "")).lower() for r in rows
                              if str(r.get("isTemporary")).lower() not in ("true", "1"))
            self._shared.remember(key, known)
        return known

    def _definition(self, name: str) -> Optional[ViewDefinition]:
        key = ("view", name)
        known = self._shared.fact(key)
        if known is None:
            rows = self._fetch(f"DESCRIBE TABLE EXTENDED {quote_relation(name)}")
            known = describe_rows_view(name, rows) or False
            self._shared.remember(key, known)
        return known or None
