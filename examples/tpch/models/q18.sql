-- TPC-H Q18, without its final ORDER BY / LIMIT (answers/q18_answer.sql)
{{ config(materialized='batch_refresh') }}

select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) as sum_qty
from {{ source('tpch', 'customer') }}, {{ source('tpch', 'orders') }},
     {{ source('tpch', 'lineitem') }}
where o_orderkey in (
    select l_orderkey from {{ source('tpch', 'lineitem') }}
    group by l_orderkey having sum(l_quantity) > 300)
  and c_custkey = o_custkey
  and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
