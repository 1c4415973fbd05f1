"""TPC-H data and refresh sets for examples/tpch (the test in tests/functional/test_tpch.py and
`make bench-tpch`).

The eight tables come from `tpchgen-cli` (PyPI, a Rust port of dbgen that runs offline) as
Parquet and are loaded into Delta tables with the change feed on. The spec's refresh functions
are approximated with the generated rows themselves, so no second generator run is needed:

* RF1 inserts about 0.1% new orders (the spec's SF * 1,500 of SF * 1,500,000) with their line
  items: copies of original orders under new keys above every generated one, dates and prices
  kept, so the copies land in the same query windows as real new orders would.
* RF2 deletes about 0.1% of the original orders with their line items.
* Updates (not in the spec; real tables get them): a few line items' quantity and discount,
  orders' priority, customers' and suppliers' balances, parts' size (moving parts in and out of
  Q2, Q16 and Q19's filters) and supply costs.

Each step's rows are picked by a hash of the key and the step number: every run of a step
changes the same rows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import List

# The example project's models: q01.sql ... q22.sql, sources.yml, answers/.
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "examples", "tpch", "models")
# Generated data, one folder per scale factor, kept between runs.
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "dbt-spark-batch-refresh", "tpch")
TABLES = ("lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region")
# Generated order keys stay below this for any scale factor under 160; RF1's copies of step s
# take the original key plus s times it.
NEW_KEYS = 1_000_000_000


def queries() -> List[str]:
    """The example's query models, q01 ... q22, by name."""
    return sorted(f[:-4] for f in os.listdir(EXAMPLE) if re.fullmatch(r"q\d\d\.sql", f))


def tpchgen() -> str:
    """The `tpchgen-cli` of this interpreter's environment (the dev extra), else of PATH."""
    here = os.path.dirname(sys.executable)
    found = shutil.which("tpchgen-cli", path=os.pathsep.join([here, os.environ.get("PATH", "")]))
    if not found:
        raise RuntimeError("tpchgen-cli not found: pip install 'dbt-spark-batch-refresh[dev]' "
                           "(or pip install tpchgen-cli)")
    return found


def generate(scale: float, out: str) -> str:
    """The eight tables at `scale` as Parquet files in `out` (kept: a second call reuses them)."""
    if all(os.path.exists(os.path.join(out, f"{t}.parquet")) for t in TABLES):
        return out
    os.makedirs(out, exist_ok=True)
    subprocess.run([tpchgen(), "parquet", "-s", f"{scale:g}", "-o", out, "--overwrite"],
                   check=True, capture_output=True)
    return out


def load_sql(schema: str, parquet_dir: str) -> List[str]:
    """Statements that (re)create the eight Delta tables in `schema` from generated Parquet."""
    cdf = "using delta tblproperties ('delta.enableChangeDataFeed' = 'true')"
    return [f"create or replace table {schema}.{t} {cdf} as "
            f"select * from parquet.`{os.path.join(os.path.abspath(parquet_dir), t + '.parquet')}`"
            for t in TABLES]


def _picked(key: str, step: int, salt: str, one_in: int) -> str:
    return f"pmod(hash({key}, {step}, '{salt}'), {one_in}) = 0"


def refresh_sql(schema: str, step: int) -> List[str]:
    """RF1, RF2 and the updates of refresh step `step` (1, 2, ...), in that order."""
    s = schema
    original = f"o_orderkey < {NEW_KEYS}"
    new = _picked("o_orderkey", step, "rf1", 1000)
    gone = _picked("o_orderkey", step, "rf2", 1000)
    offset = step * NEW_KEYS
    return [
        # RF1: new orders, then their line items
        f"insert into {s}.orders select o_orderkey + {offset}, o_custkey, o_orderstatus, "
        f"o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment "
        f"from {s}.orders where {original} and {new}",
        f"insert into {s}.lineitem select l_orderkey + {offset}, l_partkey, l_suppkey, "
        f"l_linenumber, l_quantity, l_extendedprice, l_discount, l_tax, l_returnflag, "
        f"l_linestatus, l_shipdate, l_commitdate, l_receiptdate, l_shipinstruct, l_shipmode, "
        f"l_comment from {s}.lineitem where l_orderkey < {NEW_KEYS} and "
        + new.replace("o_orderkey", "l_orderkey"),
        # RF2: old orders and their line items go
        f"delete from {s}.orders where {original} and {gone}",
        f"delete from {s}.lineitem where l_orderkey < {NEW_KEYS} and "
        + gone.replace("o_orderkey", "l_orderkey"),
        # updates
        f"update {s}.lineitem set l_quantity = l_quantity + 1, "
        f"l_discount = cast(pmod(cast(l_discount * 100 as int) + 3, 11) / 100 as decimal(15, 2)) "
        f"where {_picked('l_orderkey, l_linenumber', step, 'li', 1000)}",
        f"update {s}.orders set o_orderpriority = if(o_orderpriority = '1-URGENT', '5-LOW', "
        f"'1-URGENT') where {_picked('o_orderkey', step, 'op', 1000)}",
        f"update {s}.customer set c_acctbal = c_acctbal + 100 "
        f"where {_picked('c_custkey', step, 'cb', 200)}",
        f"update {s}.supplier set s_acctbal = s_acctbal - 50 "
        f"where {_picked('s_suppkey', step, 'sb', 20)}",
        f"update {s}.part set p_size = pmod(p_size, 50) + 1 "
        f"where {_picked('p_partkey', step, 'ps', 200)}",
        f"update {s}.partsupp set ps_supplycost = cast(ps_supplycost * 0.9 as decimal(15, 2)) "
        f"where {_picked('ps_partkey, ps_suppkey', step, 'pc', 500)}",
    ]
