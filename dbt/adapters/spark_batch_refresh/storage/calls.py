"""The two callables storage and engine classes are given: run a statement, fetch its rows.

Both go through the dbt connection (the adapter binds them), so every statement a refresh sends
is logged, traced and counted in one place."""

from typing import Any, Callable, Dict, List

Fetch = Callable[[str], List[Dict[str, Any]]]
Run = Callable[[str], None]
