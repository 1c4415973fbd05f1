"""The target's key ceiling: an upper bound of its single-column key, kept in its commits (pure).

A replay whose change set brings keys the target never had must prove that none of them is
already there (a row-wise model whose unique_key is not unique would otherwise replace an
unchanged row). That proof is a read of the target inside the write: 0.3 s of the 1.5 s
REPLACE WHERE of 100 keys at 100k rows (bench/apply_paths.py). Most tables grow at the top of their key
(orders, events): when every new key lies above a bound of every key the target holds, no
new key can collide, and the write needs no read of the target.

The bound is carried forward in each refresh's commit metadata: a refresh that writes the
whole model (backfill, full recompute) sets it to the staging's largest key; a replay raises it
to its staged keys' largest; a write that cannot know its keys before its commit (an overwrite,
an append checked inline) records `key_top_added`, and the next replay reads the keys it
inserted from that commit (its file statistics in the embedded session,
storage/jvm_commit_stats.py; its change feed over a server, storage/delta.py); anything else
(a key that is not one column of a type compared the same way here and in Spark, a commit
that cannot be read) leaves it unknown, and the next replay reads the target as before. Deleting rows never invalidates an upper bound, and a
commit from outside batch_refresh makes the next refresh a rebuild (preflight.py), so the
bound read from the newest refresh commit holds for the target a replay writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

# Types whose text form orders as Spark orders the values: integers by value, ISO dates
# (four-digit years) as text. Not strings: their usual keys (UUIDs, hashes) do not grow at the
# top, and a string that is not valid UTF-8 could order differently once decoded here.
_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class KeyType:
    """A single key column whose values have a ceiling: its name (lower case) and type."""

    column: str
    sql_type: str

    def to_json(self) -> Mapping[str, str]:
        return {"column": self.column, "type": self.sql_type}

    @staticmethod
    def from_json(data: Any) -> Optional["KeyType"]:
        if not isinstance(data, Mapping) or not isinstance(data.get("column"), str):
            return None
        return key_type(data["column"], data.get("type"))


@dataclass(frozen=True)
class KeyTop:
    key: KeyType
    value: str  # the largest key, as Spark casts it to text

    def to_json(self) -> Mapping[str, str]:
        return {"column": self.key.column, "type": self.key.sql_type, "max": self.value}

    @staticmethod
    def from_json(data: Any) -> Optional["KeyTop"]:
        key = KeyType.from_json(data)
        return make_top(key, data.get("max")) if key is not None else None


def key_type(column: str, sql_type: Any) -> Optional[KeyType]:
    """The key column's ceiling type; None for a type whose text does not order as Spark
    orders its values."""
    if not isinstance(sql_type, str):
        return None
    kind = sql_type.lower()
    if kind not in _INTEGERS and kind != "date":
        return None
    return KeyType(column.lower(), kind)


def single_key(unique_key: Sequence[str],
               columns: Iterable[Tuple[str, str]]) -> Optional[KeyType]:
    """The ceiling type of a unique_key of one column (`columns`: the model's names and
    types); None for a compound key or a type without a ceiling."""
    if len(unique_key) != 1:
        return None
    types = {name.lower(): sql_type for name, sql_type in columns}
    return key_type(unique_key[0], types.get(unique_key[0].lower()))


def make_top(key: KeyType, value: Any) -> Optional[KeyTop]:
    """A ceiling at `value` (text), or None where the text cannot be compared as Spark
    compares the values."""
    if not isinstance(value, str):
        return None
    kind = key.sql_type
    if kind in _INTEGERS:
        try:
            int(value)
        except ValueError:
            return None
    elif not _ISO_DATE.fullmatch(value):
        return None
    return KeyTop(key, value)


def _less(a: str, b: str, kind: str) -> bool:
    return int(a) < int(b) if kind in _INTEGERS else a < b


def raised(previous: Optional[KeyTop], staged: Optional[KeyTop]) -> Optional[KeyTop]:
    """The ceiling after a replay wrote rows whose largest key is `staged` (None: no row)."""
    if previous is None:
        return None
    if staged is None:
        return previous
    if staged.key != previous.key:
        return None
    return staged if _less(previous.value, staged.value, previous.key.sql_type) else previous


def above(top: Optional[KeyTop], key: Optional[KeyType], lowest: Optional[str]) -> bool:
    """Whether a key whose text is `lowest` is larger than every key under `top`."""
    if top is None or key is None or lowest is None or key != top.key:
        return False
    low = make_top(key, lowest)
    return low is not None and _less(top.value, low.value, key.sql_type)


def ceiling_after(whole_model: bool, key: Optional[KeyType], staged: Optional[KeyTop],
                  previous: Optional[KeyTop]) -> Optional[KeyTop]:
    """The target's ceiling after a write of staged rows whose largest key is `staged`:
    `whole_model` (a backfill or full recompute: the target becomes the staging) sets it,
    a replay raises the one before it. `key` None: the key has none."""
    if key is None:
        return None
    if whole_model:
        return staged
    return raised(previous, staged)


def with_inserted(base: Optional[KeyTop], key: KeyType,
                  inserted: Optional[str]) -> Optional[KeyTop]:
    """The ceiling after a commit that recorded `key_top_added` (an overwrite: `base` None, the
    old rows are gone; an append checked inline: `base` the ceiling before it), given the
    largest key it inserted (None: not known)."""
    if inserted is None or (base is not None and base.key != key):
        return None
    top = make_top(key, inserted)
    if top is None:
        return None
    return raised(base, top) if base is not None else top
