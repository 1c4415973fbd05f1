-- TPC-H Q21 as the spec prints it: the maintained result, ordered and cut
{{ config(materialized='view') }}
select * from {{ ref('q21') }}
order by numwait desc, s_name
limit 100
