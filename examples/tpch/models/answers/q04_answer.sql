-- TPC-H Q4 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q04') }}
order by o_orderpriority
