-- TPC-H Q15 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q15') }}
order by s_suppkey
