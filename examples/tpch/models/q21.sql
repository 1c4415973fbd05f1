-- TPC-H Q21, without its final ORDER BY / LIMIT (answers/q21_answer.sql)
{{ config(materialized='batch_refresh') }}

select s_name, count(*) as numwait
from {{ source('tpch', 'supplier') }}, {{ source('tpch', 'lineitem') }} l1,
     {{ source('tpch', 'orders') }}, {{ source('tpch', 'nation') }}
where s_suppkey = l1.l_suppkey
  and o_orderkey = l1.l_orderkey
  and o_orderstatus = 'F'
  and l1.l_receiptdate > l1.l_commitdate
  and exists (
    select * from {{ source('tpch', 'lineitem') }} l2
    where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey)
  and not exists (
    select * from {{ source('tpch', 'lineitem') }} l3
    where l3.l_orderkey = l1.l_orderkey
      and l3.l_suppkey <> l1.l_suppkey
      and l3.l_receiptdate > l3.l_commitdate)
  and s_nationkey = n_nationkey
  and n_name = 'SAUDI ARABIA'
group by s_name
