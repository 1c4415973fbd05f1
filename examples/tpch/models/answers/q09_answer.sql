-- TPC-H Q9 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q09') }}
order by nation, o_year desc
