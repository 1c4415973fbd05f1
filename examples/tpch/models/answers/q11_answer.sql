-- TPC-H Q11 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q11') }}
order by value desc
