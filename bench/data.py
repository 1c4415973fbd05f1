"""Deterministic upstream Delta tables (Change Data Feed on) and change batches, as Spark SQL.

fact(id, dim_id, k, v, updated_at): n rows; dim(id, category, name): n/10 rows. Values are
hashes of the id with fixed seeds, so every run builds the same tables. A change batch of c rows
is one MERGE (one upstream commit): 40% inserts (new ids), 40% updates (new v and updated_at; half
of them move to another group k, a quarter to another dim_id) and 20% deletes.
"""

from __future__ import annotations

from typing import List

BASE_TS = 1767225600  # 2026-01-01: initial updated_at values lie within 2026
CHANGE_TS = 1798761600  # 2027-01-01: every change batch is newer than any initial row
PRIME = 999983  # coprime with 10^k: i -> pmod(i * PRIME + offset, n) is a bijection on [0, n)


def groups(n: int) -> int:
    return max(1, n // 100)


def dims(n: int) -> int:
    return max(1, n // 10)


def create_sql(n: int) -> List[str]:
    g, d = groups(n), dims(n)
    props = "tblproperties (delta.enableChangeDataFeed = true)"
    return [
        "create database if not exists raw",
        "drop table if exists raw.fact",
        "drop table if exists raw.dim",
        f"""create table raw.fact using delta {props} as
select id,
       pmod(xxhash64(id, 1), {d}) as dim_id,
       pmod(xxhash64(id, 3), {g}) as k,
       pmod(xxhash64(id, 2), 1000) as v,
       timestamp_seconds({BASE_TS} + pmod(xxhash64(id, 4), 30000000)) as updated_at
from range({n})""",
        f"""create table raw.dim using delta {props} as
select id,
       concat('c', cast(pmod(xxhash64(id, 5), 50) as string)) as category,
       concat('dim-', cast(id as string)) as name
from range({d})""",
    ]


def change_counts(n: int, fraction: float) -> tuple[int, int, int]:
    """(inserts, updates, deletes) for a batch of round(n * fraction) rows (at least 1)."""
    total = max(1, round(n * fraction))
    inserts = round(total * 0.4)
    deletes = round(total * 0.2)
    updates = total - inserts - deletes
    return inserts, updates, deletes


def change_sql(n: int, fraction: float, round_no: int, next_id: int) -> str:
    """One change batch as one MERGE into raw.fact. Ids updated/deleted are distinct within a batch
    (a bijection of [0, n)); a later batch may pick an id deleted earlier (then it changes nothing)."""
    ins, upd, dele = change_counts(n, fraction)
    g, d = groups(n), dims(n)
    offset = (round_no * 7919) % n
    ts = CHANGE_TS + round_no * 60
    return f"""merge into raw.fact t
using (
  select pmod(i * {PRIME} + {offset}, {n}) as id, if(i < {upd}, 'u', 'd') as op
  from (select id as i from range({upd + dele}))
  union all
  select {next_id} + id as id, 'i' as op from range({ins})
) s
on t.id = s.id
when matched and s.op = 'd' then delete
when matched and s.op = 'u' then update set
  v = pmod(xxhash64(t.id, {round_no}, 11), 1000),
  k = if(pmod(t.id, 2) = 0, pmod(xxhash64(t.id, {round_no}, 13), {g}), t.k),
  dim_id = if(pmod(t.id, 4) = 1, pmod(xxhash64(t.id, {round_no}, 17), {d}), t.dim_id),
  updated_at = timestamp_seconds({ts})
when not matched and s.op = 'i' then insert (id, dim_id, k, v, updated_at) values (
  s.id, pmod(xxhash64(s.id, 1), {d}), pmod(xxhash64(s.id, 3), {g}),
  pmod(xxhash64(s.id, 2), 1000), timestamp_seconds({ts}))"""
