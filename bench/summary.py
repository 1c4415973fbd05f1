"""The benchmark's result records reduced to cells, and the formatting shared by the report's
tables (bench/report.py) and its targets (bench/targets.py).

A cell is one (scale, shape, distribution, fraction, method); its numbers are medians over the
repetitions. Records written before change distributions existed (no `distribution` field) count
as `uniform`. Pure: no Spark, no matplotlib.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Tuple

METHODS = ("replay", "hand_merge", "rebuild", "incremental")
FIXED_CHANGE = 10_000  # "same absolute change size" of the time-vs-size chart

DISTRIBUTIONS = ("uniform", "recent", "append")  # bench/data.py; the order of the tables
Key = Tuple[int, str, str, float, str]  # scale, shape, distribution, fraction, method
Cell = Tuple[int, str, float, str]  # scale, shape, fraction, method: one distribution's cells


def distribution(r: Dict[str, Any]) -> str:
    """A record's change distribution; old records (none recorded) were all uniform."""
    return r.get("distribution") or "uniform"


def cell_key(r: Dict[str, Any]) -> Key:
    return (r["scale"], r["shape"], distribution(r), r["fraction"], r["method"])


def _dist_order(d: str) -> Tuple[int, str]:
    return (DISTRIBUTIONS.index(d) if d in DISTRIBUTIONS else len(DISTRIBUTIONS), d)


def of_distribution(summary: Dict[Key, Dict[str, Any]],
                    dist: str = "uniform") -> Dict[Cell, Dict[str, Any]]:
    """The cells of one distribution, keyed without it."""
    return {(k[0], k[1], k[3], k[4]): c for k, c in summary.items() if k[2] == dist}


def median(values: Iterable[float]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def merge_records(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """All records of several result files; a later file replaces a (scale, shape, distribution,
    fraction, method) cell measured by an earlier one."""
    cells: Dict[Key, List[Dict[str, Any]]] = {}
    for result in results:
        mine: Dict[Key, List[Dict[str, Any]]] = defaultdict(list)
        for r in result["records"]:
            mine[cell_key(r)].append(r)
        cells.update(mine)
    return [r for rs in cells.values() for r in rs]


def summarize(records: List[Dict[str, Any]]) -> Dict[Key, Dict[str, Any]]:
    """Median seconds (and statements/commits) per cell; a cell is correct only if every
    repetition was."""
    groups: Dict[Key, List[Dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[cell_key(r)].append(r)
    out = {}
    for key, rs in groups.items():
        ints = lambda f: [r[f] for r in rs if isinstance(r.get(f), (int, float))]  # noqa: E731
        out[key] = {
            "seconds": median(r["seconds"] for r in rs),
            "reps": len(rs),
            "changes": rs[0]["changes"],
            "correct": all(r.get("correct", True) for r in rs),
            "statements": median(ints("statements")),
            "writes": median(ints("writes")),
            "target_commits": median(ints("target_commits")),
            # Every repetition's commit counts: "exactly 1 commit" must not rest on a median.
            "writes_seen": sorted({int(v) for v in ints("writes")}),
            "target_commits_seen": sorted({int(v) for v in ints("target_commits")}),
            "chunks": median(ints("chunks")),  # not recorded by bench/run.py yet
            "actions": sorted({r.get("action", "") for r in rs} - {""}),
        }
    return out


def _s(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.1f}"


def _s2(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def _r(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(f: float) -> str:
    return f"{f * 100:g}%"


def _n(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:g}"


def fixed_costs(summary: Dict[Key, Dict[str, Any]]) -> Dict[int, Dict[str, Optional[float]]]:
    """Per scale: median over all rounds (every distribution and fraction) of the gated skip, the
    no-ops and dbt's overhead."""
    by_scale: Dict[int, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    for (scale, shape, _, _, method), c in summary.items():
        if method in ("gated_skip", "noop", "overhead_view", "overhead_table"):
            name = method if method != "noop" else f"noop_{shape}"
            by_scale[scale][name].append(c["seconds"])
    return {s: {m: median(v) for m, v in d.items()} for s, d in by_scale.items()}


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a - b if a is not None and b is not None else None
