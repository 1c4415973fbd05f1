-- TPC-H Q4, without its final ORDER BY (answers/q04_answer.sql)
{{ config(materialized='batch_refresh') }}

select o_orderpriority, count(*) as order_count
from {{ source('tpch', 'orders') }}
where o_orderdate >= date '1993-07-01'
  and o_orderdate < date '1993-07-01' + interval '3' month
  and exists (
    select * from {{ source('tpch', 'lineitem') }}
    where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority
