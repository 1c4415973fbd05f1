-- TPC-H Q13 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q13') }}
order by custdist desc, c_count desc
