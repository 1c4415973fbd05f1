-- TPC-H Q1, without its final ORDER BY (answers/q01_answer.sql)
{{ config(materialized='batch_refresh', aggregate_upkeep='delta') }}

select l_returnflag, l_linestatus,
       sum(l_quantity) as sum_qty,
       sum(l_extendedprice) as sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
       avg(l_quantity) as avg_qty,
       avg(l_extendedprice) as avg_price,
       avg(l_discount) as avg_disc,
       count(*) as count_order
from {{ source('tpch', 'lineitem') }}
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
