-- TPC-H Q12 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q12') }}
order by l_shipmode
