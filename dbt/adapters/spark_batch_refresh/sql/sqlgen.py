"""SQL text for staging, merging and the state tables (pure string building)."""

from __future__ import annotations

from typing import Iterable, List, Mapping, Optional, Sequence

PRESENT = "_br_present"
KEY_PREFIX = "_br_k_"
# Set on a staged key that had an output row before the change (changes-only staging): a new
# row for a key without it must not meet an existing target row (see merge_staging).
HAD_OLD = "_br_had_old"
BOOKKEEPING = (PRESENT, HAD_OLD)
SOURCE_ROW = "_br_source_row"  # a null-safe MERGE's source rows (_null_safe_source)
DUPLICATE_KEY_MARKER = "batch_refresh: a new row has the unique_key of an unchanged row"


def lit(value: Optional[object]) -> str:
    """A Spark SQL literal (strings escaped for Spark's backslash-escaping parser)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def q(name: str) -> str:
    return f"`{name}`"


def key_aliases(unique_key: Sequence[str]) -> List[str]:
    return [f"{KEY_PREFIX}{i}" for i in range(len(unique_key))]


def staging_full(model_sql: str, unique_key: Sequence[str]) -> str:
    """Every row of the model at the pinned versions (backfill and full recompute)."""
    keys = ", ".join(f"_br_m.{q(k)} AS {a}" for k, a in zip(unique_key, key_aliases(unique_key)))
    extra = f", {keys}" if keys else ""
    return f"SELECT _br_m.*, true AS {PRESENT}{extra} FROM (\n{model_sql}\n) _br_m"


def typed(sql: str, columns: Sequence[tuple[str, str]]) -> str:
    """`sql`'s rows as `columns` (name, Spark type): the model's own types for rows computed
    another way (a delta aggregate's output over its state), where they create the target."""
    cols = ", ".join(q(n) if t.lower() == "void" else f"CAST({q(n)} AS {t}) AS {q(n)}"
                     for n, t in columns)  # a NULL literal's type is not castable to
    return f"SELECT {cols} FROM (\n{sql}\n) _br_typed"


def affected_keys(parts: Sequence[str], unique_key: Sequence[str]) -> str:
    """The distinct affected keys: the union of the per-scan affected-key queries."""
    cols = ", ".join(q(k) for k in unique_key)
    union = "\nUNION ALL\n".join(parts)
    return f"SELECT DISTINCT {cols} FROM (\n{union}\n) _br_c"


def keys_match(unique_key: Sequence[str], left: str, right: str) -> str:
    """Null-safe equality of the key columns of two aliases (`true` without a key: a global
    aggregate's one row meets the other's)."""
    return " AND ".join(f"{left}.{q(k)} <=> {right}.{q(k)}" for k in unique_key) or "true"


def _keys_out(unique_key: Sequence[str], alias: str) -> str:
    """The key columns of `alias` under their staging names (_br_k_0, ...)."""
    return ", ".join(f"{alias}.{q(k)} AS {a}" for k, a in zip(unique_key, key_aliases(unique_key)))


def staging_affected(model_sql: str, keys_relation: str, unique_key: Sequence[str],
                     null_safe: bool = False) -> str:
    """Recomputed rows for the affected keys, plus a tombstone for each key left with no row.

    `keys_relation` holds the affected keys, computed beforehand so this plan stays the size
    of one model. The key restriction is an IN-subquery on the model's output; Spark turns it
    into a left-semi join and pushes it below projections, filters and grouping keys. A
    `null_safe` key (a NULL group, config.nullable_key) is restricted by an EXISTS on `<=>`
    instead, the same semi join, where a NULL key meets the NULL affected key (IN never does).
    """
    cols = ", ".join(q(k) for k in unique_key)
    tuple_cols = f"({cols})" if len(unique_key) > 1 else cols
    restrict = (f"EXISTS (SELECT 1 FROM _br_affected _br_x WHERE "
                f"{keys_match(unique_key, '_br_x', '_br_m')})" if null_safe else
                f"{tuple_cols} IN (SELECT {cols} FROM _br_affected)")
    return (
        f"WITH _br_affected AS (SELECT {cols} FROM {keys_relation}),\n"
        f"{_rows_where(model_sql, restrict)}\n"
        f"SELECT _br_r.*, {_keys_out(unique_key, '_br_a')}\n"
        f"FROM _br_affected _br_a LEFT JOIN _br_rows _br_r ON "
        f"{keys_match(unique_key, '_br_a', '_br_r')}"
    )


def staging_coarse(model_sql: str, values_relation: str, column: str, target: str,
                   unique_key: Sequence[str], null_safe: bool = False) -> str:
    """Recomputed rows for every output row whose `column` (a key column, coarse.py) holds one
    of the affected values, plus a tombstone for each key of the target's rows with such a
    value that the recompute no longer yields.

    The target holds the model at the versions the refresh starts from, so its rows with those
    values are exactly the old rows the change can have altered; read unpinned, a resumed
    refresh finds its own committed chunks there, whose keys it recomputes the same way.
    Outside a `null_safe` key, `IN` never meets a NULL value: a NULL among the values stages
    one tombstone whose key is all NULL, as an affected NULL key does in `staging_affected`,
    so the key check asks the model whether it has a row with a NULL key (and refuses or
    replans null-safely, as it does there) rather than losing that row unseen.
    """
    c = q(column)
    restrict = (f"EXISTS (SELECT 1 FROM _br_coarse _br_x WHERE _br_x.{c} <=> {{a}}.{c})"
                if null_safe else f"{{a}}.{c} IN (SELECT {c} FROM _br_coarse)")
    cols = ", ".join(f"_br_t.{q(k)}" for k in unique_key)
    keys = ", ".join(
        f"CASE WHEN _br_r.{PRESENT} THEN _br_r.{q(k)} ELSE _br_o.{q(k)} END AS {a}"
        for k, a in zip(unique_key, key_aliases(unique_key)))
    return (
        f"WITH _br_coarse AS (SELECT DISTINCT {c} FROM {values_relation}),\n"
        f"{_rows_where(model_sql, restrict.format(a='_br_m'))},\n"
        f"_br_old AS (SELECT {cols} FROM {target} _br_t WHERE {restrict.format(a='_br_t')}"
        + ("" if null_safe else
           f"\n  UNION ALL SELECT {', '.join(f'NULL AS {q(k)}' for k in unique_key)} "
           f"FROM _br_coarse WHERE {c} IS NULL")
        + ")\n"
        f"SELECT _br_r.*, {keys}\n"
        f"FROM _br_rows _br_r FULL JOIN _br_old _br_o ON {keys_match(unique_key, '_br_r', '_br_o')}"
    )


def _rows_where(model_sql: str, restrict: str) -> str:
    """The `_br_rows` CTE: the model's rows that `restrict` keeps, marked present."""
    return (f"_br_rows AS (\n  SELECT _br_m.*, true AS {PRESENT} FROM (\n{model_sql}\n  ) _br_m\n"
            f"  WHERE {restrict}\n)")


def staging_from_changes(plus_sql: str, minus_sql: str, columns: Sequence[str],
                         unique_key: Sequence[str]) -> str:
    """Staging of a row-wise replay computed from the change feed alone.

    `plus_sql` is the model over the inserted rows and post-images, `minus_sql` over the deleted
    rows and pre-images. For a row-wise model M, M(new) = M(old) - M(minus) + M(plus) as
    multisets, so netting the signed output rows leaves exactly the output rows that appeared
    (net > 0) and disappeared (net < 0); a row changed and changed back nets to nothing. A key
    with an appearing row gets that row, any other affected key a tombstone. The upstream at the
    pinned version is never scanned.
    """
    return (f"WITH _br_net AS (\n{_net_rows(plus_sql, minus_sql, columns)}\n),\n"
            + _staging_by_key(columns, unique_key))


def _net_rows(plus_sql: str, minus_sql: str, columns: Sequence[str]) -> str:
    """The signed output rows netted: each distinct row with its count, where it is not 0."""
    cols = ", ".join(q(c) for c in columns)
    return (
        f"  SELECT {cols}, sum(_br_s) AS _br_n FROM (\n"
        f"    SELECT {cols}, 1 AS _br_s FROM (\n{plus_sql}\n    ) _br_p\n"
        f"    UNION ALL\n"
        f"    SELECT {cols}, -1 AS _br_s FROM (\n{minus_sql}\n    ) _br_m\n"
        f"  ) _br_d GROUP BY {cols} HAVING sum(_br_s) <> 0"
    )


def _staging_by_key(columns: Sequence[str], unique_key: Sequence[str]) -> str:
    # The netted rows (_br_net) in one pass grouped by key (a self-join of three reads of them
    # cost twice as much, #34): each key's present rows, repeated by their count so a row
    # appearing twice stays twice and the key check reports the duplicate; OUTER explode
    # leaves a key with no present row as one all-NULL row, its tombstone. The HAVING keeps a
    # keyless (global) group from turning an empty net into a tombstone.
    keys = ", ".join(q(k) for k in unique_key)
    fields = ", ".join(f"_br_e.{q(c)}" for c in columns)
    row = ", ".join([q(c) for c in columns] + [f"true AS {PRESENT}"])
    group_by = f" GROUP BY {keys}" if keys else ""
    key_cols = f", {keys}" if keys else ""
    return (
        f"_br_g AS (\n  SELECT max(CASE WHEN _br_n < 0 THEN true END) AS {HAD_OLD}, "
        f"flatten(collect_list(CASE WHEN _br_n > 0 THEN "
        f"array_repeat(struct({row}), CAST(_br_n AS INT)) END)) AS _br_rs{key_cols}\n"
        f"  FROM _br_net{group_by} HAVING count(*) > 0\n)\n"
        f"SELECT {fields}, _br_e.{PRESENT}, _br_g.{HAD_OLD}"
        f"{', ' + _keys_out(unique_key, '_br_g') if unique_key else ''}\n"
        f"FROM _br_g LATERAL VIEW OUTER explode(_br_rs) _br_x AS _br_e"
    )


def key_quality(staging: str, unique_key: Sequence[str], key_range: bool = False,
                from_changes: bool = False, top: bool = False, null_safe: bool = False,
                null_checked: Optional[Sequence[str]] = None) -> str:
    """Row, distinct-key, NULL-key and tombstone counts of staging in one scan (`null_safe`:
    a key with a NULL counted as a distinct key too, NULL its own value; `null_checked`: the
    key columns whose NULL the NULL counts count, every one unless given); with
    `key_range`, also the min and max of its first key column as text; with `from_changes`
    (a staging that marks keys with an old row), the count of new keys, and with `key_range`
    their min and max (the target files the new-key check must read); with `top`, the largest
    key of a present row as text (the target's key ceiling, plan/key_top.py)."""
    aliases = key_aliases(unique_key)
    checked = {c.lower() for c in (unique_key if not null_checked else null_checked)}
    null_test = " OR ".join(f"{a} IS NULL" for k, a in zip(unique_key, aliases)
                            if k.lower() in checked)
    bounds = (f", CAST(min({aliases[0]}) AS STRING) AS key_min, "
              f"CAST(max({aliases[0]}) AS STRING) AS key_max" if key_range else "")
    if top:
        bounds += f", CAST(max(CASE WHEN {PRESENT} THEN {aliases[0]} END) AS STRING) AS key_top"
    if from_changes:
        new = f"{PRESENT} AND {HAD_OLD} IS NULL"
        bounds += f", coalesce(sum(CASE WHEN {new} THEN 1 ELSE 0 END), 0) AS new_rows"
        if key_range:
            bounds += (f", CAST(min(CASE WHEN {new} THEN {aliases[0]} END) AS STRING) AS new_min, "
                       f"CAST(max(CASE WHEN {new} THEN {aliases[0]} END) AS STRING) AS new_max")
    # count(DISTINCT a, b) skips a key with a NULL; the struct of them is never NULL.
    distinct = f"struct({', '.join(aliases)})" if null_safe else ", ".join(aliases)
    return (
        f"SELECT count(*) AS staged, count(DISTINCT {distinct}) AS distinct_keys, "
        # A tombstone's key may be NULL (an outer join's NULL-supplying side changed under a
        # filtered key): not an output row, so not a NULL key, but outside count(DISTINCT).
        f"coalesce(sum(CASE WHEN ({null_test}) AND {PRESENT} THEN 1 ELSE 0 END), 0) AS null_keys, "
        f"coalesce(sum(CASE WHEN {null_test} THEN 1 ELSE 0 END), 0) AS null_any, "
        f"coalesce(sum(CASE WHEN {PRESENT} IS NULL THEN 1 ELSE 0 END), 0) AS tombstones"
        f"{bounds} FROM {staging}"
    )


INLINE_CHECK_MARKER = "batch_refresh: a key to check against the target"
# A row whose key has a NULL, of a key that is not null-safe: its own marker (holding the one
# above), so that an inferred key found NULL plans again null-safe at once (executor.py).
INLINE_NULL_MARKER = f"{INLINE_CHECK_MARKER}: a NULL"


def inserted_checked(body: str, columns: Sequence[str], key: str, ceiling: str) -> str:
    """The rows of `body` (the model over inserted change rows) with the key checks of a
    staging inline: each key above `ceiling` (so held by no target row: plan/key_top.py), not
    NULL, and once. Any other row fails the statement with INLINE_CHECK_MARKER before a write
    reading it commits, and the refresh stages and checks as usual."""
    return _checked(body, columns, [key], [f"{q(key)} > {ceiling}"], null_checked=[key])


def backfill_checked(model_sql: str, columns: Sequence[str], unique_key: Sequence[str],
                     null_checked: Sequence[str]) -> str:
    """Every row of the model with the key checks of a staged backfill inline: no
    `null_checked` key column NULL (config.null_checked: a null-safe key's NULL is one more
    value), each key once (NULL equal to NULL, as the window groups them). Any other
    row fails the statement with INLINE_CHECK_MARKER (INLINE_NULL_MARKER for a NULL) before
    the write reading it commits. An inferred key is counted too: a GROUP BY's keys are not
    unique when its projection has a generator (`explode(collect_list(v))`), so it is not
    taken on trust; the count is a shuffle of the model's output, small where the key is a
    GROUP BY's."""
    return _checked(model_sql, columns, unique_key, [], null_checked)


def _checked(body: str, columns: Sequence[str], unique_key: Sequence[str],
             conditions: Sequence[str], null_checked: Sequence[str]) -> str:
    """The rows of `body` that meet `conditions` and hold their key once; any other row fails
    the statement with INLINE_CHECK_MARKER, or, a `null_checked` key column NULL, with
    INLINE_NULL_MARKER."""
    cols = ", ".join(q(c) for c in columns)
    keys = ", ".join(f"_br_m.{q(k)}" for k in unique_key)
    checks = " AND ".join([*conditions, "_br_n = 1"])
    nulls = "" if not null_checked else (
        f"WHEN {' OR '.join(f'{q(k)} IS NULL' for k in null_checked)} "
        f"THEN raise_error({lit(INLINE_NULL_MARKER)}) ")
    return (f"SELECT {cols} FROM (\n  SELECT _br_m.*, count(*) OVER (PARTITION BY {keys}) AS _br_n "
            f"FROM (\n{body}\n) _br_m\n) _br_c\n"
            f"WHERE CASE {nulls}WHEN {checks} THEN true "
            f"ELSE raise_error({lit(INLINE_CHECK_MARKER)}) END")


def null_key_rows(model_sql: str, unique_key: Sequence[str]) -> str:
    """How many rows of the model have a NULL in one of the key columns `unique_key` (those
    config.null_checked gives; a filter Spark pushes down)."""
    test = " OR ".join(f"_br_m.{q(k)} IS NULL" for k in unique_key)
    return f"SELECT count(*) AS n FROM (\n{model_sql}\n) _br_m WHERE {test}"


def typed_lit(text: str, sql_type: str) -> str:
    """A literal of `sql_type` from its text form (key bounds read back from Spark)."""
    if sql_type == "date":
        return f"DATE {lit(text)}"
    if sql_type == "string":
        return lit(text)
    return str(int(text))


def staging_columns(model_columns: Sequence[tuple[str, str]], unique_key: Sequence[str],
                    from_changes: bool) -> List[tuple[str, str]]:
    """The columns staging SQL produces (see staging_full/_affected/_from_changes)."""
    types = {c.lower(): t for c, t in model_columns}
    cols = list(model_columns) + [(PRESENT, "boolean")]
    if from_changes:
        cols.append((HAD_OLD, "boolean"))
    return cols + [(a, types.get(k.lower(), "string")) for k, a in
                   zip(unique_key, key_aliases(unique_key))]


def duplicate_examples(staging: str, unique_key: Sequence[str], limit: int = 5) -> str:
    aliases = key_aliases(unique_key)
    return (
        f"SELECT {', '.join(aliases)}, count(*) AS n FROM {staging} WHERE {PRESENT} "
        f"GROUP BY {', '.join(aliases)} HAVING count(*) > 1 ORDER BY n DESC LIMIT {limit}"
    )


def chunk_predicate(unique_key: Sequence[str], chunks: int, chunk: int, alias: str = "") -> str:
    """Rows of chunk `chunk` (1-based) of `chunks`, by a hash of the key (staging side)."""
    cols = ", ".join(f"{alias}{a}" for a in key_aliases(unique_key))
    return f"pmod(xxhash64({cols}), {chunks}) = {chunk - 1}"


def _target_match(unique_key: Sequence[str], key_range: Optional[tuple[str, str]],
                  null_safe: bool = False) -> str:
    """How a staged row (s) meets its target row (t): the key (`null_safe`: by `<=>`, a NULL
    key meeting the NULL key), plus the staged key range as target-only literals when given
    (Delta prunes target files by those alone; a null-safe key has none: the range of its
    non-NULL values would leave out its NULL key's rows)."""
    equals = "<=>" if null_safe else "="
    on = " AND ".join(f"t.{q(k)} {equals} s.{a}"
                      for k, a in zip(unique_key, key_aliases(unique_key)))
    if key_range is not None:  # of the first key column
        on += f" AND t.{q(unique_key[0])} BETWEEN {key_range[0]} AND {key_range[1]}"
    return on


def merge_staging(
    target: str,
    staging: str,
    unique_key: Sequence[str],
    columns: Sequence[str],
    delete_missing: bool,
    chunk: Optional[tuple[int, int]] = None,
    guard_new_keys: bool = False,
    unordered: Iterable[str] = (),
    key_range: Optional[tuple[str, str]] = None,
    null_safe: bool = False,
    keep_null_tombstone: bool = True,
) -> str:
    """Apply staging: delete tombstones, update only rows whose values changed, insert new.

    Rows whose values are equal are left alone so the target's own change feed carries only
    real changes for downstream models. `delete_missing` (full recompute) also deletes target
    rows the recompute no longer produces. `guard_new_keys` (changes-only staging) fails the
    MERGE, before it commits, when a new row's key matches a target row that did not change:
    the model would then hold two rows for that key, which staging alone cannot see.
    `unordered` columns (maps, variants) have no `<=>`: they are compared as JSON text, which
    can only over-report a change (an equal map written in another order is rewritten).
    `key_range` (literal min and max of a single staged key) is added to the ON clause as a
    target-only predicate: Delta prunes target files by it, never by the source's keys.
    `null_safe`: the key matched by `<=>` (config.nullable_key); `keep_null_tombstone`:
    whether the target holds the all-NULL key (held_null_key), see _null_safe_source.
    """
    on = _target_match(unique_key, None if delete_missing else key_range, null_safe)
    if null_safe:
        staging = _null_safe_source(staging, unique_key, keep_null_tombstone)
        on = f"{on} AND s.{SOURCE_ROW}"
    non_key = [c for c in columns if c not in unique_key]
    changed = _differs(non_key, unordered)
    update_set = ", ".join(f"t.{q(c)} = s.{q(c)}" for c in non_key)
    insert_cols = ", ".join(q(c) for c in columns)
    insert_vals = ", ".join(f"s.{q(c)}" for c in columns)
    clauses = []
    if guard_new_keys:
        first = q(columns[0])
        clauses.append(
            f"WHEN MATCHED AND s.{PRESENT} IS NOT NULL AND s.{HAD_OLD} IS NULL "
            f"THEN UPDATE SET t.{first} = raise_error({lit(DUPLICATE_KEY_MARKER)})"
        )
    clauses.append(f"WHEN MATCHED AND s.{PRESENT} IS NULL THEN DELETE")
    if non_key:
        clauses.append(f"WHEN MATCHED AND ({changed}) THEN UPDATE SET {update_set}")
    clauses.append(
        f"WHEN NOT MATCHED AND s.{PRESENT} IS NOT NULL THEN INSERT ({insert_cols}) VALUES ({insert_vals})"
    )
    if delete_missing:
        # In a chunked merge each chunk deletes only the target rows of its own key hash.
        guard = ""
        if chunk is not None:
            tcols = ", ".join(f"t.{q(k)}" for k in unique_key)
            guard = f" AND pmod(xxhash64({tcols}), {chunk[1]}) = {chunk[0] - 1}"
        clauses.append(f"WHEN NOT MATCHED BY SOURCE{guard} THEN DELETE")
    return f"MERGE INTO {target} t\nUSING {staging} s\nON {on}\n" + "\n".join(clauses)


def _null_safe_source(staging: str, unique_key: Sequence[str], keep_null_tombstone: bool) -> str:
    """A null-safe MERGE's source, so that its ON condition holds on no row of the outer join
    that lacks a side. Delta's MERGE on a table with deletion vectors tests the condition
    again on those rows, where `<=>` meets a NULL key with the missing side's NULLs, and a
    row taken for matched that meets no clause fails the MERGE (USER_RAISED_EXCEPTION
    "Unexpected row: did not match any merge clause"). A source flag (SOURCE_ROW, in ON)
    keeps a target row without a source row out; the tombstone of the all-NULL key is left
    out unless `keep_null_tombstone` (the target holds that key: a row of the source then)."""
    rows = f"SELECT _br_st.*, true AS {SOURCE_ROW} FROM {staging} _br_st"
    if keep_null_tombstone:
        return f"({rows})"
    null_key = " AND ".join(f"_br_st.{a} IS NULL" for a in key_aliases(unique_key))
    return f"({rows} WHERE _br_st.{PRESENT} IS NOT NULL OR NOT ({null_key}))"


def held_null_key(target: str, unique_key: Sequence[str]) -> str:
    """Whether the target holds a row whose key columns are all NULL (a row, or none)."""
    null_key = " AND ".join(f"{q(k)} IS NULL" for k in unique_key)
    return f"SELECT 1 AS held FROM {target} WHERE {null_key} LIMIT 1"


def _differs(columns: Sequence[str], unordered: Iterable[str]) -> str:
    """Whether the target row (t) and the staged row (s) differ in `columns`; `unordered`
    ones (maps, variants: no `<=>`) compared as JSON text."""
    as_json = set(unordered)
    return " OR ".join(
        f"NOT (to_json(t.{q(c)}) <=> to_json(s.{q(c)}))" if c in as_json
        else f"NOT (t.{q(c)} <=> s.{q(c)})" for c in columns) or "false"


def keys_against_target(target: str, staging: str, unique_key: Sequence[str],
                        columns: Sequence[str], key_range: tuple[str, str],
                        unordered: Iterable[str] = ()) -> str:
    """Each staged key of a recomputed staging (every model row of its keys) with what the
    target holds for it: whether it has a row there, and whether that row equals the staged
    one. The REPLACE WHERE of such a staging lists only the keys whose row differs, so an
    affected group whose row came out the same is not rewritten (nor in the target's change
    feed), and the row counts are exact. A NULL key's tombstone matches no target row, as in
    the MERGE. A left join, pruned on the target side by the staged key range."""
    alias = key_aliases(unique_key)[0]
    non_key = [c for c in columns if c not in unique_key]
    return (f"SELECT s.{alias} AS k, s.{PRESENT} IS NOT NULL AS present, "
            f"t.{q(unique_key[0])} IS NOT NULL AS existed, "
            f"coalesce(s.{PRESENT} IS NOT NULL AND t.{q(unique_key[0])} IS NOT NULL "
            f"AND NOT ({_differs(non_key, unordered)}), false) AS same "
            f"FROM {staging} s LEFT JOIN {target} t ON {_target_match(unique_key, key_range)} "
            f"WHERE s.{alias} IS NOT NULL")


def new_key_collisions(target: str, staging: str, unique_key: Sequence[str],
                       key_range: Optional[tuple[str, str]] = None,
                       null_safe: bool = False) -> str:
    """Count what `guard_new_keys` fails a MERGE on, over the whole staging: new rows whose key
    matches a target row that did not change. A merge of several chunks checks this before
    its first chunk, since a chunk that tripped the guard would leave earlier chunks applied."""
    on = _target_match(unique_key, key_range, null_safe)
    return (f"SELECT count(*) AS collisions FROM {staging} s JOIN {target} t ON {on} "
            f"WHERE s.{PRESENT} IS NOT NULL AND s.{HAD_OLD} IS NULL")


def replace_where(target: str, staging: str, key: str, literals: Sequence[str],
                  columns: Sequence[str], key_range: tuple[str, str],
                  listed_only: bool = False,
                  new_range: Optional[tuple[str, str]] = None) -> str:
    """Apply a staging as one commit: delete the target rows of every listed key (Delta's
    DELETE, with deletion vectors: it reads the key column of the files the key range and the
    key list can match, and rewrites no data file), then insert the staged rows. Delta
    accepts only literals here (no subquery), hence the key list; the range lets it skip
    files by their statistics. `listed_only`: the staging holds keys that are not listed
    (recomputed rows equal to the target's), whose rows must not be inserted again.

    `new_range` (a changes-only staging with new keys: their literal range) guards them as
    the MERGE's `guard_new_keys` does, in the same statement: a new row whose key the target
    already holds would silently replace that row, so the write fails with
    DUPLICATE_KEY_MARKER before it commits. Read in the write, the target needs no statement
    of its own (the read costs the same either way, 0.5-0.7 s here). The snapshot it reads is
    the write's own or an older one, so a run that lost the race to another run's commit of
    this refresh is told so by Delta (skipped or a conflict), not by this check."""
    cols = ", ".join(q(c) for c in columns)
    listed = f"{q(key)} IN ({', '.join(literals)})"
    rows = f"{PRESENT} AND {listed}" if listed_only else PRESENT
    head = (f"INSERT INTO {target} REPLACE WHERE {listed} "
            f"AND {q(key)} BETWEEN {key_range[0]} AND {key_range[1]}\n")
    if new_range is None:
        return head + f"SELECT {cols} FROM {staging} WHERE {rows}"
    return head + _guarded_rows(target, staging, [key], columns, f"s.{rows}", new_range)


def _guarded_rows(target: str, staging: str, unique_key: Sequence[str], columns: Sequence[str],
                  where: str, new_range: Optional[tuple[str, str]]) -> str:
    """The staged rows (s) satisfying `where`, with the MERGE's new-key check of a REPLACE
    WHERE / USING: a new row (no old row) whose key the target holds fails the statement with
    DUPLICATE_KEY_MARKER before it commits; `new_range`, the new keys' literal range of the
    first key column, prunes the target read."""
    picked = ", ".join(f"s.{q(c)}" for c in columns)
    targets = ", ".join(f"{q(k)} AS _br_t{i}" for i, k in enumerate(unique_key))
    pruned = (f" WHERE {q(unique_key[0])} BETWEEN {new_range[0]} AND {new_range[1]}"
              if new_range is not None else "")
    on = " AND ".join(f"_br_c._br_t{i} = s.{a}" for i, a in enumerate(key_aliases(unique_key)))
    return (f"SELECT {picked} FROM {staging} s\n"
            f"LEFT JOIN (SELECT {targets} FROM {target}{pruned}) _br_c\n"
            f"ON s.{HAD_OLD} IS NULL AND {on}\n"
            f"WHERE {where} AND CASE WHEN _br_c._br_t0 IS NULL THEN true "
            f"ELSE raise_error({lit(DUPLICATE_KEY_MARKER)}) END")


def replace_using(target: str, staging: str, unique_key: Sequence[str], columns: Sequence[str],
                  new_range: Optional[tuple[str, str]] = None, guarded: bool = True) -> str:
    """Apply a changes-only staging without tombstones as one commit, in Databricks' syntax
    `INSERT INTO t REPLACE USING (key) <rows>`: the target rows whose key some staged row has
    are deleted, then the staged rows inserted. Spark 4.2's SQL has no such statement; the
    embedded session runs it as the DataFrame write Delta 4.4 gives it (storage/frame_write.py).
    No key list (no literal limit, no read of the keys), compound keys too. A staged row
    carries no tombstone form here: the caller uses it only when there is none.

    `guarded` (a staging with new keys not above the key ceiling): the MERGE's new-key check,
    as in replace_where, in the rows' SELECT, so a new row on the key of an unchanged target
    row fails the write before it commits (`new_range`: their range, to prune the target)."""
    keys = ", ".join(q(k) for k in unique_key)
    head = f"INSERT INTO {target} REPLACE USING ({keys})\n"
    cols = ", ".join(q(c) for c in columns)
    if not guarded:
        return head + f"SELECT {cols} FROM {staging} WHERE {PRESENT}"
    return head + _guarded_rows(target, staging, unique_key, columns, f"s.{PRESENT}", new_range)


def replace_using_changed(target: str, staging: str, unique_key: Sequence[str],
                          columns: Sequence[str], key_range: Optional[tuple[str, str]],
                          unordered: Iterable[str] = ()) -> str:
    """Apply a whole-keys staging without tombstones (every model row of its keys, each key
    with a row) as one REPLACE USING commit: the staged rows that differ from their key's
    target row, or have none, replace it. A recomputed row equal to the target's is left out
    (no rewrite, nothing in the change feed), compared in the write's own SELECT: no read of
    the target before the write (keys_against_target), no key list (any number of keys, a
    compound key too). A whole-keys staging needs no new-key check: its keys' rows are the
    model's."""
    keys = ", ".join(q(k) for k in unique_key)
    non_key = [c for c in columns if c not in unique_key]
    picked = ", ".join(f"s.{q(c)}" for c in columns)
    return (f"INSERT INTO {target} REPLACE USING ({keys})\n"
            f"SELECT {picked} FROM {staging} s LEFT ANTI JOIN {target} t\n"
            f"ON {_target_match(unique_key, key_range)} AND NOT ({_differs(non_key, unordered)})\n"
            f"WHERE s.{PRESENT}")


def model_columns(staging_columns: Iterable[str]) -> List[str]:
    return [c for c in staging_columns if c not in BOOKKEEPING and not c.startswith(KEY_PREFIX)]


def tblproperties(props: Mapping[str, str]) -> str:
    if not props:
        return ""
    body = ", ".join(f"{lit(k)} = {lit(v)}" for k, v in props.items())
    return f"TBLPROPERTIES ({body})"
