"""The key checks of a small changes-only staging, from one read of its keys (pure: no I/O).

A replay that nets a few change rows (ROWWISE, DELTA_JOIN) counted its staged keys in one job
(sqlgen.key_quality) and listed them for the REPLACE WHERE in another. Below
DRIVER_KEYS_MAX_ROWS one job reads the staged keys and their bookkeeping into the driver,
ordered by the first key column, and the counts, key range, ceiling and key list come from
those rows; above it, or on key types whose text form is not one-to-one with Spark's equality
(doubles' -0.0, collations), SQL counts them as before. Tried first, and lost: leaving such a
staging uncached, so the write computed it a second time, made the REPLACE WHERE 0.7 s
slower on a 100-row change, more than the cache cost (docs/decisions.md, session 47).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from dbt.adapters.spark_batch_refresh.sql.sqlgen import HAD_OLD, PRESENT, key_aliases, q

# Change rows (the planner's count from commit metrics) up to which a netted staging's keys are
# read into the driver; the read stops one row past it, so a count too low only costs the SQL
# count after it.
DRIVER_KEYS_MAX_ROWS = 10_000
# Key types whose `CAST(... AS STRING)` is equal exactly when the values are.
DRIVER_KEY_TYPES = frozenset({"tinyint", "smallint", "int", "bigint", "string", "date"})


def eligible(change_rows: Optional[int], unique_key: Sequence[str],
             types: Mapping[str, str], chunk_rows: int) -> bool:
    """Whether a netted staging of `change_rows` is checked in the driver (`types`: the model's
    column types by lower-case name)."""
    return (change_rows is not None and 0 < change_rows <= min(DRIVER_KEYS_MAX_ROWS, chunk_rows)
            and bool(unique_key)
            and all(types.get(k.lower(), "").lower() in DRIVER_KEY_TYPES for k in unique_key))


def text_alias(i: int) -> str:
    return f"_br_t{i}"


def keys_sql(staging: str, unique_key: Sequence[str]) -> str:
    """The staged keys as text, with their bookkeeping, in Spark's order of the first key
    (NULLs first), at most one row past DRIVER_KEYS_MAX_ROWS."""
    aliases = key_aliases(unique_key)
    texts = ", ".join(f"CAST({a} AS STRING) AS {text_alias(i)}" for i, a in enumerate(aliases))
    return (f"SELECT {texts}, {q(PRESENT)}, {q(HAD_OLD)} FROM {staging} "
            f"ORDER BY {aliases[0]} LIMIT {DRIVER_KEYS_MAX_ROWS + 1}")


def quality(rows: Sequence[Mapping[str, Any]], key_columns: int, ranged: bool,
            top: bool, null_safe: bool = False,
            null_checked: Optional[Sequence[int]] = None) -> Dict[str, Any]:
    """What sqlgen.key_quality computes over a changes-only staging (`from_changes`), from its
    key rows as keys_sql returns them: the same names, counts and bounds as text (`null_safe`:
    a key with a NULL among the distinct keys too; `null_checked`: the positions of the key
    columns whose NULL is counted, every one unless given)."""
    keys = [tuple(r[text_alias(i)] for i in range(key_columns)) for r in rows]
    present = [r[PRESENT] is not None for r in rows]
    new = [p and r[HAD_OLD] is None for p, r in zip(present, rows)]
    checked = range(key_columns) if not null_checked else null_checked
    any_null = [any(k[i] is None for i in checked) for k in keys]
    found: Dict[str, Any] = {
        "staged": len(rows),
        "distinct_keys": len({k for k, n in zip(keys, any_null) if null_safe or not n}),
        "null_keys": sum(1 for p, n in zip(present, any_null) if p and n),
        "null_any": sum(any_null),
        "tombstones": sum(1 for p in present if not p),
        "new_rows": sum(new),
    }
    first = [k[0] for k in keys]  # ordered by the typed key: the bounds are the ends
    if ranged:
        found["key_min"], found["key_max"] = _ends(first, [True] * len(rows))
        found["new_min"], found["new_max"] = _ends(first, new)
    if top:
        found["key_top"] = _ends(first, present)[1]
    return found


def listed(rows: Sequence[Mapping[str, Any]]) -> List[str]:
    """The first key column of every staged row but a NULL one: what a REPLACE WHERE lists."""
    return [r[text_alias(0)] for r in rows if r[text_alias(0)] is not None]


def _ends(values: Sequence[Optional[str]], picked: Sequence[bool]) -> tuple:
    chosen = [v for v, p in zip(values, picked) if p and v is not None]
    return (chosen[0], chosen[-1]) if chosen else (None, None)
