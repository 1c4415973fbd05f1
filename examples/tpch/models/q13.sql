-- TPC-H Q13, without its final ORDER BY (answers/q13_answer.sql)
{{ config(materialized='batch_refresh') }}

select c_count, count(*) as custdist
from (
  select c_custkey, count(o_orderkey) as c_count
  from {{ source('tpch', 'customer') }}
  left outer join {{ source('tpch', 'orders') }}
    on c_custkey = o_custkey and o_comment not like '%special%requests%'
  group by c_custkey
) as c_orders
group by c_count
