-- TPC-H Q10, without its final ORDER BY / LIMIT (answers/q10_answer.sql)
{{ config(materialized='batch_refresh') }}

select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal,
       n_name, c_address, c_phone, c_comment
from {{ source('tpch', 'customer') }}, {{ source('tpch', 'orders') }},
     {{ source('tpch', 'lineitem') }}, {{ source('tpch', 'nation') }}
where c_custkey = o_custkey
  and l_orderkey = o_orderkey
  and o_orderdate >= date '1993-10-01'
  and o_orderdate < date '1993-10-01' + interval '3' month
  and l_returnflag = 'R'
  and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
