-- TPC-H Q20 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q20') }}
order by s_name
