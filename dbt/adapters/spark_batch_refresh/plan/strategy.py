"""The one name of how a refresh computes its rows and how it writes them (pure: no I/O).

Planning decides the action (skip, noop, backfill, replay, full, overwrite; planner.py and
cost.py) and, for a replay, its rule (`replay_rule`). Staging computes rows by the strategy,
the apply writes them in the form `choose_write` names, and `explain`, the log line,
`adapter_response`, the commit metadata and the history table report the same value.
"""

from __future__ import annotations

from enum import Enum
from typing import Collection, Optional, Sequence, Tuple

from dbt.adapters.spark_batch_refresh.plan.config import BatchRefreshConfig
from dbt.adapters.spark_batch_refresh.sql.analysis import Analysis
from dbt.adapters.spark_batch_refresh.sql.rewrite import groupable_type

# What one run of a model does (run_results' `action`).
SKIP = "skip"  # gate closed: upstreams moved, but not far enough yet
NOOP = "noop"  # nothing moved upstream
BACKFILL = "backfill"
REPLAY = "replay"  # from the change feed, by one of the replay rules below
FULL = "full"  # recompute everything at the pinned versions, merge the difference
OVERWRITE = "overwrite"  # recompute everything at the pinned versions, rewrite in one commit
WRITING_ACTIONS = (BACKFILL, REPLAY, FULL, OVERWRITE)


class _Named(str, Enum):
    """A str enum that prints, formats and hashes as its value (on Python 3.10 as well)."""

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Strategy(_Named):
    NOOP = NOOP
    SKIP = SKIP
    BACKFILL = BACKFILL
    ROWWISE = "rowwise"  # the model over the change rows alone, netted by key
    DELTA_JOIN = "delta_join"  # per moved upstream: its change rows joined to the others, pinned
    DELTA_AGGREGATE = "delta_aggregate"  # old group state plus signed change rows (a sidecar)
    AFFECTED_KEYS = "affected_keys"  # the model at the pinned versions, for the affected keys
    # A delta-kept intermediate aggregate (a sidecar), the rest of the model recomputed over it
    INTERMEDIATE = "intermediate"
    APPEND = "append"  # keyless row-wise model: the model over the inserted rows, appended
    FULL = FULL
    OVERWRITE = OVERWRITE

    @property
    def action(self) -> str:
        return REPLAY if self in REPLAY_RULES else self.value

    @property
    def staged_from(self) -> Optional[str]:
        """What a keyed replay staged its rows from (adapter_response.staged_from)."""
        return _STAGED_FROM.get(self)

    @staticmethod
    def of_action(action: str) -> "Strategy":
        """The strategy of a non-replay action; a replay without its rule is the general one."""
        return Strategy.AFFECTED_KEYS if action == REPLAY else Strategy(action)


REPLAY_RULES = frozenset({Strategy.ROWWISE, Strategy.DELTA_JOIN, Strategy.DELTA_AGGREGATE,
                          Strategy.AFFECTED_KEYS, Strategy.APPEND, Strategy.INTERMEDIATE})
# The rules that stage signed change rows netted by key (sqlgen.staging_from_changes): their
# staging marks the keys that had a row, and its apply guards new keys.
NETTED = frozenset({Strategy.ROWWISE, Strategy.DELTA_JOIN})
_STAGED_FROM = {Strategy.ROWWISE: "changes", Strategy.DELTA_JOIN: "join",
                Strategy.DELTA_AGGREGATE: "aggregate", Strategy.AFFECTED_KEYS: "snapshot",
                Strategy.INTERMEDIATE: "intermediate"}


class Write(_Named):
    """How the staged rows reach the target (one commit, or one per chunk for MERGE)."""

    CREATE = "create"  # CREATE OR REPLACE TABLE ... AS SELECT
    MERGE = "merge"  # MERGE by key
    MERGE_ALL = "merge_all"  # MERGE by key, deleting target rows the staging lacks
    REPLACE_WHERE = "replace_where"  # INSERT INTO ... REPLACE WHERE key IN (literals)
    # INSERT INTO ... REPLACE USING (key): the embedded session's DataFrame write `replaceUsing`
    REPLACE_USING = "replace_using"
    INSERT_OVERWRITE = "insert_overwrite"  # the whole target rewritten
    APPEND = "append"  # INSERT INTO of the model over inserted change rows
    # INSERT INTO of staged rows whose keys are all above the target's key ceiling
    INSERT_NEW = "insert_new"
    # INSERT INTO of the model over inserted change rows, its key checks inline
    INSERT_CHECKED = "insert_checked"
    MARKER = "marker"  # an empty INSERT: nothing changed, the refresh is still recorded


def delta_upkeep(config: BatchRefreshConfig, analysis: Analysis) -> bool:
    """Whether the model replays by delta aggregation: it qualifies and opted in."""
    return analysis.delta is not None and config.aggregate_upkeep == "delta"


def intermediate_upkeep(config: BatchRefreshConfig, analysis: Analysis) -> bool:
    """Whether the model replays over a delta-kept intermediate aggregate: its key walk
    failed, its split qualifies (analysis.intermediate) and it opted in."""
    return analysis.intermediate is not None and config.aggregate_upkeep == "delta"


def keeps_sidecar(config: BatchRefreshConfig, analysis: Analysis) -> bool:
    """Whether the model's replays read a sidecar kept in step with the target."""
    return delta_upkeep(config, analysis) or intermediate_upkeep(config, analysis)


def writes_sidecar(config: BatchRefreshConfig, analysis: Analysis, action: str,
                   fallback: Optional[str]) -> bool:
    """Whether a refresh of `action` keeps the model's sidecar in step (engine/stage.py): any
    but an overwrite, unless it recomputes for a reason other than cost (a forced
    refresh_mode: its plan has a fallback reason)."""
    return keeps_sidecar(config, analysis) and action != OVERWRITE and fallback is None


def writes_direct(strategy: Strategy, config: BatchRefreshConfig) -> bool:
    """Whether a refresh writes the model straight into the target at the pinned versions,
    nothing staged, as dbt's `table` does: an overwrite, and a backfill or full recompute of
    a model with no key to check before the write. (Staging exists for the key checks and
    the key ceiling; a keyless model has neither, and caching its whole output before writing
    it cost a second materialization: bench/README.md, "First builds".) A sidecar the
    refresh keeps is built first and the model read from it (Stager.whole_model)."""
    if strategy is Strategy.OVERWRITE:
        return True
    return strategy in (Strategy.BACKFILL, Strategy.FULL) and not config.unique_key


def backfills_checked(strategy: Strategy, config: BatchRefreshConfig, *,
                      replaces_target: bool) -> bool:
    """Whether a keyed backfill is written straight from the model with its key checks in the
    write's SELECT (sqlgen.backfill_checked), nothing cached: a failed check fails the write
    before its commit, and the refresh then stages and checks as usual, so a bad key gets its
    usual error. Only where the write replaces the target (`replaces_target`: none yet, or
    `--full-refresh` of a Delta one; a rebuild in place merges a difference instead). A
    sidecar is built first and the model read from it, as for writes_direct. Its key
    ceiling, which a staging recorded, the next replay reads back from its commit
    (plan/key_top.py). (At 2M rows the staged backfill cost 3.6x the `table`:
    bench/README.md, "First builds".)"""
    return strategy is Strategy.BACKFILL and bool(config.unique_key) and replaces_target


def sidecar_behind(config: BatchRefreshConfig, analysis: Analysis, last_action: Optional[str],
                   last_fallback: Optional[str]) -> bool:
    """Whether the target's newest refresh left the model's sidecar behind, so the next replay
    rebuilds it first."""
    if last_action is None or not keeps_sidecar(config, analysis):
        return False
    return not writes_sidecar(config, analysis, last_action, last_fallback)


def replay_rule(analysis: Analysis, config: BatchRefreshConfig, moved: Collection[str],
                columns: Optional[Sequence[Tuple[str, str]]] = None) -> Strategy:
    """The replay rule for a run in which `moved` upstreams changed.

    `columns` (the model's output types; None when not yet described) rules out the rules
    that net rows by key where Spark cannot group an output column (maps, variants). Staging
    may still fall back to AFFECTED_KEYS from a delta aggregate whose sidecar does not match
    the target or cannot hold a state exactly (a double sum); it reports what it did.
    """
    if not config.unique_key and analysis.delta is None:
        return Strategy.APPEND
    nets = columns is None or (bool(columns) and all(groupable_type(t) for _, t in columns))
    if nets and analysis.rowwise and len(moved) == 1:
        return Strategy.ROWWISE
    joined = analysis.delta_join
    if nets and joined is not None and config.unique_key and joined.blocker(moved) is None:
        return Strategy.DELTA_JOIN
    if delta_upkeep(config, analysis):
        return Strategy.DELTA_AGGREGATE
    if intermediate_upkeep(config, analysis):
        return Strategy.INTERMEDIATE
    return Strategy.AFFECTED_KEYS


def choose_write(strategy: Strategy, *, keyed: bool, chunks: int, rows: int,
                 replaceable: bool, in_place: bool, partial: bool = False,
                 unseen: bool = False, inline: bool = False, upsert: bool = False) -> Write:
    """The write of a staged refresh. `replaceable`: a changes-only staging REPLACE WHERE can
    take (apply.replaceable); `in_place`: a backfill of a keyed Delta target whose columns
    stay (merged as a difference, so downstream change feeds carry only real changes);
    `partial`: an intermediate staged for its touched partitions only (rows and tombstones);
    `unseen`: a changes-only staging of new rows alone, every key above the target's key
    ceiling (apply.unseen: nothing to match, so a blind INSERT); `inline`: the model over
    inserted change rows with the key checks in the INSERT's SELECT (Staged.inline);
    `upsert`: a changes-only staging of updated and new rows, no tombstone, that the session
    can write with `replaceUsing` (apply.upsertable): it goes before REPLACE WHERE (cheaper,
    no key list, any key) and before the MERGE of a staging too large to list."""
    if strategy is Strategy.BACKFILL:
        return Write.MERGE_ALL if in_place else Write.CREATE
    if strategy is Strategy.OVERWRITE:
        return Write.INSERT_OVERWRITE
    if strategy is Strategy.APPEND:
        return Write.APPEND
    if inline:
        return Write.INSERT_CHECKED
    if not keyed:
        # A global aggregate's replay (its one row) or a keyless full recompute: overwriting
        # keeps the table's identity.
        return Write.INSERT_OVERWRITE
    if strategy is Strategy.INTERMEDIATE and not partial:
        return Write.MERGE_ALL  # the whole model staged: target rows it lacks are deleted
    replays = strategy in REPLAY_RULES
    if replays and rows == 0 and chunks == 1:
        return Write.MARKER
    if replays and unseen and chunks == 1:
        return Write.INSERT_NEW
    if replays and upsert and chunks == 1:
        return Write.REPLACE_USING
    if replays and replaceable:
        return Write.REPLACE_WHERE
    return Write.MERGE_ALL if strategy is Strategy.FULL else Write.MERGE
