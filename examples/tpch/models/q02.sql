-- TPC-H Q2, without its final ORDER BY / LIMIT (answers/q02_answer.sql)
{{ config(materialized='batch_refresh', unique_key=['p_partkey', 's_name']) }}

select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from {{ source('tpch', 'part') }}, {{ source('tpch', 'supplier') }},
     {{ source('tpch', 'partsupp') }}, {{ source('tpch', 'nation') }},
     {{ source('tpch', 'region') }}
where p_partkey = ps_partkey
  and s_suppkey = ps_suppkey
  and p_size = 15
  and p_type like '%BRASS'
  and s_nationkey = n_nationkey
  and n_regionkey = r_regionkey
  and r_name = 'EUROPE'
  and ps_supplycost = (
    select min(ps_supplycost)
    from {{ source('tpch', 'partsupp') }}, {{ source('tpch', 'supplier') }},
         {{ source('tpch', 'nation') }}, {{ source('tpch', 'region') }}
    where p_partkey = ps_partkey
      and s_suppkey = ps_suppkey
      and s_nationkey = n_nationkey
      and n_regionkey = r_regionkey
      and r_name = 'EUROPE')
