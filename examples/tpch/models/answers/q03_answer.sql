-- TPC-H Q3 as the spec prints it: the maintained result, ordered and cut
{{ config(materialized='view') }}
select * from {{ ref('q03') }}
order by revenue desc, o_orderdate
limit 10
