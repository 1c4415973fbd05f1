-- TPC-H Q5 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q05') }}
order by revenue desc
