"""Issue #15's targets (replay against the table build and a hand-written MERGE) and issue
#33's (`auto` against each forced strategy), each judged on the summarized cells
(bench/summary.py) as **met**, **not met** (by how much) or **not measured** (what is missing):
the "Targets" and "Strategies" sections of the report. Pure: no Spark, no matplotlib.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from bench.summary import (Cell, Key, _diff, _dist_order, _pct, _ratio, _s2, fixed_costs,
                           of_distribution)

# Issue #15's targets. The cells they name are fixed here so that every result file is judged
# against the same ones (a run without them reports "not measured", never a nearby cell).
HAND_LIMIT = 1.3  # row-wise replay / hand-written MERGE, in every cell
TARGET_FRACTION = 0.001  # the "0.1% change" of targets 3 and 4
CROSSOVER_SCALE = 10_000_000
CROSSOVER_DISTRIBUTIONS = ("recent", "append")
BIG_SCALE = 100_000_000
BIG_LIMITS = {"recent": 0.1, "uniform": 0.5}  # row-wise replay / rebuild at BIG_SCALE
FIXED_LIMIT_S = 0.3  # gated skip / no-op seconds above dbt's per-model overhead
# The adapter's default `merge_chunk_rows`; the bench models do not set it.
SINGLE_CHUNK_ROWS = 5_000_000
SHAPES = ("rowwise", "agg", "join_agg")


def targets(summary: Dict[Key, Dict[str, Any]]) -> str:
    """Issue #15's targets, each **met**, **not met** (by how much) or **not measured** (what is
    missing). Every distribution counts; a target that names distributions uses only those."""
    out = ["Issue #15's targets, judged on the cells above (seconds: medians over repetitions; "
           "commits: every repetition).\n",
           _commit_target(summary), _hand_target(summary), _crossover_target(summary),
           _crossover_info(summary), _big_target(summary), _fixed_target(summary)]
    return "\n".join(line for line in out if line) + "\n"


def _sec(summary: Dict[Key, Dict[str, Any]], scale: int, shape: str, dist: str, frac: float,
         method: str) -> Optional[float]:
    return (summary.get((scale, shape, dist, frac, method)) or {}).get("seconds")


def _within(value: float, limit: float, strict: bool = False) -> bool:
    # Rounded: a margin of exactly the limit (0.4 s - 0.1 s) must not fail on float error.
    excess = round(value - limit, 9)
    return excess < 0 if strict else excess <= 0


def _at_most(value: float, limit: float, strict: bool = False, unit: str = "") -> str:
    """The verdict of one measured value against its limit, with the excess when it is over."""
    ok = _within(value, limit, strict)
    return "**met**" if ok else f"**not met** by {value - limit:.2f}{unit}"


def _overall(oks: List[Optional[bool]]) -> str:
    """One verdict over several parts (None: a part not measured)."""
    measured = [ok for ok in oks if ok is not None]
    missing = len(oks) - len(measured)
    if not all(measured):
        return (f"**not met** ({sum(measured)} of {len(oks)} met"
                + (f", {missing} not measured)" if missing else ")"))
    if missing:
        return f"**not measured** ({missing} of {len(oks)} missing)"
    return "**met**"


def _missing(summary: Dict[Key, Dict[str, Any]], scale: int, shape: str, dist: str,
             frac: float) -> str:
    """The verdict of a replay / rebuild target whose cell is missing (the caller names it)."""
    gone = [m for m in ("replay", "rebuild") if _sec(summary, scale, shape, dist, frac, m) is None]
    return f"**not measured** (no {' or '.join(gone)} cell)"


def _single_chunk(cell: Dict[str, Any]) -> bool:
    # bench/run.py does not record the adapter's `chunks` yet: without it, a change set within
    # the default chunk size is taken as one chunk (a replay stages one row per key its changes
    # touch, about one per changed row).
    if cell.get("chunks") is not None:
        return bool(cell["chunks"] == 1)
    return bool(cell["changes"] <= SINGLE_CHUNK_ROWS)


def _spread(values: List[List[int]]) -> str:
    """How many cells saw which count, e.g. `4 in 12 cells`; `1-2` = differed between reps."""
    labels = [str(v[0]) if len(v) == 1 else f"{v[0]}-{v[-1]}" for v in values]
    return ", ".join(f"{label} in {labels.count(label)} cells" for label in sorted(set(labels)))


def _commit_check(cells: List[Dict[str, Any]], want: int, log: bool) -> str:
    """Commits per refresh: the adapter's count of its own Delta writes (`writes`, bookkeeping
    included: what the target is about) and, where bench/run.py reads it, the target table's
    Delta log (`target_commits`: its version after minus before). Every repetition counts."""
    cells = [c for c in cells if c["writes_seen"]]
    if not cells:
        return "**not measured** (no record carries the adapter's write count)"
    writes = [c["writes_seen"] for c in cells]
    logged = [c["target_commits_seen"] for c in cells if c["target_commits_seen"]] if log else []
    excess = max(abs(v - want) for vs in writes + logged for v in vs)
    verdict = "**met**" if not excess else \
        f"**not met** by {excess} commit{'s' if excess > 1 else ''}"
    if not log:
        where = "its Delta log is not read by bench/run.py"
    elif logged:
        where = f"target's Delta log: {_spread(logged)}"
    else:
        where = "target's Delta log not recorded"
    return f"{verdict} (adapter count: {_spread(writes)}; {where})"


def _commit_target(summary: Dict[Key, Dict[str, Any]]) -> str:
    replays = [c for k, c in summary.items() if k[4] == "replay"]
    single = [c for c in replays if _single_chunk(c)]
    of = lambda method: [c for k, c in summary.items() if k[4] == method]  # noqa: E731
    text = ("1. Commits per refresh (single-chunk replay exactly 1 Delta commit, gated skip and "
            "no-op 0; the state and history commits a `dbt run` makes once for all its models "
            "are not per refresh): replay "
            + (_commit_check(single, 1, log=True) if single else
               "**not measured** (no single-chunk replay cell)")
            + "; gated skip " + _commit_check(of("gated_skip"), 0, log=True)
            # run.py records a no-op's target_commits as 0 without reading the log.
            + "; no-op " + _commit_check(of("noop"), 0, log=False) + ".")
    guessed = [c for c in replays if c.get("chunks") is None]
    if guessed:
        text += (f" The records carry no chunk count: replays of at most {SINGLE_CHUNK_ROWS:,} "
                 f"changed rows (the default `merge_chunk_rows`) are taken as single-chunk")
        left = len(replays) - len(single)
        text += f"; {left} larger replay cells are left out." if left else "."
    return text


def _hand_target(summary: Dict[Key, Dict[str, Any]]) -> str:
    head = (f"2. Row-wise replay <= {HAND_LIMIT}x the hand-written MERGE in every cell (scale, "
            f"distribution, fraction): ")
    ratios = []
    for (scale, shape, dist, frac, method), c in summary.items():
        if shape == "rowwise" and method == "replay":
            r = _ratio(c["seconds"], _sec(summary, scale, shape, dist, frac, "hand_merge"))
            if r is not None:
                ratios.append((r, scale, dist, frac))
    if not ratios:
        return head + "**not measured** (no row-wise cell with both a replay and a hand MERGE)."
    worst, best = max(ratios), min(ratios)
    met = sum(1 for r in ratios if _within(r[0], HAND_LIMIT))
    where = lambda r: f"{r[0]:.2f}x ({r[1]:,} rows, {r[2]}, {_pct(r[3])})"  # noqa: E731
    scales = ", ".join(f"{s:,}" for s in sorted({r[1] for r in ratios}))
    dists = ", ".join(sorted({r[2] for r in ratios}, key=_dist_order))
    return (head + f"{_at_most(worst[0], HAND_LIMIT, unit='x')} ({met} of {len(ratios)} cells). "
            f"Replay / hand ranges from {where(best)} to {where(worst)}; cells at {scales} rows; "
            f"distributions {dists}.")


def _crossover_target(summary: Dict[Key, Dict[str, Any]]) -> str:
    oks: List[Optional[bool]] = []
    parts = []
    for shape in ("rowwise", "agg"):
        for dist in CROSSOVER_DISTRIBUTIONS:
            r = _ratio(_sec(summary, CROSSOVER_SCALE, shape, dist, TARGET_FRACTION, "replay"),
                       _sec(summary, CROSSOVER_SCALE, shape, dist, TARGET_FRACTION, "rebuild"))
            oks.append(None if r is None else _within(r, 1.0, strict=True))
            parts.append(f"{shape}/{dist} " + (
                _missing(summary, CROSSOVER_SCALE, shape, dist, TARGET_FRACTION) if r is None
                else f"{r:.2f} {_at_most(r, 1.0, strict=True)}"))
    return (f"3. Crossover at {CROSSOVER_SCALE:,} rows, {_pct(TARGET_FRACTION)} change: replay "
            f"faster than the full rebuild for {' and '.join(CROSSOVER_DISTRIBUTIONS)} changes, "
            f"row-wise and agg: {_overall(oks)}. Replay / rebuild: " + "; ".join(parts) + ".")


def _crossover_info(summary: Dict[Key, Dict[str, Any]]) -> str:
    dists = sorted({k[2] for k in summary if k[4] == "replay"}, key=_dist_order)
    lines = []
    for dist in dists:
        cells = of_distribution(summary, dist)
        found = [x for x in (_crossover(cells, shape) for shape in SHAPES) if x]
        if found:
            lines.append(f"   - {dist}: " + "; ".join(found))
    if not lines:
        return ""
    return ("   Crossover (smallest measured table where replay beats the rebuild, per change "
            "fraction), per change distribution:\n" + "\n".join(lines))


def _big_target(summary: Dict[Key, Dict[str, Any]]) -> str:
    ratio = lambda shape, dist: _ratio(  # noqa: E731
        _sec(summary, BIG_SCALE, shape, dist, TARGET_FRACTION, "replay"),
        _sec(summary, BIG_SCALE, shape, dist, TARGET_FRACTION, "rebuild"))
    parts = []
    for dist, limit in BIG_LIMITS.items():
        r = ratio("rowwise", dist)
        parts.append(f"{dist} <= {limit:.2f}: " + (
            _missing(summary, BIG_SCALE, "rowwise", dist, TARGET_FRACTION) if r is None
            else f"{r:.2f} {_at_most(r, limit)}"))
    # The aggregate has no limit of its own at this scale: shown so its trend is not lost.
    agg = ", ".join(f"{dist} {_s2(ratio('agg', dist))}" for dist in BIG_LIMITS)
    return (f"4. {BIG_SCALE:,} rows, {_pct(TARGET_FRACTION)} change, row-wise replay / rebuild: "
            + "; ".join(parts) + f". For information, agg replay / rebuild: {agg}.")


def _fixed_target(summary: Dict[Key, Dict[str, Any]]) -> str:
    """Two decimals: the margin is often a few hundredths of a second, which one decimal would
    round across the limit."""
    costs = fixed_costs(summary)
    parts = []
    skips: List[float] = []
    noops: List[float] = []
    for scale in sorted(costs):
        c = costs[scale]
        ovh = c.get("overhead_view")
        skip = _diff(c.get("gated_skip"), ovh)
        worst = max((d for d in (_diff(c.get(f"noop_{s}"), ovh) for s in SHAPES)
                     if d is not None), default=None)
        skips += [skip] if skip is not None else []
        noops += [worst] if worst is not None else []
        parts.append(f"{scale:,} rows: skip +{_s2(skip)} s, worst no-op +{_s2(worst)} s "
                     f"(overhead {_s2(ovh)} s)")

    def verdict(margins: List[float], what: str) -> str:
        if not margins:
            return f"**not measured** (no {what} and `select 1` view cells)"
        met = sum(1 for m in margins if _within(m, FIXED_LIMIT_S))
        return (f"{_at_most(max(margins), FIXED_LIMIT_S, unit=' s')} ({met} of {len(margins)} "
                f"scales)")

    return (f"5. Gated skip and no-op <= {FIXED_LIMIT_S} s above dbt's per-model overhead (a "
            f"`select 1` view): skip {verdict(skips, 'gated skip')}, no-op "
            f"{verdict(noops, 'no-op')}" + (". " + "; ".join(parts) if parts else "") + ".")


def _crossover(summary: Dict[Cell, Dict[str, Any]], shape: str) -> str:
    fracs = sorted({k[2] for k in summary if k[1] == shape and k[3] == "replay"})
    parts = []
    for frac in fracs:
        scales = sorted(k[0] for k in summary if k[1:] == (shape, frac, "replay"))
        won = [s for s in scales
               if (summary.get((s, shape, frac, "rebuild")) or {}).get("seconds") is not None
               and summary[(s, shape, frac, "replay")]["seconds"]
               < summary[(s, shape, frac, "rebuild")]["seconds"]]
        parts.append(f"{_pct(frac)}: {won[0]:,}" if won else
                     f"{_pct(frac)}: none up to {max(scales):,}")
    return f"{shape} ({', '.join(parts)})" if parts else ""


# Issue #33's targets, over every cell that has an `auto` model (`bench/run.py --strategies`).
FORCED = ("replay", "overwrite", "full")
NEAR_FASTEST = 1.15  # auto / fastest forced strategy, in at least NEAR_SHARE of the cells
NEAR_SHARE = 0.9
FASTEST_LIMIT = 1.5  # auto / fastest forced strategy, in every cell
REBUILD_LIMIT = 1.1  # auto / rebuild (dbt's `table`), in every cell


def strategy_ratios(summary: Dict[Key, Dict[str, Any]]) -> Dict[tuple, tuple]:
    """Per (scale, shape, distribution, fraction) with an `auto` cell: (auto / fastest forced,
    auto / rebuild), each None where its cells are missing."""
    out = {}
    for key in sorted(k[:4] for k in summary if k[4] == "auto"):
        auto = _sec(summary, *key, "auto")
        forced = [s for s in (_sec(summary, *key, m) for m in FORCED) if s is not None]
        out[key] = (_ratio(auto, min(forced) if forced else None),
                    _ratio(auto, _sec(summary, *key, "rebuild")))
    return out


def strategy_targets(summary: Dict[Key, Dict[str, Any]]) -> str:
    """Issue #33's three targets, **met** / **not met** with the worst cell; empty without
    `auto` cells."""
    ratios = strategy_ratios(summary)
    if not ratios:
        return ""
    fastest = {k: r[0] for k, r in ratios.items() if r[0] is not None}
    rebuild = {k: r[1] for k, r in ratios.items() if r[1] is not None}

    def cell(key: tuple) -> str:
        scale, shape, dist, frac = key
        return f"{scale:,} {shape} {dist} {_pct(frac)}"

    def worst(ratios_: Dict[tuple, float], limit: float) -> str:
        if not ratios_:
            return "**not measured**"
        key = max(ratios_, key=lambda k: ratios_[k])
        over = sum(1 for r in ratios_.values() if not _within(r, limit))
        return (f"{_at_most(ratios_[key], limit, unit='x')} (worst {ratios_[key]:.2f}x, "
                f"{cell(key)}; {over} of {len(ratios_)} cells over)")

    near = sum(1 for r in fastest.values() if _within(r, NEAR_FASTEST))
    share = near / len(fastest) if fastest else 0.0
    near_verdict = ("**not measured**" if not fastest else
                    ("**met**" if share >= NEAR_SHARE else "**not met**")
                    + f" ({near} of {len(fastest)} cells, {share:.0%})")
    return "\n".join([
        "Issue #33's targets (`auto` against the forced strategies and the rebuild, same run):\n",
        f"1. `auto` <= {NEAR_FASTEST}x the fastest forced strategy in at least "
        f"{NEAR_SHARE:.0%} of cells: {near_verdict}.",
        f"2. `auto` <= {FASTEST_LIMIT}x the fastest forced strategy in every cell: "
        f"{worst(fastest, FASTEST_LIMIT)}.",
        f"3. `auto` <= {REBUILD_LIMIT}x the rebuild in every cell: "
        f"{worst(rebuild, REBUILD_LIMIT)}.",
    ]) + "\n"
