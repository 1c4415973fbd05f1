"""The benchmark's dbt project: model shapes x methods, written into a temporary directory.

Shapes (all read the upstream fact table `raw.fact`, the join also `raw.dim`):

* rowwise:  filter + projection, key `id`;
* agg:      GROUP BY k (about 100 fact rows per group);
* join_agg: fact JOIN dim, GROUP BY f.dim_id, d.category (about 10 fact rows per group).
* join:     fact JOIN dim, row-wise (key `id`): replayed by delta join (the fact's change rows
            joined to dim at its pinned version; the fact table is not scanned);
* aggdelta: the agg SQL, its batch_refresh model with aggregate_upkeep='delta' (old state +
            signed change rows, a sidecar of per-group state; agg recomputes affected groups);
* join_aggdelta: the join_agg SQL with aggregate_upkeep='delta' (a delta aggregate over the
            delta join of fact and dim);
* global:   count, sum and max over the whole fact table (no GROUP BY), aggregate_upkeep='delta';
* dedup:    the newest fact row per dim_id, `row_number() over (partition by dim_id order by
            updated_at desc, id desc)` then `rn = 1` (about 10 fact rows per partition);
* dedup_join: the same over fact JOIN dim in one SELECT, by QUALIFY (a window over a join:
            split from the join and replayed by the partitions the change touches);
* report:   a rank over every group's total (a CTE grouped by k, about 100 fact rows per group,
            then `rank() over (order by sum_v desc, k)`), aggregate_upkeep='delta': replayed
            over its intermediate aggregate (the CTE's groups in a sidecar).
* report_part: a rank of each k's ten value bands, in the grouped SELECT itself (GROUP BY k,
            pmod(v, 10), `rank() over (partition by k order by sum(v) desc, ...)`),
            aggregate_upkeep='delta': replayed over its intermediate aggregate, recomputing
            only the k partitions the change touches;
* report_part_keys: the same without the opt-in: replayed by affected keys (the touched k
            partitions recomputed from the fact table).
* report_hist: an aggregate of the aggregate, a histogram of the groups' totals (per k, then
            how many k have each total), aggregate_upkeep='delta': replayed over its
            intermediate aggregate, recomputing only the totals a touched k had or has.
* agg_null: the agg SQL grouped by `nullif(k, 0)`, no unique_key: one NULL group, its inferred
            key matched null-safely (applied by MERGE, where agg's recomputed groups are
            replaced by key).

Methods per shape:

* br:   `batch_refresh` (snapshot backfill once, then change-feed replay);
* tbl:  dbt `table` of the same SQL (the full rebuild);
* inc:  dbt `incremental`, merge strategy, unique_key, updated_at watermark (the usual hand-built
        alternative: for the aggregates it recomputes the groups that new/updated rows fall in);
* hand: (rowwise only, not a dbt model) a hand-written MERGE of `table_changes` into a copy.

Plus `gate_rowwise` (batch_refresh with refresh_interval='1d' over a 1000-id slice of the fact
table: every later run is a gated skip),
and `ovh_view` / `ovh_table` (`select 1` as a view / a table): dbt's own per-model overhead.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from bench import dbt_invoke

SHAPES = ("rowwise", "agg", "aggdelta", "global", "join_agg", "join_aggdelta", "join", "dedup",
          "dedup_join", "report", "report_part", "report_part_keys", "report_hist", "agg_null")

# Model SQL per shape; {fact} / {dim} are the upstream references, {inc} the incremental filter.
_SQL = {
    "rowwise": (
        "select id, dim_id, k, v * 2 as v2, updated_at\n"
        "from {fact}\n"
        "where pmod(v, 10) <> 0{inc}\n"
    ),
    "agg": (
        "select k, count(*) as n, sum(v) as sum_v, max(updated_at) as max_updated_at\n"
        "from {fact}\n"
        "{inc}"
        "group by k\n"
    ),
    # the aggregate with one NULL group (k = 0): its inferred key matched null-safely
    "agg_null": (
        "select nullif(k, 0) as k, count(*) as n, sum(v) as sum_v, max(updated_at) as max_updated_at\n"
        "from {fact}\n"
        "{inc}"
        "group by nullif(k, 0)\n"
    ),
    "global": (
        "select count(*) as n, sum(v) as sum_v, max(updated_at) as max_updated_at\n"
        "from {fact}\n"
        "{inc}"
    ),
    "join_agg": (
        "select f.dim_id, d.category, count(*) as n, sum(f.v) as sum_v,\n"
        "       max(f.updated_at) as max_updated_at\n"
        "from {fact} f join {dim} d on f.dim_id = d.id\n"
        "{inc}"
        "group by f.dim_id, d.category\n"
    ),
    "join": (
        "select f.id, f.dim_id, f.v, d.category, f.updated_at\n"
        "from {fact} f join {dim} d on f.dim_id = d.id{inc}\n"
    ),
    "dedup": (
        "select dim_id, id, v, updated_at\n"
        "from (select id, dim_id, v, updated_at,\n"
        "             row_number() over (partition by dim_id order by updated_at desc, id desc) as rn\n"
        "      from {fact}{inc}) x\n"
        "where rn = 1\n"
    ),
    "dedup_join": (
        "select f.dim_id, f.id, f.v, d.category, f.updated_at\n"
        "from {fact} f join {dim} d on f.dim_id = d.id{inc}\n"
        "qualify row_number() over (partition by f.dim_id order by f.updated_at desc, f.id desc) = 1\n"
    ),
    "report": (
        "with totals as (select k, count(*) as n, sum(v) as sum_v from {fact}{inc}\n"
        "                group by k)\n"
        "select k, n, sum_v, rank() over (order by sum_v desc, k) as rnk from totals\n"
    ),
    "report_part": (
        "select k, pmod(v, 10) as band, count(*) as n, sum(v) as sum_v,\n"
        "       rank() over (partition by k order by sum(v) desc, pmod(v, 10)) as rnk\n"
        "from {fact}{inc}\n"
        "group by k, pmod(v, 10)\n"
    ),
    "report_hist": (
        "select sum_v, count(*) as groups, sum(n) as n\n"
        "from (select k, count(*) as n, sum(v) as sum_v from {fact}{inc}\n"
        "      group by k) per_k\n"
        "group by sum_v\n"
    ),
}

_SQL["aggdelta"] = _SQL["agg"]
_SQL["report_part_keys"] = _SQL["report_part"]
_SQL["join_aggdelta"] = _SQL["join_agg"]

_KEYS = {"rowwise": "'id'", "agg": "'k'", "aggdelta": "'k'", "global": "none",
         "join_agg": "['dim_id', 'category']", "join_aggdelta": "['dim_id', 'category']",
         "join": "'id'", "dedup": "'dim_id'", "dedup_join": "'dim_id'", "report": "'k'",
         "report_part": "['k', 'band']", "report_part_keys": "['k', 'band']",
         "report_hist": "'sum_v'", "agg_null": "none"}
# Extra configs of a shape's batch_refresh model.
_BR_CONFIG = {"aggdelta": ", aggregate_upkeep='delta'", "global": ", aggregate_upkeep='delta'",
              "join_aggdelta": ", aggregate_upkeep='delta'", "report": ", aggregate_upkeep='delta'",
              "report_part": ", aggregate_upkeep='delta'",
              "report_hist": ", aggregate_upkeep='delta'"}

_INC = {
    "rowwise": (
        "\n{% if is_incremental() %}\n"
        "  and updated_at > (select max(updated_at) from {{ this }})\n{% endif %}"
    ),
    "agg": (
        "{% if is_incremental() %}\n"
        "where k in (select k from {{ source('raw', 'fact') }}\n"
        "            where updated_at > (select max(max_updated_at) from {{ this }}))\n"
        "{% endif %}\n"
    ),
    "global": "",  # no key to merge by: dbt incremental has no faithful form of it
    "report": "",  # a rank over every group: recomputed whole, merged by key
    "report_part": "",  # the same, for simplicity (the comparison is with the table build)
    "report_part_keys": "",
    "report_hist": "",
    "agg_null": "",  # a NULL key: dbt's MERGE never matches it
    "join_agg": (
        "{% if is_incremental() %}\n"
        "where f.dim_id in (select dim_id from {{ source('raw', 'fact') }}\n"
        "                   where updated_at > (select max(max_updated_at) from {{ this }}))\n"
        "{% endif %}\n"
    ),
    "join": (
        "\n{% if is_incremental() %}\n"
        "where f.updated_at > (select max(updated_at) from {{ this }})\n{% endif %}"
    ),
    "dedup": (
        "\n{% if is_incremental() %}\n"
        "      where dim_id in (select dim_id from {{ source('raw', 'fact') }}\n"
        "                       where updated_at > (select max(updated_at) from {{ this }}))\n"
        "{% endif %}"
    ),
}

_INC["aggdelta"] = _INC["agg"]
_INC["join_aggdelta"] = _INC["join_agg"]
_INC["dedup_join"] = (
    "\n{% if is_incremental() %}\n"
    "where f.dim_id in (select dim_id from {{ source('raw', 'fact') }}\n"
    "                   where updated_at > (select max(updated_at) from {{ this }}))\n"
    "{% endif %}"
)

FACT_REF = "{{ source('raw', 'fact') }}"
DIM_REF = "{{ source('raw', 'dim') }}"


def model_sql(shape: str, fact: str = FACT_REF, dim: str = DIM_REF, inc: str = "") -> str:
    return _SQL[shape].format(fact=fact, dim=dim, inc=inc)


def plain_sql(shape: str, fact: str = "raw.fact", dim: str = "raw.dim") -> str:
    """The model SQL over concrete tables: the from-scratch answer the checks compare against."""
    return model_sql(shape, fact=fact, dim=dim)


# batch_refresh models per strategy (bench/run.py --strategies): `br_` always replays (the
# "replay" column), `au_` chooses by cost (refresh_mode='auto', the default), `ow_` always
# overwrites, `fu_` always recomputes and merges the difference.
STRATEGY_MODES = {"br": "incremental", "au": "auto", "ow": "overwrite", "fu": "full"}


def model_files(shapes: List[str], strategies: bool = False) -> Dict[str, str]:
    files: Dict[str, str] = {}
    for shape in shapes:
        body = model_sql(shape)
        key = _KEYS[shape]
        for prefix, mode in STRATEGY_MODES.items():
            if prefix != "br" and not strategies:
                continue
            files[f"{prefix}_{shape}"] = (
                f"{{{{ config(materialized='batch_refresh', unique_key={key}, "
                f"refresh_mode='{mode}'{_BR_CONFIG.get(shape, '')}) }}}}\n" + body
            )
        files[f"tbl_{shape}"] = "{{ config(materialized='table', file_format='delta') }}\n" + body
        files[f"inc_{shape}"] = (
            "{{ config(materialized='incremental', incremental_strategy='merge', "
            f"unique_key={key}, file_format='delta') }}}}\n" + model_sql(shape, inc=_INC[shape])
        )
    # The gate's cost does not depend on the model's size (it reads the state and the
    # upstream's latest commit), so it reads a small slice: no extra full backfill at 100M rows.
    files["gate_rowwise"] = (
        "{{ config(materialized='batch_refresh', unique_key='id', refresh_interval='1d') }}\n"
        f"select id, v from {FACT_REF} where id < 1000\n"
    )
    files["ovh_view"] = "{{ config(materialized='view') }}\nselect 1 as one\n"
    files["ovh_table"] = "{{ config(materialized='table', file_format='delta') }}\nselect 1 as one\n"
    return files


def hand_merge_sql(target: str, version_from: int, version_to: int) -> str:
    """The floor for the rowwise shape: read the change feed, write the changed rows."""
    return f"""
merge into {target} t
using (
  select id, dim_id, k, v * 2 as v2, updated_at, _change_type, pmod(v, 10) <> 0 as keep
  from (
    select *, row_number() over (partition by id order by _commit_version desc,
             case _change_type when 'delete' then 0 else 1 end desc) as rn
    from table_changes('raw.fact', {version_from}, {version_to})
    where _change_type <> 'update_preimage'
  ) where rn = 1
) s
on t.id = s.id
when matched and (s._change_type = 'delete' or not s.keep) then delete
when matched then update set dim_id = s.dim_id, k = s.k, v2 = s.v2, updated_at = s.updated_at
when not matched and s._change_type <> 'delete' and s.keep then
  insert (id, dim_id, k, v2, updated_at) values (s.id, s.dim_id, s.k, s.v2, s.updated_at)
"""


def write_project(root: str, shapes: List[str], session_dir: str, driver_memory: str,
                  strategies: bool = False, checkpoint_interval: int = 10,
                  spark_confs: Optional[Dict[str, str]] = None) -> None:
    dbt_invoke.write_project(
        root, name="bench", schema="bench", session_dir=session_dir,
        sources=("version: 2\nsources:\n  - name: raw\n    schema: raw\n"
                 "    tables:\n      - name: fact\n      - name: dim\n"),
        models=model_files(shapes, strategies),
        # a default of every table the session creates, the raw tables and targets alike
        confs={"spark.driver.memory": driver_memory,
               "spark.databricks.delta.properties.defaults.checkpointInterval":
               str(int(checkpoint_interval)), **(spark_confs or {})})
