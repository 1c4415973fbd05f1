"""Differential test: a catalogue of model shapes under random upstream change sequences.

Every shape is a `batch_refresh` model over four Delta upstreams (orders, customers, payments,
products). Each step applies one random batch of changes (inserts, updates, deletes, key moves
across groups and join partners, NULLs outside unique keys (also in join keys and in group keys
a model filters out), rows joining and unjoining) as one
MERGE per changed upstream, then runs `dbt run`. After every run, for every shape:

* the run replayed (history action `replay`, mode `incremental`: never a fallback),
* the target equals the model evaluated from scratch at the consumed upstream versions,
* the staged rows are bounded by the change: at most `fanout` per changed upstream row.

Sized for CI by default (one step, a new random seed each run, printed);
BATCH_REFRESH_DIFF_STEPS=<n> runs it longer, BATCH_REFRESH_DIFF_SEED=<n> repeats a seed.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

import pytest

from dbt.tests.util import run_dbt, run_dbt_and_capture
from tests.functional.helpers import assert_contract, rows, sources_yml

STEPS = int(os.environ.get("BATCH_REFRESH_DIFF_STEPS", "1"))
# A development aid: BATCH_REFRESH_DIFF_ONLY=s_global,s_agg_delta runs only those shapes.
ONLY = [n for n in os.environ.get("BATCH_REFRESH_DIFF_ONLY", "").split(",") if n]
# A new seed every run (printed, and in every failure's output); BATCH_REFRESH_DIFF_SEED=<n>
# reproduces one.
SEED = int(os.environ.get("BATCH_REFRESH_DIFF_SEED") or random.SystemRandom().randrange(1, 10**9))


@dataclass(frozen=True)
class Shape:
    name: str
    sql: str
    fanout: int  # most output keys one changed upstream row can affect in this data
    # how its replays must stage ("aggregate": delta upkeep, "join": delta join); "" any
    staged_from: str = ""


SHAPES = [
    Shape("s_rowwise", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, customer_id, amount * 2 as amount2, upper(status) as status
from {{ source('raw', 'orders') }} where status <> 'cancelled'
""", 1),
    Shape("s_cte_chain", """
{{ config(materialized='batch_refresh', unique_key='id') }}
with live as (select * from {{ source('raw', 'orders') }} where status <> 'cancelled'),
     priced as (select id, customer_id, coalesce(amount, 0) as amount from live),
     big as (select id, customer_id, case when amount > 50 then 'big' else 'small' end as size from priced)
select id, customer_id, size from big
""", 1),
    # Delta join (deltajoin.py): the model over each moved side's change rows, the other
    # side pinned, netted by key.
    Shape("s_join_inner", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.amount, c.region, c.name
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on o.customer_id = c.id
""", 12, "join"),
    # Left joins whose right sides gain and lose matches (orders point at customers 41-45 and
    # products 11-12 that do not exist until a batch inserts them; batches delete some): a
    # moved right side replays by transition term, the orders whose join key it touched.
    Shape("s_join_left", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.status, c.region, p.category
from {{ source('raw', 'orders') }} o
left join {{ source('raw', 'customers') }} c on o.customer_id = c.id
left join {{ source('raw', 'products') }} p on o.product_id = p.id
""", 40, "join"),
    # Both sides supply NULLs: orders of unknown customers and customers without orders each
    # keep a row of their own; either side's change replays by transition term.
    Shape("s_join_full", """
{{ config(materialized='batch_refresh', unique_key='k') }}
select coalesce(o.id, -c.id) as k, o.amount, c.region, c.id as customer
from {{ source('raw', 'orders') }} o
full join {{ source('raw', 'customers') }} c on o.customer_id = c.id
""", 40, "join"),
    Shape("s_join_four", """
{{ config(materialized='batch_refresh', unique_key='id') }}
with paid as (
  select order_id, sum(amount) as paid, count(*) as payments
  from {{ source('raw', 'payments') }} group by order_id
)
select o.id, c.region, p.category, coalesce(paid.paid, 0) as paid, paid.payments
from {{ source('raw', 'orders') }} o
join {{ source('raw', 'customers') }} c on o.customer_id = c.id
left join {{ source('raw', 'products') }} p on p.id = o.product_id
left join paid on paid.order_id = o.id
""", 40),
    # An aggregate in an outer join's condition (fuzz seed 5324, fz09): a payment's change
    # can flip its order between the match and the NULL-extended row, whose keys differ; both
    # are affected keys (a change on orders, the NULL-supplying side, makes or unmakes them).
    Shape("s_right_join_on_aggregate", """
{{ config(materialized='batch_refresh', unique_key='k') }}
select coalesce(o.id, -pt.order_id) as k, o.status, pt.paid
from {{ source('raw', 'orders') }} o
right join (select order_id, sum(amount) as paid, max(amount) as top
            from {{ source('raw', 'payments') }} where order_id is not null
            group by order_id) pt
  on o.id = pt.order_id and pt.top > 30
""", 4),
    Shape("s_group_all_aggs", """
{{ config(materialized='batch_refresh') }}
select customer_id, sum(amount) as total, count(*) as n, count(distinct status) as statuses,
       min(amount) as lo, max(amount) as hi, avg(amount) as mean
from {{ source('raw', 'orders') }}
group by customer_id
""", 2),
    Shape("s_payments_by_customer", """
{{ config(materialized='batch_refresh') }}
select o.customer_id, sum(p.amount) as paid, count(*) as payments, max(p.method) as last_method
from {{ source('raw', 'payments') }} p
join {{ source('raw', 'orders') }} o on p.order_id = o.id
group by o.customer_id
""", 12),
    # A key column the change rows carry (coarse.py): orders' and payments' change rows name
    # the affected ids themselves, customers' reach them through orders; an order whose
    # status or customer moved changes its key (the old key's row is deleted via the target).
    Shape("s_coarse_key", """
{{ config(materialized='batch_refresh', unique_key=['id', 'status', 'region']) }}
select o.id, o.status, coalesce(c.region, 'none') as region, count(distinct p.method) as methods,
       max(p.amount) as top
from {{ source('raw', 'orders') }} o, {{ source('raw', 'customers') }} c,
     {{ source('raw', 'payments') }} p
where o.customer_id = c.id and p.order_id = o.id and c.tier <> 'blocked'
group by o.id, o.status, coalesce(c.region, 'none')
""", 12, "snapshot"),
    Shape("s_union_all", """
{{ config(materialized='batch_refresh', unique_key='uid') }}
select concat('o', id) as uid, amount, 'order' as kind from {{ source('raw', 'orders') }}
union all
select concat('p', id) as uid, amount, 'payment' as kind from {{ source('raw', 'payments') }}
where method <> 'void'
""", 1, "join"),
    # A UNION ALL of two aggregates of one upstream, the later branch's columns unnamed: its
    # sum(amount) made the key partial too and the model recomputed in full (session 53).
    Shape("s_union_of_aggregates", """
{{ config(materialized='batch_refresh', unique_key='k') }}
select concat('o', coalesce(cast(order_id as string), '-')) as k, sum(amount) as total
from {{ source('raw', 'payments') }} group by order_id
union all
select concat('m', method), sum(amount) from {{ source('raw', 'payments') }} group by method
""", 4),
    # A UNION (distinct): every output column is the key, as for SELECT DISTINCT; rows repeat
    # within a branch (a customer's orders) and across them. Recomputed in full before
    # session 55 (no key inferred).
    Shape("s_union_distinct", """
{{ config(materialized='batch_refresh') }}
select customer_id as who, if(amount > 60, 'big', 'small') as what
from {{ source('raw', 'orders') }} where amount is not null
union
select id, if(tier = 'blocked', 'big', 'small') from {{ source('raw', 'customers') }}
""", 2),
    # IN and EXISTS subqueries in the SELECT list: the rows whose flag a change row can turn
    # (for the nullable IN, every row once a NULL amount enters or leaves the subquery, hence
    # the fanout). Recomputed in full before session 55.
    Shape("s_in_select", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id,
       o.customer_id in (select id from {{ source('raw', 'customers') }} where tier = 'blocked')
         as blocked,
       exists (select 1 from {{ source('raw', 'payments') }} p
               where p.order_id = o.id and p.method <> 'void') as paid,
       o.amount in (select p.amount from {{ source('raw', 'payments') }} p where p.method = 'card')
         as card_amount
from {{ source('raw', 'orders') }} o
""", 120),
    # No unique_key and none the query gives (a join of sources): the key its schema.yml tests
    # declare, unique and not_null on id (TESTED_YML). Recomputed in full before session 55.
    Shape("s_tested_key", """
{{ config(materialized='batch_refresh') }}
select o.id, o.amount, c.region, c.tier
from {{ source('raw', 'orders') }} o left join {{ source('raw', 'customers') }} c on c.id = o.customer_id
""", 12),
    # No unique_key, no tests of its own: the key of the customers it reads, which their
    # source's tests declare (unique and not_null on id, SOURCES_YML), passed through a left
    # join onto a CTE grouped by the join column (jaffle_shop's `customers`). Recomputed in
    # full before session 55.
    Shape("s_upstream_key", """
{{ config(materialized='batch_refresh') }}
with customer_orders as (
  select customer_id, count(*) as n, sum(amount) as total
  from {{ source('raw', 'orders') }} group by customer_id)
select c.id, c.name, coalesce(co.n, 0) as n_orders, co.total
from {{ source('raw', 'customers') }} c left join customer_orders co on co.customer_id = c.id
""", 2),
    # A UNION ALL of keyed branches, each tagged by its own constant: keyed by (tag, key)
    # without a unique_key (no key was inferred before session 55).
    Shape("s_tagged_union", """
{{ config(materialized='batch_refresh') }}
select 'customer' as kind, customer_id as k, sum(amount) as total, count(*) as n
from {{ source('raw', 'orders') }} group by customer_id
union all
select 'product', product_id, sum(amount), count(*) from {{ source('raw', 'orders') }}
group by product_id
""", 4),
    # A band join that may match several rows, both sides keyed by their sources' tests:
    # keyed by the pair; the LEFT join is inner, its WHERE rejecting the NULL-extended rows,
    # so a delta join. Recomputed in full before session 56 (no key).
    Shape("s_pair_key", """
{{ config(materialized='batch_refresh') }}
select pay.id as payment_id, p.id as product_id, pay.amount, p.category
from {{ source('raw', 'payments') }} pay
left join {{ source('raw', 'products') }} p on pay.amount between p.price - 3 and p.price
where p.category <> 'cat0'
""", 60, "join"),
    # A LATERAL VIEW posexplode over a source keyed by its tests: keyed by (id, position),
    # a row-wise replay. Recomputed in full on an update before session 56 (no key).
    Shape("s_posexplode", """
{{ config(materialized='batch_refresh') }}
select p.id, pos, x from {{ source('raw', 'products') }} p
lateral view posexplode(array(p.price, p.price * 2, p.price + 40)) t as pos, x
where x > 20
""", 3, "changes"),
    # Correlated scalar subqueries in the SELECT list, read as LEFT JOINs of their grouped
    # aggregates (decorrelate.py): recomputed in full on every refresh before session 53.
    Shape("s_scalar_in_select", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.status,
       (select count(*) from {{ source('raw', 'payments') }} p where p.order_id = o.id) as payments,
       (select sum(p.amount) from {{ source('raw', 'payments') }} p
        where p.order_id = o.id and p.method <> 'void') as paid,
       exists (select 1 from {{ source('raw', 'payments') }} p
               where p.order_id = o.id and p.method = 'void') as voided
from {{ source('raw', 'orders') }} o
""", 2),
    Shape("s_nested_from", """
{{ config(materialized='batch_refresh', unique_key='region') }}
select region, orders, total from (
  select c.region, count(*) as orders, sum(o.amount) as total
  from (select * from {{ source('raw', 'orders') }} where amount > 10) o
  join (select id, coalesce(region, 'none') as region from {{ source('raw', 'customers') }}) c
    on o.customer_id = c.id
  group by c.region
) by_region
where orders > 1
""", 4),
    Shape("s_jinja_columns", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, customer_id
{%- for s in ['new', 'paid', 'shipped', 'cancelled'] %},
  case when status = '{{ s }}' then amount else 0 end as amount_{{ s }}
{%- endfor %}
from {{ source('raw', 'orders') }}
""", 1),
    Shape("s_exists", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.amount from {{ source('raw', 'orders') }} o
where exists (select 1 from {{ source('raw', 'payments') }} p where p.order_id = o.id)
  and not exists (select 1 from {{ source('raw', 'customers') }} c
                  where c.id = o.customer_id and c.tier = 'blocked')
""", 12),
    # NOT IN: a NULL entering or leaving the subquery's values turns the filter for every row
    # (void payments' amounts go NULL in random updates); correlated, only for its order.
    Shape("s_not_in", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.amount from {{ source('raw', 'orders') }} o
where o.amount not in (select p.amount from {{ source('raw', 'payments') }} p
                       where p.method = 'void' and (p.amount is null or p.amount > 45))
""", 250),
    Shape("s_not_in_correlated", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select o.id, o.status from {{ source('raw', 'orders') }} o
where o.amount not in (select p.amount from {{ source('raw', 'payments') }} p
                       where p.order_id = o.id)
""", 2),
    Shape("s_no_orders", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select c.id, c.name from {{ source('raw', 'customers') }} c
left join {{ source('raw', 'orders') }} o on o.customer_id = c.id
where o.id is null
""", 2),
    # NULL group keys filtered out under an outer join: when orders (the NULL-supplying side)
    # change, the affected region of a customer without one is NULL, a tombstone only.
    Shape("s_region_orders", """
{{ config(materialized='batch_refresh', unique_key='region') }}
select c.region, count(o.id) as n_orders, sum(o.amount) as amount
from {{ source('raw', 'customers') }} c
left join {{ source('raw', 'orders') }} o on o.customer_id = c.id
where c.region is not null
group by c.region
""", 4),
    # NULL groups (a customer of no region, a product of no category): the inferred key is
    # matched null-safely once one is found, through both joins' changes.
    Shape("s_null_groups", """
{{ config(materialized='batch_refresh') }}
select c.region, p.category, count(*) as n, sum(o.amount) as amount
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on c.id = o.customer_id
join {{ source('raw', 'products') }} p on p.id = o.product_id
where c.tier <> 'blocked' group by c.region, p.category
""", 10),
    # GROUP BY ALL: the key is inferred from the groups it stands for.
    Shape("s_distinct_buyers", """
{{ config(materialized='batch_refresh') }}
select coalesce(c.region, 'none') as region, count(distinct o.customer_id) as buyers,
       max(o.amount) as top
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on o.customer_id = c.id
group by all
""", 4),
    # Windows partitioned by the key: the partitions the change rows touch are recomputed.
    # No unique_key: the first row per partition (`where rn = 1` over row_number) proves
    # customer_id one (keyinfer.py); recomputed in full before session 67.
    Shape("s_dedup_latest", """
{{ config(materialized='batch_refresh') }}
select customer_id, id as order_id, amount
from (select *, row_number() over (partition by customer_id order by amount desc, id desc) as rn
      from {{ source('raw', 'orders') }} where status <> 'cancelled') d
where rn = 1
""", 2),
    # No key of its own: the one s_dedup_latest's query proves (customer_id), which that
    # model's commits record, passes through the filter and projection (and on through
    # s_dedup_chain). Recomputed in full before session 68 (an upstream's inferred key was
    # not known downstream).
    Shape("s_dedup_downstream", """
{{ config(materialized='batch_refresh') }}
select customer_id, order_id, amount * 2 as amount2
from {{ ref('s_dedup_latest') }} where amount > 10
""", 2),
    Shape("s_dedup_chain", """
{{ config(materialized='batch_refresh') }}
select customer_id, amount2, amount2 > 100 as big from {{ ref('s_dedup_downstream') }}
""", 2),
    # A dedup written with QUALIFY over a join (Spark 4.2 accepts it): the window reads the
    # joined rows, so it is split from the join (winsplit.split_joined_windows) and a
    # customer's change recomputes the partitions of every product its orders fall in.
    # Recomputed in full before session 59 (a window over a join).
    Shape("s_qualify_latest", """
{{ config(materialized='batch_refresh', unique_key='product_id') }}
select o.product_id, o.id as order_id, o.amount, c.region
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on c.id = o.customer_id
where c.tier <> 'blocked'
qualify row_number() over (partition by o.product_id order by o.amount desc nulls last, o.id desc) = 1
""", 12),
    # Windows beside `select *` over a join USING its partition key (dbt-labs'
    # attribution-playbook writes sessions this way): the star stays inside the split, the
    # windows read its columns by name. Recomputed in full before session 66.
    Shape("s_star_join_window", """
{{ config(materialized='batch_refresh', unique_key='order_id') }}
with o as (select id as order_id, customer_id, amount from {{ source('raw', 'orders') }}),
     c as (select id as customer_id, region, tier from {{ source('raw', 'customers') }})
select *, count(*) over (partition by customer_id) as n_orders,
       row_number() over (partition by customer_id order by o.amount desc nulls last,
                          o.order_id) as rank_in_customer
from o left join c using (customer_id)
where c.tier <> 'blocked'
""", 12),
    # Two aggregates joined USING their shared group key, no unique_key: the key is inferred
    # from both sides' groups (keyinfer.py). Recomputed in full before session 66.
    Shape("s_full_join_aggs", """
{{ config(materialized='batch_refresh') }}
with a as (select status, count(*) as n from {{ source('raw', 'orders') }} group by status),
     b as (select o.status, sum(p.amount) as paid, count(*) as n_payments
           from {{ source('raw', 'payments') }} p join {{ source('raw', 'orders') }} o
             on o.id = p.order_id
           group by o.status)
select * from a full outer join b using (status)
""", 4),
    # A running total and the previous order per customer, keyed by order: every row of a
    # touched partition is read whole, at the old and the new versions.
    Shape("s_running_total", """
{{ config(materialized='batch_refresh', unique_key=['customer_id', 'id']) }}
select customer_id, id, sum(amount) over (partition by customer_id order by id) as running,
       lag(amount) over (partition by customer_id order by id) as prev
from {{ source('raw', 'orders') }}
""", 12),
    # Maintained by delta aggregation (aggdelta.py, aggregate_upkeep='delta'): counts and sums
    # from the signed change rows and the sidecar's state, min/max recomputed only for groups
    # whose extreme left; an aggregate's FILTER (WHERE ...) becomes part of its argument.
    Shape("s_agg_delta", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select customer_id, count(*) as n, count(amount) as n_amount, sum(amount) as total,
       avg(amount) as mean, min(amount) as lo, max(amount) as hi,
       count(amount) filter (where customer_id > 20) as n_late,
       sum(amount) filter (where status = 'paid') as paid,
       count(*) filter (where status = 'new') as n_new
from {{ source('raw', 'orders') }} where status <> 'cancelled'
group by customer_id
""", 2, "aggregate"),
    Shape("s_avg_having", """
{{ config(materialized='batch_refresh', unique_key='product_id', aggregate_upkeep='delta') }}
select product_id, avg(amount) as mean, sum(amount) * 2 as double_total
from {{ source('raw', 'orders') }}
group by product_id
having count(*) > 16
""", 2, "aggregate"),
    Shape("s_global", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select count(*) as n, sum(amount) as total, min(amount) as lo, max(amount) as hi
from {{ source('raw', 'orders') }}
""", 1, "aggregate"),
    # A delta aggregate over a 3-way inner join: the input's signed change rows come from its
    # delta join (any of the three may move), min/max recomputed over the pinned join only for
    # groups whose extreme left. A product's category change moves its orders' groups in
    # every region (and a customer's region change in every category): up to 2 x 5 groups.
    Shape("s_join_three_agg", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select coalesce(c.region, '-') as region, coalesce(p.category, '-') as category,
       count(*) as n, sum(o.amount) as total, min(o.amount) as lo, max(p.price) as top_price
from {{ source('raw', 'orders') }} o
join {{ source('raw', 'customers') }} c on o.customer_id = c.id
join {{ source('raw', 'products') }} p on o.product_id = p.id
group by coalesce(c.region, '-'), coalesce(p.category, '-')
""", 10, "aggregate"),
    # A delta aggregate over a left join (customers without orders count as one row with
    # NULL order columns): orders' changes reach it by transition term.
    Shape("s_left_agg_delta", """
{{ config(materialized='batch_refresh', unique_key='tier', aggregate_upkeep='delta') }}
select c.tier, count(*) as n, count(o.id) as n_orders, sum(o.amount) as amount,
       max(o.amount) as top
from {{ source('raw', 'customers') }} c
left join {{ source('raw', 'orders') }} o on o.customer_id = c.id
group by c.tier
""", 2, "aggregate"),
    # Intermediate aggregates (aggregate_upkeep='delta'): the GROUP BY subquery kept in a
    # sidecar by delta, the rest recomputed over its groups: a rank over every group, merged
    # as a difference; an aggregate of the aggregate over a left join (TPC-H Q13's shape),
    # only its outer groups that a touched customer's count leaves or enters (at most 4 per
    # changed row: an order moved between two customers).
    Shape("s_rank_over_totals", """
{{ config(materialized='batch_refresh', unique_key='customer_id', aggregate_upkeep='delta') }}
with totals as (
  select customer_id, count(*) as n, sum(amount) as total, max(amount) as top
  from {{ source('raw', 'orders') }} where status <> 'cancelled'
  group by customer_id)
select customer_id, n, total, top,
       rank() over (order by total desc nulls last, customer_id) as rnk,
       ntile(4) over (order by n, customer_id) as quartile
from totals
""", 60, "intermediate"),
    Shape("s_agg_of_agg", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select n_orders, count(*) as customers, sum(spent) as spent
from (select c.id, count(o.id) as n_orders, coalesce(sum(o.amount), 0) as spent
      from {{ source('raw', 'customers') }} c
      left join {{ source('raw', 'orders') }} o on o.customer_id = c.id and o.status <> 'cancelled'
      group by c.id) per_customer
group by n_orders
""", 4, "intermediate"),
    # The same, written as a report usually is: the windows in the grouped SELECT itself
    # (split into the aggregate and the windows over it, winsplit.py), over a join.
    Shape("s_rank_same_select", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select o.customer_id, c.region, count(*) filter (where o.status = 'paid') as paid,
       sum(o.amount) as total,
       rank() over (partition by c.region order by sum(o.amount) desc nulls last, o.customer_id) as rnk,
       sum(o.amount) * 100.0 / sum(sum(o.amount)) over () as share
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on c.id = o.customer_id
where o.status <> 'cancelled' and c.region is not null
group by 1, c.region
having count(*) > 1
""", 60, "intermediate"),
    # Windows partitioned by a group key: only the partitions (customers) the change touches
    # are recomputed and merged by key (the fanout bounds it: the whole model has ~150 rows).
    Shape("s_rank_in_partition", """
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}
select o.customer_id, o.product_id, count(*) as n, sum(o.amount) as total,
       rank() over (partition by o.customer_id order by sum(o.amount) desc nulls last,
                    o.product_id) as rnk,
       sum(o.amount) * 100 / nullif(sum(sum(o.amount)) over (partition by o.customer_id), 0)
         as share
from {{ source('raw', 'orders') }} o
where o.customer_id is not null and o.product_id is not null
group by o.customer_id, o.product_id
""", 30, "intermediate"),
    # The same without the opt-in (and as GROUP BY ALL): its split form replays by affected
    # keys (partitions).
    Shape("s_rank_in_partition_keys", """
{{ config(materialized='batch_refresh') }}
select o.customer_id, o.product_id, count(*) as n, sum(o.amount) as total,
       rank() over (partition by o.customer_id order by sum(o.amount) desc nulls last,
                    o.product_id) as rnk
from {{ source('raw', 'orders') }} o
where o.customer_id is not null and o.product_id is not null
group by all
""", 30, "snapshot"),
    Shape("s_downstream", """
{{ config(materialized='batch_refresh', unique_key='customer_id') }}
select t.customer_id, t.total, t.n, c.region
from {{ ref('s_group_all_aggs') }} t left join {{ source('raw', 'customers') }} c
  on c.id = t.customer_id
""", 2),
]

SHAPES = [s for s in SHAPES if not ONLY or s.name in ONLY]

# Not part of the catalogue: tests declare a key the output repeats (a customer's orders), so
# the model refreshes without a key, in full, and does not fail.
TESTED_DUPES = Shape("f_tested_dupes", """
{{ config(materialized='batch_refresh') }}
select o.customer_id as id, o.amount
from {{ source('raw', 'orders') }} o join {{ source('raw', 'customers') }} c on c.id = o.customer_id
""", 0)


def keys_yml(names: Sequence[str]) -> str:
    """unique and not_null on `id` of each model named."""
    models = "".join(f"\n  - name: {n}\n    columns:\n      - name: id\n"
                     f"        data_tests: [unique, not_null]" for n in names)
    return f"version: 2\nmodels:{models}\n"

# Not part of the catalogue: `auto` must fall back to a full recompute, and say why.
FALLBACK = Shape("f_window", """
{{ config(materialized='batch_refresh', unique_key='id') }}
select id, customer_id, row_number() over (order by amount, id) as rank
from {{ source('raw', 'orders') }}
""", 0)

TABLES: Dict[str, Sequence[tuple[str, str]]] = {
    "customers": (("id", "int"), ("region", "string"), ("name", "string"), ("tier", "string")),
    "products": (("id", "int"), ("category", "string"), ("price", "int")),
    "orders": (("id", "int"), ("customer_id", "int"), ("product_id", "int"), ("amount", "int"),
               ("status", "string")),
    "payments": (("id", "int"), ("order_id", "int"), ("amount", "int"), ("method", "string")),
}
INITIAL = {
    # customer 7 has no region from the start: s_null_groups' NULL group is there in every run
    "customers": "select cast(id as int), if(id = 7, null, element_at(array('eu', 'us', 'apac'), cast(id % 3 + 1 as int))), "
                 "concat('c', id), if(id % 10 = 0, 'blocked', 'std') from range(1, 41)",
    "products": "select cast(id as int), concat('cat', id % 3), cast(id * 3 as int) from range(1, 11)",
    # some orders point at customers (41-45) and products (11, 12) that do not exist
    "orders": "select cast(id as int), cast((id * 7) % 45 + 1 as int), cast(id % 12 + 1 as int), "
              "cast((id * 13) % 100 as int), element_at(array('new', 'paid', 'shipped', 'cancelled'), "
              "cast(id % 4 + 1 as int)) from range(1, 201)",
    "payments": "select cast(id as int), cast((id * 11) % 210 + 1 as int), cast((id * 17) % 50 as int), "
                "element_at(array('card', 'bank', 'void'), cast(id % 3 + 1 as int)) from range(1, 301)",
}


def create_tables(project: Any) -> None:
    """The four upstreams, Delta with Change Data Feed, holding their INITIAL rows."""
    for table, columns in TABLES.items():
        cols = ", ".join(f"{c} {k}" for c, k in columns)
        project.run_sql(f"create table {project.test_schema}.{table} ({cols}) using delta "
                        f"tblproperties (delta.enableChangeDataFeed = true)")
        project.run_sql(f"insert into {project.test_schema}.{table} {INITIAL[table]}")


def sql_value(value: Any, kind: str) -> str:
    if value is None:
        return f"cast(null as {kind})"
    return f"'{value}'" if kind == "string" else str(int(value))


class Changes:
    """Random change batches, one MERGE per changed table (one Delta commit each)."""

    def __init__(self, project: Any, seed: int) -> None:
        self.project = project
        self.rng = random.Random(seed)
        self.step = 0

    def ids(self, table: str) -> List[int]:
        return [int(r["id"]) for r in rows(self.project, f"select id from {self.rel(table)}")]

    def rel(self, table: str) -> str:
        return f"{self.project.test_schema}.{table}"

    def row(self, table: str, key: int) -> Dict[str, Any]:
        r = self.rng
        maybe_null = lambda v: None if r.random() < 0.1 else v  # noqa: E731 - NULLs outside unique keys
        if table == "customers":
            return {"id": key, "region": maybe_null(r.choice(["eu", "us", "apac", "latam"])),
                    "name": maybe_null(f"c{key}x{self.step}"), "tier": r.choice(["std", "std", "blocked"])}
        if table == "products":
            return {"id": key, "category": maybe_null(r.choice(["cat0", "cat1", "cat2", "cat3"])),
                    "price": r.randint(1, 60)}
        if table == "orders":
            return {"id": key, "customer_id": r.randint(1, 48), "product_id": r.randint(1, 12),
                    "amount": maybe_null(r.randint(0, 120)),
                    "status": r.choice(["new", "paid", "shipped", "cancelled"])}
        # NULL join keys: a payment of no order joins nothing (every shape keys on other columns)
        return {"id": key, "order_id": maybe_null(r.randint(1, 215)), "amount": maybe_null(r.randint(0, 60)),
                "method": r.choice(["card", "bank", "void"])}

    def apply(self) -> Dict[str, int]:
        """One batch over a random subset of the tables; logical changes per table."""
        self.step += 1
        changed = {}
        # The first batch changes every table, so every shape replays at least once even in
        # a one-step CI run; later batches change a random subset.
        tables = list(TABLES) if self.step == 1 else (
            [t for t in TABLES if self.rng.random() < 0.6] or [self.rng.choice(list(TABLES))])
        for table in tables:
            existing = self.ids(table)
            ops: Dict[int, tuple[str, Dict[str, Any]]] = {}
            for key in self.rng.sample(existing, min(len(existing), self.rng.randint(2, 6))):
                ops[key] = ("U", self.row(table, key))
            for key in self.rng.sample(existing, min(len(existing), self.rng.randint(1, 3))):
                ops[key] = ("D", {"id": key})
            top = max(existing or [0])
            for key in range(top + 1, top + 1 + self.rng.randint(1, 4)):
                ops[key] = ("I", self.row(table, key))
            if table == "orders":
                # a group disappears (all orders of one customer deleted) and a new one appears
                victim = self.rng.randint(1, 45)
                for r in rows(self.project, f"select id from {self.rel(table)} where customer_id = {victim}"):
                    ops[int(r["id"])] = ("D", {"id": int(r["id"])})
                fresh = {**self.row(table, top + 10), "customer_id": 100 + self.step}
                ops[top + 10] = ("I", fresh)
                # the extremes leave: the row holding the largest and the smallest amount
                for pick in ("desc", "asc"):
                    for r in rows(self.project, f"select id from {self.rel(table)} where amount "
                                                f"is not null order by amount {pick}, id limit 1"):
                        ops[int(r["id"])] = ("D", {"id": int(r["id"])})
            self.merge(table, ops)
            changed[table] = len(ops)
        return changed

    def merge(self, table: str, ops: Dict[int, tuple[str, Dict[str, Any]]]) -> None:
        columns = TABLES[table]
        values = ", ".join(
            "(" + ", ".join([f"'{op}'"] + [sql_value(data.get(c), k) for c, k in columns]) + ")"
            for op, data in ops.values()
        )
        names = ", ".join(c for c, _ in columns)
        sets = ", ".join(f"{c} = s.{c}" for c, _ in columns[1:])
        self.project.run_sql(
            f"merge into {self.rel(table)} t using (select * from values {values} as s(op, {names})) s "
            f"on t.id = s.id when matched and s.op = 'D' then delete "
            f"when matched and s.op = 'U' then update set {sets} "
            f"when not matched and s.op = 'I' then insert ({names}) values "
            f"({', '.join('s.' + c for c, _ in columns)})"
        )


def change_rows(project: Any, versions_from: Dict[str, int], versions_to: Dict[str, int]) -> int:
    total = 0
    for upstream, end in versions_to.items():
        start = versions_from.get(upstream, end) + 1
        if start <= end:
            total += int(rows(project, f"select count(*) as n from table_changes('{upstream}', {start}, {end}) "
                                       f"where _change_type <> 'update_preimage'")[0]["n"])
    return total


class TestShapeCatalogue:
    @pytest.fixture(scope="class")
    def models(self):
        tested = "\n        columns:\n          - name: id\n            data_tests: [unique, not_null]"
        sources = sources_yml(*TABLES)
        for table in ("customers", "products", "payments"):
            sources = sources.replace(f"- name: {table}", f"- name: {table}{tested}")
        files = {"sources.yml": sources}
        files.update({f"{s.name}.sql": s.sql for s in SHAPES + [FALLBACK, TESTED_DUPES]})
        files["tested.yml"] = keys_yml(
            [s.name for s in SHAPES if s.name == "s_tested_key"] + [TESTED_DUPES.name])
        return files

    def test_random_changes_replay_exactly(self, project):
        create_tables(project)
        first = {r.node.name: r.adapter_response for r in run_dbt(["run"]).results}
        assert {n: a["action"] for n, a in first.items()} == {
            s.name: "backfill" for s in SHAPES + [FALLBACK, TESTED_DUPES]}
        for shape in SHAPES + [FALLBACK, TESTED_DUPES]:
            assert_contract(project, shape.name)

        print(f"differential: seed {SEED} (reproduce with BATCH_REFRESH_DIFF_SEED={SEED})")
        changes = Changes(project, SEED)
        checked = replays = 0
        for _ in range(STEPS):
            changes.apply()
            results = {r.node.name: r.adapter_response for r in run_dbt(["run"]).results}
            for shape in SHAPES:
                response = results[shape.name]
                assert response["action"] in ("replay", "noop"), (shape.name, response)
                if response["action"] == "replay":
                    replays += 1
                    assert response["mode"] == "incremental" and not response.get("fallback_reason")
                    assert not shape.staged_from or response["staged_from"] == shape.staged_from, (
                        shape.name, response)
                    moved = change_rows(project, response["versions_from"], response["versions_to"])
                    assert 0 <= response["staged_rows"] <= shape.fanout * moved, (
                        shape.name, response["staged_rows"], moved)
                    print(f"differential: {shape.name} staged {response['staged_rows']} rows "
                          f"for {moved} changed upstream rows (from {response['staged_from']})")
                assert_contract(project, shape.name)
                checked += 1
            fallback = results[FALLBACK.name]
            if fallback["action"] != "noop":
                assert fallback["action"] == "full" and "window function" in fallback.get("fallback_reason", "")
            assert_contract(project, FALLBACK.name)
            dupes = results[TESTED_DUPES.name]
            if dupes["action"] != "noop":
                assert dupes["action"] == "full" and "its tests declare (id)" in dupes.get(
                    "fallback_reason", ""), dupes
            assert_contract(project, TESTED_DUPES.name)
        print(f"differential: {len(SHAPES)} shapes, {STEPS} steps, {replays} replays, "
              f"{checked} contract checks, seed {SEED}")
        assert replays >= len(SHAPES), "too few replays to exercise the shapes"

        names = {s.name for s in SHAPES}
        if {"s_payments_by_customer", "s_dedup_latest"} <= names:
            _, explained = run_dbt_and_capture(
                ["run-operation", "batch_refresh_explain", "--args", "{model: s_payments_by_customer}"])
            print(explained[explained.find("batch_refresh explain"):])
            assert "incremental (affected-key replay" in explained
            assert "customer_id (inferred from the query)" in explained
            assert "payments (as p): keys from its change rows joined to" in explained
            assert "pushdown" in explained and "orders.customer_id" in explained
            assert "[affected-key recompute] " in explained
            _, explained = run_dbt_and_capture(
                ["run-operation", "batch_refresh_explain", "--args", "{model: s_dedup_latest}"])
            assert "[partition recompute] " in explained and "PARTITION BY customer_id" in explained
        for model, rule in (("s_agg_delta", "[delta aggregate] "), ("s_global", "[delta aggregate] "),
                            ("s_join_three_agg", "[delta aggregate] "),
                            ("s_payments_by_customer", "delta aggregate: the model qualifies"),
                            ("s_join_four", "no delta join: the model aggregates"),
                            ("s_join_inner", "[delta join] "),
                            ("s_join_left", "customers (as c): on the NULL-supplying side"),
                            ("s_left_agg_delta", "[delta aggregate] "),
                            ("s_avg_having", "[delta aggregate] "),
                            ("s_running_total", "[partition recompute] "),
                            ("s_no_orders", "orders (as o): on the NULL-supplying side"),
                            ("s_join_full", "orders (as o): on the NULL-supplying side"),
                            ("s_qualify_latest", "[partition recompute] "),
                            ("s_right_join_on_aggregate", "condition lost an aggregated value"),
                            ("s_tested_key", "unique_key: id (declared by the model's tests)"),
                            ("s_upstream_key", "unique_key: id (inferred from the query and the keys its upstreams'"),
                            ("s_pair_key", "unique_key: payment_id, product_id (inferred from the query and the keys its upstreams'"),
                            ("s_dedup_chain", "unique_key: customer_id (inferred from the query and the keys of its upstream batch_refresh models ")):
            if model not in names:
                continue
            _, explained = run_dbt_and_capture(
                ["run-operation", "batch_refresh_explain", "--args", f"{{model: {model}}}"])
            assert rule in explained, (model, explained)
        # a few keys recomputed (affected keys, a delta aggregate's groups, partitions) on a
        # single-column key are replaced by REPLACE WHERE: WRITE commits only (an empty
        # refresh's marker is a WRITE too), never a MERGE
        for model in ("s_payments_by_customer", "s_agg_delta", "s_dedup_latest",
                      "s_qualify_latest"):
            if model in names:
                ops = [r["operation"] for r in rows(
                    project, f"describe history {project.test_schema}.{model}")]
                assert "MERGE" not in ops and "WRITE" in ops, (model, ops)
        _, explained = run_dbt_and_capture(
            ["run-operation", "batch_refresh_explain", "--args", "{model: f_window}"])
        assert "full recompute" in explained and "window function" in explained
