-- TPC-H Q8, without its final ORDER BY (answers/q08_answer.sql)
{{ config(materialized='batch_refresh') }}

select o_year,
       sum(case when nation = 'BRAZIL' then volume else 0 end) / sum(volume) as mkt_share
from (
  select extract(year from o_orderdate) as o_year,
         l_extendedprice * (1 - l_discount) as volume,
         n2.n_name as nation
  from {{ source('tpch', 'part') }}, {{ source('tpch', 'supplier') }},
       {{ source('tpch', 'lineitem') }}, {{ source('tpch', 'orders') }},
       {{ source('tpch', 'customer') }}, {{ source('tpch', 'nation') }} n1,
       {{ source('tpch', 'nation') }} n2, {{ source('tpch', 'region') }}
  where p_partkey = l_partkey
    and s_suppkey = l_suppkey
    and l_orderkey = o_orderkey
    and o_custkey = c_custkey
    and c_nationkey = n1.n_nationkey
    and n1.n_regionkey = r_regionkey
    and r_name = 'AMERICA'
    and s_nationkey = n2.n_nationkey
    and o_orderdate between date '1995-01-01' and date '1996-12-31'
    and p_type = 'ECONOMY ANODIZED STEEL'
) as all_nations
group by o_year
