"""What users read about a batch_refresh model, as text (pure: no I/O, no dbt imports).

* the one info line per model per run, and the short message dbt prints in its result line;
* the `batch_refresh_status` report (state, lag, next due, recent runs);
* the refresh metadata shown as catalog stats in `dbt docs`.

Everything here works on plain dicts: the engine's `RefreshResult.to_dict()` and rows of the
state and history tables, so it keeps working when the engine adds fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, List, Mapping, Optional, Sequence

from dbt.adapters.spark_batch_refresh.plan.strategy import BACKFILL, FULL, NOOP, OVERWRITE, REPLAY, SKIP
from dbt.adapters.spark_batch_refresh.storage.values import as_datetime

NEVER_RUN = "never run"


# ---------------------------------------------------------------------------- small formatters
def fmt(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def duration(delta: timedelta) -> str:
    """Coarse, human: 45s, 12m, 3h 5m, 2d 4h."""
    seconds = int(max(0.0, delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join([line, sep, *body])


def short_name(relation: str) -> str:
    """`schema`.`orders` -> orders: upstreams are named by table in one-line summaries."""
    return relation.replace("`", "").rsplit(".", 1)[-1]


def _as_versions(value: Any) -> Dict[str, int]:
    """History stores versions as JSON text; the engine's result carries dicts."""
    if not value:
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return {str(k): int(v) for k, v in dict(value).items()}


# ---------------------------------------------------------------------------- one run
def version_moves(versions_from: Mapping[str, int], versions_to: Mapping[str, int]) -> str:
    """`v12->v15 of orders` for one upstream; `2 upstreams (customers v1, orders v3->v5)` else.

    Unmoved upstreams show one version, so a line says which upstream brought the change.
    """
    ups = sorted(set(versions_from) | set(versions_to))

    def move(u: str) -> str:
        a, b = versions_from.get(u), versions_to.get(u)
        if a is None or a == b:
            return f"v{b if b is not None else a}"
        return f"v{a}->v{b}"

    if not ups:
        return "no Delta upstreams"
    if len(ups) == 1:
        return f"{move(ups[0])} of {short_name(ups[0])}"
    return f"{len(ups)} upstreams ({', '.join(f'{short_name(u)} {move(u)}' for u in ups)})"


def _chunks(n: Any) -> str:
    n = int(n or 0)
    return f"in {n} chunk" + ("" if n == 1 else "s")


_VERBS = {FULL: "full recompute"}


def summary_line(data: Mapping[str, Any]) -> str:
    """The one info line a run logs: what it did and why.

    `replay (rowwise) v12->v15 of orders: +120 ~30 -4 rows in 1 chunk (upstream moved: ...)`
    A gated skip has its own wording and says when the model is next due.
    """
    action = str(data.get("action") or "")
    reason = data.get("reason") or ""
    if action == SKIP:
        due = data.get("next_due")
        return f"skip (upstream moved, not due yet): {reason}" + (
            "" if not due or "next due" in reason else f"; next due {due}")
    if action == NOOP:
        return f"no-op: {reason or 'no upstream changed'}; target untouched"
    versions_to = _as_versions(data.get("versions_to"))
    verb = ("resumed " if data.get("resumed") else "") + _VERBS.get(action, action)
    if action == REPLAY and data.get("strategy"):
        verb += f" ({data['strategy']})"  # the replay's rule
    if action == BACKFILL:
        # A backfill reads a snapshot: only the versions it pinned matter.
        moves = version_moves({}, versions_to)
        rows = f"{int(data.get('rows_inserted') or 0)} rows"
    elif action == OVERWRITE or data.get("rewritten"):
        # a whole-table write: its row count is the table's new size, not a difference
        moves = version_moves(_as_versions(data.get("versions_from")), versions_to)
        rows = f"{int(data.get('rows_inserted') or 0)} rows rewritten"
    else:
        moves = version_moves(_as_versions(data.get("versions_from")), versions_to)
        rows = (f"+{int(data.get('rows_inserted') or 0)} ~{int(data.get('rows_updated') or 0)} "
                f"-{int(data.get('rows_deleted') or 0)} rows")
    # "upstream moved: a v1->v3" repeats the versions already in the line.
    why = [] if not reason else [reason]
    if reason.startswith("upstream moved"):
        _, by_cost, costs = reason.partition("; ")
        why = ["upstream moved"] + ([costs] if by_cost else [])
    if data.get("mode") and action != BACKFILL:
        why.append(f"mode {data['mode']}")
    if data.get("fallback_reason"):
        why.append(f"fallback: {data['fallback_reason']}")
    tail = f" ({'; '.join(why)})" if why else ""
    joined = moves if moves.startswith("v") else f"of {moves}"
    return f"{verb} {joined}: {rows} {_chunks(data.get('chunks'))}{tail}"


def short_message(data: Mapping[str, Any]) -> str:
    """What dbt prints in brackets at the end of the model's result line."""
    action = str(data.get("action") or "").upper()
    reason = str(data.get("reason") or "")
    if action == "SKIP":
        due = data.get("next_due")
        tail = "" if not due or "next due" in reason else f"; next due {due}"
        return f"SKIP: {reason}{tail}"
    if action == "NOOP":
        return f"NOOP: {reason or 'no upstream changed'}"
    prefix = "RESUMED " if data.get("resumed") else ""
    if action in ("BACKFILL", "OVERWRITE"):
        return f"{prefix}{action} {int(data.get('rows_inserted') or 0)} rows"
    if data.get("rewritten"):
        return f"{prefix}{action} {int(data.get('rows_inserted') or 0)} rows rewritten"
    return (f"{prefix}{action} +{int(data.get('rows_inserted') or 0)} "
            f"~{int(data.get('rows_updated') or 0)} -{int(data.get('rows_deleted') or 0)}")


# ---------------------------------------------------------------------------- status report
@dataclass(frozen=True)
class ModelInfo:
    """A batch_refresh model of the project, as the status report and the catalog need it."""

    unique_id: str
    name: str
    relation: str
    refresh_interval: Optional[str] = None
    refresh_mode: Optional[str] = None
    interval_s: Optional[float] = None  # parsed refresh_interval; None = no gate


@dataclass(frozen=True)
class Latest:
    """An upstream's newest version, and the commit times of its recent versions."""

    version: int
    commits: Mapping[int, datetime]  # version -> commit time, newest first, possibly partial


def consumed_points(consumed: Any) -> Dict[str, Dict[str, Any]]:
    """The state row's `consumed` JSON: {upstream: {"version": n, "timestamp": "..."}}."""
    if not consumed:
        return {}
    data = json.loads(consumed) if isinstance(consumed, str) else dict(consumed)
    return {u: dict(p) for u, p in data.items()}


def _consumed_text(points: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"{short_name(u)}@v{p.get('version')}" for u, p in sorted(points.items())) or "-"


def lag(points: Mapping[str, Mapping[str, Any]], latest: Mapping[str, Optional[Latest]],
        now: datetime) -> str:
    """How far the target is behind its upstreams: commits not consumed and for how long."""
    if not points:
        return "-"
    behind, since = [], []
    for upstream, point in sorted(points.items()):
        newest = latest.get(upstream)
        if newest is None:
            behind.append(f"{short_name(upstream)} ?")
            continue
        consumed = int(point.get("version", 0))
        missing = newest.version - consumed
        if missing > 0:
            behind.append(f"{short_name(upstream)} +{missing}")
            # Stale since the first commit the target has not seen.
            first = newest.commits.get(consumed + 1)
            if first is not None:
                since.append(first)
    if not behind:
        return "up to date"
    tail = f" (stale {duration(now - min(since))})" if since else ""
    return ", ".join(behind) + tail


def next_due(model: ModelInfo, points: Mapping[str, Mapping[str, Any]],
             latest: Mapping[str, Optional[Latest]], now: datetime) -> str:
    """When the next `dbt run` will refresh this model.

    Mirrors the engine's gate (docs/decisions.md, "interval gate = target lag"): a model whose
    upstreams moved refreshes once the oldest consumed commit among the moved ones is
    `refresh_interval` old.
    """
    moved = [u for u, p in points.items()
             if latest.get(u) is not None and latest[u].version > int(p.get("version", 0))]
    if not moved:
        return "on upstream change"
    if not model.interval_s:
        return "next run"
    stamps = [t for t in (as_datetime(points[u].get("timestamp")) for u in moved) if t is not None]
    if not stamps:
        return "next run"
    due = min(stamps) + timedelta(seconds=model.interval_s)
    return "next run" if due <= now else fmt(due)


def _phase(row: Mapping[str, Any], now: datetime) -> str:
    phase = row.get("phase") or "idle"
    if phase == "merging" and row.get("chunks_total"):
        phase = f"merging {row.get('chunks_done') or 0}/{row['chunks_total']}"
    if phase != "idle":
        until = as_datetime(row.get("lease_until"))
        if until is not None and until > now:
            phase += f" (lease {row.get('lease_holder') or '?'} until {fmt(until)})"
        else:
            phase += " (interrupted; next run resumes)"
    return phase


def _outcome(row: Mapping[str, Any]) -> str:
    text = " ".join(str(row.get("last_outcome") or "-").split())
    return text if len(text) <= 60 else text[:57] + "..."


def status_rows(models: Sequence[ModelInfo], states: Mapping[str, Mapping[str, Any]],
                latest: Mapping[str, Optional[Latest]], now: datetime) -> List[List[Any]]:
    rows: List[List[Any]] = []
    for model in models:
        row = states.get(model.unique_id)
        if row is None:
            rows.append([model.name, NEVER_RUN, "-", "-", "-", "-", "next run", "-"])
            continue
        points = consumed_points(row.get("consumed"))
        rows.append([
            model.name, _phase(row, now),
            f"{fmt(as_datetime(row.get('last_refresh_at')))} ({row.get('last_action') or '-'})",
            _consumed_text(points), lag(points, latest, now),
            model.refresh_interval or "-", next_due(model, points, latest, now), _outcome(row),
        ])
    return rows


def history_rows(history: Sequence[Mapping[str, Any]],
                 names: Mapping[str, str]) -> List[List[Any]]:
    rows = []
    for h in history:
        moves = version_moves(_as_versions(h.get("versions_from")),
                              _as_versions(h.get("versions_to")))
        rows.append([
            names.get(str(h.get("model_id")), h.get("model_id")), as_datetime(h.get("started_at")),
            h.get("action"), h.get("strategy") or "-", moves,
            f"+{h.get('rows_inserted') or 0} ~{h.get('rows_updated') or 0} "
            f"-{h.get('rows_deleted') or 0}",
            h.get("duration_s"), h.get("outcome"),
        ])
    return rows


def render(models: Sequence[ModelInfo], states: Mapping[str, Mapping[str, Any]],
           history: Optional[Sequence[Mapping[str, Any]]],
           latest: Mapping[str, Optional[Latest]], now: datetime) -> str:
    """The `dbt run-operation batch_refresh_status` report (history None: section hidden)."""
    if not models and not states:
        return "No batch_refresh models in this project."
    known = {m.unique_id for m in models}
    # State rows of models no longer in the project are still shown: their tables still exist.
    orphans = [ModelInfo(uid, f"{uid.rsplit('.', 1)[-1]} (not in project)", str(r.get("relation")))
               for uid, r in sorted(states.items()) if uid not in known]
    everyone = list(models) + orphans
    names = {m.unique_id: m.name for m in everyone}
    parts = [
        f"batch_refresh models ({len(everyone)}) at {fmt(now)}",
        table(["model", "phase", "last refresh", "consumed", "lag behind upstream", "interval",
               "next due", "last outcome"], status_rows(everyone, states, latest, now)),
    ]
    if history is not None:
        parts += [
            "",
            "recent refreshes (newest first)",
            table(["model", "started", "action", "strategy", "versions", "rows", "seconds",
                   "outcome"], history_rows(history, names)) if history
            else "(no refresh recorded yet)",
        ]
    return "\n".join(parts)


# ---------------------------------------------------------------------------- docs catalog
def _stat(key: str, label: str, value: str, description: str) -> Dict[str, Any]:
    # dbt's catalog format: stats:<id>:label/value/description/include (shown when include).
    return {f"stats:{key}:label": label, f"stats:{key}:value": value,
            f"stats:{key}:description": description, f"stats:{key}:include": True}


CATALOG_STAT_KEYS = ("br_mode", "br_consumed", "br_last_refresh", "br_interval", "br_phase")


def catalog_stats(model: ModelInfo, row: Optional[Mapping[str, Any]],
                  last: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Refresh metadata of one model as catalog stats, shown in the docs site's Details tab.

    Values are phrased as text on purpose: the catalog goes through agate, which would turn a
    bare timestamp or number into another type.
    """
    configured = model.refresh_mode or "auto"
    if last and last.get("mode"):
        mode = f"{configured}; last refresh {last.get('action')} in {last.get('mode')} mode"
        # The history reason carries why `auto` could not replay ("...; fallback: why").
        _, found, why = str(last.get("reason") or "").partition("fallback: ")
        mode += f" (fallback: {why})" if found else ""
    else:
        mode = f"{configured}; not refreshed yet"
    if row is None:
        consumed, refreshed, phase = "none yet", "never", NEVER_RUN
    else:
        consumed = _consumed_text(consumed_points(row.get("consumed"))).replace("-", "none yet")
        refreshed = (f"{fmt(as_datetime(row.get('last_refresh_at')))} by {row.get('last_action') or '-'}"
                     f", {_outcome(row)}")
        phase = str(row.get("phase") or "idle")
    interval = (f"every {model.refresh_interval} of upstream lag" if model.refresh_interval
                else "whenever an upstream changed")
    stats: Dict[str, Any] = {}
    stats.update(_stat("br_mode", "Refresh mode", mode,
                       "batch_refresh refresh_mode and the mode of the last refresh"))
    stats.update(_stat("br_consumed", "Consumed upstream versions", consumed,
                       "Delta versions of each upstream the target reflects"))
    stats.update(_stat("br_last_refresh", "Last refresh", refreshed,
                       "when the last refresh finished, what it did and its outcome"))
    stats.update(_stat("br_interval", "Refresh interval", interval,
                       "refresh_interval: the upstream lag after which a run refreshes"))
    stats.update(_stat("br_phase", "Refresh state", phase,
                       "idle, or the phase of a refresh in progress / to resume"))
    return stats
