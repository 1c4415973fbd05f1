"""Text rendering of the state and history tables for `batch_refresh_status` (pure)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Dict, List, Sequence


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join([line, sep, *body])


def _versions(consumed: Any) -> str:
    if not consumed:
        return "-"
    data = json.loads(consumed)
    return ", ".join(f"{u}@v{p['version']}" for u, p in sorted(data.items()))


def _lease(row: Dict[str, Any], now: datetime) -> str:
    until = row.get("lease_until")
    if row.get("phase") in (None, "idle"):
        return "-"
    if until is None:
        return f"{row.get('lease_holder')}"
    state = "live" if until > now else "expired"
    return f"{row.get('lease_holder')} until {_fmt(until)} ({state})"


def _phase(row: Dict[str, Any]) -> str:
    phase = row.get("phase") or "idle"
    if phase == "merging" and row.get("chunks_total"):
        return f"merging {row.get('chunks_done') or 0}/{row['chunks_total']}"
    return phase


def render(states: List[Dict[str, Any]], history: List[Dict[str, Any]], now: datetime) -> str:
    if not states:
        return "No batch_refresh models have run yet."
    state_rows = [
        [r["model_id"], _phase(r), r.get("last_action"), r.get("last_refresh_at"),
         _versions(r.get("consumed")), _lease(r, now), (r.get("last_outcome") or "-")[:60]]
        for r in states
    ]
    history_rows = [
        [h["model_id"], h.get("started_at"), h.get("action"), h.get("mode"),
         f"{h.get('versions_from')} -> {h.get('versions_to')}",
         f"+{h.get('rows_inserted')} ~{h.get('rows_updated')} -{h.get('rows_deleted')}",
         h.get("duration_s"), h.get("outcome")]
        for h in history
    ]
    return (
        "batch_refresh models\n"
        + table(["model", "phase", "last action", "last refresh", "consumed", "lease",
                 "last outcome"], state_rows)
        + "\n\nrecent refreshes\n"
        + table(["model", "started", "action", "mode", "versions", "rows", "seconds",
                 "outcome"], history_rows)
    )
