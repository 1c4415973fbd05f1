"""Results -> medians, a Markdown report (tables + targets) and PNG charts.

Everything but `make_charts()` is pure (no Spark, no matplotlib) and unit-tested. Records written
before change distributions existed (no `distribution` field) count as `uniform`.

    python bench/report.py bench/results/a.json [b.json ...] --out bench/results --name combined
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Optional, Tuple

METHODS = ("replay", "hand_merge", "rebuild", "incremental")
FIXED_CHANGE = 10_000  # "same absolute change size" of the size-scaling target and chart

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


def main_table(summary: Dict[Key, Dict[str, Any]]) -> str:
    rows = sorted({k[:4] for k in summary if k[4] in METHODS},
                  key=lambda t: (t[0], ["rowwise", "agg", "join_agg"].index(t[1])
                                 if t[1] in ("rowwise", "agg", "join_agg") else 9,
                                 _dist_order(t[2]), t[3]))
    head = ("| fact rows | shape | distribution | change | replay s | hand MERGE s | rebuild s "
            "| incremental s | replay / hand | replay / rebuild | replay statements / commits |\n"
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for scale, shape, dist, frac in rows:
        cell = {m: summary.get((scale, shape, dist, frac, m)) for m in METHODS}
        secs = {m: (c["seconds"] if c else None) for m, c in cell.items()}
        changes = next(c["changes"] for c in cell.values() if c)

        def show(m: str) -> str:
            c = cell[m]
            if not c:
                return "-"
            return _s(c["seconds"]) + ("" if c["correct"] else " **wrong**")

        br = cell["replay"]
        sw = f"{_n(br['statements'])} / {_n(br['writes'])}" if br else "-"
        lines.append(
            f"| {scale:,} | {shape} | {dist} | {_pct(frac)} ({changes:,} rows) | {show('replay')} "
            f"| {show('hand_merge')} | {show('rebuild')} | {show('incremental')} "
            f"| {_r(_ratio(secs['replay'], secs['hand_merge']))} "
            f"| {_r(_ratio(secs['replay'], secs['rebuild']))} | {sw} |"
        )
    return head + "\n".join(lines) + "\n"


def fixed_costs(summary: Dict[Key, Dict[str, Any]]) -> Dict[int, Dict[str, Optional[float]]]:
    """Per scale: median over all rounds (every distribution and fraction) of the gated skip, the
    no-ops and dbt's overhead."""
    by_scale: Dict[int, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    for (scale, shape, _, _, method), c in summary.items():
        if method in ("gated_skip", "noop", "overhead_view", "overhead_table"):
            name = method if method != "noop" else f"noop_{shape}"
            by_scale[scale][name].append(c["seconds"])
    return {s: {m: median(v) for m, v in d.items()} for s, d in by_scale.items()}


def fixed_table(summary: Dict[Key, Dict[str, Any]]) -> str:
    costs = fixed_costs(summary)
    head = ("| fact rows | dbt overhead: view `select 1` s | table `select 1` s | gated skip s "
            "| no-op s (rowwise / agg / join_agg) | skip - overhead | worst no-op - overhead |\n"
            "|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for scale in sorted(costs):
        c = costs[scale]
        ovh = c.get("overhead_view")
        noops = [c.get(f"noop_{s}") for s in ("rowwise", "agg", "join_agg")]
        worst = max((v for v in noops if v is not None), default=None)
        lines.append(
            f"| {scale:,} | {_s(ovh)} | {_s(c.get('overhead_table'))} | {_s(c.get('gated_skip'))} "
            f"| {' / '.join(_s(v) for v in noops)} "
            f"| {_s(_diff(c.get('gated_skip'), ovh))} | {_s(_diff(worst, ovh))} |"
        )
    return head + "\n".join(lines) + "\n"


def _diff(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a - b if a is not None and b is not None else None


def _verdict(ok: Optional[bool]) -> str:
    return "not measured" if ok is None else ("**met**" if ok else "**not met**")


def targets(summary: Dict[Key, Dict[str, Any]]) -> str:
    """Targets 1-3 are stated for the uniform distribution (the worst case); 4 uses every round."""
    full = summary
    summary = of_distribution(full, "uniform")  # type: ignore[assignment]
    out = []
    others = sorted({k[2] for k in full} - {"uniform"}, key=_dist_order)
    if others:
        out.append(f"Targets 1-3 are over the uniform change distribution (the worst case); "
                   f"{', '.join(others)} are in the table above only.\n")
    sec = lambda *k: (summary.get(k) or {}).get("seconds")  # noqa: E731

    # 1. rowwise replay <= 1.3x hand MERGE everywhere
    ratios = []
    for (scale, shape, frac, method) in summary:
        if shape == "rowwise" and method == "replay":
            r = _ratio(sec(scale, shape, frac, "replay"), sec(scale, shape, frac, "hand_merge"))
            if r is not None:
                ratios.append((r, scale, frac))
    if ratios:
        worst, best = max(ratios), min(ratios)
        met = sum(1 for r in ratios if r[0] <= 1.3)
        out.append(f"1. Row-wise replay <= 1.3x the hand-written MERGE at every scale and fraction: "
                   f"{_verdict(met == len(ratios))} ({met} of {len(ratios)} cells). Replay / hand "
                   f"ranges from {best[0]:.2f}x ({best[1]:,} rows, {_pct(best[2])}) to "
                   f"{worst[0]:.2f}x ({worst[1]:,} rows, {_pct(worst[2])}).")
    else:
        out.append("1. Row-wise replay vs hand MERGE: not measured.")

    # 2. same absolute change size, 10x rows: replay grows <= 1.5x, rebuild ~10x
    fixed: Dict[str, Dict[int, Dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for (scale, shape, frac, method), c in summary.items():
        if c["changes"] == FIXED_CHANGE and method in ("replay", "rebuild"):
            fixed[shape][scale][method] = c["seconds"]
    growth = []
    for shape, by_scale in fixed.items():
        scales = sorted(by_scale)
        for a, b in zip(scales, scales[1:]):
            if b == 10 * a and "replay" in by_scale[a] and "replay" in by_scale[b]:
                growth.append((shape, a, b, by_scale[b]["replay"] / by_scale[a]["replay"],
                               _ratio(by_scale[b].get("rebuild"), by_scale[a].get("rebuild"))))
    pair = [g for g in growth if (g[1], g[2]) == (10_000_000, 100_000_000)]
    if pair:
        out.append("2. 10M -> 100M rows at 10k changed rows: " + "; ".join(
            f"{g[0]}: replay x{g[3]:.2f} ({_verdict(g[3] <= 1.5)}), rebuild x{_n(round(g[4], 2)) if g[4] else '-'}"
            for g in pair) + ".")
    else:
        out.append("2. 10M -> 100M rows at 10k changed rows: **not measured** (no 10M and 100M "
                   "cells at 10k changed rows in these results).")
    for g in growth:
        if (g[1], g[2]) != (10_000_000, 100_000_000):
            out.append(f"   Measured instead, {g[1]:,} -> {g[2]:,} rows at 10k changed rows, {g[0]}: "
                       f"replay x{g[3]:.2f}, rebuild x{g[4]:.2f}" if g[4] else
                       f"   {g[1]:,} -> {g[2]:,}, {g[0]}: replay x{g[3]:.2f}")

    # 3. 100M @ 0.1%: replay <= rebuild / 10 for rowwise and agg; crossover per shape
    big = [(shape, _ratio(sec(100_000_000, shape, 0.001, "replay"),
                          sec(100_000_000, shape, 0.001, "rebuild"))) for shape in ("rowwise", "agg")]
    if all(r is not None for _, r in big):
        out.append("3. 100M rows, 0.1% change, replay <= 1/10 of the rebuild: " + "; ".join(
            f"{s}: replay/rebuild {r:.2f} ({_verdict(r <= 0.1)})" for s, r in big) + ".")
    else:
        out.append("3. 100M rows, 0.1% change, replay <= 1/10 of the rebuild: **not measured** "
                   "(no 100M cells at 0.1% in these results). Largest measured: " + "; ".join(
                       _largest(summary, shape) for shape in ("rowwise", "agg", "join_agg")
                       if _largest(summary, shape)) + ".")
    out.append("   Crossover (smallest measured table where replay beats the rebuild, per change "
               "fraction): " + "; ".join(_crossover(summary, shape)
                                          for shape in ("rowwise", "agg", "join_agg")
                                          if _crossover(summary, shape)) + ".")

    # 4. gated skip / no-op <= 1 s above dbt's per-model overhead (two decimals: the margin
    # is often a few hundredths of a second, which one decimal would round across the limit)
    costs = fixed_costs(full)
    parts = []
    skips: List[bool] = []
    noop_oks: List[bool] = []
    for scale in sorted(costs):
        c = costs[scale]
        ovh = c.get("overhead_view")
        skip = _diff(c.get("gated_skip"), ovh)
        noops = [_diff(c.get(f"noop_{s}"), ovh) for s in ("rowwise", "agg", "join_agg")
                 if c.get(f"noop_{s}") is not None]
        worst = max(noops, default=None)
        if skip is not None:
            skips.append(skip <= 1.0)
        if worst is not None:
            noop_oks.append(worst <= 1.0)
        parts.append(f"{scale:,} rows: skip +{_s2(skip)} s, worst no-op +{_s2(worst)} s "
                     f"(overhead {_s2(ovh)} s)")
    out.append("4. Gated skip and no-op <= 1 s above dbt's per-model overhead (a `select 1` view): "
               f"skip {_verdict(all(skips) if skips else None)}, no-op "
               f"{_verdict(all(noop_oks) if noop_oks else None)}"
               + (f" ({sum(noop_oks)} of {len(noop_oks)} scales)" if noop_oks else "")
               + ". " + "; ".join(parts) + ".")
    return "\n".join(out) + "\n"


def _largest(summary: Dict[Cell, Dict[str, Any]], shape: str) -> str:
    cells = [(k[0], k[2]) for k in summary if k[1] == shape and k[3] == "replay"]
    if not cells:
        return ""
    scale = max(s for s, _ in cells)
    frac = min(cells, key=lambda c: (c[0] != scale, abs(c[1] - 0.001)))[1]
    r = _ratio(summary[(scale, shape, frac, "replay")]["seconds"],
               (summary.get((scale, shape, frac, "rebuild")) or {}).get("seconds"))
    return f"{shape} at {scale:,} rows / {_pct(frac)}: replay/rebuild {_r(r)}"


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


def replay_breakdown(traces: List[Dict[str, Any]],
                     records: Optional[List[Dict[str, Any]]] = None) -> str:
    """Median seconds per statement kind in a refresh (from the adapter's statement trace), per
    scale, change distribution, model and action (replay; skip and no-op of the row-wise models)."""
    Group = Tuple[int, str, str, str]  # scale, distribution, model, action
    kinds: Dict[Group, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    counts: Dict[Group, Dict[str, List[int]]] = defaultdict(lambda: defaultdict(list))
    for t in traces:
        action = t.get("action")
        if action != "replay" and not (action in ("skip", "noop") and "rowwise" in t["model"]):
            continue
        group = (t["scale"], distribution(t), t["model"], action)
        per: Dict[str, float] = defaultdict(float)
        num: Dict[str, int] = defaultdict(int)
        for secs, text in t["statements"]:
            per[statement_kind(text)] += secs
            num[statement_kind(text)] += 1
        for k in set(per) | set(kinds[group]):
            kinds[group][k].append(per.get(k, 0.0))
            counts[group][k].append(num.get(k, 0))
    # Time of the refresh outside its SQL statements (dbt, Jinja, planning, Python).
    method_of = {"replay": "replay", "skip": "gated_skip", "noop": "noop"}
    wall = {}
    for r in records or []:
        shape = "rowwise" if r["method"] == "gated_skip" else r["shape"]
        wall[(r["scale"], distribution(r), r["fraction"], r["rep"], r["method"], shape)] = \
            r["seconds"]
    for t in traces:
        action = t.get("action")
        group = (t["scale"], distribution(t), t["model"], action)
        if group not in kinds:
            continue
        shape = t["model"].split("_", 1)[1]
        total = wall.get((t["scale"], distribution(t), t["fraction"], t["rep"], method_of[action],
                          shape))
        if total is not None:
            inside = sum(secs for secs, _ in t["statements"])
            kinds[group]["(outside SQL: dbt, Jinja, planning)"].append(max(0.0, total - inside))
            counts[group]["(outside SQL: dbt, Jinja, planning)"].append(0)
    if not kinds:
        return ""
    order = {"replay": 0, "skip": 1, "noop": 2}
    lines = ["| fact rows | distribution | model | action | statement kind | count | median s |",
             "|---:|---|---|---|---|---:|---:|"]
    for group in sorted(kinds, key=lambda g: (g[0], _dist_order(g[1]), order[g[3]], g[2])):
        d = kinds[group]
        for k in sorted(d, key=lambda k: -median(d[k])):
            n = median(counts[group][k])
            lines.append(f"| {group[0]:,} | {group[1]} | {group[2]} | {group[3]} | {k} "
                         f"| {n:g} | {median(d[k]):.2f} |".replace("| 0 |", "| - |"))
    return "\n".join(lines) + "\n"


_KIND_RULES = [
    (r"^merge into \S*batch_refresh_state", "state: lease / release (MERGE/UPDATE state row)"),
    (r"^(update|merge into) \S*batch_refresh_state", "state: lease / release (MERGE/UPDATE state row)"),
    (r"^(insert into|merge into) \S*batch_refresh_history", "history row (write)"),
    (r"^merge into", "target MERGE (write)"),
    (r"^insert", "insert (write)"),
    (r"^(update|delete)", "update/delete (write)"),
    (r"^describe history", "DESCRIBE HISTORY (metadata)"),
    (r"^(describe|show)", "DESCRIBE/SHOW (metadata)"),
    (r"^cache", "CACHE TABLE (staging)"),
    (r"^(uncache|drop|clear)", "uncache/drop"),
    (r"^(set|reset)", "SET/RESET conf"),
    (r"^(create|alter)", "CREATE/ALTER"),
    (r"^(select|with)", "SELECT (reads)"),
]


def statement_kind(text: str) -> str:
    t = " ".join(text.lower().split())
    for pattern, kind in _KIND_RULES:
        if re.search(pattern, t):
            return kind
    return "other"


def render(results: List[Dict[str, Any]]) -> str:
    records = merge_records(results)
    summary = summarize(records)
    traces = [t for r in results for t in r.get("traces", [])]
    metas = [r["meta"] for r in results]
    parts = ["### Replay vs the alternatives (median seconds per refresh)\n\n",
             "**wrong** = the method's output differed from the model SQL evaluated from scratch "
             "in at least one repetition.\n\n", main_table(summary),
             "\n### Gated skip, no-op and dbt's own per-model overhead (median seconds)\n\n",
             fixed_table(summary), "\n### Targets\n\n", targets(summary)]
    breakdown = replay_breakdown(traces, records)
    if breakdown:
        parts += ["\n### Where a replay's time goes (statement trace)\n\n", breakdown]
    parts.append("\nRuns: " + "; ".join(
        f"{m['started']} scales {m['scales']} fractions {m['fractions']} shapes {m['shapes']} "
        + (f"distributions {m['distributions']} " if "distributions" in m else "")
        + f"reps {m['reps']} ({m['wall_s'] / 60:.0f} min), {m['cpus']} CPUs, {m['memory']}, "
        f"Spark {m['spark']}, driver memory {m['driver_memory']}" for m in metas) + "\n")
    return "".join(parts)


def make_charts(results: List[Dict[str, Any]], out: str, name: str) -> List[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = summarize(merge_records(results))
    shapes = [s for s in ("rowwise", "agg", "join_agg") if any(k[1] == s for k in full)]
    paths = []
    styles = {"replay": "o-", "hand_merge": "s--", "rebuild": "^-", "incremental": "v:",
              "noop": "x-."}
    # One time-vs-fraction chart per scale and distribution (uniform keeps its old file name).
    for dist, scale in sorted({(k[2], k[0]) for k in full},
                              key=lambda t: (_dist_order(t[0]), t[1])):
        summary = of_distribution(full, dist)
        suffix, label = ("", "") if dist == "uniform" else (f"_{dist}", f", {dist} changes")
        fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.6), squeeze=False)
        for ax, shape in zip(axes[0], shapes):
            for method, style in styles.items():
                pts = sorted((k[2], c["seconds"], c["correct"]) for k, c in summary.items()
                             if k[0] == scale and k[1] == shape and k[3] == method)
                if not pts:
                    continue
                xs = [p[0] * 100 for p in pts]
                ax.plot(xs, [p[1] for p in pts], style, label=method, markersize=5)
                wrong = [(x, p[1]) for x, p in zip(xs, pts) if not p[2]]
                if wrong:
                    ax.scatter(*zip(*wrong), s=90, facecolors="none", edgecolors="red",
                               label=f"{method} wrong")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{shape}, {scale:,} fact rows{label}", fontsize=9)
            ax.set_xlabel("changed rows, % of the fact table")
            ax.set_ylabel("seconds per refresh")
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        paths.append(_save(plt, fig, os.path.join(
            out, f"{name}_time_vs_fraction_{scale}{suffix}.png")))

    # Time vs table size: uniform changes only (the worst case).
    summary = of_distribution(full, "uniform")
    pts = defaultdict(list)
    for (scale, shape, _, method), c in summary.items():
        if c["changes"] == FIXED_CHANGE and method in ("replay", "rebuild", "incremental",
                                                        "hand_merge"):
            pts[(shape, method)].append((scale, c["seconds"]))
    if pts:
        fig, ax = plt.subplots(figsize=(6, 4))
        colors = {"replay": "C0", "hand_merge": "C1", "rebuild": "C2", "incremental": "C3"}
        lines = {"rowwise": "-", "agg": "--", "join_agg": ":"}
        markers = {"rowwise": "o", "agg": "s", "join_agg": "^"}
        for (shape, method), p in sorted(pts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            p.sort()
            ax.plot([x for x, _ in p], [y for _, y in p], color=colors.get(method, "C4"),
                    linestyle=lines.get(shape, "-"), marker=markers.get(shape, "o"),
                    label=f"{method} / {shape}", markersize=5)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("fact table rows")
        ax.set_ylabel("seconds per refresh")
        ax.set_title(f"time vs table size at {FIXED_CHANGE:,} changed rows", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        paths.append(_save(plt, fig, os.path.join(out, f"{name}_time_vs_size.png")))
    return paths


def _save(plt: Any, fig: Any, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def write_report(results: List[Dict[str, Any]], out: str, name: str, charts: bool = True) -> str:
    text = render(results)
    os.makedirs(out, exist_ok=True)
    if charts:
        try:
            made = make_charts(results, out, name)
            text += "\nCharts: " + ", ".join(os.path.basename(p) for p in made) + "\n"
        except ImportError:
            text += "\n(matplotlib not installed: no charts; `pip install '.[bench]'`)\n"
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text)
    return text


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("results", nargs="+")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--name", default="combined")
    p.add_argument("--no-charts", action="store_true")
    a = p.parse_args(argv)
    results = []
    for path in a.results:
        with open(path) as f:
            results.append(json.load(f))
    print(write_report(results, a.out, a.name, charts=not a.no_charts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
