"""Typed `batch_refresh` model configs: parsed and validated in one pass, all errors at once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from dbt.adapters.spark_batch_refresh.errors import BatchRefreshUserError
from dbt.adapters.spark_batch_refresh.plan.tested_key import configured_key, tested_key

REFRESH_MODES = ("auto", "incremental", "full", "overwrite")
CHANGE_ACTIONS = ("rebuild", "fail")
# How an aggregate that qualifies for delta upkeep (aggdelta.py) replays. `recompute` (the
# default): its affected groups at the pinned versions (a global aggregate: in full); `delta`:
# old state + signed change rows, with a sidecar. Opt-in because at 10M upstream rows on the
# 2-core bench machine delta upkeep was the slower of the two (bench/README.md).
AGGREGATE_UPKEEP = ("recompute", "delta")
DEFAULT_MERGE_CHUNK_ROWS = 5_000_000
# Every model config parse_config reads: the macros collect exactly these from the node's
# config (adapter.batch_refresh_config_names), so a new config is added here and nowhere else.
CONFIG_NAMES = ("unique_key", "refresh_interval", "refresh_mode", "on_model_change",
                "on_change_feed_gap", "merge_chunk_rows", "lease_timeout", "lease_wait",
                "file_format", "tblproperties", "aggregate_upkeep")
DEFAULT_LEASE_TIMEOUT_S = 3600.0
# Not a config: the keys the tests and constraints of the model and of its upstreams declare,
# as the macros hand them over (tested_key.declared_keys).
DECLARED_KEYS = "_declared_keys"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days)?\s*$", re.I)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> Optional[float]:
    """'90s', '15m', '2h', '1d' or a number of seconds -> seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(value)
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(value)
    unit = (match.group(2) or "s")[0].lower()
    return float(match.group(1)) * _UNIT_SECONDS[unit]


def format_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.1f}m"
    return f"{seconds:.0f}s"


@dataclass(frozen=True)
class BatchRefreshConfig:
    unique_key: Tuple[str, ...] = ()
    refresh_interval_s: Optional[float] = None
    refresh_mode: str = "auto"
    on_model_change: str = "rebuild"
    on_change_feed_gap: str = "rebuild"
    merge_chunk_rows: int = DEFAULT_MERGE_CHUNK_ROWS
    lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S
    # How long a multi-chunk run waits for another run's live lease (0: fail fast).
    lease_wait_s: float = 0.0
    aggregate_upkeep: str = "recompute"
    tblproperties: Mapping[str, str] = field(default_factory=dict)
    # The key the model's tests or constraints declare (tested_key.py): used when neither
    # unique_key nor the query gives one; and its upstreams' keys, which the query's key may
    # pass through. Not result-shaping configs: the rows are the same.
    tested_key: Tuple[str, ...] = ()
    upstream_keys: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    # The unique_key each upstream batch_refresh model configures, which the plugin checks
    # on its writes: a key through it counts as one the query proves (keyinfer.proven_keys).
    upstream_model_keys: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    # Not a config either: set by the executor where the key inferred from the query was found
    # NULL (a NULL group). NULL is then one key value like any other: every match of a key
    # is null-safe (`<=>`), and the writes that cannot match a NULL key are not used.
    nullable_key: bool = False
    # Set by the executor too: the key columns a LEFT JOIN's NULL extension leaves NULL
    # (analysis.Analysis.key_outer). The key is matched null-safely (nullable_key), and a NULL
    # only in the other columns is a NULL key (null_checked).
    outer_key: Tuple[str, ...] = ()

    def null_checked(self) -> Tuple[str, ...]:
        """The key columns whose NULL in an output row is a NULL key (an error, or for a key
        that is not configured a plan again: executor._key_retry): every column of a key not
        matched null-safely, none of a null-safe one, of a key with outer columns the others."""
        if self.outer_key:
            outer = {c.lower() for c in self.outer_key}
            return tuple(k for k in self.unique_key if k.lower() not in outer)
        return () if self.nullable_key else tuple(self.unique_key)

    def result_fingerprint_parts(self) -> Dict[str, Any]:
        """Configs that change what the model's rows are (a change means a rebuild)."""
        return {"unique_key": list(self.unique_key)}


def _key_list(value: Any) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v.strip() for v in value):
        return list(value)
    raise ValueError(value)


def parse_config(model: str, raw: Mapping[str, Any]) -> BatchRefreshConfig:
    """Validate every config of one model; raise one error listing all problems."""
    problems: List[str] = []

    def choice(name: str, allowed: Tuple[str, ...], default: str) -> str:
        value = raw.get(name)
        if value is None:
            return default
        if str(value).lower() not in allowed:
            problems.append(
                f"`{name}` is {value!r}; use one of {', '.join(repr(a) for a in allowed)}."
            )
            return default
        return str(value).lower()

    def duration(name: str, default: Optional[float]) -> Optional[float]:
        value = raw.get(name)
        if value is None:
            return default
        try:
            return parse_duration(value)
        except ValueError:
            problems.append(
                f"`{name}` is {value!r}, which is not a duration; use e.g. '90s', '15m', "
                f"'2h', '1d' or a number of seconds."
            )
            return default

    file_format = raw.get("file_format")
    if file_format is not None and str(file_format).lower() != "delta":
        problems.append(
            f"`file_format` is {file_format!r}, but batch_refresh targets must be Delta tables "
            f"(they replay and publish a change feed); set file_format='delta' or remove it."
        )
    try:
        unique_key = tuple(_key_list(raw.get("unique_key")))
    except ValueError:
        problems.append(
            f"`unique_key` is {raw.get('unique_key')!r}; use a column name or a list of column names."
        )
        unique_key = ()

    chunk_rows = raw.get("merge_chunk_rows")
    if chunk_rows is None:
        merge_chunk_rows = DEFAULT_MERGE_CHUNK_ROWS
    elif isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        problems.append(f"`merge_chunk_rows` is {chunk_rows!r}; use a positive whole number of rows.")
        merge_chunk_rows = DEFAULT_MERGE_CHUNK_ROWS
    else:
        merge_chunk_rows = chunk_rows

    tblproperties = raw.get("tblproperties") or {}
    if not isinstance(tblproperties, Mapping):
        problems.append("`tblproperties` must be a mapping of property name to value.")
        tblproperties = {}
    cdf = str(tblproperties.get("delta.enableChangeDataFeed", "true")).lower()
    if cdf != "true":
        problems.append(
            "`tblproperties` turns delta.enableChangeDataFeed off, but batch_refresh targets "
            "keep their change feed on so downstream models can replay them; remove that property."
        )

    declared = raw.get(DECLARED_KEYS) or {}
    config = BatchRefreshConfig(
        unique_key=unique_key,
        refresh_interval_s=duration("refresh_interval", None),
        refresh_mode=choice("refresh_mode", REFRESH_MODES, "auto"),
        on_model_change=choice("on_model_change", CHANGE_ACTIONS, "rebuild"),
        on_change_feed_gap=choice("on_change_feed_gap", CHANGE_ACTIONS, "rebuild"),
        merge_chunk_rows=merge_chunk_rows,
        lease_timeout_s=duration("lease_timeout", DEFAULT_LEASE_TIMEOUT_S) or DEFAULT_LEASE_TIMEOUT_S,
        lease_wait_s=duration("lease_wait", 0.0) or 0.0,
        aggregate_upkeep=choice("aggregate_upkeep", AGGREGATE_UPKEEP, "recompute"),
        tblproperties={str(k): str(v) for k, v in tblproperties.items()},
        tested_key=tested_key(declared.get("model") or ()),
        upstream_keys={r: k for r, k in ((r, tested_key(records)) for r, records in (
            declared.get("upstreams") or {}).items()) if k},
        upstream_model_keys={r: k for r, k in ((r, configured_key(records)) for r, records in (
            declared.get("upstreams") or {}).items()) if k},
    )
    if problems:
        raise BatchRefreshUserError(model, "invalid config", problems)
    return config
