"""Which Spark this process is talking to now, and that Spark's clock.

A process may run dbt for several targets in turn (an orchestrator calling dbtRunner for each,
the test suite): what is learnt about one Spark (its clock offset, which state tables exist)
must not be applied to the next. Every adapter entry point names its endpoint first; dbt's
threads within one invocation share it.
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List, Mapping, Optional

Fetch = Callable[[str], List[Dict[str, Any]]]

NOW_ENV = "BATCH_REFRESH_NOW"  # testing aid: a fixed clock for the interval gate
EMBEDDED = "session"  # the process's own Spark: one JVM per process, this host's clock

_lock = threading.Lock()
_offsets: Dict[str, timedelta] = {}  # endpoint -> its clock minus this process's
_current = EMBEDDED


def key_for(method: str, fields: Mapping[str, Any]) -> str:
    """An endpoint's identity: where it is and the session confs it is opened with (the
    session time zone renders its clock and commit times)."""
    where = "|".join(f"{k}={fields.get(k)}" for k in ("host", "port", "cluster", "endpoint"))
    confs = sorted((fields.get("server_side_parameters") or {}).items())
    return f"{method}|{where}|{confs}"


def use(key: str, fetch: Optional[Fetch]) -> None:
    """From now on this process talks to `key`: its clock is measured once (one statement,
    a remote server only; `fetch` None is the embedded session, whose clock is ours)."""
    global _current
    with _lock:
        known = key in _offsets
    offset = timedelta(0) if known or fetch is None else _measure(fetch)
    with _lock:
        _offsets.setdefault(key, offset)
        _current = key


def current() -> str:
    return _current


def current_time() -> datetime:
    """Now, on the clock every time a refresh compares is read from: the Spark server's.

    Commit times (DESCRIBE HISTORY) come rendered in the server's time zone, and lease times are
    written by runs on other hosts; comparing them with this host's local clock would shift the
    interval gate by the zone difference and let clock skew decide who holds a lease.
    """
    fixed = os.environ.get(NOW_ENV)
    if fixed:
        return datetime.fromisoformat(fixed)
    return (datetime.now() + _offsets.get(_current, timedelta(0))).replace(microsecond=0)


def measuring_time() -> Optional[datetime]:
    """Now on the server's clock to the microsecond, for a refresh's duration measured against
    its commit time; None under a fixed test clock (no duration can be measured against it)."""
    if os.environ.get(NOW_ENV):
        return None
    return datetime.now() + _offsets.get(_current, timedelta(0))


def _measure(fetch: Fetch) -> timedelta:
    before = datetime.now()
    value = fetch("SELECT current_timestamp() AS now")[0]["now"]
    after = datetime.now()
    server = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return server.replace(tzinfo=None) - (before + (after - before) / 2)
