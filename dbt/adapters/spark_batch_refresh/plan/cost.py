"""Choosing how a refresh writes by estimated cost (pure: no I/O, unit-tested without Spark).

A refresh that has something to do can replay the change (when the model allows it), recompute
the model and merge the difference (`full`), or recompute it and rewrite the target in one commit
(`overwrite`, what dbt's `table` costs). Which is cheapest depends on the model, the table sizes
and the change, so `refresh_mode='auto'` estimates each from two inputs:

* the change's size in rows, summed from the moved upstreams' commit metrics (rows, not files:
  a one-row delete is one row however large its file);
* this model's own past refreshes: the seconds each strategy took and the rows it handled. They
  ride in the target's commit metadata (`CostMemory`), so planning reads nothing extra: each
  refresh's commit carries the memory its plan used, plus the previous refresh's measured time.

Before a model has measured a strategy, a calibrated default stands in (the constants below,
measured on the benchmark machine, bench/README.md). A wrong estimate corrects itself: the next
plan uses the measurement of the refresh it led to.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.spark_batch_refresh.plan.strategy import BACKFILL, FULL, OVERWRITE, REPLAY

# Defaults until the model has measured its own refreshes (bench/README.md, "strategies"):
# a replay's fixed floor (histories, staging, key check, one commit) and its cost per change row;
# an overwrite against the backfill it follows, counted from the backfill's staging on (the
# backfill also caches and checks the rows; RefreshCommit.memory_after);
# a full recompute merged as a difference against an overwrite (the same recompute plus a MERGE
# over the whole target).
REPLAY_FLOOR_S = 3.0
REPLAY_ROW_S = 2.0e-5
# A replay of inserts alone written as one INSERT with its key checks inline (executor
# `_inline_write`): no staging, no separate check. Bench (session 36, row-wise, 100k and 1M
# rows): 0.3-0.43 s for 0.1% and 10% appended. Its measurements are kept apart (INSERTS) so
# that they do not lower the estimate of a replay of updates, nor the other way round.
INSERTS = "replay_inserts"
INSERTS_FLOOR_S = 0.4
INSERTS_ROW_S = 1.0e-6
# An affected-key replay runs one key query per moved scan of the model (two for a window read
# by whole partitions), each joining change rows to the other upstreams; the floor above holds
# one. TPC-H at SF 0.1 (bench/README.md, "TPC-H"): replays of 6 and 10 key queries took 11.1 s
# and 17.9 s, about 1.6 s per query beyond the first (when a moved scan took two queries).
KEY_QUERY_S = 1.5
# Such a query beyond the first reads upstream tables (other sides of a join, or a window's
# whole partitions at the old and the new versions): a share of the model's own scan, priced
# by its measured rebuild. bench `report_part_keys` (a rank partitioned by k, two key queries):
# 8.6 s against a 1.8 s overwrite at 1M rows, 23.8 s against 5.2 s at 10M.
KEY_QUERY_SCAN_SHARE = 0.5
# The overwrite guess errs low on purpose: too low costs one overwrite, which then is measured;
# too high kept a model on a slower replay for good (bench, 10M-row row-wise model: an 11.5 s
# backfill, which caches and key-checks every row, priced the overwrite at 5.8 s over measured
# replays of 4.4-5.6 s, while the overwrite took 2.4-2.8 s). Measured overwrites against the
# backfill before them: 0.1x (100k rows, cold JVM), 0.25x (10M row-wise), 0.4-0.7x (1M),
# 0.65-0.7x (10M dedup window and join + aggregate, whose compute outweighs their output).
OVERWRITE_PER_BACKFILL = 0.25
FULL_PER_OVERWRITE = 2.5
# Samples kept per strategy: enough to fit a floor and a per-row cost, few enough that an old
# table size is forgotten.
KEEP = 4
# A choice only moves off a measured replay when the other is measured clearly cheaper:
# measurements of a few seconds are noisy, and a replay keeps the target's change feed small
# for its readers.
MARGIN = 1.15
# No margin where either side is a guess: an overwrite this model has never made, priced
# from its backfill (the margin kept a measured replay of 4.2 s over a 3.8 s guess, the
# backfill of the first model in a cold JVM, whose overwrite then took 0.8 s: bench, 100k-row
# aggregate), or a replay it has never made, priced by the defaults (the margin picked a 3.2 s
# default replay over a measured 3.0 s overwrite; the replay took 3.9 s, the overwrite 2.3 s:
# bench, 10M-row row-wise model, 10,000 keys spread over every file). Trying the cheaper
# guess once settles it (`_margin`).
# A strategy that lost is run (and measured) again after RETRY_AFTER measured refreshes of
# the others per sample it has (`retry_after`: a re-try that loses again waits longer) when
# its estimate is within RETRY_WITHIN of the chosen one: a measurement only
# corrects an estimate that is acted on, so without this a loser priced too high (measured
# under other changes, or a default) stays unchosen for good.
# Estimates know a change's rows, not how it lies in the target: a 10M-row row-wise model's
# replay of 10,000 keys spread over every file took 4.6 s, then priced every later replay of
# 10,000 keys, though those of the newest ids took 2.3 s and of appended ids 1.4 s, under an
# overwrite of 3.2-3.6 s (bench, issue #33's grid; the upstream's own commit metrics cannot
# tell: its MERGEs rewrote both of its two files whichever ids they touched). A re-try costs
# at most RETRY_WITHIN once in RETRY_AFTER + 1 refreshes at first, once in
# RETRY_AFTER * KEEP + 1 for a strategy that kept losing.
RETRY_AFTER = 3
RETRY_WITHIN = 1.5
# A loser whose estimate rests on one measurement is re-tried within a wider bound: a first
# measurement can be a cold one (bench, 1M-row row-wise model, a busy machine: its first
# replay of inserts took 1.6 s, later ones 0.4-0.7 s, and at 1.7-1.9x the 0.9-1.0 s overwrite
# it was never run again). A second measurement that is as slow narrows it to RETRY_WITHIN.
RETRY_WITHIN_ONCE = 2.5

SINCE_KEY = "_since"
# The strategies `choose` prices: each has an age, measured or not.
CANDIDATES = (REPLAY, OVERWRITE, FULL)

# A candidate's `basis`: how its estimate was made.
FROM_BACKFILL = "from its backfill"
MEASURED = "measured"
DEFAULT = "default"


@dataclass(frozen=True)
class Sample:
    """One measured refresh: its seconds and the rows it handled (change rows for a replay,
    output rows for a rebuild)."""

    seconds: float
    rows: Optional[int]


@dataclass(frozen=True)
class CostMemory:
    """The model's recent measured refreshes, per strategy, newest last."""

    samples: Mapping[str, Tuple[Sample, ...]] = field(default_factory=dict)
    # measured refreshes of other strategies since each candidate strategy's newest sample
    since: Mapping[str, int] = field(default_factory=dict)

    def add(self, strategy: str, sample: Sample) -> "CostMemory":
        kept = (tuple(self.samples.get(strategy, ())) + (sample,))[-KEEP:]
        # the strategy just measured has age 0: absent, as in memory recorded before ages were
        since = {s: self.age(s) + 1 for s in CANDIDATES if s != strategy}
        return CostMemory({**self.samples, strategy: kept}, since)

    def of(self, strategy: str) -> Tuple[Sample, ...]:
        return tuple(self.samples.get(strategy, ()))

    def age(self, strategy: str) -> int:
        """Measured refreshes since `strategy` was last measured, or since the memory began if
        it never was (0 for memory recorded before this was counted)."""
        return int(self.since.get(strategy, 0))

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {s: [[round(x.seconds, 3), x.rows] for x in xs]
                               for s, xs in sorted(self.samples.items())}
        ages = dict(sorted(self.since.items()))
        if ages:
            # A reader that predates it skips this entry as a malformed strategy.
            out[SINCE_KEY] = ages
        return out

    @staticmethod
    def from_json(data: Any) -> "CostMemory":
        if not isinstance(data, Mapping):
            return CostMemory()
        samples: Dict[str, Tuple[Sample, ...]] = {}
        since: Dict[str, int] = {}
        ages = data.get(SINCE_KEY)
        if isinstance(ages, Mapping):
            for strategy, n in ages.items():
                try:
                    since[str(strategy)] = max(0, int(n))
                except (TypeError, ValueError):
                    continue
        for strategy, xs in data.items():
            if strategy == SINCE_KEY:
                continue
            try:
                samples[str(strategy)] = tuple(
                    Sample(float(s), None if r is None else int(r)) for s, r in xs)[-KEEP:]
            except (TypeError, ValueError):
                continue
        return CostMemory(samples, {s: n for s, n in since.items() if n and s in CANDIDATES})


def remember(memory: CostMemory, action: str, seconds: Optional[float],
             rows: Optional[int]) -> CostMemory:
    """The memory after a finished refresh of `action` that took `seconds` (None: not measured,
    e.g. a refresh resumed after a crash, whose time includes the pause)."""
    if seconds is None or seconds <= 0 or action not in (REPLAY, INSERTS, FULL, OVERWRITE,
                                                          BACKFILL):
        return memory
    return memory.add(action, Sample(seconds, rows))


@dataclass(frozen=True)
class Candidate:
    """One way the refresh could write, with its estimate and why it was not chosen."""

    strategy: str
    seconds: Optional[float]
    # MEASURED (this model's refreshes of this strategy), FROM_BACKFILL (an overwrite scaled
    # from the model's backfill) or DEFAULT (calibrated constants)
    basis: str
    rejected: Optional[str] = None
    # What the estimate prices beyond the strategy itself (a sidecar rebuilt first).
    note: Optional[str] = None

    def describe(self) -> str:
        est = "" if self.seconds is None else f" ~{self.seconds:.1f}s {self.basis}"
        note = f" [{self.note}]" if self.note else ""
        return f"{self.strategy}{est}{note}" + (f" ({self.rejected})" if self.rejected else "")


def replay_estimate(memory: CostMemory, change_rows: Optional[int],
                    key_queries: int = 1, scan_s: Optional[float] = None,
                    inserts: bool = False) -> Tuple[float, str]:
    """Seconds of a replay of `change_rows`: a floor plus a cost per row, both fitted to the
    model's measured replays (least squares over the kept samples) where it has some; before
    that, the default floor plus, per key query beyond the first, `KEY_QUERY_S` and a share
    of `scan_s` (the model's estimated rebuild, when known). `inserts`: a replay of inserts
    alone by one checked INSERT, priced from its own samples and defaults (INSERTS)."""
    rows = change_rows or 0
    xs = [x for x in memory.of(INSERTS if inserts else REPLAY) if x.rows is not None]
    if not xs and inserts:
        return INSERTS_FLOOR_S + INSERTS_ROW_S * rows, DEFAULT
    if not xs:
        per_query = KEY_QUERY_S + KEY_QUERY_SCAN_SHARE * (scan_s or 0.0)
        extra = per_query * max(0, key_queries - 1)
        return REPLAY_FLOOR_S + extra + REPLAY_ROW_S * rows, DEFAULT
    per_row = INSERTS_ROW_S if inserts else REPLAY_ROW_S
    if len({x.rows for x in xs}) > 1:
        n = len(xs)
        mean_r = sum(x.rows or 0 for x in xs) / n
        mean_s = sum(x.seconds for x in xs) / n
        var = sum(((x.rows or 0) - mean_r) ** 2 for x in xs)
        cov = sum(((x.rows or 0) - mean_r) * (x.seconds - mean_s) for x in xs)
        per_row = max(0.0, cov / var)
    floor = max(0.0, min(x.seconds - per_row * (x.rows or 0) for x in xs[-2:]))
    return floor + per_row * rows, MEASURED


def rebuild_estimate(memory: CostMemory) -> Optional[Tuple[float, str]]:
    """Seconds of an overwrite: the newest measured one, else the newest backfill scaled."""
    if memory.of(OVERWRITE):
        return memory.of(OVERWRITE)[-1].seconds, MEASURED
    if memory.of(BACKFILL):
        return memory.of(BACKFILL)[-1].seconds * OVERWRITE_PER_BACKFILL, FROM_BACKFILL
    return None


def full_estimate(memory: CostMemory, overwrite: Optional[float]) -> Optional[Tuple[float, str]]:
    if memory.of(FULL):
        return memory.of(FULL)[-1].seconds, MEASURED
    if overwrite is None:
        return None
    return overwrite * FULL_PER_OVERWRITE, DEFAULT


@dataclass(frozen=True)
class Choice:
    strategy: str
    candidates: Tuple[Candidate, ...]
    estimate_s: Optional[float]

    def describe(self) -> str:
        return ", ".join(c.describe() + (" (chosen)" if c.strategy == self.strategy else "")
                         for c in self.candidates)


def choose(memory: CostMemory, change_rows: Optional[int],
           replay_blocker: Optional[str], key_queries: int = 1,
           inserts: bool = False, sidecar_behind: bool = False) -> Choice:
    """The cheapest way to write this refresh, with every candidate's estimate; or, now and
    then, a close loser run again to measure it (`_retry`).

    `replay_blocker` is why the model cannot replay (None: it can); `key_queries` how many
    affected-key queries its replay would run. Without any measured rebuild (a target built
    before this was recorded) a replayable model replays, and the refresh it leads to is
    measured. `inserts`: the replay would be one checked INSERT of inserts alone
    (replay_estimate). `sidecar_behind`: the model keeps a sidecar that the target's last
    refresh left behind (an overwrite), so a replay rebuilds it first (`_rebuilt_replay`)."""
    over = rebuild_estimate(memory)
    full = full_estimate(memory, over[0] if over else None)
    cands: List[Candidate] = []
    steady: Optional[Tuple[float, str]] = None
    if replay_blocker is None:
        seconds, basis = replay_estimate(memory, change_rows, key_queries,
                                         over[0] if over else None, inserts)
        if sidecar_behind and full is not None:
            steady = seconds, basis
            cands.append(Candidate(REPLAY, full[0], full[1], note=(
                f"its sidecar rebuilt first, priced as a full recompute; ~{seconds:.1f}s "
                f"{basis} once rebuilt")))
        else:
            cands.append(Candidate(REPLAY, seconds, basis))
    else:
        cands.append(Candidate(REPLAY, None, "", rejected=replay_blocker))
    cands.append(Candidate(OVERWRITE, over[0] if over else None, over[1] if over else "",
                           None if over else "no measured rebuild of this model yet"))
    cands.append(Candidate(FULL, full[0] if full else None, full[1] if full else ""))
    cheapest = _best(cands)
    if steady is not None and _pays_back(steady, over):
        return _rebuilt_replay(cands, steady, over)
    retried = _retry(cands, cheapest, memory, inserts)
    if retried is None:
        return Choice(cheapest.strategy, tuple(_rejections(cands, cheapest)), cheapest.seconds)
    why = (f"{retried.strategy} tried again: not run for {memory.age(retried.strategy)} "
           f"refreshes, estimate within {_retry_bound(retried, cheapest):g}x")
    shown = [replace(c, rejected=None) if c.strategy == retried.strategy
             else replace(c, rejected=why) if c.strategy == cheapest.strategy else c
             for c in _rejections(cands, cheapest)]
    return Choice(retried.strategy, tuple(shown), retried.seconds)


def _pays_back(steady: Tuple[float, str], over: Optional[Tuple[float, str]]) -> bool:
    """Whether a replay that first rebuilds the sidecar an overwrite left behind is worth its
    price now: its rebuild is paid once, and from the next refresh on the model replays at
    its measured `steady` cost, when that is clearly (MARGIN) below an overwrite. A replay
    this model has never measured does not count: TPC-H SF 1 (session 38) replayed Q13 at a
    3.1 s default against a 3.4 s overwrite; the rebuild took 7.8 s, the replays after it more
    than the overwrite."""
    if over is None or steady[1] != MEASURED:
        return False
    return steady[0] * MARGIN < over[0]


def _rebuilt_replay(cands: Sequence[Candidate], steady: Tuple[float, str],
                    over: Optional[Tuple[float, str]]) -> Choice:
    """The replay chosen for what it costs from the next refresh on (`_pays_back`)."""
    assert over is not None
    why = (f"more than replays once the sidecar is rebuilt: ~{steady[0]:.1f}s each against "
           f"~{over[0]:.1f}s")
    shown = [c if c.strategy == REPLAY or c.rejected is not None
             else replace(c, rejected="no estimate" if c.seconds is None else why)
             for c in cands]
    replay = next(c for c in cands if c.strategy == REPLAY)
    return Choice(REPLAY, tuple(shown), replay.seconds)


def _best(cands: Sequence[Candidate]) -> Candidate:
    usable = [c for c in cands if c.rejected is None]
    replay = next((c for c in usable if c.strategy == REPLAY), None)
    priced = [c for c in usable if c.seconds is not None]
    if replay is not None and replay.seconds is not None:
        cheaper = [c for c in priced
                   if c.seconds * _margin(c, replay) < replay.seconds]  # type: ignore[operator]
        return min(cheaper, key=lambda c: c.seconds or 0.0) if cheaper else replay
    if priced:
        return min(priced, key=lambda c: c.seconds or 0.0)
    # Nothing priced and no replay: recompute and merge the difference, as before any
    # measurement existed.
    return next(c for c in cands if c.strategy == FULL)


def retry_after(memory: CostMemory, strategy: str, inserts: bool = False) -> int:
    """Refreshes a losing `strategy` waits before it runs again: RETRY_AFTER per sample kept
    (at least one), so each re-try that loses again makes the next wait longer, up to
    RETRY_AFTER * KEEP."""
    return RETRY_AFTER * max(1, len(memory.of(_sampled(strategy, inserts))))


def _sampled(strategy: str, inserts: bool) -> str:
    """Whose samples price `strategy`: a replay of inserts alone has its own (INSERTS)."""
    return INSERTS if inserts and strategy == REPLAY else strategy


def _retry(cands: Sequence[Candidate], best: Candidate, memory: CostMemory,
           inserts: bool = False) -> Optional[Candidate]:
    """A candidate that lost to `best` and has not run for `retry_after` measured refreshes,
    when its estimate is within RETRY_WITHIN of `best`'s (RETRY_WITHIN_ONCE when it rests on
    one measurement; the stalest first). A guess counts as an estimate: a default replay that
    lost narrowly to a measured overwrite is tried once too, and measured."""
    if best.seconds is None:
        return None
    due = [c for c in cands
           if c is not best and c.rejected is None and c.seconds is not None
           and memory.age(c.strategy) >= retry_after(memory, c.strategy, inserts)
           and c.seconds <= _retry_within(c, memory, inserts) * best.seconds]
    return max(due, key=lambda c: memory.age(c.strategy)) if due else None


def _retry_within(c: Candidate, memory: CostMemory, inserts: bool) -> float:
    once = c.basis == MEASURED and len(memory.of(_sampled(c.strategy, inserts))) == 1
    return RETRY_WITHIN_ONCE if once else RETRY_WITHIN


def _retry_bound(retried: Candidate, best: Candidate) -> float:
    """The bound a re-tried estimate is within, as the reason states it: the narrower one
    where it holds."""
    assert retried.seconds is not None and best.seconds is not None
    return RETRY_WITHIN if retried.seconds <= RETRY_WITHIN * best.seconds else RETRY_WITHIN_ONCE


def _margin(candidate: Candidate, replay: Candidate) -> float:
    """How much cheaper than `replay` `candidate` must be estimated to be chosen over it: by
    MARGIN only when both estimates are measurements."""
    return MARGIN if candidate.basis == MEASURED and replay.basis == MEASURED else 1.0


def _rejections(cands: Iterable[Candidate], best: Candidate) -> List[Candidate]:
    out = []
    for c in cands:
        if c is best or c.rejected is not None:
            out.append(c)
        elif c.seconds is None:
            out.append(replace(c, rejected="no estimate"))
        elif best.seconds is not None and c.strategy == REPLAY and _margin(best, c) != 1.0:
            out.append(replace(c, rejected=f"more than {_margin(best, c):g}x {best.strategy}"))
        else:
            out.append(replace(c, rejected=f"more than {best.strategy}"))
    return out


# Commit metrics of the operations a change feed reflects (DESCRIBE HISTORY operationMetrics):
# the rows each adds to the change feed. Maintenance adds none.
_ROW_METRICS = {
    "MERGE": ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"),
    "UPDATE": ("numUpdatedRows",),
    "DELETE": ("numDeletedRows",),
}
_NO_ROWS = ("OPTIMIZE", "VACUUM", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES", "ANALYZE",
            "CHANGE COLUMN", "SET COLUMN COMMENT", "UPGRADE PROTOCOL", "ADD COLUMNS", "REORG")


def commit_rows(operation: str, metrics: Mapping[str, str],
                parameters: Optional[Mapping[str, str]] = None) -> Optional[int]:
    """Change rows one upstream commit adds to its change feed, from its metrics; None when
    they do not say (an unknown operation, a truncate)."""
    op = operation.upper()
    if any(op.startswith(m) for m in _NO_ROWS):
        return 0

    def number(name: str) -> Optional[int]:
        try:
            return int(metrics[name])
        except (KeyError, TypeError, ValueError):
            return None
    for prefix, names in _ROW_METRICS.items():
        if op.startswith(prefix):
            values = [number(n) for n in names]
            return None if all(v is None for v in values) else sum(v or 0 for v in values)
    written = number("numOutputRows")
    if written is None:
        return None
    # A WRITE that deletes by key (REPLACE WHERE, REPLACE USING) counts the rows it kept of
    # the files it touched as output rows and as copied rows, deletion vectors or not: the
    # change feed holds neither (a 3-row REPLACE WHERE of a 1,000-row table: 1,001 output).
    written -= number("numCopiedRows") or 0
    mode = str((parameters or {}).get("mode", "")).lower()
    replaced = "REPLACE" in op or "overwrite" in mode or "predicate" in (parameters or {})
    deleted = number("numDeletedRows")
    if replaced and deleted is None:
        # An overwrite's feed deletes the rows it replaces: about as many as it writes.
        deleted = written
    return written + (deleted or 0)


def window_rows(commits: Sequence[Optional[int]], total: int) -> Optional[int]:
    """Change rows of a window of `total` commits of which `commits` were read (None: a
    commit whose metrics do not say): the unread and unknown ones at the known average."""
    known = [c for c in commits if c is not None]
    if not known:
        return None
    return int(round(sum(known) * total / len(known)))
