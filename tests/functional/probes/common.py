"""What the probe's models share (tests/functional/probe_real_projects.py and its ported
packages): the four sources, the model config, and dbt macros as they compile on Spark."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

O = "{{ source('raw', 'orders') }}"
C = "{{ source('raw', 'customers') }}"
P = "{{ source('raw', 'payments') }}"
PR = "{{ source('raw', 'products') }}"
CFG = "{{ config(materialized='batch_refresh'%s) }}\n"
_SURROGATE = "md5(cast(concat(%s) as string))"


def cfg(key: Optional[str] = None) -> str:
    return CFG % (f", unique_key='{key}'" if key else "")


def surrogate(*cols: str) -> str:
    """dbt_utils.generate_surrogate_key: md5 of the '-'-joined columns, NULL as a token."""
    return _SURROGATE % ", '-', ".join(
        f"coalesce(cast({c} as string), '_dbt_utils_surrogate_key_null_')" for c in cols)


def asserted(fn: str, arg: str) -> str:
    """`fn(arg)`, failing where it is NULL and `arg` is not (dbt-spark's assert_not_null)."""
    return f"coalesce({fn}({arg}), nvl2({fn}({arg}), assert_true({fn}({arg}) is not null), null))"


def dbt_dateadd(part: str, interval: str, x: str) -> str:
    """dbt.dateadd as dbt-spark compiles it (its assert_not_null checks spelled out)."""
    clock = f"to_unix_timestamp({asserted('to_timestamp', x)}) - to_unix_timestamp({asserted('date', x)})"
    add = "date_add" if part == "day" else "add_months"
    return (f"to_timestamp(to_unix_timestamp({add}({asserted('date', x)}, cast({interval} * 1 as int)))"
            f" + {clock})")


def dbt_last_day(x: str, part: str = "month") -> str:
    """dbt.last_day: the day before the next period's first."""
    return f"cast({dbt_dateadd('day', '-1', dbt_dateadd(part, '1', f'date_trunc({part!r}, {x})'))} as date)"


def ported(prefix: str, models: Mapping[str, str], ids: Mapping[str, Any],
           marks: Optional[Mapping[str, str]] = None) -> Tuple[Dict[str, str], Dict[str, Any]]:
    """A ported package's models twice, `<prefix>_` keyless and `<prefix>k_` with the
    package's key tests (`ids`, by model; the probe's MODEL_TESTS), each mark in `marks`
    replaced by its SQL and `PFX_` (in refs) by the prefix."""
    probes: Dict[str, str] = {}
    for p in (prefix, f"{prefix}k"):
        for name, sql in models.items():
            for mark, expr in (marks or {}).items():
                sql = sql.replace(mark, expr)
            probes[f"{p}_{name}"] = cfg() + sql.replace("PFX_", f"{p}_")
    return probes, {f"{prefix}k_{name}": key for name, key in ids.items()}
