"""Results -> a Markdown report (tables, targets, statement trace breakdown) and PNG charts.

The cells and their formatting live in bench/summary.py, the targets in bench/targets.py; this
module lays them out. Everything but `make_charts()` is pure (no Spark, no matplotlib) and
unit-tested.

    python bench/report.py bench/results/a.json [b.json ...] --out bench/results --name combined
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

# Run as a script (`python bench/report.py`) or loaded from its path (the unit tests), the
# `bench` package is not importable without the repository root on the path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Imported here also so that callers keep finding them as `report.<name>` (bench/run.py, tests).
from bench.summary import (FIXED_CHANGE, METHODS, Key, _diff, _dist_order, _n,  # noqa: E402
                           _pct, _r, _ratio, _s, distribution, fixed_costs, median,
                           merge_records, of_distribution, summarize)
from bench.models import SHAPES  # noqa: E402
from bench.targets import (FASTEST_LIMIT, NEAR_FASTEST, REBUILD_LIMIT,  # noqa: E402
                           strategy_ratios, strategy_targets, targets)


def _cells(summary: Dict[Key, Dict[str, Any]],
           methods: Tuple[str, ...]) -> List[Tuple[int, str, str, float]]:
    """The (scale, shape, distribution, fraction) cells measured by any of `methods`, in table
    order."""
    return sorted({k[:4] for k in summary if k[4] in methods},
                  key=lambda t: (t[0], SHAPES.index(t[1]) if t[1] in SHAPES else 9,
                                 _dist_order(t[2]), t[3]))


def _shown(c: Optional[Dict[str, Any]]) -> str:
    """A cell's median seconds, marked when any repetition was wrong."""
    if not c:
        return "-"
    return _s(c["seconds"]) + ("" if c["correct"] else " **wrong**")


def _row_cells(summary: Dict[Key, Dict[str, Any]], rows: Sequence[Tuple[Any, ...]],
               methods: Sequence[str]) -> Iterator[Tuple[Tuple[Any, ...], Dict[str, Any], Dict[str, Any]]]:
    """Each table row's cells by method, and their seconds (None where the run has none)."""
    for row in rows:
        cell = {m: summary.get((*row, m)) for m in methods}
        yield row, cell, {m: (c["seconds"] if c else None) for m, c in cell.items()}


def main_table(summary: Dict[Key, Dict[str, Any]]) -> str:
    rows = _cells(summary, METHODS)
    head = ("| fact rows | shape | distribution | change | replay s | hand MERGE s | rebuild s "
            "| incremental s | replay / hand | replay / rebuild | replay statements / commits |\n"
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for (scale, shape, dist, frac), cell, secs in _row_cells(summary, rows, METHODS):
        changes = next(c["changes"] for c in cell.values() if c)

        def show(m: str) -> str:
            return _shown(cell[m])

        br = cell["replay"]
        sw = f"{_n(br['statements'])} / {_n(br['writes'])}" if br else "-"
        lines.append(
            f"| {scale:,} | {shape} | {dist} | {_pct(frac)} ({changes:,} rows) | {show('replay')} "
            f"| {show('hand_merge')} | {show('rebuild')} | {show('incremental')} "
            f"| {_r(_ratio(secs['replay'], secs['hand_merge']))} "
            f"| {_r(_ratio(secs['replay'], secs['rebuild']))} | {sw} |"
        )
    return head + "\n".join(lines) + "\n"


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


def replay_breakdown(traces: List[Dict[str, Any]],
                     records: Optional[List[Dict[str, Any]]] = None) -> str:
    """Median seconds per statement kind in a refresh (from the adapter's statement trace), per
    scale, change distribution, model and action (replay; skip and no-op of the row-wise models)."""
    Group = Tuple[int, str, str, str]  # scale, distribution, model, action
    kinds: Dict[Group, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
    counts: Dict[Group, Dict[str, List[int]]] = defaultdict(lambda: defaultdict(list))
    for t in traces:
        action = t.get("action")
        if action not in ("replay", "overwrite") and not (
                action in ("skip", "noop") and "rowwise" in t["model"]):
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
    method_of = {"skip": "gated_skip", "noop": "noop"}
    of_prefix = {"br": "replay", "au": "auto", "ow": "overwrite", "fu": "full"}
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
        method = method_of.get(action) or of_prefix.get(t["model"].split("_", 1)[0], "replay")
        total = wall.get((t["scale"], distribution(t), t["fraction"], t["rep"], method, shape))
        if total is not None:
            inside = sum(secs for secs, _ in t["statements"])
            kinds[group]["(outside SQL: dbt, Jinja, planning)"].append(max(0.0, total - inside))
            counts[group]["(outside SQL: dbt, Jinja, planning)"].append(0)
    if not kinds:
        return ""
    order = {"replay": 0, "overwrite": 1, "skip": 2, "noop": 3}
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
    (r"^insert into \S+ replace where", "target REPLACE WHERE (write)"),
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


STRATEGIES = ("auto", "replay", "overwrite", "full", "rebuild")


def strategies_table(summary: Dict[Key, Dict[str, Any]]) -> str:
    """Per cell: `auto` (the strategy it chose) against every forced strategy and the rebuild
    (`bench/run.py --strategies`); empty when the run had no `auto` models."""
    rows = _cells(summary, ("auto",))
    if not rows:
        return ""
    head = ("| fact rows | shape | distribution | change | auto s (chose) | replay s | overwrite s "
            "| full s | rebuild s | auto / fastest forced | auto / rebuild |\n"
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for (scale, shape, dist, frac), cell, secs in _row_cells(summary, rows, STRATEGIES):
        forced = [secs[m] for m in ("replay", "overwrite", "full") if secs[m] is not None]

        def show(m: str) -> str:
            return _shown(cell[m])
        auto = cell["auto"] or {}
        lines.append(
            f"| {scale:,} | {shape} | {dist} | {_pct(frac)} | {show('auto')} "
            f"({', '.join(sorted(set(auto.get('actions') or []))) or '?'}) | {show('replay')} "
            f"| {show('overwrite')} | {show('full')} | {show('rebuild')} "
            f"| {_r(_ratio(secs['auto'], min(forced) if forced else None))} "
            f"| {_r(_ratio(secs['auto'], secs['rebuild']))} |")
    return head + "\n".join(lines) + "\n"


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
    chosen = strategies_table(summary)
    if chosen:
        parts += ["\n### Strategies: `auto` against each forced strategy (median seconds)\n\n",
                  chosen, "\n", strategy_targets(summary)]
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
    shapes = [s for s in SHAPES if any(k[1] == s for k in full)]
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

    ratios = strategy_ratios(full)
    if ratios:
        paths.append(_strategies_chart(plt, ratios, os.path.join(out, f"{name}_strategies.png")))

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
        lines = {"rowwise": "-", "agg": "--", "join_agg": ":", "dedup": "-."}
        markers = {"rowwise": "o", "agg": "s", "join_agg": "^", "dedup": "D"}
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


def _strategies_chart(plt: Any, ratios: Dict[tuple, tuple], path: str) -> str:
    """Issue #33's cells: `auto` / fastest forced strategy and `auto` / rebuild, one bar pair
    per cell, with the targets as lines."""
    keys = list(ratios)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.32 * len(keys) + 2), 4.2))
    xs = range(len(keys))
    ax.bar([x - 0.2 for x in xs], [ratios[k][0] or 0 for k in keys], 0.4,
           label="auto / fastest forced", color="C0")
    ax.bar([x + 0.2 for x in xs], [ratios[k][1] or 0 for k in keys], 0.4,
           label="auto / rebuild (table)", color="C2")
    for limit, style in ((NEAR_FASTEST, ":"), (FASTEST_LIMIT, "--"), (REBUILD_LIMIT, "-.")):
        ax.axhline(limit, color="grey", linestyle=style, linewidth=0.8)
        ax.annotate(f"{limit}x", (len(keys) - 0.5, limit), fontsize=7, va="bottom", ha="right")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{_short(s)} {shape} {dist} {_pct(f)}" for s, shape, dist, f in keys],
                       rotation=90, fontsize=6)
    ax.set_ylabel("ratio (lower is better)")
    ax.set_title("auto against the forced strategies and the table build", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(plt, fig, path)


def _short(scale: int) -> str:
    return f"{scale // 1_000_000}M" if scale >= 1_000_000 else f"{scale // 1000}k"


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
