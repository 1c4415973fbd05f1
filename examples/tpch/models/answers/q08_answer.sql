-- TPC-H Q8 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q08') }}
order by o_year
