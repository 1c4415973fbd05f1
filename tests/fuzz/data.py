"""The fuzz harness's upstreams: schema, seeded initial rows and random change batches.

Four Delta tables with NULLs outside the ids and skewed foreign keys (a third of the orders
belong to customer 1, some point at customers, products and orders that do not exist until a
batch inserts them, some are NULL). The harness keeps a mirror of every table in Python, so a
batch is computed without reading Spark and every batch can be written out as SQL for a
reproduction.
"""

from __future__ import annotations

import datetime
import random
from decimal import Decimal
from typing import Any, Dict, List, Optional, Sequence, Tuple

SCHEMA: Dict[str, Sequence[Tuple[str, str]]] = {
    "customers": (("id", "int"), ("region", "string"), ("tier", "string")),
    "products": (("id", "int"), ("category", "string"), ("price", "int")),
    "orders": (("id", "int"), ("customer_id", "int"), ("product_id", "int"),
               ("amount", "decimal(10,2)"), ("status", "string"), ("ts", "timestamp")),
    "items": (("id", "int"), ("order_id", "int"), ("qty", "int")),
}
# child column -> parent table (the parent's `id`)
FOREIGN_KEYS: Dict[Tuple[str, str], str] = {
    ("orders", "customer_id"): "customers",
    ("orders", "product_id"): "products",
    ("items", "order_id"): "orders",
}
SIZES = {"customers": 24, "products": 10, "orders": 120, "items": 200}

# Keys made of these values reach SQL text the plugin writes (key lists, REPLACE WHERE): a quote,
# a backslash, a non-ASCII letter, a trailing space, an empty string.
REGIONS = ["eu", "us", "apac", "o'hare", "zürich"]
TIERS = ["gold", "silver", "std", "std "]
CATEGORIES = ["toys", "food", "a\\b", ""]
STATUSES = ["new", "paid", "shipped", "cancelled"]
BASE_TS = datetime.datetime(2024, 1, 1)

Row = Dict[str, Any]
Op = Tuple[str, Row]  # ('I' | 'U' | 'D', row); 'A': an insert written as a blind INSERT


def sql_literal(value: Any, kind: str) -> str:
    if value is None:
        return f"cast(null as {kind})"
    if kind == "string":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind.startswith("decimal"):
        return f"cast('{value}' as {kind})"
    if kind == "timestamp":
        return f"timestamp'{value:%Y-%m-%d %H:%M:%S}'"
    return str(int(value))


def create_sql(schema: str, table: str) -> str:
    cols = ", ".join(f"{c} {k}" for c, k in SCHEMA[table])
    return (f"create table {schema}.{table} ({cols}) using delta "
            f"tblproperties (delta.enableChangeDataFeed = true)")


def insert_sql(schema: str, table: str, rows: Sequence[Row]) -> str:
    columns = SCHEMA[table]
    values = ",\n  ".join(
        "(" + ", ".join(sql_literal(r.get(c), k) for c, k in columns) + ")" for r in rows)
    return f"insert into {schema}.{table} values\n  {values}"


def commit_sql(schema: str, table: str, ops: Dict[int, Op]) -> str:
    """The one statement (one Delta commit) of a batch's operations on one table: a blind
    `INSERT` when they are appends ('A'), which Delta records as a blind append, else a MERGE."""
    if ops and all(op == "A" for op, _ in ops.values()):
        return insert_sql(schema, table, [ops[key][1] for key in sorted(ops)])
    return merge_sql(schema, table, ops)


def merge_sql(schema: str, table: str, ops: Dict[int, Op]) -> str:
    """One MERGE (one Delta commit) applying the batch's operations on one table."""
    columns = SCHEMA[table]
    values = ",\n  ".join(
        "(" + ", ".join([f"'{op}'"] + [sql_literal(data.get(c), k) for c, k in columns]) + ")"
        for op, data in (ops[key] for key in sorted(ops)))
    names = ", ".join(c for c, _ in columns)
    sets = ", ".join(f"{c} = s.{c}" for c, _ in columns[1:])
    return (
        f"merge into {schema}.{table} t using (select * from values\n  {values}\n  as s(op, {names})) s\n"
        f"on t.id = s.id when matched and s.op = 'D' then delete\n"
        f"when matched and s.op = 'U' then update set {sets}\n"
        f"when not matched and s.op = 'I' then insert ({names}) values "
        f"({', '.join('s.' + c for c, _ in columns)})"
    )


class Data:
    """The mirror of the four tables and the seeded generator of their rows and changes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed * 7919 + 17)
        self.tables: Dict[str, Dict[int, Row]] = {t: {} for t in SCHEMA}
        self.deleted: Dict[str, List[int]] = {t: [] for t in SCHEMA}
        self.step = 0
        for table in ("customers", "products", "orders", "items"):
            for key in range(1, SIZES[table] + 1):
                self.tables[table][key] = self.row(table, key)

    # -- values -------------------------------------------------------------------------
    def top(self, table: str) -> int:
        return max(list(self.tables[table]) + self.deleted[table] + [SIZES[table]])

    def foreign(self, parent: str) -> Optional[int]:
        """A skewed reference to `parent`: hot ids, NULLs and ids that do not exist (yet)."""
        r = self.rng.random()
        if r < 0.06:
            return None
        if r < 0.12:
            return self.top(parent) + self.rng.randint(1, 3)  # dangling: inserted later, maybe
        if r < 0.40:
            return 1
        if r < 0.52:
            return 2
        existing = sorted(self.tables[parent]) or [1]
        return self.rng.choice(existing)

    def value(self, table: str, column: str) -> Any:
        r = self.rng
        if column == "region":
            return r.choice(REGIONS)
        if column == "tier":
            return r.choice(TIERS)
        if column == "category":
            return r.choice(CATEGORIES)
        if column == "price":
            return r.randint(1, 30)
        if column == "amount":
            return Decimal(r.randrange(0, 2000, 25)) / 100
        if column == "status":
            return r.choice(STATUSES)
        if column == "ts":
            return BASE_TS + datetime.timedelta(hours=r.randint(0, 60))
        if column == "qty":
            return r.randint(-1, 6)
        parent = FOREIGN_KEYS.get((table, column))
        assert parent, (table, column)
        return self.foreign(parent)

    def nullable_value(self, table: str, column: str) -> Any:
        if (table, column) not in FOREIGN_KEYS and self.rng.random() < 0.1:
            return None
        return self.value(table, column)

    def row(self, table: str, key: int) -> Row:
        return {"id": key, **{c: self.nullable_value(table, c) for c, _ in SCHEMA[table][1:]}}

    def initial_sql(self, schema: str) -> List[str]:
        return [create_sql(schema, t) for t in SCHEMA] + [
            insert_sql(schema, t, [self.tables[t][k] for k in sorted(self.tables[t])])
            for t in SCHEMA]

    # -- change batches -----------------------------------------------------------------
    def updated(self, table: str, row: Row) -> Row:
        """An update: a foreign-key move, a NULL flip, a new value, or no change at all."""
        new = dict(row)
        if self.rng.random() < 0.1:
            return new  # an update that changes nothing
        columns = [c for c, _ in SCHEMA[table][1:]]
        for column in self.rng.sample(columns, self.rng.randint(1, min(2, len(columns)))):
            if new[column] is not None and self.rng.random() < 0.25:
                new[column] = None
            else:
                new[column] = self.value(table, column)
        return new

    def new_key(self, table: str, taken: Dict[int, Op]) -> int:
        reusable = [k for k in self.deleted[table] if k not in self.tables[table] and k not in taken]
        if reusable and self.rng.random() < 0.3:
            return self.rng.choice(reusable)  # an id deleted earlier comes back
        key = self.top(table) + 1
        while key in taken:
            key += 1
        return key

    def children(self, table: str, column: str, parent_key: int) -> List[int]:
        return [k for k, r in self.tables[table].items() if r[column] == parent_key]

    def special(self, table: str, ops: Dict[int, Op]) -> None:
        """Changes aimed at outer joins and groups: a parent loses all its children, a childless
        parent gains one, a dangling reference gets its parent, a referenced parent goes."""
        r = self.rng
        extremes = {"orders": "amount", "items": "qty", "products": "price"}
        if table in extremes and r.random() < 0.5:
            # the rows holding the largest and the smallest value go (min/max upkeep)
            column = extremes[table]
            present = [(row[column], key) for key, row in self.tables[table].items() if row[column] is not None]
            for _, key in (min(present), max(present)) if present else ():
                ops[key] = ("D", {"id": key})
        for (child, column), parent in FOREIGN_KEYS.items():
            if table == child and r.random() < 0.5:
                parents = sorted(self.tables[parent])
                if not parents:
                    continue
                victim = r.choice(parents[:3] + parents)  # hot parents are picked more often
                for key in self.children(child, column, victim):
                    if key not in ops:
                        ops[key] = ("D", {"id": key})
                lonely = [p for p in parents if not self.children(child, column, p)]
                if lonely:
                    key = self.new_key(child, ops)
                    ops[key] = ("I", {**self.row(child, key), column: r.choice(lonely)})
            if table == parent and r.random() < 0.5:
                dangling = sorted({row[column] for row in self.tables[child].values()
                                   if row[column] is not None and row[column] not in self.tables[parent]
                                   and row[column] not in ops})
                if dangling:
                    key = r.choice(dangling)
                    ops[key] = ("I", self.row(parent, key))
                referenced = sorted({row[column] for row in self.tables[child].values()
                                     if row[column] in self.tables[parent]} - set(ops))
                if referenced:
                    key = r.choice(referenced)
                    ops[key] = ("D", {"id": key})

    def batch(self) -> Tuple[str, List[Tuple[str, Dict[int, Op]]]]:
        """The next batch: its kind and its commits, each one MERGE of one operation per id on
        one table. A table may get a second commit that touches the first one's rows again
        (an inserted row deleted or updated, an updated row changed back, a deleted row
        re-inserted as it was), so a replay nets several versions of one row."""
        self.step += 1
        r = self.rng
        if self.step == 1:
            kind = "small"  # every table moves, so every model replays at least once
        elif self.step == 2:
            kind = "large"  # about 30% of the rows of the tables it changes
        else:
            kind = r.choices(["empty", "small", "large", "append", "upsert"],
                             weights=[1, 6, 3, 3, 3])[0]
        if kind == "empty":
            return kind, []
        if kind == "append":
            return kind, self.appends()
        if self.step == 1:
            tables = list(SCHEMA)
        elif kind == "large":
            tables = r.sample(list(SCHEMA), r.randint(1, 3))
        else:
            tables = [t for t in SCHEMA if r.random() < 0.5] or [r.choice(list(SCHEMA))]
        commits: List[Tuple[str, Dict[int, Op]]] = []
        for table in tables:
            existing = sorted(self.tables[table])
            ops: Dict[int, Op] = {}
            if kind == "large":
                n_update, n_delete, n_insert = (int(len(existing) * 0.3), int(len(existing) * 0.05),
                                                max(1, int(len(existing) * 0.05)))
            elif kind == "upsert":
                # updates and inserts, no delete upstream: a netted change without tombstones
                # where no row leaves a filter (written by REPLACE USING, engine/apply.py)
                n_update, n_delete, n_insert = r.randint(1, 5), 0, r.randint(0, 3)
            else:
                n_update, n_delete, n_insert = r.randint(1, 5), r.randint(0, 3), r.randint(0, 3)
            for key in r.sample(existing, min(len(existing), n_update)):
                ops[key] = ("U", self.updated(table, self.tables[table][key]))
            for key in r.sample(existing, min(len(existing), n_delete)):
                ops[key] = ("D", {"id": key})
            for _ in range(n_insert):
                key = self.new_key(table, ops)
                ops[key] = ("I", self.row(table, key))
            if kind == "small" or (kind != "upsert" and r.random() < 0.5):
                self.special(table, ops)
            if not ops:
                continue
            before = {k: dict(v) for k, v in self.tables[table].items()}
            self.apply(table, ops)
            commits.append((table, ops))
            if kind != "upsert" and r.random() < 0.3:
                again = self.second_commit(table, ops, before)
                if again:
                    self.apply(table, again)
                    commits.append((table, again))
        return kind, commits

    def appends(self) -> List[Tuple[str, Dict[int, Op]]]:
        """Commits that only insert, as event and order tables grow: a blind INSERT or an
        insert-only MERGE (the idempotent `WHEN NOT MATCHED THEN INSERT`) of new ids, sometimes
        an id deleted earlier coming back (below the largest), sometimes two commits. A replay
        of such commits alone may take the checked-INSERT path (issue 34)."""
        r = self.rng
        commits: List[Tuple[str, Dict[int, Op]]] = []
        for table in r.sample(list(SCHEMA), r.randint(1, 2)):
            for _ in range(2 if r.random() < 0.3 else 1):
                op = "A" if r.random() < 0.5 else "I"
                ops: Dict[int, Op] = {}
                for _ in range(r.randint(1, 5)):
                    key = self.new_key(table, ops)
                    ops[key] = (op, self.row(table, key))
                self.apply(table, ops)
                commits.append((table, ops))
        return commits

    def second_commit(self, table: str, first: Dict[int, Op], before: Dict[int, Row]) -> Dict[int, Op]:
        ops: Dict[int, Op] = {}
        for key in self.rng.sample(sorted(first), min(len(first), self.rng.randint(1, 4))):
            op, _ = first[key]
            if op in ("I", "A") and key in self.tables[table]:
                ops[key] = self.rng.choice([("D", {"id": key}),
                                            ("U", self.updated(table, self.tables[table][key]))])
            elif op == "U" and key in before:
                ops[key] = ("U", dict(before[key]))  # changed back
            elif op == "D" and key in before:
                ops[key] = ("I", dict(before[key]))  # deleted, then inserted as it was
        return ops

    def apply(self, table: str, ops: Dict[int, Op]) -> None:
        rows = self.tables[table]
        for key, (op, data) in ops.items():
            if op == "D":
                if rows.pop(key, None) is not None:
                    self.deleted[table].append(key)
            elif op == "U":
                if key in rows:
                    rows[key] = dict(data)
            elif key not in rows:
                rows[key] = dict(data)
