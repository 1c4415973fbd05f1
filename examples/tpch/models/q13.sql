-- TPC-H Q13, without its final ORDER BY (answers/q13_answer.sql); the join's columns carry
-- their table's alias, which the delta join of the intermediate aggregate needs to tell the
-- sides of the ON apart
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}

select c_count, count(*) as custdist
from (
  select c.c_custkey, count(o.o_orderkey) as c_count
  from {{ source('tpch', 'customer') }} c
  left outer join {{ source('tpch', 'orders') }} o
    on c.c_custkey = o.o_custkey and o.o_comment not like '%special%requests%'
  group by c.c_custkey
) as c_orders
group by c_count
