"""Deterministic upstream Delta tables (Change Data Feed on) and change batches, as Spark SQL.

fact(id, dim_id, k, v, updated_at): n rows; dim(id, category, name): n/10 rows. Values are
hashes of the id with fixed seeds, so every run builds the same tables. A change batch of c rows
is one MERGE (one upstream commit). Its distribution says which keys it touches:

* uniform (default, meant as the worst case): 40% inserts (new ids), 40% updates (new v and
  updated_at; half of them move to another group k, a quarter to another dim_id) and 20% deletes,
  the updated and deleted ids drawn from the whole id range [0, n) by i -> pmod(i * PRIME + offset,
  n). (For n = 10^5 or 10^6, PRIME = -17 mod n: c such ids lie in a band of about 17 * c ids, so a
  small batch touches a narrow part of the range there; at 10^7 and 10^8 they are spread out.)
* recent (an orders or events table): 40% inserts of new ids as in uniform, but updates and deletes
  hit only the newest 1% of the ids, [next_id - max(1, n // 100), next_id), and are capped to that
  window's size.
* append: inserts of new ids only.
* upsert (late updates, CDC of mutable rows): 40% inserts and 60% updates as in uniform, no
  deletes.
"""

from __future__ import annotations

from math import gcd
from typing import List, Tuple

BASE_TS = 1767225600  # 2026-01-01: initial updated_at values lie within 2026
CHANGE_TS = 1798761600  # 2027-01-01: every change batch is newer than any initial row
PRIME = 999983  # coprime with 10^k: i -> pmod(i * PRIME + offset, n) is a bijection on [0, n)
DISTRIBUTIONS = ("uniform", "recent", "append", "upsert")


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


def window(n: int) -> int:
    """Ids a `recent` batch may update or delete: the newest 1% of the id range (at least 1)."""
    return max(1, n // 100)


def _check(distribution: str) -> None:
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r}; choose from {DISTRIBUTIONS}")


def change_counts(n: int, fraction: float,
                  distribution: str = "uniform") -> Tuple[int, int, int]:
    """(inserts, updates, deletes) for a batch of round(n * fraction) rows (at least 1).

    uniform: 40% / 40% / 20%. recent: the same, with updates + deletes capped to window(n) (2:1
    kept as far as it goes). append: every row is an insert. upsert: 40% / 60% / 0%."""
    _check(distribution)
    total = max(1, round(n * fraction))
    if distribution == "append":
        return total, 0, 0
    inserts = round(total * 0.4)
    deletes = 0 if distribution == "upsert" else round(total * 0.2)
    updates = total - inserts - deletes
    w = window(n)
    if distribution == "recent" and updates + deletes > w:
        deletes = round(w * deletes / (updates + deletes))
        updates = w - deletes
    return inserts, updates, deletes


def _multiplier(m: int) -> int:
    """PRIME, or the next integer coprime with m: i -> pmod(i * p + offset, m) stays a bijection."""
    p = PRIME
    while gcd(p, m) != 1:
        p += 1
    return p


def touched_ids(n: int, fraction: float, round_no: int, next_id: int,
                distribution: str = "uniform") -> Tuple[int, int, int, int, int]:
    """How a batch picks the ids it updates or deletes: (base, multiplier, offset, modulus, count),
    i.e. id(i) = base + pmod(i * multiplier + offset, modulus) for i in [0, count), distinct
    because count <= modulus. The first `updates` of them are updated, the rest deleted."""
    _check(distribution)
    _, upd, dele = change_counts(n, fraction, distribution)
    if distribution == "recent":
        w = window(n)
        if next_id < w:
            raise ValueError(f"next_id {next_id} below the recent window {w}")
        return next_id - w, _multiplier(w), (round_no * 7919) % w, w, upd + dele
    return 0, PRIME, (round_no * 7919) % n, n, upd + dele


def change_sql(n: int, fraction: float, round_no: int, next_id: int,
               distribution: str = "uniform") -> str:
    """One change batch as one MERGE into raw.fact (one upstream commit); next_id is the next
    unused id, where the inserts start. Ids updated/deleted are distinct within a batch (see
    touched_ids); a later batch may pick an id deleted earlier (then it changes nothing)."""
    ins, upd, dele = change_counts(n, fraction, distribution)
    g, d = groups(n), dims(n)
    ts = CHANGE_TS + round_no * 60
    base, mult, offset, modulus, count = touched_ids(n, fraction, round_no, next_id, distribution)
    inserts = f"select {next_id} + id as id, 'i' as op from range({ins})"
    if distribution == "append":
        source = f"  {inserts}"
    else:
        pick = f"pmod(i * {mult} + {offset}, {modulus})"
        if base:
            pick = f"{base} + {pick}"
        source = f"""  select {pick} as id, if(i < {upd}, 'u', 'd') as op
  from (select id as i from range({count}))
  union all
  {inserts}"""
    return f"""merge into raw.fact t
using (
{source}
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
